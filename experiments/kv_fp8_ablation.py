#!/usr/bin/env python3
"""kv_fp8_ablation.py - where the FP8 KV cache's error comes from on a Hy3 checkpoint (diagnostic, not a test).

Runs tools/ref/hy3_ref.py's forward (f32) over one window of held-out text with K and/or V rounded to FP8 E4M3
as the engine stores them (after QK-norm and RoPE, one scale per token and KV head), and prints top-1
agreement and mean KL(P_ref || P) against the unrounded forward, over all positions and split at the
training length. Modes (any of, space separated):
  k, v, kv          round K, V, or both; scale = the least-squares fit (32 candidates over the octave
                    above amax/448, the smallest squared error; the engine's fit, kernels/fp8_scale.h,
                    searches the same octave)
  k-amax, kv-amax   scale = amax / 448
  ksm-v             K minus its per-channel mean over this window (SageAttention's smoothing: q.k
                    shifts by the same q.mean for every key, so softmax is unchanged) rounded, mean
                    added back; V rounded (an oracle: the mean of tokens not yet seen)
  ksm-static-v      the same with the per-channel mean of the calibration text (the start of the file)
  kv-sink           K and V rounded except token 0 (BOS) kept exact (attention-sink / IntactKV)
Token ids come from the engine's tokenizer (hyinfer logits). Needs numpy (/usr/bin/python3).
Usage: /usr/bin/python3 experiments/kv_fp8_ablation.py [--model models/hy3-tiny] [--chars 3700] MODE...
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "ref"))
from hy3_ref import Hy3Ref  # noqa: E402


def e4m3(x):
    """Nearest E4M3 value (saturating at 448; subnormals below 2^-6), elementwise, half to even."""
    a = np.abs(x)
    e = np.maximum(np.floor(np.log2(np.maximum(a, 1e-300))), -6)
    step = 2.0 ** (e - 3)
    return np.sign(x) * np.minimum(np.rint(a / step) * step, 448.0)


def round_rows(x, fit=True):
    """x [..., head_dim] rounded to E4M3 with one scale per row (amax/448, or the best of 32 in its octave)."""
    amax = np.abs(x).max(-1, keepdims=True)
    s0 = np.where(amax == 0, 1, amax) / 448.0
    if not fit:
        return e4m3(x / s0) * s0
    best, best_err = None, None
    for j in range(32):
        s = s0 * 2 ** (j / 32)
        y = e4m3(x / s) * s
        err = ((y - x) ** 2).sum(-1, keepdims=True)
        if best is None:
            best, best_err = y, err
        else:
            m = err < best_err
            best, best_err = np.where(m, y, best), np.where(m, err, best_err)
    return best


class KvRounded(Hy3Ref):
    """Hy3Ref whose attention rounds the cached K / V per `mode` (see the module docstring)."""
    mode = ""
    k_mean = None  # per layer [n_kv, head_dim], for ksm-static
    collect = None  # list: per layer K (post-RoPE) of the last forward

    def forward(self, ids):
        self._layer = 0
        return super().forward(ids)

    def attention(self, L, a, pos):
        c = self.cfg
        T, hd = a.shape[0], c.head_dim
        q = self.rms((a @ L["q"].T).reshape(T, c.n_heads, hd), L["q_norm"])
        k = self.rms((a @ L["k"].T).reshape(T, c.n_kv, hd), L["k_norm"])
        v = (a @ L["v"].T).reshape(T, c.n_kv, hd)
        q, k = self.rope(q, pos), self.rope(k, pos)
        li, self._layer = self._layer, self._layer + 1
        if self.collect is not None:
            self.collect.append(k.copy())
        m = self.mode
        k0, v0 = k[:1].copy(), v[:1].copy()
        if m.startswith("ksm"):
            mu = self.k_mean[li] if "static" in m else k.mean(0)
            k = round_rows(k - mu[None]) + mu[None]
        elif m.startswith("k"):
            k = round_rows(k, fit="amax" not in m)
        if m in ("v", "kv", "kv-amax", "ksm-v", "ksm-static-v", "kv-sink"):
            v = round_rows(v, fit="amax" not in m)
        if m == "kv-sink":
            k[:1], v[:1] = k0, v0
        group = c.n_heads // c.n_kv
        mask = np.triu(np.ones((T, T), dtype=bool), 1)
        out = np.empty((T, c.n_heads, hd), dtype=a.dtype)
        for h in range(c.n_heads):
            sc = (q[:, h, :] @ k[:, h // group, :].T) / np.sqrt(hd)
            sc[mask] = -np.inf
            p = np.exp(sc - sc.max(axis=1, keepdims=True))
            out[:, h, :] = (p / p.sum(axis=1, keepdims=True)) @ v[:, h // group, :]
        return out.reshape(T, c.n_heads * hd) @ L["o"].T


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def engine_ids(model, text):
    exe = os.path.join(HERE, "..", "build", "hyinfer")
    out = subprocess.run([exe, "logits", "-m", model, "-p", text, "--json"], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)["prompt_ids"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(HERE, "..", "models", "hy3-tiny"))
    ap.add_argument("--text", default=os.path.join(HERE, "..", "tests", "data", "corpora", "tinyshakespeare.txt"))
    ap.add_argument("--start-fraction", type=float, default=0.9, help="held-out text starts here (bench quality's)")
    ap.add_argument("--chars", type=int, default=3700, help="characters of held-out text (one window)")
    ap.add_argument("--calib-chars", type=int, default=3000, help="characters from the file's start for ksm-static")
    ap.add_argument("--train-len", type=int, default=192, help="split the figures at this position")
    ap.add_argument("modes", nargs="+")
    a = ap.parse_args()
    text = open(a.text, encoding="utf-8").read()
    start = int(len(text) * a.start_fraction)
    held = text[start : start + a.chars]
    ids, cal = engine_ids(a.model, held), engine_ids(a.model, text[: a.calib_chars])
    m = KvRounded(a.model, dtype=np.float32)
    m.collect = []
    m.forward(cal)
    m.k_mean, m.collect = [k[1:].mean(0) for k in m.collect], None  # BOS left out
    m.mode = ""
    ref = log_softmax(m.forward(ids)[0].astype(np.float64))
    p_ref, n = np.exp(ref), a.train_len
    print("%d positions (one window, BOS first); figures also split at position %d" % (len(ids), n))
    for mode in a.modes:
        m.mode = mode
        lp = log_softmax(m.forward(ids)[0].astype(np.float64))
        kl = (p_ref * (ref - lp)).sum(-1)
        agree = lp.argmax(-1) == ref.argmax(-1)
        print("%-13s top1 %.4f mean_kl %.5f | < %d: top1 %.4f kl %.5f | >= %d: top1 %.4f kl %.5f" % (
            mode, agree.mean(), kl.mean(), n, agree[:n].mean(), kl[:n].mean(), n, agree[n:].mean(), kl[n:].mean()),
            flush=True)


if __name__ == "__main__":
    main()
