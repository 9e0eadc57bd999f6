/* forward.c - the batch-first forward pass: Hy3 (spec §2, MTP §4.1) and dense Llama.
 *
 * One flat batch of tokens from many sequences; every token writes its K/V to its slot and
 * attends to its own sequence through the block table. Per-token math never depends on the rest
 * of the batch (fixed reduction orders), which makes fp32 logits batch- and chunk-invariant.
 */
#include "model/model.h"

#include "model/forward_dist.h"
#include "model/forward_internal.h"
#include "model/lockstep.h"

#include "base/err.h"
#include "base/timing.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"
#include "kernels/task_rows.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static void scratch_free(struct hy_forward_scratch *s)
{
    if (!s)
        return;
    free(s->x);
    free(s->head);
    free(s->scores);
    free(s->a);
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->att);
    free(s->tmp);
    free(s->ff_a);
    free(s->ff_b);
    free(s->ff_x);
    free(s->y);
    free(s->rlog);
    free(s->sel);
    free(s->selw);
    free(s->rows);
    free(s->roww);
    free(s->g_x);
    free(s->g_a);
    free(s->g_b);
    free(s->g_out);
    free(s->g_pos);
    hy_v4_scratch_free(s->v4);
    free(s);
}

/* A scratch for T tokens, contexts of max_ctx positions and n_thr threads; NULL on out of memory. */
static struct hy_forward_scratch *scratch_new(const struct hy_model *m, int64_t T, int32_t max_ctx, int32_t n_thr)
{
    const struct hy_model_config *c = &m->cfg;
    struct hy_forward_scratch *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->T = T;
    s->max_ctx = max_ctx;
    s->n_thr = n_thr;
    const int64_t H = c->hidden_size, qd = (int64_t)c->num_attention_heads * c->head_dim,
                  kvd = (int64_t)c->num_key_value_heads * c->head_dim;
    int64_t F = c->intermediate_size;
    int64_t sw = (int64_t)c->moe_intermediate_size * (c->num_shared_experts > 1 ? c->num_shared_experts : 1);
    if (sw > F)
        F = sw;
    const int64_t E = c->num_experts > 0 ? c->num_experts : 1,
                  K = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
    const size_t f = sizeof(float);
    const int64_t streams = c->arch == HY_ARCH_HY_V4 ? c->v4.hc_mult : 1; /* hy_v4: hc_mult residual streams */
    s->x = malloc((size_t)(T * H * streams) * f);
    s->head = malloc((size_t)(T * H) * f);
    s->scores = malloc((size_t)n_thr * (size_t)max_ctx * f);
    s->a = malloc((size_t)(T * H) * f);
    s->q = malloc((size_t)(T * qd) * f);
    s->k = malloc((size_t)(T * kvd) * f);
    s->v = malloc((size_t)(T * kvd) * f);
    s->att = malloc((size_t)(T * qd) * f);
    s->tmp = malloc((size_t)(T * 2 * H) * f);
    s->ff_a = malloc((size_t)(T * F) * f);
    s->ff_b = malloc((size_t)(T * F) * f);
    s->ff_x = malloc((size_t)(T * H) * f);
    s->y = malloc((size_t)(T * H) * f);
    s->rlog = malloc((size_t)(T * E) * f);
    s->sel = malloc((size_t)(T * K) * sizeof(int32_t));
    s->selw = malloc((size_t)(T * K) * f);
    s->rows = malloc((size_t)T * sizeof(int32_t));
    s->roww = malloc((size_t)T * f);
    int g_fail = 0;
    if (c->num_experts > 0 && c->num_experts_per_tok <= 64) { /* the grouped pass (grouped_on) */
        const int64_t R = (T < FUSED_MAX_T ? T : FUSED_MAX_T) * K, I = c->moe_intermediate_size;
        s->g_x = malloc((size_t)(R * H) * f);
        s->g_a = malloc((size_t)(R * I) * f);
        s->g_b = malloc((size_t)(R * I) * f);
        s->g_out = malloc((size_t)(R * H) * f);
        s->g_pos = malloc((size_t)R * sizeof(int32_t));
        g_fail = !s->g_x || !s->g_a || !s->g_b || !s->g_out || !s->g_pos;
    }
    if (c->arch == HY_ARCH_HY_V4 && !(s->v4 = hy_v4_scratch_new(m, T, max_ctx)))
        g_fail = 1;
    if (!s->x || !s->head || !s->scores || !s->a || !s->q || !s->k || !s->v || !s->att || !s->tmp || !s->ff_a ||
        !s->ff_b || !s->ff_x || !s->y || !s->rlog || !s->sel || !s->selw || !s->rows || !s->roww || g_fail) {
        scratch_free(s);
        return NULL;
    }
    return s;
}

/* hy_model_reserve on this rank only (the forward pass grows its scratch with it: a step plan is
 * already out, so nothing else may be broadcast then). */
static int reserve_local(struct hy_model *m, int64_t max_tokens, int32_t max_ctx)
{
    if (max_tokens < 1 || max_ctx < 1)
        return hy_err_set("forward: cannot reserve for %lld tokens and %d positions", (long long)max_tokens, max_ctx);
    struct hy_forward_scratch *old = m->fwd;
    const int32_t thr = omp_get_max_threads() > 0 ? omp_get_max_threads() : 1;
    if (old && old->T >= max_tokens && old->max_ctx >= max_ctx && old->n_thr >= thr)
        return 0;
    if (old) { /* grow to cover both */
        max_tokens = old->T > max_tokens ? old->T : max_tokens;
        max_ctx = old->max_ctx > max_ctx ? old->max_ctx : max_ctx;
    }
    if (m->dist && hy_dist_reserve(m, max_tokens))
        return -1;
    const int32_t n_thr = old && old->n_thr > thr ? old->n_thr : thr;
    struct hy_forward_scratch *s = scratch_new(m, max_tokens, max_ctx, n_thr);
    if (!s)
        return hy_err_set("forward: out of memory for the activations of %lld tokens (context %d, %d threads)",
                          (long long)max_tokens, max_ctx, n_thr);
    scratch_free(old);
    m->fwd = s;
    return 0;
}

int hy_model_reserve(struct hy_model *m, int64_t max_tokens, int32_t max_ctx)
{
    if (max_tokens < 1 || max_ctx < 1)
        return hy_err_set("forward: cannot reserve for %lld tokens and %d positions", (long long)max_tokens, max_ctx);
    if ((m->dist && hy_dist_check_tokens(m, max_tokens)) || hy_lockstep_reserve(m, max_tokens, max_ctx))
        return -1;
    return reserve_local(m, max_tokens, max_ctx);
}

void hy_model_release_scratch(struct hy_model *m)
{
    scratch_free(m->fwd);
    m->fwd = NULL;
}

/* The model's scratch, grown first if batch b needs more (only when the caller did not reserve
 * enough with hy_model_reserve); NULL with hy_err_msg() on out of memory. */
static struct hy_forward_scratch *scratch_for(struct hy_model *m, const struct hy_batch *b)
{
    int32_t max_ctx = 1;
    for (int32_t t = 0; t < b->n_tokens; t++)
        if (b->positions[t] + 1 > max_ctx)
            max_ctx = b->positions[t] + 1;
    return reserve_local(m, b->n_tokens, max_ctx) ? NULL : m->fwd;
}

int hy_model_prof_enable(struct hy_model *m, int on)
{
    free(m->prof.expert_hits);
    memset(&m->prof, 0, sizeof(m->prof));
    if (!on)
        return 0;
    const int32_t nl = m->cfg.num_hidden_layers + (m->has_mtp ? 1 : 0);
    const int32_t ne = m->cfg.num_experts > 0 ? m->cfg.num_experts : 1;
    m->prof.expert_hits = calloc((size_t)nl * (size_t)ne, sizeof(int64_t));
    if (!m->prof.expert_hits)
        return hy_err_set("forward: out of memory for the expert-selection counts");
    m->prof.n_layers = nl;
    m->prof.n_experts = ne;
    m->prof.enabled = 1;
    return 0;
}

void hy_model_prof_reset(struct hy_model *m)
{
    struct hy_model_prof *p = &m->prof;
    memset(p->sec, 0, sizeof(p->sec));
    p->total_sec = 0.0;
    p->calls = 0;
    p->tokens = 0;
    if (p->expert_hits)
        memset(p->expert_hits, 0, (size_t)p->n_layers * (size_t)p->n_experts * sizeof(int64_t));
}

/* Adds the per-call total and derives OTHER = total - the timed stages of this call. */
static void prof_finish(struct hy_model_prof *p, double t0, const double *before, int64_t T)
{
    if (!p)
        return;
    double total = hy_time_now() - t0, timed = 0.0;
    for (int i = 0; i < HY_STAGE_OTHER; i++)
        timed += p->sec[i] - before[i];
    p->sec[HY_STAGE_OTHER] += total > timed ? total - timed : 0.0;
    p->total_sec += total;
    p->calls++;
    p->tokens += T;
}

/* Outputs [n0, n1) of linear() on the calling thread (the grouped passes' row bands): the same values
 * linear() gives them, from the same mode's kernel. */
static void linear_rows(const struct hy_model *m, float *y, int64_t ldy, const float *x, int64_t T,
                        const struct hy_tensor *W, int64_t n0, int64_t n1)
{
    if (m->compute == HY_COMPUTE_BF16)
        hy_matmul_rows_bf16x(y, ldy, x, T, W, n0, n1);
    else
        hy_matmul_rows(y, ldy, x, T, W, n0, n1);
}

static void embed_rows(const struct hy_model *m, const int32_t *ids, int64_t T, float *x)
{
    const int64_t H = m->cfg.hidden_size;
    struct hy_model_dist *d = m->dist;
    if (d && d->par.embed_tp_size > 1) { /* vocabulary split: each row from the rank that holds it */
        float *mine = hy_dist_buf(d, 4, (size_t)(T * H));
        if (!mine)
            dist_ok(-1);
        int64_t n = 0;
        for (int64_t t = 0; t < T; t++)
            if (ids[t] >= d->v0 && ids[t] < d->v0 + d->nv)
                for (int64_t i = 0; i < H; i++, n++)
                    mine[n] = hy_tensor_get(&m->embed, ids[t] - d->v0, i);
        dist_ok(hy_fd_gather_vocab_rows(d, d->embed, ids, T, m->cfg.vocab_size, H, mine, x));
        return;
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < H; i++)
            x[t * H + i] = hy_tensor_get(&m->embed, ids[t], i);
}

/* SwiGLU MLP on T rows: y[T, H] = down( silu(gate x) * up x ). */
void hy_fwd_mlp(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, float *ga, float *gb,
                float *y)
{
    linear(m, ga, x, T, &e->gate);
    linear(m, gb, x, T, &e->up);
    maybe_round(m, ga, T * e->gate.rows);
    maybe_round(m, gb, T * e->up.rows);
    swiglu_clamp(ga, gb, T * e->gate.rows, e->clamp);
    hy_silu_mul(ga, ga, gb, T * e->gate.rows);
    maybe_round(m, ga, T * e->gate.rows);
    linear(m, y, ga, T, &e->down);
    maybe_round(m, y, T * e->down.rows);
}

/* One SwiGLU MLP over n gathered rows: out[n, H] = down(silu(gate x) * up x), with a[n, I], b[n, I]
 * as the hidden buffers (I = e->gate.rows). A grouped pass runs at most FFN_MAX_JOBS of them. */
#define FFN_MAX_JOBS 256
struct ffn_job {
    const struct hy_expert *e;
    int64_t n;
    const float *x;
    float *a, *b, *out;
};

#define BAND_MIN 16 /* rows per task of the grouped passes, at least */

/* Rows per task of job i's gate+up (band_gu[i]) and down (band_dn[i]) for one grouped pass over the
 * jobs: each phase's bytes split by hy_task_rows (kernels/task_rows.h: tasks of up to 4 MiB, at least 4
 * per thread). A gate+up task streams both matrices' bands. Which rows a task computes never changes
 * their values. */
static void ffn_bands(const struct ffn_job *jobs, int nj, int64_t *band_gu, int64_t *band_dn)
{
    int64_t gu = 0, dn = 0;
    for (int i = 0; i < nj; i++) {
        gu += hy_tensor_bytes(&jobs[i].e->gate) + hy_tensor_bytes(&jobs[i].e->up);
        dn += hy_tensor_bytes(&jobs[i].e->down);
    }
    for (int i = 0; i < nj; i++) {
        const struct hy_expert *e = jobs[i].e;
        band_gu[i] = hy_task_rows(hy_task_row_bytes(&e->gate) + hy_task_row_bytes(&e->up), gu, BAND_MIN);
        band_dn[i] = hy_task_rows(hy_task_row_bytes(&e->down), dn, BAND_MIN);
    }
}

/* Tasks that cover `rows` in bands of `band`. */
static int64_t bands(int64_t rows, int64_t band)
{
    return (rows + band - 1) / band;
}

/* Phase 1 task: gate and up rows [r0, r1) of every token of the job (one sweep, same input rows in
 * cache), then silu(gate) * up on that band, with the bf16-mode roundings of hy_fwd_mlp. */
static void ffn_gate_up(const struct hy_model *m, const struct ffn_job *j, int64_t r0, int64_t r1)
{
    const int64_t I = j->e->gate.rows, w = r1 - r0;
    linear_rows(m, j->a + r0, I, j->x, j->n, &j->e->gate, r0, r1);
    linear_rows(m, j->b + r0, I, j->x, j->n, &j->e->up, r0, r1);
    for (int64_t t = 0; t < j->n; t++) {
        float *ga = j->a + t * I + r0, *gb = j->b + t * I + r0;
        maybe_round(m, ga, w);
        maybe_round(m, gb, w);
        swiglu_clamp(ga, gb, w, j->e->clamp);
        hy_silu_mul(ga, ga, gb, w);
        maybe_round(m, ga, w);
    }
}

static void ffn_down(const struct hy_model *m, const struct ffn_job *j, int64_t r0, int64_t r1)
{
    const int64_t H = j->e->down.rows;
    linear_rows(m, j->out + r0, H, j->a, j->n, &j->e->down, r0, r1);
    for (int64_t t = 0; t < j->n; t++)
        maybe_round(m, j->out + t * H + r0, r1 - r0);
}

/* Maps a flat task index of a phase to (job, band [r0, r1)); band[i]: job i's rows per task. */
static void task_of(const struct ffn_job *jobs, int nj, int phase, const int64_t *band, int64_t task, int *ji,
                    int64_t *r0, int64_t *r1)
{
    for (int i = 0; i < nj; i++) {
        const int64_t rows = phase == 0 ? jobs[i].e->gate.rows : jobs[i].e->down.rows, nb = bands(rows, band[i]);
        if (task < nb) {
            *ji = i;
            *r0 = task * band[i];
            *r1 = *r0 + band[i] < rows ? *r0 + band[i] : rows;
            return;
        }
        task -= nb;
    }
    *ji = -1;
    *r0 = *r1 = 0;
}

/* Runs the jobs inside the caller's parallel region (all threads must call it): every job's gate+up
 * bands, a barrier, every job's down bands, a barrier. Each output keeps its kernel chain, so the
 * values equal hy_fwd_mlp's bit for bit. */
static void ffn_jobs_in_region(const struct hy_model *m, const struct ffn_job *jobs, int nj)
{
    int64_t n_gu = 0, n_dn = 0, band_gu[FFN_MAX_JOBS], band_dn[FFN_MAX_JOBS];
    ffn_bands(jobs, nj, band_gu, band_dn);
    for (int i = 0; i < nj; i++) {
        n_gu += bands(jobs[i].e->gate.rows, band_gu[i]);
        n_dn += bands(jobs[i].e->down.rows, band_dn[i]);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < n_gu; t++) {
        int ji;
        int64_t r0, r1;
        task_of(jobs, nj, 0, band_gu, t, &ji, &r0, &r1);
        ffn_gate_up(m, &jobs[ji], r0, r1);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < n_dn; t++) {
        int ji;
        int64_t r0, r1;
        task_of(jobs, nj, 1, band_dn, t, &ji, &r0, &r1);
        ffn_down(m, &jobs[ji], r0, r1);
    }
}

/* hy_fwd_mlp through the grouped pass (one parallel region): same values. */
static void mlp_grouped(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, float *ga,
                        float *gb, float *y)
{
    const struct ffn_job j = {.e = e, .n = T, .x = x, .a = ga, .b = gb, .out = y};
#pragma omp parallel
    ffn_jobs_in_region(m, &j, 1);
}

/* The dense MLP or the shared expert of this rank: split over the dense TP group, or whole. */
void hy_fwd_ffn(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, int64_t I, float *ga,
                float *gb, float *y)
{
    if (m->dist && m->dist->par.dense_tp_size > 1)
        hy_fwd_mlp_dist(m, e, x, T, I, m->dist->dense, ga, gb, y);
    else
        (grouped_on(m, T) ? mlp_grouped : hy_fwd_mlp)(m, e, x, T, ga, gb, y);
}

/* Router for one token (spec §2 MoE block): sigmoid scores, selection by score + bias, unbiased
 * weights renormalized (route_norm) and scaled. Ties: lower expert id first. */
static void route_token(const struct hy_model_config *c, const struct hy_layer *ly, const float *logit, int32_t *sel,
                        float *w)
{
    const int E = c->num_experts, K = c->num_experts_per_tok;
    float choice_sel[64];
    for (int j = 0; j < K; j++) {
        sel[j] = -1;
        choice_sel[j < 64 ? j : 63] = -INFINITY;
    }
    /* insertion into a sorted top-K list (K is small) */
    for (int e = 0; e < E; e++) {
        float s = 1.0f / (1.0f + expf(-logit[e]));
        float ch = s + ly->expert_bias[e];
        int pos = K;
        while (pos > 0 && (sel[pos - 1] < 0 || ch > choice_sel[pos - 1]))
            pos--;
        if (pos >= K)
            continue;
        for (int j = K - 1; j > pos; j--) {
            sel[j] = sel[j - 1];
            choice_sel[j] = choice_sel[j - 1];
        }
        sel[pos] = e;
        choice_sel[pos] = ch;
    }
    float sum = 0.0f;
    for (int j = 0; j < K; j++) {
        w[j] = 1.0f / (1.0f + expf(-logit[sel[j]]));
        sum += w[j];
    }
    for (int j = 0; j < K; j++) {
        if (c->route_norm)
            w[j] = w[j] / (sum + 1e-20f);
        w[j] *= c->router_scaling_factor;
    }
}

/* The routed experts of T tokens (s->sel / s->selw filled) in one parallel region: rows gathered
 * by expert (ascending id, tokens in order), every selected expert's gate+up then down as row-band
 * tasks, then per token y += w_e * out_e over its experts in ascending id: the same additions in the
 * same order as the per-expert loop of hy_fwd_moe, so s->y is bitwise the same. */
static void routed_grouped(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
                           struct hy_forward_scratch *s)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t H = c->hidden_size, E = c->num_experts, K = c->num_experts_per_tok, I = c->moe_intermediate_size;
    struct ffn_job jobs[FFN_MAX_JOBS];
    int nj = 0;
    int64_t r = 0;
    for (int64_t e = 0; e < E; e++) {
        const int64_t r_start = r;
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < K; j++)
                if (s->sel[t * K + j] == e) {
                    memcpy(s->g_x + r * H, x + t * H, (size_t)H * sizeof(float));
                    s->g_pos[t * K + j] = (int32_t)r++;
                }
        if (r == r_start)
            continue;
        if (nj == (int)(sizeof(jobs) / sizeof(jobs[0]))) { /* more selected experts than slots: flush */
#pragma omp parallel
            ffn_jobs_in_region(m, jobs, nj);
            nj = 0;
        }
        jobs[nj++] = (struct ffn_job){.e = &ly->experts[e],
                                      .n = r - r_start,
                                      .x = s->g_x + r_start * H,
                                      .a = s->g_a + r_start * I,
                                      .b = s->g_b + r_start * I,
                                      .out = s->g_out + r_start * H};
    }
#pragma omp parallel
    {
        ffn_jobs_in_region(m, jobs, nj);
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            int32_t order[64]; /* the token's selections by ascending expert id */
            const int64_t k = K < 64 ? K : 64;
            for (int64_t j = 0; j < k; j++) {
                int64_t p = j;
                while (p > 0 && s->sel[t * K + order[p - 1]] > s->sel[t * K + j]) {
                    order[p] = order[p - 1];
                    p--;
                }
                order[p] = (int32_t)j;
            }
            float *yr = s->y + t * H;
            for (int64_t q = 0; q < k; q++) {
                const float w = s->selw[t * K + order[q]];
                const float *er = s->g_out + (int64_t)s->g_pos[t * K + order[q]] * H;
                for (int64_t d = 0; d < H; d++)
                    yr[d] += w * er[d];
            }
        }
    }
}

/* MoE block on T rows of x (post-attention-normed): y = Σ_routed w_e Expert_e(x) + Shared(x).
 * Tokens are grouped by expert; each expert runs once over its group. Per token the routed
 * contributions are added in ascending expert id, then the shared expert (fixed order). */
void hy_fwd_moe(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
                struct hy_forward_scratch *s)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t H = c->hidden_size, E = c->num_experts, K = c->num_experts_per_tok;
    struct hy_model_prof *prof = prof_of(m);
    double t0 = prof_start(prof);
    struct hy_tensor router = {.dtype = HY_DTYPE_F32, .rows = E, .cols = H, .data = ly->router};
    linear(m, s->rlog, x, T, &router);
    for (int64_t t = 0; t < T; t++)
        route_token(c, ly, s->rlog + t * E, s->sel + t * K, s->selw + t * K);
    if (prof) {
        const int64_t L = ly - m->layers;
        if (prof->expert_hits && L < prof->n_layers && E <= prof->n_experts)
            for (int64_t i = 0; i < T * K; i++)
                prof->expert_hits[L * prof->n_experts + s->sel[i]]++;
        prof_stop(prof, HY_STAGE_ROUTER, t0);
        t0 = prof_start(prof);
    }
    if (m->dist) { /* the routed stage without the shared expert moe_dist timed inside it */
        const double shared0 = prof ? prof->sec[HY_STAGE_SHARED] : 0.0;
        hy_fwd_moe_dist(m, ly, x, T, s);
        if (prof)
            prof->sec[HY_STAGE_ROUTED] += hy_time_now() - t0 - (prof->sec[HY_STAGE_SHARED] - shared0);
        return;
    }
    memset(s->y, 0, (size_t)(T * H) * sizeof(float));
    if (s->g_x && grouped_on(m, T)) { /* g_x: the model has routed experts with k <= 64 */
        routed_grouped(m, ly, x, T, s);
        goto routed_done;
    }
    for (int64_t e = 0; e < E; e++) {
        int64_t n = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < K; j++)
                if (s->sel[t * K + j] == e) {
                    s->rows[n] = (int32_t)t;
                    s->roww[n++] = s->selw[t * K + j];
                }
        if (n == 0)
            continue;
        for (int64_t i = 0; i < n; i++)
            memcpy(s->ff_x + i * H, x + (int64_t)s->rows[i] * H, (size_t)H * sizeof(float));
        if (m->observe_route)
            m->observe_route(m->observe_ctx, s->roww, n);
        hy_fwd_mlp(m, &ly->experts[e], s->ff_x, n, s->ff_a, s->ff_b, s->tmp);
        if (m->observe_route)
            m->observe_route(m->observe_ctx, NULL, 0);
        for (int64_t i = 0; i < n; i++) {
            float *yr = s->y + (int64_t)s->rows[i] * H;
            const float *er = s->tmp + i * H;
            for (int64_t d = 0; d < H; d++)
                yr[d] += s->roww[i] * er[d];
        }
    }
routed_done:
    maybe_round(m, s->y, T * H);
    prof_stop(prof, HY_STAGE_ROUTED, t0);
    if (ly->shared.gate.data) {
        t0 = prof_start(prof);
        (grouped_on(m, T) ? mlp_grouped : hy_fwd_mlp)(m, &ly->shared, x, T, s->ff_a, s->ff_b, s->tmp);
        for (int64_t i = 0; i < T * H; i++)
            s->y[i] += s->tmp[i];
        maybe_round(m, s->y, T * H);
        prof_stop(prof, HY_STAGE_SHARED, t0);
    }
}

/* Attention of the batch's T > 1 tokens inside the caller's parallel region (all threads call it):
 * runs of up to ATT_RUN tokens of one sequence at consecutive positions (prefill) go to one
 * hy_attend_multi call (each KV tile read once per run; results identical). */
static void attend_runs(const struct hy_kv_view *kv, const struct hy_batch *b, struct hy_forward_scratch *s, int32_t nh,
                        int64_t D)
{
    enum { ATT_RUN = 8 };
    const int64_t T = b->n_tokens, run = T >= 32 ? ATT_RUN : 1, n_runs = (T + run - 1) / run;
    float *scores = s->scores + (size_t)omp_get_thread_num() * (size_t)s->max_ctx; /* this thread's row */
#pragma omp for schedule(dynamic, 1)
    for (int64_t r = 0; r < n_runs; r++) {
        const int64_t t0 = r * run, t1 = t0 + run < T ? t0 + run : T;
        int64_t t = t0;
        while (t < t1) {
            int64_t e = t + 1;
            while (e < t1 && b->seq_ids[e] == b->seq_ids[t] && b->positions[e] == b->positions[t] + (e - t))
                e++;
            if (e - t == 1)
                hy_attend(kv, s->q + t * nh * D, nh, b->block_tables[b->seq_ids[t]], b->positions[t] + 1, scores,
                          s->att + t * nh * D);
            else
                hy_attend_multi(kv, s->q + t * nh * D, (int32_t)(e - t), nh, b->block_tables[b->seq_ids[t]],
                                b->positions[t] + 1, scores, s->att + t * nh * D);
            t = e;
        }
    }
}

/* Attention sub-block without the residual add: s->tmp[T, H] = o_proj(attn(norm(x))) for the T rows
 * of batch b (rounded in bf16 mode). With ranks, this rank's heads only (shard.h), the o_proj output
 * put together over the attention TP group (exact: head outputs gathered, o_proj rows gathered; sum:
 * partials added in rank order). */
static void attn_core(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b, const float *x,
                      struct hy_forward_scratch *s)
{
    const struct hy_model_config *c = &m->cfg;
    const struct hy_layer *ly = &m->layers[L];
    struct hy_model_dist *d = m->dist;
    const int64_t T = b->n_tokens, H = c->hidden_size, D = c->head_dim, nh = d ? d->nh : c->num_attention_heads,
                  nkv = d ? d->nkv : c->num_key_value_heads;
    hy_rmsnorm(s->a, x, ly->input_norm, T, H, c->rms_norm_eps);
    maybe_round(m, s->a, T * H);
    if (grouped_on(m, T)) { /* q, k, v in one parallel region: row bands of all three, one barrier */
        const struct hy_tensor *Ws[3] = {&ly->wq, &ly->wk, &ly->wv};
        float *ys[3] = {s->q, s->k, s->v};
        int64_t band[3], nb[3];
        const int64_t pass_bytes = hy_tensor_bytes(Ws[0]) + hy_tensor_bytes(Ws[1]) + hy_tensor_bytes(Ws[2]);
        for (int i = 0; i < 3; i++) {
            band[i] = hy_task_rows(hy_task_row_bytes(Ws[i]), pass_bytes, BAND_MIN);
            nb[i] = bands(Ws[i]->rows, band[i]);
        }
        const int64_t n_tasks = nb[0] + nb[1] + nb[2];
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t task = 0; task < n_tasks; task++) {
            const int i = task < nb[0] ? 0 : task < nb[0] + nb[1] ? 1 : 2;
            const int64_t r0 = (task - (i == 0 ? 0 : i == 1 ? nb[0] : nb[0] + nb[1])) * band[i], N = Ws[i]->rows;
            linear_rows(m, ys[i] + r0, N, s->a, T, Ws[i], r0, r0 + band[i] < N ? r0 + band[i] : N);
        }
    } else {
        linear(m, s->q, s->a, T, &ly->wq);
        linear(m, s->k, s->a, T, &ly->wk);
        linear(m, s->v, s->a, T, &ly->wv);
    }
    maybe_round(m, s->q, T * nh * D);
    maybe_round(m, s->k, T * nkv * D);
    maybe_round(m, s->v, T * nkv * D);
    if (ly->q_norm) { /* QK-norm per head, before RoPE (spec §2.2) */
        hy_rmsnorm(s->q, s->q, ly->q_norm, T * nh, D, c->rms_norm_eps);
        hy_rmsnorm(s->k, s->k, ly->k_norm, T * nkv, D, c->rms_norm_eps);
    }
    for (int64_t t = 0; t < T; t++) {
        hy_rope(s->q + t * nh * D, nh, D, b->positions[t], m->inv_freq, c->rope_interleaved);
        hy_rope(s->k + t * nkv * D, nkv, D, b->positions[t], m->inv_freq, c->rope_interleaved);
    }
    maybe_round(m, s->q, T * nh * D);
    maybe_round(m, s->k, T * nkv * D);
    const struct hy_kv_view view = hy_kv_cache_view(kv, L);
    hy_kv_write_batch(&view, T, b->slot_mapping, s->k, s->v);
    int32_t max_ctx = 1;
    for (int64_t t = 0; t < T; t++)
        if (b->positions[t] + 1 > max_ctx)
            max_ctx = b->positions[t] + 1;
    if (T == 1) { /* decode: the attention kernel splits the heads over the threads itself (a parallel
                     region opened inside an inactive one would start a new thread team every call) */
        hy_attend(&view, s->q, (int32_t)nh, b->block_tables[b->seq_ids[0]], b->positions[0] + 1, s->scores, s->att);
    } else {
#pragma omp parallel
        attend_runs(&view, b, s, (int32_t)nh, D);
    }
    maybe_round(m, s->att, T * nh * D);
    if (d && d->par.attn_tp_size > 1) {
        if (d->par.enable_sp) { /* sequence parallel: head outputs to token slices, o_proj whole, rows gathered */
            const int n = hy_comm_size(d->attn), me = hy_comm_rank(d->attn);
            const int64_t w = nh * D, W = (int64_t)c->num_attention_heads * D;
            int64_t lo, cnt, my_lo, my_n;
            size_t sc[HY_DIST_MAX_RANKS], rc[HY_DIST_MAX_RANKS], gc[HY_DIST_MAX_RANKS];
            hy_part(T, n, me, &my_lo, &my_n);
            for (int r = 0; r < n; r++) {
                hy_part(T, n, r, &lo, &cnt);
                sc[r] = (size_t)(cnt * w) * sizeof(float);
                rc[r] = (size_t)(my_n * w) * sizeof(float);
                gc[r] = (size_t)(cnt * H) * sizeof(float);
            }
            float *rows = hy_dist_buf(d, 8, (size_t)(my_n * W));
            if (!rows)
                dist_ok(-1);
            dist_ok(hy_comm_alltoallv(d->attn, s->att, sc, s->q, rc));
            for (int r = 0; r < n; r++) /* rank r's heads are columns [r*w, (r+1)*w) */
                for (int64_t t = 0; t < my_n; t++)
                    memcpy(rows + t * W + r * w, s->q + ((int64_t)r * my_n + t) * w, (size_t)w * sizeof(float));
            linear(m, s->a, rows, my_n, &ly->wo);
            dist_ok(hy_comm_allgatherv(d->attn, s->a, s->tmp, gc));
        } else if (d->sum) {
            linear(m, s->tmp, s->att, T, &ly->wo);
            dist_ok(hy_fd_sum_rows(d, d->attn, s->tmp, T, H, s->tmp));
        } else { /* all heads' outputs (into q, free now), then this rank's o_proj rows, gathered */
            dist_ok(hy_fd_gather_cols(d, d->attn, s->att, T, (int64_t)c->num_attention_heads * D, s->q));
            linear(m, s->a, s->q, T, &ly->wo);
            dist_ok(hy_fd_gather_cols(d, d->attn, s->a, T, H, s->tmp));
        }
    } else {
        linear(m, s->tmp, s->att, T, &ly->wo);
    }
    maybe_round(m, s->tmp, T * H);
}

/* Attention sub-block: x[T,H] += o_proj(attn(norm(x))). With attention-DP groups, each group runs
 * its own sequences (the sub-batch hy_model_forward prepared in m->dist) and the groups' output rows
 * are gathered; a group with no tokens this step runs none (a dummy step) but joins the gather. */
static void attention_forward(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b,
                              float *x, struct hy_forward_scratch *s)
{
    struct hy_model_dist *d = m->dist;
    const int64_t T = b->n_tokens, H = m->cfg.hidden_size;
    const float *delta = s->tmp;
    if (d && d->dp_size > 1) {
        const int64_t n = d->n_loc;
        float *xs = hy_dist_buf(d, 4, (size_t)(n * H)), *all = hy_dist_buf(d, 5, (size_t)(T * H));
        if (!xs || !all)
            dist_ok(-1);
        for (int64_t i = 0; i < n; i++)
            memcpy(xs + i * H, x + (int64_t)d->loc_row[i] * H, (size_t)H * sizeof(float));
        const struct hy_batch sb = {(int32_t)n, NULL, d->loc_pos, d->loc_slot, d->loc_seq, b->block_tables, 0, NULL, 0};
        if (n > 0)
            attn_core(m, kv, L, &sb, xs, s);
        dist_ok(hy_fd_dp_rows(d, d->grp, T, H, s->tmp, all));
        delta = all;
    } else {
        attn_core(m, kv, L, b, x, s);
    }
    for (int64_t i = 0; i < T * H; i++)
        x[i] += delta[i];
    maybe_round(m, x, T * H);
}

/* One decoder block (pre-norm attention + pre-norm dense MLP or MoE), x[T,H] updated in place. */
static void layer_forward(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b, float *x,
                          struct hy_forward_scratch *s)
{
    const struct hy_model_config *c = &m->cfg;
    const struct hy_layer *ly = &m->layers[L];
    const int64_t T = b->n_tokens, H = c->hidden_size;
    struct hy_model_prof *prof = prof_of(m);
    double t0 = prof_start(prof);
    attention_forward(m, kv, L, b, x, s);
    prof_stop(prof, HY_STAGE_ATTENTION, t0);
    hy_rmsnorm(s->a, x, ly->post_norm, T, H, c->rms_norm_eps);
    maybe_round(m, s->a, T * H);
    if (ly->is_moe) {
        hy_fwd_moe(m, ly, s->a, T, s);
    } else {
        t0 = prof_start(prof);
        hy_fwd_ffn(m, &ly->mlp, s->a, T, c->intermediate_size, s->ff_a, s->ff_b, s->y);
        prof_stop(prof, HY_STAGE_DENSE_MLP, t0);
    }
    for (int64_t i = 0; i < T * H; i++)
        x[i] += s->y[i];
    maybe_round(m, x, T * H);
}

static int check_batch(const struct hy_model *m, const struct hy_kv_cache *kv, const struct hy_batch *b)
{
    const int64_t slots = (int64_t)kv->n_blocks * kv->block_size;
    if (b->n_tokens <= 0)
        return hy_err_set("forward: empty batch");
    for (int32_t t = 0; t < b->n_tokens; t++) {
        if (b->token_ids[t] < 0 || b->token_ids[t] >= m->cfg.vocab_size)
            return hy_err_set("token id %d is outside the vocabulary [0, %d)", b->token_ids[t], m->cfg.vocab_size);
        if (b->positions[t] < 0)
            return hy_err_set("negative position %d", b->positions[t]);
        if (b->slot_mapping[t] < 0 || b->slot_mapping[t] >= slots)
            return hy_err_set("slot %lld outside the KV cache (%lld slots)", (long long)b->slot_mapping[t],
                              (long long)slots);
    }
    for (int32_t i = 0; i < b->n_logits; i++)
        if (b->logits_rows[i] < 0 || b->logits_rows[i] >= b->n_tokens)
            return hy_err_set("logits row %d outside the batch", b->logits_rows[i]);
    return 0;
}

/* Final norm (given weight) -> optional hidden copy -> lm_head logits for the requested rows. */
static int head_forward(const struct hy_model *m, const float *x, const float *norm_w, const struct hy_batch *b,
                        float *logits, float *hidden_out, struct hy_forward_scratch *s)
{
    const int64_t T = b->n_tokens, H = m->cfg.hidden_size;
    hy_rmsnorm(s->a, x, norm_w, T, H, m->cfg.rms_norm_eps);
    maybe_round(m, s->a, T * H);
    if (hidden_out)
        memcpy(hidden_out, s->a, (size_t)(T * H) * sizeof(float));
    struct hy_model_dist *d = m->dist;
    if (!(logits || (d && d->want_logits)) || b->n_logits == 0 || (d && !d->lm_compute))
        return 0;
    float *rows = s->head;
    for (int32_t i = 0; i < b->n_logits; i++)
        memcpy(rows + (int64_t)i * H, s->a + (int64_t)b->logits_rows[i] * H, (size_t)H * sizeof(float));
    struct hy_model_prof *prof = prof_of(m);
    double t0 = prof_start(prof);
    if (d && d->par.lmhead_tp_size > 1) { /* vocabulary slices, gathered on the leader (world rank 0) */
        /* in chunks of rows of at most 1 GiB of logits (MPI counts are ints; every rank chunks alike) */
        const int64_t NL = b->n_logits, V = m->cfg.vocab_size,
                      step = (INT64_C(1) << 30) / (V * 4) > 0 ? (INT64_C(1) << 30) / (V * 4) : 1;
        const int n = hy_comm_size(d->lmhead);
        size_t counts[HY_DIST_MAX_RANKS];
        for (int64_t r0 = 0; r0 < NL; r0 += step) {
            const int64_t nl = NL - r0 < step ? NL - r0 : step;
            float *part = hy_dist_buf(d, 3, (size_t)(nl * d->lnv)), *all = hy_dist_buf(d, 4, (size_t)(nl * V));
            if (!part || !all)
                dist_ok(-1);
            linear(m, part, rows + r0 * H, nl, &m->lm_head);
            for (int r = 0; r < n; r++) {
                int64_t lo, w;
                hy_part(V, n, r, &lo, &w);
                counts[r] = (size_t)(nl * w) * sizeof(float);
            }
            dist_ok(hy_comm_gatherv(d->lmhead, part, all, counts, 0));
            if (!logits)
                continue;
            const float *src = all;
            for (int r = 0; r < n; r++) {
                int64_t lo, w;
                hy_part(V, n, r, &lo, &w);
                for (int64_t i = 0; i < nl; i++)
                    memcpy(logits + (r0 + i) * V + lo, src + i * w, (size_t)w * sizeof(float));
                src += nl * w;
            }
        }
    } else if (logits) {
        linear(m, logits, rows, b->n_logits, &m->lm_head); /* fp32 logits (enable_lm_head_fp32) */
    }
    prof_stop(prof, HY_STAGE_LM_HEAD, t0);
    return 0;
}

/* The attention-DP sub-batch of this rank's group for batch b (m->dist): token groups and the
 * positions, slots and sequences of its own tokens. */
static int dist_prepare(struct hy_model *m, const struct hy_batch *b)
{
    struct hy_model_dist *d = m->dist;
    const int64_t T = b->n_tokens;
    d->steps++;
    if (d->dp_size == 1)
        return 0;
    if (d->loc_cap < T) {
        free(d->grp);
        free(d->loc_row);
        free(d->loc_pos);
        free(d->loc_seq);
        free(d->loc_slot);
        d->grp = malloc((size_t)T * sizeof(int32_t));
        d->loc_row = malloc((size_t)T * sizeof(int32_t));
        d->loc_pos = malloc((size_t)T * sizeof(int32_t));
        d->loc_seq = malloc((size_t)T * sizeof(int32_t));
        d->loc_slot = malloc((size_t)T * sizeof(int64_t));
        d->loc_cap = T;
        if (!d->grp || !d->loc_row || !d->loc_pos || !d->loc_seq || !d->loc_slot) {
            d->loc_cap = 0;
            return hy_err_set("dist: out of memory for the sub-batch of %lld tokens", (long long)T);
        }
    }
    hy_fd_token_groups(d, T, b->seq_ids, b->block_tables, d->grp);
    d->n_loc = 0;
    for (int64_t t = 0; t < T; t++)
        if (d->grp[t] == d->dp_rank) {
            d->loc_row[d->n_loc] = (int32_t)t;
            d->loc_pos[d->n_loc] = b->positions[t];
            d->loc_seq[d->n_loc] = b->seq_ids[t];
            d->loc_slot[d->n_loc++] = b->slot_mapping[t];
        }
    if (d->n_loc == 0) {
        d->dummy_steps++;
        hy_dist_stats()->dummy_steps++;
    }
    return 0;
}

int hy_model_forward(struct hy_model *m, struct hy_kv_cache *kv, const struct hy_batch *b, float *logits,
                     float *hidden_out)
{
    if (check_batch(m, kv, b))
        return -1;
    if (m->dist && hy_dist_check_tokens(m, b->n_tokens))
        return -1;
    if (m->dist) { /* the leader sends the step to the other ranks first (lockstep.h) */
        if (hy_lockstep_send_forward(m, kv, b, NULL, logits != NULL) || dist_prepare(m, b))
            hy_dist_abort(1, "forward: %s", hy_err_msg());
        hy_dist_step_begin();
    }
    struct hy_model_prof *prof = prof_of(m);
    double before[HY_STAGE_COUNT], t0 = prof_start(prof);
    if (prof)
        memcpy(before, prof->sec, sizeof(before));
    const int64_t T = b->n_tokens;
    struct hy_forward_scratch *s = scratch_for(m, b);
    if (!s && m->dist) /* the other ranks are already in this step: end the job instead of leaving them */
        hy_dist_abort(1, "forward: %s", hy_err_msg());
    if (!s)
        return -1;
    float *x = s->x;
    int rc;
    if (m->cfg.arch == HY_ARCH_HY_V4) { /* hc_mult copies of the embedding, the layers, HC-head (spec §2) */
        const int64_t H = m->cfg.hidden_size, C = m->cfg.v4.hc_mult;
        embed_rows(m, b->token_ids, T, s->ff_x);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < C; i++)
                memcpy(x + (t * C + i) * H, s->ff_x + t * H, (size_t)H * sizeof(float));
        for (int L = 0; L < m->cfg.num_hidden_layers; L++)
            hy_v4_layer(m, kv, L, b, x, s);
        hy_v4_hc_head(m, x, T, s, s->ff_x);
        rc = head_forward(m, s->ff_x, m->final_norm, b, logits, hidden_out, s);
    } else {
        embed_rows(m, b->token_ids, T, x);
        for (int L = 0; L < m->cfg.num_hidden_layers; L++)
            layer_forward(m, kv, L, b, x, s);
        rc = head_forward(m, x, m->final_norm, b, logits, hidden_out, s);
    }
    prof_finish(prof, t0, before, T);
    if (m->dist)
        hy_dist_step_end();
    return rc;
}

int64_t hy_model_stream_width(const struct hy_model *m)
{
    return (int64_t)m->cfg.hidden_size * (m->cfg.arch == HY_ARCH_HY_V4 ? m->cfg.v4.hc_mult : 1);
}

int hy_model_forward_layers(struct hy_model *m, struct hy_kv_cache *kv, const struct hy_batch *b, float *x,
                            int32_t from, int32_t to, float *hidden_out)
{
    const int32_t n_layers = m->cfg.num_hidden_layers;
    if (from < 0 || from > to || to > n_layers)
        return hy_err_set("forward: layers [%d, %d) outside [0, %d]", from, to, n_layers);
    if (m->dist)
        return hy_err_set("forward: a range of layers (calibration) runs in one process only, not under mpirun");
    if (check_batch(m, kv, b))
        return -1;
    struct hy_forward_scratch *s = scratch_for(m, b);
    if (!s)
        return -1;
    const int64_t T = b->n_tokens, H = m->cfg.hidden_size;
    const int v4 = m->cfg.arch == HY_ARCH_HY_V4;
    const int64_t C = v4 ? m->cfg.v4.hc_mult : 1;
    if (from == 0) { /* hy_v4: hc_mult copies of the embedding, as hy_model_forward */
        embed_rows(m, b->token_ids, T, s->ff_x);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < C; i++)
                memcpy(x + (t * C + i) * H, s->ff_x + t * H, (size_t)H * sizeof(float));
    }
    for (int L = from; L < to; L++)
        (v4 ? hy_v4_layer : layer_forward)(m, kv, L, b, x, s);
    if (to < n_layers || !hidden_out)
        return 0;
    if (!v4)
        return head_forward(m, x, m->final_norm, b, NULL, hidden_out, s);
    hy_v4_hc_head(m, x, T, s, s->ff_x);
    return head_forward(m, s->ff_x, m->final_norm, b, NULL, hidden_out, s);
}

int hy_model_forward_mtp(struct hy_model *m, struct hy_kv_cache *kv, const struct hy_batch *b, const float *hidden_in,
                         float *logits, float *hidden_out)
{
    if (!m->has_mtp)
        return hy_err_set("this model has no MTP layer");
    if (check_batch(m, kv, b))
        return -1;
    if (m->dist && hy_dist_check_tokens(m, b->n_tokens))
        return -1;
    if (m->dist) {
        if (hy_lockstep_send_forward(m, kv, b, hidden_in, logits != NULL) || dist_prepare(m, b))
            hy_dist_abort(1, "forward: %s", hy_err_msg());
        hy_dist_step_begin();
    }
    struct hy_model_prof *prof = prof_of(m);
    double before[HY_STAGE_COUNT], t0 = prof_start(prof);
    if (prof)
        memcpy(before, prof->sec, sizeof(before));
    const struct hy_model_config *c = &m->cfg;
    const int L = c->num_hidden_layers;
    const struct hy_layer *ly = &m->layers[L];
    const int64_t T = b->n_tokens, H = c->hidden_size;
    struct hy_forward_scratch *s = scratch_for(m, b);
    if (!s && m->dist) /* the other ranks are already in this step: end the job instead of leaving them */
        hy_dist_abort(1, "forward: %s", hy_err_msg());
    if (!s)
        return -1;
    float *x = s->x;
    /* u = eh_proj · [enorm(embed(tok)); hnorm(h)]  (embedding first, spec §4.1) */
    embed_rows(m, b->token_ids, T, x);
    for (int64_t t = 0; t < T; t++) {
        if (b->mtp_zero_pos0 && b->positions[t] == 0)
            memset(x + t * H, 0, (size_t)H * sizeof(float));
        hy_rmsnorm(s->tmp + t * 2 * H, x + t * H, ly->enorm, 1, H, c->rms_norm_eps);
        hy_rmsnorm(s->tmp + t * 2 * H + H, hidden_in + t * H, ly->hnorm, 1, H, c->rms_norm_eps);
    }
    maybe_round(m, s->tmp, T * 2 * H);
    linear(m, x, s->tmp, T, &ly->eh_proj);
    maybe_round(m, x, T * H);
    (c->arch == HY_ARCH_HY_V4 ? hy_v4_plain_block : layer_forward)(m, kv, L, b, x, s);
    int rc = head_forward(m, x, ly->final_norm, b, logits, hidden_out, s);
    prof_finish(prof, t0, before, T);
    if (m->dist)
        hy_dist_step_end();
    return rc;
}
