/* avx2_w8a8.c - the AVX2 integer dots of the W8A8 matmuls (w8a8.h).
 *
 * Signed x signed int8 with unsigned x signed instructions (the sign trick): per 32-byte chunk,
 * vpsignb moves the sign of the activation q onto the weight w (zero where q is zero), vpmaddubsw
 * multiplies |q| (unsigned) by that signed weight and adds adjacent pairs into int16 - at most
 * 2 * 128 * 127 = 32512, so it never saturates while weights lie in [-127, 127] (the loader's check) -
 * and vpmaddwd with ones widens the pairs into int32 lanes. Integer sums are exact in any order, so
 * the result equals the scalar reference bit for bit. One weight row is loaded once per 4 tokens. */
#if defined(__x86_64__)

#include "kernels/avx2_common.h"
#include "kernels/w8a8.h"

#include <math.h>
#include <string.h>

HY_AVX2_INLINE __m256i dot32(__m256i w, __m256i x, __m256i ones)
{
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(w, x));
    return _mm256_madd_epi16(p, ones);
}

HY_AVX2_INLINE int32_t hsum(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static inline int32_t tail(const int8_t *a, const int8_t *w, int64_t k0, int64_t K)
{
    int32_t s = 0;
    for (int64_t k = k0; k < K; k++)
        s += (int32_t)a[k] * (int32_t)w[k];
    return s;
}

/* Decode (T < 4): 4 weight rows at once for one token, so that 4 independent streams are in flight. */
HY_AVX2_INLINE void rows4(int32_t *acc, const int8_t *a, const int8_t *w, int64_t K, int64_t K32, __m256i ones)
{
    const int8_t *w1 = w + K, *w2 = w1 + K, *w3 = w2 + K;
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    const int64_t pf = 4 * K; /* the next tile's rows, at the same column: one prefetch per 64-byte line */
    for (int64_t k = 0; k < K32; k += 32) {
        if (!(k & 63)) {
            _mm_prefetch((const char *)(w + k + pf), _MM_HINT_T0);
            _mm_prefetch((const char *)(w1 + k + pf), _MM_HINT_T0);
            _mm_prefetch((const char *)(w2 + k + pf), _MM_HINT_T0);
            _mm_prefetch((const char *)(w3 + k + pf), _MM_HINT_T0);
        }
        const __m256i x = _mm256_loadu_si256((const __m256i *)(a + k)), ax = _mm256_sign_epi8(x, x);
#define ROW_DOT(S, W)                                                                                                  \
    S = _mm256_add_epi32(                                                                                              \
        S, _mm256_madd_epi16(                                                                                          \
               _mm256_maddubs_epi16(ax, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(W + k)), x)), ones))
        ROW_DOT(s0, w);
        ROW_DOT(s1, w1);
        ROW_DOT(s2, w2);
        ROW_DOT(s3, w3);
#undef ROW_DOT
    }
    acc[0] = hsum(s0) + tail(a, w, K32, K);
    acc[1] = hsum(s1) + tail(a, w1, K32, K);
    acc[2] = hsum(s2) + tail(a, w2, K32, K);
    acc[3] = hsum(s3) + tail(a, w3, K32, K);
}

void HY_AVX2 hy_avx2_w8a8_dots(int32_t *acc, int64_t lda, const int8_t *q, int64_t T, const struct hy_tensor *W,
                               int64_t n0, int64_t n1)
{
    const int64_t K = W->cols, K32 = K & ~(int64_t)31;
    const __m256i ones = _mm256_set1_epi16(1);
    int64_t n = n0;
    if (T < 4) /* decode: rows in fours */
        for (; n + 4 <= n1; n += 4)
            for (int64_t t = 0; t < T; t++)
                rows4(acc + t * lda + (n - n0), q + t * K, (const int8_t *)W->data + n * K, K, K32, ones);
    for (; n < n1; n++) {
        const int8_t *w = (const int8_t *)W->data + n * K;
        int64_t t = 0;
        for (; t + 4 <= T; t += 4) {
            const int8_t *a0 = q + t * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;
            __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
            for (int64_t k = 0; k < K32; k += 32) {
                const __m256i wv = _mm256_loadu_si256((const __m256i *)(w + k));
                s0 = _mm256_add_epi32(s0, dot32(wv, _mm256_loadu_si256((const __m256i *)(a0 + k)), ones));
                s1 = _mm256_add_epi32(s1, dot32(wv, _mm256_loadu_si256((const __m256i *)(a1 + k)), ones));
                s2 = _mm256_add_epi32(s2, dot32(wv, _mm256_loadu_si256((const __m256i *)(a2 + k)), ones));
                s3 = _mm256_add_epi32(s3, dot32(wv, _mm256_loadu_si256((const __m256i *)(a3 + k)), ones));
            }
            acc[t * lda + (n - n0)] = hsum(s0) + tail(a0, w, K32, K);
            acc[(t + 1) * lda + (n - n0)] = hsum(s1) + tail(a1, w, K32, K);
            acc[(t + 2) * lda + (n - n0)] = hsum(s2) + tail(a2, w, K32, K);
            acc[(t + 3) * lda + (n - n0)] = hsum(s3) + tail(a3, w, K32, K);
        }
        for (; t < T; t++) {
            const int8_t *a = q + t * K;
            __m256i s = _mm256_setzero_si256();
            for (int64_t k = 0; k < K32; k += 32)
                s = _mm256_add_epi32(s, dot32(_mm256_loadu_si256((const __m256i *)(w + k)),
                                              _mm256_loadu_si256((const __m256i *)(a + k)), ones));
            acc[t * lda + (n - n0)] = hsum(s) + tail(a, w, K32, K);
        }
    }
}

/* 8 rounded floats (integral, in [-128, 127]) to 8 int8 at q. */
HY_AVX2_INLINE void store8(int8_t *q, __m256 r)
{
    const __m256i i = _mm256_cvtps_epi32(r);
    const __m128i h = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    _mm_storel_epi64((__m128i *)q, _mm_packs_epi16(h, h));
}

float HY_AVX2 hy_avx2_w8a8_quant_dynamic(const float *x, int64_t K, int8_t *q)
{
    const int64_t K8 = K & ~(int64_t)7;
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 mx = _mm256_setzero_ps(), un = _mm256_setzero_ps();
    for (int64_t k = 0; k < K8; k += 8) {
        const __m256 v = _mm256_loadu_ps(x + k);
        un = _mm256_or_ps(un, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        mx = _mm256_max_ps(mx, _mm256_and_ps(v, absm));
    }
    float m8[8], a = 0.0f;
    _mm256_storeu_ps(m8, mx);
    int finite = _mm256_movemask_ps(un) == 0;
    for (int i = 0; i < 8; i++)
        a = m8[i] > a ? m8[i] : a;
    for (int64_t k = K8; k < K; k++) {
        const float v = fabsf(x[k]);
        finite &= v == v;
        a = v > a ? v : a;
    }
    if (!finite || isinf(a)) {
        memset(q, 0, (size_t)K);
        return NAN;
    }
    const float s = a > 0.0f ? a / 127.0f : 1.0f;
    const __m256 sv = _mm256_set1_ps(s), lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
    for (int64_t k = 0; k < K8; k += 8) {
        const __m256 r =
            _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + k), sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        store8(q + k, _mm256_min_ps(_mm256_max_ps(r, lo), hi));
    }
    for (int64_t k = K8; k < K; k++) {
        const float r = rintf(x[k] / s);
        q[k] = (int8_t)(r > 127.0f ? 127 : r < -128.0f ? -128 : (int)r);
    }
    return s;
}

void HY_AVX2 hy_avx2_w8a8_quant_static(const float *x, int64_t K, float s_in, float o, int8_t *q)
{
    const int64_t K8 = K & ~(int64_t)7;
    const float r1 = 1.0f / s_in;
    const __m256 rv = _mm256_set1_ps(r1), ov = _mm256_set1_ps(o), lo = _mm256_set1_ps(-128.0f),
                 hi = _mm256_set1_ps(127.0f);
    for (int64_t k = 0; k < K8; k += 8) {
        /* x * r, then + o: two roundings, as the scalar rule (no fused multiply-add) */
        __m256 v = _mm256_round_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k), rv), ov),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm256_andnot_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), v); /* NaN -> 0 */
        store8(q + k, _mm256_min_ps(_mm256_max_ps(v, lo), hi));
    }
    hy_w8a8_quant_static(x + K8, K - K8, s_in, o, q + K8);
}

#endif /* __x86_64__ */
