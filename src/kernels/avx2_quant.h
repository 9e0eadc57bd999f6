/* avx2_quant.h - AVX2 + FMA + F16C matmul kernels for quantized weights (internal to src/kernels).
 *
 * Weights: struct hy_tensor with dtype F8_E4M3 or F4_E2M1 and qscheme HY_QS_NONE (scale 1),
 * HY_QS_PER_TENSOR (f32 scale) or HY_QS_MX32 (E8M0 scale per 32 elements of a row), see
 * quant/tensor.h. No dequantized copy of a matrix is kept: the decode kernel widens each 32-element
 * block in registers, the prefill path (avx2.c) widens a block of rows into an f32 panel.
 *
 * Per-tensor (and unscaled) FP8 E4M3 takes the raw scheme (hy_avx2q_fold_scale): the weights enter
 * the chain as raw = e4m3 * 2^-120 exactly, and each activation row is multiplied once per call by
 * c = scale * 2^120, so y[t,n] = sum_k raw * (x * c): one multiply per activation instead of one per
 * weight (docs/tuning.md). A token whose scaled row is not finite
 * (huge activations) takes the exact values below; the choice depends on that row only.
 * Otherwise every element is widened to its exact f32 value hy_tensor_get(W, n, k) = round_f32(elem * scale)
 * (E4M3 -> f32 bits v * 2^-120 by shifts and a mask, times scale * 2^120; E2M1 -> bf16 bytes by two
 * pshufb LUTs, times scale; E4M3 NaN codes, blocks or tensors whose scale * 2^120 would overflow and
 * the last K % 32 elements of a row take the scalar hy_tensor_get; details in avx2_quant.c), then
 * fed into the same 8-lane FMA chain as the BF16 path (kernel_table.h). So y[t,n] does not depend on
 * T, on the GEMV vs GEMM path or on the thread count, and it differs from ref only in rounding (ref:
 * separate multiply + add of exact values; the raw scheme: the scale rounded into x). E4M3 tensors
 * with nan_free set (the loader checked them) skip the per-block NaN-code test.
 */
#ifndef HY_KERNELS_AVX2_QUANT_H
#define HY_KERNELS_AVX2_QUANT_H

#include "quant/tensor.h"

#include <stdint.h>

/* 1 if W is a format these kernels read (see above); 0 for plain F32/F16/BF16 and anything else. */
int hy_avx2q_supported(const struct hy_tensor *W);

/* Decode GEMV/GEMM: y[T, N] = x[T, K] . W^T streaming W once (2 tokens x 4 rows register tiles,
 * OpenMP over groups of rows). Any T works; avx2.c calls it for T <= 2. W: hy_avx2q_supported. */
void hy_avx2q_gemv(float *y, const float *x, int64_t T, const struct hy_tensor *W);

/* Rows [n0, n0+nb) for T tokens, single-threaded streaming kernel (same chains as hy_avx2q_gemv):
 * y[t*ldy + j] = row t of x (stride ldx) . row n0+j of W. */
void hy_avx2q_rows(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t T, const struct hy_tensor *W, int64_t n0,
                   int64_t nb);

/* Per-tensor (and unscaled) FP8 E4M3 in the raw scheme: returns 1 and *c = scale * 2^120 when the
 * avx2 chains of W compute y[t,n] = sum_k raw[n,k] * (x[t,k] * c), raw = e4m3 * 2^-120 exactly (one
 * multiply per activation instead of one per weight); 0 for every other format (exact values). A
 * token whose scaled row would not be finite takes the exact values instead (its own row decides,
 * so results stay T-invariant). */
int hy_avx2q_fold_scale(const struct hy_tensor *W, float *c);

/* 1 if some byte of the E8M0 scales s[0..n) lies in 135..254 (its E4M3 block times 2^120 would
 * overflow: those blocks take the scalar route); 32 bytes at a time. */
int hy_avx2q_mx_scales_overflow(const uint8_t *s, int64_t n);

/* The raw scheme's activations: xs[t*ldxs + k] = x[t*ldx + k] * c for T rows of K; ok[t] = 1 where
 * every product is finite (0: token t takes the exact values; also for inf / NaN inputs). */
void hy_avx2q_scale_rows(const float *x, int64_t ldx, int64_t T, int64_t K, float c, float *xs, int64_t ldxs,
                         uint8_t *ok);

/* hy_avx2q_scale_rows of T rows of K into the calling thread's scratch (kept for the next call, so
 * valid until this thread calls again): returns xs [T, K] with *ok [T] after it, or NULL and *ok =
 * NULL when out of memory. Callers own nothing; other threads may read it until then. */
float *hy_avx2q_scaled_rows(const float *x, int64_t ldx, int64_t T, int64_t K, float c, uint8_t **ok);

/* hy_avx2q_widen_rows giving the raw scheme's values (e4m3 * 2^-120) of a hy_avx2q_fold_scale W. */
void hy_avx2q_widen_rows_raw(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst);

/* Widens rows [n0, n0+nb) of W to their exact f32 values: dst[r*ldw + k] for k < K, zeros for
 * K <= k < round_up(K, 8) (ldw >= round_up(K, 8)). Same values as hy_avx2q_gemv feeds its chains. */
void hy_avx2q_widen_rows(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst);

#endif
