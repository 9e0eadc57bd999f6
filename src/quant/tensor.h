/* tensor.h - a 2-D weight view: rows x cols elements of one dtype, row-major, not owned.
 *
 * Plain tensors: dtype F32 / F16 / BF16, qscheme HY_QS_NONE, element (r, c) at data[r*cols + c].
 * Quantized tensors (spec hy3_architecture.md §5, formats in quant/formats.h):
 * - HY_QS_PER_TENSOR: dtype F8_E4M3, data [rows, cols] bytes, w = e4m3 * scale (Hy3-FP8 §5.2).
 * - HY_QS_MX32: dtype F8_E4M3 (MXFP8, data [rows, cols] bytes) or F4_E2M1 (MXFP4, data
 *   [rows, cols/2] bytes, element 2j in the low nibble; cols even), mx_scales [rows, ceil(cols/32)]
 *   E8M0 bytes; w = elem * 2^(mx_scales[r, c/32] - 127).
 * - HY_QS_W8A8_DYN (Ascend W8A8_DYNAMIC, specs/ascend_w8a8.md §2): dtype I8, data [rows, cols] int8 in
 *   [-127, 127], row_scale [rows] f32 (s_w); activations are quantized per token at run time
 *   (kernels/w8a8.h): y = (int32 sum x_q * w_q) * s_w[n] * s_x[t].
 * - HY_QS_W8A8_STATIC (Ascend W8A8): dtype I8, row_scale [rows] = deq_scale (f32), row_bias [rows] =
 *   quant_bias (int32), in_scale / in_offset the per-tensor activation scale and (integer) offset:
 *   y = (int32 sum x_q * w_q + quant_bias[n]) * deq_scale[n].
 * The dequantized value of an element is one fixed f32 number (hy_tensor_get); every kernel level
 * feeds exactly that value into its FMA chain (the W8A8 schemes run integer kernels instead, whose
 * integer part is exact at every level).
 */
#ifndef HY_QUANT_TENSOR_H
#define HY_QUANT_TENSOR_H

#include "quant/dtype.h"
#include "quant/formats.h"

#include <stdint.h>

enum hy_qscheme {
    HY_QS_NONE = 0,   /* plain F32 / F16 / BF16 */
    HY_QS_PER_TENSOR, /* F8_E4M3 elements times one f32 multiplier `scale` */
    HY_QS_MX32,       /* F8_E4M3 or F4_E2M1 elements, one E8M0 scale per 32 elements of a row */
    HY_QS_W8A8_DYN,   /* I8 elements, f32 scale per row, int8 activations per token (kernels/w8a8.h) */
    HY_QS_W8A8_STATIC /* I8 elements, deq_scale + quant_bias per row, static int8 activations */
};

struct hy_tensor {
    enum hy_dtype dtype; /* element type: F32, F16, BF16, F8_E4M3, F4_E2M1 */
    int64_t rows;        /* out features (N) */
    int64_t cols;        /* in features (K), in elements */
    const void *data;    /* NULL = absent */
    enum hy_qscheme qscheme;
    float scale;               /* HY_QS_PER_TENSOR: dequantization multiplier */
    const uint8_t *mx_scales;  /* HY_QS_MX32: [rows, ceil(cols/32)] E8M0 bytes */
    uint8_t nan_free;          /* F8_E4M3: 1 = the loader checked that no element is a NaN code (0x7f /
                                * 0xff), so kernels may skip their NaN handling; 0 = unknown */
    const float *row_scale;    /* W8A8: [rows] s_w (dynamic) or deq_scale (static) */
    const int32_t *row_bias;   /* W8A8_STATIC: [rows] quant_bias */
    float in_scale, in_offset; /* W8A8_STATIC: activation scale (> 0) and integer-valued offset */
};

/* 1 if t is one of the int8 W8A8 schemes. */
static inline int hy_tensor_is_w8a8(const struct hy_tensor *t)
{
    return t->qscheme == HY_QS_W8A8_DYN || t->qscheme == HY_QS_W8A8_STATIC;
}

/* Bytes of one row of data (cols elements). */
static inline int64_t hy_tensor_row_bytes(const struct hy_tensor *t)
{
    if (t->dtype == HY_DTYPE_F4_E2M1)
        return (t->cols + 1) / 2;
    return t->cols * (int64_t)hy_dtype_size(t->dtype);
}

/* Bytes the tensor occupies (data + scales): what one full read of it streams from memory. */
static inline int64_t hy_tensor_bytes(const struct hy_tensor *t)
{
    int64_t b = t->rows * hy_tensor_row_bytes(t);
    if (t->qscheme == HY_QS_MX32)
        b += t->rows * ((t->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK);
    if (hy_tensor_is_w8a8(t))
        b += t->rows * (t->qscheme == HY_QS_W8A8_STATIC ? 8 : 4);
    return b;
}

/* Element (r, c) dequantized to f32 (the value every kernel level uses). */
static inline float hy_tensor_get(const struct hy_tensor *t, int64_t r, int64_t c)
{
    int64_t i = r * t->cols + c;
    float s = 1.0f;
    if (t->qscheme == HY_QS_MX32)
        s = hy_e8m0_to_f32(t->mx_scales[r * ((t->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK) + c / HY_MX_BLOCK]);
    else if (t->qscheme == HY_QS_PER_TENSOR)
        s = t->scale;
    switch (t->dtype) {
    case HY_DTYPE_F32:
        return ((const float *)t->data)[i];
    case HY_DTYPE_BF16:
        return hy_bf16_to_f32(((const uint16_t *)t->data)[i]);
    case HY_DTYPE_F16:
        return hy_f16_to_f32(((const uint16_t *)t->data)[i]);
    case HY_DTYPE_F8_E4M3:
        return hy_e4m3_to_f32(((const uint8_t *)t->data)[i]) * s;
    case HY_DTYPE_I8: /* W8A8: w_q * s_w (static: s_w = deq_scale / input scale) */
        if (t->qscheme == HY_QS_W8A8_STATIC)
            return (float)((const int8_t *)t->data)[i] * (t->row_scale[r] / t->in_scale);
        return (float)((const int8_t *)t->data)[i] * t->row_scale[r];
    case HY_DTYPE_F4_E2M1: {
        const uint8_t b = ((const uint8_t *)t->data)[r * ((t->cols + 1) / 2) + c / 2];
        return hy_e2m1_to_f32((uint8_t)(b >> ((c & 1) * 4))) * s;
    }
    default:
        return 0.0f;
    }
}

#endif
