/* shard.h - one rank's part of a model in an mpirun job: which heads, experts, vocabulary rows and
 * intermediate columns it holds (config/parallel.h), the communicators of its groups, and the
 * collectives of the forward pass (forward_dist.c). Absent (m->dist == NULL) in a one-rank process:
 * the forward pass is then exactly the single-process one.
 */
#ifndef HY_MODEL_SHARD_H
#define HY_MODEL_SHARD_H

#include "config/parallel.h"
#include "dist/comm.h"

#include <stddef.h>
#include <stdint.h>

struct hy_model;
struct hy_batch;
struct hy_forward_scratch;

#define HY_DIST_MAX_RANKS 1024 /* the forward pass keeps per-rank counts on the stack */
#define HY_DIST_MAX_KV 64      /* KV caches alive at once in a multi-rank job */

struct hy_model_dist {
    struct hy_parallel_config par;
    struct hy_comm *world;  /* borrowed (hy_dist_world) */
    struct hy_comm *plan;   /* dup of world: step plans only (lockstep.c), owned */
    struct hy_comm *attn;   /* the attention TP group (attn_tp_size ranks), owned */
    struct hy_comm *dp;     /* ranks with the same attention-TP rank across the DP groups, owned */
    struct hy_comm *dense;  /* dense_tp_size ranks (dense MLP, shared expert), owned */
    struct hy_comm *embed;  /* embed_tp_size ranks, owned */
    struct hy_comm *lmhead; /* lmhead_tp_size ranks, owned */
    struct hy_comm *moe;    /* the moe_tp_size ranks sharing one expert-parallel group's experts, owned */
    int rank, size;         /* world */
    int dp_rank, dp_size;   /* attention-DP group of this rank, number of groups */
    int32_t nh, nkv;        /* local query / KV heads */
    int32_t q_head0, kv_head0;
    int64_t o_row0, o_rows;   /* exact combine: this rank's o_proj output rows */
    int64_t ff_col0, ff_cols; /* dense/shared: this rank's intermediate columns (gate/up rows) */
    int64_t dn_row0, dn_rows; /* exact: this rank's down_proj output rows */
    int32_t moe_ep, ep_rank, moe_tp, moe_tp_rank;
    int32_t e0, ne;   /* local routed experts [e0, e0 + ne) */
    int64_t v0, nv;   /* embedding rows [v0, v0 + nv) */
    int64_t lv0, lnv; /* lm_head rows */
    int lm_compute;   /* this rank's lm_head group holds world rank 0 (computes and gathers the logits) */
    enum hy_moe_dispatch dispatch;
    int sum;      /* combine by rank-order sums instead of gathers */
    void **owned; /* column-slice copies made at load */
    int n_owned, cap_owned;
    float *buf[10]; /* collective staging, grown on demand: forward_dist.c uses slots 0-3, forward.c 3, 4, 5, 8
                       (embedding, DP rows, SP, lm_head), moe_dist.c 3-9; see each user for which overlap */
    size_t cap[10];
    int want_logits; /* worker ranks: the step asks for logits (the leader passes its logits buffer) */
    /* the attention-DP sub-batch of the current step (hy_model_forward fills it) */
    int32_t *grp;     /* [T] group of each token */
    int32_t *loc_row; /* [n_loc] batch rows of this rank's group */
    int32_t *loc_pos, *loc_seq;
    int64_t *loc_slot;
    int64_t n_loc, loc_cap;
    uint8_t kv_used[HY_DIST_MAX_KV]; /* leader: KV cache ids the workers hold now (lockstep.c) */
    int ready;                       /* loaded on every rank: hy_model_free then tells the workers to return */
    int64_t steps, dummy_steps;      /* forward steps, and those with no attention tokens on this rank */
};

/* Splits a bound model (load.c, before placement) over the job: slices the tensors of this rank
 * (row ranges as views; column ranges of the sum mode copied), drops the routed experts and vocabulary
 * rows it does not own, slices the static V cache scales to its KV heads and creates the group
 * communicators (collective over world). Checks every size against the model (heads, experts) and
 * returns -1 with hy_err_msg() naming the key and the numbers ("attn_tp_size 4 does not divide
 * num_attention_heads 6"). world must have more than one rank. */
int hy_model_shard(struct hy_model *m, struct hy_comm *world, const struct hy_parallel_config *par);

/* Frees what hy_model_shard made (communicators collectively). */
void hy_model_shard_free(struct hy_model *m);

/* [lo, lo + n) of part i of `total` items split into `parts` near-equal contiguous parts. */
void hy_part(int64_t total, int parts, int i, int64_t *lo, int64_t *n);

/* A staging buffer of at least `floats` floats (slot 0..9), grown when needed; NULL on out of memory. */
float *hy_dist_buf(struct hy_model_dist *d, int slot, size_t floats);

/* Whether a step of T tokens fits what one MPI exchange can carry (byte counts are ints: the exact
 * MoE all-gather moves T * num_experts_per_tok rows of hidden_size floats to every rank). Returns 0,
 * or -1 with hy_err_msg() naming the limit and what to lower (--max-num-batched-tokens, or the
 * all-to-all dispatch). The leader checks before it sends a plan, so nothing is left half done. */
int hy_dist_check_tokens(const struct hy_model *m, int64_t T);

/* Grows the staging slots to what a step of up to T tokens needs (the exchanges' widest rows: the
 * head outputs, the dense / shared / expert hidden, T*num_experts_per_tok expert rows) and touches
 * them, so that the first steps do not pay page faults. Slots that need more later (logits of many
 * rows) still grow on demand. Returns 0, or -1 with hy_err_msg() (out of memory). */
int hy_dist_reserve(struct hy_model *m, int64_t T);

/* Weight bytes this rank holds (views + copies; the replicated vectors excluded). */
int64_t hy_model_weight_bytes(const struct hy_model *m);

#endif
