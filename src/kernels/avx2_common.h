/* avx2_common.h - inline AVX2/FMA/F16C helpers shared by avx2.c and avx2_attn.c. Include only from
 * files whose functions carry HY_AVX2 (they are compiled for AVX2 whatever the global -m flags are,
 * and must only run when hy_cpu_supports(HY_ISA_AVX2)). */
#ifndef HY_KERNELS_AVX2_COMMON_H
#define HY_KERNELS_AVX2_COMMON_H

#include "quant/dtype.h"

#include <immintrin.h>
#include <stdint.h>

#define HY_AVX2 __attribute__((target("avx2,fma,f16c")))
#define HY_AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)): the same order as ref.c's hy_ref_dot_f32. */
HY_AVX2_INLINE float hy_avx2_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 elements of a F32 / BF16 / F16 array at element offset off, widened exactly to f32. */
HY_AVX2_INLINE __m256 hy_avx2_load(enum hy_dtype dt, const void *base, int64_t off)
{
    switch (dt) {
    case HY_DTYPE_BF16: {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)base + off));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    case HY_DTYPE_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + off)));
    default:
        return _mm256_loadu_ps((const float *)base + off);
    }
}

/* The last rem (1..7) elements at off, widened, zero-padded to 8 lanes. */
HY_AVX2_INLINE __m256 hy_avx2_load_tail(enum hy_dtype dt, const void *base, int64_t off, int64_t rem)
{
    float tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < rem; i++) {
        if (dt == HY_DTYPE_BF16)
            tmp[i] = hy_bf16_to_f32(((const uint16_t *)base)[off + i]);
        else if (dt == HY_DTYPE_F16)
            tmp[i] = _cvtsh_ss(((const uint16_t *)base)[off + i]);
        else
            tmp[i] = ((const float *)base)[off + i];
    }
    return _mm256_loadu_ps(tmp);
}

/* exp(x) per lane, Cephes-style range reduction + degree-6 polynomial (about 2 ulp); inputs below
 * -87.3 give 0, inputs above 88 are clamped to 88 (exp(88) = 1.65e38). */
HY_AVX2_INLINE __m256 hy_avx2_exp(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.3f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(88.0f));
    __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

#endif
