// serve_client.mjs - the npm `openai` client side of the tests/dist/*.sh multi-rank server tests
// (not a test itself: the scripts run it against servers they started). Modes:
//   suite BASE OUT.json     greedy chat + completion requests, streamed and not: one alone, then all
//                           at once (two of them share a ~150-token prefix), then a prefix-cache hit;
//                           writes {id: {text, finish, usage}} (each phase's outputs under its own key)
//   compare REF.json X.json exit 1 naming every request whose output differs
//   long BASE MARK          one long streamed completion (ignore_eos); touches MARK after 5 chunks and
//                           prints how it ended: "completed N chunks" / "error after N chunks: ..." /
//                           "closed after N chunks (finish_reason none)"
//   mixed BASE              one request, then three of very different lengths at once (DP idle ranks)
//   events BASE             a streaming client that disconnects early, a stop string, then a plain
//                           request (the server still answers)
import { existsSync, writeFileSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..");
const oaPath = path.join(root, "tests", "js", "node_modules", "openai", "index.mjs");
if (!existsSync(oaPath)) {
  console.log(`skip: ${oaPath} not installed (npm install in tests/js)`);
  process.exit(77);
}
const OpenAI = (await import(pathToFileURL(oaPath).href)).default;

const [mode, ...args] = process.argv.slice(2);
const client = (base) => new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const MODEL = "hy3";

// A passage of ~150 tokens that two prompts share (prefix caching, chunked prefill at 32 tokens/step).
const LONG = "The village council met on a cold morning in the old stone hall. The baker spoke first about " +
  "the price of flour and the broken mill wheel. The blacksmith answered that the wheel could be mended " +
  "before the spring floods if the river stayed low. The schoolteacher asked for new slates and a second " +
  "stove for the classroom, because the children wore their coats all day. The miller's widow reminded " +
  "everyone that the road to the market town had washed out twice last year. After a long argument the " +
  "council agreed to repair the mill first, then the road, and to collect a small tax from every house " +
  "that owned a cart.";

async function chat(c, content, max_tokens, stream, extra = {}) {
  const req = { model: MODEL, messages: [{ role: "user", content }], max_tokens, temperature: 0, ...extra };
  if (!stream) {
    const r = await c.chat.completions.create(req);
    return { text: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage };
  }
  const s = await c.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  const out = { text: "", finish: null, usage: null };
  for await (const ch of s) {
    if (ch.usage) out.usage = ch.usage;
    for (const x of ch.choices) {
      if (x.delta?.content) out.text += x.delta.content;
      if (x.finish_reason) out.finish = x.finish_reason;
    }
  }
  return out;
}

async function cmpl(c, prompt, max_tokens, stream, extra = {}) {
  const req = { model: MODEL, prompt, max_tokens, temperature: 0, ...extra };
  if (!stream) {
    const r = await c.completions.create(req);
    return { text: r.choices[0].text, finish: r.choices[0].finish_reason, usage: r.usage };
  }
  const s = await c.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  const out = { text: "", finish: null, usage: null };
  for await (const ch of s) {
    if (ch.usage) out.usage = ch.usage;
    for (const x of ch.choices) {
      if (x.text) out.text += x.text;
      if (x.finish_reason) out.finish = x.finish_reason;
    }
  }
  return out;
}

function usageOf(u) {
  return u ? { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens } : null;
}
const tidy = (r) => ({ text: r.text, finish: r.finish, usage: usageOf(r.usage) });

async function suite(base, outPath) {
  const c = client(base);
  const reqs = {
    chat: (s) => chat(c, "Tell me a short story about a cat.", 40, s),
    chat_long: (s) => chat(c, "Describe a walk through a forest in autumn, with the colours, sounds and smells.", 60, s),
    cmpl: (s) => cmpl(c, "Once upon a time", 32, s),
    pfx_who: (s) => cmpl(c, `${LONG} Question: who spoke first at the meeting? Answer:`, 40, s),
    pfx_what: (s) => cmpl(c, `${LONG} Question: what did the council decide to repair first? Answer:`, 40, s),
  };
  const res = {};
  const t0 = Date.now();
  // phase 1: alone
  res["alone/chat"] = tidy(await reqs.chat(false));
  // phase 2: everything at once, streamed and not
  const jobs = [];
  for (const [k, f] of Object.entries(reqs)) {
    jobs.push(f(false).then((r) => { res[`conc/${k}`] = tidy(r); }));
    jobs.push(f(true).then((r) => { res[`conc/${k}/stream`] = tidy(r); }));
  }
  await Promise.all(jobs);
  // phase 3: the shared prefix again (cached blocks), streamed
  res["again/pfx_who/stream"] = tidy(await reqs.pfx_who(true));
  const secs = (Date.now() - t0) / 1000;
  // inside one server: streamed == non-streamed, and repeats equal
  let bad = 0;
  for (const k of Object.keys(reqs)) {
    if (JSON.stringify(res[`conc/${k}`]) !== JSON.stringify(res[`conc/${k}/stream`])) {
      console.log(`FAIL ${base}: ${k}: streamed != non-streamed:\n  ${JSON.stringify(res[`conc/${k}/stream`])}\n  ${JSON.stringify(res[`conc/${k}`])}`);
      bad++;
    }
  }
  if (JSON.stringify(res["alone/chat"]) !== JSON.stringify(res["conc/chat"])) {
    console.log(`FAIL ${base}: chat alone != chat in a batch`);
    bad++;
  }
  if (JSON.stringify(res["again/pfx_who/stream"]) !== JSON.stringify(res["conc/pfx_who"])) {
    console.log(`FAIL ${base}: prefix-cache hit changed the output`);
    bad++;
  }
  for (const [k, v] of Object.entries(res)) {
    if (!v.text || !v.usage || v.usage.completion_tokens < 1) {
      console.log(`FAIL ${base}: ${k}: empty output ${JSON.stringify(v)}`);
      bad++;
    }
  }
  writeFileSync(outPath, JSON.stringify(res, Object.keys(res).sort(), 1));
  console.log(`${Object.keys(res).length} requests in ${secs.toFixed(1)} s; prompt tokens of the prefix pair: ` +
              `${res["conc/pfx_who"].usage.prompt_tokens}, ${res["conc/pfx_what"].usage.prompt_tokens}`);
  process.exit(bad ? 1 : 0);
}

function compare(refPath, otherPath) {
  const a = JSON.parse(readFileSync(refPath, "utf8"));
  const b = JSON.parse(readFileSync(otherPath, "utf8"));
  let bad = 0;
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (JSON.stringify(a[k]) !== JSON.stringify(b[k])) {
      console.log(`  differs: ${k}\n    1 rank: ${JSON.stringify(a[k])}\n    here:   ${JSON.stringify(b[k])}`);
      bad++;
    }
  }
  console.log(bad ? `${bad} of ${Object.keys(a).length} outputs differ` : `all ${Object.keys(a).length} outputs equal`);
  process.exit(bad ? 1 : 0);
}

async function long(base, mark) {
  const c = client(base);
  let n = 0, finish = null;
  try {
    const s = await c.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 900, temperature: 0,
                                           ignore_eos: true, stream: true });
    for await (const ch of s) {
      n++;
      if (n === 5) writeFileSync(mark, "streaming\n");
      for (const x of ch.choices) if (x.finish_reason) finish = x.finish_reason;
    }
  } catch (e) {
    console.log(`error after ${n} chunks: ${e.constructor.name}: ${e.message}`);
    process.exit(0);
  }
  console.log(finish ? `completed ${n} chunks (finish_reason ${finish})` : `closed after ${n} chunks (finish_reason none)`);
  process.exit(0);
}

async function mixed(base) {
  const c = client(base);
  const t0 = Date.now();
  const first = await cmpl(c, "Hello", 8, false);
  console.log(`one request: ${first.usage.completion_tokens} tokens`);
  const rs = await Promise.all([
    cmpl(c, "Hi", 2, false, { ignore_eos: true }),
    cmpl(c, `${LONG} ${LONG}`, 4, true, { ignore_eos: true }),
    cmpl(c, "The river", 120, true, { ignore_eos: true }),
  ]);
  const got = rs.map((r) => r.usage.completion_tokens);
  console.log(`three at once: completion tokens ${got.join(", ")}; prompt tokens ${rs.map((r) => r.usage.prompt_tokens).join(", ")}` +
              ` (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  const ok = JSON.stringify(got) === JSON.stringify([2, 4, 120]) && rs.every((r) => r.finish === "length");
  console.log(ok ? "mixed: all completed" : "mixed: FAIL: unexpected lengths or finish reasons");
  process.exit(ok ? 0 : 1);
}

async function events(base) {
  const c = client(base);
  let bad = 0;
  // 1. a streaming client that goes away after 3 chunks of a long answer
  const ac = new AbortController();
  let n = 0;
  try {
    const s = await c.completions.create({ model: MODEL, prompt: "The history of the kingdom", max_tokens: 400,
                                           temperature: 0, ignore_eos: true, stream: true }, { signal: ac.signal });
    for await (const ch of s) {
      void ch;
      if (++n === 3) ac.abort();
    }
  } catch (e) {
    void e;
  }
  console.log(`disconnected a stream after ${n} chunks`);
  // 2. a stop string: find a word of the greedy answer, then stop on it
  const plain = await cmpl(c, "Once upon a time", 32, false);
  const words = plain.text.split(/\s+/).filter((w) => w.length >= 3);
  const stop = words.length ? words[Math.min(2, words.length - 1)] : "the";
  const st = await cmpl(c, "Once upon a time", 32, true, { stop: [stop] });
  const cut = plain.text.indexOf(stop);
  if (cut < 0 || st.finish !== "stop" || st.text !== plain.text.slice(0, cut)) {
    console.log(`FAIL stop ${JSON.stringify(stop)}: got ${JSON.stringify(st)} from ${JSON.stringify(plain.text)}`);
    bad++;
  } else {
    console.log(`stop string ${JSON.stringify(stop)}: text cut at ${cut} chars, finish_reason stop`);
  }
  // 3. a chat stopped by max_tokens while another stream is cut off, then a plain request
  const ac2 = new AbortController();
  const cut2 = (async () => {
    let k = 0;
    try {
      const s = await c.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Count to one hundred." }],
                                                  max_tokens: 300, temperature: 0, stream: true }, { signal: ac2.signal });
      for await (const ch of s) { void ch; if (++k === 2) ac2.abort(); }
    } catch (e) { void e; }
    return k;
  })();
  // ignore_eos (vLLM's extension): the answer must run into max_tokens whatever the weights say first
  const [k2, lenr] = await Promise.all([cut2, chat(c, "Name three colours.", 7, false, { ignore_eos: true })]);
  if (lenr.finish !== "length" || lenr.usage.completion_tokens !== 7) {
    console.log(`FAIL max_tokens 7: ${JSON.stringify(lenr)}`);
    bad++;
  } else {
    console.log(`max_tokens reached while a second stream was dropped after ${k2} chunks`);
  }
  const after = await cmpl(c, "Once upon a time", 32, false);
  if (after.text !== plain.text) {
    console.log(`FAIL the server answers differently after the disconnects: ${JSON.stringify(after.text)}`);
    bad++;
  } else {
    console.log("same greedy answer after the disconnects");
  }
  process.exit(bad ? 1 : 0);
}

try {
  if (mode === "suite") await suite(args[0], args[1]);
  else if (mode === "compare") compare(args[0], args[1]);
  else if (mode === "long") await long(args[0], args[1]);
  else if (mode === "mixed") await mixed(args[0]);
  else if (mode === "events") await events(args[0]);
  else {
    console.log(`usage: serve_client.mjs suite|compare|long|mixed|events ...`);
    process.exit(2);
  }
} catch (e) {
  console.log(`FAIL ${mode}: ${e.constructor.name}: ${e.message}`);
  process.exit(1);
}
