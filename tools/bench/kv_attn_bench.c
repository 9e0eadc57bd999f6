/* kv_attn_bench.c - micro-benchmark of decode attention (one query token, all heads of one layer)
 * over a paged KV cache in fp32 / bf16 / FP8 E4M3, per ISA level (not a test).
 * Build: make tools (build/tools/kv_attn_bench, linked against build/libhyinfer.a)
 * Run:   nice build/tools/kv_attn_bench [reps] [threads]
 * Geometry: Hy3's (64 query heads, 8 KV heads, head_dim 128, blocks of 16 tokens in a shuffled
 * table). The dtypes are measured interleaved, rep by rep, and the best-of-reps wall time is
 * printed with the KV bytes read per call and the resulting GB/s. Then the cost of FP8 writes under
 * the two dynamic scale rules (write_bench). */
#include "cache/kv_cache.h"
#include "kernels/attention.h"
#include "kernels/kernel_table.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* FP8 writes: one token's K and V rows (8 KV heads x 128) into one layer, under each dynamic scale
 * rule (HYINFER_KV_FP8_SCALE, read at init), on the active kernel level, through
 * hy_kv_write_batch with T = 1 (decode: the 8 heads split over the threads); best of reps
 * over 4096 tokens, per token and layer, and for the 81 cache layers of Hy3 (80 + MTP). */
static int write_bench(int reps)
{
    const int32_t nkv = 8, D = 128, bs = 16, n = 4096;
    static const char *rules[2] = {"amax", "mse"};
    float *k = malloc((size_t)n * nkv * D * 4), *v = malloc((size_t)n * nkv * D * 4);
    for (int64_t i = 0; i < (int64_t)n * nkv * D; i++) { /* roughly Gaussian, as post-norm K / V */
        const uint32_t h = (uint32_t)(i * 2654435761u), g = (uint32_t)(i * 2246822519u + 7);
        k[i] = ((float)(h % 1001u) + (float)(g % 1001u)) / 1000.0f - 1.0f;
        v[i] = ((float)(g % 997u) - (float)(h % 991u)) / 500.0f;
    }
    double best[2] = {1e30, 1e30};
    struct hy_kv_cache kv[2];
    for (int r = 0; r < 2; r++) {
        setenv("HYINFER_KV_FP8_SCALE", rules[r], 1);
        if (hy_kv_cache_init(&kv[r], 1, nkv, D, bs, n / bs, HY_DTYPE_F8_E4M3)) {
            fprintf(stderr, "init failed\n");
            return 1;
        }
    }
    unsetenv("HYINFER_KV_FP8_SCALE");
    for (int rep = 0; rep < reps; rep++)
        for (int r = 0; r < 2; r++) {
            const double t0 = now();
            for (int64_t s = 0; s < n; s++) /* one decode token at a time: its heads in parallel */
                hy_kv_write_batch(&(struct hy_kv_view[1]){hy_kv_cache_view(&kv[r], 0)}[0], 1, &s, k + s * nkv * D,
                                  v + s * nkv * D);
            const double dt = (now() - t0) / n;
            best[r] = dt < best[r] ? dt : best[r];
        }
    for (int r = 0; r < 2; r++) {
        printf("fp8 write, %s scales (%s level, %d threads): %7.2f us per token and layer, %7.3f ms per token over "
               "81 layers\n",
               rules[r], hy_kernels_active()->name, omp_get_max_threads(), best[r] * 1e6, best[r] * 81e3);
        hy_kv_cache_free(&kv[r]);
    }
    free(k);
    free(v);
    return 0;
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 5, threads = argc > 2 ? atoi(argv[2]) : 1;
    omp_set_num_threads(threads);
    const int32_t nkv = 8, nh = 64, D = 128, bs = 16;
    static const int32_t ctxs[] = {512, 4096, 16384};
    static const enum hy_dtype dts[] = {HY_DTYPE_F32, HY_DTYPE_BF16, HY_DTYPE_F8_E4M3};
    struct hy_kernel_table tabs[2];
    int nt = 0;
    if (hy_kernels_table_for(HY_ISA_REF, &tabs[nt]) == 0)
        nt++;
    if (hy_kernels_table_for(HY_ISA_AVX2, &tabs[nt]) == 0)
        nt++;
    printf("decode attention, %d query / %d kv heads x %d, %d thread(s), best of %d\n", nh, nkv, D, threads, reps);
    for (size_t ci = 0; ci < sizeof(ctxs) / sizeof(ctxs[0]); ci++) {
        const int32_t n_ctx = ctxs[ci], nb = n_ctx / bs;
        struct hy_kv_cache kv[3];
        int32_t *table = malloc((size_t)nb * sizeof(int32_t));
        for (int32_t i = 0; i < nb; i++)
            table[i] = (int32_t)(((int64_t)i * 7919) % nb); /* a permutation when nb is not a multiple of 7919 */
        float *k = malloc((size_t)nkv * D * 4), *v = malloc((size_t)nkv * D * 4);
        float *q = malloc((size_t)nh * D * 4), *o = malloc((size_t)nh * D * 4), *sc = malloc((size_t)n_ctx * 4);
        for (int32_t i = 0; i < nh * D; i++)
            q[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
        for (int d = 0; d < 3; d++) {
            if (hy_kv_cache_init(&kv[d], 1, nkv, D, bs, nb, dts[d])) {
                fprintf(stderr, "init failed\n");
                return 1;
            }
            for (int32_t s = 0; s < n_ctx; s++) {
                for (int32_t i = 0; i < nkv * D; i++) {
                    k[i] = (float)(((s + 3) * (i + 1) * 2654435761u) % 2001u) / 1000.0f - 1.0f;
                    v[i] = (float)(((s + 5) * (i + 7) * 2246822519u) % 2001u) / 1000.0f - 1.0f;
                }
                hy_kv_write(&(struct hy_kv_view[1]){hy_kv_cache_view(&kv[d], 0)}[0], s, k, v);
            }
        }
        for (int t = 0; t < nt; t++) {
            double best[3] = {1e30, 1e30, 1e30};
            for (int r = 0; r < reps; r++)
                for (int d = 0; d < 3; d++) {
                    const double t0 = now();
                    tabs[t].attend(&(struct hy_kv_view[1]){hy_kv_cache_view(&kv[d], 0)}[0], q, nh, table, n_ctx, sc, o);
                    const double dt = now() - t0;
                    best[d] = dt < best[d] ? dt : best[d];
                }
            for (int d = 0; d < 3; d++) {
                const double bytes = (double)hy_kv_cache_token_bytes(1, nkv, D, dts[d], 0) * n_ctx;
                printf("n_ctx %6d %-5s %-9s %9.3f ms  %7.2f MB  %6.2f GB/s\n", n_ctx, tabs[t].name,
                       hy_kv_dtype_name(dts[d]), best[d] * 1e3, bytes / 1e6, bytes / best[d] / 1e9);
            }
        }
        for (int d = 0; d < 3; d++)
            hy_kv_cache_free(&kv[d]);
        free(table);
        free(k);
        free(v);
        free(q);
        free(o);
        free(sc);
    }
    return write_bench(reps);
}
