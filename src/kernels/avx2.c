/* avx2.c - AVX2 + FMA + F16C kernels (HYINFER_ISA=avx2). Compiled with per-function target
 * attributes; dispatch.c only selects them when hy_cpu_supports(HY_ISA_AVX2).
 *
 * Matmul reduction order (the batch-invariance contract, kernel_table.h): every y[t,n] is one
 * 8-lane FMA chain acc = fma(x[k], w[k], acc), lane j taking k = j, j+8, ... in increasing k, the
 * last partial chunk zero-padded, then hy_avx2_hsum. The decode path (T <= 32: weights streamed from
 * memory and widened in registers, 4 rows x 3 tokens in flight) and the prefill path (T > 32: a block of rows
 * widened once to f32 and reused for all T rows, 3x4 register tiles) run exactly that chain, so the
 * result of a row never depends on T or on the other rows. Threads split N only.
 * Quantized weights (FP8 / MXFP8 / MXFP4, avx2_quant.c) are widened to their exact f32 values and
 * run through the same chains: decode in avx2_quant.c, prefill here on widened 16-row panels. */
#if defined(__x86_64__)

#include "kernels/avx2_common.h"
#include "kernels/avx2_quant.h"
#include "kernels/kernel_table.h"
#include "kernels/task_rows.h"
#include "kernels/w4a8.h"
#include "kernels/scratch.h"

/* Per-thread buffers of the GEMM path, kept between calls (no allocation per call): the aligned copy
 * of x and its finite-row flags (calling thread), each thread's widened weight block and accumulators. */
static _Thread_local struct hy_scratch xp_buf, ok_buf, wbuf_buf, acc_buf;

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef HY_PF_DIST
#define HY_PF_DIST                                                                                                     \
    0 /* bytes ahead to prefetch streamed 16-bit weight rows; 0 = off (the hardware prefetcher does as
                      * well: docs/tuning.md) */
#endif

/* y[i*ldy + j] = dot(x row i, w row j) for i < MR tokens, j < NR weight rows (MR <= 3, NR <= 4).
 * x rows at x + i*ldx (f32), w rows at element offset j*ldw of w (dtype dt), K elements. */
HY_AVX2_INLINE void tile(enum hy_dtype dt, const int MR, const int NR, const float *x, int64_t ldx, const void *w,
                         int64_t ldw, int64_t K, float *y, int64_t ldy)
{
    __m256 acc[3][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            acc[i][j] = _mm256_setzero_ps();
    const int64_t K8 = K & ~(int64_t)7;
    for (int64_t k = 0; k < K8; k += 8) {
        __m256 xv[3];
        if (dt != HY_DTYPE_F32 && HY_PF_DIST > 0)
#pragma GCC unroll 4
            for (int j = 0; j < NR; j++)
                _mm_prefetch((const char *)w + (j * ldw + k) * 2 + HY_PF_DIST, _MM_HINT_T0);
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = _mm256_loadu_ps(x + i * ldx + k);
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            const __m256 wv = hy_avx2_load(dt, w, j * ldw + k);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
        }
    }
    if (K8 < K) {
        __m256 xv[3];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = hy_avx2_load_tail(HY_DTYPE_F32, x + i * ldx, K8, K - K8);
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            const __m256 wv = hy_avx2_load_tail(dt, w, j * ldw + K8, K - K8);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            y[i * ldy + j] = hy_avx2_hsum(acc[i][j]);
}

/* Instantiates tile() for constant MR x NR and one weight dtype. */
#define TILE_CASES(DT, MR)                                                                                             \
    case (MR)*8 + 1:                                                                                                   \
        tile(DT, MR, 1, x, ldx, w, ldw, K, y, ldy);                                                                    \
        break;                                                                                                         \
    case (MR)*8 + 2:                                                                                                   \
        tile(DT, MR, 2, x, ldx, w, ldw, K, y, ldy);                                                                    \
        break;                                                                                                         \
    case (MR)*8 + 3:                                                                                                   \
        tile(DT, MR, 3, x, ldx, w, ldw, K, y, ldy);                                                                    \
        break;                                                                                                         \
    case (MR)*8 + 4:                                                                                                   \
        tile(DT, MR, 4, x, ldx, w, ldw, K, y, ldy);                                                                    \
        break;

#define DEF_TILE_FN(NAME, DT)                                                                                          \
    static HY_AVX2 void NAME(int mr, int nr, const float *x, int64_t ldx, const void *w, int64_t ldw, int64_t K,       \
                             float *y, int64_t ldy)                                                                    \
    {                                                                                                                  \
        switch (mr * 8 + nr) {                                                                                         \
            TILE_CASES(DT, 1)                                                                                          \
            TILE_CASES(DT, 2)                                                                                          \
            TILE_CASES(DT, 3)                                                                                          \
        default:                                                                                                       \
            break;                                                                                                     \
        }                                                                                                              \
    }

DEF_TILE_FN(tile_f32, HY_DTYPE_F32)
DEF_TILE_FN(tile_bf16, HY_DTYPE_BF16)
DEF_TILE_FN(tile_f16, HY_DTYPE_F16)

/* The prefill microkernel: continues the 8-lane chains acc[i*ldacc + j] (8 floats each, kept
 * between calls) over chunks k in [k0, k1) of f32 rows, k0 a multiple of 8; the zero-padded tail
 * chunk of K is taken when k1 == K. Same operations, in the same order, as tile(). */
HY_AVX2_INLINE void tile_part(const int MR, const int NR, const float *x, int64_t ldx, const float *w, int64_t ldw,
                              int64_t k0, int64_t k1, int64_t K, float *acc, int64_t ldacc)
{
    __m256 a[3][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            a[i][j] = _mm256_loadu_ps(acc + (i * ldacc + j) * 8);
    const int64_t K8 = K & ~(int64_t)7, kend = k1 < K8 ? k1 : K8;
#pragma GCC unroll 2
    for (int64_t k = k0; k < kend; k += 8) {
        __m256 xv[3];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = _mm256_loadu_ps(x + i * ldx + k);
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            const __m256 wv = _mm256_loadu_ps(w + j * ldw + k);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                a[i][j] = _mm256_fmadd_ps(xv[i], wv, a[i][j]);
        }
    }
    if (k1 == K && K8 < K) {
        __m256 xv[3];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = hy_avx2_load_tail(HY_DTYPE_F32, x + i * ldx, K8, K - K8);
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            const __m256 wv = hy_avx2_load_tail(HY_DTYPE_F32, w, j * ldw + K8, K - K8);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                a[i][j] = _mm256_fmadd_ps(xv[i], wv, a[i][j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            _mm256_storeu_ps(acc + (i * ldacc + j) * 8, a[i][j]);
}

#define PART_CASES(MR)                                                                                                 \
    case (MR)*8 + 1:                                                                                                   \
        tile_part(MR, 1, x, ldx, w, ldw, k0, k1, K, acc, ldacc);                                                       \
        break;                                                                                                         \
    case (MR)*8 + 2:                                                                                                   \
        tile_part(MR, 2, x, ldx, w, ldw, k0, k1, K, acc, ldacc);                                                       \
        break;                                                                                                         \
    case (MR)*8 + 3:                                                                                                   \
        tile_part(MR, 3, x, ldx, w, ldw, k0, k1, K, acc, ldacc);                                                       \
        break;                                                                                                         \
    case (MR)*8 + 4:                                                                                                   \
        tile_part(MR, 4, x, ldx, w, ldw, k0, k1, K, acc, ldacc);                                                       \
        break;

static HY_AVX2 void tile_part_fn(int mr, int nr, const float *x, int64_t ldx, const float *w, int64_t ldw, int64_t k0,
                                 int64_t k1, int64_t K, float *acc, int64_t ldacc)
{
    switch (mr * 8 + nr) {
        PART_CASES(1)
        PART_CASES(2)
        PART_CASES(3)
    default:
        break;
    }
}

typedef void (*tile_fn)(int, int, const float *, int64_t, const void *, int64_t, int64_t, float *, int64_t);

float HY_AVX2 hy_avx2_dot_f32(const float *a, const float *b, int64_t n)
{
    float y;
    tile_f32(1, 1, a, 0, b, 0, n, &y, 0);
    return y;
}

/* Widens rows [n0, n0+nb) of W (any kernel dtype) to f32 rows of stride ldw (zero-padded past K), with the
 * same per-chunk conversions tile() uses, so both paths see identical values. */
static HY_AVX2 void widen_rows(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst)
{
    const int64_t K = W->cols, K8 = K & ~(int64_t)7;
    if (W->qscheme != HY_QS_NONE || !hy_dtype_is_kernel_float(W->dtype)) { /* FP8 / MXFP8 / MXFP4 */
        hy_avx2q_widen_rows(W, n0, nb, ldw, dst);
        return;
    }
    for (int64_t r = 0; r < nb; r++) {
        const int64_t off = (n0 + r) * K;
        float *d = dst + r * ldw;
        if (W->dtype == HY_DTYPE_BF16)
            for (int64_t k = 0; k < K8; k += 8)
                _mm256_storeu_ps(d + k, hy_avx2_load(HY_DTYPE_BF16, W->data, off + k));
        else if (W->dtype == HY_DTYPE_F16)
            for (int64_t k = 0; k < K8; k += 8)
                _mm256_storeu_ps(d + k, hy_avx2_load(HY_DTYPE_F16, W->data, off + k));
        else
            memcpy(d, (const float *)W->data + off, (size_t)K8 * sizeof(float));
        if (K8 < K)
            _mm256_storeu_ps(d + K8, hy_avx2_load_tail(W->dtype, W->data, off + K8, K - K8));
    }
}

/* Up to this many tokens the streaming path (weights widened in registers, per 4-row group) beats
 * widening blocks to f32 panels (docs/tuning.md); kept at 32 so long prefills still take the blocked
 * GEMM. */
#define HY_STREAM_MAX_T 32
/* Blocking of the prefill path (overridable with -D for experiments; the figures: docs/tuning.md).
 * GEMM_KC 1024: fewer parkings of the 12 chains per tile outweigh the w slice (16 x 1024 f32 = 64 KiB)
 * no longer fitting L1. */
#ifndef GEMM_NB
#define GEMM_NB 32 /* weight rows widened per block (32 x K f32: 512 KiB at K = 4096) */
#endif
#ifndef GEMM_TB
#define GEMM_TB 48 /* tokens per block (parked chains: 48 x 16 x 32 B = 24 KiB) */
#endif
#ifndef GEMM_KC
#define GEMM_KC 1024 /* k slice (multiple of 8) */
#endif

void HY_AVX2 hy_avx2_matmul(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    const int quant = W->qscheme != HY_QS_NONE || !hy_dtype_is_kernel_float(W->dtype);
    if (quant && !hy_avx2q_supported(W)) { /* not a format with AVX2 kernels */
        hy_ref_matmul(y, x, T, W);
        return;
    }
    if (quant && hy_w4a8_on(W)) { /* opt-in W4A8 */
        hy_avx2_matmul_w4a8(y, x, T, W);
        return;
    }
    if (quant && T <= 2) { /* decode: quantized blocks widened in registers (avx2_quant.c) */
        hy_avx2q_gemv(y, x, T, W);
        return;
    }
    const int64_t N = W->rows, K = W->cols;
    const enum hy_dtype dt = W->dtype;
    const size_t es = dt == HY_DTYPE_F32 ? 4 : 2;
    const int par = (double)N * (double)K * (double)T > 65536.0;
    (void)par;
    const tile_fn fn = dt == HY_DTYPE_F32 ? tile_f32 : dt == HY_DTYPE_BF16 ? tile_bf16 : tile_f16;
    if (!quant && T <= HY_STREAM_MAX_T) { /* decode: stream each weight row once, 4 rows x up to 3 tokens in flight;
                                 * the 4 rows are re-read from cache for the next 3 tokens */
        const int64_t groups = (N + 3) / 4;
        /* dynamic tasks (task_rows.h): a thread that loses its core on a shared machine does not hold up
         * the step; which thread computes a row never changes its result */
        const int64_t task_groups = hy_task_groups(W);
#pragma omp parallel for schedule(dynamic, task_groups) if (par)
        for (int64_t g = 0; g < groups; g++) {
            const int64_t n0 = g * 4;
            const int nr = (int)(N - n0 < 4 ? N - n0 : 4);
            for (int64_t t = 0; t < T; t += 3)
                fn((int)(T - t < 3 ? T - t : 3), nr, x + t * K, K, (const char *)W->data + (size_t)(n0 * K) * es, K, K,
                   y + t * N + n0, N);
        }
        return;
    }
    /* prefill: per block of GEMM_NB weight rows, widen (or copy) once to f32; then per block of GEMM_TB
     * tokens and GEMM_KC-wide k slices (w slice 16 x GEMM_KC f32), 3 tokens x 4 rows register tiles
     * whose chains are parked in acc between k slices; horizontal sums at the end. */
    /* row stride padded by 64 bytes so the 16 rows of a k slice do not all map to the same L1 sets */
    const int64_t ldw = ((K + 7) & ~(int64_t)7) + 16, blocks = (N + GEMM_NB - 1) / GEMM_NB;
    /* x copied once to 64-byte aligned rows of the same padded stride (the caller's rows may be
     * only 16-byte aligned: every other 32-byte load would split a cache line); per-tensor FP8 in the
     * raw scheme (avx2_quant.h): rows times c, raw panels, tokens whose scaled row is not finite
     * recomputed with exact values at the end */
    float fold_c = 0.0f;
    const int fold = quant && hy_avx2q_fold_scale(W, &fold_c);
    float *xp = hy_scratch_get(&xp_buf, (size_t)T * (size_t)ldw * sizeof(float));
    uint8_t *ok = fold ? hy_scratch_get(&ok_buf, (size_t)T) : NULL;
    if (fold && (!xp || !ok)) { /* out of memory: the streaming tiles (same chains) */
        hy_avx2q_rows(y, N, x, K, T, W, 0, N);
        return;
    }
    const float *xs = xp ? xp : x; /* out of memory: use the caller's rows */
    const int64_t ldx = xp ? ldw : K;
    if (fold)
        hy_avx2q_scale_rows(x, K, T, K, fold_c, xp, ldw, ok);
    else
        for (int64_t t = 0; xp && t < T; t++)
            memcpy(xp + t * ldw, x + t * K, (size_t)K * sizeof(float));
#pragma omp parallel if (par)
    {
        /* 64-byte aligned: 32-byte loads never split a cache line */
        float *wbuf = hy_scratch_get(&wbuf_buf, (size_t)GEMM_NB * (size_t)ldw * sizeof(float));
        float *acc = hy_scratch_get(&acc_buf, (size_t)GEMM_TB * GEMM_NB * 8 * sizeof(float));
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t n0 = b * GEMM_NB, nb = N - n0 < GEMM_NB ? N - n0 : GEMM_NB;
            if ((!wbuf || !acc) && quant) { /* out of memory: the streaming kernels (same chains) */
                hy_avx2q_rows(y + n0, N, x, K, T, W, n0, nb);
                continue;
            }
            if (!wbuf || !acc) {
                for (int64_t t = 0; t < T; t += 3)
                    for (int64_t j = 0; j < nb; j += 4)
                        fn((int)(T - t < 3 ? T - t : 3), (int)(nb - j < 4 ? nb - j : 4), x + t * K, K,
                           (const char *)W->data + (size_t)((n0 + j) * K) * es, K, K, y + t * N + n0 + j, N);
                continue;
            }
            const float *wp = wbuf;
            if (fold)
                hy_avx2q_widen_rows_raw(W, n0, nb, ldw, wbuf);
            else
                widen_rows(W, n0, nb, ldw, wbuf);
            for (int64_t t0 = 0; t0 < T; t0 += GEMM_TB) {
                const int64_t tb = T - t0 < GEMM_TB ? T - t0 : GEMM_TB;
                memset(acc, 0, (size_t)(tb * GEMM_NB * 8) * sizeof(float));
                for (int64_t k0 = 0; k0 < K; k0 += GEMM_KC) {
                    const int64_t k1 = K - k0 < GEMM_KC ? K : k0 + GEMM_KC;
                    for (int64_t t = 0; t < tb; t += 3) {
                        const int mr = (int)(tb - t < 3 ? tb - t : 3);
                        for (int64_t j = 0; j < nb; j += 4)
                            tile_part_fn(mr, (int)(nb - j < 4 ? nb - j : 4), xs + (t0 + t) * ldx, ldx, wp + j * ldw,
                                         ldw, k0, k1, K, acc + (t * GEMM_NB + j) * 8, GEMM_NB);
                    }
                }
                for (int64_t t = 0; t < tb; t++)
                    for (int64_t j = 0; j < nb; j++)
                        y[(t0 + t) * N + n0 + j] = hy_avx2_hsum(_mm256_loadu_ps(acc + (t * GEMM_NB + j) * 8));
            }
        }
    }
    for (int64_t t = 0; fold && t < T; t++)
        if (!ok[t])
            hy_avx2q_rows(y + t * N, N, x + t * K, K, 1, W, 0, N);
}

/* Outputs [n0, n1) on the calling thread: the decode path's register tiles (4 weight rows streamed
 * once, up to 3 tokens per pass; same chains as hy_avx2_matmul). Quantized weights at T <= 2 (the
 * MoE bands of a decode step) go straight to hy_avx2q_rows, the tiles of hy_avx2_matmul's decode
 * branch (the row view's dispatch, OpenMP region and output copy cost microseconds per band:
 * docs/tuning.md), opt-in W4A8 to its rows entry point (any T); every other
 * quantized case goes through hy_avx2_matmul on the row view. */
void HY_AVX2 hy_avx2_matmul_rows(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W,
                                 int64_t n0, int64_t n1)
{
    if (W->qscheme != HY_QS_NONE || !hy_dtype_is_kernel_float(W->dtype)) {
        if (hy_w4a8_on(W))
            hy_avx2_matmul_rows_w4a8(y, ldy, x, T, W, n0, n1);
        else if (T <= 2 && n1 > n0 && hy_avx2q_supported(W))
            hy_avx2q_rows(y, ldy, x, W->cols, T, W, n0, n1 - n0);
        else
            hy_matmul_rows_by_view(hy_avx2_matmul, y, ldy, x, T, W, n0, n1);
        return;
    }
    const int64_t K = W->cols;
    const size_t es = W->dtype == HY_DTYPE_F32 ? 4 : 2;
    const tile_fn fn = W->dtype == HY_DTYPE_F32 ? tile_f32 : W->dtype == HY_DTYPE_BF16 ? tile_bf16 : tile_f16;
    for (int64_t n = n0; n < n1; n += 4) {
        const int nr = (int)(n1 - n < 4 ? n1 - n : 4);
        const char *w = (const char *)W->data + (size_t)(n * K) * es;
        for (int64_t t = 0; t < T; t += 3)
            fn((int)(T - t < 3 ? T - t : 3), nr, x + t * K, K, w, K, K, y + t * ldy + (n - n0), ldy);
    }
}

void HY_AVX2 hy_avx2_rmsnorm(float *y, const float *x, const float *w, int64_t T, int64_t d, float eps)
{
    const int64_t d8 = d & ~(int64_t)7;
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * d;
        float *yr = y + t * d;
        const float ss = hy_avx2_dot_f32(xr, xr, d);
        const float inv = 1.0f / sqrtf(ss / (float)d + eps);
        const __m256 iv = _mm256_set1_ps(inv);
        for (int64_t i = 0; i < d8; i += 8)
            _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(_mm256_loadu_ps(xr + i), iv)));
        for (int64_t i = d8; i < d; i++)
            yr[i] = w[i] * (xr[i] * inv);
    }
}

void HY_AVX2 hy_avx2_rope(float *x, int64_t n_heads, int64_t head_dim, int32_t pos, const float *inv_freq,
                          int interleaved)
{
    const int64_t half = head_dim / 2;
    if (half > 256) {
        hy_ref_rope(x, n_heads, head_dim, pos, inv_freq, interleaved);
        return;
    }
    float c[512], s[512]; /* NeoX: c[i]; interleaved: c[2i] = c[2i+1] */
    for (int64_t i = 0; i < half; i++) {
        const float ang = (float)pos * inv_freq[i];
        const float ci = cosf(ang), si = sinf(ang);
        if (interleaved) {
            c[2 * i] = c[2 * i + 1] = ci;
            s[2 * i] = s[2 * i + 1] = si;
        } else {
            c[i] = ci;
            s[i] = si;
        }
    }
    for (int64_t h = 0; h < n_heads; h++) {
        float *v = x + h * head_dim;
        if (interleaved) { /* (v[2i], v[2i+1]) -> (x0 c - x1 s, x1 c + x0 s) via addsub */
            const int64_t n8 = (2 * half) & ~(int64_t)7;
            for (int64_t i = 0; i < n8; i += 8) {
                const __m256 xv = _mm256_loadu_ps(v + i);
                const __m256 xs = _mm256_permute_ps(xv, 0xB1);
                _mm256_storeu_ps(v + i, _mm256_addsub_ps(_mm256_mul_ps(xv, _mm256_loadu_ps(c + i)),
                                                         _mm256_mul_ps(xs, _mm256_loadu_ps(s + i))));
            }
            for (int64_t i = n8 / 2; i < half; i++) {
                const float x0 = v[2 * i], x1 = v[2 * i + 1];
                v[2 * i] = x0 * c[2 * i] - x1 * s[2 * i];
                v[2 * i + 1] = x1 * c[2 * i] + x0 * s[2 * i];
            }
        } else {
            const int64_t h8 = half & ~(int64_t)7;
            for (int64_t i = 0; i < h8; i += 8) {
                const __m256 x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + half + i);
                const __m256 cv = _mm256_loadu_ps(c + i), sv = _mm256_loadu_ps(s + i);
                _mm256_storeu_ps(v + i, _mm256_sub_ps(_mm256_mul_ps(x0, cv), _mm256_mul_ps(x1, sv)));
                _mm256_storeu_ps(v + half + i, _mm256_add_ps(_mm256_mul_ps(x1, cv), _mm256_mul_ps(x0, sv)));
            }
            for (int64_t i = h8; i < half; i++) {
                const float x0 = v[i], x1 = v[i + half];
                v[i] = x0 * c[i] - x1 * s[i];
                v[i + half] = x1 * c[i] + x0 * s[i];
            }
        }
    }
}

void HY_AVX2 hy_avx2_silu_mul(float *out, const float *gate, const float *up, int64_t n)
{
    const int64_t n8 = n & ~(int64_t)7;
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (int64_t i = 0; i < n8; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 e = hy_avx2_exp(_mm256_sub_ps(zero, g));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
    }
    if (n8 < n) {
        float g[8] = {0}, u[8] = {0}, o[8];
        memcpy(g, gate + n8, (size_t)(n - n8) * sizeof(float));
        memcpy(u, up + n8, (size_t)(n - n8) * sizeof(float));
        hy_avx2_silu_mul(o, g, u, 8);
        memcpy(out + n8, o, (size_t)(n - n8) * sizeof(float));
    }
}

void HY_AVX2 hy_avx2_round_bf16(float *x, int64_t n)
{
    const int64_t n8 = n & ~(int64_t)7;
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000), one = _mm256_set1_epi32(1),
                  bias = _mm256_set1_epi32(0x7fff), hi = _mm256_set1_epi32((int)0xffff0000u),
                  quiet = _mm256_set1_epi32(0x00400000);
    for (int64_t i = 0; i < n8; i += 8) {
        const __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absm), inf);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        const __m256i r = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), hi);
        const __m256i q = _mm256_or_si256(_mm256_and_si256(u, hi), quiet);
        _mm256_storeu_si256((__m256i *)(x + i), _mm256_blendv_epi8(r, q, nan));
    }
    for (int64_t i = n8; i < n; i++)
        x[i] = hy_round_bf16(x[i]);
}

#endif /* __x86_64__ */
