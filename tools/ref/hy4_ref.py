#!/usr/bin/python3
"""Python/numpy reference of the Hy4-preview (`hy_v4`) forward pass, main model and MTP layer.

Written from specs/hy4_architecture.md (section numbers below), not from any implementation:
  §3  X = 4 copies of embed[id] (the hc_mult residual streams; no scaling)
  §4  per sub-block: HC-pre (unweighted RMS over the flat C*d streams, eps rms_norm_eps; pre gates
      sigmoid(m*s0 + b) + hc_eps, post gates hc_magnitude*sigmoid(m*s1 + b) + hc_eps; y = sum a_i X_i),
      RMSNorm, the sub-block, HC-post X_i += p_i f; HC-head (one scale, no magnitude) before model.norm
  §6  gated MLA: c_q = RMSNorm(q_a u), q = q_b c_q (per head nope then rope), [c; kpe] = kv_a u,
      c = RMSNorm(c), kv_b rows per head = W_UK (qk_nope) then W_UV (v_head); interleaved RoPE pairs
      (2i, 2i+1) on the last qk_rope_head_dim dims (theta^(-2i/d_r)); scale 1/sqrt(qk_nope + qk_rope);
      softmax over the causal AND top-k keys plus one sink logit per head (not scaled, zero value);
      o *= sigmoid(linear_gate u) before o_proj
  §7  lightning indexer on `full` layers: q^I = wq_b c_q, k^I = LayerNorm(wk u) (+bias, eps
      rms_norm_eps), RoPE on the last qk_rope_head_dim dims of both, w = weights_proj u,
      score(t,s) = (H_I d_I)^-1/2 sum_j w_j relu(q^I_j . k^I); top index_topk causal keys; `shared`
      layers reuse the previous full layer's sets of the same pass
  §9  layer 0 dense SwiGLU; MoE: s = sigmoid(router u), choose top-k of s + e_score_correction_bias,
      w = s / sum(s) * routed_scaling_factor (norm_topk_prob), routed SwiGLU with gate <= swiglu_limit and
      up clamped to +-swiglu_limit, shared expert unclamped and unweighted
  §10 logits = lm_head(RMSNorm(HC-head(X))) (untied)
  §11 MTP row p = (token p+1, final-normed h_p, position p): v = eh_proj [enorm(e); hnorm(h)], then a plain
      pre-norm block (no HC) with its own MLA + full indexer and MoE, final_layernorm, the shared lm_head.

Top-k tie rule (§7.2 leaves it open): among equal scores the earlier key position wins (stable sort of -score).
Math runs in float64 on the checkpoint's values (bf16 widened exactly, F32 kept).

CLI (same JSON as `hyinfer logits`):
  hy4_ref.py logits -m DIR --prompt-ids 1,2,3 [--all-positions] [--mtp]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _silu(x):
    return x * _sigmoid(x)


def _rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _layernorm(x, w, b, eps):
    mu = np.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    return xc / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + eps) * w + b


class Config:
    """The config.json fields the forward pass reads (spec §1); required ones raise KeyError when absent."""

    def __init__(self, j):
        if j.get("model_type") != "hy_v4":
            raise ValueError("model_type %r is not hy_v4" % j.get("model_type"))
        self.vocab = j["vocab_size"]
        self.d = j["hidden_size"]
        self.n_layers = j["num_hidden_layers"]
        self.dense_inter = j["intermediate_size"]
        self.moe_inter = j["moe_intermediate_size"]
        self.eps = j.get("rms_norm_eps", 1e-5)
        self.H = j["num_attention_heads"]
        self.r_q = j["q_lora_rank"]
        self.r_kv = j["kv_lora_rank"]
        self.d_n = j["qk_nope_head_dim"]
        self.d_r = j["qk_rope_head_dim"]
        self.d_v = j["v_head_dim"]
        rp = j.get("rope_parameters") or {}
        self.theta = float(rp.get("rope_theta", j.get("rope_theta", 10000.0)))
        self.gated = bool(j.get("gated_mla", True))
        self.sink = bool(j.get("learnable_sink", True))
        self.topk = j["index_topk"]
        self.H_I = j["index_n_heads"]
        self.d_I = j["index_head_dim"]
        self.indexer_types = list(j["indexer_types"])
        self.C = j["hc_mult"]
        self.hc_mag = float(j["hc_magnitude"])
        self.hc_eps = float(j["hc_eps"])
        mlp = j.get("mlp_layer_types")
        if mlp is None:
            k = j.get("first_k_dense_replace", 1)
            mlp = ["dense"] * k + ["sparse"] * (self.n_layers - k)
        self.layer_moe = [t == "sparse" for t in mlp]
        self.E = j["n_routed_experts"]
        self.top_e = j["num_experts_per_tok"]
        self.n_shared = j.get("n_shared_experts", 1)
        self.norm_topk = bool(j.get("norm_topk_prob", True))
        self.rsf = float(j.get("routed_scaling_factor", 1.0))
        self.swiglu_limit = float(j.get("swiglu_limit", 0.0))
        self.n_mtp = j.get("num_nextn_predict_layers", 0)
        if len(self.indexer_types) != self.n_layers or self.indexer_types[0] != "full":
            raise ValueError("indexer_types must list every layer and start with 'full'")


class Hy4Ref:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = Config(json.load(f))
        self.W = {}
        for fn in sorted(os.listdir(model_dir)):
            if fn.endswith(".safetensors"):
                for k, (_, v) in safetensors_np.load(os.path.join(model_dir, fn)).items():
                    self.W[k] = np.asarray(v, dtype=np.float64)
        c = self.cfg
        i = np.arange(c.d_r // 2, dtype=np.float64)
        self.inv_freq = c.theta ** (-2.0 * i / c.d_r)

    # --- pieces -------------------------------------------------------------------------------------------------
    def rope(self, x, pos):
        """Interleaved pairs (2i, 2i+1) on the last d_r dims of x [..., T-major first axis, D]; pos [T]."""
        c = self.cfg
        ang = np.asarray(pos, dtype=np.float64)[:, None] * self.inv_freq[None, :]  # [T, d_r/2]
        shape = (x.shape[0],) + (1,) * (x.ndim - 2) + (c.d_r // 2,)
        cos, sin = np.cos(ang).reshape(shape), np.sin(ang).reshape(shape)
        y = x.copy()
        a, b = x[..., -c.d_r::2], x[..., -c.d_r + 1::2]
        y[..., -c.d_r::2] = a * cos - b * sin
        y[..., -c.d_r + 1::2] = a * sin + b * cos
        return y

    def hc_pre(self, X, pre):
        """X [T, C, d] -> (y [T, d], post gates [T, C]) (spec §4.2)."""
        c = self.cfg
        T = X.shape[0]
        z = X.reshape(T, c.C * c.d)
        r = 1.0 / np.sqrt(np.mean(z * z, axis=1) + c.eps)
        m = (z @ self.W[pre + ".hc_fn"].T) * r[:, None]
        s = self.W[pre + ".hc_scale"]
        b = self.W[pre + ".hc_base"]
        a = _sigmoid(m[:, :c.C] * s[0] + b[:c.C]) + c.hc_eps
        p = c.hc_mag * _sigmoid(m[:, c.C:] * s[1] + b[c.C:]) + c.hc_eps
        return np.einsum("tc,tcd->td", a, X), p

    def hc_head(self, X):
        c = self.cfg
        T = X.shape[0]
        z = X.reshape(T, c.C * c.d)
        r = 1.0 / np.sqrt(np.mean(z * z, axis=1) + c.eps)
        m = (z @ self.W["model.hc_head.hc_head_fn"].T) * r[:, None]
        g = _sigmoid(m * self.W["model.hc_head.hc_head_scale"][0] + self.W["model.hc_head.hc_head_base"]) + c.hc_eps
        return np.einsum("tc,tcd->td", g, X)

    def indexer(self, p, u, cq, pos):
        """Top-k key sets [T] of sorted position lists for the tokens of one sequence (spec §7.2)."""
        c = self.cfg
        T = u.shape[0]
        W = self.W
        qI = self.rope((cq @ W[p + ".indexer.wq_b.weight"].T).reshape(T, c.H_I, c.d_I), pos)
        kI = _layernorm(u @ W[p + ".indexer.wk.weight"].T, W[p + ".indexer.k_norm.weight"],
                        W[p + ".indexer.k_norm.bias"], c.eps)
        kI = self.rope(kI, pos)
        w = u @ W[p + ".indexer.weights_proj.weight"].T  # [T, H_I]
        dots = np.maximum(np.einsum("thd,sd->ths", qI, kI), 0.0)
        score = np.einsum("th,ths->ts", w, dots) / np.sqrt(c.H_I * c.d_I)
        sets = []
        for t in range(T):
            if t + 1 <= c.topk:
                sets.append(list(range(t + 1)))
            else:
                order = np.argsort(-score[t, :t + 1], kind="stable")[:c.topk]
                sets.append(sorted(int(s) for s in order))
        return sets

    def attention(self, p, u, pos, sets, has_indexer):
        """Gated MLA with sinks over one causal sequence (spec §6.2, non-absorbed form). Returns (out, sets)."""
        c = self.cfg
        W = self.W
        T = u.shape[0]
        cq = _rmsnorm(u @ W[p + ".q_a_proj.weight"].T, W[p + ".q_a_layernorm.weight"], c.eps)
        q = (cq @ W[p + ".q_b_proj.weight"].T).reshape(T, c.H, c.d_n + c.d_r)
        q = self.rope(q, pos)
        kv = u @ W[p + ".kv_a_proj_with_mqa.weight"].T
        lat = _rmsnorm(kv[:, :c.r_kv], W[p + ".kv_a_layernorm.weight"], c.eps)
        kpe = self.rope(kv[:, c.r_kv:], pos)
        kvb = W[p + ".kv_b_proj.weight"].reshape(c.H, c.d_n + c.d_v, c.r_kv)
        k_nope = np.einsum("hdc,sc->shd", kvb[:, :c.d_n], lat)
        v = np.einsum("hdc,sc->shd", kvb[:, c.d_n:], lat)
        if has_indexer:
            sets = self.indexer(p, u, cq, pos)
        tau = 1.0 / np.sqrt(c.d_n + c.d_r)
        lg = (np.einsum("thd,shd->hts", q[:, :, :c.d_n], k_nope) +
              np.einsum("thd,sd->hts", q[:, :, c.d_n:], kpe)) * tau
        allow = np.zeros((T, T), dtype=bool)
        for t in range(T):
            allow[t, sets[t]] = True
        allow &= np.tril(np.ones((T, T), dtype=bool))
        lg = np.where(allow[None], lg, -np.inf)
        sink = W[p + ".learnable_sink_param"] if c.sink else np.full(c.H, -np.inf)
        mx = np.maximum(lg.max(axis=2), sink[:, None])  # [H, T]
        e = np.exp(lg - mx[:, :, None])
        den = e.sum(axis=2) + np.exp(sink[:, None] - mx)
        o = np.einsum("hts,shd->thd", e / den[:, :, None], v).reshape(T, c.H * c.d_v)
        if c.gated:
            o = o * _sigmoid(u @ W[p + ".linear_gate.weight"].T)
        return o @ W[p + ".o_proj.weight"].T, sets

    def mlp(self, p, u, moe):
        c = self.cfg
        W = self.W
        if not moe:
            return (_silu(u @ W[p + ".gate_proj.weight"].T) * (u @ W[p + ".up_proj.weight"].T)) @ W[p + ".down_proj.weight"].T
        s = _sigmoid(u @ W[p + ".gate.weight"].T)  # [T, E]
        choice = s + W[p + ".gate.e_score_correction_bias"]
        gu = W[p + ".experts.gate_up_proj"]  # [E, 2I, d]
        dn = W[p + ".experts.down_proj"]  # [E, d, I]
        I_ = c.moe_inter
        L = c.swiglu_limit
        out = np.zeros_like(u)
        for t in range(u.shape[0]):
            idx = np.argsort(-choice[t], kind="stable")[:c.top_e]
            w = s[t, idx]
            if c.norm_topk:
                w = w / (w.sum() + 1e-20)
            w = w * c.rsf
            for e, we in zip(idx, w):
                h = gu[e] @ u[t]
                g, up = h[:I_], h[I_:]
                if L > 0:
                    g = np.minimum(g, L)
                    up = np.clip(up, -L, L)
                out[t] += we * (dn[e] @ (_silu(g) * up))
        sh = p + ".shared_experts"
        out += (_silu(u @ W[sh + ".gate_proj.weight"].T) * (u @ W[sh + ".up_proj.weight"].T)) @ W[sh + ".down_proj.weight"].T
        return out

    # --- passes -------------------------------------------------------------------------------------------------
    def forward(self, ids):
        """ids [T] of one sequence at positions 0..T-1 -> (logits [T, V], final-normed hidden [T, d],
        {full layer: top-k sets})."""
        c = self.cfg
        W = self.W
        pos = np.arange(len(ids))
        e = W["model.embed_tokens.weight"][np.asarray(ids)]
        X = np.repeat(e[:, None, :], c.C, axis=1)
        sets, all_sets = None, {}
        for l in range(c.n_layers):
            p = "model.layers.%d" % l
            full = c.indexer_types[l] == "full"
            y, post = self.hc_pre(X, p + ".hc_attn_layer.hc_pre")
            a, sets = self.attention(p + ".self_attn", _rmsnorm(y, W[p + ".input_layernorm.weight"], c.eps), pos, sets,
                                     full)
            if full:
                all_sets[l] = sets
            X = X + post[:, :, None] * a[:, None, :]
            y, post = self.hc_pre(X, p + ".hc_mlp_layer.hc_pre")
            f = self.mlp(p + ".mlp", _rmsnorm(y, W[p + ".post_attention_layernorm.weight"], c.eps), c.layer_moe[l])
            X = X + post[:, :, None] * f[:, None, :]
        h = _rmsnorm(self.hc_head(X), W["model.norm.weight"], c.eps)
        return h @ W["lm_head.weight"].T, h, all_sets

    def forward_mtp(self, ids, hidden, zero_pos0=False):
        """MTP rows p = 0..T-2: (token ids[p+1], hidden[p], position p) -> draft logits [T-1, V] (spec §11.2)."""
        c = self.cfg
        W = self.W
        p = "model.mtp_layers.0"
        n = len(ids) - 1
        pos = np.arange(n)
        e = W["model.embed_tokens.weight"][np.asarray(ids[1:])].copy()
        if zero_pos0 and n > 0:
            e[0] = 0.0
        x = np.concatenate([_rmsnorm(e, W[p + ".enorm.weight"], c.eps), _rmsnorm(hidden[:n], W[p + ".hnorm.weight"], c.eps)],
                           axis=1)
        v = x @ W[p + ".eh_proj.weight"].T
        a, _ = self.attention(p + ".self_attn", _rmsnorm(v, W[p + ".input_layernorm.weight"], c.eps), pos, None, True)
        v = v + a
        v = v + self.mlp(p + ".mlp", _rmsnorm(v, W[p + ".post_attention_layernorm.weight"], c.eps), True)
        g = _rmsnorm(v, W[p + ".final_layernorm.weight"], c.eps)
        return g @ W["lm_head.weight"].T


def _main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cmd", choices=["logits"])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--prompt-ids", required=True)
    ap.add_argument("--all-positions", action="store_true")
    ap.add_argument("--mtp", action="store_true")
    a = ap.parse_args(argv)
    ids = [int(x) for x in a.prompt_ids.split(",")]
    ref = Hy4Ref(a.model)
    logits, hidden, _ = ref.forward(ids)
    if a.mtp:
        logits = ref.forward_mtp(ids, hidden)
    rows = logits if a.all_positions or a.mtp else logits[-1:]
    json.dump({"n_vocab": int(logits.shape[1]), "logits": [[float(v) for v in r] for r in rows]}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
