/* w4a8.h - opt-in W4A8 matmul: MXFP4 weights x MXINT8 activations (internal to src/kernels).
 *
 * Selected by env HYINFER_MXFP4_ACT=f32|mxint8, read once (default f32: the exact path where every
 * MXFP4 weight enters the f32 FMA chain as its dequantized value, kernel_table.h). With mxint8, a
 * matmul whose W is F4_E2M1 + HY_QS_MX32 (cols even) quantizes each token row x[K] to MXINT8 once
 * per call and computes integer block dots (ref: w4a8.c, the oracle; avx2: avx2_w4a8.c).
 *
 * Activation rule (OCP MX v1.0 MXINT8 elements, power-of-two block scale), per block b of 32
 * elements k in [32b, min(32b+32, K)):
 * - a = max |x_k|. If some x_k is NaN or +-inf the block is "non-finite": X_b = HY_W4A8_XNAN,
 *   q_k = 0. If a == 0: X_b = -148, q_k = 0.
 * - otherwise X_b = max(-148, the smallest integer X with a / 2^X <= 127). With a = m * 2^e
 *   (frexp, m in [0.5, 1)) that smallest X is e - 7 if m <= 127/128, else e - 6. X_b lies in
 *   [-148, 122] (the floor only matters for blocks of f32 subnormals, a < 2^-141; it keeps
 *   2^(X_b - 1) a representable f32, which the AVX2 kernel uses).
 * - q_k = round_half_even(x_k / 2^X_b) (exact division; |q_k| <= 127 by construction, then
 *   clamped to [-127, 127] anyway).
 * Weight element w = e2m1(code) * 2^(sw - 127); 2*e2m1 is an integer in -12..12 (c below).
 * Output, per (token t, row n): s_b = sum_k q_k * c_k (exact int32, |s_b| <= 32*127*12),
 * f_b = 2^(X_b + sw_b - 128) rounded to f32 exactly as ldexpf(1, .) does (0 below 2^-150, inf
 * from 2^128), f_b = NaN if sw_b == 255 or the activation block is non-finite; then
 * acc[b mod 8] = fma((float)s_b, f_b, acc[b mod 8]) for b = 0, 1, ... (acc starts at +0), and
 * y = ((acc0+acc4)+(acc2+acc6))+((acc1+acc5)+(acc3+acc7)). ref and avx2 are bitwise equal, and
 * y[t, n] depends only on x row t and W row n (T- and thread-invariant).
 */
#ifndef HY_KERNELS_W4A8_H
#define HY_KERNELS_W4A8_H

#include "quant/tensor.h"

#include <stdint.h>

#define HY_W4A8_XNAN 4096 /* X_b of a block with a NaN / inf activation */

enum hy_mxfp4_act { HY_MXFP4_ACT_F32 = 0, HY_MXFP4_ACT_MXINT8 = 1 };

/* The mode from HYINFER_MXFP4_ACT (base/env.h snapshot, read once; an invalid value gives f32 here
 * and is refused by the CLI at start). */
enum hy_mxfp4_act hy_mxfp4_act_mode(void);

/* 1 if W takes the W4A8 path when the mode is mxint8: F4_E2M1, HY_QS_MX32 with scales, cols even. */
int hy_w4a8_applies(const struct hy_tensor *W);

/* 1 if a matmul of W takes the W4A8 kernel now: hy_w4a8_applies(W) and the mode is mxint8. */
int hy_w4a8_on(const struct hy_tensor *W);

/* MXINT8 quantization of x[K] (rule above): q[k] for k < K (natural order), X[b] for the
 * ceil(K/32) blocks. */
void hy_mxint8_quantize_row(const float *x, int64_t K, int8_t *q, int32_t *X);

/* f_b of the rule above for activation exponent X (maybe HY_W4A8_XNAN) and E8M0 byte sw. */
float hy_w4a8_factor(int32_t X, uint8_t sw);

/* y[T, N] = x[T, K] . W^T by the rule above, scalar (the oracle). W: hy_w4a8_applies. */
void hy_ref_matmul_w4a8(float *y, const float *x, int64_t T, const struct hy_tensor *W);

#if defined(__x86_64__)
/* Same result, AVX2 (call only if hy_cpu_supports(HY_ISA_AVX2)). W: hy_w4a8_applies. */
void hy_avx2_matmul_w4a8(float *y, const float *x, int64_t T, const struct hy_tensor *W);
/* Outputs [n0, n1) of the same product on the calling thread: y[t * ldy + (n - n0)] (the
 * matmul_rows contract of kernels.h). A thread's consecutive calls on bitwise-equal x[T, K] quantize
 * it once (avx2_w4a8.c: act_prepare). */
void hy_avx2_matmul_rows_w4a8(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                              int64_t n1);
#endif

#endif
