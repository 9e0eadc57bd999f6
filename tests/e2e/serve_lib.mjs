// serve_lib.mjs - helpers for the `hyinfer serve` end-to-end tests: pick the model, start a server
// on a free loopback port, wait for /health, read /metrics, stop it (SIGTERM, must exit 0).
import { spawn } from "node:child_process";
import { existsSync, readFileSync, mkdirSync, openSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const root = process.env.HYINFER_ROOT || path.resolve(here, "..", "..");
export const testdata = path.join(root, "tests", "data");
export const bin = process.env.HYINFER_BIN || path.join(root, "build", "hyinfer");

// models/hy3-tiny (trained, real Hy3 tokenizer) when the repo has it, else the random-weight
// hy3-golden-b checkpoint (480-token Hy3-style tokenizer with the control tokens).
export function pickModel() {
  const tiny = path.join(root, "models", "hy3-tiny");
  if (existsSync(path.join(tiny, "config.json")) && existsSync(path.join(tiny, "model.safetensors")))
    return { dir: tiny, trained: true };
  const golden = path.join(testdata, "hy3-golden-llamacpp", "hy3-golden-b");
  if (existsSync(path.join(golden, "config.json"))) return { dir: golden, trained: false };
  return null;
}

export function skip(msg) {
  console.log(`skip: ${msg}`);
  process.exit(77);
}

export async function loadOpenAI() {
  const p = path.join(root, "tests", "js", "node_modules", "openai", "index.mjs");
  if (!existsSync(p)) skip(`${p} not installed (npm install in tests/js)`);
  return (await import(pathToFileURL(p).href)).default;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

const live = new Set();
function killAll() {
  for (const p of live) {
    try { p.kill("SIGKILL"); } catch { /* gone */ }
  }
}
process.on("exit", killAll);
process.on("SIGINT", () => { killAll(); process.exit(130); });
process.on("SIGTERM", () => { killAll(); process.exit(143); });

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A raw TCP connection to 127.0.0.1:port (from localAddress) that records what it received and when
// it closed (c.data, c.closed, c.closedAt, c.err; c.t0 = when it connected); resolves once connected,
// or closed / failed.
export function openRaw(port, localAddress = "127.0.0.1") {
  return new Promise((resolve) => {
    const c = { sock: null, closed: false, closedAt: 0, err: null, data: "", t0: Date.now() };
    const sock = net.connect({ host: "127.0.0.1", port, localAddress });
    c.sock = sock;
    sock.setEncoding("latin1");
    sock.on("data", (d) => { c.data += d; });
    sock.on("error", (e) => { c.err = e.code || String(e); });
    sock.on("close", () => { c.closed = true; c.closedAt = Date.now(); resolve(c); });
    sock.on("connect", () => { c.t0 = Date.now(); resolve(c); });
  });
}

// Starts `hyinfer serve MODEL --port P --dtype float32 ...extra`; resolves once /health is 200.
export async function startServer(model, extra = [], tag = "serve") {
  const port = await freePort();
  const logDir = path.join(root, "build", "e2e-serve");
  mkdirSync(logDir, { recursive: true });
  const logPath = path.join(logDir, `${tag}-${port}.log`);
  const fd = openSync(logPath, "w");
  const args = ["serve", model, "--port", String(port), "--dtype", "float32", "--served-model-name", "hy3",
                "--threads", "2", ...extra];
  const proc = spawn(bin, args, { stdio: ["ignore", fd, fd] });
  live.add(proc);
  let exited = null;
  proc.on("exit", (code, sig) => { exited = { code, sig }; live.delete(proc); });
  const base = `http://127.0.0.1:${port}`;
  const t0 = Date.now();
  for (;;) {
    if (exited) throw new Error(`server exited early (${JSON.stringify(exited)}):\n${readFileSync(logPath, "utf8")}`);
    try {
      const r = await fetch(`${base}/health`);
      if (r.status === 200) break;
    } catch { /* not listening yet */ }
    if (Date.now() - t0 > 60000) throw new Error(`server did not become healthy:\n${readFileSync(logPath, "utf8")}`);
    await sleep(50);
  }
  return {
    port, base, proc, logPath,
    pid: proc.pid,
    async stop() {
      if (exited) return exited;
      const done = new Promise((r) => proc.on("exit", (code, sig) => r({ code, sig })));
      proc.kill("SIGTERM");
      const to = setTimeout(() => proc.kill("SIGKILL"), 30000);
      const res = await done;
      clearTimeout(to);
      if (res.code !== 0) throw new Error(`server did not exit 0 on SIGTERM: ${JSON.stringify(res)}`);
      return res;
    },
  };
}

// /metrics as { "name{labels}": value } plus { name: value } for series whose only label is model_name.
export async function metrics(base) {
  const txt = await (await fetch(`${base}/metrics`)).text();
  const m = {};
  for (const line of txt.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    const key = line.slice(0, i), val = Number(line.slice(i + 1));
    m[key] = val;
    const short = key.replace(/\{model_name="[^"]*"\}$/, "");
    if (short !== key) m[short] = val;
  }
  return m;
}

export function rssBytes(pid) {
  const s = readFileSync(`/proc/${pid}/status`, "utf8");
  const mm = s.match(/VmRSS:\s+(\d+) kB/);
  return mm ? Number(mm[1]) * 1024 : 0;
}

let failures = 0;
export function check(cond, msg) {
  if (cond) {
    console.log(`ok   ${msg}`);
  } else {
    console.log(`FAIL ${msg}`);
    failures++;
  }
}
export function eq(a, b, msg) {
  const ok = JSON.stringify(a) === JSON.stringify(b);
  check(ok, msg);
  if (!ok) console.log(`     got      ${JSON.stringify(a)}\n     expected ${JSON.stringify(b)}`);
}
export function finish() {
  console.log(failures ? `${failures} check(s) failed` : "all checks passed");
  process.exit(failures ? 1 : 0);
}

// Reads an OpenAI stream into {text, reasoning, finish, usage, chunks, usageChunks}.
export async function collectStream(stream, kind = "chat") {
  const r = { text: "", reasoning: "", finish: [], usage: null, chunks: 0, usageChunks: 0, perChoice: {} };
  for await (const ch of stream) {
    r.chunks++;
    if (ch.usage) { r.usage = ch.usage; r.usageChunks++; }
    if (ch.usage && ch.choices.length !== 0) r.badUsageChunk = true;
    for (const c of ch.choices) {
      const pc = (r.perChoice[c.index] ||= { text: "", reasoning: "", finish: null });
      const t = kind === "chat" ? c.delta?.content : c.text;
      if (t) pc.text += t;
      if (kind === "chat" && c.delta?.reasoning_content) pc.reasoning += c.delta.reasoning_content;
      if (c.finish_reason) pc.finish = c.finish_reason;
    }
  }
  const p0 = r.perChoice[0] || { text: "", reasoning: "", finish: null };
  r.text = p0.text;
  r.reasoning = p0.reasoning;
  r.finish = p0.finish;
  return r;
}
