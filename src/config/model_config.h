/* model_config.h - config.json (+ generation_config.json eos ids) -> struct hy_model_config.
 *
 * Architectures: `hy_v3` (HYV3ForCausalLM, spec hy3_architecture.md §1), `hy_v4` (HYV4ForCausalLM,
 * Hy4-preview, spec hy4_architecture.md §1: MLA + DSA indexer + hyper-connections; its fields are in
 * struct hy_v4_config) and dense `llama` (LlamaForCausalLM). Every field is read from the file;
 * defaults only where the reference implementations have them (noted per field).
 */
#ifndef HY_CONFIG_MODEL_CONFIG_H
#define HY_CONFIG_MODEL_CONFIG_H

#include <stdint.h>

enum hy_arch {
    HY_ARCH_HY_V3 = 0, /* Hy3 MoE: QK-norm, sigmoid router, shared expert, MTP */
    HY_ARCH_LLAMA = 1, /* dense Llama (stories260K) */
    HY_ARCH_HY_V4 = 2, /* Hy4-preview: gated MLA with sinks, DSA lightning indexer, iHC, clamped MoE, MTP */
};

#define HY_MAX_EOS 16
#define HY_MAX_LAYERS 1024

/* hy_v4 only (spec hy4_architecture.md §1); the generic fields below carry the rest: hidden_size,
 * num_attention_heads (MLA heads), intermediate_size (dense layer 0), num_experts (n_routed_experts),
 * num_shared_experts (n_shared_experts), num_experts_per_tok, moe_intermediate_size (routed and
 * shared width), router_scaling_factor (routed_scaling_factor), route_norm (norm_topk_prob),
 * layer_is_moe (mlp_layer_types), rope_theta, rope_interleaved (always 1: pairs (2i, 2i+1)),
 * head_dim (= qk_rope_head_dim, the RoPE width). */
struct hy_v4_config {
    int32_t q_lora_rank;      /* r_q: width of c_q (q_a_proj rows) */
    int32_t kv_lora_rank;     /* r_kv: width of the cached latent c */
    int32_t qk_nope_head_dim; /* d_n */
    int32_t qk_rope_head_dim; /* d_r: RoPE'd tail of each q head, the shared rope key, the indexer's tail */
    int32_t v_head_dim;       /* d_v */
    int gated;                /* gated_mla with gating_type "elementwise" (default 1) */
    int learnable_sink;       /* learnable_sink (default 1) */
    int32_t index_topk;       /* K_I: keys each query attends to (0 = dense attention, no indexer) */
    int32_t index_n_heads;    /* H_I */
    int32_t index_head_dim;   /* d_I (> qk_rope_head_dim: nope part first, rope part last) */
    int32_t hc_mult;          /* C: residual streams */
    float hc_magnitude;       /* M: post-gate multiplier */
    float hc_eps;             /* added to every HC gate */
    float swiglu_limit;       /* routed experts: gate <= L, -L <= up <= L (0 = no clamp) */
    uint8_t indexer_full[HY_MAX_LAYERS + 1]; /* per main layer: 1 = "full" (own indexer), 0 = "shared" (reuses
                                                the previous full layer's top-k); index num_hidden_layers = MTP
                                                layer (always full) */
};

struct hy_model_config {
    enum hy_arch arch;
    char model_type[32];
    int32_t vocab_size;
    int32_t hidden_size;
    int32_t intermediate_size; /* dense MLP width (0 when no dense layer needs it) */
    int32_t num_hidden_layers; /* main layers; the MTP layer is not counted */
    int32_t num_attention_heads;
    int32_t num_key_value_heads; /* default num_attention_heads */
    int32_t head_dim;            /* default hidden_size / num_attention_heads */
    int32_t max_position_embeddings;
    float rms_norm_eps;      /* default 1e-6 (HF); Hy3 hub value 1e-5 */
    double rope_theta;       /* rope_parameters.rope_theta, else rope_theta, else 10000 */
    int rope_interleaved;    /* 0: NeoX rotate_half pairs (j, j+d/2) (HF default);
                                        1: GPT-J pairs (2i, 2i+1); hyinfer field "rope_interleaved" */
    int qk_norm;             /* hy_v3 default 1, llama 0 */
    int tie_word_embeddings; /* default 0 */
    /* MoE (hy_v3) */
    int32_t num_experts; /* num_experts | num_local_experts */
    int32_t num_experts_per_tok;
    int32_t num_shared_experts;              /* default 1 (T); shared width = moe_intermediate_size * this */
    int32_t moe_intermediate_size;           /* moe_intermediate_size | expert_hidden_dim */
    float router_scaling_factor;             /* default 1.0 */
    int route_norm;                          /* default 1 */
    int32_t first_k_dense_replace;           /* informational once layer_is_moe is filled */
    uint8_t layer_is_moe[HY_MAX_LAYERS + 1]; /* per main layer (mlp_layer_types or first_k_dense_replace);
                                                index num_hidden_layers = MTP layer (always MoE for hy_v3) */
    int32_t num_nextn_predict_layers;        /* 0 or 1 */
    int enable_moe_fp32_combine;
    int enable_lm_head_fp32;
    /* special ids (-1 when absent) */
    int32_t bos_token_id, pad_token_id, sep_token_id, eod_token_id;
    int32_t eos_token_ids[HY_MAX_EOS]; /* config.json eos_token_id (int or list) ∪ generation_config.json's */
    int32_t n_eos;
    struct hy_v4_config v4; /* arch == HY_ARCH_HY_V4 only (zeros otherwise) */
};

/* Parses <model_dir>/config.json and, when present, <model_dir>/generation_config.json (eos ids).
 * Returns 0, or -1 with hy_err_msg() like "DIR/config.json: num_experts_per_tok (9) > num_experts (8)". */
int hy_model_config_load(const char *model_dir, struct hy_model_config *cfg);

/* 1 if id is one of cfg's eos ids. */
int hy_model_config_is_eos(const struct hy_model_config *cfg, int32_t id);

#endif
