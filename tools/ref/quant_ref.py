#!/usr/bin/python3
"""Reference (oracle) for hyinfer's quantized formats, numpy only, independent of the C code.

Formats (spec hy3_architecture.md §5.1): FP8 E4M3FN, FP4 E2M1, E8M0; OCP MX blocks of 32 along K.
Encoders here work by nearest-value search over the full table of representable values (ties to the even
code), not by bit manipulation, so they are a second opinion on src/quant/formats.c.

Library:
  e4m3_decode(u8) / e4m3_encode(f32), e2m1_decode(nibbles) / e2m1_encode(f32), e8m0_decode(u8)
  mx_quantize(w [N, K] f32, bits 8|4) -> (q, scales)    q: u8 [N, K] (E4M3) or [N, K/2] (E2M1 pairs, low first)
  mx_dequantize(q, scales, bits, K) -> f32 [N, K]
  fp8_tensor_quantize(w, scale_dtype="F32") -> (q u8 [N, K], scale f32)  (scale = max|W|/448, 1 if W == 0)
  quantize_dir(IN, OUT, fmt, ...)   writes a quantized checkpoint (see its doc) with tools/ref/safetensors_np.py
  dequantize_dir(QDIR, OUT)          writes the exact dequantized weights as F32 (for tools/ref/hy3_ref.py)
CLI:
  quant_ref.py quantize IN OUT fp8|mxfp8|mxfp4|hybrid [--hy3-fp8-bf16-scale] [--fused] ...
  quant_ref.py dequantize QDIR OUT
"""
import json
import os
import re
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402

# ---- element formats ---------------------------------------------------------------------------


def e4m3_decode(b):
    """u8 array -> float32 values (NaN for 0x7f / 0xff)."""
    b = np.asarray(b, dtype=np.uint8).astype(np.int64)
    s = np.where(b & 0x80, -1.0, 1.0)
    e = (b >> 3) & 0xF
    m = b & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1.0 + m / 8.0) * np.exp2(e - 7.0))
    v = s * v
    v = np.where((b & 0x7F) == 0x7F, np.nan, v)
    return v.astype(np.float32)


# positive finite E4M3 values, code 0..126, ascending
_E4M3_POS = e4m3_decode(np.arange(0, 127, dtype=np.uint8)).astype(np.float64)
_E2M1_POS = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def _nearest_code(a, table):
    """a >= 0 float64 array, table ascending -> code index of the nearest value, ties to the even index,
    values beyond the last saturate to it."""
    hi = np.searchsorted(table, a, side="left")  # table[hi-1] < a <= table[hi]
    hi = np.clip(hi, 1, len(table) - 1)
    lo = hi - 1
    dlo = a - table[lo]
    dhi = table[hi] - a
    code = np.where(dlo < dhi, lo, hi)
    tie = dlo == dhi
    code = np.where(tie, np.where(lo % 2 == 0, lo, hi), code)
    code = np.where(a >= table[-1], len(table) - 1, code)
    code = np.where(a <= 0, 0, code)
    return code.astype(np.int64)


def e4m3_encode(x):
    """float32 array -> u8 E4M3FN codes: nearest, ties to even, saturate to +-448, NaN -> 0x7f|sign."""
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x.astype(np.float64))
    sign = np.signbit(x).astype(np.int64) << 7
    nan = np.isnan(x)
    code = _nearest_code(np.where(nan, 0.0, a), _E4M3_POS)
    code = np.where(nan, 0x7F, code)
    return (code | sign).astype(np.uint8)


def e2m1_decode(n):
    n = np.asarray(n, dtype=np.uint8) & 0xF
    v = _E2M1_POS[n & 7]
    return np.where(n & 8, -v, v).astype(np.float32)


def e2m1_encode(x):
    """float32 array -> E2M1 nibbles (u8 0..15): nearest, ties to even, saturate to +-6, NaN -> 0."""
    x = np.asarray(x, dtype=np.float32)
    nan = np.isnan(x)
    code = _nearest_code(np.where(nan, 0.0, np.abs(x.astype(np.float64))), _E2M1_POS)
    sign = np.where(nan, 0, np.signbit(x).astype(np.int64) << 3)
    return (code | sign).astype(np.uint8)


def e8m0_decode(s):
    s = np.asarray(s, dtype=np.uint8).astype(np.float64)
    return np.where(s == 255, np.nan, np.exp2(s - 127.0)).astype(np.float32)


# ---- MX and per-tensor fp8 ---------------------------------------------------------------------

MX_BLOCK = 32


def _elems(scaled, bits):
    return e4m3_decode(e4m3_encode(scaled)) if bits == 8 else e2m1_decode(e2m1_encode(scaled))


def _block_sse(blocks, X, bits):
    """Sum of squared errors per block [N, nb] with exponents X [N, nb], summed over k in order (as the C)."""
    scaled = (blocks * np.exp2(-X.astype(np.float64))[:, :, None]).astype(np.float32)
    d = blocks - _elems(scaled, bits).astype(np.float64) * np.exp2(X.astype(np.float64))[:, :, None]
    e = np.zeros(X.shape, dtype=np.float64)
    for k in range(blocks.shape[2]):
        e = e + d[:, :, k] * d[:, :, k]
    return e


def mx_quantize(w, bits, rule="ocp"):
    """w float32 [N, K] -> (q, scales). OCP rule: X = floor(log2(amax)) - emax (emax 8 for E4M3, 2 for E2M1),
    clamped to [-127, 127], X = -127 for an all-zero block; scale byte X + 127; elements = nearest(w / 2^X).
    rule "mse": X + 1 instead where it gives a strictly smaller sum of squared errors over the block (the
    block's elements only: a partial last block is not padded into the sum)."""
    w = np.asarray(w, dtype=np.float32)
    N, K = w.shape
    nb = (K + MX_BLOCK - 1) // MX_BLOCK
    emax = 8 if bits == 8 else 2
    pad = np.zeros((N, nb * MX_BLOCK), dtype=np.float64)
    pad[:, :K] = w
    blocks = pad.reshape(N, nb, MX_BLOCK)
    amax = np.abs(blocks).max(axis=2)
    X = np.full(amax.shape, -127, dtype=np.int64)
    nz = amax > 0
    _, ex = np.frexp(amax[nz])  # amax = f * 2^ex, f in [0.5, 1) -> floor(log2) = ex - 1
    X[nz] = ex.astype(np.int64) - 1 - emax
    X = np.clip(X, -127, 127)
    if rule == "mse":
        blocks_k = blocks.copy()
        up = np.minimum(X + 1, 127)
        # a partial last block: its padding zeros add nothing to either sum (0 quantizes to 0)
        better = (_block_sse(blocks_k, up, bits) < _block_sse(blocks_k, X, bits)) & nz & (X < 127)
        X = np.where(better, up, X)
    elif rule != "ocp":
        raise ValueError("unknown MX scale rule %r" % rule)
    scales = (X + 127).astype(np.uint8)
    scaled = (blocks * np.exp2(-X.astype(np.float64))[:, :, None]).reshape(N, nb * MX_BLOCK)[:, :K]
    scaled = scaled.astype(np.float32)  # exact for normal-range weights (power-of-two scaling)
    if bits == 8:
        return e4m3_encode(scaled), scales
    nib = e2m1_encode(scaled)
    if K % 2:
        raise ValueError("MXFP4 needs an even K, got %d" % K)
    q = (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)
    return q, scales


def mx_dequantize(q, scales, bits, K):
    q = np.asarray(q, dtype=np.uint8)
    if bits == 8:
        el = e4m3_decode(q).astype(np.float64)
    else:
        el = np.empty((q.shape[0], K), dtype=np.float64)
        el[:, 0::2] = e2m1_decode(q & 0xF)
        el[:, 1::2] = e2m1_decode(q >> 4)
    sc = e8m0_decode(scales).astype(np.float64)
    s_full = np.repeat(sc, MX_BLOCK, axis=1)[:, :K]
    return (el * s_full).astype(np.float32)  # exact: power-of-two times a short mantissa


def fp8_tensor_quantize(w, scale_dtype="F32"):
    """Per-tensor fp8 (Hy3-FP8): scale = max|W| / 448 in float32 (1 for W == 0), rounded to bf16 when
    scale_dtype is BF16; q = E4M3(w / scale) with the stored scale value (float32 division)."""
    w = np.asarray(w, dtype=np.float32)
    amax = np.float32(np.max(np.abs(w))) if w.size else np.float32(0)
    scale = np.float32(amax / np.float32(448.0)) if amax > 0 else np.float32(1.0)
    if scale_dtype == "BF16":
        scale = st.from_bf16(st.to_bf16(np.array([scale], dtype=np.float32)))[0]
    q = e4m3_encode((w / scale).astype(np.float32))
    return q, np.float32(scale)


# ---- checkpoints ------------------------------------------------------------------------------

_LINEAR = [
    ("attn", re.compile(r"^model\.layers\.\d+\.self_attn\.(q|k|v|o)_proj\.weight$")),
    ("attn", re.compile(r"^model\.layers\.\d+\.eh_proj\.weight$")),
    ("mlp", re.compile(r"^model\.layers\.\d+\.mlp\.(gate|up|down)_proj\.weight$")),
    ("routed", re.compile(r"^model\.layers\.\d+\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight$")),
    ("shared", re.compile(r"^model\.layers\.\d+\.mlp\.(shared_mlp|shared_experts)\.(gate|up|down)_proj\.weight$")),
]


def linear_category(name):
    for cat, rx in _LINEAR:
        if rx.match(name):
            return cat
    return None


_TABLES = {"lm_head.weight": "lm_head", "model.embed_tokens.weight": "embed"}


def table_category(name):
    """"lm_head" / "embed" for the two vocabulary tables (quantized only when asked: --quant-target lm_head
    embed), else None."""
    return _TABLES.get(name)


def format_for(fmt, cat):
    if cat is None:
        return None
    if fmt == "hybrid":
        return "mxfp4" if cat == "routed" else "mxfp8"
    return fmt


def quantize_weight(w, f, fp8_scale_dtype="F32", mx_rule="ocp"):
    """-> dict suffix -> (dtype, array) for module tensors ("weight", "weight_scale")."""
    if f == "fp8":
        q, s = fp8_tensor_quantize(w, fp8_scale_dtype)
        if fp8_scale_dtype == "BF16":
            return {"weight": ("F8_E4M3", q), "weight_scale": ("BF16", np.array(s, dtype=np.float32))}
        return {"weight": ("F8_E4M3", q), "weight_scale": ("F32", np.array([s], dtype=np.float32))}
    bits = 8 if f == "mxfp8" else 4
    q, sc = mx_quantize(w, bits, mx_rule)
    return {"weight": ("F8_E4M3" if bits == 8 else "U8", q), "weight_scale": ("U8", sc)}


def quantize_dir(src, dst, fmt, fp8_scale_dtype="F32", input_scale=False, mx_scale_dtype="U8", fused=False,
                 ct_spelling="group"):
    """Writes dst: the checkpoint of src with every linear quantized (fmt fp8 | mxfp8 | mxfp4 | hybrid).
    fp8: Hy3-FP8 layout, quantization_config {"quant_method": "fp8", "activation_scheme": "static" (with
    input_scale) or "dynamic", "ignored_layers": ["lm_head", "model.embed_tokens"]}; weight_scale BF16 scalar
    (shape []) or F32 [1]; input_scale F32 [1] (a made-up positive value) when input_scale.
    MX: compressed-tensors, targets "Linear" (+ a regex group for hybrid's experts), ignore ["lm_head"], the
    [1, 32] block spelled as ct_spelling: "group" (strategy/group_size), "block_structure" or
    "weight_block_size"; scales dtype mx_scale_dtype (U8 or F8_E8M0). fused: routed experts written as
    mlp.experts.gate_up_proj [E, 2I, H] / down_proj [E, H, I] with "<name>_scale" (MX only)."""
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    tensors = st.load(os.path.join(src, "model.safetensors"), widen_bf16=False)
    out = []
    experts = {}  # layer -> {e: {proj: tensors}}
    for name, (dt, arr) in sorted(tensors.items()):
        cat = linear_category(name)
        f = format_for(fmt, cat)
        if f is None:
            out.append((name, dt, arr))
            continue
        w = st.from_bf16(arr) if dt == "BF16" else np.asarray(arr, dtype=np.float32)
        mod = name[:-len(".weight")]
        qt = quantize_weight(w, f, fp8_scale_dtype)
        if fused and cat == "routed":
            m = re.match(r"^model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight$", name)
            experts.setdefault(int(m.group(1)), {}).setdefault(int(m.group(2)), {})[m.group(3)] = qt
            continue
        for suf, (d2, a2) in qt.items():
            if suf == "weight_scale" and d2 == "U8":
                d2 = mx_scale_dtype
            out.append((mod + "." + suf, d2, a2))
        if f == "fp8" and input_scale:
            out.append((mod + ".input_scale", "F32", np.array([0.0125], dtype=np.float32)))
    for L, ex in experts.items():
        if fmt == "fp8":
            raise ValueError("fused output is only written for MX formats")
        E = len(ex)
        gu = np.stack([np.concatenate([ex[e]["gate"]["weight"][1], ex[e]["up"]["weight"][1]]) for e in range(E)])
        gus = np.stack([np.concatenate([ex[e]["gate"]["weight_scale"][1], ex[e]["up"]["weight_scale"][1]])
                        for e in range(E)])
        dn = np.stack([ex[e]["down"]["weight"][1] for e in range(E)])
        dns = np.stack([ex[e]["down"]["weight_scale"][1] for e in range(E)])
        wdt = ex[0]["gate"]["weight"][0]
        p = "model.layers.%d.mlp.experts." % L
        out += [(p + "gate_up_proj", wdt, gu), (p + "gate_up_proj_scale", mx_scale_dtype, gus),
                (p + "down_proj", wdt, dn), (p + "down_proj_scale", mx_scale_dtype, dns)]
    st.save(os.path.join(dst, "model.safetensors"), out)
    if fmt == "fp8":
        qc = {"quant_method": "fp8", "activation_scheme": "static" if input_scale else "dynamic",
              "ignored_layers": ["lm_head", "model.embed_tokens"]}
        if input_scale:
            qc["kv_cache_scheme"] = "static"
    else:
        def wargs(bits):
            a = {"type": "float", "num_bits": bits, "symmetric": True, "dynamic": False}
            if ct_spelling == "group":
                a.update(strategy="group", group_size=32)
            else:
                a[ct_spelling] = [1, 32]
            return a
        if fmt == "hybrid":
            groups = {"experts_w4": {"targets": [r"re:.*mlp\.experts\.\d+\.", r"re:.*mlp\.experts\.(gate_up|down)_proj$"],
                                     "weights": wargs(4)},
                      "rest_w8": {"targets": ["Linear"], "weights": wargs(8)}}
        else:
            groups = {"group_0": {"targets": ["Linear"], "weights": wargs(8 if fmt == "mxfp8" else 4),
                                  "input_activations": {"type": "float", "num_bits": 8, "dynamic": True}}}
        qc = {"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": groups,
              "ignore": ["lm_head"]}
    cfg["quantization_config"] = qc
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for fn in os.listdir(src):
        if fn not in ("config.json", "model.safetensors") and os.path.isfile(os.path.join(src, fn)):
            shutil.copyfile(os.path.join(src, fn), os.path.join(dst, fn))


def _scale_vals(dt, a):
    return np.asarray(a, dtype=np.float32)


def dequantize_tensors(tensors):
    """dict name -> (dtype, array) of a quantized checkpoint (widened bf16) -> dict name -> f32 array of the
    dequantized model (scales and input_scales consumed). Fused MX stacks are dequantized per expert."""
    out = {}
    used = set()
    for name, (dt, a) in tensors.items():
        if name.endswith(".weight_scale") or name.endswith(".input_scale"):
            continue
        if name.endswith("_scale") and name[:-len("_scale")] in tensors:  # a fused stack's scales (hy_v4's hc_scale
            continue                                                      # and hc_head_scale are model tensors)
        sname = (name[:-len(".weight")] + ".weight_scale") if name.endswith(".weight") else name + "_scale"
        if sname not in tensors:
            out[name] = np.asarray(a, dtype=np.float32)
            continue
        sdt, s = tensors[sname]
        used.add(sname)
        if dt == "F8_E4M3" and sdt in ("F32", "BF16", "F16") and np.asarray(s).size == 1:
            out[name] = (e4m3_decode(a).astype(np.float64) * float(np.asarray(s).reshape(-1)[0])).astype(np.float32)
            continue
        bits = 8 if dt == "F8_E4M3" else 4
        if a.ndim == 3:
            K = a.shape[2] * (1 if bits == 8 else 2)
            out[name] = np.stack([mx_dequantize(a[e], s[e], bits, K) for e in range(a.shape[0])])
        else:
            K = a.shape[1] * (1 if bits == 8 else 2)
            out[name] = mx_dequantize(a, s, bits, K)
    return out


def dequantize_dir(qdir, dst):
    os.makedirs(dst, exist_ok=True)
    tensors = st.load(os.path.join(qdir, "model.safetensors"))
    deq = dequantize_tensors(tensors)
    st.save(os.path.join(dst, "model.safetensors"), [(k, "F32", v) for k, v in sorted(deq.items())])
    with open(os.path.join(qdir, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("quantization_config", None)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def _main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("quantize")
    q.add_argument("src")
    q.add_argument("dst")
    q.add_argument("fmt", choices=["fp8", "mxfp8", "mxfp4", "hybrid"])
    q.add_argument("--fp8-scale-dtype", default="F32", choices=["F32", "BF16"])
    q.add_argument("--input-scale", action="store_true")
    q.add_argument("--mx-scale-dtype", default="U8", choices=["U8", "F8_E8M0"])
    q.add_argument("--fused", action="store_true")
    q.add_argument("--ct-spelling", default="group", choices=["group", "block_structure", "weight_block_size"])
    d = sub.add_parser("dequantize")
    d.add_argument("src")
    d.add_argument("dst")
    a = ap.parse_args(argv)
    if a.cmd == "quantize":
        quantize_dir(a.src, a.dst, a.fmt, a.fp8_scale_dtype, a.input_scale, a.mx_scale_dtype, a.fused, a.ct_spelling)
    else:
        dequantize_dir(a.src, a.dst)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
