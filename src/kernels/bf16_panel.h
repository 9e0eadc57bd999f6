/* bf16_panel.h - weights and activations as bf16 operands for the bf16 dot-product kernels (the amx
 * level's AMX tiles, the avx512 level's AVX512-BF16 path; internal to src/kernels).
 *
 * A weight "has a bf16 form" when every element, up to one per-tensor factor, is exactly a bf16
 * value: BF16 itself, and FP8 E4M3 / MXFP8 / MXFP4 (e4m3 and e2m1 codes carry at most 4 significant
 * bits; times a power of two (E8M0) they stay exact in bf16, f32 subnormals of fewer than 8
 * significant bits excepted). A per-tensor FP8 scale is left out of the panel and multiplies the
 * outputs instead (hy_bf16_out_scale).
 */
#ifndef HY_KERNELS_BF16_PANEL_H
#define HY_KERNELS_BF16_PANEL_H

#include "quant/tensor.h"

#include <stdint.h>

/* 1 if W has a bf16 form (above): BF16 plain, or an F8_E4M3 / F4_E2M1 format the vector kernels read. */
int hy_bf16_form(const struct hy_tensor *W);

/* 1 if W's rows can be read in place as bf16 operands: plain BF16 with K a multiple of 32 (whole
 * 32-element chunks per row, nothing to pad). */
int hy_bf16_in_place(const struct hy_tensor *W);

/* The factor the outputs of a bf16-panel matmul take: W->scale for HY_QS_PER_TENSOR, else 1. */
float hy_bf16_out_scale(const struct hy_tensor *W);

/* W's view without a per-tensor scale (qscheme NONE, scale 1): the values a bf16 panel holds. */
struct hy_tensor hy_bf16_bare(const struct hy_tensor *W);

/* Widens rows [n0, n0+nb) of a quantized W to f32 (contract of hy_avx2q_widen_rows / hy_avx512q_widen_rows). */
typedef void (*hy_widen_fn)(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst);

/* Rows [n0, n0+nv) of W (hy_bf16_form) as bf16 into panel rows of ldp >= round_up(K, 16)
 * elements: zero past K, and rows nv..rows-1 zero. Per-tensor scales left out (see above). Quantized
 * rows are widened by `widen` (NULL: hy_tensor_get, scalar) into wrow (ldp + 16 floats, caller's). */
void hy_bf16_panel(const struct hy_tensor *W, int64_t n0, int64_t nv, int64_t rows, int64_t ldp, uint16_t *panel,
                   float *wrow, hy_widen_fn widen);

#endif
