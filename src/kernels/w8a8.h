/* w8a8.h - Ascend W8A8 int8 matmuls (specs/ascend_w8a8.md §2, §5; internal to src/kernels: the public
 * hy_matmul* calls route W8A8 weights here, dispatch.c).
 *
 * Activations, per token row x[K] (f32):
 * - dynamic (HY_QS_W8A8_DYN, vLLM-Ascend's W8A8_DYNAMIC = CANN DynamicQuant): a = max_k |x_k|;
 *   s_x = a / 127 (f32 division; 1 when a == 0; NaN when some x_k is NaN or infinite, and then every q_k
 *   is 0 so the row's outputs are NaN); q_k = round-half-even(x_k / s_x) (f32 division), clamped to
 *   [-128, 127].
 * - static (HY_QS_W8A8_STATIC, W8A8): q_k = saturate_int8(round-half-even(x_k * r + o)) with r = 1 / s_in
 *   computed once in f32 and o = in_offset (f32 arithmetic; NaN gives 0).
 * Products: acc = sum_k q_k * w_k as int32 (exact: |acc| <= 128 * 127 * K < 2^31 for K < 132104).
 * Output y[t, n] (f32): dynamic ((float)acc * s_w[n]) * s_x[t]; static (float)(acc + quant_bias[n]) *
 * deq_scale[n] (acc + quant_bias in int64, then converted).
 * Every level computes the same integer acc and the same f32 epilogue, so ref, avx2 and AVX-512 are
 * bitwise equal, and y[t, n] depends only on x row t and W row n (T-, range- and thread-invariant).
 * Weights must lie in [-127, 127] (the loader checks: the AVX2 sign trick needs it). */
#ifndef HY_KERNELS_W8A8_H
#define HY_KERNELS_W8A8_H

#include "quant/tensor.h"

#include <stdint.h>

/* Dynamic per-token quantization of x[K] into q[K]; returns s_x (rule above). */
float hy_w8a8_quant_dynamic(const float *x, int64_t K, int8_t *q);

/* Static quantization of x[K] into q[K] with scale s_in (> 0) and offset o (rule above). */
void hy_w8a8_quant_static(const float *x, int64_t K, float s_in, float o, int8_t *q);

/* y[T, N] = x[T, K] . W^T for a W8A8 tensor W (hy_tensor_is_w8a8), on the active level; threads split N. */
void hy_w8a8_matmul(float *y, const float *x, int64_t T, const struct hy_tensor *W);

/* Outputs n0 <= n < n1 only, y[t * ldy + (n - n0)], on the calling thread. */
void hy_w8a8_matmul_rows(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                         int64_t n1);

/* The integer dot products of one level: acc[t * lda + (n - n0)] = sum_k q[t*K + k] * w[n][k] for t < T,
 * n0 <= n < n1 (q: T quantized rows of K; W->data rows). Tests compare the levels through this. */
typedef void (*hy_w8a8_dots_fn)(int32_t *acc, int64_t lda, const int8_t *q, int64_t T, const struct hy_tensor *W,
                                int64_t n0, int64_t n1);
void hy_ref_w8a8_dots(int32_t *acc, int64_t lda, const int8_t *q, int64_t T, const struct hy_tensor *W, int64_t n0,
                      int64_t n1);
#if defined(__x86_64__)
/* AVX2 (vpsignb / vpmaddubsw / vpmaddwd; call only if hy_cpu_supports(HY_ISA_AVX2)). */
void hy_avx2_w8a8_dots(int32_t *acc, int64_t lda, const int8_t *q, int64_t T, const struct hy_tensor *W, int64_t n0,
                       int64_t n1);
#endif

#if defined(__x86_64__)
/* The quantizers on AVX2 (bitwise equal to the scalar ones above: IEEE division / multiply-then-add, round to
 * nearest even, the same clamps and NaN rules). */
float hy_avx2_w8a8_quant_dynamic(const float *x, int64_t K, int8_t *q);
void hy_avx2_w8a8_quant_static(const float *x, int64_t K, float s_in, float o, int8_t *q);
/* AVX512-VNNI (vpdpbusd with the +128 offset; call only if hy_w8a8_vnni_usable()). */
void hy_avx512_w8a8_dots(int32_t *acc, int64_t lda, const int8_t *q, int64_t T, const struct hy_tensor *W, int64_t n0,
                         int64_t n1);
#endif

/* 1 when the CPU and OS run AVX512-VNNI (AVX-512 F/BW/VL usable and the VNNI bit set). */
int hy_w8a8_vnni_usable(void);

/* The dots function the active level uses: ref; avx2 on the avx2 level; on AVX-512 levels the VNNI kernel
 * where the CPU has AVX512-VNNI, else avx2. */
hy_w8a8_dots_fn hy_w8a8_dots_active(void);

/* Same matmul with an explicit dots function (tests: every level against ref). */
void hy_w8a8_matmul_rows_with(hy_w8a8_dots_fn dots, float *y, int64_t ldy, const float *x, int64_t T,
                              const struct hy_tensor *W, int64_t n0, int64_t n1);

#endif
