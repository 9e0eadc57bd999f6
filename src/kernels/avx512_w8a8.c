/* avx512_w8a8.c - the AVX512-VNNI integer dots of the W8A8 matmuls (w8a8.h).
 *
 * vpdpbusd multiplies unsigned by signed bytes, four products summed into each int32 lane with no
 * intermediate saturation. The signed activation q becomes unsigned as u = q + 128 (q XOR 0x80), so
 * dpbusd(u, w) = sum q*w + 128 * sum w; a second dpbusd of ones against w gives sum w in the same pass,
 * and the row's result is the difference, exact in int32 (|128 * sum w| <= 128 * 127 * K). The last
 * partial 64-byte chunk is loaded masked (zero weights there contribute nothing to either sum). Integer
 * sums are exact in any order: the result equals the scalar reference bit for bit. Decode (T < 4) takes
 * 4 weight rows per token (prefetching the next 4); prefill tiles of 4 rows x 4 tokens (16 accumulators;
 * sum w once per group of 4 rows), the rows' remainder 4 tokens per row. */
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

/* Bytes [k, k + 64) of p under mask m (all ones inside the row; the tail's bytes past K zero). */
HY_VNNI_INLINE __m512i load_m(const int8_t *p, int64_t k, __mmask64 m)
{
    return _mm512_maskz_loadu_epi8(m, p + k);
}

HY_VNNI_INLINE int32_t hsum512(__m512i v)
{
#ifdef HY_AVX512_SIMDE /* SIMDe 0.7.4 has no _mm512_reduce_add_epi32 */
    int32_t b[16], s = 0;
    _mm512_storeu_si512((void *)b, v);
    for (int i = 0; i < 16; i++)
        s += b[i];
    return s;
#else
    return _mm512_reduce_add_epi32(v);
#endif
}

/* One token a against one row w. */
HY_VNNI_INLINE int32_t dot_one(const int8_t *a, const int8_t *w, int64_t K)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi8(1);
    __m512i s = _mm512_setzero_si512(), c = s;
    for (int64_t k = 0; k < K; k += 64) {
        const __m512i wv = load_k(w, k, K);
        s = _mm512_dpbusd_epi32(s, _mm512_xor_si512(load_k(a, k, K), flip), wv);
        c = _mm512_dpbusd_epi32(c, ones, wv);
    }
    return hsum512(s) - 128 * hsum512(c);
}

/* One token a against 4 rows w, w + K, w + 2K, w + 3K: out[0..3] (named accumulators: registers). */
HY_VNNI_INLINE void dot_rows4(int32_t *out, const int8_t *a, const int8_t *w, int64_t K)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi8(1);
    const int8_t *w1 = w + K, *w2 = w1 + K, *w3 = w2 + K;
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0, c0 = s0, c1 = s0, c2 = s0, c3 = s0;
    const int64_t pf = 4 * K; /* the next tile's rows, at the same column */
    for (int64_t k = 0; k < K; k += 64) {
        _mm_prefetch((const char *)(w + k + pf), _MM_HINT_T0);
        _mm_prefetch((const char *)(w1 + k + pf), _MM_HINT_T0);
        _mm_prefetch((const char *)(w2 + k + pf), _MM_HINT_T0);
        _mm_prefetch((const char *)(w3 + k + pf), _MM_HINT_T0);
        const __m512i u = _mm512_xor_si512(load_k(a, k, K), flip);
        const __m512i v0 = load_k(w, k, K), v1 = load_k(w1, k, K), v2 = load_k(w2, k, K), v3 = load_k(w3, k, K);
        s0 = _mm512_dpbusd_epi32(s0, u, v0);
        c0 = _mm512_dpbusd_epi32(c0, ones, v0);
        s1 = _mm512_dpbusd_epi32(s1, u, v1);
        c1 = _mm512_dpbusd_epi32(c1, ones, v1);
        s2 = _mm512_dpbusd_epi32(s2, u, v2);
        c2 = _mm512_dpbusd_epi32(c2, ones, v2);
        s3 = _mm512_dpbusd_epi32(s3, u, v3);
        c3 = _mm512_dpbusd_epi32(c3, ones, v3);
    }
    out[0] = hsum512(s0) - 128 * hsum512(c0);
    out[1] = hsum512(s1) - 128 * hsum512(c1);
    out[2] = hsum512(s2) - 128 * hsum512(c2);
    out[3] = hsum512(s3) - 128 * hsum512(c3);
}

/* 4 tokens a, a + K, a + 2K, a + 3K against one row w: out[t * lda]; sum w once. */
HY_VNNI_INLINE void dot_tokens4(int32_t *out, int64_t lda, const int8_t *a, const int8_t *w, int64_t K)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi8(1);
    const int8_t *a1 = a + K, *a2 = a1 + K, *a3 = a2 + K;
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0, c = s0;
    for (int64_t k = 0; k < K; k += 64) {
        const __m512i wv = load_k(w, k, K);
        c = _mm512_dpbusd_epi32(c, ones, wv);
        s0 = _mm512_dpbusd_epi32(s0, _mm512_xor_si512(load_k(a, k, K), flip), wv);
        s1 = _mm512_dpbusd_epi32(s1, _mm512_xor_si512(load_k(a1, k, K), flip), wv);
        s2 = _mm512_dpbusd_epi32(s2, _mm512_xor_si512(load_k(a2, k, K), flip), wv);
        s3 = _mm512_dpbusd_epi32(s3, _mm512_xor_si512(load_k(a3, k, K), flip), wv);
    }
    const int32_t corr = 128 * hsum512(c);
    out[0] = hsum512(s0) - corr;
    out[lda] = hsum512(s1) - corr;
    out[2 * lda] = hsum512(s2) - corr;
    out[3 * lda] = hsum512(s3) - corr;
}

#define TOKEN_BLOCK 128 /* prefill tokens per pass over the range's rows (128 x K int8 in L2) */

/* 128 * sum w of rows w, w + K, w + 2K, w + 3K (the +128 offset's correction, once per row group). */
HY_VNNI_INLINE void row_corr4(int32_t *corr, const int8_t *w, int64_t K)
{
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0;
    for (int64_t k = 0; k < K; k += 64) {
        c0 = _mm512_dpbusd_epi32(c0, ones, load_k(w, k, K));
        c1 = _mm512_dpbusd_epi32(c1, ones, load_k(w + K, k, K));
        c2 = _mm512_dpbusd_epi32(c2, ones, load_k(w + 2 * K, k, K));
        c3 = _mm512_dpbusd_epi32(c3, ones, load_k(w + 3 * K, k, K));
    }
    corr[0] = 128 * hsum512(c0);
    corr[1] = 128 * hsum512(c1);
    corr[2] = 128 * hsum512(c2);
    corr[3] = 128 * hsum512(c3);
}

/* 4 tokens a + i K against 4 rows w + j K: out[i * lda + j] (16 named accumulators; the rows stay in L1
 * across the token groups, corr from row_corr4). */
HY_VNNI_INLINE void tile4x4(int32_t *out, int64_t lda, const int8_t *a, const int8_t *w, int64_t K, const int32_t *corr)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512i s00 = _mm512_setzero_si512(), s01 = s00, s02 = s00, s03 = s00, s10 = s00, s11 = s00, s12 = s00, s13 = s00,
            s20 = s00, s21 = s00, s22 = s00, s23 = s00, s30 = s00, s31 = s00, s32 = s00, s33 = s00;
    /* full 64-byte chunks unmasked, the last partial one masked (a zero weight adds nothing) */
#define TOKEN_ROW(i, S0, S1, S2, S3, M)                                                                                \
    do {                                                                                                               \
        const __m512i u = _mm512_xor_si512(load_m(a + (i)*K, k, M), flip);                                             \
        S0 = _mm512_dpbusd_epi32(S0, u, v0);                                                                           \
        S1 = _mm512_dpbusd_epi32(S1, u, v1);                                                                           \
        S2 = _mm512_dpbusd_epi32(S2, u, v2);                                                                           \
        S3 = _mm512_dpbusd_epi32(S3, u, v3);                                                                           \
    } while (0)
#define TILE_STEP(M)                                                                                                   \
    do {                                                                                                               \
        const __m512i v0 = load_m(w, k, M), v1 = load_m(w + K, k, M), v2 = load_m(w + 2 * K, k, M),                    \
                      v3 = load_m(w + 3 * K, k, M);                                                                    \
        TOKEN_ROW(0, s00, s01, s02, s03, M);                                                                           \
        TOKEN_ROW(1, s10, s11, s12, s13, M);                                                                           \
        TOKEN_ROW(2, s20, s21, s22, s23, M);                                                                           \
        TOKEN_ROW(3, s30, s31, s32, s33, M);                                                                           \
    } while (0)
    int64_t k = 0;
    for (; k + 64 <= K; k += 64)
        TILE_STEP(~(__mmask64)0);
    if (k < K) {
        const __mmask64 tail = (__mmask64)(~0ull >> (64 - (K - k)));
        TILE_STEP(tail);
    }
#undef TILE_STEP
#undef TOKEN_ROW
#define OUT_ROW(i, S0, S1, S2, S3)                                                                                     \
    do {                                                                                                               \
        out[(i)*lda] = hsum512(S0) - corr[0];                                                                          \
        out[(i)*lda + 1] = hsum512(S1) - corr[1];                                                                      \
        out[(i)*lda + 2] = hsum512(S2) - corr[2];                                                                      \
        out[(i)*lda + 3] = hsum512(S3) - corr[3];                                                                      \
    } while (0)
    OUT_ROW(0, s00, s01, s02, s03);
    OUT_ROW(1, s10, s11, s12, s13);
    OUT_ROW(2, s20, s21, s22, s23);
    OUT_ROW(3, s30, s31, s32, s33);
#undef OUT_ROW
}

void HY_VNNI hy_avx512_w8a8_dots(int32_t *acc, int64_t lda, const int8_t *q, int64_t T, const struct hy_tensor *W,
                                 int64_t n0, int64_t n1)
{
    const int64_t K = W->cols;
    const int8_t *w0 = (const int8_t *)W->data;
    if (T < 4) { /* decode: four rows in flight per token */
        int64_t n = n0;
        for (; n + 4 <= n1; n += 4)
            for (int64_t t = 0; t < T; t++)
                dot_rows4(acc + t * lda + (n - n0), q + t * K, w0 + n * K, K);
        for (; n < n1; n++)
            for (int64_t t = 0; t < T; t++)
                acc[t * lda + (n - n0)] = dot_one(q + t * K, w0 + n * K, K);
        return;
    }
    /* prefill: 4 rows at a time (in L1) against every group of 4 tokens of a block of TOKEN_BLOCK (the
     * block's activations stay in L2; the range's rows are re-read from L2 once per block) */
    const int64_t n4 = n0 + (n1 - n0) / 4 * 4; /* rows [n0, n4) in groups of 4, [n4, n1) one by one */
    for (int64_t tb = 0; tb < T; tb += TOKEN_BLOCK) {
        const int64_t te = T - tb < TOKEN_BLOCK ? T : tb + TOKEN_BLOCK;
        for (int64_t n = n0; n < n4; n += 4) {
            int32_t corr[4];
            row_corr4(corr, w0 + n * K, K);
            int64_t t = tb;
            for (; t + 4 <= te; t += 4)
                tile4x4(acc + t * lda + (n - n0), lda, q + t * K, w0 + n * K, K, corr);
            for (; t < te; t++)
                dot_rows4(acc + t * lda + (n - n0), q + t * K, w0 + n * K, K);
        }
    }
    for (int64_t n = n4; n < n1; n++) { /* the range's last rows */
        int64_t t = 0;
        for (; t + 4 <= T; t += 4)
            dot_tokens4(acc + t * lda + (n - n0), lda, q + t * K, w0 + n * K, K);
        for (; t < T; t++)
            acc[t * lda + (n - n0)] = dot_one(q + t * K, w0 + n * K, K);
    }
}

#endif /* __x86_64__ */
