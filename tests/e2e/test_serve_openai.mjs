// `hyinfer serve` driven by the real npm `openai` 6.x client: streamed and non-streamed chat and
// completions give equal text and usage; exactly one usage chunk (choices: []) only when asked;
// same seed -> same sampled output (and n choices use seed, seed+1, ...); logprobs; stop strings
// end the text before the stop string and never leak any part of it, streamed or not; reasoning
// (reasoning_effort high: the prompt ends inside an open think block) goes to reasoning_content
// with no marker text anywhere; CJK/emoji prompts stream exactly like the non-streamed text, and
// whenever the generated tokens' bytes (from logprobs) are valid UTF-8 the streamed text is exactly
// their decoding, without U+FFFD (a held-back partial character never leaks); SIGTERM exits 0.
import { check, collectStream, eq, finish, loadOpenAI, metrics, pickModel, startServer } from "./serve_lib.mjs";

const model = pickModel();
if (!model) {
  console.log("FAIL: no model (models/hy3-tiny or tests/data/hy3-golden-llamacpp/hy3-golden-b)");
  process.exit(1);
}
const OpenAI = await loadOpenAI();
console.log(`model: ${model.dir}`);

const srv = await startServer(model.dir, ["--max-model-len", "512", "--kv-cache-memory-bytes", "67108864"], "openai");
const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: "unused", maxRetries: 0 });
const MARK = /think:opensource/;

try {
  // models
  const models = await client.models.list();
  eq(models.data.map((m) => m.id), ["hy3"], "GET /v1/models lists the served name");

  // chat: non-streamed vs streamed, greedy
  const msgs = [{ role: "user", content: "Tell me a short story about a cat." }];
  const a = await client.chat.completions.create({ model: "hy3", messages: msgs, max_tokens: 40, temperature: 0 });
  const ca = a.choices[0];
  check(a.object === "chat.completion" && ca.message.role === "assistant", "chat response shape");
  check(a.usage.prompt_tokens > 0 && a.usage.completion_tokens > 0 &&
        a.usage.total_tokens === a.usage.prompt_tokens + a.usage.completion_tokens, "chat usage adds up");
  check(["stop", "length"].includes(ca.finish_reason), `chat finish_reason ${ca.finish_reason}`);
  const s = await collectStream(await client.chat.completions.create({
    model: "hy3", messages: msgs, max_tokens: 40, temperature: 0, stream: true,
    stream_options: { include_usage: true } }));
  eq(s.text, ca.message.content, "chat: streamed content == non-streamed content");
  eq(s.reasoning, ca.message.reasoning_content || "", "chat: streamed reasoning == non-streamed");
  eq(s.finish, ca.finish_reason, "chat: same finish_reason streamed");
  eq(s.usage, a.usage, "chat: usage chunk == non-streamed usage");
  check(s.usageChunks === 1 && !s.badUsageChunk, "exactly one usage chunk, with choices: []");
  const s2 = await collectStream(await client.chat.completions.create({
    model: "hy3", messages: msgs, max_tokens: 40, temperature: 0, stream: true }));
  check(s2.usageChunks === 0, "no usage chunk unless stream_options.include_usage");
  eq(s2.text, ca.message.content, "chat: second streamed run equal (prefix-cache hit)");

  // completions: non-streamed vs streamed; token-id prompt
  const p = "Once upon a time";
  const b = await client.completions.create({ model: "hy3", prompt: p, max_tokens: 32, temperature: 0 });
  const bs = await collectStream(await client.completions.create({ model: "hy3", prompt: p, max_tokens: 32,
    temperature: 0, stream: true, stream_options: { include_usage: true } }), "completion");
  eq(bs.text, b.choices[0].text, "completions: streamed text == non-streamed");
  eq(bs.usage, b.usage, "completions: usage equal");
  const tk = await (await fetch(`${srv.base}/tokenize`, { method: "POST", body: JSON.stringify({ prompt: p }) })).json();
  check(tk.count === b.usage.prompt_tokens, `/tokenize count ${tk.count} == prompt_tokens ${b.usage.prompt_tokens}`);
  const bi = await client.completions.create({ model: "hy3", prompt: tk.tokens, max_tokens: 32, temperature: 0 });
  eq(bi.choices[0].text, b.choices[0].text, "completions: token-id prompt == text prompt");
  const dt = await (await fetch(`${srv.base}/detokenize`, { method: "POST",
    body: JSON.stringify({ tokens: tk.tokens }) })).json();
  check(typeof dt.prompt === "string" && dt.prompt.endsWith(p), "/detokenize gives the text back");

  // seeds: same seed same output at temperature 1; n choices with seed, seed+1
  const seeded = (seed, n = 1) => client.completions.create({ model: "hy3", prompt: p, max_tokens: 24,
    temperature: 1, seed, n });
  const r1 = await seeded(1234), r2 = await seeded(1234), r3 = await seeded(999);
  eq(r1.choices[0].text, r2.choices[0].text, "same seed -> same sampled text");
  check(r1.choices[0].text !== r3.choices[0].text, "different seed -> different sampled text");
  const rn = await seeded(1234, 3);
  eq(rn.choices.length, 3, "n=3 gives 3 choices");
  eq(rn.choices[0].text, r1.choices[0].text, "choice 0 uses seed");
  eq(rn.choices[1].text, (await seeded(1235)).choices[0].text, "choice 1 uses seed+1");
  const rns = await collectStream(await client.completions.create({ model: "hy3", prompt: p, max_tokens: 24,
    temperature: 1, seed: 1234, n: 3, stream: true }), "completion");
  eq([0, 1, 2].map((i) => rns.perChoice[i]?.text), rn.choices.map((c) => c.text), "n=3 streamed == non-streamed");
  const usageN = rn.usage.completion_tokens;
  check(usageN >= 3, `n=3 usage counts all choices (${usageN})`);

  // logprobs
  const lp = await client.chat.completions.create({ model: "hy3", messages: msgs, max_tokens: 8, temperature: 0,
    logprobs: true, top_logprobs: 3 });
  const lc = lp.choices[0].logprobs?.content || [];
  eq(lc.length, lp.usage.completion_tokens, "chat logprobs: one entry per token");
  check(lc.every((e) => e.top_logprobs.length === 3 && e.logprob <= 0 &&
                        Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-4), "greedy token is the top-1 logprob");
  const clp = await client.completions.create({ model: "hy3", prompt: p, max_tokens: 6, temperature: 0, logprobs: 2 });
  check(clp.choices[0].logprobs.tokens.length === clp.usage.completion_tokens &&
        clp.choices[0].logprobs.top_logprobs.every((t) => Object.keys(t).length >= 1), "completion logprobs shape");

  // stop strings: take a piece of the greedy text as the stop string
  const full = (await client.completions.create({ model: "hy3", prompt: p, max_tokens: 48, temperature: 0,
    ignore_eos: true })).choices[0].text;
  const cps = Array.from(full);
  let start = -1;
  for (let i = 4; i + 3 < cps.length; i++) {
    const piece = cps.slice(i, i + 3).join("");
    if (!piece.includes("\uFFFD") && full.indexOf(piece) === cps.slice(0, i).join("").length) { start = i; break; }
  }
  if (start < 0) {
    check(false, `could not pick a stop string from ${JSON.stringify(full)}`);
  } else {
    const stop = cps.slice(start, start + 3).join("");
    const want = full.slice(0, full.indexOf(stop));
    const ns = await client.completions.create({ model: "hy3", prompt: p, max_tokens: 48, temperature: 0,
      ignore_eos: true, stop: [stop, "never-appears-#%"] });
    eq(ns.choices[0].text, want, `stop ${JSON.stringify(stop)}: text ends right before it`);
    eq(ns.choices[0].finish_reason, "stop", "stop string -> finish_reason stop");
    eq(ns.choices[0].stop_reason, stop, "stop_reason names the stop string (vLLM)");
    const st = await client.completions.create({ model: "hy3", prompt: p, max_tokens: 48, temperature: 0,
      ignore_eos: true, stop, stream: true });
    let acc = "", leaked = false;
    for await (const ch of st) {
      for (const c of ch.choices) {
        acc += c.text || "";
        if (!want.startsWith(acc)) leaked = true;
      }
    }
    eq(acc, want, "streamed stop: same text");
    check(!leaked, "streamed stop: every prefix of the stream is a prefix of the final text (nothing leaked)");
  }

  // reasoning: effort high -> the output starts inside the think block
  const rq = { model: "hy3", messages: [{ role: "user", content: "What is 2+2?" }], max_tokens: 40, temperature: 0,
               chat_template_kwargs: { reasoning_effort: "high" }, logprobs: true };
  const ra = await client.chat.completions.create(rq);
  const rm = ra.choices[0].message;
  const firstTok = ra.choices[0].logprobs?.content?.[0]?.token;
  check((typeof rm.reasoning_content === "string" && rm.reasoning_content.length > 0) ||
        firstTok === "</think:opensource>" || firstTok === "<｜hy_eos:opensource｜>",
        "effort high: the output starts in reasoning_content (unless the think block closes at once)");
  check(!MARK.test(rm.content || "") && !MARK.test(rm.reasoning_content || ""), "no marker text in content/reasoning");
  const rs = await collectStream(await client.chat.completions.create({ ...rq, stream: true }));
  eq([rs.reasoning, rs.text], [rm.reasoning_content || "", rm.content || ""], "reasoning: streamed == non-streamed");
  const nt = await client.chat.completions.create({ ...rq, chat_template_kwargs: { reasoning_effort: "no_think" } });
  check(!MARK.test(nt.choices[0].message.content || ""), "no_think: no marker text in content");

  // multi-byte UTF-8: streamed == non-streamed; and whenever the generated tokens' bytes form valid
  // UTF-8, the text is exactly their decoding, without U+FFFD (model-independent: uses logprobs bytes)
  const special = (t) => /^<[｜/]?|think:opensource>$/.test(t) && /opensource/.test(t);
  let validCases = 0, multibyteCases = 0;
  const texts = ["你好，世界！请写一首诗。", "Emoji 🙂🚀 and 日本語のテキスト", "Ünïcödé — ½ ∑ 🙂"];
  for (const [k, text] of texts.entries()) {
    for (const seed of [0, 1, 2, 3, 4, 5]) {
      const q = { model: "hy3", messages: [{ role: "user", content: text }], max_tokens: seed ? 6 : 40,
                  temperature: seed ? 1 : 0, seed, logprobs: true };
      const ns = (await client.chat.completions.create(q)).choices[0];
      const sx = await collectStream(await client.chat.completions.create({ ...q, stream: true }));
      if (seed === 0) eq(sx.text, ns.message.content, `UTF-8 prompt ${k}: streamed == non-streamed`);
      else if (sx.text !== ns.message.content) eq(sx.text, ns.message.content, `UTF-8 prompt ${k} seed ${seed}: streamed == non-streamed`);
      const toks = ns.logprobs?.content || [];
      if (toks.some((t) => special(t.token) && !/hy_eos/.test(t.token))) continue;
      // the last token is not text when it ended the request: "stop", or an EOS that was also the max_tokens-th token
      // ("length", as vLLM v1 reports it: the length cap is checked before EOS)
      const bytes = toks.filter((t, i) => !(i === toks.length - 1 && (ns.finish_reason === "stop" || /hy_eos/.test(t.token))))
                        .flatMap((t) => t.bytes);
      let decoded;
      try { decoded = new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(bytes)); } catch { continue; }
      validCases++;
      if (/[^\x00-\x7f]/.test(decoded)) multibyteCases++;
      if (sx.text !== decoded || sx.text.includes("\uFFFD"))
        eq(sx.text, decoded, `prompt ${k} seed ${seed}: streamed text == UTF-8 decoding of the token bytes`);
    }
  }
  check(true, `valid-UTF-8 outputs checked byte-exact: ${validCases} (${multibyteCases} with multi-byte characters)`);
  if (model.trained) check(validCases > 0, "trained model: outputs were checked byte-exact");

  const m = await metrics(srv.base);
  check(m["vllm:num_requests_running"] === 0 && m["hyinfer:kv_cache_blocks_used"] === 0,
        "idle: nothing running, no KV blocks referenced");
  check(m["vllm:prefix_cache_hits_total"] > 0, "prefix cache hits > 0 after repeated prompts");
  check(m["vllm:time_to_first_token_seconds_count"] > 0, "TTFT histogram filled");
} finally {
  await srv.stop();
}
check(true, "SIGTERM: server drained and exited 0");
finish();
