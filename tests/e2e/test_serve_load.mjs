// A bounded load run against `hyinfer serve` on loopback: 208 requests at concurrency 16 through the
// openai client (chat and completions, streamed and not, prompt lengths 1..~200 tokens, max_tokens
// 1..48, some with stop strings, n = 2 and seeds), stopping by itself. Passes when every request
// succeeds with the token count it asked for (or stopped early), the server is idle afterwards
// (no running/waiting requests, no KV blocks referenced) and its RSS grew by less than 64 MiB
// between the end of a warm-up round and the end of the run (the KV pool is capped at 32 MiB).
import { check, collectStream, finish, loadOpenAI, metrics, pickModel, rssBytes, startServer } from "./serve_lib.mjs";

const model = pickModel();
if (!model) {
  console.log("FAIL: no model (models/hy3-tiny or tests/data/hy3-golden-llamacpp/hy3-golden-b)");
  process.exit(1);
}
const OpenAI = await loadOpenAI();
console.log(`model: ${model.dir}`);
const TOTAL = 208, CONC = 16, WARM = 16;
const RSS_BOUND = 64 << 20;

let rng = 20241129;
const rand = (n) => { rng = (rng * 1103515245 + 12345) % 2147483648; return rng % n; };
const words = ["the", "harbour", "light", "世界", "🙂", "river", "stone", "boat", "winter", "salt", "Ünï", "song"];
function makeReq(i) {
  const n = 1 + rand(60);
  const prompt = Array.from({ length: n }, () => words[rand(words.length)]).join(" ");
  const max_tokens = 1 + rand(48);
  const stream = rand(2) === 1;
  const chat = rand(2) === 1;
  const r = { model: "hy3", max_tokens, temperature: rand(3) === 0 ? 0 : 0.8, seed: i, stream };
  if (rand(8) === 0) r.stop = ["e", "\n"];
  if (rand(10) === 0) r.n = 2;
  if (stream && rand(2)) r.stream_options = { include_usage: true };
  return chat ? { chat, r: { ...r, messages: [{ role: "user", content: prompt }] } } : { chat, r: { ...r, prompt } };
}

const srv = await startServer(model.dir, ["--max-model-len", "512", "--max-num-seqs", "16",
  "--kv-cache-memory-bytes", String(32 << 20)], "load");
const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: "x", maxRetries: 0, timeout: 600000 });
let errors = 0, done = 0, tokens = 0;
const errs = [];

async function one(i) {
  const { chat, r } = makeReq(i);
  try {
    const api = chat ? client.chat.completions : client.completions;
    if (r.stream) {
      const s = await collectStream(await api.create(r), chat ? "chat" : "completion");
      const nch = Object.keys(s.perChoice).length;
      if (nch !== (r.n || 1)) throw new Error(`stream gave ${nch} choices`);
      for (const c of Object.values(s.perChoice))
        if (!["stop", "length"].includes(c.finish)) throw new Error(`finish ${c.finish}`);
      if (r.stream_options && (!s.usage || s.usageChunks !== 1)) throw new Error("usage chunk missing");
      if (s.usage) tokens += s.usage.completion_tokens;
    } else {
      const out = await api.create(r);
      if (out.choices.length !== (r.n || 1)) throw new Error(`${out.choices.length} choices`);
      for (const c of out.choices) if (!["stop", "length"].includes(c.finish_reason)) throw new Error(`finish ${c.finish_reason}`);
      const per = out.usage.completion_tokens / (r.n || 1);
      if (!r.stop && out.choices.every((c) => c.finish_reason === "length") && per !== r.max_tokens)
        throw new Error(`completion_tokens ${out.usage.completion_tokens} for max_tokens ${r.max_tokens}`);
      tokens += out.usage.completion_tokens;
    }
  } catch (e) {
    errors++;
    if (errs.length < 5) errs.push(`#${i}: ${e.message}`);
  }
  done++;
}

async function pool(from, to) {
  let next = from;
  const worker = async () => { while (next < to) await one(next++); };
  await Promise.all(Array.from({ length: CONC }, worker));
}

try {
  const t0 = Date.now();
  await pool(0, WARM);
  const rss0 = rssBytes(srv.pid);
  await pool(WARM, TOTAL);
  const rss1 = rssBytes(srv.pid);
  const secs = (Date.now() - t0) / 1000;
  console.log(`${done} requests in ${secs.toFixed(1)} s (${(done / secs).toFixed(1)} req/s), ` +
              `RSS ${(rss0 / 2 ** 20).toFixed(1)} -> ${(rss1 / 2 ** 20).toFixed(1)} MiB`);
  for (const e of errs) console.log(`  error ${e}`);
  check(done === TOTAL, `${TOTAL} requests ran`);
  check(errors === 0, `zero errors (${errors})`);
  check(rss1 - rss0 < RSS_BOUND, `RSS growth ${((rss1 - rss0) / 2 ** 20).toFixed(1)} MiB < ${RSS_BOUND / 2 ** 20} MiB`);
  const m = await metrics(srv.base);
  check(m["vllm:num_requests_running"] === 0 && m["vllm:num_requests_waiting"] === 0 &&
        m["hyinfer:kv_cache_blocks_used"] === 0, "idle afterwards: no running/waiting requests, no KV blocks in use");
  check(m["hyinfer:max_batch_seqs"] >= 8, `batched up to ${m["hyinfer:max_batch_seqs"]} sequences`);
  check(m["hyinfer:request_errors_total"] === 0, "server counted no errors");
} finally {
  await srv.stop();
}
finish();
