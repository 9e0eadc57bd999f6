/* avx512.c - AVX-512 F/BW/VL matmul, dot and RMSNorm kernels (HYINFER_ISA=avx512; also the
 * fp32-mode and decode kernels of the amx level). Compiled with per-function target attributes;
 * dispatch.c selects them only when hy_cpu_supports(HY_ISA_AVX512).
 *
 * Reduction order (the batch-invariance contract, kernel_table.h / avx512_common.h): every y[t,n] is
 * one 16-lane FMA chain acc = fma(x[k], w[k], acc), lane j taking k = j, j+16, ... in increasing k,
 * the last partial chunk zero-padded by masked loads, then hy_avx512_hsum. The decode path (T <= 32:
 * weights streamed and widened in registers, 4 rows x 4 tokens in flight) and the prefill path
 * (T > 32: 16-row blocks widened once to f32 panels, 4x4 register tiles whose chains are parked
 * between k slices) run exactly that chain, so a row's result never depends on T, on the path or on
 * the thread count (threads split N only). Quantized weights (FP8 / MXFP8 / MXFP4) are widened to
 * their exact f32 values (avx512_quant.c), per-tensor FP8 to its raw values with the scale folded
 * into x (the raw scheme, avx512_quant.h), and run through the same chains.
 * Rope, silu_mul, bf16 rounding and attention of this level are the avx2 kernels (dispatch.c).
 */
#if defined(__x86_64__)

#include "kernels/avx2_quant.h"
#include "kernels/avx512_common.h"
#include "kernels/avx512_quant.h"
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

/* y[i*ldy + j] = dot(x row i, w row j) for i < MR tokens, j < NR weight rows (MR, NR <= 4).
 * x rows at x + i*ldx (f32), w rows at element offset j*ldw of w (dtype dt), K elements. */
HY_AVX512_INLINE void tile(enum hy_dtype dt, const int MR, const int NR, const float *x, int64_t ldx, const void *w,
                           int64_t ldw, int64_t K, float *y, int64_t ldy)
{
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            acc[i][j] = _mm512_setzero_ps();
    const int64_t K16 = K & ~(int64_t)15;
    for (int64_t k = 0; k < K16; k += 16) {
        __m512 xv[4];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = _mm512_loadu_ps(x + i * ldx + k);
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            const __m512 wv = hy_avx512_load(dt, w, j * ldw + k);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
        }
    }
    if (K16 < K) {
        __m512 xv[4];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = hy_avx512_load_tail(HY_DTYPE_F32, x + i * ldx, K16, K - K16);
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            const __m512 wv = hy_avx512_load_tail(dt, w, j * ldw + K16, K - K16);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                acc[i][j] = _mm512_fmadd_ps(xv[i], wv, acc[i][j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            y[i * ldy + j] = hy_avx512_hsum(acc[i][j]);
}

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
    static HY_AVX512 void NAME(int mr, int nr, const float *x, int64_t ldx, const void *w, int64_t ldw, int64_t K,     \
                               float *y, int64_t ldy)                                                                  \
    {                                                                                                                  \
        switch (mr * 8 + nr) {                                                                                         \
            TILE_CASES(DT, 1)                                                                                          \
            TILE_CASES(DT, 2)                                                                                          \
            TILE_CASES(DT, 3)                                                                                          \
            TILE_CASES(DT, 4)                                                                                          \
        default:                                                                                                       \
            break;                                                                                                     \
        }                                                                                                              \
    }

DEF_TILE_FN(tile_f32, HY_DTYPE_F32)
DEF_TILE_FN(tile_bf16, HY_DTYPE_BF16)
DEF_TILE_FN(tile_f16, HY_DTYPE_F16)

typedef void (*tile_fn)(int, int, const float *, int64_t, const void *, int64_t, int64_t, float *, int64_t);

static tile_fn tile_for(enum hy_dtype dt)
{
    return dt == HY_DTYPE_F32 ? tile_f32 : dt == HY_DTYPE_BF16 ? tile_bf16 : tile_f16;
}

/* The prefill microkernel: continues the 16-lane chains acc[(i*ldacc + j) * 16 ..] (kept between
 * calls) over k in [k0, k1) of f32 panel rows (zero-padded to a multiple of 16, so the tail chunk is
 * a plain load of zeros past K), k0 a multiple of 16. Same operations, in the same order, as tile():
 * x's tail chunk is a masked load, w's padded zeros equal tile()'s masked zeros. */
HY_AVX512_INLINE void tile_part(const int MR, const int NR, const float *x, int64_t ldx, const float *w, int64_t ldw,
                                int64_t k0, int64_t k1, int64_t K, float *acc, int64_t ldacc)
{
    __m512 a[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            a[i][j] = _mm512_loadu_ps(acc + (i * ldacc + j) * 16);
    const int64_t K16 = K & ~(int64_t)15, kend = k1 < K16 ? k1 : K16;
#pragma GCC unroll 2
    for (int64_t k = k0; k < kend; k += 16) {
        __m512 xv[4];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = _mm512_loadu_ps(x + i * ldx + k);
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            const __m512 wv = _mm512_loadu_ps(w + j * ldw + k);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                a[i][j] = _mm512_fmadd_ps(xv[i], wv, a[i][j]);
        }
    }
    if (k1 == K && K16 < K) {
        __m512 xv[4];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = hy_avx512_load_tail(HY_DTYPE_F32, x + i * ldx, K16, K - K16);
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            const __m512 wv = _mm512_loadu_ps(w + j * ldw + K16);
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                a[i][j] = _mm512_fmadd_ps(xv[i], wv, a[i][j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            _mm512_storeu_ps(acc + (i * ldacc + j) * 16, a[i][j]);
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

static HY_AVX512 void tile_part_fn(int mr, int nr, const float *x, int64_t ldx, const float *w, int64_t ldw, int64_t k0,
                                   int64_t k1, int64_t K, float *acc, int64_t ldacc)
{
    switch (mr * 8 + nr) {
        PART_CASES(1)
        PART_CASES(2)
        PART_CASES(3)
        PART_CASES(4)
    default:
        break;
    }
}

float HY_AVX512 hy_avx512_dot_f32(const float *a, const float *b, int64_t n)
{
    float y;
    tile_f32(1, 1, a, 0, b, 0, n, &y, 0);
    return y;
}

void HY_AVX512 hy_avx512_widen_rows(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst)
{
    const int64_t K = W->cols, K16 = K & ~(int64_t)15;
    if (W->qscheme != HY_QS_NONE || !hy_dtype_is_kernel_float(W->dtype)) { /* FP8 / MXFP8 / MXFP4 */
        hy_avx512q_widen_rows(W, n0, nb, ldw, dst);
        return;
    }
    for (int64_t r = 0; r < nb; r++) {
        const int64_t off = (n0 + r) * K;
        float *d = dst + r * ldw;
        for (int64_t k = 0; k < K16; k += 16)
            _mm512_storeu_ps(d + k, hy_avx512_load(W->dtype, W->data, off + k));
        if (K16 < K)
            _mm512_storeu_ps(d + K16, hy_avx512_load_tail(W->dtype, W->data, off + K16, K - K16));
    }
}

/* Up to this many tokens the streaming path is taken (as in avx2.c; not tuned on AVX-512 hardware). */
#define HY512_STREAM_MAX_T 32
#define GEMM_NB 16   /* weight rows widened per block (16 x K f32: 256 KiB at K = 4096) */
#define GEMM_TB 48   /* tokens per block (parked chains: 48 x 16 x 64 B = 48 KiB) */
#define GEMM_KC 1024 /* k slice (multiple of 16; as avx2.c: docs/tuning.md) */

/* 1 if W is not a plain F32/F16/BF16 tensor. */
static int is_quant(const struct hy_tensor *W)
{
    return W->qscheme != HY_QS_NONE || !hy_dtype_is_kernel_float(W->dtype);
}

void HY_AVX512 hy_avx512_matmul(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    const int quant = is_quant(W);
    if (quant && !hy_avx512q_supported(W)) { /* not a format with vector kernels */
        hy_ref_matmul(y, x, T, W);
        return;
    }
    if (quant && hy_w4a8_on(W)) { /* opt-in W4A8 */
        hy_avx2_matmul_w4a8(y, x, T, W);
        return;
    }
    const int64_t N = W->rows, K = W->cols;
    const int par = (double)N * (double)K * (double)T > 65536.0;
    (void)par;
    if (T <= HY512_STREAM_MAX_T && quant) { /* decode, quantized: the raw scheme's rows scaled once */
        hy_avx512q_gemv(y, x, T, W);
        return;
    }
    if (T <= HY512_STREAM_MAX_T) { /* decode: 4 weight rows streamed once per group, up to 4 tokens per pass */
        const int64_t groups = (N + 3) / 4;
        /* dynamic tasks (task_rows.h): a thread that loses its core on a shared machine does not hold up
         * the step; which thread computes a row never changes its result */
        const int64_t task_groups = hy_task_groups(W);
#pragma omp parallel for schedule(dynamic, task_groups) if (par)
        for (int64_t g = 0; g < groups; g++) {
            const int64_t n0 = g * 4, nr = N - n0 < 4 ? N - n0 : 4;
            hy_avx512_matmul_rows(y + n0, N, x, T, W, n0, n0 + nr);
        }
        return;
    }
    /* prefill: per block of GEMM_NB rows, widen once to a zero-padded f32 panel; per block of
     * GEMM_TB tokens and GEMM_KC-wide k slices, 4 tokens x 4 rows register tiles whose chains are
     * parked in acc between slices; horizontal sums at the end. Row stride padded by 64 bytes so the
     * 16 rows of a slice do not share L1 sets. */
    const int64_t Kp = (K + 15) & ~(int64_t)15, ldw = Kp + 16, blocks = (N + GEMM_NB - 1) / GEMM_NB;
    /* x copied once to 64-byte aligned rows (no 64-byte load splits a cache line); per-tensor FP8 in
     * the raw scheme (avx512_quant.h): rows times c, raw panels, tokens whose scaled row is not
     * finite recomputed with exact values at the end */
    float fold_c = 0.0f;
    const int fold = quant && hy_avx2q_fold_scale(W, &fold_c);
    float *xp = hy_scratch_get(&xp_buf, (size_t)T * (size_t)ldw * sizeof(float));
    uint8_t *ok = fold ? hy_scratch_get(&ok_buf, (size_t)T) : NULL;
    if (fold && (!xp || !ok)) { /* out of memory: the streaming tiles (same chains while their scratch for
                                   the scaled rows can be had; else every token exact) */
        hy_avx512q_rows(y, N, x, K, T, W, 0, N);
        return;
    }
    const float *xs = xp ? xp : x; /* out of memory: the caller's rows */
    const int64_t ldx = xp ? ldw : K;
    if (fold)
        hy_avx2q_scale_rows(x, K, T, K, fold_c, xp, ldw, ok);
    else
        for (int64_t t = 0; xp && t < T; t++)
            memcpy(xp + t * ldw, x + t * K, (size_t)K * sizeof(float));
#pragma omp parallel if (par)
    {
        float *wbuf = hy_scratch_get(&wbuf_buf, (size_t)GEMM_NB * (size_t)ldw * sizeof(float));
        float *acc = hy_scratch_get(&acc_buf, (size_t)GEMM_TB * GEMM_NB * 16 * sizeof(float));
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t n0 = b * GEMM_NB, nb = N - n0 < GEMM_NB ? N - n0 : GEMM_NB;
            if (!wbuf || !acc) { /* out of memory: the streaming kernels (same chains, for per-tensor FP8
                                    while their scratch for the scaled rows can be had) */
                if (quant)
                    hy_avx512q_rows(y + n0, N, x, K, T, W, n0, nb);
                else
                    hy_avx512_matmul_rows(y + n0, N, x, T, W, n0, n0 + nb);
                continue;
            }
            if (fold)
                hy_avx512q_widen_rows_raw(W, n0, nb, ldw, wbuf);
            else
                hy_avx512_widen_rows(W, n0, nb, ldw, wbuf);
            for (int64_t t0 = 0; t0 < T; t0 += GEMM_TB) {
                const int64_t tb = T - t0 < GEMM_TB ? T - t0 : GEMM_TB;
                memset(acc, 0, (size_t)(tb * GEMM_NB * 16) * sizeof(float));
                for (int64_t k0 = 0; k0 < K; k0 += GEMM_KC) {
                    const int64_t k1 = K - k0 < GEMM_KC ? K : k0 + GEMM_KC;
                    for (int64_t t = 0; t < tb; t += 4)
                        for (int64_t j = 0; j < nb; j += 4)
                            tile_part_fn((int)(tb - t < 4 ? tb - t : 4), (int)(nb - j < 4 ? nb - j : 4),
                                         xs + (t0 + t) * ldx, ldx, wbuf + j * ldw, ldw, k0, k1, K,
                                         acc + (t * GEMM_NB + j) * 16, GEMM_NB);
                }
                for (int64_t t = 0; t < tb; t++)
                    for (int64_t j = 0; j < nb; j++)
                        y[(t0 + t) * N + n0 + j] = hy_avx512_hsum(_mm512_loadu_ps(acc + (t * GEMM_NB + j) * 16));
            }
        }
    }
    for (int64_t t = 0; fold && t < T; t++)
        if (!ok[t])
            hy_avx512q_rows(y + t * N, N, x + t * K, K, 1, W, 0, N);
}

/* Outputs [n0, n1) on the calling thread through the decode tiles (same chains as hy_avx512_matmul). */
void HY_AVX512 hy_avx512_matmul_rows(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W,
                                     int64_t n0, int64_t n1)
{
    if (is_quant(W)) {
        if (hy_w4a8_on(W)) /* opt-in W4A8 (avx2 code) */
            hy_avx2_matmul_rows_w4a8(y, ldy, x, T, W, n0, n1);
        else if (!hy_avx512q_supported(W))
            hy_matmul_rows_by_view(hy_avx512_matmul, y, ldy, x, T, W, n0, n1);
        else
            hy_avx512q_rows(y, ldy, x, W->cols, T, W, n0, n1 - n0);
        return;
    }
    const int64_t K = W->cols;
    const size_t es = W->dtype == HY_DTYPE_F32 ? 4 : 2;
    const tile_fn fn = tile_for(W->dtype);
    for (int64_t n = n0; n < n1; n += 4) {
        const int nr = (int)(n1 - n < 4 ? n1 - n : 4);
        const char *w = (const char *)W->data + (size_t)(n * K) * es;
        for (int64_t t = 0; t < T; t += 4)
            fn((int)(T - t < 4 ? T - t : 4), nr, x + t * K, K, w, K, K, y + t * ldy + (n - n0), ldy);
    }
}

void HY_AVX512 hy_avx512_rmsnorm(float *y, const float *x, const float *w, int64_t T, int64_t d, float eps)
{
    const int64_t d16 = d & ~(int64_t)15;
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * d;
        float *yr = y + t * d;
        const float ss = hy_avx512_dot_f32(xr, xr, d);
        const float inv = 1.0f / sqrtf(ss / (float)d + eps);
        const __m512 iv = _mm512_set1_ps(inv);
        for (int64_t i = 0; i < d16; i += 16)
            _mm512_storeu_ps(yr + i, _mm512_mul_ps(_mm512_loadu_ps(w + i), _mm512_mul_ps(_mm512_loadu_ps(xr + i), iv)));
        for (int64_t i = d16; i < d; i++)
            yr[i] = w[i] * (xr[i] * inv);
    }
}

#endif /* __x86_64__ */
