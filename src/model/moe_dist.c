/* moe_dist.c - the MoE block and the split MLPs of a multi-rank forward pass (shard.h): routed experts
 * on their owner ranks, the shared expert overlapped with the exchange, and the combines (exact: every
 * (token, expert) output summed per token in ascending expert id, as one process does; sum: per-rank
 * partials added in rank order). */
#include "model/moe_dist.h"

#include "model/exchange.h"

#include <stdlib.h>
#include <string.h>

/* A SwiGLU MLP split over the ranks of c by intermediate width (shard.c: gate/up rows; down by output
 * rows in the exact combine, by input columns in the sum combine), y[T, H] = the whole MLP. I is the
 * full intermediate width. Exact: the hidden columns are gathered, each rank computes its output rows
 * of down_proj and those are gathered (every value is the one-rank value). */
void hy_moe_dist_ffn(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, int64_t I,
                     struct hy_comm *c, float *ga, float *gb, float *y)
{
    struct hy_model_dist *d = m->dist;
    const int64_t H = m->cfg.hidden_size, Il = e->gate.rows;
    linear(m, ga, x, T, &e->gate);
    linear(m, gb, x, T, &e->up);
    maybe_round(m, ga, T * Il);
    maybe_round(m, gb, T * Il);
    swiglu_clamp(ga, gb, T * Il, e->clamp); /* elementwise: the same on a slice of the intermediate width */
    hy_silu_mul(ga, ga, gb, T * Il);
    maybe_round(m, ga, T * Il);
    if (d->sum) {
        linear(m, y, ga, T, &e->down);
        dist_ok(hy_exchange_sum_rows(d, c, y, T, H, y));
    } else {
        float *full = hy_shard_buf(d, HY_SLOT_FULL, (size_t)(T * I)),
              *part = hy_shard_buf(d, HY_SLOT_PART, (size_t)(T * H));
        if (!full || !part)
            dist_ok(-1);
        dist_ok(hy_exchange_gather_cols(d, c, ga, T, I, full));
        linear(m, part, full, T, &e->down);
        dist_ok(hy_exchange_gather_cols(d, c, part, T, H, y));
    }
    maybe_round(m, y, T * H);
}

/* Rank of the world that owns expert e (its expert-parallel group's first rank; with moe_tp > 1 the
 * moe_tp ranks of the group each hold a slice of it). */
static int expert_owner(const struct hy_model_dist *d, int32_t e)
{
    return (e / d->ne) * d->moe_tp;
}

/* Routed experts of this rank over all T tokens (s->sel / s->selw filled, every rank the same):
 * out[n_loc, H] = the unweighted outputs of the local (expert, token) pairs in (expert ascending,
 * token ascending) order; returns n_loc. */
static int64_t routed_local(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
                            struct hy_forward_scratch *s, float **out_rows)
{
    struct hy_model_dist *d = m->dist;
    const int64_t H = m->cfg.hidden_size, K = m->cfg.num_experts_per_tok;
    int64_t n = 0;
    for (int64_t i = 0; i < T * K; i++)
        n += s->sel[i] >= d->e0 && s->sel[i] < d->e0 + d->ne;
    float *X = hy_shard_buf(d, HY_SLOT_ROWS, (size_t)(n * H)), *OUT = hy_shard_buf(d, HY_SLOT_OUT, (size_t)(n * H));
    if (!X || !OUT)
        dist_ok(-1);
    int64_t r = 0;
    for (int32_t e = d->e0; e < d->e0 + d->ne; e++) {
        const int64_t r0 = r;
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < K; j++)
                if (s->sel[t * K + j] == e)
                    memcpy(X + (r++) * H, x + t * H, (size_t)H * sizeof(float));
        if (r > r0 && d->moe_tp > 1 && !d->sum) /* the expert split over its moe_tp ranks, outputs gathered */
            hy_moe_dist_ffn(m, &ly->experts[e], X + r0 * H, r - r0, m->cfg.moe_intermediate_size, d->moe, s->ff_a,
                            s->ff_b, OUT + r0 * H);
        else if (r > r0)
            hy_layers_mlp(m, &ly->experts[e], X + r0 * H, r - r0, s->ff_a, s->ff_b, OUT + r0 * H);
    }
    *out_rows = OUT;
    return n;
}

/* y[T, H] += Σ w * rows over the (expert, token) pairs of tokens [t0, t1), visited by expert
 * ascending then token ascending: rows holds exactly those pairs, in that order.
 * Per token the additions run in ascending expert id, as the one-rank loop does. */
static void add_pairs(const struct hy_model *m, const struct hy_forward_scratch *s, int64_t t0, int64_t t1,
                      const float *rows, float *y, int64_t ldy_t0)
{
    const int64_t H = m->cfg.hidden_size, E = m->cfg.num_experts, K = m->cfg.num_experts_per_tok;
    int64_t r = 0;
    for (int64_t e = 0; e < E; e++)
        for (int64_t t = t0; t < t1; t++)
            for (int64_t j = 0; j < K; j++)
                if (s->sel[t * K + j] == e) {
                    const float w = s->selw[t * K + j], *er = rows + (r++) * H;
                    float *yr = y + (t - ldy_t0) * H;
                    for (int64_t q = 0; q < H; q++)
                        yr[q] += w * er[q];
                }
}

/* The MoE block over the ranks (shard.h): routed experts on their owners, the shared expert computed
 * while the first exchange is in flight, then combined into s->y (rounded as moe_forward does).
 * Exact + all-gather: every rank receives every pair's output and sums per token in expert order.
 * Exact + all-to-all: pairs go to their token's home rank (hy_shard_part of T), summed there, then the
 * token rows are gathered. Sum + all-gather: per-rank partials reduced in rank order
 * (hy_exchange_sum_rows). Sum + all-to-all: partials only for the tokens a rank touched, to the home rank,
 * added in rank order, then gathered. */
void hy_moe_dist_moe(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
                     struct hy_forward_scratch *s)
{
    struct hy_model_dist *d = m->dist;
    const struct hy_model_config *c = &m->cfg;
    const int64_t H = c->hidden_size, K = c->num_experts_per_tok;
    const int n = d->size, me = d->rank;
    size_t sc[HY_SHARD_MAX_RANKS], rc[HY_SHARD_MAX_RANKS];
    float *OUT;
    const int64_t n_loc = routed_local(m, ly, x, T, s, &OUT);
    struct hy_comm_req req = {0};
    float *RECV = NULL, *SEND = NULL;
    int64_t h0, hn; /* this rank's home tokens */
    hy_shard_part(T, n, me, &h0, &hn);
    memset(s->y, 0, (size_t)(T * H) * sizeof(float));
    if (!d->sum) {
        for (int r = 0; r < n; r++)
            sc[r] = rc[r] = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < K; j++) {
                const int o = expert_owner(d, s->sel[t * K + j]);
                int home = 0;
                while (t >= (int64_t)T * (home + 1) / n)
                    home++;
                if (d->dispatch == HY_MOE_DISPATCH_AG) {
                    rc[o] += (size_t)H * sizeof(float);
                } else {
                    if (o == me)
                        sc[home] += (size_t)H * sizeof(float);
                    if (home == me)
                        rc[o] += (size_t)H * sizeof(float);
                }
            }
        int64_t tot = 0;
        for (int r = 0; r < n; r++)
            tot += (int64_t)(rc[r] / sizeof(float));
        RECV = hy_shard_buf(d, HY_SLOT_XCHG, (size_t)tot);
        if (!RECV)
            dist_ok(-1);
        if (d->dispatch == HY_MOE_DISPATCH_AG) {
            dist_ok(hy_comm_iallgatherv(d->world, OUT, RECV, rc, &req));
        } else { /* regroup the local pairs by destination: home-slice by home-slice, each in (e, t) order */
            SEND = hy_shard_buf(d, HY_SLOT_SEND, (size_t)(n_loc * H));
            if (!SEND)
                dist_ok(-1);
            int64_t w = 0;
            for (int hr = 0; hr < n; hr++) {
                int64_t a0, an, r = 0;
                hy_shard_part(T, n, hr, &a0, &an);
                for (int32_t e = d->e0; e < d->e0 + d->ne; e++)
                    for (int64_t t = 0; t < T; t++)
                        for (int64_t j = 0; j < K; j++)
                            if (s->sel[t * K + j] == e) {
                                if (t >= a0 && t < a0 + an)
                                    memcpy(SEND + (w++) * H, OUT + r * H, (size_t)H * sizeof(float));
                                r++;
                            }
            }
            dist_ok(hy_comm_ialltoallv(d->world, SEND, sc, RECV, rc, &req));
        }
    }
    struct hy_model_prof *prof = prof_of(m);
    double t0 = prof_start(prof);
    if (ly->shared.gate.data) { /* overlapped with the exchange above */
        hy_comm_test(&req);
        hy_layers_ffn(m, &ly->shared, x, T, (int64_t)c->moe_intermediate_size * c->num_shared_experts, s->ff_a, s->ff_b,
                      s->tmp);
        hy_comm_test(&req);
    }
    prof_stop(prof, HY_STAGE_SHARED, t0);
    if (!d->sum && d->dispatch == HY_MOE_DISPATCH_AG) {
        dist_ok(hy_comm_wait(&req));
        add_pairs(m, s, 0, T, RECV, s->y, 0);
    } else if (!d->sum) {
        dist_ok(hy_comm_wait(&req));
        float *home = hy_shard_buf(d, HY_SLOT_HOME, (size_t)(hn * H));
        if (!home)
            dist_ok(-1);
        memset(home, 0, (size_t)(hn * H) * sizeof(float));
        add_pairs(m, s, h0, h0 + hn, RECV, home, h0);
        for (int r = 0; r < n; r++) {
            int64_t a0, an;
            hy_shard_part(T, n, r, &a0, &an);
            sc[r] = (size_t)(an * H) * sizeof(float);
        }
        dist_ok(hy_comm_allgatherv(d->world, home, s->y, sc));
    } else { /* partial sums of this rank's pairs, per token in expert order */
        float *P = hy_shard_buf(d, HY_SLOT_SEND, (size_t)(T * H));
        if (!P)
            dist_ok(-1);
        memset(P, 0, (size_t)(T * H) * sizeof(float));
        {
            int64_t r = 0;
            for (int32_t e = d->e0; e < d->e0 + d->ne; e++)
                for (int64_t t = 0; t < T; t++)
                    for (int64_t j = 0; j < K; j++)
                        if (s->sel[t * K + j] == e) {
                            const float w = s->selw[t * K + j], *er = OUT + (r++) * H;
                            for (int64_t q = 0; q < H; q++)
                                P[t * H + q] += w * er[q];
                        }
        }
        if (d->dispatch == HY_MOE_DISPATCH_AG) {
            dist_ok(hy_exchange_sum_rows(d, d->world, P, T, H, s->y));
        } else { /* only the tokens each rank touched travel */
            uint8_t *touch = (uint8_t *)hy_shard_buf(d, HY_SLOT_HOME, (size_t)(T * n + 3) / 4); /* [n][T] */
            if (!touch)
                dist_ok(-1);
            memset(touch, 0, (size_t)(T * n));
            for (int64_t t = 0; t < T; t++)
                for (int64_t j = 0; j < K; j++) {
                    const int o = expert_owner(d, s->sel[t * K + j]);
                    for (int q = 0; q < d->moe_tp; q++)
                        touch[(int64_t)(o + q) * T + t] = 1;
                }
            float *S2 = hy_shard_buf(d, HY_SLOT_ROWS, (size_t)(T * H)),
                  *R2 = hy_shard_buf(d, HY_SLOT_XCHG, (size_t)(n * hn * H)),
                  *home = hy_shard_buf(d, HY_SLOT_OUT, (size_t)(hn * H));
            if (!S2 || !R2 || !home)
                dist_ok(-1);
            int64_t w = 0;
            for (int hr = 0; hr < n; hr++) {
                int64_t a0, an, cnt = 0, cr = 0;
                hy_shard_part(T, n, hr, &a0, &an);
                for (int64_t t = a0; t < a0 + an; t++)
                    if (touch[(int64_t)me * T + t]) {
                        memcpy(S2 + (w++) * H, P + t * H, (size_t)H * sizeof(float));
                        cnt++;
                    }
                for (int64_t t = h0; t < h0 + hn; t++)
                    cr += touch[(int64_t)hr * T + t];
                sc[hr] = (size_t)(cnt * H) * sizeof(float);
                rc[hr] = (size_t)(cr * H) * sizeof(float);
            }
            dist_ok(hy_comm_alltoallv(d->world, S2, sc, R2, rc));
            memset(home, 0, (size_t)(hn * H) * sizeof(float));
            const float *src = R2;
            for (int r = 0; r < n; r++)
                for (int64_t t = h0; t < h0 + hn; t++)
                    if (touch[(int64_t)r * T + t]) {
                        for (int64_t q = 0; q < H; q++)
                            home[(t - h0) * H + q] += src[q];
                        src += H;
                    }
            for (int r = 0; r < n; r++) {
                int64_t a0, an;
                hy_shard_part(T, n, r, &a0, &an);
                sc[r] = (size_t)(an * H) * sizeof(float);
            }
            dist_ok(hy_comm_allgatherv(d->world, home, s->y, sc));
        }
    }
    maybe_round(m, s->y, T * H);
    if (ly->shared.gate.data) {
        for (int64_t i = 0; i < T * H; i++)
            s->y[i] += s->tmp[i];
        maybe_round(m, s->y, T * H);
    }
}
