/* gptq_bench.c - micro-benchmark of GPTQ (quantize/gptq.h) on one Hy3-sized matrix (not a test):
 * the factor of H (K x K) and the rounding of N rows, timed apart; and the calibration observer's
 * sum x^T x of H's T rows (hy_calib_gram_add, quantize/calib.h) against the plain loop it replaced.
 * Build: make tools (build/tools/gptq_bench, linked against build/libhyinfer.a)
 * Run:   build/tools/gptq_bench [N K [fp8|mxfp8|mxfp4]]   (default 1536 4096 mxfp8: one routed expert's
 *        gate_proj; 4096 1536 is its down_proj, 8192 4096 the attention's q_proj)
 * H is the mean x x^T of 1024 synthetic rows with neighbouring inputs correlated (x_k += 0.5 x_(k-1)),
 * W uniform in +-0.01. Prints both times, both objectives (tr(dW H dW^T) over sampled rows) and an
 * FNV-1a hash of the codes, which stays the same when only the speed of the code changes.
 * GPTQ_BENCH_NO_OBJ=1 skips the objectives (the rounding time without the diagnostic).
 * GPTQ_BENCH_ATTN=1 (N a multiple of 1024: q_proj, heads of 128, a multiple of the 8 kv heads) also times q_proj's attention statistics for
 * one window of 512 synthetic tokens (hy_calib_attn_g_add, quantize/calib_attn.h; 8 kv heads, 16 queries sampled
 * as `hyinfer quantize` does) and the coupled rounding with them (hy_gptq_quantize_coupled). */
#include "base/err.h"
#include "quantize/calib.h"
#include "quantize/calib_attn.h"
#include "quantize/gptq.h"

#include <math.h>

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;
static double urand(void) /* [-0.5, 0.5) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53 - 0.5;
}

int main(int argc, char **argv)
{
    const int64_t N = argc > 2 ? atoll(argv[1]) : 1536, K = argc > 2 ? atoll(argv[2]) : 4096, T = 1024;
    const char *fs = argc > 3 ? argv[3] : "mxfp8";
    const enum hy_qformat fmt = !strcmp(fs, "fp8")     ? HY_QF_FP8_TENSOR
                                : !strcmp(fs, "mxfp4") ? HY_QF_MXFP4
                                                       : HY_QF_MXFP8;
    if (N < 1 || K < 2 || K % 2) {
        fprintf(stderr, "usage: %s [N K [fp8|mxfp8|mxfp4]] (K even)\n", argv[0]);
        return 2;
    }
    float *x = malloc(sizeof(float) * (size_t)(T * K)), *w = malloc(sizeof(float) * (size_t)(N * K));
    double *h = calloc((size_t)(K * K), sizeof(double));
    uint8_t *q = malloc((size_t)(N * K)), *s = malloc((size_t)(N * (K / 32 + 1)));
    if (!x || !w || !h || !q || !s) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < K; k++)
            x[t * K + k] = (float)urand() + (k ? 0.5f * x[t * K + k - 1] : 0.0f);
    for (int64_t i = 0; i < N * K; i++)
        w[i] = (float)urand() * 0.02f;
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < K; i++)
        for (int64_t t = 0; t < T; t++) {
            const double xi = x[t * K + i] / (double)T;
            for (int64_t j = 0; j < K; j++)
                h[i * K + j] += xi * x[t * K + j];
        }
    { /* the observer's sum (lower triangle: T K (K + 1) / 2 multiply-adds) against the plain loop */
        double *g = calloc((size_t)(K * K), sizeof(double)), *g2 = calloc((size_t)(K * K), sizeof(double));
        double *pack = malloc(hy_calib_gram_scratch(K) * sizeof(double));
        if (!g || !g2 || !pack) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        const double a0 = omp_get_wtime();
        hy_calib_gram_add(g, K, x, T, pack);
        const double a1 = omp_get_wtime();
#pragma omp parallel for schedule(dynamic, 8)
        for (int64_t i = 0; i < K; i++)
            for (int64_t t = 0; t < T; t++) {
                const double xi = x[t * K + i];
                for (int64_t j = 0; j <= i; j++)
                    g2[i * K + j] += xi * (double)x[t * K + j];
            }
        const double a2 = omp_get_wtime(), macs = (double)T * (double)K * (double)(K + 1) / 2.0;
        int same = 1;
        for (int64_t i = 0; i < K && same; i++)
            same = !memcmp(g + i * K, g2 + i * K, (size_t)(i + 1) * sizeof(double));
        printf("H sum of %lld rows: gram_add %.3f s (%.2f G multiply-adds/s), plain loop %.3f s (%.2f G/s); %s\n",
               (long long)T, a1 - a0, macs / (a1 - a0) * 1e-9, a2 - a1, macs / (a2 - a1) * 1e-9,
               same ? "lower triangles bitwise equal" : "LOWER TRIANGLES DIFFER");
        free(g);
        free(g2);
        free(pack);
    }
    const struct hy_gptq_opts o = {.dampening_frac = 0.01, .actorder = 1, .mx_scale = HY_MX_SCALE_OCP};
    struct hy_gptq_factor f;
    double obj[2] = {0, 0};
    const double t0 = omp_get_wtime();
    if (hy_gptq_factor_init(h, K, &o, &f)) {
        fprintf(stderr, "factor failed\n");
        return 1;
    }
    const double t1 = omp_get_wtime();
    if (hy_gptq_quantize_factored(w, h, &f, N, fmt, 0.01f / 448.0f, &o, q, s,
                                  getenv("GPTQ_BENCH_NO_OBJ") ? NULL : obj)) {
        fprintf(stderr, "rounding failed\n");
        return 1;
    }
    const double t2 = omp_get_wtime();
    uint64_t hs = 1469598103934665603ull;
    for (int64_t i = 0; i < (fmt == HY_QF_MXFP4 ? N * K / 2 : N * K); i++)
        hs = (hs ^ q[i]) * 1099511628211ull;
    printf("gptq %s N %lld K %lld, %d threads: factor %.2f s, rounding %.2f s; objective rtn %.6g gptq %.6g; "
           "codes %016llx\n",
           fs, (long long)N, (long long)K, omp_get_max_threads(), t1 - t0, t2 - t1, obj[0], obj[1],
           (unsigned long long)hs);
    if (getenv("GPTQ_BENCH_ATTN") && N % (128 * 8) == 0) {
        enum { TW = 512, D = 128, NKV = 8 };
        const int64_t nh = N / D;
        float *qa = malloc(sizeof(float) * (size_t)(TW * N)), *ka = malloc(sizeof(float) * TW * NKV * D);
        float gq[D], gk[D], inv[D / 2];
        double *g = calloc((size_t)(nh * D * D), sizeof(double));
        if (!qa || !ka || !g) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        for (int64_t i = 0; i < TW * N; i++)
            qa[i] = (float)urand();
        for (int64_t i = 0; i < TW * NKV * D; i++)
            ka[i] = (float)urand() + (i % D < 8 ? 2.0f : 0.0f);
        for (int d = 0; d < D; d++)
            gq[d] = gk[d] = 1.0f;
        for (int i = 0; i < D / 2; i++)
            inv[i] = powf(11158840.0f, -2.0f * (float)i / D); /* Hy3's rope_theta */
        const struct hy_calib_attn_shape a = {nh, NKV, D, gq, gk, 1e-5f, inv, 0};
        const double a0 = omp_get_wtime();
        if (hy_calib_attn_g_add(g, qa, ka, TW, &a, TW / 16)) {
            fprintf(stderr, "%s\n", hy_err_msg());
            return 1;
        }
        const double a1 = omp_get_wtime();
        if (hy_gptq_quantize_coupled(w, h, &f, N, g, D, fmt, 0.01f / 448.0f, &o, q, s, NULL)) {
            fprintf(stderr, "coupled rounding failed\n");
            return 1;
        }
        const double a2 = omp_get_wtime();
        printf("attention statistics of one %d-token window, %lld heads: %.3f s; coupled rounding %.2f s\n", TW,
               (long long)nh, a1 - a0, a2 - a1);
        free(qa);
        free(ka);
        free(g);
    }
    hy_gptq_factor_free(&f);
    free(x);
    free(w);
    free(h);
    free(q);
    free(s);
    return 0;
}
