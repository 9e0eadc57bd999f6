/* avx2_w4a8.c - AVX2 W4A8 matmul: MXFP4 weights x MXINT8 activations (rules in w4a8.h), bitwise
 * equal to hy_ref_matmul_w4a8.
 *
 * Activations: each token row is quantized once per call (caller's thread, or OpenMP over tokens
 * for long prompts) into thread-local scratch: natural-order int8 q (used by the scalar tail), the
 * block exponents X, and for every full group of 8 blocks a nibble-matched copy: per pair of blocks
 * (2p, 2p+1) 64 bytes = [even elements of 2p | even of 2p+1] then [odd of 2p | odd of 2p+1].
 * Weights, per 32 bytes (2 blocks): low / high nibbles by a mask and a 16-bit shift give the even /
 * odd elements in that same order; one pshufb LUT gives c + 12 (c = 2*e2m1 in -12..12, so 0..24,
 * unsigned), pmaddubsw with q (u8 x s8 -> s16 pairs, |sum| <= 6096; the two halves' sum <= 12192:
 * no saturation) and pmaddwd with ones give 4 int32 lanes per block of sum (c+12) q. Per group of
 * 8 blocks (256 weights) three phaddd and one vpermd give the 8 block sums in natural order, minus
 * 12 * sum_b q (per token, from the scratch) = s_b exactly; one cvtdq2ps and one FMA with the 8
 * factors f_b = 2^(X_b - 1) (f32 per token, from the scratch; NaN for non-finite blocks) times
 * 2^(sw_b - 127) (E8M0 byte << 23; bytes 0 and 255 patched when a tile has them): one product of
 * exact powers of two, so one rounding, exactly ldexpf's. The accumulator's lane j takes blocks
 * b = j mod 8. Blocks past the last full group (and a partial last block) are summed in scalar
 * integer code and enter through the same lane FMA, zero-padded (s = 0, f = 0).
 * Decode (any T): OpenMP over groups of 4 rows, dynamic tasks of hy_task_groups (task_rows.h);
 * inside, token pairs x 4 rows register tiles, so for T <= 2 the weights stream once and for
 * T >= 3 each 4-row tile is re-read from L1/L2 per token pair. */
#if defined(__x86_64__)

#include "kernels/w4a8.h"

#include "kernels/avx2_common.h"
#include "kernels/kernel_table.h"
#include "kernels/scratch.h"
#include "kernels/task_rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef HYW_PF_ROWS
#define HYW_PF_ROWS 4 /* prefetch each row's bytes this many rows ahead (as avx2_quant.c) */
#endif

static const int8_t e2m1_x2_lut[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
static const uint8_t e2m1_x2p12_lut[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

/* Per-call activation layout (per token t, strides below). */
struct act {
    const int8_t *qn;   /* natural order, ldn bytes per token */
    const int8_t *qp;   /* nibble-matched full groups, ldp bytes per token */
    const int32_t *X;   /* block exponents, ldx entries per token (padded with 0) */
    const float *fx;    /* 2^(X_b - 1) (NaN: non-finite block), ldx per token */
    const int32_t *q12; /* 12 * sum of the block's q, ldx per token */
    int64_t ldn, ldp, ldx;
    int64_t K, nb, G; /* blocks, full groups of 8 blocks */
};

/* The calling thread's activations (act_prepare), kept between calls. */
static _Thread_local struct hy_scratch scratch;

/* One token row x[K] -> qn (natural, K bytes + zero pad to ldn), X (nb entries + zero pad), qp. */
static HY_AVX2 void quantize_token(const float *x, int64_t K, int64_t nb, int64_t G, int8_t *qn, int64_t ldn,
                                   int32_t *X, int64_t ldx, int8_t *qp, float *fx, int32_t *q12)
{
    const int64_t nfull = K / 32;
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i lo127 = _mm256_set1_epi32(-127), hi127 = _mm256_set1_epi32(127);
    for (int64_t b = 0; b < nfull; b++) {
        const float *xb = x + 32 * b;
        __m256 v[4];
        __m256i m = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            v[c] = _mm256_loadu_ps(xb + 8 * c);
            m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_castps_si256(v[c]), absm));
        }
        __m128i m4 = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
        m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, 0x4E));
        m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, 0xB1));
        const uint32_t ab = (uint32_t)_mm_cvtsi128_si32(m4);
        int xe = 0;
        if (ab != 0 && ab < 0x7f800000u) {
            float a;
            memcpy(&a, &ab, 4);
            int e;
            const float mm = frexpf(a, &e);
            xe = mm <= 127.0f / 128.0f ? e - 7 : e - 6;
        }
        if (ab == 0 || ab >= 0x7f800000u || xe < -127 || xe > 126) { /* zero, non-finite, tiny: scalar */
            hy_mxint8_quantize_row(xb, 32, qn + 32 * b, X + b);
            continue;
        }
        X[b] = xe;
        const __m256 inv = _mm256_castsi256_ps(_mm256_set1_epi32((127 - xe) << 23)); /* 2^-X, exact */
        __m256i qi[4];
        for (int c = 0; c < 4; c++) /* x * 2^-X is exact (or far below 0.5); cvtps2dq rounds half-even */
            qi[c] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[c], inv)), lo127), hi127);
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
        _mm256_storeu_si256((__m256i *)(qn + 32 * b), _mm256_permutevar8x32_epi32(p, perm));
    }
    if (nfull < nb) /* partial last block */
        hy_mxint8_quantize_row(x + 32 * nfull, K - 32 * nfull, qn + 32 * nfull, X + nfull);
    memset(qn + K, 0, (size_t)(ldn - K));
    for (int64_t b = nb; b < ldx; b++)
        X[b] = 0;
    for (int64_t b = 0; b < ldx; b++) {
        int32_t sq = 0;
        for (int64_t k = 32 * b; b < nb && k < 32 * b + 32; k++)
            sq += qn[k];
        q12[b] = 12 * sq;
        fx[b] = b >= nb ? 0.0f : X[b] == HY_W4A8_XNAN ? NAN : ldexpf(1.0f, X[b] - 1); /* X >= -148: exact */
    }
    /* nibble-matched copy of the full groups */
    const __m256i sel = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12,
                                         14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int64_t p = 0; p < 4 * G; p++) {
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)(qn + 64 * p));
        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(qn + 64 * p + 32));
        const __m256i p0 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(b0, sel), 0xD8);
        const __m256i p1 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(b1, sel), 0xD8);
        _mm256_store_si256((__m256i *)(qp + 64 * p), _mm256_permute2x128_si256(p0, p1, 0x20));
        _mm256_store_si256((__m256i *)(qp + 64 * p + 32), _mm256_permute2x128_si256(p0, p1, 0x31));
    }
}

/* 2^(sw - 127) for 8 E8M0 bytes (as int32 lanes): bits sw << 23, with FIX also byte 0 (2^-127, an
 * f32 subnormal) and 255 (NaN). */
HY_AVX2_INLINE __m256 e8m0_f32(const int FIX, __m256i sw)
{
    __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(sw, 23));
    if (FIX) {
        f = _mm256_blendv_ps(f, _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000)),
                             _mm256_castsi256_ps(_mm256_cmpeq_epi32(sw, _mm256_setzero_si256())));
        f = _mm256_blendv_ps(f, _mm256_set1_ps(NAN),
                             _mm256_castsi256_ps(_mm256_cmpeq_epi32(sw, _mm256_set1_epi32(255))));
    }
    return f;
}

/* 1 if one of nr rows from n0 has an E8M0 byte 0 or 255 in its first 8 * G blocks. */
static HY_AVX2 int rows_need_fix(const struct hy_tensor *W, int64_t nb, int64_t G, int64_t n0, int nr)
{
    const __m256i one = _mm256_set1_epi8(1);
    __m256i bad = _mm256_setzero_si256();
    for (int j = 0; j < nr; j++) {
        const uint8_t *sp = W->mx_scales + (n0 + j) * nb;
        int64_t i = 0;
        for (; i + 32 <= 8 * G; i += 32) { /* s + 1 (mod 256) <= 1 */
            const __m256i v = _mm256_add_epi8(_mm256_loadu_si256((const __m256i *)(sp + i)), one);
            bad = _mm256_or_si256(bad, _mm256_cmpeq_epi8(_mm256_min_epu8(v, one), v));
        }
        for (; i < 8 * G; i += 8) { /* 8 G is a multiple of 8 */
            const __m256i v = _mm256_add_epi8(_mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(sp + i))), one);
            bad = _mm256_or_si256(
                bad, _mm256_cmpeq_epi8(_mm256_min_epu8(v, one), _mm256_blend_epi32(v, _mm256_set1_epi8(2), 0xFC)));
        }
    }
    return !_mm256_testz_si256(bad, bad);
}

/* y[i*ldy + j] = token i (< MR <= 2) . row n0 + j (< NR <= 4). */
HY_AVX2_INLINE void tile(const int FIX, const int MR, const int NR, const struct hy_tensor *W, const struct act *A,
                         int64_t t0, int64_t n0, float *y, int64_t ldy)
{
    const int64_t K = A->K, nb = A->nb, G = A->G, rb = K / 2, pf = HYW_PF_ROWS * rb;
    const uint8_t *rp[4], *sp[4];
#pragma GCC unroll 4
    for (int j = 0; j < NR; j++) {
        rp[j] = (const uint8_t *)W->data + (n0 + j) * rb;
        sp[j] = W->mx_scales + (n0 + j) * nb;
    }
    const int8_t *qp[2];
    const int32_t *Xp[2], *Qp[2];
    const float *Fp[2];
#pragma GCC unroll 2
    for (int i = 0; i < MR; i++) {
        qp[i] = A->qp + (t0 + i) * A->ldp;
        Xp[i] = A->X + (t0 + i) * A->ldx;
        Qp[i] = A->q12 + (t0 + i) * A->ldx;
        Fp[i] = A->fx + (t0 + i) * A->ldx;
    }
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)e2m1_x2p12_lut));
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 acc[2][4];
#pragma GCC unroll 2
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            acc[i][j] = _mm256_setzero_ps();
    for (int64_t g = 0; g < G; g++) {
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            const uint8_t *wr = rp[j] + 128 * g;
            _mm_prefetch((const char *)wr + pf, _MM_HINT_T0);
            _mm_prefetch((const char *)wr + pf + 64, _MM_HINT_T0);
            __m256i d[2][4];
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(wr + 32 * p));
                const __m256i cl = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, m4));
                const __m256i ch = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
#pragma GCC unroll 2
                for (int i = 0; i < MR; i++) {
                    const int8_t *q = qp[i] + 256 * g + 64 * p;
                    const __m256i s16 =
                        _mm256_add_epi16(_mm256_maddubs_epi16(cl, _mm256_load_si256((const __m256i *)q)),
                                         _mm256_maddubs_epi16(ch, _mm256_load_si256((const __m256i *)(q + 32))));
                    d[i][p] = _mm256_madd_epi16(s16, ones);
                }
            }
            const __m256 fw = e8m0_f32(FIX, _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sp[j] + 8 * g))));
#pragma GCC unroll 2
            for (int i = 0; i < MR; i++) {
                const __m256i h =
                    _mm256_hadd_epi32(_mm256_hadd_epi32(d[i][0], d[i][1]), _mm256_hadd_epi32(d[i][2], d[i][3]));
                const __m256i sb = _mm256_sub_epi32(_mm256_permutevar8x32_epi32(h, perm),
                                                    _mm256_loadu_si256((const __m256i *)(Qp[i] + 8 * g)));
                const __m256 f = _mm256_mul_ps(_mm256_loadu_ps(Fp[i] + 8 * g), fw);
                acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sb), f, acc[i][j]);
            }
        }
    }
    if (8 * G < nb) { /* the last nb % 8 blocks: scalar integer sums, same lanes */
#pragma GCC unroll 2
        for (int i = 0; i < MR; i++) {
            const int8_t *qn = A->qn + (t0 + i) * A->ldn;
            const int32_t *X = Xp[i];
#pragma GCC unroll 4
            for (int j = 0; j < NR; j++) {
                float s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                for (int64_t b = 8 * G; b < nb; b++) {
                    int32_t sb = 0;
                    for (int64_t k = 32 * b; k < K && k < 32 * b + 32; k++)
                        sb += (int32_t)qn[k] * e2m1_x2_lut[(rp[j][k / 2] >> ((k & 1) * 4)) & 15];
                    s[b - 8 * G] = (float)sb;
                    f[b - 8 * G] = hy_w4a8_factor(X[b], sp[j][b]);
                }
                acc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(s), _mm256_loadu_ps(f), acc[i][j]);
            }
        }
    }
#pragma GCC unroll 2
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            y[i * ldy + j] = hy_avx2_hsum(acc[i][j]);
}

#define W_CASE(MR, NR)                                                                                                 \
    case (MR)*8 + (NR):                                                                                                \
        if (fix)                                                                                                       \
            tile(1, MR, NR, W, A, t0, n0, y, ldy);                                                                     \
        else                                                                                                           \
            tile(0, MR, NR, W, A, t0, n0, y, ldy);                                                                     \
        break;

static HY_AVX2 void tile_fn(int fix, int mr, int nr, const struct hy_tensor *W, const struct act *A, int64_t t0,
                            int64_t n0, float *y, int64_t ldy)
{
    switch (mr * 8 + nr) {
        W_CASE(1, 1)
        W_CASE(1, 2) W_CASE(1, 3) W_CASE(1, 4) W_CASE(2, 1) W_CASE(2, 2) W_CASE(2, 3) W_CASE(2, 4) default : break;
    }
}

/* The calling thread's quantized activations of x[T, K] in its scratch, laid out as
 * [x copy | qn | qp | X | fx | q12]. A call with the same T, K and bitwise the same x as the
 * thread's previous one reuses them: the MoE pass calls the kernel once per row band of every
 * expert matrix with the same token rows (re-quantizing per band cost much of an expert's gate/up
 * time: docs/tuning.md). Returns 0, or -1 when out of memory (A untouched). */
static _Thread_local int64_t memo_T = -1, memo_K = -1;

static HY_AVX2 int act_prepare(const float *x, int64_t T, int64_t K, struct act *A)
{
    const int64_t nb = (K + 31) / 32, G = (K / 32) / 8;
    *A = (struct act){.K = K, .nb = nb, .G = G};
    A->ldn = ((K + 63) & ~(int64_t)63);
    A->ldp = G * 256;
    A->ldx = (nb + 15) & ~(int64_t)15;
    const size_t xcopy = ((size_t)(T * K) * sizeof(float) + 63) & ~(size_t)63;
    const size_t need = xcopy + (size_t)T * ((size_t)A->ldn + (size_t)A->ldp + (size_t)A->ldx * 12);
    const size_t cap_before = scratch.cap;
    char *s = hy_scratch_get(&scratch, need);
    if (!s) {
        memo_T = memo_K = -1;
        return -1;
    }
    int8_t *qn = (int8_t *)(s + xcopy), *qp = qn + T * A->ldn;
    int32_t *X = (int32_t *)(qp + T * A->ldp);
    float *fx = (float *)(X + T * A->ldx);
    int32_t *q12 = (int32_t *)(fx + T * A->ldx);
    A->qn = qn;
    A->qp = qp;
    A->X = X;
    A->fx = fx;
    A->q12 = q12;
    if (scratch.cap == cap_before && memo_T == T && memo_K == K && memcmp(s, x, (size_t)(T * K) * sizeof(float)) == 0)
        return 0;
    memcpy(s, x, (size_t)(T * K) * sizeof(float));
    memo_T = T;
    memo_K = K;
#pragma omp parallel for schedule(static) if (T >= 8)
    for (int64_t t = 0; t < T; t++)
        quantize_token(x + t * K, K, nb, G, qn + t * A->ldn, A->ldn, X + t * A->ldx, A->ldx, qp + t * A->ldp,
                       fx + t * A->ldx, q12 + t * A->ldx);
    return 0;
}

/* Rows [n0, n1) of W for all T tokens: y[t * ldy + (n - n0)], groups of 4 rows from n0. */
static HY_AVX2 void rows_range(float *y, int64_t ldy, const struct act *A, int64_t T, const struct hy_tensor *W,
                               int64_t n0, int64_t n1)
{
    const int fix = rows_need_fix(W, A->nb, A->G, n0, (int)(n1 - n0 < 4 ? n1 - n0 : 4));
    const int nr = (int)(n1 - n0 < 4 ? n1 - n0 : 4);
    for (int64_t t = 0; t < T; t += 2)
        tile_fn(fix, (int)(T - t < 2 ? T - t : 2), nr, W, A, t, n0, y + t * ldy, ldy);
}

void HY_AVX2 hy_avx2_matmul_w4a8(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    const int64_t N = W->rows, K = W->cols;
    struct act A;
    if (act_prepare(x, T, K, &A)) { /* out of memory: the scalar oracle computes the same numbers */
        hy_ref_matmul_w4a8(y, x, T, W);
        return;
    }
    const int64_t groups = (N + 3) / 4;
    const int par = (double)N * (double)K * (double)T > 65536.0;
    (void)par;
    /* dynamic tasks (task_rows.h): a thread that loses its core on a shared machine does not hold up
     * the step; which thread computes a row never changes its result */
    const int64_t task_groups = hy_task_groups(W);
#pragma omp parallel for schedule(dynamic, task_groups) if (par)
    for (int64_t gi = 0; gi < groups; gi++) {
        const int64_t n0 = gi * 4;
        rows_range(y + n0, N, &A, T, W, n0, n0 + 4 < N ? n0 + 4 : N);
    }
}

void HY_AVX2 hy_avx2_matmul_rows_w4a8(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W,
                                      int64_t n0, int64_t n1)
{
    struct act A;
    if (n1 <= n0 || T <= 0)
        return;
    if (act_prepare(x, T, W->cols, &A)) { /* out of memory: the oracle on the row view, same numbers */
        hy_matmul_rows_by_view(hy_ref_matmul_w4a8, y, ldy, x, T, W, n0, n1);
        return;
    }
    for (int64_t n = n0; n < n1; n += 4)
        rows_range(y + (n - n0), ldy, &A, T, W, n, n + 4 < n1 ? n + 4 : n1);
}

#endif /* __x86_64__ */
