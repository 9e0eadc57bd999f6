/* avx2_quant.c - AVX2 + FMA + F16C matmul kernels for FP8 / MXFP8 / MXFP4 weights (avx2_quant.h).
 *
 * Element decoding (exact, checked against hy_tensor_get in tests/unit/test_kernels_quant.c):
 * - E4M3 byte b -> f16 bits (b & 0x80) << 8 | (b & 0x7f) << 7: the exponent field 0eeee with bias
 *   15 instead of 7, so the f16 value is exactly v * 2^-8, subnormals included (e = 0 lands on f16
 *   subnormals m * 2^-17). Done on 16-bit lanes as ((b << 8) >>arith 1) & 0xBFFF. The NaN codes
 *   0x7f / 0xff are forced to an f16 NaN. The 2^8 is folded into the scale: w = f16(v) * (s * 2^8),
 *   which is the same single rounding of v * s as ref's.
 * - E2M1 nibble -> f16 high byte by one pshufb (0.5 .. 6 as f16 have a zero low byte), then
 *   w = f16(e) * s.
 * - Scales: MX32 -> 2^(s-127) (times 2^8 for E4M3) from a 256-entry table; E4M3 blocks with
 *   247 <= s <= 254 (scale * 2^8 overflows) and per-tensor scales whose * 2^8 overflows take the
 *   scalar hy_tensor_get, as do the last K % 32 elements of a row.
 * The widened values enter the 8-lane FMA chain of kernel_table.h in increasing k. */
#if defined(__x86_64__)

#include "kernels/avx2_quant.h"

#include "kernels/avx2_common.h"
#include "kernels/kernel_table.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifndef HY_Q_E4M3_NAN
#define HY_Q_E4M3_NAN 1 /* 1: E4M3 NaN codes decode to NaN (exactly as ref); 0: to 480 (faster) */
#endif

enum { Q_E4M3 = 0, Q_E2M1 = 1 };

static float tab_e8m0[256];   /* 2^(s-127); NaN at 255 */
static float tab_e8m0_8[256]; /* 2^(s-127+8) for s < 247, NaN at 255 (others unused) */
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static void tab_init(void)
{
    for (int s = 0; s < 256; s++) {
        tab_e8m0[s] = hy_e8m0_to_f32((uint8_t)s);
        tab_e8m0_8[s] = s < 247 || s == 255 ? hy_e8m0_to_f32((uint8_t)s) * 256.0f : 0.0f;
    }
}

/* What a call needs to address rows and scales. */
struct qw {
    const struct hy_tensor *W;
    const uint8_t *data;
    const uint8_t *scales; /* MX32 */
    int64_t K, row_bytes, n_sb;
    float cscale;          /* non-MX: the per-element multiplier (E4M3: times 2^8) */
    int scalar;            /* non-MX E4M3 whose scale * 2^8 overflows: every block scalar */
};

static void qw_init(struct qw *q, const struct hy_tensor *W)
{
    pthread_once(&tab_once, tab_init);
    q->W = W;
    q->data = W->data;
    q->scales = W->mx_scales;
    q->K = W->cols;
    q->row_bytes = hy_tensor_row_bytes(W);
    q->n_sb = (W->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK;
    const float s = W->qscheme == HY_QS_PER_TENSOR ? W->scale : 1.0f;
    q->cscale = W->dtype == HY_DTYPE_F8_E4M3 ? s * 256.0f : s;
    q->scalar = W->dtype == HY_DTYPE_F8_E4M3 && isfinite(s) && !isfinite(q->cscale);
}

int hy_avx2q_supported(const struct hy_tensor *W)
{
    if (W->dtype != HY_DTYPE_F8_E4M3 && W->dtype != HY_DTYPE_F4_E2M1)
        return 0;
    if (W->qscheme == HY_QS_MX32)
        return W->mx_scales != NULL;
    return W->qscheme == HY_QS_NONE || W->qscheme == HY_QS_PER_TENSOR;
}

/* 32 E4M3 bytes at p -> w[0..3] = elements 0-7, 8-15, 16-23, 24-31 times c (c = scale * 2^8). */
HY_AVX2_INLINE void dec32_e4m3(const uint8_t *p, __m256 c, __m256 w[4])
{
    const __m256i v = _mm256_loadu_si256((const __m256i *)p), z = _mm256_setzero_si256();
    const __m256i keep = _mm256_set1_epi16((short)0xBFFF);
    __m256i lo = _mm256_unpacklo_epi8(z, v); /* words b << 8: elements 0-7 | 16-23 */
    __m256i hi = _mm256_unpackhi_epi8(z, v); /* 8-15 | 24-31 */
#if HY_Q_E4M3_NAN
    const __m256i nm = _mm256_set1_epi16(0x7f00);
    const __m256i nlo = _mm256_cmpeq_epi16(_mm256_and_si256(lo, nm), nm);
    const __m256i nhi = _mm256_cmpeq_epi16(_mm256_and_si256(hi, nm), nm);
    lo = _mm256_or_si256(_mm256_and_si256(_mm256_srai_epi16(lo, 1), keep), nlo);
    hi = _mm256_or_si256(_mm256_and_si256(_mm256_srai_epi16(hi, 1), keep), nhi);
#else
    lo = _mm256_and_si256(_mm256_srai_epi16(lo, 1), keep);
    hi = _mm256_and_si256(_mm256_srai_epi16(hi, 1), keep);
#endif
    w[0] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(lo)), c);
    w[1] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(hi)), c);
    w[2] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(lo, 1)), c);
    w[3] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(hi, 1)), c);
}

/* 16 bytes at p = 32 E2M1 nibbles (element 2j low) -> w[0..3] as above, times c. */
HY_AVX2_INLINE void dec32_e2m1(const uint8_t *p, __m256 c, __m256 w[4])
{
    const __m256i lut = _mm256_setr_epi8(0x00, 0x38, 0x3C, 0x3E, 0x40, 0x42, 0x44, 0x46, (char)0x80, (char)0xB8,
                                         (char)0xBC, (char)0xBE, (char)0xC0, (char)0xC2, (char)0xC4, (char)0xC6,
                                         0x00, 0x38, 0x3C, 0x3E, 0x40, 0x42, 0x44, 0x46, (char)0x80, (char)0xB8,
                                         (char)0xBC, (char)0xBE, (char)0xC0, (char)0xC2, (char)0xC4, (char)0xC6);
    const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p)); /* word j = byte j */
    /* word j = hi nibble << 8 | lo nibble: bytes = element indices in order (lane 0: 0-15, lane 1: 16-31) */
    const __m256i u = _mm256_and_si256(_mm256_or_si256(_mm256_slli_epi16(b, 4), b), _mm256_set1_epi16(0x0F0F));
    const __m256i f = _mm256_shuffle_epi8(lut, u), z = _mm256_setzero_si256();
    const __m256i lo = _mm256_unpacklo_epi8(z, f), hi = _mm256_unpackhi_epi8(z, f);
    w[0] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(lo)), c);
    w[1] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(hi)), c);
    w[2] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(lo, 1)), c);
    w[3] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(hi, 1)), c);
}

/* Elements [k0, k0+n) of row r (n <= 32) to tmp[0..32), exact (hy_tensor_get), zero-padded. */
static void widen_scalar(const struct hy_tensor *W, int64_t r, int64_t k0, int64_t n, float *tmp)
{
    for (int64_t i = 0; i < 32; i++)
        tmp[i] = i < n ? hy_tensor_get(W, r, k0 + i) : 0.0f;
}

/* The full 32-element block at k of row r, widened into w[4]. */
HY_AVX2_INLINE void block(const int E, const int MX, const struct qw *q, int64_t r, int64_t k, __m256 w[4])
{
    const uint8_t *row = q->data + r * q->row_bytes;
    __m256 c;
    if (MX) {
        const uint8_t s = q->scales[r * q->n_sb + (k >> 5)];
        if (E == Q_E4M3 && __builtin_expect(s >= 247 && s != 255, 0)) {
            float tmp[32];
            widen_scalar(q->W, r, k, 32, tmp);
            for (int i = 0; i < 4; i++)
                w[i] = _mm256_loadu_ps(tmp + 8 * i);
            return;
        }
        c = _mm256_broadcast_ss(E == Q_E4M3 ? &tab_e8m0_8[s] : &tab_e8m0[s]);
    } else {
        if (E == Q_E4M3 && __builtin_expect(q->scalar, 0)) {
            float tmp[32];
            widen_scalar(q->W, r, k, 32, tmp);
            for (int i = 0; i < 4; i++)
                w[i] = _mm256_loadu_ps(tmp + 8 * i);
            return;
        }
        c = _mm256_set1_ps(q->cscale);
    }
    if (E == Q_E4M3)
        dec32_e4m3(row + k, c, w);
    else
        dec32_e2m1(row + k / 2, c, w);
}

/* y[i*ldy + j] = x row i (stride ldx) . W row n0+j, i < MR <= 2, j < NR <= 4: each row's 32-element
 * blocks are widened in registers once and used for all MR tokens. */
HY_AVX2_INLINE void tile(const int E, const int MX, const int MR, const int NR, const struct qw *q, const float *x,
                         int64_t ldx, int64_t n0, float *y, int64_t ldy)
{
    __m256 acc[2][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            acc[i][j] = _mm256_setzero_ps();
    const int64_t K = q->K, K32 = K & ~(int64_t)31;
    for (int64_t k = 0; k < K32; k += 32) {
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            __m256 w[4];
            block(E, MX, q, n0 + j, k, w);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++)
#pragma GCC unroll 2
                for (int i = 0; i < MR; i++)
                    acc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * ldx + k + 8 * c), w[c], acc[i][j]);
        }
    }
    if (K32 < K) { /* the last K % 32 elements: scalar-widened, zero-padded chunks of 8 */
        const int64_t rem = K - K32;
        for (int j = 0; j < NR; j++) {
            float tmp[32];
            widen_scalar(q->W, n0 + j, K32, rem, tmp);
            for (int64_t c = 0; c * 8 < rem; c++) {
                const __m256 wv = _mm256_loadu_ps(tmp + 8 * c);
                const int64_t kc = K32 + 8 * c;
                for (int i = 0; i < MR; i++) {
                    const __m256 xv = kc + 8 <= K ? _mm256_loadu_ps(x + i * ldx + kc)
                                                  : hy_avx2_load_tail(HY_DTYPE_F32, x + i * ldx, kc, K - kc);
                    acc[i][j] = _mm256_fmadd_ps(xv, wv, acc[i][j]);
                }
            }
        }
    }
#pragma GCC unroll 2
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            y[i * ldy + j] = hy_avx2_hsum(acc[i][j]);
}

#define Q_CASES(E, MX, MR)                                                                        \
    case (MR) * 8 + 1: tile(E, MX, MR, 1, q, x, ldx, n0, y, ldy); break;                          \
    case (MR) * 8 + 2: tile(E, MX, MR, 2, q, x, ldx, n0, y, ldy); break;                          \
    case (MR) * 8 + 3: tile(E, MX, MR, 3, q, x, ldx, n0, y, ldy); break;                          \
    case (MR) * 8 + 4: tile(E, MX, MR, 4, q, x, ldx, n0, y, ldy); break;

#define DEF_Q_TILE(NAME, E, MX)                                                                   \
    static HY_AVX2 void NAME(int mr, int nr, const struct qw *q, const float *x, int64_t ldx, int64_t n0, \
                             float *y, int64_t ldy)                                               \
    {                                                                                             \
        switch (mr * 8 + nr) {                                                                    \
            Q_CASES(E, MX, 1)                                                                     \
            Q_CASES(E, MX, 2)                                                                     \
        default: break;                                                                           \
        }                                                                                         \
    }

DEF_Q_TILE(tile_e4m3_t, Q_E4M3, 0)
DEF_Q_TILE(tile_e4m3_mx, Q_E4M3, 1)
DEF_Q_TILE(tile_e2m1_t, Q_E2M1, 0)
DEF_Q_TILE(tile_e2m1_mx, Q_E2M1, 1)

typedef void (*q_tile_fn)(int, int, const struct qw *, const float *, int64_t, int64_t, float *, int64_t);

static q_tile_fn tile_for(const struct hy_tensor *W)
{
    const int mx = W->qscheme == HY_QS_MX32;
    if (W->dtype == HY_DTYPE_F8_E4M3)
        return mx ? tile_e4m3_mx : tile_e4m3_t;
    return mx ? tile_e2m1_mx : tile_e2m1_t;
}

void hy_avx2q_rows(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t T, const struct hy_tensor *W,
                   int64_t n0, int64_t nb)
{
    struct qw q;
    qw_init(&q, W);
    const q_tile_fn fn = tile_for(W);
    for (int64_t t = 0; t < T; t += 2)
        for (int64_t j = 0; j < nb; j += 4)
            fn((int)(T - t < 2 ? T - t : 2), (int)(nb - j < 4 ? nb - j : 4), &q, x + t * ldx, ldx, n0 + j,
               y + t * ldy + j, ldy);
}

void hy_avx2q_gemv(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    struct qw q;
    qw_init(&q, W);
    const q_tile_fn fn = tile_for(W);
    const int64_t N = W->rows, K = W->cols, groups = (N + 3) / 4;
    const int par = (double)N * (double)K * (double)T > 65536.0;
    (void)par;
    /* dynamic chunks of 16 groups (64 rows), as the BF16 path: which thread computes a row never
     * changes the row's result */
#pragma omp parallel for schedule(dynamic, 16) if (par)
    for (int64_t g = 0; g < groups; g++) {
        const int64_t n0 = g * 4;
        const int nr = (int)(N - n0 < 4 ? N - n0 : 4);
        for (int64_t t = 0; t < T; t += 2)
            fn((int)(T - t < 2 ? T - t : 2), nr, &q, x + t * K, K, n0, y + t * N + n0, N);
    }
}

static HY_AVX2 void widen_e4m3_t(const struct qw *q, int64_t r, int64_t K32, float *d)
{
    for (int64_t k = 0; k < K32; k += 32) {
        __m256 w[4];
        block(Q_E4M3, 0, q, r, k, w);
        for (int c = 0; c < 4; c++)
            _mm256_storeu_ps(d + k + 8 * c, w[c]);
    }
}

static HY_AVX2 void widen_e4m3_mx(const struct qw *q, int64_t r, int64_t K32, float *d)
{
    for (int64_t k = 0; k < K32; k += 32) {
        __m256 w[4];
        block(Q_E4M3, 1, q, r, k, w);
        for (int c = 0; c < 4; c++)
            _mm256_storeu_ps(d + k + 8 * c, w[c]);
    }
}

static HY_AVX2 void widen_e2m1_t(const struct qw *q, int64_t r, int64_t K32, float *d)
{
    for (int64_t k = 0; k < K32; k += 32) {
        __m256 w[4];
        block(Q_E2M1, 0, q, r, k, w);
        for (int c = 0; c < 4; c++)
            _mm256_storeu_ps(d + k + 8 * c, w[c]);
    }
}

static HY_AVX2 void widen_e2m1_mx(const struct qw *q, int64_t r, int64_t K32, float *d)
{
    for (int64_t k = 0; k < K32; k += 32) {
        __m256 w[4];
        block(Q_E2M1, 1, q, r, k, w);
        for (int c = 0; c < 4; c++)
            _mm256_storeu_ps(d + k + 8 * c, w[c]);
    }
}

void hy_avx2q_widen_rows(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst)
{
    struct qw q;
    qw_init(&q, W);
    const int mx = W->qscheme == HY_QS_MX32;
    void (*fn)(const struct qw *, int64_t, int64_t, float *) =
        W->dtype == HY_DTYPE_F8_E4M3 ? (mx ? widen_e4m3_mx : widen_e4m3_t) : (mx ? widen_e2m1_mx : widen_e2m1_t);
    const int64_t K = W->cols, K32 = K & ~(int64_t)31, Kp = (K + 7) & ~(int64_t)7;
    for (int64_t r = 0; r < nb; r++) {
        float *d = dst + r * ldw;
        fn(&q, n0 + r, K32, d);
        if (K32 < K) {
            float tmp[32];
            widen_scalar(W, n0 + r, K32, K - K32, tmp);
            memcpy(d + K32, tmp, (size_t)(Kp - K32) * sizeof(float));
        }
    }
}

#endif /* __x86_64__ */
