/* kernel_bench.c - micro-benchmark of the matmul kernels per ISA level and thread count (not a test).
 * Build: make tools (build/tools/kernel_bench, linked against build/libhyinfer.a)
 * Run:   nice build/tools/kernel_bench [reps] [all|bf16|quant|bands|tasks]
 * bf16 section: GEMV figures rotate over 3 weight matrices so the 32 MiB L3 does not hold them
 * (DRAM-bound). Figures are best-of-reps wall time; with 1 thread also "cpu": best-of-reps thread
 * CPU time, which leaves out time the thread was descheduled (useful on a shared machine).
 * quant section (best ISA level): batch-1 GEMV of BF16 / FP8 / MXFP8 / MXFP4 / W8A8 weights at 4096x4096,
 * 1536x4096 and 4096x1536 (N x K), each call on a different matrix cut from a 160 MiB pool per
 * format (DRAM-bound), formats interleaved within every repetition (A/B on a shared machine);
 * GB/s of weight bytes (hy_tensor_bytes, scales included), median and best of reps, and the median's
 * fraction of the read bandwidth measured by hy_bench_mem_bw with the same thread count. Then
 * prefill GEMM T=128 at 4096x4096, GFLOP/s, formats interleaved. With 1 thread the GEMV lines also
 * give the median over thread CPU time (leaves out time the thread was descheduled).
 * KB_THREADS=1 or 2 runs only that thread count of the quant section; KB_BF16X=1 times the bfloat16
 * mode's matmul_bf16x (activations rounded to bf16; on AVX512_BF16 CPUs the vdpbf16ps kernels) instead.
 * The pools are 2 MiB-aligned with MADV_HUGEPAGE, as the loader's weight arena.
 * bands section (only with "bands"): per quantized format, the MoE expert shapes through matmul_rows
 * as one call vs 64 / 128-row bands (forward.c's before task_rows.h; 1 thread, same matrix): the per-call cost.
 * tasks section (only with "tasks"): decode task sizes (kernels/task_rows.h) on a BF16 lm_head and an
 * FP8 8192 x 4096, all threads, sizes alternating in every repetition. */
#include "bench/probe.h"
#include "kernels/avx512_bf16.h"
#include "kernels/kernel_table.h"
#include "kernels/task_rows.h"
#include "kernels/w4a8.h"
#include "kernels/w8a8.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double best_cpu;

static struct hy_tensor mk(int64_t N, int64_t K)
{
    struct hy_tensor W = {.dtype = HY_DTYPE_BF16, .rows = N, .cols = K};
    uint16_t *d = malloc((size_t)(N * K) * 2);
    for (int64_t i = 0; i < N * K; i++)
        d[i] = hy_f32_to_bf16((float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f);
    W.data = d;
    return W;
}

/* best seconds per call over reps, rotating over nW matrices */
static double run(const struct hy_kernel_table *k, struct hy_tensor *W, int nW, int64_t T, int reps)
{
    float *x = malloc((size_t)(T * W[0].cols) * 4), *y = malloc((size_t)(T * W[0].rows) * 4);
    for (int64_t i = 0; i < T * W[0].cols; i++)
        x[i] = (float)(i % 7) * 0.1f;
    k->matmul(y, x, T, &W[0]);
    double best = 1e30;
    best_cpu = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now(), c0 = cpu_now();
        k->matmul(y, x, T, &W[r % nW]);
        double dt = now() - t0, dc = cpu_now() - c0;
        if (dt < best)
            best = dt;
        if (dc < best_cpu)
            best_cpu = dc;
    }
    free(x);
    free(y);
    return best;
}

/* ---- quantized formats ---- */

/* fp8-rb / mxfp8-rb: the fp8 / mxfp8 bytes with avx512_bf16.c's exponent-rebase decoder instead of its
 * AVX512_VBMI byte tables (the same kernel where the CPU lacks VBMI, or outside KB_BF16X=1); mxfp4-nat:
 * the mxfp4 bytes in the natural order instead of the E2M1 order (hy_avx512bf16_set_e2m1_order) */
enum { F_BF16 = 0, F_FP8, F_FP8RB, F_MXFP8, F_MXFP8RB, F_MXFP4, F_MXFP4NAT, F_W4A8, F_W8A8, F_COUNT };
static const char *const fname[F_COUNT] = {"bf16",  "fp8",       "fp8-rb", "mxfp8", "mxfp8-rb",
                                           "mxfp4", "mxfp4-nat", "w4a8",   "w8a8"};
static float w8a8_scales[4096]; /* W8A8_DYNAMIC row scales (any positive values: timing only) */
static int bf16x_mode;          /* KB_BF16X=1: the bfloat16 mode's matmul_bf16x (x rounded to bf16) instead of matmul */

/* The matmul of format f: w4a8 = the MXFP4 bytes through the opt-in MXINT8-activation kernel
 * (kernels/w4a8.h, called directly whatever HYINFER_MXFP4_ACT says). */
static void run_mm(const struct hy_kernel_table *k, int f, float *y, const float *x, int64_t T,
                   const struct hy_tensor *W)
{
#if defined(__x86_64__)
    if (f == F_FP8RB || f == F_MXFP8RB) {
        const int was = hy_avx512bf16_set_vbmi(0);
        (bf16x_mode ? k->matmul_bf16x : k->matmul)(y, x, T, W);
        hy_avx512bf16_set_vbmi(was);
        return;
    }
    if (f == F_MXFP4NAT) {
        const int was = hy_avx512bf16_set_e2m1_order(0);
        (bf16x_mode ? k->matmul_bf16x : k->matmul)(y, x, T, W);
        hy_avx512bf16_set_e2m1_order(was);
        return;
    }
#endif
    if (f == F_W8A8) /* the int8 kernels of w8a8.h (hy_matmul routes them, dispatch.c) */
        hy_w8a8_matmul(y, x, T, W);
    else if (f != F_W4A8)
        (bf16x_mode ? k->matmul_bf16x : k->matmul)(y, x, T, W);
#if defined(__x86_64__)
    else if (k->isa != HY_ISA_REF)
        hy_avx2_matmul_w4a8(y, x, T, W);
#endif
    else
        hy_ref_matmul_w4a8(y, x, T, W);
}

#define POOL ((size_t)160 << 20)

static uint8_t *pool_data[F_COUNT], *pool_scales[F_COUNT]; /* FP8 and MXFP8 share the E4M3 bytes */
/* Formats that share a pool start a quarter / half of it apart, so no row reads a matrix another row of the
 * same repetition has just left in the 32 MiB L3 (their scales start elsewhere than their data: a matrix
 * pairs with other rows' scale bytes, all in range, which changes nothing for timing) */
static size_t pool_off[F_COUNT] = {[F_FP8RB] = POOL / 4,
                                   [F_MXFP8] = POOL / 2,
                                   [F_MXFP8RB] = POOL / 4 * 3,
                                   [F_MXFP4NAT] = POOL / 4,
                                   [F_W4A8] = POOL / 2};
static size_t scale_off[F_COUNT] = {[F_MXFP8RB] = POOL / 64, [F_MXFP4NAT] = POOL / 128, [F_W4A8] = POOL / 64};

static float rnd_tri(uint64_t *st) /* triangular on (-0.05, 0.05) */
{
    *st ^= *st << 13;
    *st ^= *st >> 7;
    *st ^= *st << 17;
    uint32_t a = (uint32_t)(*st >> 8) & 0xffff, b = (uint32_t)(*st >> 40) & 0xffff;
    return ((float)a + (float)b - 65535.0f) / 65536.0f * 0.05f;
}

/* n bytes, 2 MiB-aligned and advised MADV_HUGEPAGE, like the loader's weight arena (with 4 KiB pages this
 * VM's TLB misses cost MXFP4 GEMVs up to 20x and made pool figures scatter). Never freed. */
static void *huge_alloc(size_t n)
{
    const size_t huge = (size_t)2 << 20;
    n = (n + huge - 1) & ~(huge - 1);
    void *p = aligned_alloc(huge, n);
    if (!p) {
        fprintf(stderr, "kernel_bench: out of memory\n");
        exit(1);
    }
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}

/* Pools of realistic bytes: random rows of 4096 values rounded to bf16 or quantized (OCP MX). */
static void make_pools(void)
{
    for (int f = 0; f < F_COUNT; f++)
        pool_data[f] = f == F_MXFP8 || f == F_FP8RB || f == F_MXFP8RB ? pool_data[F_FP8]
                       : f == F_W4A8 || f == F_MXFP4NAT               ? NULL
                                                                      : huge_alloc(POOL);
    pool_scales[F_MXFP8] = huge_alloc(POOL / 32);
    pool_scales[F_MXFP8RB] = pool_scales[F_MXFP8];
    pool_scales[F_MXFP4] = huge_alloc(POOL / 32);
    pool_data[F_W4A8] = pool_data[F_MXFP4NAT] = pool_data[F_MXFP4]; /* the same MXFP4 bytes */
    for (int i = 0; i < 4096; i++)
        w8a8_scales[i] = 0.05f / 127.0f;
    pool_scales[F_W4A8] = pool_scales[F_MXFP4NAT] = pool_scales[F_MXFP4];
    const size_t rows8 = POOL / 4096; /* E4M3 rows of 4096 bytes; BF16: 2048 values per row slot */
#pragma omp parallel
    {
        uint64_t st = 0x9e3779b97f4a7c15ull + (uint64_t)omp_get_thread_num() * 7919;
        float row[4096];
#pragma omp for schedule(static)
        for (size_t r = 0; r < rows8; r++) {
            for (int k = 0; k < 4096; k++)
                row[k] = rnd_tri(&st);
            for (int k = 0; k < 2048; k++)
                ((uint16_t *)pool_data[F_BF16])[r * 2048 + (size_t)k] = hy_f32_to_bf16(row[k]);
            hy_mx_quantize_row(row, 4096, HY_MX_E4M3, pool_data[F_FP8] + r * 4096, pool_scales[F_MXFP8] + r * 128);
            for (int h = 0; h < 2; h++) { /* two 2048-byte FP4 rows per 4096-byte slot */
                uint8_t sc[128];
                if (h)
                    for (int k = 0; k < 4096; k++)
                        row[k] = rnd_tri(&st);
                hy_mx_quantize_row(row, 4096, HY_MX_E2M1, pool_data[F_MXFP4] + r * 4096 + (size_t)h * 2048, sc);
                if (!h) /* W8A8: RNE(w / s) within [-127, 127] */
                    for (int k = 0; k < 4096; k++)
                        pool_data[F_W8A8][r * 4096 + (size_t)k] = (uint8_t)(int8_t)rintf(row[k] / 0.05f * 127.0f);
                if (r < rows8 / 2)
                    memcpy(pool_scales[F_MXFP4] + (2 * r + (size_t)h) * 128, sc, 128);
            }
        }
    }
}

/* The next N x K matrix of format f cut from its pool (wrapping). */
static struct hy_tensor next_tensor(int f, int64_t N, int64_t K)
{
    struct hy_tensor W = {.rows = N, .cols = K};
    switch (f) {
    case F_BF16:
        W.dtype = HY_DTYPE_BF16;
        break;
    case F_FP8:
    case F_FP8RB:
        W.dtype = HY_DTYPE_F8_E4M3;
        W.qscheme = HY_QS_PER_TENSOR;
        W.scale = 0.05f / 448.0f;
        break;
    case F_MXFP8:
    case F_MXFP8RB:
        W.dtype = HY_DTYPE_F8_E4M3;
        W.qscheme = HY_QS_MX32;
        break;
    case F_W8A8:
        W.dtype = HY_DTYPE_I8;
        W.qscheme = HY_QS_W8A8_DYN;
        W.row_scale = w8a8_scales;
        break;
    default:
        W.dtype = HY_DTYPE_F4_E2M1;
        W.qscheme = HY_QS_MX32;
        break;
    }
    const size_t data_bytes = (size_t)(N * hy_tensor_row_bytes(&W)), sb = (size_t)(N * ((K + 31) / 32));
    if (pool_off[f] + data_bytes > POOL)
        pool_off[f] = 0;
    W.data = pool_data[f] + pool_off[f];
    pool_off[f] += (data_bytes + 4095) & ~(size_t)4095;
    if (W.dtype == HY_DTYPE_F8_E4M3) /* as the loader marks NaN-free E4M3 tensors */
        W.nan_free = (uint8_t)!hy_e4m3_has_nan(W.data, data_bytes);
    if (W.qscheme == HY_QS_MX32) {
        if (scale_off[f] + sb > POOL / 32)
            scale_off[f] = 0;
        W.mx_scales = pool_scales[f] + scale_off[f];
        scale_off[f] += (sb + 63) & ~(size_t)63;
    }
    return W;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void quant_section(int reps)
{
    struct hy_kernel_table k;
    if (hy_kernels_table_for(hy_kernels_best_isa(), &k))
        return;
    make_pools();
    static const int64_t shapes[3][2] = {{4096, 4096}, {1536, 4096}, {4096, 1536}};
    float *x = malloc(128 * 4096 * 4), *y = malloc(128 * 4096 * 4);
    for (int i = 0; i < 128 * 4096; i++)
        x[i] = (float)(i % 7) * 0.1f - 0.3f;
    const char *env_bx = getenv("KB_BF16X");
    bf16x_mode = env_bx && env_bx[0] == '1';
    for (int i = 0; bf16x_mode && i < 128 * 4096; i++)
        x[i] = hy_round_bf16(x[i]);
    double *tm = malloc(sizeof(double) * (size_t)reps * F_COUNT), *tc = malloc(sizeof(double) * (size_t)reps * F_COUNT);
    const char *env_th = getenv("KB_THREADS"); /* "1" or "2": only that count */
    for (int th = 1; th <= 2; th++) {
        if (env_th && atoi(env_th) != th)
            continue;
        omp_set_num_threads(th);
        double bw = 0, bw_s = 0;
        if (hy_bench_mem_bw((size_t)1 << 30, 5, &bw, &bw_s))
            bw = NAN;
        printf("quant [%s%s] threads=%d: read bandwidth %.2f GB/s (hy_bench_mem_bw, 1 GiB, best of 5)\n", k.name,
               bf16x_mode ? ", matmul_bf16x" : "", th, bw);
        for (int s = 0; s < 3; s++) {
            const int64_t N = shapes[s][0], K = shapes[s][1];
            for (int f = 0; f < F_COUNT; f++) { /* warm-up */
                struct hy_tensor W = next_tensor(f, N, K);
                run_mm(&k, f, y, x, 1, &W);
            }
            double bytes[F_COUNT];
            for (int r = 0; r < reps; r++)
                for (int f = 0; f < F_COUNT; f++) {
                    struct hy_tensor W = next_tensor(f, N, K);
                    bytes[f] = (double)hy_tensor_bytes(&W);
                    double t0 = now(), c0 = cpu_now();
                    run_mm(&k, f, y, x, 1, &W);
                    tm[f * reps + r] = now() - t0;
                    tc[f * reps + r] = cpu_now() - c0;
                }
            for (int f = 0; f < F_COUNT; f++) {
                qsort(tm + f * reps, (size_t)reps, sizeof(double), cmp_d);
                qsort(tc + f * reps, (size_t)reps, sizeof(double), cmp_d);
                const double med = tm[f * reps + reps / 2], best = tm[f * reps], cmed = tc[f * reps + reps / 2];
                printf("  gemv T=1 %4lldx%-4lld %-5s %6.2f MB: median %6.2f GB/s (%.3f ms)  best %6.2f GB/s  "
                       "median/bw %.2f",
                       (long long)N, (long long)K, fname[f], bytes[f] / 1e6, bytes[f] / med / 1e9, med * 1e3,
                       bytes[f] / best / 1e9, bytes[f] / med / 1e9 / bw);
                if (th == 1) /* thread CPU time: leaves out time the thread was descheduled */
                    printf("  | cpu-time median %6.2f GB/s (%.2f of bw)", bytes[f] / cmed / 1e9,
                           bytes[f] / cmed / 1e9 / bw);
                printf("\n");
            }
        }
        /* prefill GEMM T = 128, 4096 x 4096 */
        const int greps = reps / 6 > 3 ? reps / 6 : 3;
        for (int r = 0; r < greps; r++)
            for (int f = 0; f < F_COUNT; f++) {
                struct hy_tensor W = next_tensor(f, 4096, 4096);
                double t0 = now();
                run_mm(&k, f, y, x, 128, &W);
                tm[f * reps + r] = now() - t0;
            }
        for (int f = 0; f < F_COUNT; f++) {
            qsort(tm + f * reps, (size_t)greps, sizeof(double), cmp_d);
            const double fl = 2.0 * 128 * 4096 * 4096;
            printf("  gemm T=128 4096x4096 %-5s: median %6.1f GFLOP/s  best %6.1f GFLOP/s (%d reps)\n", fname[f],
                   fl / tm[f * reps + greps / 2] / 1e9, fl / tm[f * reps] / 1e9, greps);
        }
        fflush(stdout);
    }
    free(tm);
    free(tc);
    free(x);
    free(y);
}

/* The MoE expert shapes: the whole matrix in one matmul_rows call vs bands of BAND rows (64 for gate/up
 * at 1536x4096, 128 for down at 4096x1536, forward.c's decode bands before task_rows.h), 1 thread,
 * T = 1, the same matrix (L3-resident, so per-call costs show), the two ways interleaved; best and
 * median of thread CPU time over reps. */
static void rows_call(const struct hy_kernel_table *k, int f, float *y, int64_t ldy, const float *x,
                      const struct hy_tensor *W, int64_t n0, int64_t n1)
{
#if defined(__x86_64__) && !defined(KB_NO_W4A8_ROWS) /* -DKB_NO_W4A8_ROWS: libraries before the rows entry point */
    if (f == F_W4A8 && k->isa != HY_ISA_REF) {
        hy_avx2_matmul_rows_w4a8(y, ldy, x, 1, W, n0, n1);
        return;
    }
#elif defined(__x86_64__)
    if (f == F_W4A8 && k->isa != HY_ISA_REF) {
        hy_matmul_rows_by_view(hy_avx2_matmul_w4a8, y, ldy, x, 1, W, n0, n1);
        return;
    }
#endif
    if (f == F_W4A8)
        hy_matmul_rows_by_view(hy_ref_matmul_w4a8, y, ldy, x, 1, W, n0, n1);
    else
        k->matmul_rows(y, ldy, x, 1, W, n0, n1);
}

static void bands_section(int reps)
{
    struct hy_kernel_table k;
    if (hy_kernels_table_for(hy_kernels_best_isa(), &k))
        return;
    make_pools();
    omp_set_num_threads(1);
    static const int64_t shapes[2][3] = {{1536, 4096, 64}, {4096, 1536, 128}};
    float *x = malloc(4096 * 4), *y = malloc(4096 * 4);
    for (int i = 0; i < 4096; i++)
        x[i] = (float)(i % 7) * 0.1f - 0.3f;
    double *tw = malloc(sizeof(double) * (size_t)reps), *tb = malloc(sizeof(double) * (size_t)reps);
    printf("bands [%s] 1 thread, T=1, matmul_rows: whole matrix vs 64 / 128-row bands (thread CPU time)\n", k.name);
    for (int s = 0; s < 2; s++)
        for (int f = F_FP8; f < F_COUNT; f++) {
            if (f == F_FP8RB || f == F_MXFP8RB || f == F_MXFP4NAT) /* matmul_rows: the same kernels */
                continue;
            const int64_t N = shapes[s][0], K = shapes[s][1], band = shapes[s][2];
            struct hy_tensor W = next_tensor(f, N, K);
            rows_call(&k, f, y, N, x, &W, 0, N);
            for (int r = 0; r < reps; r++) {
                double c0 = cpu_now();
                rows_call(&k, f, y, N, x, &W, 0, N);
                tw[r] = cpu_now() - c0;
                c0 = cpu_now();
                for (int64_t n0 = 0; n0 < N; n0 += band)
                    rows_call(&k, f, y + n0, N, x, &W, n0, n0 + band < N ? n0 + band : N);
                tb[r] = cpu_now() - c0;
            }
            qsort(tw, (size_t)reps, sizeof(double), cmp_d);
            qsort(tb, (size_t)reps, sizeof(double), cmp_d);
            printf("  %4lldx%-4lld %-5s whole: best %7.1f us median %7.1f us | bands of %3lld: best %7.1f us median "
                   "%7.1f us (bands / whole, best: %.3f)\n",
                   (long long)N, (long long)K, fname[f], tw[0] * 1e6, tw[reps / 2] * 1e6, (long long)band, tb[0] * 1e6,
                   tb[reps / 2] * 1e6, tb[0] / tw[0]);
        }
    free(tw);
    free(tb);
    free(x);
    free(y);
}

/* Decode task sizes (kernels/task_rows.h): one batch-1 GEMV over all threads as dynamic tasks of
 * 64 / 256 / 1024 / 4096 rows and of hy_task_rows' choice, the sizes alternating within every
 * repetition, on a 120832 x 4096 BF16 lm_head (990 MB) and an 8192 x 4096 FP8 matrix (rotating over 8
 * copies, 256 MiB, so the 32 MiB L3 holds none); GB/s of weight bytes, median and best, beside the read
 * bandwidth (hy_bench_mem_bw). KB_BF16X=1: matmul_rows_bf16x, else matmul_rows. */
static void tasks_section(int reps)
{
    struct hy_kernel_table k;
    if (hy_kernels_table_for(hy_kernels_best_isa(), &k))
        return;
    const char *env_bx = getenv("KB_BF16X");
    const int bx = env_bx && env_bx[0] == '1';
    enum { NS = 5, NC = 8 };
    static const int64_t sizes[NS - 1] = {64, 256, 1024, 4096};
    const int64_t K = 4096, shapes[2] = {120832, 8192};
    const int copies[2] = {1, NC};
    float *x = malloc((size_t)K * 4), *y = malloc((size_t)shapes[0] * 4);
    double *t = malloc(sizeof(double) * (size_t)reps * NS);
    if (!x || !y || !t) {
        fprintf(stderr, "kernel_bench: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < K; i++)
        x[i] = hy_round_bf16((float)(i % 7) * 0.1f - 0.3f);
    double bw = 0, bw_s = 0;
    if (hy_bench_mem_bw((size_t)1 << 30, 5, &bw, &bw_s))
        bw = 0;
    printf("tasks [%s%s] threads=%d: read bandwidth %.2f GB/s (hy_bench_mem_bw, 1 GiB, best of 5)\n", k.name,
           bx ? ", matmul_rows_bf16x" : "", omp_get_max_threads(), bw);
    for (int s = 0; s < 2; s++) {
        const int64_t N = shapes[s];
        struct hy_tensor W[NC];
        for (int c = 0; c < copies[s]; c++) {
            W[c] = (struct hy_tensor){.dtype = s ? HY_DTYPE_F8_E4M3 : HY_DTYPE_BF16, .rows = N, .cols = K};
            const size_t es = s ? 1 : 2, n = (size_t)(N * K);
            uint8_t *d = huge_alloc(n * es);
            for (size_t i = 0; i < n; i++) /* bf16 in [0.125, 1) / E4M3 codes without the NaNs 0x7f, 0xff */
                d[i] = s ? (uint8_t)((i * 2654435761u >> 7) % 0x7e | ((i >> 3) & 1) << 7)
                         : (uint8_t)(i & 1 ? 0x3e + (i >> 9) % 2 : (i * 2654435761u) >> 24);
            W[c].data = d;
            if (s) {
                W[c].qscheme = HY_QS_PER_TENSOR;
                W[c].scale = 1.0f / 448.0f;
                W[c].nan_free = 1;
            }
        }
        const int64_t auto_rows = hy_task_rows(hy_task_row_bytes(&W[0]), hy_tensor_bytes(&W[0]), 64);
        for (int r = 0; r < reps; r++)
            for (int v = 0; v < NS; v++) {
                const struct hy_tensor *w = &W[(r * NS + v) % copies[s]];
                const int64_t rows = v < NS - 1 ? sizes[v] : auto_rows, nt = (N + rows - 1) / rows;
                const double t0 = now();
#pragma omp parallel for schedule(dynamic, 1)
                for (int64_t i = 0; i < nt; i++) {
                    const int64_t n0 = i * rows, n1 = n0 + rows < N ? n0 + rows : N;
                    (bx ? k.matmul_rows_bf16x : k.matmul_rows)(y + n0, N, x, 1, w, n0, n1);
                }
                t[v * reps + r] = now() - t0;
            }
        const double bytes = (double)hy_tensor_bytes(&W[0]);
        printf("  %lldx%lld %s (%.0f MB):", (long long)N, (long long)K, s ? "fp8" : "bf16", bytes / 1e6);
        for (int v = 0; v < NS; v++) {
            double *tv = t + v * reps;
            qsort(tv, (size_t)reps, sizeof(double), cmp_d);
            printf(" | %lld rows%s %.1f GB/s (best %.1f)", (long long)(v < NS - 1 ? sizes[v] : auto_rows),
                   v < NS - 1 ? "" : " (task_rows)", bytes / tv[reps / 2] / 1e9, bytes / tv[0] / 1e9);
        }
        printf("\n");
        fflush(stdout);
    }
    free(t);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 10;
    const char *what = argc > 2 ? argv[2] : "all";
    if (reps < 1)
        reps = 1;
    if (!strcmp(what, "bands")) {
        bands_section(reps);
        return 0;
    }
    if (!strcmp(what, "tasks")) {
        tasks_section(reps);
        return 0;
    }
    if (strcmp(what, "bf16")) {
        quant_section(reps);
        if (!strcmp(what, "quant"))
            return 0;
    }
    struct hy_tensor g[3] = {mk(4096, 4096), mk(4096, 4096), mk(4096, 4096)};
    struct hy_tensor lm[3] = {mk(128192, 128), mk(128192, 128), mk(128192, 128)};
    struct hy_tensor gm[1] = {mk(4096, 4096)};
    for (int isa = 0; isa < HY_ISA_COUNT; isa++) {
        struct hy_kernel_table k;
        if (hy_kernels_table_for((enum hy_isa)isa, &k))
            continue;
        for (int th = 1; th <= 2; th++) {
            omp_set_num_threads(th);
            double a = run(&k, g, 3, 1, reps), ac = best_cpu;
            double b = run(&k, lm, 3, 1, reps), bc = best_cpu;
            double c = run(&k, gm, 1, 128, isa == HY_ISA_REF ? 2 : 4), cc = best_cpu;
            printf("%-5s threads=%d  gemv bf16 4096x4096: %6.2f GB/s  lm_head 128192x128: %6.2f GB/s  "
                   "gemm T=128 4096x4096: %6.1f GFLOP/s\n",
                   k.name, th, 4096.0 * 4096 * 2 / a / 1e9, 128192.0 * 128 * 2 / b / 1e9,
                   2.0 * 128 * 4096 * 4096 / c / 1e9);
            if (th == 1)
                printf("%-5s threads=1  (cpu) gemv %6.2f GB/s  lm_head %6.2f GB/s  gemm %6.1f GFLOP/s\n", k.name,
                       4096.0 * 4096 * 2 / ac / 1e9, 128192.0 * 128 * 2 / bc / 1e9, 2.0 * 128 * 4096 * 4096 / cc / 1e9);
            fflush(stdout);
        }
    }
    return 0;
}
