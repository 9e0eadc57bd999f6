/* cmd_bench_spec.c - `hyinfer bench latency --speculative-config ...`: what MTP speculative decoding
 * costs and gains on this machine and model (docs/speculative.md).
 *
 * Per decode batch size B:
 *  - verify steps of n = 1 .. k+1 tokens per sequence (B * n rows, logits for all) after a prefill of
 *    ctx0 random tokens: seconds per step (median) relative to the 1-token step, and the distinct routed
 *    experts per MoE layer the step reads (the union over its tokens);
 *  - one MTP draft step (B rows, logits): seconds relative to the 1-token step; all shapes interleaved,
 *    one step each per round;
 *  - the engine itself: B requests decoding with drafts and without, in interleaved rounds: decode
 *    tokens/s (medians) and the measured acceptance;
 *  - the speed-up at acceptance a = 0.6 / 0.8 / 0.9 for k' = 1 .. k,
 *    (1 + a + ... + a^k') * t(1) / (t(k'+1) + k' * t_mtp), from the measured step times and from them
 *    projected to the full model's layer count (--project-layers; the MTP step is one layer at any depth).
 */
#include "cli/bench_spec.h"
#include "cli/common.h"

#include "base/err.h"
#include "base/timing.h"
#include "bench/account.h"
#include "engine/offline.h"
#include "model/lockstep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 3

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct verify_result {
    double step_s[HY_SPEC_MAX_TOKENS + 2];                /* [n] seconds per step of n tokens per sequence */
    double experts[HY_SPEC_MAX_TOKENS + 2];               /* [n] distinct routed experts per MoE layer per step */
    double stage[HY_SPEC_MAX_TOKENS + 2][HY_STAGE_COUNT]; /* [n] per-stage seconds of those steps */
    double mtp_s;                                         /* one MTP draft step (B rows, logits) */
};

/* Verify-shaped steps on a fresh KV cache: B sequences, prefill ctx0, then `steps` timed steps of n
 * tokens per sequence for n = 1 .. n_max (after one warm-up each), positions advancing by n. */
static int measure_verify(struct hy_model *m, enum hy_dtype kv_dtype, int32_t B, int32_t ctx0, int32_t steps,
                          int32_t n_max, uint64_t seed, struct verify_result *r)
{
    const int32_t bs = 16, V = m->cfg.vocab_size, H = m->cfg.hidden_size;
    int32_t total = ctx0 + 1;
    for (int32_t n = 1; n <= n_max; n++)
        total += (steps + 1) * n;
    total += steps + 1; /* the MTP steps */
    const int32_t bps = (total + bs - 1) / bs, cap = B * (ctx0 > n_max ? ctx0 : n_max);
    struct hy_kv_cache kv;
    if (hy_model_kv_cache_init_dtype(m, &kv, bs, B * bps, kv_dtype))
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
                    ids[t] = n == 0 ? (int32_t)(next_rand(&st) % (uint64_t)V) : next[t];
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
            if (is_mtp ? hy_model_forward_mtp(m, &kv, &b, hidden, logits, NULL)
                       : hy_model_forward(m, &kv, &b, logits, hidden)) {
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
        qsort(tn, (size_t)steps, sizeof(double), cmp_d);
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
    hy_model_kv_cache_free(m, &kv);
    return rc;
}

/* Seconds of an n-token verify step scaled to a model of proj_layers decoder layers (proj_dense dense):
 * the measured step plus the missing layers at the measured per-layer stage times (bench latency's
 * projection rule). proj_layers <= the model's layers: the measured step. */
static double project(const struct hy_model *m, const struct verify_result *r, int32_t n, int proj_layers,
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
static int engine_run(struct hy_model *m, enum hy_dtype kv_dtype, const struct hy_spec_config *sc, int32_t B,
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
        ids[i] = (int32_t)(next_rand(&st) % (uint64_t)V);
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

/* The speed-up table for acceptance 0.6 / 0.8 / 0.9 and k' = 1 .. k from verify step seconds t[n] and
 * the MTP draft step t_mtp; printed under `label` when print. Returns a JSON array (new). */
static json_t *speedups(const char *label, const double *t, double t_mtp, int32_t k, int print)
{
    static const double accs[3] = {0.6, 0.8, 0.9};
    json_t *proj = json_array();
    if (print) {
        printf("    %s\n      %-6s", label, "a");
        for (int32_t kk = 1; kk <= k; kk++)
            printf("   k'=%d", kk);
        printf("\n");
    }
    for (int ai = 0; ai < 3; ai++) {
        if (print)
            printf("      %-6.1f", accs[ai]);
        json_t *row = json_array();
        for (int32_t kk = 1; kk <= k; kk++) {
            double e = 0.0, p = 1.0;
            for (int32_t i = 0; i <= kk; i++, p *= accs[ai])
                e += p;
            const double sp = e * t[1] / (t[kk + 1] + kk * t_mtp);
            if (print)
                printf("  %5.2fx", sp);
            json_array_append_new(row, json_real(sp));
        }
        if (print)
            printf("\n");
        json_array_append_new(proj, json_pack("{s:f, s:o}", "acceptance", accs[ai], "speedup_by_k", row));
    }
    return proj;
}

int hy_bench_spec_run(struct hy_model *m, enum hy_dtype kv_dtype, const struct hy_spec_config *sc,
                      const int32_t *batches, int n_batches, int32_t ctx0, int32_t steps, uint64_t seed,
                      int proj_layers, int proj_dense, int print, json_t **out)
{
    const int32_t k = sc->num_speculative_tokens;
    if (!m->has_mtp)
        return hy_err_set("bench: --speculative-config: the model has no MTP layer");
    json_t *arr = json_array();
    if (print)
        printf("\nspeculative decoding (mtp, k = %d, draft_p_min %.2f, gate %s)\n", k, (double)sc->draft_p_min,
               sc->gate ? "auto" : "off");
    for (int bi = 0; bi < n_batches; bi++) {
        const int32_t B = batches[bi];
        struct verify_result vr;
        if (measure_verify(m, kv_dtype, B, ctx0, steps, k + 1, seed + (uint64_t)bi, &vr))
            goto fail;
        double on[ROUNDS], offr[ROUNDS];
        struct hy_spec_stats ss;
        struct hy_spec_config none;
        hy_spec_config_init(&none);
        for (int r = 0; r < ROUNDS; r++) /* interleaved: the machine's bandwidth drifts */
            if (engine_run(m, kv_dtype, &none, B, ctx0, 8 * steps, seed + 50 + (uint64_t)r, &offr[r], NULL) ||
                engine_run(m, kv_dtype, sc, B, ctx0, 8 * steps, seed + 50 + (uint64_t)r, &on[r], &ss))
                goto fail;
        qsort(on, ROUNDS, sizeof(double), cmp_d);
        qsort(offr, ROUNDS, sizeof(double), cmp_d);
        const double t1 = vr.step_s[1], on_med = on[ROUNDS / 2], off_med = offr[ROUNDS / 2];
        const double nd = ss.num_drafts ? (double)ss.num_drafts : 1.0;
        double tp[HY_SPEC_MAX_TOKENS + 2];
        for (int32_t n = 1; n <= k + 1; n++)
            tp[n] = project(m, &vr, n, proj_layers, proj_dense);
        json_t *o = json_object(), *steps_j = json_array();
        if (print) {
            printf("  batch %d: plain step %.4f s; MTP draft step %.4f s (%.2fx)\n", B, t1, vr.mtp_s, vr.mtp_s / t1);
            printf("    %-10s %10s %8s %22s %14s %8s\n", "tokens/seq", "s/step", "vs 1", "distinct experts/layer",
                   "projected s", "vs 1");
        }
        for (int32_t n = 1; n <= k + 1; n++) {
            if (print)
                printf("    %-10d %10.4f %7.2fx %22.1f %14.4f %7.2fx\n", n, vr.step_s[n], vr.step_s[n] / t1,
                       vr.experts[n], tp[n], tp[n] / tp[1]);
            json_array_append_new(steps_j,
                                  json_pack("{s:i, s:f, s:f, s:f, s:f}", "tokens_per_seq", n, "seconds", vr.step_s[n],
                                            "vs_plain", vr.step_s[n] / t1, "distinct_experts_per_moe_layer",
                                            vr.experts[n], "projected_seconds", tp[n]));
        }
        if (print) {
            printf("    engine decode (medians of %d interleaved rounds, %d tokens per request): %.2f tok/s with "
                   "drafts, %.2f without = %.3fx\n",
                   ROUNDS, 8 * steps, on_med, off_med, on_med / (off_med > 0 ? off_med : 1.0));
            hy_cli_print_spec(stdout, "    last round with drafts: ", k, &ss);
        }
        char label[160];
        snprintf(label, sizeof(label),
                 "speed-up on this model, (1 + a + .. + a^k') * t(1) / (t(k'+1) + k' * t_mtp), acceptance a:");
        json_t *meas = speedups(label, vr.step_s, vr.mtp_s, k, print);
        snprintf(label, sizeof(label), "the same projected to %d layers (%d dense), t_mtp as measured:", proj_layers,
                 proj_dense);
        json_t *proj = speedups(label, tp, vr.mtp_s, k, print);
        json_t *acc = json_array();
        for (int32_t i = 0; i < k; i++)
            json_array_append_new(acc, json_real((double)ss.num_accepted_tokens_per_pos[i] / nd));
        json_object_set_new(o, "batch", json_integer(B));
        json_object_set_new(o, "verify_steps", steps_j);
        json_object_set_new(o, "mtp_step_seconds", json_real(vr.mtp_s));
        json_object_set_new(o, "decode_tokens_per_s_on", json_real(on_med));
        json_object_set_new(o, "decode_tokens_per_s_off", json_real(off_med));
        json_object_set_new(o, "on_vs_off", json_real(on_med / (off_med > 0 ? off_med : 1.0)));
        json_object_set_new(o, "acceptance_per_position", acc);
        json_object_set_new(o, "mean_acceptance_length", json_real(1.0 + (double)ss.num_accepted_tokens / nd));
        json_object_set_new(o, "speedup", meas);
        json_object_set_new(o, "speedup_projected", proj);
        json_object_set_new(o, "projected_layers", json_integer(proj_layers));
        json_array_append_new(arr, o);
    }
    *out = json_pack("{s:i, s:f, s:b, s:o}", "num_speculative_tokens", k, "draft_p_min", (double)sc->draft_p_min,
                     "gate", sc->gate, "batches", arr);
    return 0;
fail:
    json_decref(arr);
    return -1;
}
