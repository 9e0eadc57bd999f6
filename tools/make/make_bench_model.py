#!/usr/bin/python3
"""Write a random-weight hy_v3 / hy_v4 benchmark checkpoint with a real model's per-layer shapes.

  make_bench_model.py --out DIR [--shape hy3|hy-mt2|hy4|tiny|tiny-hy4] [--seed N] [--mtp]

The checkpoint is for `hyinfer bench latency` (issue 3): every layer has exactly the shapes of one layer
of the real model, but there are only 4 layers (layer 0 dense, layers 1..3 MoE) and fewer routed experts,
so a batch-1 decode step reads exactly the bytes one real layer reads per layer (top-k experts are the
same size whatever the expert count). Shapes:

  hy3     hidden 4096, 64 query / 8 KV heads of 128, dense width 13312 (layer 0), 32 routed experts of
          width 1536, top-8 + 1 shared, vocab 120832, rope_theta 11158840, route_norm, scaling 2.826.
          About 6.6 GB (BF16).
  hy-mt2  Hy-MT2-30B-A3B per-layer dims: hidden 2048, 32 query / 4 KV heads of 128, 128 routed experts
          of width 768, top-8 + 1 shared, vocab 120832. Its dense width is not documented in our
          sources; 6144 (3x hidden) is an assumption. About 4.9 GB.
  tiny    a few-MB model of the same structure (hidden 64, 8 experts of 32, top-2, vocab 512) for tests
          of this tool and of `hyinfer bench`.
  hy4     Hy4-preview (hy_v4) per-layer shapes: hidden 6144, 64 MLA heads (q_lora 2048, kv_lora 512, nope 192 +
          rope 64, v 256) with the sigmoid gate and sinks, indexer 32 heads x 128 (index_topk 2048), 4
          hyper-connection streams, dense width 18432 (layer 0), 16 routed experts of 2048, top-8 + 1 shared,
          vocab 120832, theta 1e7, scaling 2.827, swiglu_limit 10; indexer_types [full, full, shared, shared]
          (the real layers 0-3). About 9.7 GB.
  tiny-hy4  the same hy_v4 structure a few MB large (hidden 64, 4 heads, index_topk 64) for tests.

Weights: N(0, 0.02) (norm weights 1.0, expert_bias N(0, 0.001)), rounded to bf16; the router gate and
expert_bias are stored F32 like the hub checkpoint. --mtp adds the MTP layer (model.layers.4.*, a full MoE
layer plus enorm/hnorm/eh_proj/final_layernorm). Tensors are generated and written one row-chunk at a
time after a precomputed header, so memory use stays at a few hundred MB whatever the model size.
numpy PCG64(seed) in a fixed order: the same arguments give byte-identical files. No tokenizer: the bench
feeds random token ids.
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import safetensors_np  # noqa: E402

SHAPES = {
    "hy3": dict(hidden=4096, heads=64, kv=8, head_dim=128, inter=13312, experts=32, top_k=8, moe_inter=1536,
                shared=1, vocab=120832, layers=4, dense=1, theta=11158840.0, scale=2.826),
    "hy-mt2": dict(hidden=2048, heads=32, kv=4, head_dim=128, inter=6144, experts=128, top_k=8, moe_inter=768,
                   shared=1, vocab=120832, layers=4, dense=1, theta=11158840.0, scale=2.826),
    "tiny": dict(hidden=64, heads=4, kv=2, head_dim=16, inter=96, experts=8, top_k=2, moe_inter=32,
                 shared=1, vocab=512, layers=4, dense=1, theta=11158840.0, scale=2.826),
    "hy4": dict(arch="hy_v4", hidden=6144, heads=64, q_lora=2048, kv_lora=512, nope=192, rope=64, v=256,
                inter=18432, experts=16, top_k=8, moe_inter=2048, shared=1, vocab=120832, layers=4, dense=1,
                theta=1e7, scale=2.827, idx_heads=32, idx_dim=128, idx_topk=2048, hc=4, limit=10.0,
                indexer_types=["full", "full", "shared", "shared"]),
    "tiny-hy4": dict(arch="hy_v4", hidden=64, heads=4, q_lora=32, kv_lora=32, nope=16, rope=16, v=16, inter=96,
                     experts=8, top_k=2, moe_inter=32, shared=1, vocab=512, layers=4, dense=1, theta=1e7, scale=2.827,
                     idx_heads=4, idx_dim=32, idx_topk=64, hc=4, limit=10.0,
                     indexer_types=["full", "full", "shared", "shared"]),
}
SIGMA = 0.02
BIAS_SIGMA = 0.001
CHUNK_ELEMS = 1 << 24  # 16M values (64 MB of fp32) per generated chunk


def special_ids(p):
    """Hub ids (bos, eos, pad, sep, eod) when the vocabulary is the real one, else ids near its top."""
    if p["vocab"] >= 120832:
        return 120000, 120025, 120002, 120007, 120026
    v = p["vocab"]
    return v - 8, v - 7, v - 6, v - 5, v - 4


def make_config_v4(p, mtp):
    bos, eos, pad, _, _ = special_ids(p)
    L = p["layers"]
    return {
        "architectures": ["HYV4ForCausalLM"], "model_type": "hy_v4", "dtype": "bfloat16",
        "vocab_size": p["vocab"], "hidden_size": p["hidden"], "num_hidden_layers": L,
        "intermediate_size": p["inter"], "moe_intermediate_size": p["moe_inter"], "max_position_embeddings": 1048576,
        "rms_norm_eps": 1e-05, "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": bos,
        "eos_token_id": eos, "pad_token_id": pad, "num_attention_heads": p["heads"], "num_key_value_heads": 8,  # ignored by MLA readers (as the hub file's 8)
        "head_dim": p["rope"], "q_lora_rank": p["q_lora"], "kv_lora_rank": p["kv_lora"],
        "qk_nope_head_dim": p["nope"], "qk_rope_head_dim": p["rope"], "v_head_dim": p["v"], "gated_mla": True,
        "gating_type": "elementwise", "learnable_sink": True,
        "rope_parameters": {"rope_theta": p["theta"], "rope_type": "default"}, "use_dsa": True,
        "index_topk": p["idx_topk"], "index_head_dim": p["idx_dim"], "index_n_heads": p["idx_heads"],
        "indexer_types": p["indexer_types"][:L], "enable_ihc": True, "hc_mult": p["hc"], "hc_magnitude": 2.0,
        "hc_eps": 1e-06, "mlp_layer_types": ["dense"] * p["dense"] + ["sparse"] * (L - p["dense"]),
        "n_routed_experts": p["experts"], "n_shared_experts": p["shared"], "num_experts_per_tok": p["top_k"],
        "norm_topk_prob": True, "routed_scaling_factor": p["scale"], "n_group": 1, "topk_group": 1,
        "swiglu_limit": p["limit"], "num_nextn_predict_layers": 1 if mtp else 0, "enable_lm_head_fp32": True,
        "transformers_version": "5.16.2",
    }


def tensor_list_v4(p, mtp):
    """hy_v4 hub names (specs/hy4_architecture.md §13), [(name, dtype, shape, kind)] in file order."""
    H, E, I, nh, C = p["hidden"], p["experts"], p["moe_inter"], p["heads"], p["hc"]
    dqk, dkv = p["nope"] + p["rope"], p["nope"] + p["v"]
    out = [("model.embed_tokens.weight", "BF16", (p["vocab"], H), "w")]

    def attn(pre, full):
        r = [(pre + "input_layernorm.weight", "BF16", (H,), "norm"),
             (pre + "post_attention_layernorm.weight", "BF16", (H,), "norm"),
             (pre + "self_attn.q_a_proj.weight", "BF16", (p["q_lora"], H), "w"),
             (pre + "self_attn.q_a_layernorm.weight", "BF16", (p["q_lora"],), "norm"),
             (pre + "self_attn.q_b_proj.weight", "BF16", (nh * dqk, p["q_lora"]), "w"),
             (pre + "self_attn.kv_a_proj_with_mqa.weight", "BF16", (p["kv_lora"] + p["rope"], H), "w"),
             (pre + "self_attn.kv_a_layernorm.weight", "BF16", (p["kv_lora"],), "norm"),
             (pre + "self_attn.kv_b_proj.weight", "BF16", (nh * dkv, p["kv_lora"]), "w"),
             (pre + "self_attn.o_proj.weight", "BF16", (H, nh * p["v"]), "w"),
             (pre + "self_attn.linear_gate.weight", "BF16", (nh * p["v"], H), "w"),
             (pre + "self_attn.learnable_sink_param", "F32", (nh,), "bias")]
        if full:
            r += [(pre + "self_attn.indexer.wq_b.weight", "BF16", (p["idx_heads"] * p["idx_dim"], p["q_lora"]), "w"),
                  (pre + "self_attn.indexer.wk.weight", "BF16", (p["idx_dim"], H), "w"),
                  (pre + "self_attn.indexer.k_norm.weight", "BF16", (p["idx_dim"],), "norm"),
                  (pre + "self_attn.indexer.k_norm.bias", "BF16", (p["idx_dim"],), "bias"),
                  (pre + "self_attn.indexer.weights_proj.weight", "BF16", (p["idx_heads"], H), "w")]
        return r

    def moe(pre):
        return [(pre + "mlp.gate.weight", "BF16", (E, H), "w"),
                (pre + "mlp.gate.e_score_correction_bias", "F32", (E,), "bias"),
                (pre + "mlp.experts.gate_up_proj", "BF16", (E, 2 * I, H), "w"),
                (pre + "mlp.experts.down_proj", "BF16", (E, H, I), "w"),
                (pre + "mlp.shared_experts.gate_proj.weight", "BF16", (I * p["shared"], H), "w"),
                (pre + "mlp.shared_experts.up_proj.weight", "BF16", (I * p["shared"], H), "w"),
                (pre + "mlp.shared_experts.down_proj.weight", "BF16", (H, I * p["shared"]), "w")]

    for i in range(p["layers"]):
        pre = "model.layers.%d." % i
        out += attn(pre, p["indexer_types"][i] == "full")
        for site in ("hc_attn_layer", "hc_mlp_layer"):
            out += [(pre + site + ".hc_pre.hc_fn", "F32", (2 * C, C * H), "hc"),
                    (pre + site + ".hc_pre.hc_base", "F32", (2 * C,), "bias"),
                    (pre + site + ".hc_pre.hc_scale", "F32", (2,), "norm")]
        if i < p["dense"]:
            out += [(pre + "mlp.gate_proj.weight", "BF16", (p["inter"], H), "w"),
                    (pre + "mlp.up_proj.weight", "BF16", (p["inter"], H), "w"),
                    (pre + "mlp.down_proj.weight", "BF16", (H, p["inter"]), "w")]
        else:
            out += moe(pre)
    out += [("model.hc_head.hc_head_fn", "F32", (C, C * H), "hc"), ("model.hc_head.hc_head_base", "F32", (C,), "bias"),
            ("model.hc_head.hc_head_scale", "F32", (1,), "norm"),
            ("model.norm.weight", "BF16", (H,), "norm"), ("lm_head.weight", "BF16", (p["vocab"], H), "w")]
    if mtp:
        pre = "model.mtp_layers.0."
        out += [(pre + "enorm.weight", "BF16", (H,), "norm"), (pre + "hnorm.weight", "BF16", (H,), "norm"),
                (pre + "eh_proj.weight", "BF16", (H, 2 * H), "w"),
                (pre + "final_layernorm.weight", "BF16", (H,), "norm")] + attn(pre, True) + moe(pre)
    return out


def make_config(p, mtp):
    if p.get("arch") == "hy_v4":
        return make_config_v4(p, mtp)
    bos, eos, pad, sep, eod = special_ids(p)
    return {
        "architectures": ["HYV3ForCausalLM"],
        "model_type": "hy_v3",
        "dtype": "bfloat16",
        "vocab_size": p["vocab"],
        "hidden_size": p["hidden"],
        "intermediate_size": p["inter"],
        "num_hidden_layers": p["layers"],
        "num_attention_heads": p["heads"],
        "num_key_value_heads": p["kv"],
        "head_dim": p["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": 262144,
        "rms_norm_eps": 1e-05,
        "rope_parameters": {"rope_theta": p["theta"], "rope_type": "default"},
        "tie_word_embeddings": False,
        "first_k_dense_replace": p["dense"],
        "num_experts": p["experts"],
        "num_experts_per_tok": p["top_k"],
        "num_shared_experts": p["shared"],
        "moe_intermediate_size": p["moe_inter"],
        "expert_hidden_dim": p["moe_inter"],
        "router_scaling_factor": p["scale"],
        "route_norm": True,
        "moe_router_use_sigmoid": True,
        "moe_router_enable_expert_bias": True,
        "qk_norm": True,
        "enable_moe_fp32_combine": False,
        "enable_lm_head_fp32": True,
        "enable_attention_fp32_softmax": False,
        "num_nextn_predict_layers": 1 if mtp else 0,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "sep_token_id": sep,
        "eod_token_id": eod,
        "initializer_range": 0.006,
        "use_cache": True,
        "output_router_logits": True,
        "use_grouped_mm": False,
        "transformers_version": "5.6.0",
    }


def tensor_list(p, mtp):
    """[(name, dtype, shape, kind)] in file order; kind: 'w' normal weight, 'norm' ones, 'bias' small, 'hc' the
    hyper-connection matrices (small, so the stream mixing stays near its init)."""
    if p.get("arch") == "hy_v4":
        return tensor_list_v4(p, mtp)
    H, D, E, I = p["hidden"], p["head_dim"], p["experts"], p["moe_inter"]
    out = [("model.embed_tokens.weight", "BF16", (p["vocab"], H), "w")]
    for i in range(p["layers"] + (1 if mtp else 0)):
        pre = "model.layers.%d." % i
        out += [(pre + "input_layernorm.weight", "BF16", (H,), "norm"),
                (pre + "post_attention_layernorm.weight", "BF16", (H,), "norm"),
                (pre + "self_attn.q_proj.weight", "BF16", (p["heads"] * D, H), "w"),
                (pre + "self_attn.k_proj.weight", "BF16", (p["kv"] * D, H), "w"),
                (pre + "self_attn.v_proj.weight", "BF16", (p["kv"] * D, H), "w"),
                (pre + "self_attn.o_proj.weight", "BF16", (H, p["heads"] * D), "w"),
                (pre + "self_attn.q_norm.weight", "BF16", (D,), "norm"),
                (pre + "self_attn.k_norm.weight", "BF16", (D,), "norm")]
        if i < p["dense"]:
            out += [(pre + "mlp.gate_proj.weight", "BF16", (p["inter"], H), "w"),
                    (pre + "mlp.up_proj.weight", "BF16", (p["inter"], H), "w"),
                    (pre + "mlp.down_proj.weight", "BF16", (H, p["inter"]), "w")]
        else:
            out += [(pre + "mlp.router.gate.weight", "F32", (E, H), "w"),
                    (pre + "mlp.expert_bias", "F32", (E,), "bias")]
            for e in range(E):
                ep = pre + "mlp.experts.%d." % e
                out += [(ep + "gate_proj.weight", "BF16", (I, H), "w"),
                        (ep + "up_proj.weight", "BF16", (I, H), "w"),
                        (ep + "down_proj.weight", "BF16", (H, I), "w")]
            S = I * p["shared"]
            sp = pre + "mlp.shared_mlp."
            out += [(sp + "gate_proj.weight", "BF16", (S, H), "w"),
                    (sp + "up_proj.weight", "BF16", (S, H), "w"),
                    (sp + "down_proj.weight", "BF16", (H, S), "w")]
        if mtp and i == p["layers"]:
            out += [(pre + "enorm.weight", "BF16", (H,), "norm"),
                    (pre + "hnorm.weight", "BF16", (H,), "norm"),
                    (pre + "eh_proj.weight", "BF16", (H, 2 * H), "w"),
                    (pre + "final_layernorm.weight", "BF16", (H,), "norm")]
    out += [("model.norm.weight", "BF16", (H,), "norm"),
            ("lm_head.weight", "BF16", (p["vocab"], H), "w")]
    return out


def nbytes(dt, shape):
    n = 1
    for s in shape:
        n *= s
    return n * (4 if dt == "F32" else 2)


def write_tensor(f, rng, dt, shape, kind):
    n = 1
    for s in shape:
        n *= s
    done = 0
    while done < n:
        m = min(CHUNK_ELEMS, n - done)
        if kind == "norm":
            a = np.ones(m, dtype=np.float32)
        else:
            a = rng.standard_normal(m, dtype=np.float32)
            a *= np.float32(BIAS_SIGMA if kind in ("bias", "hc") else SIGMA)
        f.write((safetensors_np.to_bf16(a) if dt == "BF16" else a).tobytes())
        done += m


def write(out_dir, shape, seed, mtp):
    p = SHAPES[shape]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(make_config(p, mtp), f, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        bos, eos, pad, _, _ = special_ids(p)
        json.dump({"bos_token_id": bos, "eos_token_id": eos, "pad_token_id": pad,
                   "do_sample": False, "transformers_version": "5.6.0"}, f, indent=2)
        f.write("\n")
    tensors = tensor_list(p, mtp)
    header, off = {"__metadata__": {"format": "pt", "generator": "hyinfer tools/make/make_bench_model.py",
                                    "shape": shape, "seed": str(seed)}}, 0
    for name, dt, shp, _ in tensors:
        b = nbytes(dt, shp)
        if off % 4:  # hyinfer maps weights in place: F32 data must be 4-byte aligned (all sizes here are even)
            raise SystemExit("make_bench_model: tensor %s would start misaligned at %d" % (name, off))
        header[name] = {"dtype": dt, "shape": list(shp), "data_offsets": [off, off + b]}
        off += b
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    rng = np.random.Generator(np.random.PCG64(seed))
    path = os.path.join(out_dir, "model.safetensors")
    tmp = path + ".part"  # a killed run never leaves a truncated model.safetensors behind
    t0 = time.time()
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for k, (name, dt, shp, kind) in enumerate(tensors):
            write_tensor(f, rng, dt, shp, kind)
            if k % 50 == 0 or k == len(tensors) - 1:
                print("make_bench_model: %d/%d tensors, %.2f GB, %.0f s" % (k + 1, len(tensors), f.tell() / 1e9,
                                                                         time.time() - t0), file=sys.stderr)
    os.replace(tmp, path)
    print("make_bench_model: wrote %s (%.2f GB, shape %s, seed %d)" % (path, (8 + len(hb) + off) / 1e9, shape,
                                                                      seed), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description="random-weight hy_v3 / hy_v4 benchmark checkpoint with real per-layer shapes")
    ap.add_argument("--out", required=True)
    ap.add_argument("--shape", default="hy3", choices=sorted(SHAPES))
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--mtp", action="store_true", help="also write the MTP layer (hy_v3: model.layers.4.*, hy_v4: "
                                                         "model.mtp_layers.0.*)")
    a = ap.parse_args()
    write(a.out, a.shape, a.seed, a.mtp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
