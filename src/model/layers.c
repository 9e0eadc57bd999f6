/* layers.c - the building blocks both architectures' layers are made of (layers.h): the activations,
 * embedding, the dense MLP / SwiGLU bands, the router with top-k and renormalisation, grouped routed
 * experts, the shared expert, attention over runs of one sequence, the final norm + lm_head, and the
 * profiling stages. Multi-rank parts go through the shard (shard.h, moe_dist.c, exchange.c).
 */
#include "model/layers.h"

#include "model/arch.h"
#include "model/shard.h"

#include "base/assert.h"
#include "base/err.h"
#include "base/timing.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"
#include "kernels/task_rows.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

void hy_layers_scratch_free(struct hy_forward_scratch *s)
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
    if (s->arch_free)
        s->arch_free(s->arch);
    free(s);
}

struct hy_forward_scratch *hy_layers_scratch_new(const struct hy_model *m, int64_t T, int32_t max_ctx, int32_t n_thr)
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
    const int64_t streams = m->arch->streams(c); /* hy_v4: hc_mult residual streams */
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
    if (m->arch->scratch_new) {
        s->arch_free = m->arch->scratch_free;
        if (!(s->arch = m->arch->scratch_new(m, T, max_ctx)))
            g_fail = 1;
    }
    if (!s->x || !s->head || !s->scores || !s->a || !s->q || !s->k || !s->v || !s->att || !s->tmp || !s->ff_a ||
        !s->ff_b || !s->ff_x || !s->y || !s->rlog || !s->sel || !s->selw || !s->rows || !s->roww || g_fail) {
        hy_layers_scratch_free(s);
        return NULL;
    }
    return s;
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

void hy_layers_prof_finish(struct hy_model_prof *p, double t0, const double *before, int64_t T)
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

void hy_layers_embed_local(const struct hy_model *m, const int32_t *ids, int64_t T, float *x)
{
    const int64_t H = m->cfg.hidden_size;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < H; i++)
            x[t * H + i] = hy_tensor_get(&m->embed, ids[t], i);
}

void hy_layers_embed(const struct hy_model *m, const int32_t *ids, int64_t T, float *x)
{
    m->shard_ops->embed(m, ids, T, x);
}

void hy_layers_mlp(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, float *ga, float *gb,
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

void hy_layers_linear_bands(const struct hy_model *m, const float *x, int64_t T, int n,
                            const struct hy_tensor *const *Ws, float *const *ys)
{
    HY_ASSERT(n >= 1 && n <= 4);
    int64_t band[4], nb[4], pass_bytes = 0, n_tasks = 0;
    for (int i = 0; i < n; i++)
        pass_bytes += hy_tensor_bytes(Ws[i]);
    for (int i = 0; i < n; i++) {
        band[i] = hy_task_rows(hy_task_row_bytes(Ws[i]), pass_bytes, BAND_MIN);
        nb[i] = bands(Ws[i]->rows, band[i]);
        n_tasks += nb[i];
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t task = 0; task < n_tasks; task++) {
        int i = 0;
        int64_t first = 0; /* the first task of matrix i */
        while (task >= first + nb[i])
            first += nb[i++];
        const int64_t r0 = (task - first) * band[i], N = Ws[i]->rows;
        linear_rows(m, ys[i] + r0, N, x, T, Ws[i], r0, r0 + band[i] < N ? r0 + band[i] : N);
    }
}

/* Phase 1 task: gate and up rows [r0, r1) of every token of the job (one sweep, same input rows in
 * cache), then silu(gate) * up on that band, with the bf16-mode roundings of hy_layers_mlp. */
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
 * values equal hy_layers_mlp's bit for bit. */
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

/* hy_layers_mlp through the grouped pass (one parallel region): same values. */
static void mlp_grouped(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, float *ga,
                        float *gb, float *y)
{
    const struct ffn_job j = {.e = e, .n = T, .x = x, .a = ga, .b = gb, .out = y};
#pragma omp parallel
    ffn_jobs_in_region(m, &j, 1);
}

void hy_layers_ffn_local(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, float *ga,
                         float *gb, float *y)
{
    (grouped_on(m, T) ? mlp_grouped : hy_layers_mlp)(m, e, x, T, ga, gb, y);
}

void hy_layers_ffn(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, int64_t I, float *ga,
                   float *gb, float *y)
{
    m->shard_ops->ffn(m, e, x, T, I, ga, gb, y);
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
 * same order as the per-expert loop of hy_layers_moe, so s->y is bitwise the same. */
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
void hy_layers_moe(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
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
    m->shard_ops->experts(m, ly, x, T, s, t0);
}

void hy_layers_experts_local(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
                             struct hy_forward_scratch *s, double t0)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t H = c->hidden_size, E = c->num_experts, K = c->num_experts_per_tok;
    struct hy_model_prof *prof = prof_of(m);
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
        hy_layers_mlp(m, &ly->experts[e], s->ff_x, n, s->ff_a, s->ff_b, s->tmp);
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
        (grouped_on(m, T) ? mlp_grouped : hy_layers_mlp)(m, &ly->shared, x, T, s->ff_a, s->ff_b, s->tmp);
        for (int64_t i = 0; i < T * H; i++)
            s->y[i] += s->tmp[i];
        maybe_round(m, s->y, T * H);
        prof_stop(prof, HY_STAGE_SHARED, t0);
    }
}

void hy_layers_attend_runs(const struct hy_kv_view *kv, const struct hy_batch *b, struct hy_forward_scratch *s,
                           int32_t nh, int64_t D)
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

int hy_layers_head(const struct hy_model *m, const float *x, const float *norm_w, const struct hy_batch *b,
                   float *logits, float *hidden_out, struct hy_forward_scratch *s)
{
    const int64_t T = b->n_tokens, H = m->cfg.hidden_size;
    hy_rmsnorm(s->a, x, norm_w, T, H, m->cfg.rms_norm_eps);
    maybe_round(m, s->a, T * H);
    if (hidden_out)
        memcpy(hidden_out, s->a, (size_t)(T * H) * sizeof(float));
    if (b->n_logits == 0 || !m->shard_ops->logits_here(m, logits))
        return 0;
    float *rows = s->head;
    for (int32_t i = 0; i < b->n_logits; i++)
        memcpy(rows + (int64_t)i * H, s->a + (int64_t)b->logits_rows[i] * H, (size_t)H * sizeof(float));
    struct hy_model_prof *prof = prof_of(m);
    double t0 = prof_start(prof);
    m->shard_ops->lm_head(m, rows, b->n_logits, logits);
    prof_stop(prof, HY_STAGE_LM_HEAD, t0);
    return 0;
}

/* The one-process implementations of the shard's table (shard.h): nothing is split. */

static const float *attention_local(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b,
                                    const float *x, struct hy_forward_scratch *s, hy_attn_core_fn core)
{
    core(m, kv, L, b, x, s);
    return s->tmp;
}

static void attn_out_local(const struct hy_model *m, const struct hy_tensor *wo, const float *att, int64_t T,
                           int64_t width, struct hy_forward_scratch *s, float *out)
{
    (void)width;
    (void)s;
    linear(m, out, att, T, wo);
}

static void ffn_local(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, int64_t I,
                      float *ga, float *gb, float *y)
{
    (void)I;
    hy_layers_ffn_local(m, e, x, T, ga, gb, y);
}

static int logits_here_local(const struct hy_model *m, const float *logits)
{
    (void)m;
    return logits != NULL;
}

static void lm_head_local(const struct hy_model *m, const float *rows, int64_t n, float *logits)
{
    linear(m, logits, rows, n, &m->lm_head); /* fp32 logits (enable_lm_head_fp32) */
}

static int check_tokens_local(const struct hy_model *m, int64_t T)
{
    (void)m;
    (void)T;
    return 0;
}

static int reserve_local_none(struct hy_model *m, int64_t T)
{
    (void)m;
    (void)T;
    return 0;
}

static int step_local(struct hy_model *m, const struct hy_batch *b)
{
    (void)m;
    (void)b;
    return 0;
}

const struct hy_shard_ops hy_layers_local_ops = {
    .check_tokens = check_tokens_local,
    .reserve = reserve_local_none,
    .step = step_local,
    .embed = hy_layers_embed_local,
    .ffn = ffn_local,
    .experts = hy_layers_experts_local,
    .attention = attention_local,
    .attn_out = attn_out_local,
    .logits_here = logits_here_local,
    .lm_head = lm_head_local,
};
