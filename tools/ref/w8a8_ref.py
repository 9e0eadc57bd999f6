"""Independent numpy oracle of Ascend W8A8 (msModelSlim / vLLM-Ascend; specs/ascend_w8a8.md §2).

Written from the spec, not from hyinfer's C code:
- weights (W8A8_DYNAMIC, per output row): s = max(|w|) / 127 in fp32, at least FLT_EPSILON;
  q = round-half-even(w / s) clamped to [-127, 127]; weight_offset zeros.
- dynamic activations (per token): s_x = max|x| / 127 (1 for a zero row); q = rne(x / s_x) clamped to [-128, 127].
- static activations: q = saturate(rne(x * (1 / s_in) + o)).
- y = (int sum q_x * q_w) * s_w * s_x (dynamic), (int sum + quant_bias) * deq_scale (static).

Command line:
  w8a8_ref.py check-quantize IN OUT [--recipe w8a8-dynamic|w8a8|w8a8-mix]
                                      OUT (hyinfer quantize --quant-dtype RECIPE of IN, round-to-nearest) holds
                                      exactly the oracle's int8 weights and scales, zero offsets, a description
                                      naming every tensor with the recipe's type (w8a8: static W8A8 except routed
                                      experts; w8a8-mix: static attention linears and MTP eh_proj only) and an index naming the shard;
                                      static linears: an input offset in [-128, 127], deq_scale = fp32(input_scale
                                      * s_w) and quant_bias = -offset * sum_k q_w exactly; prints a summary.
  w8a8_ref.py to-static DIR MODULE SCALE OFFSET [--deq i64|f32]
                                      rewrites MODULE of an Ascend W8A8_DYNAMIC checkpoint DIR as static W8A8
                                      (input_scale, input_offset, deq_scale = SCALE * s_w, quant_bias =
                                      -OFFSET * sum_k q_w), deq_scale stored as fp32 or as int64 fp32 bits.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402

FLT_EPS = np.float32(np.finfo(np.float32).eps)


def quantize_weight(w):
    """w [N, K] (fp32 values) -> (q int8 [N, K], s fp32 [N])."""
    w = np.asarray(w, dtype=np.float32)
    s = (np.max(np.abs(w), axis=1) / np.float32(127.0)).astype(np.float32)
    s = np.maximum(s, FLT_EPS).astype(np.float32)
    q = np.rint((w / s[:, None]).astype(np.float32))  # numpy rint: half to even
    return np.clip(q, -127, 127).astype(np.int8), s


def quantize_act_dynamic(x):
    """x [K] fp32 -> (q int8 [K], s_x fp32)."""
    x = np.asarray(x, dtype=np.float32)
    a = np.float32(np.max(np.abs(x))) if x.size else np.float32(0)
    s = np.float32(a / np.float32(127.0)) if a > 0 else np.float32(1.0)
    return np.clip(np.rint((x / s).astype(np.float32)), -128, 127).astype(np.int8), s


def quantize_act_static(x, s_in, o):
    r = np.float32(1.0) / np.float32(s_in)
    v = np.rint((np.asarray(x, dtype=np.float32) * r).astype(np.float32) + np.float32(o))
    return np.clip(v, -128, 127).astype(np.int8)


def linear_dynamic(x, q_w, s_w):
    """y [N] of one token: exact integer dots, then (acc * s_w) * s_x in fp32."""
    q_x, s_x = quantize_act_dynamic(x)
    acc = q_w.astype(np.int64) @ q_x.astype(np.int64)
    return ((acc.astype(np.float32) * s_w).astype(np.float32) * s_x).astype(np.float32)


def _shard(d):
    idx = json.load(open(os.path.join(d, "quant_model_weights.safetensors.index.json")))
    files = sorted(set(idx["weight_map"].values()))
    assert len(files) == 1, files
    return os.path.join(d, files[0]), idx


def _bf16_source(d):
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            out.update(st.load(os.path.join(d, f)))
    return out


def expected_type(mod, recipe):
    """The type RECIPE gives linear MOD (specs/ascend_w8a8.md §2; vLLM-Ascend's MoE method is dynamic only; lm_head
    and the embedding, when quantized, have no calibrated input: dynamic)."""
    if mod in ("lm_head", "model.embed_tokens"):
        return "W8A8_DYNAMIC"
    if recipe == "w8a8" and ".mlp.experts." not in mod:
        return "W8A8"
    if recipe == "w8a8-mix" and (".self_attn." in mod or mod.endswith(".eh_proj")):  # the attn-linear target
        return "W8A8"
    return "W8A8_DYNAMIC"


def _check_static(out, mod, q, s_w):
    s_x = out[mod + ".input_scale"][1].reshape(-1)
    o = out[mod + ".input_offset"][1].reshape(-1)
    assert s_x.size == 1 and o.size == 1 and s_x[0] > 0 and o[0] == np.rint(o[0]) and -128 <= o[0] <= 127, mod
    assert mod + ".weight_scale" not in out and mod + ".weight_offset" not in out, mod
    deq = out[mod + ".deq_scale"][1].reshape(-1)
    want = (s_x[0] * s_w).astype(np.float32)
    assert deq.dtype == np.float32 and np.array_equal(deq.view(np.uint32), want.view(np.uint32)), mod
    bias = out[mod + ".quant_bias"][1].reshape(-1)
    want_b = -np.int64(o[0]) * q.astype(np.int64).sum(axis=1)
    assert bias.dtype == np.int32 and np.array_equal(bias.astype(np.int64), want_b), mod


def check_quantize(src_dir, out_dir, recipe="w8a8-dynamic"):
    src = _bf16_source(src_dir)
    shard, idx = _shard(out_dir)
    out = st.load(shard)
    desc = json.load(open(os.path.join(out_dir, "quant_model_description.json")))
    want_mqt = "W8A8" if recipe == "w8a8" else "W8A8_DYNAMIC"
    assert desc.get("model_quant_type") == want_mqt, desc.get("model_quant_type")
    assert set(idx["weight_map"]) == set(out), "index and shard disagree"
    named = {k for k, v in desc.items() if isinstance(v, str) and k not in ("model_quant_type", "version")}
    assert named == set(out), "description and shard disagree: %s" % sorted(named ^ set(out))[:5]
    n_q = n_s = n_f = 0
    for name, (dt, arr) in out.items():
        typ = desc[name]
        if name.endswith(".weight") and dt == "I8":
            mod = name[: -len(".weight")]
            assert typ == expected_type(mod, recipe), (name, typ, recipe)
            w = _source_weight(src, mod)
            q, s = quantize_weight(w)
            assert np.array_equal(q, arr), "int8 weight of %s differs from the oracle" % mod
            for k in (".input_scale", ".input_offset", ".deq_scale", ".quant_bias", ".weight_scale",
                      ".weight_offset"):
                assert mod + k not in out or desc[mod + k] == typ, (mod + k, desc[mod + k], typ)
            n_q += 1
            if typ == "W8A8":
                _check_static(out, mod, q, s)
                n_s += 1
                continue
            s_out = out[mod + ".weight_scale"][1].reshape(-1)
            assert s_out.dtype == np.float32 and np.array_equal(s_out.view(np.uint32), s.view(np.uint32)), mod
            assert not np.any(out[mod + ".weight_offset"][1]), mod
        elif typ == "FLOAT":
            assert dt in ("BF16", "F32", "F16"), (name, dt)
            s_dt, s_arr = src[name]
            assert s_dt == dt and np.array_equal(s_arr.view(np.uint8), arr.view(np.uint8)), name
            n_f += 1
    print("check-quantize: %d int8 matrices (%d static) equal the oracle's, %d float tensors copied unchanged"
          % (n_q, n_s, n_f))
    return 0


def _source_weight(src, mod):
    if mod + ".weight" in src:
        return src[mod + ".weight"][1].astype(np.float32)
    # per-expert names written from fused stacks: <p>.mlp.experts.<e>.<gate|up|down>_proj
    head, _, rest = mod.rpartition(".mlp.experts.")
    e, proj = rest.split(".")
    e = int(e)
    if proj == "down_proj":
        return src[head + ".mlp.experts.down_proj"][1][e].astype(np.float32)
    gu = src[head + ".mlp.experts.gate_up_proj"][1][e].astype(np.float32)
    half = gu.shape[0] // 2
    return gu[:half] if proj == "gate_proj" else gu[half:]


def to_static(d, module, scale, offset, deq):
    shard, _ = _shard(d)
    t = st.load(shard, widen_bf16=False)
    q = t[module + ".weight"][1]
    s_w = t.pop(module + ".weight_scale")[1].reshape(-1).astype(np.float32)
    t.pop(module + ".weight_offset", None)
    deq_scale = (np.float32(scale) * s_w).astype(np.float32)
    quant_bias = (-np.int64(offset) * q.astype(np.int64).sum(axis=1)).astype(np.int32)
    t[module + ".input_scale"] = ("F32", np.array([scale], dtype=np.float32))
    t[module + ".input_offset"] = ("F32", np.array([offset], dtype=np.float32))
    if deq == "i64":  # the fp32 bits sign-extended as int32 -> int64 (msModelSlim deqscale.py)
        t[module + ".deq_scale"] = ("I64", deq_scale.view(np.int32).astype(np.int64))
    else:
        t[module + ".deq_scale"] = ("F32", deq_scale)
    t[module + ".quant_bias"] = ("I32", quant_bias)
    st.save(shard, [(k, dt, a) for k, (dt, a) in t.items()])
    desc_path = os.path.join(d, "quant_model_description.json")
    desc = json.load(open(desc_path))
    for k in (".weight_scale", ".weight_offset"):
        desc.pop(module + k, None)
    for k in (".weight", ".input_scale", ".input_offset", ".deq_scale", ".quant_bias"):
        desc[module + k] = "W8A8"
    json.dump(desc, open(desc_path, "w"), indent=2)
    idx_path = os.path.join(d, "quant_model_weights.safetensors.index.json")
    idx = json.load(open(idx_path))
    idx["weight_map"] = {k: os.path.basename(shard) for k in t}
    json.dump(idx, open(idx_path, "w"), indent=2)
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("check-quantize")
    a.add_argument("src")
    a.add_argument("out")
    a.add_argument("--recipe", choices=["w8a8-dynamic", "w8a8", "w8a8-mix"], default="w8a8-dynamic")
    b = sub.add_parser("to-static")
    b.add_argument("dir")
    b.add_argument("module")
    b.add_argument("scale", type=float)
    b.add_argument("offset", type=int)
    b.add_argument("--deq", choices=["i64", "f32"], default="f32")
    args = ap.parse_args(argv)
    if args.cmd == "check-quantize":
        return check_quantize(args.src, args.out, args.recipe)
    return to_static(args.dir, args.module, args.scale, args.offset, args.deq)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
