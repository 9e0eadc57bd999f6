// Observability as vLLM users query it: /metrics carries vLLM's metric names, types, the model_name
// label and vLLM's histogram buckets (what vLLM's Grafana dashboard and its examples query), and the
// values move with a request; GET /version; GET /v1/models with vLLM's fields.
import { check, eq, finish, pickModel, startServer } from "./serve_lib.mjs";

const model = pickModel();
if (!model) {
  console.log("FAIL: no model (models/hy3-tiny or tests/data/hy3-golden-llamacpp/hy3-golden-b)");
  process.exit(1);
}

// { types: {name: type}, v: {"name{labels}": value} }
async function scrape(base) {
  const txt = await (await fetch(`${base}/metrics`)).text();
  const types = {}, v = {};
  for (const line of txt.split("\n")) {
    const t = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (t) types[t[1]] = t[2];
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    v[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return { types, v, txt };
}
const L = 'model_name="hy3"';
const val = (m, name, extra = "") => m.v[`${name}{${L}${extra}}`];

const srv = await startServer(model.dir, [], "metrics");
try {
  const m0 = await scrape(srv.base);
  const expect = {
    "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge", "vllm:kv_cache_usage_perc": "gauge",
    "vllm:gpu_cache_usage_perc": "gauge", "vllm:prompt_tokens_total": "counter", "vllm:generation_tokens_total": "counter",
    "vllm:num_preemptions_total": "counter", "vllm:prefix_cache_queries_total": "counter",
    "vllm:prefix_cache_hits_total": "counter", "vllm:request_success_total": "counter",
    "vllm:time_to_first_token_seconds": "histogram", "vllm:inter_token_latency_seconds": "histogram",
    "vllm:time_per_output_token_seconds": "histogram", "vllm:request_time_per_output_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram", "vllm:request_decode_time_seconds": "histogram",
    "vllm:request_prompt_tokens": "histogram", "vllm:request_generation_tokens": "histogram",
    "vllm:request_params_n": "histogram", "vllm:request_params_max_tokens": "histogram",
  };
  const wrong = Object.entries(expect).filter(([n, t]) => m0.types[n] !== t);
  check(wrong.length === 0, `${Object.keys(expect).length} vLLM metric names with vLLM's types` +
        (wrong.length ? `; wrong or missing: ${wrong.map(([n]) => `${n} (${m0.types[n]})`).join(", ")}` : ""));
  const vllmNames = Object.keys(expect).map((n) => n.replace(/^vllm:/, ""));
  const dup = Object.keys(m0.types).filter((n) => n.startsWith("hyinfer:") && vllmNames.includes(n.slice(8)));
  eq(dup, [], "no hyinfer: copy of a vLLM-named metric");
  const series = m0.txt.split("\n").filter((l) => l && !l.startsWith("#"));
  check(series.every((l) => l.includes(`{${L}`)), `every one of ${series.length} series has the model_name label first`);
  // vLLM's TTFT and e2e buckets, as prometheus_client writes the bounds
  const ttftLe = series.filter((l) => l.startsWith("vllm:time_to_first_token_seconds_bucket")).map((l) => /le="([^"]+)"/.exec(l)[1]);
  eq(ttftLe, ["0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0", "2.5", "5.0",
              "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0", "+Inf"], "TTFT buckets are vLLM's");
  const e2eLe = series.filter((l) => l.startsWith("vllm:e2e_request_latency_seconds_bucket")).map((l) => /le="([^"]+)"/.exec(l)[1]);
  eq(e2eLe.slice(0, 4).concat(e2eLe.slice(-2)), ["0.3", "0.5", "0.8", "1.0", "7680.0", "+Inf"], "e2e buckets are vLLM's");
  eq(["stop", "length", "abort"].map((r) => val(m0, "vllm:request_success_total", `,finished_reason="${r}"`)), [0, 0, 0],
     "request_success_total has finished_reason stop/length/abort, all 0 at start");

  // one non-streamed chat, one streamed completion with n=2
  const post = (p, b) => fetch(`${srv.base}${p}`, { method: "POST", headers: { "content-type": "application/json" },
                                                   body: JSON.stringify(b) });
  const chat = await (await post("/v1/chat/completions", { model: "hy3", max_tokens: 6, temperature: 0,
                                                           messages: [{ role: "user", content: "Hello there" }] })).json();
  const sres = await post("/v1/completions", { model: "hy3", prompt: "JULIET:", max_tokens: 5, n: 2, stream: true,
                                               stream_options: { include_usage: true } });
  let usage = null;
  for (const ev of (await sres.text()).split("\n\n"))
    if (ev.startsWith("data: {")) { const j = JSON.parse(ev.slice(6)); if (j.usage) usage = j.usage; }
  const m1 = await scrape(srv.base);
  const d = (name, extra = "") => val(m1, name, extra) - val(m0, name, extra);
  const genChat = chat.usage.completion_tokens, genStream = usage?.completion_tokens;
  check(d("vllm:prompt_tokens_total") >= chat.usage.prompt_tokens + usage?.prompt_tokens,
        `prompt_tokens_total +${d("vllm:prompt_tokens_total")} (usage: ${chat.usage.prompt_tokens} + ${usage?.prompt_tokens} per choice)`);
  eq(d("vllm:generation_tokens_total"), genChat + genStream, "generation_tokens_total moved by the completion tokens");
  const fin = ["stop", "length", "abort"].map((r) => d("vllm:request_success_total", `,finished_reason="${r}"`));
  check(fin[0] + fin[1] === 3 && fin[2] === 0, `request_success_total: +${fin[0]} stop, +${fin[1]} length (3 choices)`);
  eq(d("vllm:e2e_request_latency_seconds_count"), 2, "e2e latency: one observation per request");
  eq(d("vllm:time_to_first_token_seconds_count"), 3, "TTFT: one observation per choice");
  eq(d("vllm:request_generation_tokens_count"), 3, "request_generation_tokens: one per choice");
  eq(d("vllm:request_generation_tokens_sum"), genChat + genStream, "request_generation_tokens sums to the completion tokens");
  eq([d('vllm:request_params_n_bucket', ',le="1.0"'), d("vllm:request_params_n_count")], [1, 2], "request_params_n: n=1 and n=2");
  check(d("vllm:inter_token_latency_seconds_count") > 0 && d("vllm:inter_token_latency_seconds_sum") > 0,
        `inter_token_latency: ${d("vllm:inter_token_latency_seconds_count")} gaps`);
  check(val(m1, "vllm:e2e_request_latency_seconds_bucket", ',le="+Inf"') === val(m1, "vllm:e2e_request_latency_seconds_count"),
        "the +Inf bucket equals the count");
  eq([val(m1, "vllm:num_requests_running"), val(m1, "vllm:num_requests_waiting")], [0, 0], "idle afterwards: nothing running or waiting");

  // /version and /v1/models
  const ver = await (await fetch(`${srv.base}/version`)).json();
  check(typeof ver.version === "string" && ver.version.length > 0, `GET /version: ${JSON.stringify(ver)}`);
  const models = await (await fetch(`${srv.base}/v1/models`)).json();
  const c = models.data?.[0] || {};
  eq([models.object, c.id, c.object, c.owned_by, c.root, c.parent, typeof c.created, typeof c.max_model_len],
     ["list", "hy3", "model", "vllm", model.dir, null, "number", "number"], "GET /v1/models: vLLM's ModelCard fields");
  const p = c.permission?.[0] || {};
  check(p.object === "model_permission" && /^modelperm-[0-9a-f]+$/.test(p.id) && p.allow_sampling === true &&
        p.organization === "*" && p.group === null, `permission: ${JSON.stringify(p)}`);
} finally {
  await srv.stop();
}
finish();
