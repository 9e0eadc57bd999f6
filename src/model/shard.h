/* shard.h - one rank's part of a model in an mpirun job: which heads, experts, vocabulary rows and
 * intermediate columns it holds (config/parallel.h), the communicators of its groups, and the
 * collectives of the forward pass (exchange.c). Absent (m->dist == NULL) in a one-rank process:
 * the forward pass is then exactly the single-process one.
 */
#ifndef HY_MODEL_SHARD_H
#define HY_MODEL_SHARD_H

#include "config/parallel.h"
#include "comm/comm.h"

#include <stddef.h>
#include <stdint.h>

struct hy_model;
struct hy_batch;
struct hy_forward_scratch;

#define HY_SHARD_MAX_RANKS 1024 /* the forward pass keeps per-rank counts on the stack */
#define HY_SHARD_MAX_KV 64      /* KV caches alive at once in a multi-rank job */

/* The staging buffers of struct hy_model_dist (hy_shard_buf), by role. A block never holds a slot
 * across a call that uses it: exchange.c's collectives use STAGE, RECV, MINE and (vocabulary rows) ROWS
 * inside one call; the embedding, the lm_head, the DP sub-batch, the o_proj combines and the MoE block
 * (moe_dist.c) use the others in turn. */
enum hy_shard_slot {
    HY_SLOT_STAGE = 0, /* exchange.c: send staging of gathers */
    HY_SLOT_RECV = 1,  /* exchange.c: the reduce-scatter's receive, the DP rows' staging */
    HY_SLOT_MINE = 2,  /* exchange.c: this rank's slice of a rank-order sum */
    HY_SLOT_ROWS = 3,  /* vocabulary owners; local expert inputs; lm_head partial logits; the sum path's rows */
    HY_SLOT_OUT = 4,   /* embedding rows of this rank; DP sub-batch rows; local expert outputs; gathered logits */
    HY_SLOT_SEND = 5,  /* DP rows of all groups; MoE all-to-all send; MoE partial sums */
    HY_SLOT_XCHG = 6,  /* MoE exchange receive */
    HY_SLOT_HOME = 7,  /* MoE rows back on their token's rank; the all-to-all touch map */
    HY_SLOT_FULL = 8,  /* every rank's columns gathered (exact combines); SP rows */
    HY_SLOT_PART = 9,  /* this rank's output rows before their gather */
    HY_SLOT_COUNT
};
_Static_assert(HY_SLOT_COUNT == 10, "shard staging slots: name every slot's role above");

struct hy_model_dist {
    struct hy_parallel_config par;
    struct hy_comm *world;  /* borrowed (hy_dist_world) */
    struct hy_comm *plan;   /* dup of world: step plans only (engine/executor.c), owned */
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
    float *buf[HY_SLOT_COUNT]; /* collective staging, grown on demand (enum hy_shard_slot) */
    size_t cap[HY_SLOT_COUNT];
    /* the attention-DP sub-batch of the current step (hy_model_forward fills it) */
    int32_t *grp;     /* [T] group of each token */
    int32_t *loc_row; /* [n_loc] batch rows of this rank's group */
    int32_t *loc_pos, *loc_seq;
    int64_t *loc_slot;
    int64_t n_loc, loc_cap;
    uint8_t kv_used[HY_SHARD_MAX_KV]; /* leader: KV cache ids the workers hold now (engine/executor.c) */
    int64_t steps, dummy_steps;       /* forward steps, and those with no attention tokens on this rank */
};

struct hy_expert;
struct hy_layer;
struct hy_tensor;
struct hy_kv_cache;

/* An architecture's attention core over batch b: s->tmp [n_tokens, H] = o_proj(attn(norm(x))) (no
 * residual add; writes cache layer L). */
typedef void (*hy_attn_core_fn)(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b,
                                const float *x, struct hy_forward_scratch *s);

/* The parts of the forward pass that depend on how the model is split over ranks: one table per model
 * (m->shard_ops, chosen at load), so the layers (layers.c, hy_v3.c, hy_v4.c) read the same in one
 * process and in an mpirun job. hy_layers_local_ops (layers.c) runs everything here; hy_shard_mpi_ops
 * (shard_ops.c) splits over m->dist's groups, with the same collectives in the same order on every
 * rank. A failed collective ends the job (the other ranks would wait in the next one). */
struct hy_shard_ops {
    /* Whether steps of T tokens fit one exchange (hy_model_check_tokens): 0, or -1 with hy_err_msg(). */
    int (*check_tokens)(const struct hy_model *m, int64_t T);
    /* Grows the exchanges' staging for steps of up to T tokens (hy_model_reserve): 0, or -1. */
    int (*reserve)(struct hy_model *m, int64_t T);
    /* A forward step over b begins (attention-DP: this group's sub-batch): 0, or -1 with hy_err_msg(). */
    int (*step)(struct hy_model *m, const struct hy_batch *b);
    /* x [T, H] = the embedding rows of ids [T] (vocabulary-split tables: gathered from their owners). */
    void (*embed)(const struct hy_model *m, const int32_t *ids, int64_t T, float *x);
    /* The dense MLP or shared expert e of full intermediate width I on x [T, H]: y [T, H] (ga / gb
     * [T, this rank's width] the hidden buffers). */
    void (*ffn)(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, int64_t I, float *ga,
                float *gb, float *y);
    /* Routed experts of layer ly (after routing: s->sel, s->selw), weighted and combined, plus the
     * shared expert: s->y [T, H]. t0: the stage timer's start (prof). */
    void (*experts)(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
                    struct hy_forward_scratch *s, double t0);
    /* Runs core over b (attention-DP groups: over this group's sub-batch, the groups' rows gathered)
     * and returns the [T, H] rows to add to x. */
    const float *(*attention)(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b,
                              const float *x, struct hy_forward_scratch *s, hy_attn_core_fn core);
    /* out [T, H] = o_proj wo over the head outputs att [T, this rank's heads * head width] (width: all
     * heads' columns), combined over the attention TP group. */
    void (*attn_out)(const struct hy_model *m, const struct hy_tensor *wo, const float *att, int64_t T, int64_t width,
                     struct hy_forward_scratch *s, float *out);
    /* Whether this rank computes the lm_head for a caller passing logits (NULL: it takes none). */
    int (*logits_here)(const struct hy_model *m, const float *logits);
    /* logits [n, vocab] = lm_head over rows [n, H] (vocabulary-split: gathered on the leader; logits
     * NULL on the other ranks). */
    void (*lm_head)(const struct hy_model *m, const float *rows, int64_t n, float *logits);
};

extern const struct hy_shard_ops hy_layers_local_ops; /* layers.c */
extern const struct hy_shard_ops hy_shard_mpi_ops;    /* shard_ops.c */

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
void hy_shard_part(int64_t total, int parts, int i, int64_t *lo, int64_t *n);

/* A staging buffer of at least `floats` floats in slot (enum hy_shard_slot), grown when needed; NULL on
 * out of memory. */
float *hy_shard_buf(struct hy_model_dist *d, enum hy_shard_slot slot, size_t floats);

/* Whether a step of T tokens fits what one MPI exchange can carry (byte counts are ints: the exact
 * MoE all-gather moves T * num_experts_per_tok rows of hidden_size floats to every rank). Returns 0,
 * or -1 with hy_err_msg() naming the limit and what to lower (--max-num-batched-tokens, or the
 * all-to-all dispatch). The leader checks before it sends a plan, so nothing is left half done. */
int hy_shard_check_tokens(const struct hy_model *m, int64_t T);

/* Grows the staging slots to what a step of up to T tokens needs (the exchanges' widest rows: the
 * head outputs, the dense / shared / expert hidden, T*num_experts_per_tok expert rows) and touches
 * them, so that the first steps do not pay page faults. Slots that need more later (logits of many
 * rows) still grow on demand. Returns 0, or -1 with hy_err_msg() (out of memory). */
int hy_shard_reserve(struct hy_model *m, int64_t T);

/* Weight bytes this rank holds (views + copies; the replicated vectors excluded). */
int64_t hy_model_weight_bytes(const struct hy_model *m);

#endif
