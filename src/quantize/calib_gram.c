/* calib_gram.c - the Gram sums of calibration (calib_gram.h). */
#include "quantize/calib_gram.h"

#include "kernels/kernel_table.h"

/* hy_calib_gram_add's tiling: x is widened to f64 in chunks of GRAM_CHUNK tokens, packed in panels of
 * GRAM_PANEL columns ([panel][token][column], zero past K); each task owns GRAM_ROWS rows of g, and a
 * panel of columns stays in cache across its row panels. */
#define GRAM_CHUNK 128
#define GRAM_PANEL 8
#define GRAM_ROWS 32

size_t hy_calib_gram_scratch(int64_t K)
{
    return (size_t)((K + GRAM_PANEL - 1) / GRAM_PANEL) * GRAM_PANEL * GRAM_CHUNK;
}

void hy_calib_gram_add(double *g, int64_t K, const float *x, int64_t T, double *pack)
{
    void (*acc)(double *, int64_t, const double *, int64_t, const double *, int64_t, int64_t, int64_t, int64_t) =
        hy_kernels_active()->gemm_tn_acc_f64;
    const int64_t np = (K + GRAM_PANEL - 1) / GRAM_PANEL, nblk = (K + GRAM_ROWS - 1) / GRAM_ROWS;
    for (int64_t t0 = 0; t0 < T; t0 += GRAM_CHUNK) {
        const int64_t tb = T - t0 < GRAM_CHUNK ? T - t0 : GRAM_CHUNK;
#pragma omp parallel if (K * K * tb >= ((int64_t)1 << 26))
        {
#pragma omp for schedule(static)
            for (int64_t p = 0; p < np; p++)
                for (int64_t t = 0; t < tb; t++) {
                    const float *xt = x + (t0 + t) * K + p * GRAM_PANEL;
                    double *d = pack + (p * tb + t) * GRAM_PANEL;
                    for (int64_t j = 0; j < GRAM_PANEL; j++)
                        d[j] = p * GRAM_PANEL + j < K ? (double)xt[j] : 0.0;
                }
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = nblk - 1; b >= 0; b--) { /* the longest rows first */
                const int64_t ip0 = b * GRAM_ROWS / GRAM_PANEL, ip1 = (b + 1) * GRAM_ROWS / GRAM_PANEL;
                for (int64_t jp = 0; jp < ip1 && jp < np; jp++)
                    for (int64_t ip = ip0 > jp ? ip0 : jp; ip < ip1 && ip < np; ip++) {
                        const int64_t i0 = ip * GRAM_PANEL, j0 = jp * GRAM_PANEL;
                        acc(g + i0 * K + j0, K, pack + ip * tb * GRAM_PANEL, GRAM_PANEL, pack + jp * tb * GRAM_PANEL,
                            GRAM_PANEL, tb, K - i0 < GRAM_PANEL ? K - i0 : GRAM_PANEL,
                            K - j0 < GRAM_PANEL ? K - j0 : GRAM_PANEL);
                    }
            }
        }
    }
}
