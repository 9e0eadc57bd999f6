/* avx2_dot_f64.c - the avx2 dot_f64 (kernel_table.h): lanes 0-3 and 4-7 in two 4-wide f64
 * accumulators, multiply then add (unfused), the tail added to its lanes one element at a time, so
 * the sum is bitwise hy_ref_dot_f64's. */
#if defined(__x86_64__)

#include "kernels/avx2_common.h"
#include "kernels/kernel_table.h"

double HY_AVX2 hy_avx2_dot_f64(const double *a, const double *b, int64_t n)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        lo = _mm256_add_pd(lo, _mm256_mul_pd(_mm256_loadu_pd(a + k), _mm256_loadu_pd(b + k)));
        hi = _mm256_add_pd(hi, _mm256_mul_pd(_mm256_loadu_pd(a + k + 4), _mm256_loadu_pd(b + k + 4)));
    }
    double l[8];
    _mm256_storeu_pd(l, lo);
    _mm256_storeu_pd(l + 4, hi);
    for (int j = 0; k < n; k++, j++)
        l[j] += a[k] * b[k];
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

#endif /* __x86_64__ */
