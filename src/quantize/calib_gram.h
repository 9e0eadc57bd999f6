/* calib_gram.h - the Gram sums GPTQ's calibration accumulates (calib.c for the linears, calib_attn.c for
 * the attention heads). */
#ifndef HY_QUANTIZE_CALIB_GRAM_H
#define HY_QUANTIZE_CALIB_GRAM_H

#include <stddef.h>
#include <stdint.h>

/* g [K, K] f64 += x^T x for x [T, K] f32 (GPTQ's H = X^T X summed, before the mean): each entry of the
 * lower triangle (diagonal included) adds x's rows one product at a time in increasing t, rounding
 * after each addition (gemm_tn_acc_f64; a product of two widened f32 values is exact), so for a given x
 * the bits do not depend on the thread count, the ISA level or how the rows are split across calls (in
 * order), and equal the plain loop g[i][j] += x_t[i] x_t[j]; entries above the
 * diagonal within its 8 x 8 tiles are written too, the rest of the upper triangle not (callers mirror
 * the lower one). pack: caller-owned scratch of hy_calib_gram_scratch(K) doubles. Threaded (OpenMP)
 * when K^2 x T is large. */
void hy_calib_gram_add(double *g, int64_t K, const float *x, int64_t T, double *pack);
size_t hy_calib_gram_scratch(int64_t K);

#endif
