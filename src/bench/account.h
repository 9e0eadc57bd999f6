/* account.h - bytes and FLOPs of a forward step, counted from the loaded tensors (for `hyinfer bench`).
 *
 * Weight bytes use each loaded tensor's in-memory dtype (BF16 matrices 2 bytes/element; the router,
 * expert_bias and norm vectors are held as f32 copies, 4 bytes). Routed experts count only the ones
 * a step actually selected (struct hy_model_prof.expert_hits of that step).
 */
#ifndef HY_BENCH_ACCOUNT_H
#define HY_BENCH_ACCOUNT_H

#include "model/model.h"

#include <stdint.h>

/* Bytes a decode step must read. */
struct hy_bench_bytes {
    double embed;              /* embedding rows of the batch tokens */
    double attn;               /* q/k/v/o projections of every layer (hy_v4: MLA, gate, indexer, hyper-connections) */
    double dense_mlp;          /* dense MLP layers */
    double router;             /* router gate [E, H] f32 + expert_bias of every MoE layer */
    double routed;             /* the distinct routed experts selected, gate + up + down */
    double shared;             /* shared experts */
    double norms;              /* RMSNorm / QK-norm vectors, final norm */
    double lm_head;            /* the whole lm_head when any logits row is computed */
    double weights;            /* sum of the above */
    double kv_read;            /* K and V cache bytes the attention reads (listed separately, not in weights;
                                  hy_v4: the selected latent rows + the indexer keys of full layers) */
    int64_t distinct_experts;  /* distinct (layer, expert) pairs selected, summed over MoE layers */
    int64_t expert_selections; /* (token, expert) selections, summed over MoE layers */
};

/* FLOPs of a forward call (multiply-add = 2 FLOPs). */
struct hy_bench_flops {
    double attn_proj; /* 2 * tokens * (q,k,v,o params) per layer */
    double attn_core; /* QK^T and PV: 4 * heads * head_dim * context per token per layer (hy_v4: over the selected
                         latent rows, plus the indexer scores) */
    double dense_mlp; /* 2 * tokens * 3 * H * intermediate */
    double router;    /* 2 * tokens * E * H */
    double routed;    /* 2 * (token, expert) selections * 3 * H * I */
    double shared;    /* 2 * tokens * 3 * H * shared width */
    double lm_head;   /* 2 * logits rows * vocab * H */
    double total;
};

/* Counts the main model (num_hidden_layers) for one forward call of n_tokens tokens whose context
 * lengths (positions + 1) are ctx[n_tokens], with n_logits logits rows; expert_hits is the
 * [prof.n_layers, prof.n_experts] selection count of exactly that call (NULL: no MoE routed part);
 * kv_elem_bytes the KV cache element size. Either output may be NULL. */
void hy_bench_account(const struct hy_model *m, const int64_t *expert_hits, int32_t n_tokens, const int32_t *ctx,
                      int32_t n_logits, int kv_elem_bytes, struct hy_bench_bytes *bytes, struct hy_bench_flops *flops);

#endif
