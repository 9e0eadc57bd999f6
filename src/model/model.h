/* model.h - a loaded checkpoint (Hy3 `hy_v3`, Hy4-preview `hy_v4`, or a dense Llama) and its batch-first
 * forward pass.
 *
 * Matrices keep their checkpoint encoding (F32 / F16 / BF16, FP8, MXFP8 / MXFP4, int8 W8A8) and are
 * placed by model/place.h: copied into a huge-page arena (the default) or left in the mmapped files;
 * only norm vectors, the router and expert_bias are widened to f32 copies at load (small). The layers
 * of each architecture are picked through model/arch.h; under mpirun each rank holds its shard
 * (model/shard.h) and is driven through engine/executor.h. Math: spec hy3_architecture.md §2 (main
 * model) and §4.1 (MTP layer), hy4_architecture.md; DESIGN.md §5 for the MTP row rule.
 */
#ifndef HY_MODEL_MODEL_H
#define HY_MODEL_MODEL_H

#include "cache/kv_cache.h"
#include "config/model_config.h"
#include "config/quant_config.h"
#include "model/place.h"
#include "model/safetensors.h"
#include "quant/tensor.h"

#include <stdint.h>

struct hy_expert {
    struct hy_tensor gate; /* [I, H] */
    struct hy_tensor up;   /* [I, H] */
    struct hy_tensor down; /* [H, I] */
    float clamp;           /* > 0: clamped SwiGLU (hy_v4 routed experts: gate <= clamp, |up| <= clamp); 0: plain */
};

struct hy_layer {
    float *input_norm;   /* [H] f32 */
    float *post_norm;    /* [H] f32 */
    struct hy_tensor wq; /* [n_heads*head_dim, H] */
    struct hy_tensor wk; /* [n_kv*head_dim, H] */
    struct hy_tensor wv; /* [n_kv*head_dim, H] */
    struct hy_tensor wo; /* [H, n_heads*head_dim] */
    float *q_norm;       /* [head_dim] f32, NULL without qk_norm */
    float *k_norm;       /* [head_dim] f32 */
    int is_moe;
    struct hy_expert mlp;      /* dense MLP (gate/up [inter, H], down [H, inter]) */
    float *router;             /* [E, H] f32 (router math is fp32 whatever the disk dtype) */
    float *expert_bias;        /* [E] f32 (zeros when absent) */
    struct hy_expert *experts; /* [E] */
    struct hy_expert shared;   /* shared expert(s), width I * num_shared_experts; rows 0 if none */
    /* MTP-only (spec §4.1) */
    float *enorm;             /* [H] */
    float *hnorm;             /* [H] */
    struct hy_tensor eh_proj; /* [H, 2H]: input = concat(enorm(emb), hnorm(h)) */
    float *final_norm;        /* [H] */
    /* hy_v4 (spec hy4_architecture.md §4, §6, §7; nh heads, r_q, r_kv, d_n, d_r, d_v of struct hy_v4_config).
     * wo above is o_proj [H, nh*d_v]; input_norm / post_norm the two sub-block norms. */
    struct hy_tensor q_a;       /* [r_q, H] q_a_proj */
    float *q_a_norm;            /* [r_q] */
    struct hy_tensor q_b;       /* [nh*(d_n+d_r), r_q] q_b_proj (per head: nope then rope) */
    struct hy_tensor kv_a;      /* [r_kv+d_r, H] kv_a_proj_with_mqa (latent then the shared rope key) */
    float *kv_a_norm;           /* [r_kv] */
    struct hy_tensor kv_b;      /* [nh*(d_n+d_v), r_kv] kv_b_proj (per head: W_UK rows then W_UV rows) */
    float *w_uk_t;              /* [nh, r_kv, d_n] f32: W_UK^h transposed, absorbs q_nope into the latent */
    struct hy_tensor attn_gate; /* [nh*d_v, H] linear_gate (NULL data when not gated) */
    float *sink;                /* [nh] learnable_sink_param (NULL: no sinks) */
    struct hy_tensor idx_wq_b;  /* [H_I*d_I, r_q] indexer.wq_b (full layers; NULL data on shared ones) */
    struct hy_tensor idx_wk;    /* [d_I, H] indexer.wk */
    float *idx_k_norm_w;        /* [d_I] indexer.k_norm.weight (LayerNorm) */
    float *idx_k_norm_b;        /* [d_I] indexer.k_norm.bias */
    float *idx_weights;         /* [H_I, H] indexer.weights_proj, f32 (fp32 math) */
    float *hc_fn[2];            /* [2C, C*H] f32 hc_attn_layer / hc_mlp_layer .hc_pre.hc_fn (main layers) */
    float *hc_base[2];          /* [2C] */
    float *hc_scale[2];         /* [2]: pre, post */
};

/* Per-stage wall-clock accounting of the forward pass (for `hyinfer bench`). Off by default: with
 * enabled = 0 the forward pass only tests the flag, so normal runs pay nothing measurable. When on,
 * one forward call at a time per model (the counters are plain fields, updated outside the
 * parallel regions). */
enum hy_stage {
    HY_STAGE_ATTENTION = 0, /* input norm, q/k/v, QK-norm, RoPE, KV write, attention, o_proj, residual */
    HY_STAGE_ROUTER,        /* router matmul (fp32) + top-k selection */
    HY_STAGE_ROUTED,        /* routed experts: gather, gate/up/down, weighted combine */
    HY_STAGE_SHARED,        /* shared expert + its add */
    HY_STAGE_DENSE_MLP,     /* dense SwiGLU MLP (first_k_dense_replace layers) */
    HY_STAGE_LM_HEAD,       /* lm_head matmul over the logits rows */
    HY_STAGE_OTHER,         /* the rest of the call: embedding, norms, residual adds, scratch setup */
    HY_STAGE_COUNT
};

struct hy_model_prof {
    int enabled;                /* set by hy_model_prof_enable */
    double sec[HY_STAGE_COUNT]; /* accumulated seconds per stage (OTHER = total - the rest) */
    double total_sec;           /* accumulated seconds inside hy_model_forward / _forward_mtp */
    int64_t calls;              /* forward calls accumulated */
    int64_t tokens;             /* batch tokens accumulated */
    int32_t n_layers;           /* rows of expert_hits */
    int32_t n_experts;          /* columns of expert_hits */
    int64_t *expert_hits;       /* [n_layers, n_experts]: (token, expert) selections counted
                                           per layer since the last reset; owned, NULL when disabled */
};

enum hy_compute_dtype {
    HY_COMPUTE_F32 = 0,  /* activations + KV cache fp32 (golden comparisons) */
    HY_COMPUTE_BF16 = 1, /* activations rounded to bf16 at op boundaries, KV cache bf16 */
};

struct hy_forward_scratch;
struct hy_arch_ops;
struct hy_shard_ops;
struct hy_model_dist;
struct hy_comm;
struct hy_parallel_config;

struct hy_model {
    struct hy_model_config cfg;
    struct hy_checkpoint ck;
    struct hy_quant_config quant; /* config.json quantization_config; per-group tensor counts */
    enum hy_compute_dtype compute;
    struct hy_tensor embed;   /* [vocab, H] */
    struct hy_tensor lm_head; /* [vocab, H] (= embed when tied) */
    float *final_norm;        /* [H] */
    struct hy_layer *layers;  /* [num_hidden_layers + num_nextn_predict_layers] */
    int has_mtp;              /* MTP layer weights present and loaded */
    float *hc_head_fn;        /* hy_v4: [C, C*H] f32 model.hc_head.hc_head_fn (NULL otherwise) */
    float *hc_head_base;      /* hy_v4: [C] */
    float *hc_head_scale;     /* hy_v4: [1] */
    float *inv_freq;          /* [head_dim/2] RoPE inverse frequencies */
    double load_seconds;
    void *arena;               /* HY_LOAD_COPY: the weight arena (mmap'd, owned), else NULL */
    size_t arena_size;         /* bytes mapped at arena */
    struct hy_placement place; /* what hy_model_place did (place.h) */
    int moe_per_expert;        /* 1: always the per-expert MoE/MLP path (hy_load_params.moe_grouped
                                              = 0, HYINFER_MOE_GROUPED=0; A/B, tests); 0 (default): the grouped
                                              pass for T <= 32. Both give bitwise the same results. */
    struct hy_model_prof prof; /* stage timers, off unless hy_model_prof_enable(m, 1) */
    float **v_cache_scale;     /* [main + MTP layers] -> NULL or [n_kv_heads]: static FP8 V
                                                cache scales from the checkpoint (kv_scales.c) */
    int32_t n_v_cache_scales;  /* layers that have one */
    /* Calibration observer (quantize/calib.h), NULL normally: called by every linear layer of the forward
     * pass, after the product, with its weight, its whole input x [T, W->cols] and its output y [T, W->rows]
     * (f32, valid during the call only), from the calling thread outside parallel regions. While it is set
     * the per-expert / per-matrix path runs (as moe_per_expert = 1), so each matrix sees its input in one
     * call. */
    void (*observe)(void *ctx, const struct hy_tensor *W, const float *x, const float *y, int64_t T);
    void *observe_ctx;
    /* With observe: called with the routing weights w [n] (f32, after renormalization and
     * router_scaling_factor) of the n tokens a routed expert is about to see, before its linears are
     * observed, and with (NULL, 0) after them; NULL when not needed. */
    void (*observe_route)(void *ctx, const float *w, int64_t n);
    const struct hy_arch_ops *arch;       /* the architecture's layers (model/arch.h), chosen at load */
    const struct hy_shard_ops *shard_ops; /* how the forward pass is split over ranks (model/shard.h), at load */
    int32_t attn_heads, attn_kv_heads;    /* query / KV heads this rank computes (all of them in one process) */
    struct hy_forward_scratch *fwd;       /* the forward pass's activations (hy_model_reserve), owned */
    struct hy_model_dist *dist;           /* this rank's part in an mpirun job (shard.h), owned; NULL in one process */
};

/* Loads config.json (+ generation_config.json) and the safetensors of model_dir, binding every
 * tensor by name (both Hy3 spellings of spec §3: router.gate/gate, expert_bias/
 * e_score_correction_bias, shared_mlp/shared_experts, per-expert or fused experts) and checking
 * its shape. The MTP layer is loaded when config says num_nextn_predict_layers = 1 and its tensors
 * exist. Returns 0 and *out, or -1 with hy_err_msg() naming the file/tensor and the problem
 * (missing tensor, wrong shape, "unsupported dtype X for tensor Y"). Free with hy_model_free. */
int hy_model_load(const char *model_dir, enum hy_compute_dtype compute, struct hy_model **out);
void hy_model_free(struct hy_model *m);

/* How hy_model_load_ex loads: hy_load_params_default fills every field from the process defaults
 * (base/env.h: HYINFER_LOAD_FORMAT, HYINFER_MOE_GROUPED); callers override what their flags set. */
struct hy_load_params {
    enum hy_compute_dtype compute;
    enum hy_load_format format;           /* weights copied into the huge-page arena, or mmapped (place.h) */
    int moe_grouped;                      /* 1: the grouped MoE pass for T <= 32 tokens; 0: per-expert always
                                          (m->moe_per_expert = 1); the results are bitwise the same */
    struct hy_comm *comm;                 /* NULL or a one-rank world: the whole model in this process; else this
                                          rank loads only its shard (shard.h), borrowed */
    const struct hy_parallel_config *par; /* the layout over comm's ranks (required with comm) */
};
void hy_load_params_default(struct hy_load_params *p, enum hy_compute_dtype compute);

/* hy_model_load with explicit parameters (hy_model_load = this with hy_load_params_default). */
int hy_model_load_ex(const char *model_dir, const struct hy_load_params *p, struct hy_model **out);

/* Turns the stage timers and expert-selection counts on (on = 1: allocates prof.expert_hits for all
 * layers incl. MTP, zeroes everything) or off (on = 0: frees prof.expert_hits). Call with on = 0
 * before hy_model_free when it was enabled. Returns 0, or -1 (out of memory) with hy_err_msg().
 * Math and outputs of the forward pass are the same either way. */
int hy_model_prof_enable(struct hy_model *m, int on);

/* Zeroes the accumulated seconds, counters and expert_hits (keeps enabled). */
void hy_model_prof_reset(struct hy_model *m);

/* Attention-DP groups of a multi-rank job (a sequence belongs to group first_block_id % groups; the
 * scheduler places new sequences with it), 1 in one process. */
int32_t hy_model_dp_groups(const struct hy_model *m);

/* Creates a KV cache for the model on this rank: main layers + MTP layer, dtype from the compute mode.
 * Returns 0, or -1 with hy_err_msg(); hy_kv_cache_free releases it. (Under mpirun, every rank makes its
 * copy through engine/executor.h.) */
int hy_model_kv_cache_init(const struct hy_model *m, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks);

/* KV cache dtype actually used for a --kv-cache-dtype choice: HY_DTYPE_UNKNOWN (auto) -> F32 in
 * float32 compute mode, BF16 in bfloat16 mode; F32 / BF16 / F8_E4M3 as given. */
enum hy_dtype hy_model_kv_dtype(const struct hy_model *m, enum hy_dtype kv_dtype);

/* Bytes one token takes in that cache over all layers (main + MTP), FP8 scales included. */
size_t hy_model_kv_token_bytes(const struct hy_model *m, enum hy_dtype kv_dtype);

/* Like hy_model_kv_cache_init with an explicit dtype (HY_DTYPE_UNKNOWN = auto); an FP8 cache takes
 * the checkpoint's static V scales (m->v_cache_scale) for the layers that have them. */
int hy_model_kv_cache_init_dtype(const struct hy_model *m, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks,
                                 enum hy_dtype kv_dtype);

/* Reads model.layers.L.self_attn.v_cache.scale (F32 [n_kv_heads] or [1]; BF16/F16 accepted) for
 * every cache layer from the checkpoint or, failing that, <model_dir>/kv_cache_scales.safetensors,
 * into m->v_cache_scale. Called by hy_model_load. Returns 0, or -1 with hy_err_msg() (wrong element
 * count, non-float dtype, a scale that is not finite and > 0, unreadable side file). */
int hy_model_load_kv_scales(struct hy_model *m, const char *model_dir);
void hy_model_free_kv_scales(struct hy_model *m);

/* One forward step over a flat batch of tokens from one or more sequences.
 * Token t has id token_ids[t], position positions[t], KV slot slot_mapping[t] (written before
 * attention), and belongs to sequence seq_ids[t] whose block table is block_tables[seq_ids[t]];
 * it attends to that sequence's positions 0..positions[t] (all must already be cached or in this
 * batch). Logits are produced for the rows listed in logits_rows (n_logits of them). */
struct hy_batch {
    int32_t n_tokens;
    const int32_t *token_ids;           /* [n_tokens] */
    const int32_t *positions;           /* [n_tokens] */
    const int64_t *slot_mapping;        /* [n_tokens] */
    const int32_t *seq_ids;             /* [n_tokens] index into block_tables */
    const int32_t *const *block_tables; /* [n_seqs] -> [ceil(max_pos+1 / block_size)] block ids */
    int32_t n_logits;
    const int32_t *logits_rows; /* [n_logits] token indices */
    int mtp_zero_pos0;          /* hy_model_forward_mtp only: 1 zeroes the token embedding of rows at position 0
                                   (vLLM's hy_v3_mtp); 0 (default): the real embedding (DESIGN §5) */
};

/* Sizes the forward pass's activations, once, for up to max_tokens tokens per call, contexts of up to
 * max_ctx positions and omp_get_max_threads() threads (the engine calls it with max_num_batched_tokens
 * and max_model_len). A forward call then allocates nothing; one that needs more (a caller that
 * reserved less, or none) grows them first. Only covers what is larger than the current
 * reservation. Returns 0, or -1 with hy_err_msg() (out of memory, naming the sizes; the old
 * reservation stays). The model owns the buffers (hy_model_free releases them); forward calls on one
 * model must not run concurrently. */
int hy_model_reserve(struct hy_model *m, int64_t max_tokens, int32_t max_ctx);

/* Frees the activations of hy_model_reserve (hy_model_free calls it). */
void hy_model_release_scratch(struct hy_model *m);

/* Whether batch b can run on kv as one step (mtp: through the MTP layer): ids, positions, slots and
 * logits rows in range, and (sharded) the step fits one exchange (hy_model_check_tokens). The forward
 * calls check the same first; a multi-rank executor checks before it sends the step. Returns 0, or
 * -1 with hy_err_msg(). */
int hy_model_check_step(const struct hy_model *m, const struct hy_kv_cache *kv, const struct hy_batch *b, int mtp);

/* Whether steps of n_tokens tokens fit what one exchange of a sharded model carries (always in one
 * process). Returns 0, or -1 with hy_err_msg() naming the limit and what to lower. */
int hy_model_check_tokens(const struct hy_model *m, int64_t n_tokens);

/* Main model. logits[n_logits, vocab] (fp32) when non-NULL; hidden_out[n_tokens, H] receives the
 * final-normed hidden states (the MTP input) when non-NULL. Returns 0, or -1 (bad ids/positions,
 * out of memory) with hy_err_msg(). */
int hy_model_forward(struct hy_model *m, struct hy_kv_cache *kv, const struct hy_batch *b, float *logits,
                     float *hidden_out);

/* Floats per token of the residual stream hy_model_forward_layers works on: hidden_size, times hc_mult
 * for hy_v4 (its hyper-connection copies). */
int64_t hy_model_stream_width(const struct hy_model *m);

/* Part of the main model, for calibration (quantize/calib.c): decoder layers [from, to) of batch b over
 * the residual stream x [n_tokens, hy_model_stream_width] (f32, in place). from = 0 first fills x with the
 * embeddings of b's tokens (its contents are ignored); otherwise x must hold the stream entering
 * layer `from` (as a call ending at `from` left it). With to == num_hidden_layers and hidden_out
 * non-NULL, hidden_out [n_tokens, hidden_size] gets the final-normed states (hy_model_forward's
 * hidden_out). The layers compute exactly what hy_model_forward computes, so [0, a) then [a, c) gives
 * the bits of [0, c). Writes the KV cache of layers [from, to) only. Returns 0, or -1 with
 * hy_err_msg() (0 <= from <= to <= num_hidden_layers violated, bad batch, out of memory). */
int hy_model_forward_layers(struct hy_model *m, struct hy_kv_cache *kv, const struct hy_batch *b, float *x,
                            int32_t from, int32_t to, float *hidden_out);

/* MTP layer (spec §4.1): row t pairs token_ids[t] (= the token after the main position) with the
 * main model's final-normed hidden hidden_in[t, H] at position positions[t]; the layer's own KV
 * cache layer is written at slot_mapping[t]. logits[n_logits, vocab]; hidden_out[n_tokens, H]
 * (final_layernorm output, fed back for chained drafts) when non-NULL. -1 if the model has no MTP layer. */
int hy_model_forward_mtp(struct hy_model *m, struct hy_kv_cache *kv, const struct hy_batch *b, const float *hidden_in,
                         float *logits, float *hidden_out);

#endif
