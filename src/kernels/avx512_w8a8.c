/* avx512_w8a8.c - the AVX512-VNNI integer dots of the W8A8 matmuls (w8a8.h).
 *
 * vpdpbusd multiplies unsigned by signed bytes, four products summed into each int32 lane with no
 * intermediate saturation. The signed activation q becomes unsigned as u = q + 128 (q XOR 0x80), so
 * dpbusd(u, w) = sum q*w + 128 * sum w; a second dpbusd of ones against w gives sum w in the same pass,
 * and the row's result is the difference, exact in int32 (|128 * sum w| <= 128 * 127 * K). The last
 * partial 64-byte chunk is loaded masked (zero weights there contribute nothing to either sum). Integer
 * sums are exact in any order: the result equals the scalar reference bit for bit. Decode (T < 4) takes
 * 4 weight rows per token; prefill 4 tokens per weight row (sum w once per row). */
#if defined(__x86_64__)

#include "kernels/w8a8.h"

#include <immintrin.h>

#ifdef HY_AVX512_SIMDE
#define HY_VNNI
#define HY_VNNI_INLINE static inline __attribute__((always_inline))
#else
#define HY_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define HY_VNNI_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512vnni")))
#endif

HY_VNNI_INLINE __m512i load_k(const int8_t *p, int64_t k, int64_t K)
{
    if (k + 64 <= K)
        return _mm512_loadu_si512((const void *)(p + k));
    return _mm512_maskz_loadu_epi8((__mmask64)(~0ull >> (64 - (K - k))), p + k);
}

HY_VNNI_INLINE int32_t hsum512(__m512i v)
{
    int32_t b[16], s = 0;
    _mm512_storeu_si512((void *)b, v);
    for (int i = 0; i < 16; i++)
        s += b[i];
    return s;
}

/* sum_k a[k] * w[k] for nr rows w + j*K (nr <= 4) against one activation row a. */
HY_VNNI_INLINE void dots_rows(int32_t *out, int64_t stride, const int8_t *a, const int8_t *w, int nr, int64_t K)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi8(1);
    __m512i s[4], c[4];
    for (int j = 0; j < 4; j++)
        s[j] = c[j] = _mm512_setzero_si512();
    for (int64_t k = 0; k < K; k += 64) {
        const __m512i u = _mm512_xor_si512(load_k(a, k, K), flip);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            if (j >= nr)
                break;
            const __m512i wv = load_k(w + j * K, k, K);
            s[j] = _mm512_dpbusd_epi32(s[j], u, wv);
            c[j] = _mm512_dpbusd_epi32(c[j], ones, wv);
        }
    }
    for (int j = 0; j < nr; j++)
        out[j * stride] = hsum512(s[j]) - 128 * hsum512(c[j]);
}

/* sum_k a_t[k] * w[k] for nt tokens a + t*K (nt <= 4) against one weight row: out[t * lda]. */
HY_VNNI_INLINE void dots_tokens(int32_t *out, int64_t lda, const int8_t *a, int nt, const int8_t *w, int64_t K)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi8(1);
    __m512i s[4], c = _mm512_setzero_si512();
    for (int t = 0; t < 4; t++)
        s[t] = _mm512_setzero_si512();
    for (int64_t k = 0; k < K; k += 64) {
        const __m512i wv = load_k(w, k, K);
        c = _mm512_dpbusd_epi32(c, ones, wv);
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            if (t >= nt)
                break;
            s[t] = _mm512_dpbusd_epi32(s[t], _mm512_xor_si512(load_k(a + t * K, k, K), flip), wv);
        }
    }
    const int32_t corr = 128 * hsum512(c);
    for (int t = 0; t < nt; t++)
        out[t * lda] = hsum512(s[t]) - corr;
}

void HY_VNNI hy_avx512_w8a8_dots(int32_t *acc, int64_t lda, const int8_t *q, int64_t T, const struct hy_tensor *W,
                                 int64_t n0, int64_t n1)
{
    const int64_t K = W->cols;
    const int8_t *w0 = (const int8_t *)W->data;
    if (T < 4) { /* decode: four rows in flight per token */
        for (int64_t n = n0; n < n1; n += 4) {
            const int nr = n1 - n < 4 ? (int)(n1 - n) : 4;
            for (int64_t t = 0; t < T; t++)
                dots_rows(acc + t * lda + (n - n0), 1, q + t * K, w0 + n * K, nr, K);
        }
        return;
    }
    /* prefill: 4 tokens (in L1) against every row of the range (the caller's block of rows stays in L2) */
    for (int64_t t = 0; t < T; t += 4)
        for (int64_t n = n0; n < n1; n++)
            dots_tokens(acc + t * lda + (n - n0), lda, q + t * K, T - t < 4 ? (int)(T - t) : 4, w0 + n * K, K);
}

#endif /* __x86_64__ */
