// Request-arrival deadlines of `hyinfer serve` (raw sockets):
//   - --http-timeout 5 --max-connections 60: 50 connections that send a request header one byte
//     every 2 s are all closed by the server within 6 s of opening, while GET /health and a chat
//     completion from other connections keep answering; a body that trickles the same way is cut
//     at the same deadline; a request sent in three pieces over 3 s is still served;
//   - a kept-alive connection idle after its response is closed after the keep-alive timeout (the HTTP
//     timeout by default, --keep-alive-timeout S when given)
//     (the HTTP timeout by default);
//   - 1,100 idle connections from one address (a proxy, a load balancer, NAT), then GET /health
//     from that same address answers: there is no per-address cap by default (vLLM has none).
import { readFileSync } from "node:fs";
import { check, finish, openRaw as open, pickModel, skip, sleep, startServer } from "./serve_lib.mjs";

const model = pickModel();
if (!model) {
  console.log("FAIL: no model (models/hy3-tiny or tests/data/hy3-golden-llamacpp/hy3-golden-b)");
  process.exit(1);
}
const nofile = Number((/Max open files\s+(\d+)/.exec(readFileSync("/proc/self/limits", "utf8")) || [0, 0])[1]);
const IDLE = 1100;
if (nofile < IDLE + 200) skip(`open-file limit ${nofile} is too low for ${IDLE} connections (ulimit -n ${IDLE + 200})`);

const waitClosed = async (cs, ms) => { for (let t = 0; t < ms && cs.some((c) => !c.closed); t += 50) await sleep(50); };
const statusOf = (c) => Number((/^HTTP\/1\.[01] (\d+)/.exec(c.data) || [0, 0])[1]);

// One request on a fresh connection, then idle: the server must close it about wantMs after the response.
async function keepAliveCloses(port, req, wantMs, what) {
  const c = await open(port);
  c.sock.write(req);
  for (let t = 0; t < 2000 && !statusOf(c); t += 20) await sleep(20);
  const tResp = Date.now();
  check(statusOf(c) === 200, `${what}: the request is answered`);
  await waitClosed([c], wantMs + 3000);
  const idleMs = c.closedAt - tResp;
  check(c.closed && idleMs >= wantMs - 500 && idleMs <= wantMs + 1000, `${what} is closed ${idleMs} ms after its response`);
  c.sock.destroy();
}

const servers = [];
try {
  const s = await startServer(model.dir, ["--http-timeout", "5", "--max-connections", "60"], "slowloris");
  servers.push(s);

  // ---- 50 slowloris headers, a trickled body, a slow but complete request -------------------------
  const slow = await Promise.all(Array.from({ length: 50 }, () => open(s.port)));
  const head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  let k = 0;
  for (const c of slow) c.sock.write(head[0]);
  const body = await open(s.port);
  body.sock.write("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
                  "Content-Length: 200\r\n\r\n{");
  const drip = setInterval(() => {
    k++;
    for (const c of slow) if (!c.closed) c.sock.write(k < head.length ? head[k] : "a");
    if (!body.closed) body.sock.write(" ");
  }, 2000);
  const patient = await open(s.port);
  const req = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  (async () => { for (const part of [req.slice(0, 5), req.slice(5, 20), req.slice(20)]) { patient.sock.write(part); await sleep(1500); } })();

  const health = [];
  let chat = null;
  const tEnd = Date.now() + 6500;
  const chatP = (async () => {
    const t0 = Date.now();
    const r = await fetch(`${s.base}/v1/chat/completions`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "hy3", max_tokens: 4, temperature: 0, messages: [{ role: "user", content: "Hi" }] }),
    });
    chat = { status: r.status, j: await r.json(), ms: Date.now() - t0 };
  })();
  while (Date.now() < tEnd) {
    const t0 = Date.now();
    try {
      const r = await fetch(`${s.base}/health`, { signal: AbortSignal.timeout(2000) });
      health.push({ st: r.status, ms: Date.now() - t0 });
    } catch (e) { health.push({ st: String(e.name), ms: Date.now() - t0 }); }
    await sleep(500);
  }
  await chatP;
  await waitClosed([...slow, body], 1000);
  clearInterval(drip);
  const late = slow.filter((c) => !c.closed || c.closedAt - c.t0 > 6000);
  const spans = slow.filter((c) => c.closed).map((c) => c.closedAt - c.t0);
  check(late.length === 0 && spans.every((ms) => ms >= 4500),
        `50 slowloris connections closed by the server ${Math.min(...spans)}..${Math.max(...spans)} ms after opening ` +
        `(--http-timeout 5; ${late.length} open or later than 6 s)`);
  check(body.closed && body.closedAt - body.t0 <= 6000 && body.closedAt - body.t0 >= 4500,
        `a body trickling a byte every 2 s is cut at the deadline (${body.closed ? body.closedAt - body.t0 : "open"} ms)`);
  check(health.length >= 8 && health.every((h) => h.st === 200 && h.ms < 2000),
        `GET /health meanwhile: ${health.length} answers, ${health.filter((h) => h.st === 200).length} 200, slowest ${Math.max(...health.map((h) => h.ms))} ms`);
  check(chat && chat.status === 200 && chat.j.usage?.completion_tokens > 0,
        `a chat completion meanwhile: ${chat?.status} in ${chat?.ms} ms`);
  check(statusOf(patient) === 200, `a request sent in three pieces over 3 s is served (${statusOf(patient) || "no answer"})`);

  // ---- a kept-alive connection idles out: after --http-timeout, or --keep-alive-timeout when given ----
  await keepAliveCloses(s.port, req, 5000, "an idle kept-alive connection");
  for (const c of [...slow, body, patient]) c.sock.destroy();
  await s.stop();
  const kas = await startServer(model.dir, ["--http-timeout", "5", "--keep-alive-timeout", "2"], "slowloris-ka");
  servers.push(kas);
  await keepAliveCloses(kas.port, req, 2000, "--keep-alive-timeout 2: an idle kept-alive connection");
  await kas.stop();

  // ---- 1,100 idle connections from one address, then /health from it ---------------------------------
  const d = await startServer(model.dir, [], "slowloris-ip");
  servers.push(d);
  const idle = [];
  for (let i = 0; i < IDLE; i += 100)
    idle.push(...(await Promise.all(Array.from({ length: Math.min(100, IDLE - i) }, () => open(d.port, "127.0.0.1")))));
  await sleep(300);
  const up = idle.filter((c) => !c.closed && !c.err).length;
  check(up === IDLE, `${up} of ${IDLE} idle connections from 127.0.0.1 open`);
  const t0 = Date.now();
  const c = await open(d.port, "127.0.0.1");
  c.sock.write(req);
  for (let t = 0; t < 3000 && !statusOf(c); t += 20) await sleep(20);
  check(statusOf(c) === 200, `GET /health from the same address answers ${statusOf(c) || "nothing"} in ${Date.now() - t0} ms`);
  for (const x of [...idle, c]) x.sock.destroy();
  await d.stop();
} catch (e) {
  check(false, `exception: ${e.stack || e}`);
} finally {
  for (const s of servers) try { s.proc.kill("SIGKILL"); } catch { /* gone */ }
}
finish();
