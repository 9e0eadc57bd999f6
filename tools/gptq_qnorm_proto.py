"""Prototype (numpy, not used by the engine): GPTQ of q_proj in per-tensor FP8 with calibration tokens
weighted by the QK-norm's sensitivity, written over a `hyinfer quantize --quant-dtype fp8 --calib-data` output.

Why: on models/hy3-tiny after GPTQ, q_proj alone carries most of the FP8 error (README, "QK-norm-aware
weighting"). q_proj's output goes through a per-head RMSNorm (QK-norm, spec section 2.2) before RoPE: the
normalized head is gamma * q_h / rms(q_h), so an error dq_h reaches it scaled by 1 / rms(q_h(t)), which
differs from token to token. GPTQ (Frantar et al. 2022) minimises sum_t |dW x_t|^2 with every token weighted
alike; here token t's x_t x_t^T is weighted by c(t) before the Hessian is formed:
  plain    c = 1 (checks this script against the engine's GPTQ)
  rms      per head h: c = 1 / (mean_d q_h(t)_d^2 + eps); each head's rows get their own Hessian
  rmsmean  one Hessian: c = mean over heads of the rms weights (what a single-Hessian engine could take)
  rmsav    rms times |A_t|_F^2 / head_dim, A_t = sum_j p_j (v_j - vbar)(k_j - kbar)^T gamma, the attention
           output's first-order sensitivity to the normalized query (k after QK-norm and RoPE)
Each head's rows are then rounded by GPTQ (act-order, dampening 0.01 of the mean diagonal, the checkpoint's
own per-tensor scale) and the q_proj codes of BASE are replaced; every other tensor is BASE's.

usage: /usr/bin/python3 tools/gptq_qnorm_proto.py --base FP8_GPTQ_DIR --model BF16_DIR --calib TEXT
           --out DIR [--mode rms] [--windows 24] [--seq-len 192] [--hyinfer build/hyinfer]
then:  hyinfer bench quality -m DIR --ref BF16_DIR --dtype float32 --context 192 --positions all
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hy3_ref  # noqa: E402
import quant_ref as qr  # noqa: E402
import safetensors_np as st  # noqa: E402


def tokenize(hyinfer, model, text, need):
    """Token ids of the start of text (BOS first), through the engine's tokenizer, in 1,500-character pieces."""
    ids, pos = [], 0
    while len(ids) < need and pos < len(text):
        piece = text[pos:pos + 1500]
        pos += 1500
        r = subprocess.run([hyinfer, "logits", "-m", model, "-p", piece, "--json"], capture_output=True, text=True,
                           check=True)
        p = json.loads(r.stdout)["prompt_ids"]
        ids += p if not ids else p[1:]
    return np.array(ids)


def e4m3_values(x):
    return qr.e4m3_decode(qr.e4m3_encode(x.astype(np.float32))).astype(np.float64)


def gptq_rows(W, H, scale, damp=0.01):
    """W [N, K] f64 rounded to scale * E4M3 codes column by column (act-order), errors spread through the
    upper Cholesky factor of (H + damp * mean diag H * I)^-1. Returns the rounded values [N, K]."""
    W = W.astype(np.float64).copy()
    H = H.copy()
    K = W.shape[1]
    dead = np.diag(H) == 0
    H[dead, dead] = 1
    perm = np.argsort(-np.diag(H), kind="stable")
    W, H = W[:, perm], H[perm][:, perm]
    H += damp * np.mean(np.diag(H)) * np.eye(K)
    U = np.linalg.cholesky(np.linalg.inv(H)).T
    Q = np.zeros_like(W)
    for i in range(K):
        q = e4m3_values(W[:, i] / scale) * scale
        Q[:, i] = q
        err = (W[:, i] - q) / U[i, i]
        W[:, i + 1:] -= np.outer(err, U[i, i + 1:])
    return Q[:, np.argsort(perm)]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--calib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=["plain", "rms", "rmsmean", "rmsav"], default="rms")
    ap.add_argument("--windows", type=int, default=24)
    ap.add_argument("--seq-len", type=int, default=192)
    ap.add_argument("--hyinfer", default="build/hyinfer")
    a = ap.parse_args(argv)
    if os.path.exists(a.out):
        ap.error("--out %s exists" % a.out)
    with open(a.calib, encoding="utf-8") as f:
        text = f.read()
    ids = tokenize(a.hyinfer, a.model, text, a.windows * a.seq_len + 1)
    ref = hy3_ref.Hy3Ref(a.model, dtype=np.float64)
    c = ref.cfg
    hd, nh, g = c.head_dim, c.n_heads, c.n_heads // c.n_kv
    if not c.qk_norm:
        ap.error("the model has no QK-norm")
    stats = [{"X": [], "w": []} for _ in ref.layers]
    attention = ref.attention

    def hook(L, x, pos):
        T = x.shape[0]
        q = (x @ L["q"].T).reshape(T, nh, hd)
        w = 1.0 / (np.mean(q * q, axis=-1) + c.eps) if a.mode != "plain" else np.ones((T, nh))
        if a.mode == "rmsav":
            k = ref.rope(ref.rms((x @ L["k"].T).reshape(T, c.n_kv, hd), L["k_norm"]), pos)
            qn = ref.rope(ref.rms(q, L["q_norm"]), pos)
            v = (x @ L["v"].T).reshape(T, c.n_kv, hd)
            mask = np.triu(np.ones((T, T), dtype=bool), 1)
            for h in range(nh):
                kh, vh = k[:, h // g, :], v[:, h // g, :]
                s = (qn[:, h, :] @ kh.T) / np.sqrt(hd)
                s[mask] = -np.inf
                p = np.exp(s - s.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                A = np.einsum("tj,jd,je->tde", p, vh, kh) - np.einsum("td,te->tde", p @ vh, p @ kh)
                A = A * L["q_norm"][None, None, :]
                w[:, h] *= np.sum(A * A, axis=(1, 2)) / hd
        stats[L["_idx"]]["X"].append(x.copy())
        stats[L["_idx"]]["w"].append(w)
        return attention(L, x, pos)

    for i, L in enumerate(ref.layers):
        L["_idx"] = i
    ref.attention = hook
    per = a.seq_len - 1
    n = 0
    for wi in range(a.windows):
        seg = ids[1 + wi * per:1 + (wi + 1) * per]
        if len(seg) < per:
            break
        ref.forward(np.concatenate([[ids[0]], seg]))
        n += 1
    tens = st.load(os.path.join(a.base, "model.safetensors"), widen_bf16=False)
    bf = st.load(os.path.join(a.model, "model.safetensors"))
    for i in range(len(ref.layers)):
        name = "model.layers.%d.self_attn.q_proj" % i
        if name + ".weight_scale" not in tens:
            sys.exit("%s: not per-tensor fp8 in %s" % (name, a.base))
        W = bf[name + ".weight"][1].astype(np.float64)
        scale = float(np.asarray(tens[name + ".weight_scale"][1]).reshape(-1)[0])
        X, w = np.concatenate(stats[i]["X"]), np.concatenate(stats[i]["w"])
        Q = np.zeros_like(W)
        for h in range(nh):
            rows = slice(h * hd, (h + 1) * hd)
            wt = w.mean(axis=1) if a.mode == "rmsmean" else w[:, h]
            Q[rows] = gptq_rows(W[rows], (X * wt[:, None]).T @ X / len(X), scale)
        tens[name + ".weight"] = ("F8_E4M3", qr.e4m3_encode((Q / scale).astype(np.float32)))
    shutil.copytree(a.base, a.out)
    st.save(os.path.join(a.out, "model.safetensors"), tens)
    print("gptq_qnorm_proto: %s, %d windows of %d tokens; q_proj of %d layers rewritten in %s"
          % (a.mode, n, a.seq_len, len(ref.layers), a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
