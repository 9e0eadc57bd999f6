/* avx2_fp8_fit.c - the avx2 fp8_fit_pass (kernels/fp8_scale.h) and fp8_encode (kernel_table.h):
 * 8 elements per step, the E4M3 rounding of quant/formats.h's hy_e4m3_round in integer and float
 * lanes. The pass multiplies and sums unfused with the tail zero-padded (a zero element adds +0 to
 * every sum), so its sums are bitwise the ref's; the encoder's bytes are hy_f32_to_e4m3's. */
#if defined(__x86_64__)

#include "kernels/avx2_common.h"
#include "kernels/kernel_table.h"
#include "quant/formats.h"

/* hy_e4m3_round of 8 lanes. */
HY_AVX2_INLINE __m256 e4m3_round8(__m256 x)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 ax = _mm256_and_ps(x, absm);
    const __m256i a = _mm256_castps_si256(ax);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, 20), _mm256_set1_epi32(1));
    const __m256i nrm = _mm256_and_si256(_mm256_add_epi32(a, _mm256_add_epi32(_mm256_set1_epi32(0x7ffff), lsb)),
                                         _mm256_set1_epi32((int)0xfff00000u));
    const __m256 big = _mm256_set1_ps(0x1p14f);
    const __m256 sub = _mm256_sub_ps(_mm256_add_ps(ax, big), big);
    __m256 r = _mm256_blendv_ps(_mm256_castsi256_ps(nrm), sub, _mm256_cmp_ps(ax, _mm256_set1_ps(0x1p-6f), _CMP_LT_OQ));
    r = _mm256_blendv_ps(r, _mm256_set1_ps(448.0f), _mm256_cmp_ps(ax, _mm256_set1_ps(448.0f), _CMP_GE_OQ));
    r = _mm256_or_ps(r, _mm256_andnot_ps(absm, x));
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(ax, ax, _CMP_UNORD_Q));
}

void HY_AVX2 hy_avx2_fp8_fit_pass(const float *x, int64_t n, float s, float out[3])
{
    const __m256 vs = _mm256_set1_ps(s);
    __m256 e = _mm256_setzero_ps(), xc = _mm256_setzero_ps(), cc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) {
        __m256 v;
        if (i + 8 <= n)
            v = _mm256_loadu_ps(x + i);
        else {
            const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)), idx);
            v = _mm256_maskload_ps(x + i, m);
        }
        const __m256 r = e4m3_round8(_mm256_div_ps(v, vs));
        const __m256 d = _mm256_sub_ps(_mm256_mul_ps(r, vs), v);
        e = _mm256_add_ps(e, _mm256_mul_ps(d, d));
        xc = _mm256_add_ps(xc, _mm256_mul_ps(v, r));
        cc = _mm256_add_ps(cc, _mm256_mul_ps(r, r));
    }
    out[0] = hy_avx2_hsum(e);
    out[1] = hy_avx2_hsum(xc);
    out[2] = hy_avx2_hsum(cc);
}

void HY_AVX2 hy_avx2_fp8_encode(const float *x, int64_t n, float s, uint8_t *q)
{
    const __m256 vs = _mm256_set1_ps(s), absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i gather = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12,
                                            -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), vs), r = e4m3_round8(v);
        const __m256 ar = _mm256_and_ps(r, absm);
        /* normal: (f32 bits >> 20) - (120 << 3) is the byte (exponent rebiased, 3 mantissa bits);
         * subnormal (< 2^-6): the grid index r * 2^9 (exact, 0..7); NaN: 0x7f */
        const __m256i nb = _mm256_sub_epi32(_mm256_srli_epi32(_mm256_castps_si256(ar), 20), _mm256_set1_epi32(960));
        const __m256i sb = _mm256_cvttps_epi32(_mm256_mul_ps(ar, _mm256_set1_ps(512.0f)));
        __m256i b = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(nb), _mm256_castsi256_ps(sb),
                                                         _mm256_cmp_ps(ar, _mm256_set1_ps(0x1p-6f), _CMP_LT_OQ)));
        b = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(b), _mm256_castsi256_ps(_mm256_set1_epi32(0x7f)),
                                                 _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
        b = _mm256_or_si256(b, _mm256_slli_epi32(_mm256_srli_epi32(_mm256_castps_si256(v), 31), 7)); /* sign */
        b = _mm256_shuffle_epi8(b, gather);
        const __m128i lo = _mm256_castsi256_si128(b), hi = _mm256_extracti128_si256(b, 1);
        _mm_storel_epi64((__m128i *)(q + i), _mm_unpacklo_epi32(lo, hi));
    }
    for (; i < n; i++)
        q[i] = hy_f32_to_e4m3(x[i] / s);
}

#endif /* __x86_64__ */
