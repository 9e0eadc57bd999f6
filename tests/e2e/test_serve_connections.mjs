// Connection handling and shutdown of `hyinfer serve` (raw sockets, no openai client):
//   - 2,000 idle connections (from 127.0.0.2..5) plus 520 slowloris connections (a request header
//     that grows by one byte a second), inside their --http-timeout 60 window, stay open while GET
//     /health and a small chat completion from 127.0.0.1 answer within 2 s, and an old idle
//     connection still serves a request (test_serve_slowloris.mjs: what happens past the window);
//   - --max-connections-per-ip 20: the 21st connection from one address is closed at once while
//     the 20 work; --http-timeout 2 closes an idle connection after about 2 s;
//   - --max-connections 40: of 100 connections at most 40 stay open, the rest are closed at once;
//   - SIGTERM with 16 long streams (8 running, 8 queued) and --shutdown-timeout 2: queued streams
//     end at once with an error chunk and [DONE], running ones finish or end the same way at the
//     timeout, new requests on open connections and /health get 503 at once, new connections are
//     refused, and the process exits within timeout + 1 s; a second SIGTERM exits at once;
//   - completions logprobs.text_offset counts characters (code points) of the text before each
//     token, the same with a stop string held back as without (hy3-tiny's JULIET prompt and the
//     CJK/emoji checkpoint of utf8_model.py).
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { check, eq, finish, metrics, openRaw as open, pickModel, root, sleep, startServer } from "./serve_lib.mjs";

const model = pickModel();
if (!model) {
  console.log("FAIL: no model (models/hy3-tiny or tests/data/hy3-golden-llamacpp/hy3-golden-b)");
  process.exit(1);
}
console.log(`model: ${model.dir}`);
const nofile = Number((/Max open files\s+(\d+)/.exec(readFileSync("/proc/self/limits", "utf8")) || [0, 0])[1]);
const IDLE = 2000, SLOW = 520;
const servers = [];
async function server(extra, tag, dir = model.dir) {
  const s = await startServer(dir, extra, tag);
  servers.push(s);
  return s;
}

async function openMany(port, n, addr) {
  const out = [];
  for (let i = 0; i < n; i += 200) {
    const batch = [];
    for (let k = i; k < Math.min(n, i + 200); k++) batch.push(open(port, addr(k)));
    out.push(...(await Promise.all(batch)));
  }
  return out;
}
// Sends a request on an open raw connection; resolves with {status, body, ms} when the response
// (Content-Length or chunked to the 0 chunk) is complete, or on close.
function rawRequest(c, text, timeoutMs = 5000) {
  const t0 = Date.now();
  const start = c.data.length;
  c.sock.write(text);
  return new Promise((resolve) => {
    const done = () => {
      clearInterval(iv);
      const r = c.data.slice(start);
      const status = Number((/^HTTP\/1\.[01] (\d+)/.exec(r) || [0, 0])[1]);
      resolve({ status, raw: r, body: r.slice(r.indexOf("\r\n\r\n") + 4), ms: Date.now() - t0 });
    };
    const iv = setInterval(() => {
      const r = c.data.slice(start);
      const h = r.indexOf("\r\n\r\n");
      if (h >= 0) {
        const cl = /content-length: (\d+)/i.exec(r.slice(0, h));
        if (cl && r.length - h - 4 >= Number(cl[1])) return done();
        if (/transfer-encoding: chunked/i.test(r.slice(0, h)) && r.endsWith("\r\n0\r\n\r\n")) return done();
      }
      if (c.closed || Date.now() - t0 > timeoutMs) done();
    }, 5);
  });
}
const post = (base, p, body) => fetch(`${base}${p}`, { method: "POST", headers: { "content-type": "application/json" },
                                                      body: JSON.stringify(body) });
const cps = (s) => [...s].length; // code points, as OpenAI (Python) counts
async function timed(f) {
  const t0 = Date.now();
  try { const r = await f(); return { ok: true, r, ms: Date.now() - t0 }; } catch (e) { return { ok: false, e, ms: Date.now() - t0 }; }
}

// Reads an SSE stream into its events; records when each arrived.
async function sse(res) {
  const ev = [];
  const dec = new TextDecoder();
  let buf = "";
  try {
    for await (const chunk of res.body) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (line.startsWith("data: ")) ev.push({ data: line.slice(6), t: Date.now() });
      }
    }
  } catch (e) { ev.push({ cut: String(e), t: Date.now() }); }
  return ev;
}

try {
  // ---- text_offset ---------------------------------------------------------------------------------
  const a = await server(["--http-timeout", "60"], "conn-a"); // the slowloris connections stay within their window
  if (model.trained) {
    const req = { model: "hy3", prompt: "JULIET:", max_tokens: 12, temperature: 0, logprobs: 0 };
    const plain = await (await post(a.base, "/v1/completions", req)).json();
    const held = await (await post(a.base, "/v1/completions", { ...req, stop: ["I will not, my lord."] })).json();
    const lp = plain.choices[0].logprobs, lh = held.choices[0].logprobs;
    const n = lh.tokens.length;
    eq(lh.text_offset, lp.text_offset.slice(0, n), "text_offset with a held-back stop string == without it");
    check(new Set(lh.text_offset).size === n, `offsets strictly increase: ${JSON.stringify(lh.text_offset)}`);
    let good = lp.text_offset[0] === 0;
    for (let i = 0; i + 1 < lp.tokens.length; i++)
      good &&= lp.text_offset[i + 1] - lp.text_offset[i] === cps(lp.tokens[i]);
    check(good, "text_offset[i+1] - text_offset[i] == characters of tokens[i]");
  }

  // ---- 2,000 idle + 520 slowloris connections --------------------------------------------------------
  if (nofile < IDLE + SLOW + 200) {
    check(false, `open-file limit ${nofile} is too low for ${IDLE + SLOW} connections (raise ulimit -n)`);
  } else {
    let t0 = Date.now();
    const idle = await openMany(a.port, IDLE, (k) => `127.0.0.${2 + (k % 4)}`);
    const slow = await openMany(a.port, SLOW, (k) => `127.0.0.${6 + (k % 2)}`);
    const openMs = Date.now() - t0;
    for (const c of slow) c.sock.write("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    const drip = setInterval(() => { for (const c of slow) if (!c.closed) c.sock.write("a"); }, 1000);
    await sleep(1500);
    const up = idle.filter((c) => !c.closed && !c.err).length + slow.filter((c) => !c.closed && !c.err).length;
    check(up === IDLE + SLOW, `${up} of ${IDLE + SLOW} idle + slowloris connections open (opened in ${openMs} ms)`);
    const h = [];
    for (let i = 0; i < 5; i++) h.push(await timed(async () => (await fetch(`${a.base}/health`)).status));
    check(h.every((x) => x.ok && x.r === 200 && x.ms < 2000),
          `GET /health under them: ${h.map((x) => `${x.ok ? x.r : x.e} in ${x.ms} ms`).join(", ")}`);
    const chat = await timed(async () => {
      const r = await post(a.base, "/v1/chat/completions", { model: "hy3", max_tokens: 4, temperature: 0,
                                                             messages: [{ role: "user", content: "Hello" }] });
      return { status: r.status, j: await r.json() };
    });
    check(chat.ok && chat.r.status === 200 && chat.r.j.usage?.completion_tokens > 0 && chat.ms < 2000,
          `chat completion (max_tokens 4) under them: ${chat.ok ? chat.r.status : chat.e} in ${chat.ms} ms`);
    const old = await rawRequest(idle[7], "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    eq(old.status, 200, `an old idle connection serves a request (${old.ms} ms)`);
    const still = idle.filter((c) => !c.closed).length + slow.filter((c) => !c.closed).length;
    check(still === IDLE + SLOW, `all ${still} connections still open at the end`);
    clearInterval(drip);
    for (const c of [...idle, ...slow]) c.sock.destroy();
  }
  await a.stop();

  // ---- per-address limit, idle timeout -------------------------------------------------------------
  const b = await server(["--max-connections-per-ip", "20", "--http-timeout", "2"], "conn-b");
  const twenty = await openMany(b.port, 20, () => "127.0.0.9");
  await sleep(300);
  check(twenty.every((c) => !c.closed), "20 connections from one address stay open");
  const extra = await Promise.all([open(b.port, "127.0.0.9"), open(b.port, "127.0.0.9")]);
  await sleep(1000);
  check(extra.every((c) => c.closed && c.closedAt - c.t0 < 1000),
        `connections 21 and 22 from that address are closed at once (${extra.map((c) => c.closed ? `${c.closedAt - c.t0} ms` : "open").join(", ")})`);
  const r20 = await rawRequest(twenty[0], "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  eq(r20.status, 200, "one of the 20 still serves a request");
  const other = await open(b.port, "127.0.0.10");
  const ro = await rawRequest(other, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  eq(ro.status, 200, "another address is not limited");
  const lone = await open(b.port, "127.0.0.11");
  for (let i = 0; i < 60 && !lone.closed; i++) await sleep(100);
  const idleMs = lone.closedAt - lone.t0;
  check(lone.closed && idleMs >= 1500 && idleMs < 5000, `--http-timeout 2 closes an idle connection (after ${idleMs} ms)`);
  for (const c of [...twenty, other, lone]) c.sock.destroy();
  await b.stop();

  // ---- global limit --------------------------------------------------------------------------------
  const g = await server(["--max-connections", "40"], "conn-g");
  await sleep(200); // the health probe's connection may still be open: at most one
  const hundred = await openMany(g.port, 100, (k) => `127.0.1.${1 + (k % 10)}`);
  await sleep(800);
  const openN = hundred.filter((c) => !c.closed).length;
  const fast = hundred.filter((c) => c.closed && c.closedAt - c.t0 < 1000).length;
  check(openN <= 40 && openN >= 36 && fast === 100 - openN,
        `--max-connections 40: ${openN} of 100 stay open, ${fast} closed at once`);
  const survivor = hundred.find((c) => !c.closed);
  const rs = survivor && (await rawRequest(survivor, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  eq(rs?.status, 200, "an open connection still serves requests at the limit");
  for (const c of hundred) c.sock.destroy();
  await sleep(200);
  const after = await timed(async () => (await fetch(`${g.base}/health`)).status);
  eq(after.ok && after.r, 200, "new connections are accepted again once the others closed");
  await g.stop();

  // ---- SIGTERM drain ------------------------------------------------------------------------------
  const TIMEOUT_S = 2;
  const c = await server(["--shutdown-timeout", String(TIMEOUT_S)], "conn-c");
  const streams = [];
  for (let i = 0; i < 16; i++) {
    streams.push(post(c.base, "/v1/chat/completions", {
      model: "hy3", max_tokens: 900, ignore_eos: true, temperature: 0, stream: true,
      messages: [{ role: "user", content: `Tell me a long story number ${i}` }] }).then(sse, (e) => [{ cut: String(e), t: Date.now() }]));
  }
  for (let i = 0; i < 300; i++) {
    const m = await metrics(c.base);
    if (m["vllm:num_requests_running"] === 8 && m["vllm:num_requests_waiting"] === 8 &&
        m["vllm:generation_tokens_total"] >= 16) break;
    await sleep(20);
  }
  const m0 = await metrics(c.base);
  eq([m0["vllm:num_requests_running"], m0["vllm:num_requests_waiting"]], [8, 8], "16 streams: 8 running, 8 queued");
  const ka1 = await open(c.port), ka2 = await open(c.port);
  const exited = new Promise((r) => c.proc.on("exit", (code, sig) => r({ code, sig, t: Date.now() })));
  const tTerm = Date.now();
  c.proc.kill("SIGTERM");
  await sleep(100);
  const [r503, h503, fresh] = await Promise.all([
    rawRequest(ka1, `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`),
    rawRequest(ka2, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"),
    open(c.port, "127.0.0.1"),
  ]);
  check(r503.status === 503 && /"error"/.test(r503.body) && r503.ms < 500,
        `a new request on an open connection during the drain: ${r503.status} in ${r503.ms} ms`);
  check(h503.status === 503 && h503.ms < 500, `GET /health during the drain: ${h503.status} in ${h503.ms} ms`);
  check(fresh.closed && fresh.err === "ECONNREFUSED", `a new connection during the drain is refused (${fresh.err})`);
  const ex = await exited;
  const exitMs = ex.t - tTerm;
  check(exitMs < (TIMEOUT_S + 1) * 1000, `exit ${JSON.stringify([ex.code, ex.sig])} ${exitMs} ms after SIGTERM (--shutdown-timeout ${TIMEOUT_S})`);
  eq(ex.code, 0, "the drained server exits 0");
  const res = await Promise.all(streams);
  let wellEnded = 0, errors = 0, finished = 0, queuedFast = 0, queued = 0;
  for (const ev of res) {
    const data = ev.filter((e) => e.data).map((e) => e.data);
    const last = data[data.length - 1], prev = data.length > 1 ? JSON.parse(data[data.length - 2]) : null;
    const tokens = data.filter((d) => d !== "[DONE]").map((d) => JSON.parse(d))
      .filter((j) => j.choices?.[0]?.delta?.content).length;
    const isErr = prev && prev.error && prev.error.code === 503;
    const isFin = prev && prev.choices?.[0]?.finish_reason;
    if (last === "[DONE]" && (isErr || isFin)) wellEnded++;
    if (isErr) errors++;
    if (isFin) finished++;
    if (tokens === 0) {
      queued++;
      const end = ev[ev.length - 1].t;
      if (isErr && end - tTerm < 1000) queuedFast++;
    }
  }
  eq(wellEnded, 16, `every stream ends with a finish or error chunk and [DONE] (${finished} finished, ${errors} errors)`);
  check(queued >= 8 && queuedFast === queued, `the ${queued} queued streams end with an error at once (${queuedFast})`);

  // ---- a second SIGTERM exits at once ------------------------------------------------------------------
  const d = await server(["--shutdown-timeout", "30"], "conn-d");
  const long = post(d.base, "/v1/completions", { model: "hy3", prompt: "x", max_tokens: 900, ignore_eos: true, stream: true })
    .then(sse, () => []);
  for (let i = 0; i < 200; i++) { if ((await metrics(d.base))["vllm:num_requests_running"] === 1) break; await sleep(10); }
  const dExit = new Promise((r) => d.proc.on("exit", (code, sig) => r({ code, sig, t: Date.now() })));
  d.proc.kill("SIGTERM");
  await sleep(300);
  const t2 = Date.now();
  d.proc.kill("SIGTERM");
  const dx = await Promise.race([dExit, sleep(3000).then(() => null)]);
  check(dx && dx.t - t2 < 500, `a second SIGTERM exits at once (${dx ? `${dx.t - t2} ms, ${JSON.stringify([dx.code, dx.sig])}` : "still running"})`);
  await long;

  // ---- text_offset in characters: a checkpoint that writes CJK words and emoji --------------------------
  const u8dir = path.join(root, "build", "e2e-conn-utf8");
  const py = spawnSync(process.env.PYTHON || "/usr/bin/python3", [path.join(root, "tests", "e2e", "utf8_model.py"), u8dir],
                       { encoding: "utf8", env: { ...process.env, HYINFER_ROOT: root } });
  if (py.status !== 0) {
    check(false, `utf8_model.py: ${py.stderr}`);
  } else {
    const u = await server([], "conn-u8", u8dir);
    const req = { model: "hy3", prompt: "hello", max_tokens: 24, temperature: 0, logprobs: 0 };
    const j = await (await post(u.base, "/v1/completions", req)).json();
    const ch = j.choices[0], lp = ch.logprobs;
    const nonAscii = [...ch.text].filter((x) => x.codePointAt(0) > 0x7f).length;
    const astral = [...ch.text].filter((x) => x.codePointAt(0) > 0xffff).length;
    let good = lp.text_offset[0] === 0, pos = 0;
    for (let i = 0; i < lp.tokens.length; i++) {
      good &&= lp.text_offset[i] === pos;
      pos += cps(lp.tokens[i]);
    }
    check(nonAscii > 0 && good && pos === cps(ch.text),
          `text_offset counts code points (${nonAscii} non-ASCII, ${astral} beyond U+FFFF in ${cps(ch.text)} characters): ${JSON.stringify(lp.text_offset)}`);
    // a stop string: the text held back while it might start the stop string does not shift offsets
    const stopAt = [...ch.text].slice(3, 5).join("");
    const js = await (await post(u.base, "/v1/completions", { ...req, stop: [stopAt + "\u0001"] })).json();
    eq(js.choices[0].logprobs.text_offset, lp.text_offset, "the same offsets with a stop string that is held back but never matches");
    await u.stop();
  }
} finally {
  for (const s of servers) await s.stop().catch(() => {});
}
finish();
