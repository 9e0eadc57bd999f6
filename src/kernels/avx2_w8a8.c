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

void HY_AVX2 hy_avx2_w8a8_dots(int32_t *acc, int64_t lda, const int8_t *q, int64_t T, const struct hy_tensor *W,
                               int64_t n0, int64_t n1)
{
    const int64_t K = W->cols, K32 = K & ~(int64_t)31;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t n = n0; n < n1; n++) {
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

#endif /* __x86_64__ */
