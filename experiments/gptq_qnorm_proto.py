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
  kfac-av  rms, and the rows of each head rounded jointly (below) with the output-side matrix
           G_h = sum_t c(t) M_t, M_t = D R_t^T A_t^T A_t R_t D (D = diag(gamma), R_t token t's RoPE rotation): the
           attention output's error is A_t R_t D dq / rms, so errors in directions the attention does not read
           cost nothing
  kfac-cov the same with M_t = D R_t^T Cov_{p_t}(k) R_t D: the second-order KL of token t's attention
           probabilities, Var_p(ds), ds_j the score change
The kfac modes minimise sum_t c(t) (dW x_t)^T G (dW x_t) ~ tr(dW^T G dW H) (Kronecker-factored as in K-FAC,
Martens & Grosse 2015): the upper Cholesky factor of (G kron H)^-1 is U_G kron U_H, so sequential rounding in
row-major order is GPTQ within each row (U_H) followed, when a row is done, by its total change r_i = w_i - q_i
spread over the later rows: w_i' -= U_G[i, i'] / U_G[i, i] r_i.
Each head's rows are then rounded by GPTQ (act-order, dampening 0.01 of the mean diagonal, the checkpoint's
own per-tensor scale) and the q_proj codes of BASE are replaced; every other tensor is BASE's.

usage: /usr/bin/python3 experiments/gptq_qnorm_proto.py --base FP8_GPTQ_DIR --model BF16_DIR --calib TEXT
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "ref"))
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


def gptq_2d(W, H, G, scale, damp=0.01):
    """W [N, K] rounded to minimise tr(dW^T G dW H), G [N, N] and H [K, K] (see the module comment): rows in
    order of decreasing diag G, GPTQ within each row, each row's change spread over the later rows."""
    W = W.astype(np.float64).copy()
    N = W.shape[0]
    G = G + damp * np.mean(np.diag(G)) * np.eye(N)
    order = np.argsort(-np.diag(G), kind="stable")
    Gp = G[order][:, order]
    UG = np.linalg.cholesky(np.linalg.inv(Gp)).T
    Q = np.zeros_like(W)
    for a, i in enumerate(order):
        Q[i] = gptq_rows(W[i:i + 1], H, scale, damp)[0]
        r = W[i] - Q[i]
        for b in range(a + 1, N):
            W[order[b]] -= UG[a, b] / UG[a, a] * r
    return Q


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--calib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=["plain", "rms", "rmsmean", "rmsav", "kfac-av", "kfac-cov"], default="rms")
    ap.add_argument("--windows", type=int, default=24)
    ap.add_argument("--seq-len", type=int, default=192)
    ap.add_argument("--hyinfer", default="build/hyinfer")
    ap.add_argument("--g-frame", choices=["exact", "abs", "pre"], default="exact",
                    help="kfac: keys in G as R_t^T R_j k_j (exact), R_j k_j (abs: each key rotated to its own "
                         "position, R_t dropped) or k_j (pre: before RoPE)")
    ap.add_argument("--g-stride", type=int, default=1, help="kfac: G from every S-th query token")
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
    stats = [{"X": [], "w": [], "G": np.zeros((nh, hd, hd))} for _ in ref.layers]
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
        if a.mode.startswith("kfac"):
            kpre = ref.rms((x @ L["k"].T).reshape(T, c.n_kv, hd), L["k_norm"])
            k = ref.rope(kpre, pos)
            qn = ref.rope(ref.rms(q, L["q_norm"]), pos)
            v = (x @ L["v"].T).reshape(T, c.n_kv, hd)
            mask = np.triu(np.ones((T, T), dtype=bool), 1)
            for h in range(nh):
                kh, vh = k[:, h // g, :], v[:, h // g, :]
                s = (qn[:, h, :] @ kh.T) / np.sqrt(hd)
                s[mask] = -np.inf
                p = np.exp(s - s.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                kbar = p @ kh
                if a.mode == "kfac-av":  # J_t = A_t: [T, hd_v, hd]
                    J = (p @ (vh[:, :, None] * kh[:, None, :]).reshape(T, -1)).reshape(T, hd, hd)
                    J -= (p @ vh)[:, :, None] * kbar[:, None, :]
                    B = None
                else:  # Cov_p(k) [T, hd, hd]
                    kc = kpre[:, h // g, :] if a.g_frame == "pre" else kh
                    kbar = p @ kc
                    B = (p @ (kc[:, :, None] * kc[:, None, :]).reshape(T, -1)).reshape(T, hd, hd)
                    B -= kbar[:, :, None] * kbar[:, None, :]
                    ev, V = np.linalg.eigh(B)
                    J = np.sqrt(np.clip(ev, 0, None))[:, :, None] * V.transpose(0, 2, 1)  # J^T J = B
                # J R_t: rope(-t) on each row of J, then D
                J = (ref.rope(J, -pos) if a.g_frame == "exact" else J) * L["q_norm"][None, None, :]
                M = np.einsum("tri,trj->tij", J, J)
                keep = (pos % a.g_stride) == 0
                stats[L["_idx"]]["G"][h] += np.einsum("t,tij->ij", w[keep, h], M[keep])
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
            Hh = (X * wt[:, None]).T @ X / len(X)
            if a.mode.startswith("kfac"):
                Q[rows] = gptq_2d(W[rows], Hh, stats[i]["G"][h], scale)
            else:
                Q[rows] = gptq_rows(W[rows], Hh, scale)
        tens[name + ".weight"] = ("F8_E4M3", qr.e4m3_encode((Q / scale).astype(np.float32)))
    shutil.copytree(a.base, a.out)
    st.save(os.path.join(a.out, "model.safetensors"), tens)
    print("gptq_qnorm_proto: %s, %d windows of %d tokens; q_proj of %d layers rewritten in %s"
          % (a.mode, n, a.seq_len, len(ref.layers), a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
