/* avx2_dot_f64.c - the avx2 f64 kernels of GPTQ (kernel_table.h), bitwise the ref's:
 * dot_f64: lanes 0-3 and 4-7 in two 4-wide accumulators, multiply then add (unfused), the tail
 * added to its lanes one element at a time;
 * gemm_sub_f64: 4 of its dots at a time sharing each load of v_j (8 accumulators), in dot_f64's
 * lanes and tail order; leftover rows through dot_f64. */
#if defined(__x86_64__)

#include "kernels/avx2_common.h"
#include "kernels/kernel_table.h"

/* Lanes 0-3 (lo) and 4-7 (hi) of a dot_f64 plus its tail elements k >= k0, summed in its order. */
HY_AVX2_INLINE double dot_finish(__m256d lo, __m256d hi, const double *a, const double *b, int64_t k0, int64_t n)
{
    double l[8];
    _mm256_storeu_pd(l, lo);
    _mm256_storeu_pd(l + 4, hi);
    for (int j = 0; k0 < n; k0++, j++)
        l[j] += a[k0] * b[k0];
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

double HY_AVX2 hy_avx2_dot_f64(const double *a, const double *b, int64_t n)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        lo = _mm256_add_pd(lo, _mm256_mul_pd(_mm256_loadu_pd(a + k), _mm256_loadu_pd(b + k)));
        hi = _mm256_add_pd(hi, _mm256_mul_pd(_mm256_loadu_pd(a + k + 4), _mm256_loadu_pd(b + k + 4)));
    }
    return dot_finish(lo, hi, a, b, k, n);
}

void HY_AVX2 hy_avx2_gemm_sub_f64(double *x, int64_t ldx, int64_t nr, const double *e, int64_t lde, const double *v,
                                  int64_t ldv, int64_t nb, int64_t n)
{
    const int64_t n8 = nb & ~(int64_t)7;
    for (int64_t j = 0; j < n; j++) {
        const double *vj = v + j * ldv;
        int64_t t = 0;
        for (; t + 4 <= nr; t += 4) { /* 4 dots sharing each load of v_j */
            const double *e0 = e + t * lde, *e1 = e0 + lde, *e2 = e1 + lde, *e3 = e2 + lde;
            __m256d l0 = _mm256_setzero_pd(), h0 = l0, l1 = l0, h1 = l0, l2 = l0, h2 = l0, l3 = l0, h3 = l0;
            for (int64_t k = 0; k < n8; k += 8) {
                _mm_prefetch((const char *)(vj + 2 * ldv + k), _MM_HINT_T0); /* v_(j+2): rows lie ldv apart */
                const __m256d va = _mm256_loadu_pd(vj + k), vb = _mm256_loadu_pd(vj + k + 4);
                l0 = _mm256_add_pd(l0, _mm256_mul_pd(_mm256_loadu_pd(e0 + k), va));
                h0 = _mm256_add_pd(h0, _mm256_mul_pd(_mm256_loadu_pd(e0 + k + 4), vb));
                l1 = _mm256_add_pd(l1, _mm256_mul_pd(_mm256_loadu_pd(e1 + k), va));
                h1 = _mm256_add_pd(h1, _mm256_mul_pd(_mm256_loadu_pd(e1 + k + 4), vb));
                l2 = _mm256_add_pd(l2, _mm256_mul_pd(_mm256_loadu_pd(e2 + k), va));
                h2 = _mm256_add_pd(h2, _mm256_mul_pd(_mm256_loadu_pd(e2 + k + 4), vb));
                l3 = _mm256_add_pd(l3, _mm256_mul_pd(_mm256_loadu_pd(e3 + k), va));
                h3 = _mm256_add_pd(h3, _mm256_mul_pd(_mm256_loadu_pd(e3 + k + 4), vb));
            }
            x[t * ldx + j] -= dot_finish(l0, h0, e0, vj, n8, nb);
            x[(t + 1) * ldx + j] -= dot_finish(l1, h1, e1, vj, n8, nb);
            x[(t + 2) * ldx + j] -= dot_finish(l2, h2, e2, vj, n8, nb);
            x[(t + 3) * ldx + j] -= dot_finish(l3, h3, e3, vj, n8, nb);
        }
        for (; t < nr; t++)
            x[t * ldx + j] -= hy_avx2_dot_f64(e + t * lde, vj, nb);
    }
}

#endif /* __x86_64__ */
