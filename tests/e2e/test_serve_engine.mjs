// The serving engine's mechanisms through `hyinfer serve` (fp32, greedy), each shown to have run
// by /metrics and each required to leave the output unchanged:
//   prefix caching on vs off (same text; hits > 0 only when on), the same prompt twice and a shared
//   system prompt with different suffixes (cache hits), 8 concurrent requests vs one at a time (a
//   step that batched >= 8 sequences), --max-num-batched-tokens 16 (more than one prefill chunk per
//   prompt), a KV budget too small for the batch (preemptions > 0); a client that disconnects
//   (streaming or waiting for a non-streamed answer) has its request aborted and its KV blocks
//   freed; --max-waiting-requests gives 503; SIGTERM lets a running request finish, then exits 0.
import { spawnSync } from "node:child_process";
import { bin, check, eq, finish, loadOpenAI, metrics, pickModel, sleep, startServer } from "./serve_lib.mjs";

const model = pickModel();
if (!model) {
  console.log("FAIL: no model (models/hy3-tiny or tests/data/hy3-golden-llamacpp/hy3-golden-b)");
  process.exit(1);
}
const OpenAI = await loadOpenAI();
console.log(`model: ${model.dir}`);

const MAXTOK = 40;
const SYSTEM = "You are a careful assistant who answers questions about the history of small coastal towns.";
const USERS = [
  "Where is the old lighthouse and who built it?",
  "Tell me about the harbour.",
  "What did the fishermen eat in winter, and why was salt so important to them?",
  "Describe the market square on a Sunday morning in summer.",
  "Why did the railway never reach the town?",
  "Name three families who lived there for centuries and what they were known for.",
  "How did the great storm change the shape of the coastline?",
  "What songs did sailors sing?",
];
const chatReq = (i, extra = {}) => ({ model: "hy3", max_tokens: MAXTOK, temperature: 0, ignore_eos: true,
  messages: [{ role: "system", content: SYSTEM }, { role: "user", content: USERS[i] }], ...extra });

async function runAll(base, concurrent) {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "x", maxRetries: 0, timeout: 300000 });
  const one = async (i) => (await client.chat.completions.create(chatReq(i))).choices[0].message.content;
  if (concurrent) return Promise.all(USERS.map((_, i) => one(i)));
  const out = [];
  for (let i = 0; i < USERS.length; i++) out.push(await one(i));
  return out;
}

const common = ["--max-model-len", "256"];
const servers = [];
async function server(extra, tag) {
  const s = await startServer(model.dir, [...common, ...extra], tag);
  servers.push(s);
  return s;
}

try {
  // reference: prefix caching off, one request at a time
  const off = await server(["--no-enable-prefix-caching"], "nocache");
  const ref = await runAll(off.base, false);
  check(ref.every((t) => typeof t === "string" && t.length > 0), "reference outputs present");
  let m = await metrics(off.base);
  eq(m["vllm:prefix_cache_hits_total"], 0, "caching off: no prefix-cache hits");
  await off.stop();

  // prefix caching on: sequential (shared system prompt -> hits), then the same prompts again
  const on = await server([], "cache");
  const seq = await runAll(on.base, false);
  eq(seq, ref, "prefix caching on == off (greedy, shared system prompt)");
  m = await metrics(on.base);
  const hits1 = m["vllm:prefix_cache_hits_total"];
  check(hits1 > 0, `shared system prompt gives prefix-cache hits (${hits1} tokens)`);
  const again = await runAll(on.base, false);
  eq(again, ref, "same prompts a second time (cache hits) give the same text");
  m = await metrics(on.base);
  check(m["vllm:prefix_cache_hits_total"] > hits1, `repeated prompts add hits (${m["vllm:prefix_cache_hits_total"]})`);
  check(m["hyinfer:max_batch_seqs"] >= 1, `sequential max batch ${m["hyinfer:max_batch_seqs"]}`);

  // 8 concurrent (repeated up to 4 times when, on a busy machine, the 8 requests did not all arrive
  // before the first one finished: max_batch_seqs is the most sequences any step has run so far)
  for (let attempt = 1; attempt <= 4; attempt++) {
    const conc = await runAll(on.base, true);
    eq(conc, ref, `8 concurrent requests == one at a time (round ${attempt})`);
    m = await metrics(on.base);
    if (m["hyinfer:max_batch_seqs"] >= 8) break;
  }
  check(m["hyinfer:max_batch_seqs"] >= 8, `a step batched >= 8 sequences (max ${m["hyinfer:max_batch_seqs"]})`);

  // client disconnect mid-stream
  const base0 = (await metrics(on.base))["hyinfer:kv_cache_blocks_used"];
  const aborted0 = m['vllm:request_success_total{model_name="hy3",finished_reason="abort"}'] || 0;
  const ac = new AbortController();
  const resp = await fetch(`${on.base}/v1/completions`, { method: "POST", signal: ac.signal,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "hy3", prompt: "A very long story:", max_tokens: 200, temperature: 0,
                           ignore_eos: true, stream: true }) });
  const reader = resp.body.getReader();
  let got = 0;
  while (got < 3) { const { done } = await reader.read(); if (done) break; got++; }
  const mid = await metrics(on.base);
  check(mid["vllm:num_requests_running"] === 1 && mid["hyinfer:kv_cache_blocks_used"] > 0,
        `mid-stream: 1 running, ${mid["hyinfer:kv_cache_blocks_used"]} KV blocks in use`);
  ac.abort();
  let freed = false;
  for (let i = 0; i < 100 && !freed; i++) {
    await sleep(100);
    const mm = await metrics(on.base);
    freed = mm["vllm:num_requests_running"] === 0 && mm["hyinfer:kv_cache_blocks_used"] === base0;
    m = mm;
  }
  check(freed, `after disconnect: running 0, KV blocks back to ${base0} (now ${m["hyinfer:kv_cache_blocks_used"]})`);
  check((m['vllm:request_success_total{model_name="hy3",finished_reason="abort"}'] || 0) > aborted0,
        "the disconnected request finished as aborted");
  check(m["vllm:generation_tokens_total"] > 0, "server still counting");

  // client disconnect while waiting for a non-streamed response
  const ac2 = new AbortController();
  const pending = fetch(`${on.base}/v1/completions`, { method: "POST", signal: ac2.signal,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "hy3", prompt: "Another long story:", max_tokens: 200, temperature: 0,
                           ignore_eos: true }) }).catch(() => null);
  let running = false;
  for (let i = 0; i < 200 && !running; i++) {
    running = (await metrics(on.base))["vllm:num_requests_running"] === 1;
    if (!running) await sleep(10);
  }
  const ab1 = (await metrics(on.base))['vllm:request_success_total{model_name="hy3",finished_reason="abort"}'];
  ac2.abort();
  await pending;
  freed = false;
  for (let i = 0; i < 100 && !freed; i++) {
    await sleep(100);
    m = await metrics(on.base);
    freed = m["vllm:num_requests_running"] === 0 && m["hyinfer:kv_cache_blocks_used"] === base0;
  }
  check(running && freed, "non-streamed request: disconnect aborts it and frees its KV blocks");
  check(m['vllm:request_success_total{model_name="hy3",finished_reason="abort"}'] === ab1 + 1,
        "the non-streamed request finished as aborted");
  const gen0 = m["vllm:generation_tokens_total"];
  await sleep(300);
  check((await metrics(on.base))["vllm:generation_tokens_total"] === gen0, "nothing generates after the abort");
  await on.stop();

  // chunked prefill
  const ch = await server(["--max-num-batched-tokens", "16"], "chunk");
  const chunked = await runAll(ch.base, false);
  eq(chunked, ref, "--max-num-batched-tokens 16 (chunked prefill) == reference");
  m = await metrics(ch.base);
  check(m["hyinfer:prompt_chunks_total"] > USERS.length * 2,
        `more than one chunk per prompt (${m["hyinfer:prompt_chunks_total"]} chunks for ${USERS.length} prompts)`);
  await ch.stop();

  // small KV budget: 24 blocks of 16 tokens (one 256-token sequence needs 16-17); 8 concurrent need more.
  // The bytes per block come from the start-up error of a server given a 1-byte budget.
  const probe = spawnSync(bin, ["serve", model.dir, "--port", "0", "--dtype", "float32", ...common,
                                "--kv-cache-memory-bytes", "1"], { encoding: "utf8" });
  const mk = /needs (\d+) KV blocks of \d+ tokens \((\d+) bytes\)/.exec(probe.stderr || "");
  check(probe.status === 1 && mk, `a 1-byte KV budget is refused at start-up: ${(probe.stderr || "").trim().split("\n").pop()}`);
  if (mk) {
    const per = Number(mk[2]) / Number(mk[1]);
    const small = await server(["--kv-cache-memory-bytes", String(24 * per)], "smallkv");
    for (let attempt = 1; attempt <= 4; attempt++) { // repeated while no preemption happened (busy machine)
      const pre = await runAll(small.base, true);
      eq(pre, ref, `small KV budget, 8 concurrent == reference (round ${attempt})`);
      m = await metrics(small.base);
      if (m["vllm:num_preemptions_total"] > 0) break;
    }
    check(m["vllm:num_preemptions_total"] > 0, `preemptions happened (${m["vllm:num_preemptions_total"]})`);
    eq(m["hyinfer:kv_cache_blocks_total"], 24, "KV pool has the 24 blocks the budget buys");
    await small.stop();
  }

  // queue full -> 503 (long requests so the first two are surely still there; then they disconnect)
  const q = await server(["--max-num-seqs", "1", "--max-waiting-requests", "1", "--max-model-len", "1000",
                          "--kv-cache-memory-bytes", String(64 << 20)], "queue");
  const long = (prompt, max_tokens, signal) => fetch(`${q.base}/v1/completions`, { method: "POST", signal,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "hy3", prompt, max_tokens, temperature: 0, ignore_eos: true }) });
  const acq = new AbortController();
  const first = long("first request", 900, acq.signal).catch(() => null);
  for (let i = 0; i < 200; i++) { if ((await metrics(q.base))["vllm:num_requests_running"] === 1) break; await sleep(10); }
  const second = long("second request", 900, acq.signal).catch(() => null);
  for (let i = 0; i < 200; i++) { if ((await metrics(q.base))["vllm:num_requests_waiting"] === 1) break; await sleep(10); }
  const mq = await metrics(q.base);
  eq([mq["vllm:num_requests_running"], mq["vllm:num_requests_waiting"]], [1, 1], "one running, one waiting");
  const third = await long("third request", 10);
  const body3 = await third.json();
  eq(third.status, 503, "a request beyond --max-waiting-requests gets 503");
  check(/overloaded/.test(body3.error?.message || ""), `503 message: ${body3.error?.message}`);
  acq.abort();
  await first;
  await second;
  let idle = false;
  for (let i = 0; i < 100 && !idle; i++) {
    await sleep(50);
    const mm = await metrics(q.base);
    idle = mm["vllm:num_requests_running"] === 0 && mm["vllm:num_requests_waiting"] === 0 &&
           mm["hyinfer:kv_cache_blocks_used"] === 0;
  }
  check(idle, "disconnecting the running and the waiting request leaves the engine idle");
  const fourth = await long("fourth request", 5);
  eq(fourth.status, 200, "a new request is served again");

  // SIGTERM drains: a request in flight still completes, then the server exits 0
  const inflight = long("drain me", 200);
  for (let i = 0; i < 200; i++) { if ((await metrics(q.base))["vllm:num_requests_running"] === 1) break; await sleep(10); }
  const stopping = q.stop();
  const dr = await inflight;
  const dj = await dr.json();
  eq([dr.status, dj.usage?.completion_tokens, dj.choices?.[0]?.finish_reason], [200, 200, "length"],
     "SIGTERM while a request runs: it still completes");
  await stopping;
  check(true, "then the server exits 0");
  let refused = false;
  try { await fetch(`${q.base}/health`); } catch { refused = true; }
  check(refused, "and no longer accepts connections");
} finally {
  for (const s of servers) await s.stop().catch(() => {});
}
finish();
