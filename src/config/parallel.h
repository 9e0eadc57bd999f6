/* parallel.h - how one model is spread over the ranks of an mpirun job (names as in cann-recipes-infer's
 * parallel_config and vLLM's flags; docs/distributed.md).
 *
 * Rank r of world_size W (all sizes must divide W):
 *  - attention: attn_tp_size ranks split the heads (q/k/v by heads, KV cache with them; KV heads
 *    replicated when attn_tp_size > num_key_value_heads); W / attn_tp_size attention-DP groups
 *    (r / attn_tp_size) each run attention for their own sequences.
 *  - dense MLP and shared expert: dense_tp_size ranks split the intermediate width.
 *  - routed experts: moe_ep = W / moe_tp_size ranks each own num_experts / moe_ep experts; moe_tp_size
 *    ranks split each expert's intermediate width (moe_tp_size 1 = pure expert parallel).
 *  - embedding / lm_head: embed_tp_size / lmhead_tp_size ranks split the vocabulary.
 * Combine modes: exact (default) gathers outputs so no floating-point sum crosses ranks (fp32 logits
 * bitwise equal to one rank); sum adds per-rank partials in rank order (fewer bytes, within
 * tolerance of one rank, still batch-invariant).
 */
#ifndef HY_CONFIG_PARALLEL_H
#define HY_CONFIG_PARALLEL_H

#include <stdint.h>

enum hy_moe_dispatch {
    HY_MOE_DISPATCH_AUTO = 0, /* the recipe's rule (hy_parallel_dispatch) */
    HY_MOE_DISPATCH_AG,       /* all-gather / reduce-scatter */
    HY_MOE_DISPATCH_A2A,      /* all-to-all to each token's home rank */
};

struct hy_parallel_config {
    int32_t world_size; /* 0 = the job's size */
    int32_t attn_tp_size, dense_tp_size, moe_tp_size, embed_tp_size, lmhead_tp_size;
    int enable_sp;   /* custom_params.enable_sp: sequence-parallel o_proj (head outputs all-to-all to token
                               slices, o_proj whole on each rank, rows gathered) */
    int combine_sum; /* 1: sum mode, 0: exact (gathered) */
    enum hy_moe_dispatch moe_dispatch;
};

/* Everything 1 (one rank), exact combine, automatic dispatch; world_size 0. */
void hy_parallel_default(struct hy_parallel_config *p);

/* From vLLM's flags: --tensor-parallel-size tp, --data-parallel-size dp, --enable-expert-parallel
 * ep: world tp*dp, attention/dense/embedding/lm_head TP tp (attention DP dp), experts EP over all
 * ranks with ep (moe_tp 1) or split over all ranks without it (moe_tp = world). Returns 0, or -1 with
 * hy_err_msg() for a size < 1. */
int hy_parallel_from_vllm(struct hy_parallel_config *p, int32_t tp, int32_t dp, int ep);

/* Checks p against a job of `world` ranks (p->world_size 0 takes it): world_size == world and every
 * *_tp_size >= 1 dividing it. Returns 0, or -1 with hy_err_msg() naming the key ("parallel_config:
 * world_size 4 but mpirun started 2 ranks"; "attn_tp_size 3 does not divide world_size 4"). */
int hy_parallel_check(struct hy_parallel_config *p, int32_t world);

/* The recipe's dispatch rule when p->moe_dispatch is AUTO: all-gather when moe_ep > 1, sequence
 * parallel is on, attn_tp_size == moe_ep and num_experts_per_tok > moe_ep; otherwise all-to-all. */
enum hy_moe_dispatch hy_parallel_dispatch(const struct hy_parallel_config *p, int32_t num_experts_per_tok);

/* "ag" | "allgather_reducescatter" -> AG, "a2a" | "alltoall" -> A2A, "auto" -> AUTO. -1 otherwise. */
int hy_moe_dispatch_parse(const char *s, enum hy_moe_dispatch *out);
const char *hy_moe_dispatch_name(enum hy_moe_dispatch d);

/* "exact" -> 0, "sum" -> 1; -1 otherwise. */
int hy_combine_parse(const char *s, int *sum);

#endif
