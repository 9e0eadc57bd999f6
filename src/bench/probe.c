/* probe.c - CPU unit detection, read-bandwidth probe and peak-FLOP probes (see probe.h). */
#include "bench/probe.h"

#include "base/err.h"
#include "base/timing.h"

#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

void hy_bench_cpu_detect(struct hy_cpu_units *u)
{
    memset(u, 0, sizeof(*u));
    unsigned a, b, c, d;
    if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        uint32_t w[12];
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &w[4 * i], &w[4 * i + 1], &w[4 * i + 2], &w[4 * i + 3]);
        memcpy(u->brand, w, 48);
        u->brand[48] = '\0';
        char *s = u->brand; /* brand strings are space-padded on the left on some parts */
        while (*s == ' ')
            s++;
        memmove(u->brand, s, strlen(s) + 1);
    }
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    const int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    if (!osxsave || !avx)
        return;
    const uint64_t xcr0 = xgetbv0();
    const int os_ymm = (xcr0 & 0x6) == 0x6, os_zmm = (xcr0 & 0xE6) == 0xE6, os_tile = (xcr0 & 0x60000) == 0x60000;
    unsigned b7 = 0, c7 = 0, d7 = 0, a71 = 0, tmp;
    if (!__get_cpuid_count(7, 0, &tmp, &b7, &c7, &d7))
        return;
    __get_cpuid_count(7, 1, &a71, &tmp, &tmp, &tmp);
    u->avx2_fma = os_ymm && fma && ((b7 >> 5) & 1);
    u->avx512f = os_zmm && ((b7 >> 16) & 1);
    u->avx512_bf16 = u->avx512f && ((a71 >> 5) & 1);
    u->avx512_vnni = u->avx512f && ((b7 >> 30) & 1) && ((b7 >> 31) & 1) && ((c7 >> 11) & 1); /* BW, VL, VNNI */
    u->amx_cpuid = ((d7 >> 22) & 1) && ((d7 >> 24) & 1);
    if (u->amx_cpuid && os_tile && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0)
        u->amx_bf16 = 1;
}

/* ---- read bandwidth ---- */

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint8_t *p, size_t n)
{
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        s0 = _mm256_add_epi64(s0, _mm256_load_si256((const __m256i *)(p + i)));
        s1 = _mm256_add_epi64(s1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        s2 = _mm256_add_epi64(s2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        s3 = _mm256_add_epi64(s3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    s0 = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
    uint64_t r[4];
    _mm256_storeu_si256((__m256i *)r, s0);
    return r[0] + r[1] + r[2] + r[3];
}

static uint64_t sum_scalar(const uint8_t *p, size_t n)
{
    const uint64_t *q = (const uint64_t *)p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= n / 8; i += 4) {
        s0 += q[i];
        s1 += q[i + 1];
        s2 += q[i + 2];
        s3 += q[i + 3];
    }
    return s0 + s1 + s2 + s3;
}

int hy_bench_mem_bw(size_t bytes, int reps, double *gbs, double *best_s)
{
    bytes &= ~(size_t)4095;
    if (bytes < ((size_t)1 << 20))
        bytes = (size_t)1 << 20;
    if (reps < 1)
        reps = 1;
    /* 2 MiB-aligned and advised MADV_HUGEPAGE, like the weight arena of --load-format copy: the
     * probe then measures the memory the weights are read from, TLB behaviour included (a 4 KiB-paged
     * buffer reads slower and let copied weights show fractions above 1: docs/tuning.md) */
    const size_t huge = (size_t)2 << 20;
    uint8_t *buf = aligned_alloc(huge, (bytes + huge - 1) & ~(huge - 1));
#ifdef MADV_HUGEPAGE
    if (buf)
        madvise(buf, (bytes + huge - 1) & ~(huge - 1), MADV_HUGEPAGE); /* advisory */
#endif
    if (!buf)
        return hy_err_set("bench: cannot allocate the %zu-byte bandwidth buffer", bytes);
    const int avx2 = __builtin_cpu_supports("avx2");
    const size_t pages = bytes / 4096;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < pages; i++)
        memset(buf + i * 4096, (int)(i & 0x7f), 4096); /* first touch by the thread that reads it */
    double best = 1e30;
    volatile uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        uint64_t total = 0;
        double t0 = hy_time_now();
#pragma omp parallel reduction(+ : total)
        {
            const int nt = omp_get_num_threads(), id = omp_get_thread_num();
            const size_t lo = pages * (size_t)id / (size_t)nt, hi = pages * (size_t)(id + 1) / (size_t)nt;
            const uint8_t *p = buf + lo * 4096;
            const size_t n = (hi - lo) * 4096;
            total += avx2 ? sum_avx2(p, n) : sum_scalar(p, n);
        }
        double dt = hy_time_now() - t0;
        sink += total;
        if (dt < best)
            best = dt;
    }
    (void)sink;
    free(buf);
    *best_s = best;
    *gbs = (double)bytes / best / 1e9;
    return 0;
}

/* ---- peak FLOP probes: each returns the flops one thread did in `iters` iterations ---- */

/* 12 independent accumulator chains, written out so they stay in registers. */
#define CHAINS12(OP)                                                                                                   \
    do {                                                                                                               \
        c0 = OP(c0);                                                                                                   \
        c1 = OP(c1);                                                                                                   \
        c2 = OP(c2);                                                                                                   \
        c3 = OP(c3);                                                                                                   \
        c4 = OP(c4);                                                                                                   \
        c5 = OP(c5);                                                                                                   \
        c6 = OP(c6);                                                                                                   \
        c7 = OP(c7);                                                                                                   \
        c8 = OP(c8);                                                                                                   \
        c9 = OP(c9);                                                                                                   \
        c10 = OP(c10);                                                                                                 \
        c11 = OP(c11);                                                                                                 \
    } while (0)

/* The 12 accumulators summed with ADD in a fixed tree (the probes' results only feed a sink). */
#define SUM12(ADD)                                                                                                     \
    ADD(ADD(ADD(ADD(c0, c1), ADD(c2, c3)), ADD(ADD(c4, c5), ADD(c6, c7))), ADD(ADD(c8, c9), ADD(c10, c11)))

__attribute__((target("avx2,fma"))) static double run_fma(int64_t iters, float *sink)
{
    __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    /* distinct start values: identical chains would be merged into one by the compiler */
    __m256 c0 = _mm256_set1_ps(1.00f), c1 = _mm256_set1_ps(1.01f), c2 = _mm256_set1_ps(1.02f),
           c3 = _mm256_set1_ps(1.03f), c4 = _mm256_set1_ps(1.04f), c5 = _mm256_set1_ps(1.05f),
           c6 = _mm256_set1_ps(1.06f), c7 = _mm256_set1_ps(1.07f), c8 = _mm256_set1_ps(1.08f),
           c9 = _mm256_set1_ps(1.09f), c10 = _mm256_set1_ps(1.10f), c11 = _mm256_set1_ps(1.11f);
#define FMA256(c) _mm256_fmadd_ps(c, a, b)
    for (int64_t i = 0; i < iters; i++)
        CHAINS12(FMA256);
#undef FMA256
    __m256 s = SUM12(_mm256_add_ps);
    float r[8];
    _mm256_storeu_ps(r, s);
    *sink += r[0];
    return (double)iters * 12.0 * 8.0 * 2.0;
}

__attribute__((target("avx512f"))) static double run_avx512(int64_t iters, float *sink)
{
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    __m512 c0 = _mm512_set1_ps(1.00f), c1 = _mm512_set1_ps(1.01f), c2 = _mm512_set1_ps(1.02f),
           c3 = _mm512_set1_ps(1.03f), c4 = _mm512_set1_ps(1.04f), c5 = _mm512_set1_ps(1.05f),
           c6 = _mm512_set1_ps(1.06f), c7 = _mm512_set1_ps(1.07f), c8 = _mm512_set1_ps(1.08f),
           c9 = _mm512_set1_ps(1.09f), c10 = _mm512_set1_ps(1.10f), c11 = _mm512_set1_ps(1.11f);
#define FMA512(c) _mm512_fmadd_ps(c, a, b)
    for (int64_t i = 0; i < iters; i++)
        CHAINS12(FMA512);
#undef FMA512
    __m512 s = SUM12(_mm512_add_ps);
    *sink += _mm512_reduce_add_ps(s);
    return (double)iters * 12.0 * 16.0 * 2.0;
}

__attribute__((target("avx512f,avx512bf16"))) static double run_avx512bf16(int64_t iters, float *sink)
{
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3380); /* 1, ~6e-8 */
    __m512 c0 = _mm512_set1_ps(1.00f), c1 = _mm512_set1_ps(1.01f), c2 = _mm512_set1_ps(1.02f),
           c3 = _mm512_set1_ps(1.03f), c4 = _mm512_set1_ps(1.04f), c5 = _mm512_set1_ps(1.05f),
           c6 = _mm512_set1_ps(1.06f), c7 = _mm512_set1_ps(1.07f), c8 = _mm512_set1_ps(1.08f),
           c9 = _mm512_set1_ps(1.09f), c10 = _mm512_set1_ps(1.10f), c11 = _mm512_set1_ps(1.11f);
#define DPBF16(c) _mm512_dpbf16_ps(c, a, b)
    for (int64_t i = 0; i < iters; i++)
        CHAINS12(DPBF16);
#undef DPBF16
    __m512 s = SUM12(_mm512_add_ps);
    *sink += _mm512_reduce_add_ps(s);
    return (double)iters * 12.0 * 16.0 * 2.0 * 2.0; /* 16 lanes x 2 bf16 pairs x 2 flops */
}

/* AVX2 int8: the W8A8 kernel's chain per 32 byte pairs, maddubs (u8 x s8 -> pairs of i16) then madd with
 * ones (-> i32) and an add; 12 independent accumulators. */
__attribute__((target("avx2"))) static double run_avx2_i8(int64_t iters, float *sink)
{
    const __m256i a = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0,
            c9 = c0, c10 = c0, c11 = c0;
/* the accumulator's bytes are the signed operand: nothing is loop-invariant (maddubs saturates, no UB) */
#define I8STEP(c) _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(a, c), ones))
    for (int64_t i = 0; i < iters; i++)
        CHAINS12(I8STEP);
#undef I8STEP
    __m256i s = SUM12(_mm256_add_epi32);
    *sink += (float)_mm256_extract_epi32(s, 0);
    return (double)iters * 12.0 * 32.0 * 2.0;
}

/* AVX512-VNNI: vpdpbusd, 16 lanes x 4 u8 x s8 products each, 12 independent accumulators. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static double run_avx512vnni(int64_t iters, float *sink)
{
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0,
            c9 = c0, c10 = c0, c11 = c0;
#define DPBUSD(c) _mm512_dpbusd_epi32(c, a, b)
    for (int64_t i = 0; i < iters; i++)
        CHAINS12(DPBUSD);
#undef DPBUSD
    __m512i s = SUM12(_mm512_add_epi32);
    *sink += (float)_mm512_reduce_add_epi32(s);
    return (double)iters * 12.0 * 16.0 * 4.0 * 2.0;
}

struct tile_cfg {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* AMX-BF16: tiles 0..3 are 16x16 fp32 accumulators, 4..5 A tiles (16 rows x 32 bf16), 6..7 B tiles
 * (16 rows of 16 bf16 pairs); each tdpbf16ps does 16*16*32 multiply-adds. */
__attribute__((target("amx-tile,amx-bf16"))) static double run_amx(int64_t iters, float *sink)
{
    struct tile_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    static __thread uint16_t ab[16 * 32] __attribute__((aligned(64)));
    static __thread float cb[16 * 16] __attribute__((aligned(64)));
    for (int i = 0; i < 16 * 32; i++)
        ab[i] = 0x3380; /* small bf16 value */
    memset(cb, 0, sizeof(cb));
    _tile_loadconfig(&cfg);
    _tile_loadd(0, cb, 64);
    _tile_loadd(1, cb, 64);
    _tile_loadd(2, cb, 64);
    _tile_loadd(3, cb, 64);
    _tile_loadd(4, ab, 64);
    _tile_loadd(5, ab, 64);
    _tile_loadd(6, ab, 64);
    _tile_loadd(7, ab, 64);
    for (int64_t i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, cb, 64);
    _tile_release();
    *sink += cb[0];
    return (double)iters * 4.0 * 16.0 * 16.0 * 32.0 * 2.0;
}

typedef double (*probe_fn)(int64_t iters, float *sink);

/* Wall time of all threads running fn(iters); returns total flops. */
static double run_threads(probe_fn fn, int64_t iters, double *secs)
{
    double flops = 0.0;
    float sink = 0.0f;
    double t0 = hy_time_now();
#pragma omp parallel reduction(+ : flops, sink)
    flops += fn(iters, &sink);
    *secs = hy_time_now() - t0;
    volatile float keep = sink;
    (void)keep;
    return flops;
}

double hy_bench_peak_gflops(const struct hy_cpu_units *u, const char *unit, double min_s, double *flops, double *secs)
{
    probe_fn fn = NULL;
    int64_t iters = 1 << 16;
    if (!strcmp(unit, "fma") && u->avx2_fma)
        fn = run_fma;
    else if (!strcmp(unit, "avx512") && u->avx512f)
        fn = run_avx512;
    else if (!strcmp(unit, "avx512bf16") && u->avx512_bf16)
        fn = run_avx512bf16;
    else if (!strcmp(unit, "avx2_i8") && u->avx2_fma)
        fn = run_avx2_i8;
    else if (!strcmp(unit, "avx512vnni") && u->avx512_vnni)
        fn = run_avx512vnni;
    else if (!strcmp(unit, "amx") && u->amx_bf16) {
        fn = run_amx;
        iters = 1 << 10;
    }
    *flops = 0.0;
    *secs = 0.0;
    if (!fn)
        return 0.0;
    double s = 0.0;
    for (;;) { /* grow the iteration count until one run takes min_s */
        double f = run_threads(fn, iters, &s);
        if (s >= min_s || iters > ((int64_t)1 << 40))
            break;
        double grow = s > 0.0 ? 1.2 * min_s / s : 16.0;
        iters = (int64_t)((double)iters * (grow > 16.0 ? 16.0 : grow < 2.0 ? 2.0 : grow));
        (void)f;
    }
    double best = 0.0;
    for (int r = 0; r < 3; r++) {
        double f = run_threads(fn, iters, &s), g = f / s / 1e9;
        if (g > best) {
            best = g;
            *flops = f;
            *secs = s;
        }
    }
    return best;
}
