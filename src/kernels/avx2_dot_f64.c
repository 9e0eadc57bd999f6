/* avx2_dot_f64.c - the avx2 f64 kernels of GPTQ (kernel_table.h), bitwise the ref's:
 * dot_f64: lanes 0-3 and 4-7 in two 4-wide accumulators, multiply then add (unfused), the tail
 * added to its lanes one element at a time;
 * gemm_sub_f64: 4 of its dots at a time sharing each load of v_j (8 accumulators), in dot_f64's
 * lanes and tail order; leftover rows through dot_f64;
 * gemm_tn_acc_f64: 4 x 8 entries of g in 8 accumulators, loaded once, every t added in turn
 * (multiply then add, as the ref), stored once; leftover rows and columns through the ref. */
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

void HY_AVX2 hy_avx2_gemm_tn_acc_f64(double *g, int64_t ldg, const double *a, int64_t lda, const double *b, int64_t ldb,
                                     int64_t nt, int64_t ni, int64_t nj)
{
    const int64_t ni4 = ni & ~(int64_t)3, nj8 = nj & ~(int64_t)7;
    for (int64_t i = 0; i < ni4; i += 4) {
        double *g0 = g + i * ldg, *g1 = g0 + ldg, *g2 = g1 + ldg, *g3 = g2 + ldg;
        for (int64_t j = 0; j < nj8; j += 8) {
            __m256d l0 = _mm256_loadu_pd(g0 + j), h0 = _mm256_loadu_pd(g0 + j + 4);
            __m256d l1 = _mm256_loadu_pd(g1 + j), h1 = _mm256_loadu_pd(g1 + j + 4);
            __m256d l2 = _mm256_loadu_pd(g2 + j), h2 = _mm256_loadu_pd(g2 + j + 4);
            __m256d l3 = _mm256_loadu_pd(g3 + j), h3 = _mm256_loadu_pd(g3 + j + 4);
            const double *at = a + i, *bt = b + j;
            for (int64_t t = 0; t < nt; t++, at += lda, bt += ldb) {
                const __m256d bl = _mm256_loadu_pd(bt), bh = _mm256_loadu_pd(bt + 4);
                __m256d s = _mm256_broadcast_sd(at);
                l0 = _mm256_add_pd(l0, _mm256_mul_pd(s, bl));
                h0 = _mm256_add_pd(h0, _mm256_mul_pd(s, bh));
                s = _mm256_broadcast_sd(at + 1);
                l1 = _mm256_add_pd(l1, _mm256_mul_pd(s, bl));
                h1 = _mm256_add_pd(h1, _mm256_mul_pd(s, bh));
                s = _mm256_broadcast_sd(at + 2);
                l2 = _mm256_add_pd(l2, _mm256_mul_pd(s, bl));
                h2 = _mm256_add_pd(h2, _mm256_mul_pd(s, bh));
                s = _mm256_broadcast_sd(at + 3);
                l3 = _mm256_add_pd(l3, _mm256_mul_pd(s, bl));
                h3 = _mm256_add_pd(h3, _mm256_mul_pd(s, bh));
            }
            _mm256_storeu_pd(g0 + j, l0);
            _mm256_storeu_pd(g0 + j + 4, h0);
            _mm256_storeu_pd(g1 + j, l1);
            _mm256_storeu_pd(g1 + j + 4, h1);
            _mm256_storeu_pd(g2 + j, l2);
            _mm256_storeu_pd(g2 + j + 4, h2);
            _mm256_storeu_pd(g3 + j, l3);
            _mm256_storeu_pd(g3 + j + 4, h3);
        }
    }
    hy_ref_gemm_tn_acc_f64(g + nj8, ldg, a, lda, b + nj8, ldb, nt, ni4, nj - nj8);      /* columns past the last 8 */
    hy_ref_gemm_tn_acc_f64(g + ni4 * ldg, ldg, a + ni4, lda, b, ldb, nt, ni - ni4, nj); /* rows past the last 4 */
}

#endif /* __x86_64__ */
