/* avx512_common.h - inline AVX-512 F/BW/VL helpers shared by avx512.c and avx512_quant.c. Include
 * only from files whose functions carry HY_AVX512 (compiled for AVX-512 whatever the global -m flags
 * are; they must only run when hy_cpu_supports(HY_ISA_AVX512)).
 *
 * The avx512 reduction chain (kernel_table.h): each output is one 16-lane FMA chain, lane j taking
 * k = j, j+16, ... in increasing k, the last partial chunk zero-padded (masked loads), then
 * hy_avx512_hsum: the two 8-lane halves added lane by lane (l[j] + l[j+8]) and that 8-lane vector
 * summed in the avx2 order ((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7)).
 */
#ifndef HY_KERNELS_AVX512_COMMON_H
#define HY_KERNELS_AVX512_COMMON_H

#include "kernels/avx2_common.h"
#include "quant/dtype.h"

#include <immintrin.h>
#include <stdint.h>

#ifdef HY_AVX512_SIMDE
/* Tests only (tests/unit/avx512_emu.h): the intrinsics are SIMDe's portable emulations, compiled for
 * the including file's target, so this code runs and is checked on CPUs without AVX-512. */
#define HY_AVX512
#define HY_AVX512_INLINE static inline __attribute__((always_inline))
#else
#define HY_AVX512_TARGET "avx512f,avx512bw,avx512vl,avx2,fma,f16c"
#define HY_AVX512 __attribute__((target(HY_AVX512_TARGET)))
#define HY_AVX512_INLINE static inline __attribute__((always_inline, target(HY_AVX512_TARGET)))
#endif

/* The fixed horizontal sum of the avx512 chain (see above). */
HY_AVX512_INLINE float hy_avx512_hsum(__m512 v)
{
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return hy_avx2_hsum(_mm256_add_ps(lo, hi));
}

/* Bit i set where byte i of the 32 at p is an E4M3 NaN code (0x7f / 0xff). */
HY_AVX512_INLINE __mmask32 hy_avx512_e4m3_nan32(const uint8_t *p)
{
    const __m256i b = _mm256_loadu_si256((const __m256i *)p);
    return _mm256_cmpeq_epi8_mask(_mm256_or_si256(b, _mm256_set1_epi8((char)0x80)), _mm256_set1_epi8(-1));
}

/* Lanes [0, n) set, n in 0..16. */
HY_AVX512_INLINE __mmask16 hy_avx512_mask(int64_t n)
{
    return (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1u);
}

/* 16 elements of a F32 / BF16 / F16 array at element offset off, widened exactly to f32. */
HY_AVX512_INLINE __m512 hy_avx512_load(enum hy_dtype dt, const void *base, int64_t off)
{
    switch (dt) {
    case HY_DTYPE_BF16: {
        const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)base + off));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    case HY_DTYPE_F16:
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + off)));
    default:
        return _mm512_loadu_ps((const float *)base + off);
    }
}

/* The first rem (0..16) elements at off, widened, zero in the other lanes. Masked loads: nothing
 * past element off + rem - 1 is read. */
HY_AVX512_INLINE __m512 hy_avx512_load_tail(enum hy_dtype dt, const void *base, int64_t off, int64_t rem)
{
    const __mmask16 m = hy_avx512_mask(rem);
    switch (dt) {
    case HY_DTYPE_BF16: {
        const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)base + off);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    case HY_DTYPE_F16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)base + off));
    default:
        return _mm512_maskz_loadu_ps(m, (const float *)base + off);
    }
}

#endif
