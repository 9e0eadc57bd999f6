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
#include "bench/spec_bench.h"
#include "bench/util.h"
#include "engine/offline.h"
#include "engine/executor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 3

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
        struct hy_bench_verify vr;
        if (hy_bench_spec_verify(m, kv_dtype, B, ctx0, steps, k + 1, seed + (uint64_t)bi, &vr))
            goto fail;
        double on[ROUNDS], offr[ROUNDS];
        struct hy_spec_stats ss;
        struct hy_spec_config none;
        hy_spec_config_init(&none);
        for (int r = 0; r < ROUNDS; r++) /* interleaved: the machine's bandwidth drifts */
            if (hy_bench_spec_engine(m, kv_dtype, &none, B, ctx0, 8 * steps, seed + 50 + (uint64_t)r, &offr[r], NULL) ||
                hy_bench_spec_engine(m, kv_dtype, sc, B, ctx0, 8 * steps, seed + 50 + (uint64_t)r, &on[r], &ss))
                goto fail;
        qsort(on, ROUNDS, sizeof(double), hy_bench_cmp_double);
        qsort(offr, ROUNDS, sizeof(double), hy_bench_cmp_double);
        const double t1 = vr.step_s[1], on_med = on[ROUNDS / 2], off_med = offr[ROUNDS / 2];
        const double nd = ss.num_drafts ? (double)ss.num_drafts : 1.0;
        double tp[HY_SPEC_MAX_TOKENS + 2];
        for (int32_t n = 1; n <= k + 1; n++)
            tp[n] = hy_bench_spec_project(m, &vr, n, proj_layers, proj_dense);
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
        json_t *proj = NULL; /* no projection for shapes of no published model (cmd_bench.c) */
        if (proj_layers > 0) {
            snprintf(label, sizeof(label),
                     "the same projected to %d layers (%d dense), t_mtp as measured:", proj_layers, proj_dense);
            proj = speedups(label, tp, vr.mtp_s, k, print);
        }
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
        if (proj) {
            json_object_set_new(o, "speedup_projected", proj);
            json_object_set_new(o, "projected_layers", json_integer(proj_layers));
        }
        json_array_append_new(arr, o);
    }
    *out = json_pack("{s:i, s:f, s:b, s:o}", "num_speculative_tokens", k, "draft_p_min", (double)sc->draft_p_min,
                     "gate", sc->gate, "batches", arr);
    return 0;
fail:
    json_decref(arr);
    return -1;
}
