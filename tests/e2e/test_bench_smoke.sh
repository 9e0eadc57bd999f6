#!/usr/bin/env bash
# `hyinfer bench latency --json` end to end on the tiny hy3-golden-b checkpoint (small probe buffer,
# short prompts, few decode steps; a few seconds). Checks that every reported figure exists and is a
# positive finite number, and that the byte/FLOP accounting equals the counts computed here from the
# checkpoint header (deterministic: each token selects exactly top-k experts). Never asserts on speed.
set -euo pipefail
cd "${HYINFER_ROOT:-.}"
BIN=build/hyinfer
PY="${PYTHON:-/usr/bin/python3}"
MODEL="tests/data/hy3-golden-llamacpp/hy3-golden-b"
W=build/e2e-bench
rm -rf "$W"; mkdir -p "$W"
fail() { echo "FAIL: $*"; exit 1; }
[ -x "$BIN" ] || fail "$BIN not built"
[ -f "$MODEL/model.safetensors" ] || { echo "FAIL: $MODEL missing (tests/data is part of the repository)"; exit 1; }

"$BIN" bench latency -m "$MODEL" --prompt-lens 8,24 --batch-sizes 1,3 --decode-steps 3 --decode-context 5 \
  --project-layers 80 --bw-bytes 16M --bw-reps 2 --flop-seconds 0.02 --threads 2 --json >"$W/out.json" 2>"$W/err" \
  || { cat "$W/err"; fail "bench exited non-zero"; }

"$PY" - "$W/out.json" "$MODEL" <<'PY'
import json, math, struct, sys

out = json.load(open(sys.argv[1]))
model = sys.argv[2]
errs = []

def pos(path, v):
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
        errs.append("%s = %r is not a positive number" % (path, v))

for k in ("mem_bw_gbs", "peak_gflops", "decode_roofline_fraction", "prefill_peak_fraction",
          "projected_full_model_ms_per_token"):
    pos(k, out.get(k))
for key, wanted in (("prefill_tokens_per_s", ["8", "24"]), ("decode_tokens_per_s", ["1", "3"])):
    obj = out.get(key)
    if not isinstance(obj, dict) or sorted(obj) != sorted(wanted):
        errs.append("%s = %r, want keys %s" % (key, obj, wanted))
        continue
    for k in wanted:
        pos("%s.%s" % (key, k), obj[k])
stages = ["attention", "router", "routed_experts", "shared_expert", "dense_mlp", "lm_head", "other", "total"]
for sec in ("prefill", "decode"):
    for k, d in out.get(sec, {}).items():
        st = d.get("stages", {})
        for s in stages:
            if s not in st or not isinstance(st[s], (int, float)) or st[s] < 0:
                errs.append("%s.%s.stages.%s missing or negative: %r" % (sec, k, s, st.get(s)))
        for s in ("attention", "lm_head", "total"):
            pos("%s.%s.stages.%s" % (sec, k, s), st.get(s))
for k in ("step_over_roofline", "tokens_per_s_over_batch1", "roofline_step_s", "weight_bytes_per_step"):
    pos("batch_scaling." + k, out.get("batch_scaling", {}).get(k))
if out.get("batch_scaling", {}).get("batch") != 3:
    errs.append("batch_scaling.batch should be the largest batch (3)")
if "fma" not in out.get("cpu", {}).get("units", []) and out.get("peak_unit") == "fma":
    errs.append("peak unit fma reported without the fma unit")

# ---- accounting, recomputed from config.json and the safetensors header ----
cfg = json.load(open(model + "/config.json"))
raw = open(model + "/model.safetensors", "rb").read()
(hl,) = struct.unpack("<Q", raw[:8])
hdr = json.loads(raw[8:8 + hl])
size = {"BF16": 2, "F16": 2, "F32": 4}

def nb(name):
    t = hdr[name]
    n = 1
    for s in t["shape"]:
        n *= s
    return n * size[t["dtype"]], n

H, D, V = cfg["hidden_size"], cfg["head_dim"], cfg["vocab_size"]
nh, nkv, E, K = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_experts"], cfg["num_experts_per_tok"]
L, ndense = cfg["num_hidden_layers"], cfg["first_k_dense_replace"]
attn_b = attn_p = dense_b = dense_p = shared_b = shared_p = exp_b = exp_p = 0
for l in range(L):
    pre = "model.layers.%d." % l
    for w in "qkvo":
        b, p = nb(pre + "self_attn.%s_proj.weight" % w)
        attn_b += b; attn_p += p
    if l < ndense:
        for w in ("gate", "up", "down"):
            b, p = nb(pre + "mlp.%s_proj.weight" % w)
            dense_b += b; dense_p += p
    else:
        for w in ("gate", "up", "down"):
            sh = pre + "mlp.shared_mlp.%s_proj.weight" % w  # inner or outer (shared_experts) spelling
            b, p = nb(sh if sh in hdr else pre + "mlp.shared_experts.%s_proj.weight" % w)
            shared_b += b; shared_p += p
            b, p = nb(pre + "mlp.experts.0.%s_proj.weight" % w)  # all experts have one size
            if l == ndense:
                exp_b += b; exp_p += p
nmoe = L - ndense
lm_b, lm_p = nb("lm_head.weight")
emb_row = H * size[hdr["model.embed_tokens.weight"]["dtype"]]
norms = H * 4 + L * (2 * H * 4 + 2 * D * 4)
router_b = nmoe * (E * H * 4 + E * 4)

def close(what, got, want):
    if abs(got - want) > 1e-9 * max(1.0, abs(want)):
        errs.append("%s = %r, want %r" % (what, got, want))

d1 = out["decode"]["1"]
close("decode.1.distinct_experts_per_step", d1["distinct_experts_per_step"], K * nmoe)
want_bytes = emb_row + attn_b + dense_b + router_b + K * nmoe * exp_b + shared_b + norms + lm_b
close("decode.1.weight_bytes_per_step", d1["weight_bytes_per_step"], want_bytes)
steps, ctx0 = 3, 5  # timed step k = 1..steps decodes position ctx0 + k: context ctx0 + k + 1
mean_ctx = sum(ctx0 + k + 1 for k in range(1, steps + 1)) / steps
close("decode.1.kv_bytes_per_step", d1["kv_bytes_per_step"], mean_ctx * L * nkv * D * 2 * 2)
d3 = out["decode"]["3"]
if not (K * nmoe <= d3["distinct_experts_per_step"] <= min(3 * K, E) * nmoe):
    errs.append("decode.3 distinct experts per step %r outside [%d, %d]" % (d3["distinct_experts_per_step"], K * nmoe,
                                                                           min(3 * K, E) * nmoe))
for P in (8, 24):
    f = out["prefill"][str(P)]
    want = (2 * P * (attn_p + dense_p + shared_p) + 4 * nh * D * L * P * (P + 1) / 2 + 2 * P * E * H * nmoe +
            2 * P * K * nmoe * exp_p + 2 * lm_p)
    close("prefill.%d.flops" % P, f["flops"], want)
    close("prefill.%d.tokens_per_s" % P, out["prefill_tokens_per_s"][str(P)], P / f["seconds"])
# each decode run's roofline: the larger of the probes just before and after it
for b in ("1", "3"):
    e = out["decode"][b]
    if not (e["mem_bw_gbs_before"] > 0 and e["mem_bw_gbs_after"] > 0):
        errs.append("decode.%s bracketing probes %r / %r" % (b, e["mem_bw_gbs_before"], e["mem_bw_gbs_after"]))
    close("decode.%s.mem_bw_gbs" % b, e["mem_bw_gbs"], max(e["mem_bw_gbs_before"], e["mem_bw_gbs_after"]))
    close("decode.%s.roofline_step_s" % b, e["roofline_step_s"], e["weight_bytes_per_step"] / (e["mem_bw_gbs"] * 1e9))
close("decode_roofline_fraction", out["decode_roofline_fraction"],
      d1["weight_bytes_per_step"] / d1["step_s"] / (d1["mem_bw_gbs"] * 1e9))
f24 = out["prefill"]["24"]  # 24 is the length closest to 512
close("prefill_peak_fraction", out["prefill_peak_fraction"], f24["flops"] / f24["seconds"] / (out["peak_gflops"] * 1e9))
if errs:
    print("\n".join(errs))
    sys.exit(1)
print("bench JSON ok: %d keys" % len(out))
PY

# the table form prints the ratios beside their raw figures
"$BIN" bench latency -m "$MODEL" --prompt-lens 8 --batch-sizes 1 --decode-steps 2 --bw-bytes 8M --bw-reps 1 \
  --flop-seconds 0.01 --json-out "$W/table.json" >"$W/table.txt" 2>/dev/null || fail "table run exited non-zero"
"$PY" -c 'import json,sys; o=json.load(open(sys.argv[1])); assert o["mem_bw_gbs"] > 0 and "1" in o["decode_tokens_per_s"]' \
  "$W/table.json" || fail "--json-out file is not the bench JSON"
for s in "read bandwidth" "decode_roofline_fraction" "prefill_peak_fraction" "projected_full_model_ms/tok" \
         "stage breakdown"; do
  grep -q "$s" "$W/table.txt" || fail "table lacks \"$s\""
done
# a toy model (hidden 96) is projected to no published model's depth unless --project-layers asks
grep -q "projected_full_model_ms/tok  not projected: hidden_size 96" "$W/table.txt" ||
  fail "the toy model's table projects to a full model: $(grep projected "$W/table.txt")"
"$PY" -c 'import json,sys; o=json.load(open(sys.argv[1])); assert "projected_full_model_ms_per_token" not in o' \
  "$W/table.json" || fail "the toy model's JSON has a projection without --project-layers"

# tools/make/make_bench_model.py: the tiny shape end to end (deterministic, loads with its MTP layer, benches),
# and the hy3 / hy-mt2 shapes' tensor lists (not written: several GB) against the real per-layer dims.
"$PY" tools/make/make_bench_model.py --out "$W/tiny" --shape tiny --mtp --seed 5 2>/dev/null
"$PY" tools/make/make_bench_model.py --out "$W/tiny2" --shape tiny --mtp --seed 5 2>/dev/null
cmp -s "$W/tiny/model.safetensors" "$W/tiny2/model.safetensors" || fail "same seed gave different bench models"
"$BIN" logits -m "$W/tiny" --prompt-ids 1,2,3 --mtp --dtype float32 --json >"$W/tiny_logits.json" 2>"$W/e0" \
  || fail "tiny bench model does not load: $(cat "$W/e0")"
"$BIN" bench latency -m "$W/tiny" --prompt-lens 4 --batch-sizes 1 --decode-steps 2 --bw-bytes 4M --bw-reps 1 \
  --flop-seconds 0.01 --json >"$W/tiny.json" 2>/dev/null || fail "bench on the tiny bench model failed"
"$PY" - "$W/tiny.json" "$W/tiny_logits.json" <<'PY' || fail "tiny bench model checks"
import json, math, sys
o = json.load(open(sys.argv[1]))
assert o["model"]["experts"] == 8 and o["model"]["layers"] == 4 and o["model"]["moe_layers"] == 3, o["model"]
assert o["decode"]["1"]["distinct_experts_per_step"] == 2 * 3, o["decode"]["1"]
lg = json.load(open(sys.argv[2]))
assert len(lg["logits"][0]) == 512 and len(lg["mtp_logits"]) == 2
assert all(math.isfinite(x) for x in lg["logits"][0] + lg["mtp_logits"][0])
PY
"$PY" - <<'PY' || fail "bench model shapes"
import sys
sys.path.insert(0, "tools/ref")
sys.path.insert(0, "tools/make")
import make_bench_model as mb
def shapes(shape):
    return {n: (d, s) for n, d, s, _ in mb.tensor_list(mb.SHAPES[shape], False)}
t = shapes("hy3")
assert t["model.layers.0.self_attn.q_proj.weight"] == ("BF16", (8192, 4096))
assert t["model.layers.3.self_attn.k_proj.weight"] == ("BF16", (1024, 4096))
assert t["model.layers.0.mlp.gate_proj.weight"] == ("BF16", (13312, 4096))
assert t["model.layers.1.mlp.experts.31.down_proj.weight"] == ("BF16", (4096, 1536))
assert "model.layers.1.mlp.experts.32.down_proj.weight" not in t
assert t["model.layers.2.mlp.router.gate.weight"] == ("F32", (32, 4096))
assert t["model.layers.2.mlp.expert_bias"] == ("F32", (32,))
assert t["model.layers.3.mlp.shared_mlp.up_proj.weight"] == ("BF16", (1536, 4096))
assert t["lm_head.weight"] == ("BF16", (120832, 4096)) and "model.layers.4.input_layernorm.weight" not in t
cfg = mb.make_config(mb.SHAPES["hy3"], False)
assert (cfg["num_experts_per_tok"], cfg["router_scaling_factor"], cfg["route_norm"], cfg["num_nextn_predict_layers"],
        cfg["rope_parameters"]["rope_theta"]) == (8, 2.826, True, 0, 11158840.0)
m = shapes("hy-mt2")
assert m["model.layers.1.mlp.experts.127.gate_proj.weight"] == ("BF16", (768, 2048))
assert m["model.layers.1.self_attn.q_proj.weight"] == ("BF16", (4096, 2048))
assert m["model.layers.1.self_attn.v_proj.weight"] == ("BF16", (512, 2048))
h4 = shapes("hy4")  # Hy4-preview per-layer shapes (specs/hy4_architecture.md §6.1, §7.1, §9.2, §4.1)
assert h4["model.layers.1.self_attn.q_b_proj.weight"] == ("BF16", (16384, 2048))
assert h4["model.layers.1.self_attn.kv_a_proj_with_mqa.weight"] == ("BF16", (576, 6144))
assert h4["model.layers.1.self_attn.kv_b_proj.weight"] == ("BF16", (28672, 512))
assert h4["model.layers.1.self_attn.o_proj.weight"] == ("BF16", (6144, 16384))
assert h4["model.layers.1.self_attn.indexer.wq_b.weight"] == ("BF16", (4096, 2048))
assert "model.layers.2.self_attn.indexer.wk.weight" not in h4
assert h4["model.layers.1.hc_attn_layer.hc_pre.hc_fn"] == ("F32", (8, 24576))
assert h4["model.layers.1.mlp.experts.gate_up_proj"] == ("BF16", (16, 4096, 6144))
assert h4["model.layers.0.mlp.gate_proj.weight"] == ("BF16", (18432, 6144))
PY

# hy_v4: bench latency on the tiny-hy4 bench checkpoint (MLA, indexer, hyper-connections) runs and reports
"$PY" tools/make/make_bench_model.py --out "$W/tiny-hy4" --shape tiny-hy4 --mtp 2>/dev/null
"$BIN" bench latency -m "$W/tiny-hy4" --prompt-lens 8,80 --batch-sizes 1,3 --decode-steps 3 --decode-context 70 \
  --project-layers 78 --bw-bytes 16M --bw-reps 2 --flop-seconds 0.02 --threads 2 --json >"$W/out4.json" 2>"$W/err4" \
  || { cat "$W/err4"; fail "bench on tiny-hy4 exited non-zero"; }
"$PY" - "$W/out4.json" <<'PY'
import json, math, sys
out = json.load(open(sys.argv[1]))
for k in ("decode_roofline_fraction", "prefill_peak_fraction", "projected_full_model_ms_per_token"):
    v = out.get(k)
    assert isinstance(v, (int, float)) and math.isfinite(v) and v > 0, (k, v)
print("tiny-hy4 bench: decode roofline %.4f, prefill peak %.4f" % (out["decode_roofline_fraction"],
                                                                   out["prefill_peak_fraction"]))
PY
# a synthetic 3000-token context (past index_topk, over many cache blocks): decode
# runs on filled rows without the prefill, the KV bytes read grow with the context, the JSON says how it was made
"$BIN" bench latency -m "$W/tiny-hy4" --prompt-lens 8 --batch-sizes 1,2 --decode-steps 2 --decode-context 3000 \
  --context-fill synthetic --bw-bytes 16M --bw-reps 1 --flop-seconds 0.02 --threads 2 --json >"$W/out5.json" \
  2>"$W/err5" || { cat "$W/err5"; fail "bench --context-fill synthetic on tiny-hy4 exited non-zero"; }
"$PY" - "$W/out4.json" "$W/out5.json" <<'PY'
import json, sys
short, long_ = (json.load(open(p))["decode"]["1"] for p in sys.argv[1:3])
assert long_["context_fill"] == "synthetic" and long_["context_tokens"] == 3000, long_
assert short["context_fill"] == "prefill" and short["context_tokens"] == 70, short
assert long_["kv_bytes_per_step"] > 10 * short["kv_bytes_per_step"], (long_["kv_bytes_per_step"], short["kv_bytes_per_step"])
print("tiny-hy4 synthetic 3000-token context: decode %.4f s/step, %.3g KV bytes/step" % (long_["step_s"],
                                                                                  long_["kv_bytes_per_step"]))
PY
"$BIN" bench latency -m "$W/tiny-hy4" --context-fill random >/dev/null 2>"$W/e6" && fail "--context-fill random accepted"
grep -q -- "--context-fill must be prefill or synthetic" "$W/e6" || fail "bad --context-fill: $(cat "$W/e6")"

# bad input: clear errors, exit 2
set +e
"$BIN" bench -m "$MODEL" >/dev/null 2>"$W/e1"; r1=$?
"$BIN" bench latency -m "$MODEL" --prompt-lens 8,x >/dev/null 2>"$W/e2"; r2=$?
"$BIN" bench latency -m "$MODEL" --bw-bytes 12Q >/dev/null 2>"$W/e3"; r3=$?
"$BIN" bench latency -m "$MODEL" --json-out "$W/no/such/dir/x.json" >/dev/null 2>"$W/e4"; r4=$?
"$BIN" bench latency -m "$W/no-model" >/dev/null 2>"$W/e5"; r5=$?
set -e
[ $r1 = 2 ] && grep -q latency "$W/e1" || fail "bench without a mode: rc $r1, $(cat "$W/e1")"
[ $r2 = 2 ] && grep -q -- --prompt-lens "$W/e2" || fail "bad --prompt-lens: rc $r2, $(cat "$W/e2")"
[ $r3 = 2 ] && grep -q -- --bw-bytes "$W/e3" || fail "bad --bw-bytes: rc $r3, $(cat "$W/e3")"
[ $r4 = 2 ] && grep -q -- --json-out "$W/e4" || fail "unwritable --json-out: rc $r4, $(cat "$W/e4")"
[ $r5 = 1 ] && grep -q "no-model" "$W/e5" && ! grep -q "read bandwidth" "$W/e5" \
  || fail "missing model dir should fail before the probes: rc $r5, $(cat "$W/e5")"
echo "PASS bench smoke"
