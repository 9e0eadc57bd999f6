#!/usr/bin/python3
"""Write a small deterministic random Hy3 (`hy_v3`) checkpoint in Hugging Face layout.

  make_random_hy3.py --out DIR --variant NAME [--seed N]

Writes DIR/config.json (every hy_v3 field of specs/hy3_architecture.md §1, scaled down), DIR/generation_config.json
and the weights (DIR/model.safetensors, or shards + model.safetensors.index.json). No tokenizer: tests pass ids.
Weights are N(0, sigma) from numpy PCG64(seed) in a fixed order, then rounded to bf16 (round-to-nearest-even);
tensors stored as F32 keep their full fp32 values. Norm weights are 1 + N(0, 0.15), q/k norm weights 1 + N(0, 0.35)
(uneven, so that QK-norm-before-RoPE and after differ). The same arguments always give byte-identical files.

Variants (each exercises a different set of loader paths; see VARIANTS below):
  inner        inner spelling (mlp.router.gate / mlp.expert_bias / mlp.shared_mlp), per-expert tensors,
               route_norm true, router_scaling_factor 2.5, rope_parameters, eos_token_id a list, router+bias F32
  outer-fused  outer spelling (mlp.gate / e_score_correction_bias / shared_experts), fused experts
               (gate_up_proj [E, 2I, H], down_proj [E, H, I]), route_norm false, scaling 1.0, top-level
               rope_theta, mlp_layer_types instead of first_k_dense_replace, router BF16 + bias F32
  sharded      3 shards + model.safetensors.index.json, tie_word_embeddings true (no lm_head tensor),
               2 dense layers, router + bias BF16
  scaled       route_norm true, scaling 2.826, num_shared_experts 2, only expert_hidden_dim (no
               moe_intermediate_size), 8 query heads / 2 kv heads (q width 128 != hidden 64), router + bias F32
  dist         8 query heads / 4 kv heads, 16 experts top-6: 2- and 4-way attention, expert and vocabulary
               splits (tests/dist), top_k > EP size 4 (the recipe's all-gather dispatch rule)
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import safetensors_np  # noqa: E402

SIGMA = {"embed": 0.5, "attn": 0.125, "dense": 0.125, "expert": 0.18, "shared": 0.125, "router": 0.25,
         "bias": 0.06, "lm_head": 0.125, "eh_proj": 0.125, "norm": 0.15, "qk_norm": 0.35}

BASE = dict(vocab=300, hidden=64, layers=3, heads=4, kv=2, head_dim=16, inter=96, experts=8, top_k=2,
            moe_inter=24, shared=1, route_norm=True, scale=1.0, theta=11158840.0, rope_style="parameters",
            dense_spec=("first_k", 1), tie=False, spelling="inner", fused=False, router_dt="F32",
            bias_dt="F32", eos=297, shards=0, moe_size_keys=("moe_intermediate_size", "expert_hidden_dim"),
            seed=1001)

VARIANTS = {
    "inner": dict(route_norm=True, scale=2.5, rope_style="parameters", eos=[297, 299], spelling="inner",
                  fused=False, top_k=2, seed=1001),
    "outer-fused": dict(vocab=320, route_norm=False, scale=1.0, rope_style="top", theta=500000.0,
                        dense_spec=("types", ["dense", "sparse", "sparse"]), spelling="outer", fused=True,
                        top_k=3, router_dt="BF16", bias_dt="F32", seed=2002),
    "sharded": dict(vocab=288, tie=True, dense_spec=("first_k", 2), shards=3, spelling="inner", route_norm=True,
                    scale=1.5, router_dt="BF16", bias_dt="BF16", top_k=2, seed=3003),
    "scaled": dict(vocab=301, heads=8, kv=2, route_norm=True, scale=2.826, shared=2, top_k=3, spelling="outer",
                   moe_size_keys=("expert_hidden_dim",), seed=4004),
    "dist": dict(vocab=300, heads=8, kv=4, experts=16, top_k=6, moe_inter=32, inter=96, shared=1, route_norm=True,
                 scale=2.0, spelling="inner", seed=5005),
}


def variant_params(name):
    if name not in VARIANTS:
        raise SystemExit("unknown variant %r (known: %s)" % (name, ", ".join(VARIANTS)))
    p = dict(BASE)
    p.update(VARIANTS[name])
    return p


def make_config(p):
    L = p["layers"]
    special = p["vocab"] - 10  # bos, pad, sep, eod live near the top of the vocab, like the hub ids
    cfg = {
        "architectures": ["HYV3ForCausalLM"],
        "model_type": "hy_v3",
        "dtype": "bfloat16",
        "vocab_size": p["vocab"],
        "hidden_size": p["hidden"],
        "intermediate_size": p["inter"],
        "num_hidden_layers": L,
        "num_attention_heads": p["heads"],
        "num_key_value_heads": p["kv"],
        "head_dim": p["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-05,
    }
    if p["rope_style"] == "parameters":
        cfg["rope_parameters"] = {"rope_theta": p["theta"], "rope_type": "default"}
    else:
        cfg["rope_theta"] = p["theta"]
    cfg["tie_word_embeddings"] = p["tie"]
    kind, val = p["dense_spec"]
    if kind == "first_k":
        cfg["first_k_dense_replace"] = val
    else:
        cfg["mlp_layer_types"] = list(val)
    cfg.update({"num_experts": p["experts"], "num_experts_per_tok": p["top_k"], "num_shared_experts": p["shared"]})
    for k in p["moe_size_keys"]:
        cfg[k] = p["moe_inter"]
    cfg.update({
        "router_scaling_factor": p["scale"],
        "route_norm": p["route_norm"],
        "moe_router_use_sigmoid": True,
        "moe_router_enable_expert_bias": True,
        "qk_norm": True,
        "enable_moe_fp32_combine": False,
        "enable_lm_head_fp32": True,
        "enable_attention_fp32_softmax": False,
        "num_nextn_predict_layers": 1,
        "bos_token_id": special,
        "eos_token_id": p["eos"],
        "pad_token_id": special + 2,
        "sep_token_id": special + 4,
        "eod_token_id": special + 6,
        "initializer_range": 0.006,
        "use_cache": True,
        "output_router_logits": True,
        "use_grouped_mm": False,
        "transformers_version": "5.6.0",
    })
    gen = {"bos_token_id": special, "eos_token_id": p["eos"], "pad_token_id": special + 2, "do_sample": False,
           "transformers_version": "5.6.0"}
    return cfg, gen


def is_dense(p, i):
    kind, val = p["dense_spec"]
    return i < val if kind == "first_k" else val[i] == "dense"


def make_tensors(p, seed):
    """Returns a list of (name, dtype, array, group) in a fixed order; group = layer index or -1 (globals)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    H, hd, E, I = p["hidden"], p["head_dim"], p["experts"], p["moe_inter"]
    out = []

    def w(name, shape, sigma, group, dt="BF16"):
        a = rng.normal(0.0, sigma, size=shape).astype(np.float32)
        out.append((name, dt, a, group))

    def norm(name, n, sigma, group):
        a = (1.0 + rng.normal(0.0, sigma, size=(n,))).astype(np.float32)
        out.append((name, "BF16", a, group))

    inner = p["spelling"] == "inner"
    w("model.embed_tokens.weight", (p["vocab"], H), SIGMA["embed"], -1)
    for i in range(p["layers"] + 1):  # the last one is the MTP layer
        pre = "model.layers.%d." % i
        mtp = i == p["layers"]
        norm(pre + "input_layernorm.weight", H, SIGMA["norm"], i)
        norm(pre + "post_attention_layernorm.weight", H, SIGMA["norm"], i)
        w(pre + "self_attn.q_proj.weight", (p["heads"] * hd, H), SIGMA["attn"], i)
        w(pre + "self_attn.k_proj.weight", (p["kv"] * hd, H), SIGMA["attn"], i)
        w(pre + "self_attn.v_proj.weight", (p["kv"] * hd, H), SIGMA["attn"], i)
        w(pre + "self_attn.o_proj.weight", (H, p["heads"] * hd), SIGMA["attn"], i)
        norm(pre + "self_attn.q_norm.weight", hd, SIGMA["qk_norm"], i)
        norm(pre + "self_attn.k_norm.weight", hd, SIGMA["qk_norm"], i)
        if not mtp and is_dense(p, i):
            w(pre + "mlp.gate_proj.weight", (p["inter"], H), SIGMA["dense"], i)
            w(pre + "mlp.up_proj.weight", (p["inter"], H), SIGMA["dense"], i)
            w(pre + "mlp.down_proj.weight", (H, p["inter"]), SIGMA["dense"], i)
        else:
            w(pre + ("mlp.router.gate.weight" if inner else "mlp.gate.weight"), (E, H), SIGMA["router"], i,
              p["router_dt"])
            w(pre + ("mlp.expert_bias" if inner else "mlp.e_score_correction_bias"), (E,), SIGMA["bias"], i,
              p["bias_dt"])
            g = rng.normal(0.0, SIGMA["expert"], size=(E, I, H)).astype(np.float32)
            u = rng.normal(0.0, SIGMA["expert"], size=(E, I, H)).astype(np.float32)
            d = rng.normal(0.0, SIGMA["expert"], size=(E, H, I)).astype(np.float32)
            if p["fused"]:
                out.append((pre + "mlp.experts.gate_up_proj", "BF16", np.concatenate([g, u], axis=1), i))
                out.append((pre + "mlp.experts.down_proj", "BF16", d, i))
            else:
                for e in range(E):
                    out.append((pre + "mlp.experts.%d.gate_proj.weight" % e, "BF16", g[e], i))
                    out.append((pre + "mlp.experts.%d.up_proj.weight" % e, "BF16", u[e], i))
                    out.append((pre + "mlp.experts.%d.down_proj.weight" % e, "BF16", d[e], i))
            S = I * p["shared"]
            sp = pre + ("mlp.shared_mlp." if inner else "mlp.shared_experts.")
            w(sp + "gate_proj.weight", (S, H), SIGMA["shared"], i)
            w(sp + "up_proj.weight", (S, H), SIGMA["shared"], i)
            w(sp + "down_proj.weight", (H, S), SIGMA["shared"], i)
        if mtp:
            norm(pre + "enorm.weight", H, SIGMA["norm"], i)
            norm(pre + "hnorm.weight", H, SIGMA["norm"], i)
            w(pre + "eh_proj.weight", (H, 2 * H), SIGMA["eh_proj"], i)
            norm(pre + "final_layernorm.weight", H, SIGMA["norm"], i)
    norm("model.norm.weight", H, SIGMA["norm"], -1)
    if not p["tie"]:
        w("lm_head.weight", (p["vocab"], H), SIGMA["lm_head"], -1)
    return out


def write(out_dir, variant, seed=None):
    p = variant_params(variant)
    seed = p["seed"] if seed is None else seed
    os.makedirs(out_dir, exist_ok=True)
    cfg, gen = make_config(p)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    for fn in os.listdir(out_dir):  # a re-run with another variant must not leave stale weights behind
        if fn.endswith(".safetensors") or fn == "model.safetensors.index.json":
            os.remove(os.path.join(out_dir, fn))
    tensors = make_tensors(p, seed)
    meta = {"format": "pt", "generator": "hyinfer tools/make/make_random_hy3.py", "variant": variant, "seed": seed}
    n = p["shards"]
    if n <= 1:
        safetensors_np.save(os.path.join(out_dir, "model.safetensors"), [(a, b, c) for a, b, c, _ in tensors], meta)
        return
    # shard by layer: globals + first layers in shard 1, ..., the MTP layer in the last shard
    groups = sorted({g for _, _, _, g in tensors})
    per = -(-len(groups) // n)
    shard_of_group = {g: min(k // per, n - 1) for k, g in enumerate(groups)}
    wm, total = {}, 0
    for s in range(n):
        fn = "model-%05d-of-%05d.safetensors" % (s + 1, n)
        part = [(a, b, c) for a, b, c, g in tensors if shard_of_group[g] == s]
        safetensors_np.save(os.path.join(out_dir, fn), part, meta)
        for name, dt, arr in part:
            wm[name] = fn
            total += arr.size * (4 if dt == "F32" else 2)
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(wm.items()))}, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description="deterministic random small hy_v3 checkpoint")
    ap.add_argument("--out", required=True)
    ap.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    ap.add_argument("--seed", type=int, default=None, help="default: a fixed seed per variant")
    a = ap.parse_args()
    write(a.out, a.variant, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
