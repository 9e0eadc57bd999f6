#!/usr/bin/python3
"""Python/numpy reference of the Hy3 (`hy_v3`) forward pass, main model and MTP layer.

Written from specs/hy3_architecture.md §2-§4 and DESIGN.md §5 (transformers `hy_v3` semantics):
  h = embed[id] (no scaling); pre-norm blocks: h += Attn(RMSNorm(h)); h += MLP(RMSNorm(h))
  Attn: q/k/v projections -> per-head RMSNorm of q and k (one head_dim-wide weight) -> NeoX
        rotate_half RoPE (pairs j, j+d/2; inv_freq = theta^(-2i/d)) -> causal softmax(q k^T / sqrt(d)) v,
        query head h reads kv head h // (n_heads / n_kv_heads) -> o_proj
  MLP:  dense SwiGLU for dense layers; MoE otherwise:
        s = sigmoid(router(m)) (fp32 or wider), choice = s + expert_bias (selection only), idx = top-k(choice),
        w = s[idx], if route_norm: w /= sum(w) + 1e-20, w *= router_scaling_factor (routed part only),
        y = sum_j w_j Expert_idx_j(m) + SharedExpert(m) (shared unscaled, width moe_inter * num_shared)
  out = RMSNorm(h; model.norm); logits = lm_head(out) (or embed when tie_word_embeddings)
  MTP (layer num_hidden_layers): row p = (token s[p+1], final-normed h_p, position p):
        u = eh_proj [enorm(embed(s[p+1])); hnorm(h_p)] -> decoder block (own causal attention over rows 0..p)
        -> final_layernorm -> lm_head. Row 0 uses the real embedding (nothing zeroed).

Math runs in float64 (default) on the checkpoint's values (bf16 widened exactly, F32 kept). RoPE angles are
computed as fp32 products of fp32 values, as the spec recommends, unless rope_fp64=True.

`MUTATIONS` are deliberate deviations, one per watch point of spec §8, used by the tests to prove that a
comparison against this reference is sensitive to each of them.

CLI (same JSON as `hyinfer logits` / `hyinfer generate --print-ids`):
  hy3_ref.py logits -m DIR --prompt-ids 1,2,3 [--all-positions] [--mtp] [--mutate NAME] [--dtype float32]
  hy3_ref.py generate -m DIR --prompt-ids 1,2,3 -n 64 [--ignore-eos] [--mutate NAME] [--dtype float32]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402

MUTATIONS = {
    "rope_interleaved": "RoPE pairs (2i, 2i+1) (GPT-J interleaved) instead of NeoX (j, j+d/2)",
    "rope_before_qknorm": "RoPE applied before the per-head q/k RMSNorm instead of after",
    "bias_in_weights": "expert_bias added to the gathered routing weights too, not only for selection",
    "scale_shared_too": "router_scaling_factor applied to routed + shared sum, not only the routed part",
    "scale_before_renorm": "router_scaling_factor applied before route_norm renormalisation (so it cancels)",
    "gqa_modulo": "query head h reads kv head h % n_kv instead of h // (n_heads / n_kv)",
    "route_norm_ignored": "route_norm flag ignored: renormalise when false / do not when true",
}


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _silu(x):
    return x * _sigmoid(x)


class Hy3Config:
    """Normalised view of a hy_v3 config.json (accepts both hub spellings of the optional fields)."""

    def __init__(self, cfg):
        self.raw = cfg
        if cfg.get("model_type") not in (None, "hy_v3"):
            raise ValueError("config.json: model_type %r is not hy_v3" % cfg.get("model_type"))
        if cfg.get("hidden_act", "silu") != "silu":
            raise ValueError("config.json: hidden_act %r (hy_v3 uses silu)" % cfg.get("hidden_act"))
        if cfg.get("attention_bias") or cfg.get("mlp_bias"):
            raise ValueError("config.json: attention_bias / mlp_bias are not part of hy_v3")
        self.vocab = int(cfg["vocab_size"])
        self.hidden = int(cfg["hidden_size"])
        self.n_layers = int(cfg["num_hidden_layers"])
        self.n_heads = int(cfg["num_attention_heads"])
        self.n_kv = int(cfg.get("num_key_value_heads", self.n_heads))
        if self.n_heads % self.n_kv:
            raise ValueError("config.json: num_attention_heads not a multiple of num_key_value_heads")
        self.head_dim = int(cfg.get("head_dim") or self.hidden // self.n_heads)
        self.eps = float(cfg.get("rms_norm_eps", 1e-5))
        rp = cfg.get("rope_parameters") or {}
        theta = rp.get("rope_theta", cfg.get("rope_theta"))
        if theta is None:
            raise ValueError("config.json: neither rope_parameters.rope_theta nor rope_theta")
        rtype = rp.get("rope_type", (cfg.get("rope_scaling") or {}).get("rope_type", "default"))
        if rtype not in ("default", None):
            raise ValueError("config.json: rope_type %r not supported by the reference" % rtype)
        self.rope_theta = float(theta)
        self.qk_norm = bool(cfg.get("qk_norm", True))
        self.tie = bool(cfg.get("tie_word_embeddings", False))
        self.n_experts = int(cfg.get("num_experts", cfg.get("num_local_experts", 0)) or 0)
        self.top_k = int(cfg.get("num_experts_per_tok", 0) or 0)
        self.n_shared = int(cfg.get("num_shared_experts", 1))
        mi = cfg.get("moe_intermediate_size", cfg.get("expert_hidden_dim"))
        self.moe_inter = int(mi) if mi is not None else None
        self.inter = int(cfg.get("intermediate_size", 0) or 0)
        self.route_norm = bool(cfg.get("route_norm", True))
        self.scale = float(cfg.get("router_scaling_factor", 1.0))
        self.n_mtp = int(cfg.get("num_nextn_predict_layers", 0) or 0)
        types = cfg.get("mlp_layer_types")
        if types is not None:
            if len(types) < self.n_layers:
                raise ValueError("config.json: mlp_layer_types shorter than num_hidden_layers")
            for t in types:
                if t not in ("dense", "sparse"):
                    raise ValueError("config.json: mlp_layer_types entry %r" % t)
            self.layer_types = list(types[:self.n_layers])
        else:
            k = int(cfg.get("first_k_dense_replace", 1))
            self.layer_types = ["dense" if i < k else "sparse" for i in range(self.n_layers)]
        eos = cfg.get("eos_token_id")
        self.eos_ids = [] if eos is None else (list(eos) if isinstance(eos, list) else [eos])


def load_tensors(model_dir):
    """All tensors of a checkpoint dir (single file or sharded index). name -> (dtype_str, array)."""
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    out = {}
    if os.path.exists(idx):
        with open(idx) as f:
            wm = json.load(f)["weight_map"]
        for shard in sorted(set(wm.values())):
            part = safetensors_np.load(os.path.join(model_dir, shard))
            for name, v in part.items():
                if wm.get(name) != shard:
                    raise ValueError("%s: tensor %s not mapped to this shard in the index" % (shard, name))
                out[name] = v
        missing = set(wm) - set(out)
        if missing:
            raise ValueError("index names tensors missing from shards: %s" % sorted(missing)[:5])
    else:
        out = safetensors_np.load(os.path.join(model_dir, "model.safetensors"))
    return out


class Hy3Ref:
    def __init__(self, model_dir, mutations=(), dtype=np.float64, rope_fp64=False):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = Hy3Config(json.load(f))
        for m in mutations:
            if m not in MUTATIONS:
                raise ValueError("unknown mutation %r" % m)
        self.mut = set(mutations)
        self.dt = dtype
        self.rope_fp64 = rope_fp64
        raw = load_tensors(model_dir)
        self.dtypes = {k: v[0] for k, v in raw.items()}
        self.w = {k: np.asarray(v[1], dtype=dtype) for k, v in raw.items()}
        self.used = set()
        c = self.cfg
        self.embed = self._t("model.embed_tokens.weight", (c.vocab, c.hidden))
        self.norm = self._t("model.norm.weight", (c.hidden,))
        if c.tie:
            self.lm_head = self.embed
        else:
            self.lm_head = self._t("lm_head.weight", (c.vocab, c.hidden))
        self.layers = [self._load_layer(i, c.layer_types[i]) for i in range(c.n_layers)]
        self.mtp = None
        if c.n_mtp > 0:
            L = c.n_layers
            p = "model.layers.%d." % L
            if self._has(p + "mlp.router.gate.weight") or self._has(p + "mlp.gate.weight"):
                kind = "sparse"
            else:
                kind = "dense"
            self.mtp = self._load_layer(L, kind)
            self.mtp["enorm"] = self._t(p + "enorm.weight", (c.hidden,))
            self.mtp["hnorm"] = self._t(p + "hnorm.weight", (c.hidden,))
            self.mtp["eh_proj"] = self._t(p + "eh_proj.weight", (c.hidden, 2 * c.hidden))
            self.mtp["final_norm"] = self._t(p + "final_layernorm.weight", (c.hidden,))
        unused = set(self.w) - self.used
        if unused:
            raise ValueError("checkpoint tensors not consumed by the reference: %s" % sorted(unused)[:8])
        hd = c.head_dim
        inv = 1.0 / (c.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
        self.inv_freq = inv if rope_fp64 else inv.astype(np.float32)
        self.sel_gaps = []  # (layer, min gap between k-th and (k+1)-th selection score) of the last forward

    # -- tensor access -------------------------------------------------------------------------
    def _has(self, name):
        return name in self.w

    def _t(self, name, shape):
        if name not in self.w:
            raise KeyError("checkpoint lacks tensor %s" % name)
        a = self.w[name]
        if tuple(a.shape) != tuple(shape):
            raise ValueError("tensor %s has shape %s, expected %s" % (name, list(a.shape), list(shape)))
        self.used.add(name)
        return a

    def _alt(self, names, shape):
        for n in names:
            if n in self.w:
                return self._t(n, shape)
        raise KeyError("checkpoint lacks tensor %s" % " / ".join(names))

    def _load_layer(self, i, kind):
        c = self.cfg
        p = "model.layers.%d." % i
        H, hd = c.hidden, c.head_dim
        L = {
            "in_norm": self._t(p + "input_layernorm.weight", (H,)),
            "post_norm": self._t(p + "post_attention_layernorm.weight", (H,)),
            "q": self._t(p + "self_attn.q_proj.weight", (c.n_heads * hd, H)),
            "k": self._t(p + "self_attn.k_proj.weight", (c.n_kv * hd, H)),
            "v": self._t(p + "self_attn.v_proj.weight", (c.n_kv * hd, H)),
            "o": self._t(p + "self_attn.o_proj.weight", (H, c.n_heads * hd)),
            "kind": kind, "index": i,
        }
        if c.qk_norm:
            L["q_norm"] = self._t(p + "self_attn.q_norm.weight", (hd,))
            L["k_norm"] = self._t(p + "self_attn.k_norm.weight", (hd,))
        if kind == "dense":
            I = c.inter
            L["gate"] = self._t(p + "mlp.gate_proj.weight", (I, H))
            L["up"] = self._t(p + "mlp.up_proj.weight", (I, H))
            L["down"] = self._t(p + "mlp.down_proj.weight", (H, I))
            if self._has(p + "mlp.gate.weight") or self._has(p + "mlp.router.gate.weight"):
                raise ValueError("layer %d is dense by config but has a router tensor" % i)
            return L
        E, I = c.n_experts, c.moe_inter
        if not E or not c.top_k or I is None:
            raise ValueError("config.json: MoE layer %d but num_experts/num_experts_per_tok/moe size missing" % i)
        L["router"] = self._alt([p + "mlp.router.gate.weight", p + "mlp.gate.weight"], (E, H))
        L["bias"] = self._alt([p + "mlp.expert_bias", p + "mlp.e_score_correction_bias"], (E,))
        if self._has(p + "mlp.experts.gate_up_proj"):
            gu = self._t(p + "mlp.experts.gate_up_proj", (E, 2 * I, H))
            L["eg"] = gu[:, :I, :]
            L["eu"] = gu[:, I:, :]
            L["ed"] = self._t(p + "mlp.experts.down_proj", (E, H, I))
        else:
            L["eg"] = np.stack([self._t(p + "mlp.experts.%d.gate_proj.weight" % e, (I, H)) for e in range(E)])
            L["eu"] = np.stack([self._t(p + "mlp.experts.%d.up_proj.weight" % e, (I, H)) for e in range(E)])
            L["ed"] = np.stack([self._t(p + "mlp.experts.%d.down_proj.weight" % e, (H, I)) for e in range(E)])
        if c.n_shared > 0:
            S = I * c.n_shared
            sp = p + ("mlp.shared_mlp." if self._has(p + "mlp.shared_mlp.gate_proj.weight") else "mlp.shared_experts.")
            L["sg"] = self._t(sp + "gate_proj.weight", (S, H))
            L["su"] = self._t(sp + "up_proj.weight", (S, H))
            L["sd"] = self._t(sp + "down_proj.weight", (H, S))
        return L

    # -- building blocks -----------------------------------------------------------------------
    def rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.cfg.eps) * w

    def rope(self, x, pos):
        """x [T, heads, hd], pos [T] ints."""
        hd = self.cfg.head_dim
        half = hd // 2
        if self.rope_fp64:
            ang = pos.astype(np.float64)[:, None] * self.inv_freq[None, :]
        else:
            ang = (pos.astype(np.float32)[:, None] * self.inv_freq[None, :]).astype(np.float64)
        cos = np.cos(ang)[:, None, :]
        sin = np.sin(ang)[:, None, :]
        out = np.empty_like(x)
        if "rope_interleaved" in self.mut:
            a, b = x[..., 0::2], x[..., 1::2]
            out[..., 0::2] = a * cos - b * sin
            out[..., 1::2] = b * cos + a * sin
        else:
            a, b = x[..., :half], x[..., half:]
            out[..., :half] = a * cos - b * sin
            out[..., half:] = b * cos + a * sin
        return out

    def attention(self, L, a, pos):
        c = self.cfg
        T = a.shape[0]
        hd = c.head_dim
        q = (a @ L["q"].T).reshape(T, c.n_heads, hd)
        k = (a @ L["k"].T).reshape(T, c.n_kv, hd)
        v = (a @ L["v"].T).reshape(T, c.n_kv, hd)
        if "rope_before_qknorm" in self.mut:
            q, k = self.rope(q, pos), self.rope(k, pos)
            if c.qk_norm:
                q, k = self.rms(q, L["q_norm"]), self.rms(k, L["k_norm"])
        else:
            if c.qk_norm:
                q, k = self.rms(q, L["q_norm"]), self.rms(k, L["k_norm"])
            q, k = self.rope(q, pos), self.rope(k, pos)
        group = c.n_heads // c.n_kv
        mask = np.triu(np.ones((T, T), dtype=bool), 1)
        out = np.empty((T, c.n_heads, hd), dtype=a.dtype)
        for h in range(c.n_heads):
            kh = h % c.n_kv if "gqa_modulo" in self.mut else h // group
            sc = (q[:, h, :] @ k[:, kh, :].T) / np.sqrt(hd)
            sc[mask] = -np.inf
            sc -= sc.max(axis=1, keepdims=True)
            p = np.exp(sc)
            p /= p.sum(axis=1, keepdims=True)
            out[:, h, :] = p @ v[:, kh, :]
        return out.reshape(T, c.n_heads * hd) @ L["o"].T

    def moe(self, L, m):
        c = self.cfg
        T = m.shape[0]
        s = _sigmoid(m @ L["router"].T)  # [T, E]
        choice = s + L["bias"][None, :]
        order = np.argsort(-choice, axis=1, kind="stable")
        idx = order[:, :c.top_k]
        if c.top_k < c.n_experts:
            srt = np.take_along_axis(choice, order, axis=1)
            gap = float(np.min(srt[:, c.top_k - 1] - srt[:, c.top_k]))
            self.sel_gaps.append((L["index"], gap))
        src = choice if "bias_in_weights" in self.mut else s
        w = np.take_along_axis(src, idx, axis=1)
        route_norm = c.route_norm != ("route_norm_ignored" in self.mut)
        scale_in = "scale_before_renorm" in self.mut
        if scale_in:
            w = w * c.scale
        if route_norm:
            w = w / (w.sum(axis=1, keepdims=True) + 1e-20)
        if not scale_in and "scale_shared_too" not in self.mut:
            w = w * c.scale
        routed = np.zeros_like(m)
        for e in range(c.n_experts):
            rows, slot = np.nonzero(idx == e)
            if rows.size == 0:
                continue
            x = m[rows]
            y = (_silu(x @ L["eg"][e].T) * (x @ L["eu"][e].T)) @ L["ed"][e].T
            routed[rows] += w[rows, slot][:, None] * y
        if "sg" in L:
            shared = (_silu(m @ L["sg"].T) * (m @ L["su"].T)) @ L["sd"].T
        else:
            shared = 0.0
        if "scale_shared_too" in self.mut:
            return c.scale * (routed + shared)
        return routed + shared

    def block(self, L, h, pos):
        h = h + self.attention(L, self.rms(h, L["in_norm"]), pos)
        m = self.rms(h, L["post_norm"])
        if L["kind"] == "dense":
            y = (_silu(m @ L["gate"].T) * (m @ L["up"].T)) @ L["down"].T
        else:
            y = self.moe(L, m)
        return h + y

    # -- public API ----------------------------------------------------------------------------
    def forward(self, ids):
        """ids: token ids (positions 0..T-1). Returns (logits [T, vocab], final-normed hidden [T, H])."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0 or ids.min() < 0 or ids.max() >= self.cfg.vocab:
            raise ValueError("token ids must be a non-empty list within [0, vocab)")
        self.sel_gaps = []
        pos = np.arange(ids.size)
        h = self.embed[ids]
        for L in self.layers:
            h = self.block(L, h, pos)
        out = self.rms(h, self.norm)
        return out @ self.lm_head.T, out

    def mtp_logits(self, ids, hidden=None):
        """MTP rows p = 0..T-2 for sequence ids. Returns [T-1, vocab]."""
        if self.mtp is None:
            raise ValueError("checkpoint has no MTP layer (num_nextn_predict_layers = 0)")
        ids = np.asarray(ids, dtype=np.int64)
        if hidden is None:
            _, hidden = self.forward(ids)
        M = self.mtp
        T = ids.size - 1
        e = self.rms(self.embed[ids[1:]], M["enorm"])
        hh = self.rms(hidden[:T], M["hnorm"])
        u = np.concatenate([e, hh], axis=1) @ M["eh_proj"].T
        v = self.block(M, u, np.arange(T))
        g = self.rms(v, M["final_norm"])
        return g @ self.lm_head.T

    def generate(self, ids, n, ignore_eos=False):
        """Greedy (argmax, lowest id on ties). Returns (new ids, top1-top2 margins per step)."""
        seq = list(ids)
        out, margins = [], []
        for _ in range(n):
            logits, _ = self.forward(seq)
            last = logits[-1]
            tok = int(np.argmax(last))
            top2 = np.partition(last, -2)[-2:]
            margins.append(float(top2[1] - top2[0]))
            out.append(tok)
            seq.append(tok)
            if not ignore_eos and tok in self.cfg.eos_ids:
                break
        return out, margins


def margin_top2(row):
    t = np.partition(np.asarray(row), -2)[-2:]
    return float(t[1] - t[0])


def _main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cmd", choices=["logits", "generate"])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--prompt-ids", required=True)
    ap.add_argument("--all-positions", action="store_true")
    ap.add_argument("--mtp", action="store_true")
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--ignore-eos", action="store_true")
    ap.add_argument("--mutate", action="append", default=[], choices=sorted(MUTATIONS))
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                    help="math precision (float32 makes this a stand-in for the engine's fp32 mode)")
    ap.add_argument("--temperature", type=float, default=0.0, help="only 0 (greedy) is supported")
    ap.add_argument("--json", action="store_true", help="accepted for CLI compatibility (output is JSON)")
    ap.add_argument("--print-ids", action="store_true", help="accepted for CLI compatibility")
    a = ap.parse_args(argv)
    if a.temperature != 0.0:
        ap.error("only --temperature 0 (greedy) is supported")
    ids = [int(x) for x in a.prompt_ids.split(",") if x.strip()]
    ref = Hy3Ref(a.model, mutations=a.mutate, dtype=np.float32 if a.dtype == "float32" else np.float64)
    if a.cmd == "logits":
        logits, hidden = ref.forward(ids)
        res = {"prompt_ids": ids, "logits": (logits if a.all_positions else logits[-1:]).tolist()}
        if a.mtp:
            res["mtp_logits"] = ref.mtp_logits(ids, hidden).tolist()
        print(json.dumps(res))
    else:
        out, _ = ref.generate(ids, a.n, a.ignore_eos)
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
