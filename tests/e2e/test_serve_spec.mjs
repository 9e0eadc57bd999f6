// MTP speculative decoding through `hyinfer serve` (fp32): a server with
// --speculative-config '{"method":"mtp","num_speculative_tokens":3,...}' (drafting always on) answers
// exactly as one without, streamed and not: max_tokens 1..7 give exactly that many tokens; a stop
// string at every offset of an answer ends it there with the same text, finish_reason and usage;
// logprobs + top 5 agree (one entry per token, |dlogprob| < 1e-4); seeded temperature-1 sampling and
// penalties agree; /metrics carries vLLM's spec_decode counters with per-position acceptance.
import { check, collectStream, eq, finish, loadOpenAI, metrics, pickModel, startServer } from "./serve_lib.mjs";

const model = pickModel();
if (!model) {
  console.log("FAIL: no model");
  process.exit(1);
}
const OpenAI = await loadOpenAI();
const common = ["--max-model-len", "256", "--block-size", "4"];
const off = await startServer(model.dir, common, "spec-off");
const on = await startServer(model.dir, [...common, "--speculative-config",
  '{"method":"mtp","num_speculative_tokens":3,"draft_p_min":0,"gate":"off"}'], "spec-on");
const cli = (s) => new OpenAI({ baseURL: `${s.base}/v1`, apiKey: "x", maxRetries: 0, timeout: 300000 });
const A = cli(off), B = cli(on);
const PROMPTS = ["ROMEO:", "JULIET:\nO Romeo, Romeo!", "KING HENRY VI:\n"];

async function both(req) {
  const [a, b] = await Promise.all([A.completions.create(req), B.completions.create(req)]);
  return [a, b];
}
async function bothStream(req) {
  const s = { ...req, stream: true, stream_options: { include_usage: true } };
  const [a, b] = await Promise.all([A.completions.create(s), B.completions.create(s)]);
  return [await collectStream(a, "text"), await collectStream(b, "text")];
}

// max_tokens 1..7 (= 2k+1), exactly that many tokens
for (let mt = 1; mt <= 7; mt++) {
  const req = { model: "hy3", prompt: PROMPTS[0], max_tokens: mt, temperature: 0, ignore_eos: true };
  const [a, b] = await both(req);
  eq(b.choices[0].text, a.choices[0].text, `max_tokens ${mt}: same text`);
  eq(b.usage.completion_tokens, mt, `max_tokens ${mt}: exactly ${mt} tokens`);
  const [sa, sb] = await bothStream(req);
  eq(sb.text, b.choices[0].text, `max_tokens ${mt}: streamed text equals the answer`);
  eq(sb.usage?.completion_tokens, mt, `max_tokens ${mt}: streamed usage`);
  eq(sa.text, sb.text, `max_tokens ${mt}: streamed the same as without drafts`);
}

// stop strings at every offset of a reference answer
const ref = (await A.completions.create({ model: "hy3", prompt: PROMPTS[0], max_tokens: 30, temperature: 0,
  ignore_eos: true })).choices[0].text;
const words = [...new Set(ref.split(/\s+/).filter((w) => w.length > 0))].slice(0, 12);
let stops = 0;
for (const w of words) {
  const req = { model: "hy3", prompt: PROMPTS[0], max_tokens: 30, temperature: 0, ignore_eos: true, stop: [w] };
  const [a, b] = await both(req);
  const same = a.choices[0].text === b.choices[0].text && a.choices[0].finish_reason === b.choices[0].finish_reason &&
    a.usage.completion_tokens === b.usage.completion_tokens;
  check(same, `stop ${JSON.stringify(w)}: same text, finish_reason and usage (${b.usage.completion_tokens} tokens)`);
  const [, sb] = await bothStream(req);
  eq(sb.text, b.choices[0].text, `stop ${JSON.stringify(w)}: streamed text equals the answer`);
  stops += b.choices[0].finish_reason === "stop";
}
check(stops >= Math.min(words.length, 3), `stop strings ended answers (${stops} of ${words.length})`);

// logprobs and top 5 (chat), penalties, seeded sampling
for (const p of PROMPTS) {
  const req = { model: "hy3", messages: [{ role: "user", content: p }], max_tokens: 24, temperature: 0,
    logprobs: true, top_logprobs: 5 };
  const [a, b] = await Promise.all([A.chat.completions.create(req), B.chat.completions.create(req)]);
  const la = a.choices[0].logprobs.content, lb = b.choices[0].logprobs.content;
  eq(lb.length, b.usage.completion_tokens, `logprobs: one entry per token (${JSON.stringify(p)})`);
  check(la.length === lb.length && la.every((e, i) => e.token === lb[i].token &&
    Math.abs(e.logprob - lb[i].logprob) < 1e-4 && e.top_logprobs.every((t, j) =>
      t.token === lb[i].top_logprobs[j].token && Math.abs(t.logprob - lb[i].top_logprobs[j].logprob) < 1e-4)),
  `logprobs + top 5 equal with drafts (${JSON.stringify(p)})`);
  for (const extra of [{ temperature: 1, seed: 11, top_p: 0.9 }, { presence_penalty: 0.6, frequency_penalty: 0.4,
    repetition_penalty: 1.2 }]) {
    const r2 = { model: "hy3", prompt: p, max_tokens: 24, temperature: 0, ignore_eos: true, ...extra };
    const [x, y] = await both(r2);
    eq(y.choices[0].text, x.choices[0].text, `${JSON.stringify(extra)}: same text (${JSON.stringify(p)})`);
  }
}

const m = await metrics(on.base);
const drafts = m["vllm:spec_decode_num_drafts_total"];
check(drafts > 0, `spec_decode_num_drafts_total ${drafts}`);
check(m["vllm:spec_decode_num_draft_tokens_total"] >= drafts, "spec_decode_num_draft_tokens_total");
const acc = m["vllm:spec_decode_num_accepted_tokens_total"];
const pos = [0, 1, 2].map((i) => m[`vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="hy3",position="${i}"}`]);
check(pos.every((v) => v !== undefined) && pos[0] + pos[1] + pos[2] === acc && pos[0] >= pos[1] && pos[1] >= pos[2],
  `per-position accepted ${JSON.stringify(pos)} sum to accepted ${acc} and do not increase`);
if (model.trained) check(acc > 0, "drafts are accepted on the trained model");
const m0 = await metrics(off.base);
check(m0["vllm:spec_decode_num_drafts_total"] === undefined, "no spec_decode counters without drafting");
await Promise.all([off.stop(), on.stop()]);
finish();
