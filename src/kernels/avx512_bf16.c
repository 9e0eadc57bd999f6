/* avx512_bf16.c - hy_matmul_bf16x on AVX512-BF16 dot products (vdpbf16ps), the avx512 level's
 * matmul_bf16x where the CPU has AVX512_BF16 (Cooper Lake, Sapphire Rapids and later, Zen 4).
 *
 * For prefill-sized calls (T >= HY_BF16X_MIN_T) with weights that have a bf16 form (bf16_panel.h):
 * x (bf16 values by contract) is converted once to bf16 rows of Kp = round_up(K, 32) elements; each
 * thread takes blocks of 16 weight rows (read in place when BF16 with K % 32 == 0, else written to a
 * zero-padded bf16 panel, FP8 / MX dequantized there); 4 tokens x 4 rows register tiles run, per
 * output, one 16-lane chain acc = dpbf16(acc, x[k..k+32], w[k..k+32]) (lane j adds the products of
 * elements 2j and 2j+1 of each 32-element chunk, in increasing k), then hy_avx512_hsum, times the
 * per-tensor scale. Products of bf16 values are exact in fp32; results differ from hy_matmul's f32
 * chain in rounding order only (and vdpbf16ps flushes denormals), and they do not depend on T or on
 * the thread count. Smaller T and other dtypes take hy_avx512_matmul.
 */
#if defined(__x86_64__)

#include "kernels/avx512_bf16.h"

#include "kernels/avx512_common.h"
#include "kernels/avx512_quant.h"
#include "kernels/bf16_panel.h"
#include "kernels/kernel_table.h"

#include <stdlib.h>
#include <string.h>

#ifdef HY_AVX512_SIMDE
#define BF16_TARGET
#else
#define BF16_TARGET __attribute__((target(HY_AVX512_TARGET ",avx512bf16")))
#endif

/* y[i*ldy + j] = chain(x row i, w row j) for i < MR, j < NR (<= 4), rows of kc chunks of 32 bf16. */
static inline __attribute__((always_inline)) BF16_TARGET void dp_tile(const int MR, const int NR,
                                                                        const uint16_t *x, int64_t ldx,
                                                                        const uint16_t *w, int64_t ldw, int64_t kc,
                                                                        float oscale, float *y, int64_t ldy)
{
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            acc[i][j] = _mm512_setzero_ps();
    for (int64_t c = 0; c < kc; c++) {
        __m512bh xv[4];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = (__m512bh)_mm512_loadu_si512((const void *)(x + i * ldx + 32 * c));
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            const __m512bh wv = (__m512bh)_mm512_loadu_si512((const void *)(w + j * ldw + 32 * c));
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv[i], wv);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            y[i * ldy + j] = hy_avx512_hsum(acc[i][j]) * oscale;
}

#define BF_CASES(MR)                                                                              \
    case (MR) * 8 + 1: dp_tile(MR, 1, x, ldx, w, ldw, kc, oscale, y, ldy); break;               \
    case (MR) * 8 + 2: dp_tile(MR, 2, x, ldx, w, ldw, kc, oscale, y, ldy); break;               \
    case (MR) * 8 + 3: dp_tile(MR, 3, x, ldx, w, ldw, kc, oscale, y, ldy); break;               \
    case (MR) * 8 + 4: dp_tile(MR, 4, x, ldx, w, ldw, kc, oscale, y, ldy); break;

static BF16_TARGET void dp_tile_fn(int mr, int nr, const uint16_t *x, int64_t ldx, const uint16_t *w, int64_t ldw,
                                int64_t kc, float oscale, float *y, int64_t ldy)
{
    switch (mr * 8 + nr) {
        BF_CASES(1)
        BF_CASES(2)
        BF_CASES(3)
        BF_CASES(4)
    default: break;
    }
}

#define NB 16 /* weight rows per block */

void hy_avx512bf16_matmul_bf16x(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    if (T < HY_BF16X_MIN_T || !hy_bf16_form(W)) {
        hy_avx512_matmul(y, x, T, W);
        return;
    }
    const int64_t N = W->rows, K = W->cols, kc = (K + 31) / 32, Kp = kc * 32, blocks = (N + NB - 1) / NB;
    uint16_t *xb = aligned_alloc(64, (size_t)(T * Kp) * sizeof(uint16_t));
    if (!xb) {
        hy_avx512_matmul(y, x, T, W);
        return;
    }
    for (int64_t t = 0; t < T; t++) { /* RNE: exact for bf16-representable x */
        for (int64_t k = 0; k < K; k++)
            xb[t * Kp + k] = hy_f32_to_bf16(x[t * K + k]);
        memset(xb + t * Kp + K, 0, (size_t)(Kp - K) * sizeof(uint16_t));
    }
    const int in_place = hy_bf16_in_place(W);
    const float oscale = hy_bf16_out_scale(W);
    int failed = 0;
#pragma omp parallel if (blocks > 1)
    {
        uint16_t *panel = in_place ? NULL : aligned_alloc(64, (size_t)(NB * Kp) * sizeof(uint16_t));
        float *wrow = in_place ? NULL : malloc((size_t)(Kp + 16) * sizeof(float));
        const int ok = in_place || (panel && wrow);
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t n0 = b * NB, nv = N - n0 < NB ? N - n0 : NB;
            if (!ok) {
#pragma omp atomic write
                failed = 1;
                continue;
            }
            const uint16_t *wp = (const uint16_t *)W->data + n0 * K;
            if (!in_place) {
                hy_bf16_panel(W, n0, nv, nv, Kp, panel, wrow, hy_avx512q_widen_rows);
                wp = panel;
            }
            for (int64_t t = 0; t < T; t += 4)
                for (int64_t j = 0; j < nv; j += 4)
                    dp_tile_fn((int)(T - t < 4 ? T - t : 4), (int)(nv - j < 4 ? nv - j : 4), xb + t * Kp, Kp,
                            wp + j * Kp, Kp, kc, oscale, y + t * N + n0 + j, N);
        }
        free(panel);
        free(wrow);
    }
    free(xb);
    if (failed) /* out of memory on a thread: the whole call on the f32 path (one order per call) */
        hy_avx512_matmul(y, x, T, W);
}

#endif /* __x86_64__ */
