/* forward_internal.h - what the forward pass's files share (internal to model/: forward.c runs the
 * layers, moe_dist.c the multi-rank MoE block and split MLPs): the activations, the linear-layer and
 * rounding helpers, the stage timers and the MLP entry points. */
#ifndef HY_MODEL_FORWARD_INTERNAL_H
#define HY_MODEL_FORWARD_INTERNAL_H

#include "model/model.h"

#include "base/err.h"
#include "base/timing.h"
#include "dist/comm.h"
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
    float *g_x;               /* [T*k, H] gathered inputs */
    float *g_a;               /* [T*k, I] gate -> silu(gate) * up */
    float *g_b;               /* [T*k, I] up */
    float *g_out;             /* [T*k, H] expert outputs */
    int32_t *g_pos;           /* [T*k] gathered row of selection (t, j) */
    struct hy_v4_scratch *v4; /* hy_v4 only: the MLA / indexer / hyper-connection buffers (forward_v4.c) */
};

struct hy_v4_scratch;

/* hy_v4's buffers for T tokens and contexts of max_ctx positions; NULL on out of memory.
 * Owned by the hy_forward_scratch (freed with hy_v4_scratch_free, NULL allowed). */
struct hy_v4_scratch *hy_v4_scratch_new(const struct hy_model *m, int64_t T, int32_t max_ctx);
void hy_v4_scratch_free(struct hy_v4_scratch *v);

/* Keys the indexer scores per pass (default and maximum 4096; n clamped to [1, 4096]). Process-wide, for
 * tests: the scores, hence the logits, must not depend on it. */
void hy_v4_set_index_chunk(int32_t n);

/* One hy_v4 main layer L over the residual streams X [T, hc_mult, H] (f32, in place): HC-pre, norm,
 * gated MLA (writes cache layer L), HC-post, then the same around the MLP / MoE (forward_v4.c). */
void hy_v4_layer(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b, float *X,
                 struct hy_forward_scratch *s);

/* The hy_v4 MTP block L (no hyper-connections): x [T, H] += MLA(norm x); x += MoE(norm x). */
void hy_v4_plain_block(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b, float *x,
                       struct hy_forward_scratch *s);

/* HC-head: h [T, H] = sum_i g_i X_i over the streams X [T, hc_mult, H] (spec §4.4). */
void hy_v4_hc_head(const struct hy_model *m, const float *X, int64_t T, struct hy_forward_scratch *s, float *h);

/* The MoE block on T normed rows x [T, H] (router, routed experts, shared expert): s->y [T, H] (forward.c). */
void hy_fwd_moe(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
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
 * [T, I] the hidden buffers (forward.c). */
void hy_fwd_mlp(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, float *ga, float *gb,
                float *y);

/* The dense MLP or the shared expert (full intermediate width I) of this rank: split over the dense TP
 * group (hy_fwd_mlp_dist), or whole (the grouped pass for small T) (forward.c). */
void hy_fwd_ffn(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, int64_t I, float *ga,
                float *gb, float *y);

/* A SwiGLU MLP split over the ranks of c by intermediate width (moe_dist.c). */
void hy_fwd_mlp_dist(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, int64_t I,
                     struct hy_comm *c, float *ga, float *gb, float *y);

/* The MoE block over the ranks, after routing (s->sel, s->selw filled on every rank): s->y[T, H]
 * (moe_dist.c). */
void hy_fwd_moe_dist(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
                     struct hy_forward_scratch *s);

#endif
