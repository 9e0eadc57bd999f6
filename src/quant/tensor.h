/* tensor.h - a 2-D weight view: rows x cols elements of one dtype, row-major, not owned.
 *
 * Plain tensors: dtype F32 / F16 / BF16, qscheme HY_QS_NONE, element (r, c) at data[r*cols + c].
 * Quantized tensors (spec hy3_architecture.md §5, formats in quant/formats.h):
 * - HY_QS_PER_TENSOR: dtype F8_E4M3, data [rows, cols] bytes, w = e4m3 * scale (Hy3-FP8 §5.2).
 * - HY_QS_MX32: dtype F8_E4M3 (MXFP8, data [rows, cols] bytes) or F4_E2M1 (MXFP4, data
 *   [rows, cols/2] bytes, element 2j in the low nibble; cols even), mx_scales [rows, ceil(cols/32)]
 *   E8M0 bytes; w = elem * 2^(mx_scales[r, c/32] - 127).
 * The dequantized value of an element is one fixed f32 number (hy_tensor_get); every kernel level
 * feeds exactly that value into its FMA chain.
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
};

struct hy_tensor {
    enum hy_dtype dtype; /* element type: F32, F16, BF16, F8_E4M3, F4_E2M1 */
    int64_t rows;        /* out features (N) */
    int64_t cols;        /* in features (K), in elements */
    const void *data;    /* NULL = absent */
    enum hy_qscheme qscheme;
    float scale;              /* HY_QS_PER_TENSOR: dequantization multiplier */
    const uint8_t *mx_scales; /* HY_QS_MX32: [rows, ceil(cols/32)] E8M0 bytes */
    uint8_t nan_free;         /* F8_E4M3: 1 = the loader checked that no element is a NaN code (0x7f /
                                * 0xff), so kernels may skip their NaN handling; 0 = unknown */
};

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
    case HY_DTYPE_F4_E2M1: {
        const uint8_t b = ((const uint8_t *)t->data)[r * ((t->cols + 1) / 2) + c / 2];
        return hy_e2m1_to_f32((uint8_t)(b >> ((c & 1) * 4))) * s;
    }
    default:
        return 0.0f;
    }
}

#endif
