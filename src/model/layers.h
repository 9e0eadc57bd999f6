/* layers.h - the building blocks of every architecture's layers (layers.c; internal to model/): the
 * activations, the linear-layer and rounding helpers, the stage timers, embedding, MLP / MoE blocks,
 * attention over runs and the final norm + lm_head. hy_v3.c and hy_v4.c build their layers from them;
 * what depends on how the model is split over ranks they reach through m->shard_ops (shard.h). */
#ifndef HY_MODEL_LAYERS_H
#define HY_MODEL_LAYERS_H

#include "kernels/attention.h"
#include "model/model.h"
#include "model/shard.h"

#include "base/err.h"
#include "base/timing.h"
#include "comm/comm.h"
#include "kernels/kernels.h"

#include <stdint.h>

/* The forward pass's activations, owned by the model (m->fwd), sized by hy_model_reserve for up to T
 * tokens per call, contexts of up to max_ctx positions and n_thr threads, reused by every call. */
struct hy_forward_scratch {
    int64_t T;
    int32_t max_ctx;
    int32_t n_thr;
    float *x;      /* [T, H] residual stream */
    float *head;   /* [T, H] the rows lm_head reads */
    float *scores; /* [n_thr, max_ctx] attention scores, one row per thread */
    float *a;      /* [T, H] normed input */
    float *q;      /* [T, nh*D] */
    float *k;      /* [T, nkv*D] */
    float *v;      /* [T, nkv*D] */
    float *att;    /* [T, nh*D] */
    float *tmp;    /* [T, max(H, 2H)] */
    float *ff_a;   /* [T, F] gate / expert hidden */
    float *ff_b;   /* [T, F] up */
    float *ff_x;   /* [T, H] gathered expert inputs */
    float *y;      /* [T, H] MLP / MoE output */
    float *rlog;   /* [T, E] router scores */
    int32_t *sel;  /* [T, k] selected experts */
    float *selw;   /* [T, k] their weights */
    int32_t *rows; /* [T] token rows of one expert group */
    float *roww;   /* [T] */
    /* grouped routed pass (T <= FUSED_MAX_T): all T*k (token, expert) pairs, grouped by expert */
    float *g_x;     /* [T*k, H] gathered inputs */
    float *g_a;     /* [T*k, I] gate -> silu(gate) * up */
    float *g_b;     /* [T*k, I] up */
    float *g_out;   /* [T*k, H] expert outputs */
    int32_t *g_pos; /* [T*k] gathered row of selection (t, j) */
    void *arch;     /* the architecture's own buffers (arch.h scratch_new; hy_v4: MLA, indexer, HC) */
    void (*arch_free)(void *arch);
};

/* The MoE block on T normed rows x [T, H]: the router and top-k here, then the routed and shared experts
 * through the shard (m->shard_ops->experts): s->y [T, H]. */
void hy_layers_moe(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
                   struct hy_forward_scratch *s);

/* Clamped SwiGLU inputs (hy_v4 routed experts, spec §9.2): gate <= L, -L <= up <= L; nothing when L <= 0. */
static inline void swiglu_clamp(float *gate, float *up, int64_t n, float L)
{
    if (!(L > 0.0f))
        return;
    for (int64_t i = 0; i < n; i++) {
        gate[i] = gate[i] < L ? gate[i] : L;
        up[i] = up[i] < -L ? -L : up[i] > L ? L : up[i];
    }
}

/* Token counts up to which the MoE layer (and the shared / dense MLP) runs as one parallel region
 * over all selected experts (row bands of every expert's fused gate+up, then of every down) instead
 * of one threaded matmul per expert and projection. Above it the per-expert GEMM path (weights
 * widened once per block, many tokens per expert) is the faster one. HYINFER_MOE_GROUPED=0 turns the
 * grouped pass off (A/B measurements); the results are bitwise the same either way. */
#define FUSED_MAX_T 32

/* The grouped MoE pass: off with moe_per_expert (hy_load_params.moe_grouped = 0, HYINFER_MOE_GROUPED=0)
 * and under a calibration observer. */
static inline int grouped_on(const struct hy_model *m, int64_t T)
{
    return !m->moe_per_expert && !m->observe && T <= FUSED_MAX_T;
}

/* Stage timers (struct hy_model_prof). The forward helpers take the model as const; the profile is
 * bookkeeping outside the model's math, so it is reached through this one cast. NULL when off. */
static inline struct hy_model_prof *prof_of(const struct hy_model *m)
{
    return m->prof.enabled ? (struct hy_model_prof *)&m->prof : NULL;
}

static inline double prof_start(const struct hy_model_prof *p)
{
    return p ? hy_time_now() : 0.0;
}

static inline void prof_stop(struct hy_model_prof *p, enum hy_stage st, double t0)
{
    if (p)
        p->sec[st] += hy_time_now() - t0;
}

static inline void maybe_round(const struct hy_model *m, float *x, int64_t n)
{
    if (m->compute == HY_COMPUTE_BF16)
        hy_round_bf16_inplace(x, n);
}

/* y[T, N] = x[T, K] . W^T. In bf16 mode every matmul input has been rounded to bf16 at its operator
 * boundary, so the kernels may use bf16 products (hy_matmul_bf16x: AMX tiles at the amx level); the
 * fp32 mode keeps hy_matmul's fixed, batch-invariant chain. */
static inline void linear(const struct hy_model *m, float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    if (m->compute == HY_COMPUTE_BF16)
        hy_matmul_bf16x(y, x, T, W);
    else
        hy_matmul(y, x, T, W);
    if (m->observe)
        m->observe(m->observe_ctx, W, x, y, T);
}

/* A failed collective step on one rank would leave the others waiting in the next one: end the job. */
static inline void dist_ok(int rc)
{
    if (rc)
        hy_dist_abort(1, "forward: %s", hy_err_msg());
}

/* SwiGLU MLP on T rows of this rank's whole matrices: y[T, H] = down(silu(gate x) * up x), ga / gb
 * [T, I] the hidden buffers. */
void hy_layers_mlp(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, float *ga, float *gb,
                   float *y);

/* The dense MLP or the shared expert (full intermediate width I), through the shard
 * (m->shard_ops->ffn: split over the dense TP group, or hy_layers_ffn_local). */
void hy_layers_ffn(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, int64_t I, float *ga,
                   float *gb, float *y);

/* The activations for T tokens, contexts of max_ctx positions and n_thr threads, with the
 * architecture's own buffers (m->arch->scratch_new); NULL on out of memory. Freed with
 * hy_layers_scratch_free (NULL allowed). */
struct hy_forward_scratch *hy_layers_scratch_new(const struct hy_model *m, int64_t T, int32_t max_ctx, int32_t n_thr);
void hy_layers_scratch_free(struct hy_forward_scratch *s);

/* Adds one forward call's total to p (NULL: off) and derives OTHER = total - the stages timed since
 * before[] (a copy of p->sec taken at the call's start, t0 its start time); T tokens. */
void hy_layers_prof_finish(struct hy_model_prof *p, double t0, const double *before, int64_t T);

/* x[T, H] = the embedding rows of ids [T] (f32), through the shard (m->shard_ops->embed); _local: from
 * this rank's whole table. */
void hy_layers_embed(const struct hy_model *m, const int32_t *ids, int64_t T, float *x);
void hy_layers_embed_local(const struct hy_model *m, const int32_t *ids, int64_t T, float *x);

/* hy_layers_ffn on this rank's whole matrices (the grouped pass for small T). */
void hy_layers_ffn_local(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, float *ga,
                         float *gb, float *y);

/* The routed experts (after routing) and the shared expert of layer ly on this rank's whole matrices:
 * s->y [T, H] (struct hy_shard_ops experts, one process). */
void hy_layers_experts_local(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
                             struct hy_forward_scratch *s, double t0);

/* ys[i][T, Ws[i]->rows] = x[T, K] . Ws[i]^T for n (1..4) matrices of the same input width, in one
 * parallel region of row bands over all of them (the values linear() gives). */
void hy_layers_linear_bands(const struct hy_model *m, const float *x, int64_t T, int n,
                            const struct hy_tensor *const *Ws, float *const *ys);

/* Attention of the batch's T > 1 tokens inside the caller's parallel region (all threads call it):
 * s->att [T, nh*D] from s->q [T, nh*D] over cache view kv; runs of up to 8 tokens of one sequence at
 * consecutive positions (prefill) go to one hy_attend_multi call (each KV tile read once per run;
 * results identical). */
void hy_layers_attend_runs(const struct hy_kv_view *kv, const struct hy_batch *b, struct hy_forward_scratch *s,
                           int32_t nh, int64_t D);

/* Final norm (weight norm_w [H]) of the stream rows x [T, H] -> hidden_out [T, H] when non-NULL, and
 * the lm_head logits [n_logits, vocab] of b's logits rows into logits (NULL: none; under lm_head TP
 * every rank of the leader's group computes its vocabulary slice, only the leader stores). Returns 0. */
int hy_layers_head(const struct hy_model *m, const float *x, const float *norm_w, const struct hy_batch *b,
                   float *logits, float *hidden_out, struct hy_forward_scratch *s);

#endif
