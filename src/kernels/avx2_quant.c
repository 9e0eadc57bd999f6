/* avx2_quant.c - AVX2 + FMA + F16C matmul kernels for FP8 / MXFP8 / MXFP4 weights (avx2_quant.h).
 *
 * Element decoding (exact, checked against hy_tensor_get in tests/unit/test_kernels_quant.c). Both
 * routes avoid vcvtph2ps (its throughput made the kernels decode-bound: docs/tuning.md) and produce the 8 f32
 * of a chunk in natural k order, so the chain is the one of kernel_table.h:
 * - E4M3 byte b -> f32 bits (b & 0x80) << 24 | (b & 0x7f) << 20, which is exactly v * 2^-120 for
 *   every code (e = 0 lands on f32 subnormals m * 2^-129; no DAZ/FTZ here). One pshufb puts the
 *   bytes of elements j and j+8 into the two 16-bit halves of dword j, then shifts and a mask give
 *   elements 0-7 and 8-15. w = that * (s * 2^120): the same single rounding of v * s as ref's;
 *   per-tensor scales instead multiply x once per call (the raw scheme, avx2_quant.h: struct qcall).
 *   The NaN codes 0x7f / 0xff are detected per 32 bytes (a tile that has one is recomputed by
 *   tile_slow, a panel block by widen_scalar), except in tensors marked nan_free at load.
 * - E2M1: one pshufb spreads the 16 bytes of a block so that, after splitting nibbles, dword j
 *   holds the indices of elements j and j+8; two 16-entry pshufb LUTs give the high and low byte of
 *   the bf16 value, unpacking makes bf16 words, and shift / mask widen them to f32. With MX32 the
 *   LUTs are those of the block's E8M0 byte (tab_e2m1_lut: e * 2^(s-127) is exact in bf16), so no
 *   multiply; other scales multiply the f32 values.
 * - Scales: E4M3 MX32 -> 2^(s-127+120) from a 256-entry table; E4M3 blocks with 135 <= s <= 254
 *   (s * 2^120 overflows) and per-tensor scales whose * 2^120 overflows take the scalar
 *   hy_tensor_get, as do the last K % 32 elements of a row.
 * - Decode tiles (2 tokens x 4 rows) prefetch each row 4 rows ahead (see HYQ_PF_ROWS).
 * The widened values enter the 8-lane FMA chain of kernel_table.h in increasing k. */
#if defined(__x86_64__)

#include "kernels/avx2_quant.h"

#include "kernels/avx2_common.h"
#include "kernels/kernel_table.h"
#include "kernels/scratch.h"
#include "kernels/task_rows.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { Q_E4M3 = 0, Q_E2M1 = 1 };

static float tab_e8m0[256];     /* 2^(s-127); NaN at 255 */
static float tab_e8m0_120[256]; /* 2^(s-127+120) for s < 135, NaN at 255 (others unused) */
/* MXFP4: per E8M0 byte s, the bf16 high / low bytes of e2m1(n) * 2^(s-127) for the 16 codes n.
 * Those products have at most 2 significant bits, so bf16 holds them exactly (down to the f32
 * subnormals of s = 0, 1; inf / NaN included): the scale is applied by the LUT, not by a multiply. */
static uint8_t tab_e2m1_lut[256][2][16] __attribute__((aligned(16)));
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static void tab_init(void)
{
    for (int s = 0; s < 256; s++)
        for (int n = 0; n < 16; n++) {
            const float v = hy_e2m1_to_f32((uint8_t)n) * hy_e8m0_to_f32((uint8_t)s);
            uint32_t u;
            memcpy(&u, &v, 4);
            tab_e2m1_lut[s][0][n] = (uint8_t)(u >> 24);
            tab_e2m1_lut[s][1][n] = (uint8_t)(u >> 16);
        }
    for (int s = 0; s < 256; s++) {
        tab_e8m0[s] = hy_e8m0_to_f32((uint8_t)s);
        tab_e8m0_120[s] = s < 135 || s == 255 ? hy_e8m0_to_f32((uint8_t)s) * 0x1p120f : 0.0f;
    }
}

/* What a call needs to address rows and scales. */
struct qw {
    const struct hy_tensor *W;
    const uint8_t *data;
    const uint8_t *scales; /* MX32 */
    int64_t K, row_bytes, n_sb;
    float cscale; /* non-MX: the per-element multiplier (E4M3: times 2^120) */
    int scalar;   /* non-MX E4M3 whose scale * 2^120 overflows: every block scalar */
    int fold;     /* 1: the raw scheme (E4M3 values * 2^-120, cscale applied to x instead) */
    int nan_free; /* E4M3 checked free of NaN codes at load: no per-block NaN test */
    int64_t pf;   /* decode prefetch distance in bytes (HYQ_PF_ROWS rows) */
};

#ifndef HYQ_PF_ROWS
/* The decode tiles prefetch each row's bytes this many rows ahead (the same spot of the next 4-row
 * tile), one prefetch per 64 bytes: the hardware prefetcher alone does not run far enough ahead of
 * these decode-heavy loops (docs/tuning.md). */
#define HYQ_PF_ROWS 4
#endif

/* fold: 1 to take the raw scheme where the tensor allows it (hy_avx2q_fold_scale), 0 for exact values. */
static void qw_init(struct qw *q, const struct hy_tensor *W, int fold)
{
    pthread_once(&tab_once, tab_init);
    q->W = W;
    q->pf = HYQ_PF_ROWS * hy_tensor_row_bytes(W);
    q->data = W->data;
    q->scales = W->mx_scales;
    q->K = W->cols;
    q->row_bytes = hy_tensor_row_bytes(W);
    q->n_sb = (W->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK;
    const float s = W->qscheme == HY_QS_PER_TENSOR ? W->scale : 1.0f;
    q->cscale = W->dtype == HY_DTYPE_F8_E4M3 ? s * 0x1p120f : s;
    q->scalar = W->dtype == HY_DTYPE_F8_E4M3 && isfinite(s) && !isfinite(q->cscale);
    q->fold = fold && W->dtype == HY_DTYPE_F8_E4M3 && W->qscheme != HY_QS_MX32 && !q->scalar;
    q->nan_free = W->dtype == HY_DTYPE_F8_E4M3 && W->nan_free;
}

int hy_avx2q_fold_scale(const struct hy_tensor *W, float *c)
{
    struct qw q;
    qw_init(&q, W, 1);
    *c = q.cscale;
    return q.fold;
}

int hy_avx2q_supported(const struct hy_tensor *W)
{
    if (W->dtype != HY_DTYPE_F8_E4M3 && W->dtype != HY_DTYPE_F4_E2M1)
        return 0;
    if (W->qscheme == HY_QS_MX32)
        return W->mx_scales != NULL;
    return W->qscheme == HY_QS_NONE || W->qscheme == HY_QS_PER_TENSOR;
}

/* 32 E4M3 bytes at p -> w[0..3] = elements 0-7, 8-15, 16-23, 24-31 as v * 2^-120, times c when MUL
 * (c = scale * 2^120); with CHK, *nan gets 0xff bytes where a byte is a NaN code (or-accumulated). */
HY_AVX2_INLINE void dec32_e4m3(const int MUL, const int CHK, const uint8_t *p, __m256 c, __m256 w[4], __m256i *nan)
{
    /* words b << 8: dword j = (element j, element j + 8) of the 16 bytes */
    const __m256i sel = _mm256_setr_epi8(-1, 0, -1, 8, -1, 1, -1, 9, -1, 2, -1, 10, -1, 3, -1, 11, -1, 4, -1, 12, -1, 5,
                                         -1, 13, -1, 6, -1, 14, -1, 7, -1, 15);
    const __m256i m = _mm256_set1_epi32((int)0x87F00000u), hb = _mm256_set1_epi8((char)0x80);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m128i b = _mm_loadu_si128((const __m128i *)(p + 16 * h));
        const __m256i wd = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(b), sel);
        /* each word b << 8 -> arithmetic >> 4 (sign at 15..11, e and m at 10..4); the high word of a
         * dword is then element j + 8 at bits 31 and 20..26 under the mask, the low word shifted up
         * by 16 element j */
        const __m256i ws = _mm256_srai_epi16(wd, 4);
        w[2 * h] = _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(ws, 16), m));
        w[2 * h + 1] = _mm256_castsi256_ps(_mm256_and_si256(ws, m));
        if (MUL) {
            w[2 * h] = _mm256_mul_ps(w[2 * h], c);
            w[2 * h + 1] = _mm256_mul_ps(w[2 * h + 1], c);
        }
    }
    if (CHK) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)p);
        *nan = _mm256_or_si256(*nan, _mm256_cmpeq_epi8(_mm256_or_si256(v, hb), _mm256_set1_epi8(-1)));
    }
}

/* 16 bytes at p = 32 E2M1 nibbles (element 2j low) -> w[0..3] as above: the bf16 values given by
 * the high / low byte LUTs lh, ll (16 entries, both lanes), times c when MUL. */
HY_AVX2_INLINE void dec32_e2m1(const int MUL, const uint8_t *p, __m256i lh, __m256i ll, __m256 c, __m256 w[4])
{
    /* dword = (byte x, byte y, 0, 0) with x holding elements (i, i+1) and y elements (i+8, i+9) */
    const __m256i sel = _mm256_setr_epi8(0, 4, -1, -1, 1, 5, -1, -1, 8, 12, -1, -1, 9, 13, -1, -1, 2, 6, -1, -1, 3, 7,
                                         -1, -1, 10, 14, -1, -1, 11, 15, -1, -1);
    const __m256i t = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p)), sel);
    /* nibble split: dword = (lo x, lo y, hi x, hi y) = indices of elements (i, i+8, i+1, i+9) */
    const __m256i u = _mm256_and_si256(_mm256_or_si256(_mm256_slli_epi32(t, 12), t), _mm256_set1_epi8(0x0F));
    const __m256i H = _mm256_shuffle_epi8(lh, u), L = _mm256_shuffle_epi8(ll, u);
    /* bf16 words; dword j of wa = (element j, element j + 8), of wb the same + 16 */
    const __m256i wa = _mm256_unpacklo_epi8(L, H), wb = _mm256_unpackhi_epi8(L, H);
    const __m256i hm = _mm256_set1_epi32((int)0xFFFF0000u);
    w[0] = _mm256_castsi256_ps(_mm256_slli_epi32(wa, 16));
    w[1] = _mm256_castsi256_ps(_mm256_and_si256(wa, hm));
    w[2] = _mm256_castsi256_ps(_mm256_slli_epi32(wb, 16));
    w[3] = _mm256_castsi256_ps(_mm256_and_si256(wb, hm));
    if (MUL)
        for (int i = 0; i < 4; i++)
            w[i] = _mm256_mul_ps(w[i], c);
}

/* The LUT pair of E8M0 byte s (MX) or of the plain E2M1 values (scale applied by a multiply). */
HY_AVX2_INLINE void e2m1_luts(int s, __m256i *lh, __m256i *ll)
{
    *lh = _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)tab_e2m1_lut[s][0]));
    *ll = _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)tab_e2m1_lut[s][1]));
}

/* Elements [k0, k0+n) of row r (n <= 32) to tmp[0..32), zero-padded: exact (hy_tensor_get), or in
 * the raw scheme (q->fold) e4m3 * 2^-120 (exact too: E4M3 subnormals land on f32 subnormals). */
static void widen_scalar(const struct qw *q, int64_t r, int64_t k0, int64_t n, float *tmp)
{
    for (int64_t i = 0; i < 32; i++)
        tmp[i] = i >= n    ? 0.0f
                 : q->fold ? hy_e4m3_to_f32(q->data[r * q->row_bytes + k0 + i]) * 0x1p-120f
                           : hy_tensor_get(q->W, r, k0 + i);
}

/* The full 32-element block at k of row r, widened into w[4] (the prefill panels; the decode tiles
 * below inline the fast part and route the rare scalar cases to tile_slow). */
HY_AVX2_INLINE void block(const int E, const int MX, const struct qw *q, int64_t r, int64_t k, __m256 w[4])
{
    const uint8_t *row = q->data + r * q->row_bytes;
    int scalar = 0;
    __m256 c;
    if (MX) {
        const uint8_t s = q->scales[r * q->n_sb + (k >> 5)];
        scalar = E == Q_E4M3 && s >= 135 && s != 255;
        c = _mm256_broadcast_ss(E == Q_E4M3 ? &tab_e8m0_120[s] : &tab_e8m0[s]);
    } else {
        scalar = E == Q_E4M3 && q->scalar;
        c = _mm256_set1_ps(q->cscale);
    }
    if (E == Q_E4M3 && !scalar) {
        __m256i nan = _mm256_setzero_si256();
        if (MX || !q->fold)
            dec32_e4m3(1, 1, row + k, c, w, &nan);
        else
            dec32_e4m3(0, 1, row + k, c, w, &nan);
        scalar = !_mm256_testz_si256(nan, nan);
    } else if (E == Q_E2M1) {
        __m256i lh, ll;
        e2m1_luts(MX ? q->scales[r * q->n_sb + (k >> 5)] : 127, &lh, &ll);
        dec32_e2m1(!MX, row + k / 2, lh, ll, c, w);
    }
    if (scalar) {
        float tmp[32];
        widen_scalar(q, r, k, 32, tmp);
        for (int i = 0; i < 4; i++)
            w[i] = _mm256_loadu_ps(tmp + 8 * i);
    }
}

/* The decode chains for tiles that need scalar widening (E4M3 scale * 2^8 overflowing): every
 * 32-element chunk of a row through widen_scalar. Same values, same chain as tile(). */
static HY_AVX2 void tile_slow(int mr, int nr, const struct qw *q, const float *x, int64_t ldx, int64_t n0, float *y,
                              int64_t ldy)
{
    __m256 acc[2][4];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            acc[i][j] = _mm256_setzero_ps();
    const int64_t K = q->K;
    for (int64_t k = 0; k < K; k += 32) {
        const int64_t n = K - k < 32 ? K - k : 32;
        for (int j = 0; j < nr; j++) {
            float tmp[32];
            widen_scalar(q, n0 + j, k, n, tmp);
            for (int64_t c = 0; c * 8 < n; c++) {
                const int64_t kc = k + 8 * c;
                const __m256 wv = _mm256_loadu_ps(tmp + 8 * c);
                for (int i = 0; i < mr; i++) {
                    const __m256 xv = kc + 8 <= K ? _mm256_loadu_ps(x + i * ldx + kc)
                                                  : hy_avx2_load_tail(HY_DTYPE_F32, x + i * ldx, kc, K - kc);
                    acc[i][j] = _mm256_fmadd_ps(xv, wv, acc[i][j]);
                }
            }
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            y[i * ldy + j] = hy_avx2_hsum(acc[i][j]);
}

int HY_AVX2 hy_avx2q_mx_scales_overflow(const uint8_t *s, int64_t n)
{
    const int64_t n32 = n & ~(int64_t)31;
    const __m256i lo = _mm256_set1_epi8((char)135), hi = _mm256_set1_epi8((char)254);
    __m256i bad = _mm256_setzero_si256();
    for (int64_t i = 0; i < n32; i += 32) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(s + i));
        bad = _mm256_or_si256(bad, _mm256_cmpeq_epi8(_mm256_min_epu8(_mm256_max_epu8(v, lo), hi), v));
    }
    int r = !_mm256_testz_si256(bad, bad);
    for (int64_t i = n32; i < n; i++)
        r |= s[i] >= 135 && s[i] != 255;
    return r;
}

/* 1 if one of nr rows from n0 has an E8M0 byte in 135..254 (E4M3 scale * 2^120 overflows). */
static int rows_need_slow(const struct qw *q, int64_t n0, int nr)
{
    return hy_avx2q_mx_scales_overflow(q->scales + n0 * q->n_sb, (int64_t)nr * q->n_sb);
}

/* y[i*ldy + j] = x row i (stride ldx) . W row n0+j, i < MR <= 2, j < NR <= 4: each row's 32-element
 * blocks are widened in registers once and used for all MR tokens. The caller routed tiles with
 * overflowing scales to tile_slow; returns 1 (results not stored) if an E4M3 NaN code was seen. */
HY_AVX2_INLINE int tile(const int E, const int MX, const int FOLD, const int CHK, const int MR, const int NR,
                        const struct qw *q, const float *x, int64_t ldx, int64_t n0, float *y, int64_t ldy)
{
    const int64_t K = q->K, K32 = K & ~(int64_t)31;
    const uint8_t *rp[4], *sp[4];
#pragma GCC unroll 4
    for (int j = 0; j < NR; j++) {
        rp[j] = q->data + (n0 + j) * q->row_bytes;
        sp[j] = MX ? q->scales + (n0 + j) * q->n_sb : NULL;
    }
    const float *tab = E == Q_E4M3 ? tab_e8m0_120 : tab_e8m0;
    __m256i lh1, ll1; /* E2M1 values unscaled (2^0: E8M0 byte 127) */
    e2m1_luts(127, &lh1, &ll1);
    __m256i nan = _mm256_setzero_si256();
    const __m256 cs = _mm256_set1_ps(q->cscale);
    const int64_t pf = q->pf;
    __m256 acc[2][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            acc[i][j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K32; k += 32) {
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            __m256 w[4];
            if ((k & (E == Q_E4M3 ? 63 : 127)) == 0) /* one per 64 bytes of the row */
                _mm_prefetch((const char *)rp[j] + (E == Q_E4M3 ? k : k / 2) + pf, _MM_HINT_T0);
            if (E == Q_E4M3) /* FOLD: raw values, x arrives times cscale */
                dec32_e4m3(!FOLD, CHK, rp[j] + k, MX ? _mm256_broadcast_ss(tab + sp[j][k >> 5]) : cs, w, &nan);
            else if (MX) { /* the scale is in the LUTs */
                __m256i lh, ll;
                e2m1_luts(sp[j][k >> 5], &lh, &ll);
                dec32_e2m1(0, rp[j] + k / 2, lh, ll, cs, w);
            } else
                dec32_e2m1(1, rp[j] + k / 2, lh1, ll1, cs, w);
#pragma GCC unroll 4
            for (int c4 = 0; c4 < 4; c4++)
#pragma GCC unroll 2
                for (int i = 0; i < MR; i++)
                    acc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * ldx + k + 8 * c4), w[c4], acc[i][j]);
        }
    }
    if (E == Q_E4M3 && CHK && !_mm256_testz_si256(nan, nan))
        return 1;
    if (K32 < K) { /* the last K % 32 elements: scalar-widened, zero-padded chunks of 8 */
        const int64_t rem = K - K32;
        float tmp[4][32];
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            widen_scalar(q, n0 + j, K32, rem, tmp[j]);
#pragma GCC unroll 4
        for (int c4 = 0; c4 < 4; c4++) {
            const int64_t kc = K32 + 8 * c4;
            if (kc >= K)
                break;
            __m256 xv[2];
#pragma GCC unroll 2
            for (int i = 0; i < MR; i++)
                xv[i] = kc + 8 <= K ? _mm256_loadu_ps(x + i * ldx + kc)
                                    : hy_avx2_load_tail(HY_DTYPE_F32, x + i * ldx, kc, K - kc);
#pragma GCC unroll 4
            for (int j = 0; j < NR; j++)
#pragma GCC unroll 2
                for (int i = 0; i < MR; i++)
                    acc[i][j] = _mm256_fmadd_ps(xv[i], _mm256_loadu_ps(tmp[j] + 8 * c4), acc[i][j]);
        }
    }
#pragma GCC unroll 2
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            y[i * ldy + j] = hy_avx2_hsum(acc[i][j]);
    return 0;
}

#define Q_CASES(E, MX, FOLD, CHK, MR)                                                                                  \
    case (MR)*8 + 1:                                                                                                   \
        nan = tile(E, MX, FOLD, CHK, MR, 1, q, x, ldx, n0, y, ldy);                                                    \
        break;                                                                                                         \
    case (MR)*8 + 2:                                                                                                   \
        nan = tile(E, MX, FOLD, CHK, MR, 2, q, x, ldx, n0, y, ldy);                                                    \
        break;                                                                                                         \
    case (MR)*8 + 3:                                                                                                   \
        nan = tile(E, MX, FOLD, CHK, MR, 3, q, x, ldx, n0, y, ldy);                                                    \
        break;                                                                                                         \
    case (MR)*8 + 4:                                                                                                   \
        nan = tile(E, MX, FOLD, CHK, MR, 4, q, x, ldx, n0, y, ldy);                                                    \
        break;

/* One decode tile function per (format, raw scheme, NaN test); q must match (q->fold == FOLD). */
#define DEF_Q_TILE(NAME, E, MX, FOLD, CHK)                                                                             \
    static HY_AVX2 void NAME(int mr, int nr, const struct qw *q, const float *x, int64_t ldx, int64_t n0, float *y,    \
                             int64_t ldy)                                                                              \
    {                                                                                                                  \
        if (E == Q_E4M3 && (MX ? rows_need_slow(q, n0, nr) : q->scalar)) {                                             \
            tile_slow(mr, nr, q, x, ldx, n0, y, ldy);                                                                  \
            return;                                                                                                    \
        }                                                                                                              \
        int nan = 0;                                                                                                   \
        switch (mr * 8 + nr) {                                                                                         \
            Q_CASES(E, MX, FOLD, CHK, 1)                                                                               \
            Q_CASES(E, MX, FOLD, CHK, 2)                                                                               \
        default:                                                                                                       \
            break;                                                                                                     \
        }                                                                                                              \
        if (nan) /* an E4M3 NaN code: the scalar route gives the exact NaN results */                                  \
            tile_slow(mr, nr, q, x, ldx, n0, y, ldy);                                                                  \
    }

DEF_Q_TILE(tile_e4m3_t, Q_E4M3, 0, 0, 1)    /* per-tensor, exact values, NaN test */
DEF_Q_TILE(tile_e4m3_t_nf, Q_E4M3, 0, 0, 0) /* per-tensor, exact values, checked NaN-free at load */
DEF_Q_TILE(tile_e4m3_tr, Q_E4M3, 0, 1, 1)   /* per-tensor, raw scheme */
DEF_Q_TILE(tile_e4m3_tr_nf, Q_E4M3, 0, 1, 0)
DEF_Q_TILE(tile_e4m3_mx, Q_E4M3, 1, 0, 1) /* MXFP8 */
DEF_Q_TILE(tile_e4m3_mx_nf, Q_E4M3, 1, 0, 0)
DEF_Q_TILE(tile_e2m1_t, Q_E2M1, 0, 0, 0)  /* FP4, one scale */
DEF_Q_TILE(tile_e2m1_mx, Q_E2M1, 1, 0, 0) /* MXFP4 */

typedef void (*q_tile_fn)(int, int, const struct qw *, const float *, int64_t, int64_t, float *, int64_t);

static q_tile_fn tile_for(const struct qw *q)
{
    const int mx = q->W->qscheme == HY_QS_MX32;
    if (q->W->dtype != HY_DTYPE_F8_E4M3)
        return mx ? tile_e2m1_mx : tile_e2m1_t;
    if (mx)
        return q->nan_free ? tile_e4m3_mx_nf : tile_e4m3_mx;
    if (q->fold)
        return q->nan_free ? tile_e4m3_tr_nf : tile_e4m3_tr;
    return q->nan_free ? tile_e4m3_t_nf : tile_e4m3_t;
}

void HY_AVX2 hy_avx2q_scale_rows(const float *x, int64_t ldx, int64_t T, int64_t K, float c, float *xs, int64_t ldxs,
                                 uint8_t *ok)
{
    const __m256 cv = _mm256_set1_ps(c);
    const __m256i em = _mm256_set1_epi32(0x7F800000);
    const int64_t K8 = K & ~(int64_t)7;
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * ldx;
        float *d = xs + t * ldxs;
        __m256i bad = _mm256_setzero_si256(); /* lanes whose product had an all-ones exponent */
        for (int64_t k = 0; k < K8; k += 8) {
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xr + k), cv);
            _mm256_storeu_ps(d + k, v);
            bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(v), em), em));
        }
        int finite = _mm256_testz_si256(bad, bad);
        for (int64_t k = K8; k < K; k++) {
            const float v = xr[k] * c;
            d[k] = v;
            finite &= isfinite(v) != 0;
        }
        ok[t] = (uint8_t)finite;
    }
}

/* How many tokens from t (1 or 2) share a tile: two when both exist and take the same scheme. */
static int pair_len(const uint8_t *ok, int64_t t, int64_t T)
{
    return t + 1 < T && (!ok || ok[t] == ok[t + 1]) ? 2 : 1;
}

/* Per-call state of the decode entry points: the exact and raw-scheme views of W and, in the raw
 * scheme, the scaled activations (NULL xs / ok: every token exact). */
struct qcall {
    struct qw qe, qf;
    q_tile_fn fe, ff;
    float *xs;
    uint8_t *ok; /* after the rows, in the same buffer (the thread's scratch) */
};

/* The tiles of tokens [t0, t0 + mt) x rows [n0, n0 + nr) (mt <= 2), in the scheme of token t0:
 * raw (qf, scaled xs) if ok[t0], else exact (qe, x). Callers only pair tokens with equal ok. */
static void tokens_tile(const struct qcall *c, const float *x, int64_t ldx, int64_t t0, int mt, int64_t n0, int nr,
                        float *y, int64_t ldy)
{
    if (c->ok && c->ok[t0])
        c->ff(mt, nr, &c->qf, c->xs + t0 * c->qf.K, c->qf.K, n0, y + t0 * ldy, ldy);
    else
        c->fe(mt, nr, &c->qe, x + t0 * ldx, ldx, n0, y + t0 * ldy, ldy);
}

/* The calling thread's buffer for the raw scheme's scaled activations (decode calls come once per
 * row band of every expert matrix: a malloc per call was measurable); the avx512 level's too. */
static _Thread_local struct hy_scratch qscratch;

float *hy_avx2q_scaled_rows(const float *x, int64_t ldx, int64_t T, int64_t K, float c, uint8_t **ok)
{
    const size_t xb = (size_t)(T * K) * sizeof(float);
    float *xs = hy_scratch_get(&qscratch, xb + (size_t)T);
    *ok = xs ? (uint8_t *)xs + xb : NULL;
    if (xs)
        hy_avx2q_scale_rows(x, ldx, T, K, c, xs, K, *ok);
    return xs;
}

static void qcall_init(struct qcall *c, const struct hy_tensor *W, const float *x, int64_t ldx, int64_t T)
{
    qw_init(&c->qe, W, 0);
    qw_init(&c->qf, W, 1);
    c->fe = tile_for(&c->qe);
    c->ff = tile_for(&c->qf);
    c->xs = NULL;
    c->ok = NULL;
    /* out of memory: NULL, every token exact (same values up to rounding order, so T-invariance is
     * only kept while memory lasts) */
    if (c->qf.fold)
        c->xs = hy_avx2q_scaled_rows(x, ldx, T, W->cols, c->qf.cscale, &c->ok);
}

void hy_avx2q_rows(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t T, const struct hy_tensor *W, int64_t n0,
                   int64_t nb)
{
    struct qcall c;
    qcall_init(&c, W, x, ldx, T);
    for (int64_t t = 0; t < T;) {
        const int mt = pair_len(c.ok, t, T);
        for (int64_t j = 0; j < nb; j += 4)
            tokens_tile(&c, x, ldx, t, mt, n0 + j, (int)(nb - j < 4 ? nb - j : 4), y + j, ldy);
        t += mt;
    }
}

void hy_avx2q_gemv(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    struct qcall c;
    qcall_init(&c, W, x, W->cols, T);
    const int64_t N = W->rows, K = W->cols, groups = (N + 3) / 4;
    const int par = (double)N * (double)K * (double)T > 65536.0;
    (void)par;
    /* dynamic tasks (task_rows.h): a thread that loses its core on a shared machine does not hold up
     * the step; which thread computes a row never changes its result */
    const int64_t task_groups = hy_task_groups(W);
#pragma omp parallel for schedule(dynamic, task_groups) if (par)
    for (int64_t g = 0; g < groups; g++) {
        const int64_t n0 = g * 4;
        const int nr = (int)(N - n0 < 4 ? N - n0 : 4);
        for (int64_t t = 0; t < T;) {
            const int mt = pair_len(c.ok, t, T);
            tokens_tile(&c, x, K, t, mt, n0, nr, y + n0, N);
            t += mt;
        }
    }
}

/* Widens the first K32 (a multiple of 32) elements of row r to f32 at d; one instance per format. */
#define DEF_WIDEN(NAME, ELEM, MX)                                                                                      \
    static HY_AVX2 void NAME(const struct qw *q, int64_t r, int64_t K32, float *d)                                     \
    {                                                                                                                  \
        for (int64_t k = 0; k < K32; k += 32) {                                                                        \
            __m256 w[4];                                                                                               \
            block(ELEM, MX, q, r, k, w);                                                                               \
            for (int c = 0; c < 4; c++)                                                                                \
                _mm256_storeu_ps(d + k + 8 * c, w[c]);                                                                 \
        }                                                                                                              \
    }

DEF_WIDEN(widen_e4m3_t, Q_E4M3, 0)
DEF_WIDEN(widen_e4m3_mx, Q_E4M3, 1)
DEF_WIDEN(widen_e2m1_t, Q_E2M1, 0)
DEF_WIDEN(widen_e2m1_mx, Q_E2M1, 1)

static void widen_rows_scheme(const struct hy_tensor *W, int fold, int64_t n0, int64_t nb, int64_t ldw, float *dst)
{
    struct qw q;
    qw_init(&q, W, fold);
    const int mx = W->qscheme == HY_QS_MX32;
    void (*fn)(const struct qw *, int64_t, int64_t, float *) =
        W->dtype == HY_DTYPE_F8_E4M3 ? (mx ? widen_e4m3_mx : widen_e4m3_t) : (mx ? widen_e2m1_mx : widen_e2m1_t);
    const int64_t K = W->cols, K32 = K & ~(int64_t)31, Kp = (K + 7) & ~(int64_t)7;
    for (int64_t r = 0; r < nb; r++) {
        float *d = dst + r * ldw;
        fn(&q, n0 + r, K32, d);
        if (K32 < K) {
            float tmp[32];
            widen_scalar(&q, n0 + r, K32, K - K32, tmp);
            memcpy(d + K32, tmp, (size_t)(Kp - K32) * sizeof(float));
        }
    }
}

void hy_avx2q_widen_rows(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst)
{
    widen_rows_scheme(W, 0, n0, nb, ldw, dst);
}

void hy_avx2q_widen_rows_raw(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst)
{
    widen_rows_scheme(W, 1, n0, nb, ldw, dst);
}

#endif /* __x86_64__ */
