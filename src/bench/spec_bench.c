/* spec_bench.c - the speculative-decoding measurements of `hyinfer bench latency` (spec_bench.h). */
#include "bench/spec_bench.h"

#include "base/err.h"
#include "base/timing.h"
#include "bench/account.h"
#include "bench/util.h"
#include "engine/executor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Verify-shaped steps on a fresh KV cache: B sequences, prefill ctx0, then `steps` timed steps of n
 * tokens per sequence for n = 1 .. n_max (after one warm-up each), positions advancing by n. */
int hy_bench_spec_verify(struct hy_model *m, enum hy_dtype kv_dtype, int32_t B, int32_t ctx0, int32_t steps,
                         int32_t n_max, uint64_t seed, struct hy_bench_verify *r)
{
    const int32_t bs = 16, V = m->cfg.vocab_size, H = m->cfg.hidden_size;
    int32_t total = ctx0 + 1;
    for (int32_t n = 1; n <= n_max; n++)
        total += (steps + 1) * n;
    total += steps + 1; /* the MTP steps */
    const int32_t bps = (total + bs - 1) / bs, cap = B * (ctx0 > n_max ? ctx0 : n_max);
    struct hy_executor ex;
    hy_executor_init(&ex, m);
    struct hy_kv_cache kv;
    if (hy_executor_kv_cache_init(&ex, &kv, bs, B * bps, kv_dtype))
        return -1;
    int rc = -1, n_moe = 0;
    for (int L = 0; L < m->cfg.num_hidden_layers; L++)
        n_moe += m->layers[L].is_moe;
    int32_t *ids = malloc((size_t)cap * sizeof(int32_t)), *pos = malloc((size_t)cap * sizeof(int32_t));
    int32_t *seq = malloc((size_t)cap * sizeof(int32_t)), *rows = malloc((size_t)cap * sizeof(int32_t));
    int32_t *tab = malloc((size_t)B * (size_t)bps * sizeof(int32_t)), *ctx = malloc((size_t)cap * sizeof(int32_t));
    int32_t *at = calloc((size_t)B, sizeof(int32_t)), *next = malloc((size_t)cap * sizeof(int32_t));
    int64_t *slots = malloc((size_t)cap * sizeof(int64_t));
    const int32_t **tables = malloc((size_t)B * sizeof(*tables));
    float *logits = malloc((size_t)cap * (size_t)V * sizeof(float));
    float *hidden = malloc((size_t)cap * (size_t)H * sizeof(float));
    if (!ids || !pos || !seq || !rows || !tab || !ctx || !at || !next || !slots || !tables || !logits || !hidden) {
        hy_err_set("bench: out of memory for the speculative-decoding runs (batch %d)", B);
        goto out;
    }
    for (int32_t i = 0; i < B * bps; i++)
        tab[i] = i;
    for (int32_t s = 0; s < B; s++)
        tables[s] = tab + (size_t)s * bps;
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + 11;
    memset(r, 0, sizeof(*r));
    double *times = malloc((size_t)(n_max + 2) * (size_t)steps * sizeof(double));
    if (!times) {
        hy_err_set("bench: out of memory");
        goto out;
    }
    /* the prefill, then rounds of one step per shape (n = 1 .. n_max tokens per sequence, then the MTP
     * step), interleaved so that the machine's drift hits every shape alike; round 0 is the warm-up */
    for (int32_t k = -1; k <= steps; k++)
        for (int32_t n = k < 0 ? 0 : 1; n <= (k < 0 ? 0 : n_max + 1); n++) {
            const int32_t per = n == 0 ? (ctx0 > 0 ? ctx0 : 1) : n <= n_max ? n : 1;
            int32_t t = 0;
            for (int32_t s = 0; s < B; s++)
                for (int32_t j = 0; j < per; j++, t++) {
                    const int32_t p = at[s] + j;
                    ids[t] = n == 0 ? (int32_t)(hy_bench_xorshift(&st) % (uint64_t)V) : next[t];
                    pos[t] = p;
                    seq[t] = s;
                    slots[t] = (int64_t)tables[s][p / bs] * bs + p % bs;
                    rows[t] = t;
                    ctx[t] = p + 1;
                }
            const int is_mtp = n == n_max + 1;
            struct hy_batch b = {t, ids, pos, slots, seq, tables, t, rows, 0};
            hy_model_prof_reset(m);
            const double t0 = hy_time_now();
            if (is_mtp ? hy_executor_forward_mtp(&ex, &kv, &b, hidden, logits, NULL)
                       : hy_executor_forward(&ex, &kv, &b, logits, hidden)) {
                free(times);
                goto out;
            }
            const double dt = hy_time_now() - t0;
            if (k > 0) {
                times[(size_t)n * (size_t)steps + (size_t)(k - 1)] = dt;
                if (!is_mtp) {
                    struct hy_bench_bytes by;
                    for (int st_i = 0; st_i < HY_STAGE_COUNT; st_i++)
                        r->stage[n][st_i] += m->prof.sec[st_i] / steps;
                    hy_bench_account(m, m->prof.expert_hits, t, ctx, t, 2, &by, NULL);
                    r->experts[n] += n_moe ? (double)by.distinct_experts / n_moe / steps : 0.0;
                }
            }
            /* greedy continuations keep the inputs realistic: row j's argmax is the next input of row j */
            for (int32_t i = 0; i < t; i++)
                next[i] = hy_argmax_f32(logits + (size_t)i * V, V);
            for (int32_t i = t; i < cap; i++) /* the next shape may have more rows: repeat the last */
                next[i] = next[t - 1];
            for (int32_t s = 0; s < B; s++)
                at[s] += per;
        }
    for (int32_t n = 1; n <= n_max + 1; n++) { /* medians */
        double *tn = times + (size_t)n * (size_t)steps;
        qsort(tn, (size_t)steps, sizeof(double), hy_bench_cmp_double);
        const double med = tn[steps / 2];
        if (n == n_max + 1)
            r->mtp_s = med;
        else
            r->step_s[n] = med;
    }
    free(times);
    rc = 0;
out:
    free(ids);
    free(pos);
    free(seq);
    free(rows);
    free(tab);
    free(ctx);
    free(at);
    free(next);
    free(slots);
    free(tables);
    free(logits);
    free(hidden);
    hy_executor_kv_cache_free(&ex, &kv);
    return rc;
}

/* Seconds of an n-token verify step scaled to a model of proj_layers decoder layers (proj_dense dense):
 * the measured step plus the missing layers at the measured per-layer stage times (bench latency's
 * projection rule). proj_layers <= the model's layers: the measured step. */
double hy_bench_spec_project(const struct hy_model *m, const struct hy_bench_verify *r, int32_t n, int proj_layers,
                             int proj_dense)
{
    const int L = m->cfg.num_hidden_layers;
    int n_moe = 0, n_dense = 0;
    for (int i = 0; i < L; i++)
        m->layers[i].is_moe ? n_moe++ : n_dense++;
    if (proj_layers <= L)
        return r->step_s[n];
    const double *s = r->stage[n], attn = s[HY_STAGE_ATTENTION] / L;
    const double moe = n_moe ? attn + (s[HY_STAGE_ROUTER] + s[HY_STAGE_ROUTED] + s[HY_STAGE_SHARED]) / n_moe : 0.0;
    const double dense = n_dense ? attn + s[HY_STAGE_DENSE_MLP] / n_dense : 0.0;
    return r->step_s[n] + (proj_layers - proj_dense - n_moe) * moe + (proj_dense - n_dense) * dense;
}

/* B requests of ctx0 random tokens decoding `steps` tokens each (greedy, ignore_eos) through the engine;
 * decode tokens/s of its pure-decode steps and, with drafts, the spec counters. */
int hy_bench_spec_engine(struct hy_model *m, enum hy_dtype kv_dtype, const struct hy_spec_config *sc, int32_t B,
                         int32_t ctx0, int32_t steps, uint64_t seed, double *tok_s, struct hy_spec_stats *ss)
{
    const int32_t V = m->cfg.vocab_size, P = ctx0 > 0 ? ctx0 : 1;
    struct hy_gen_request *reqs = calloc((size_t)B, sizeof(*reqs));
    int32_t *ids = malloc((size_t)B * (size_t)P * sizeof(int32_t));
    if (!reqs || !ids) {
        free(reqs);
        free(ids);
        return hy_err_set("bench: out of memory");
    }
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + 5;
    for (int32_t i = 0; i < B * P; i++)
        ids[i] = (int32_t)(hy_bench_xorshift(&st) % (uint64_t)V);
    for (int32_t s = 0; s < B; s++) {
        reqs[s].prompt_ids = ids + (size_t)s * P;
        reqs[s].n_prompt = (size_t)P;
        hy_sampling_params_init(&reqs[s].params);
        reqs[s].params.max_new_tokens = steps;
        reqs[s].params.ignore_eos = 1;
    }
    struct hy_gen_opts o = {B, B * P, 16, 0, NULL, NULL, NULL, kv_dtype, sc};
    struct hy_gen_stats gs;
    int rc = hy_generate(m, reqs, (size_t)B, &o, &gs);
    for (int32_t s = 0; s < B; s++)
        free(reqs[s].out_ids);
    free(reqs);
    free(ids);
    if (rc)
        return -1;
    *tok_s = gs.decode_seconds > 0 ? (double)gs.decode_tokens / gs.decode_seconds : 0.0;
    if (ss)
        *ss = gs.spec;
    return 0;
}
