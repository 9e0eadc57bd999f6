/* tensor.h - a 2-D weight view: rows x cols elements of one dtype, row-major, not owned. */
#ifndef HY_MODEL_TENSOR_H
#define HY_MODEL_TENSOR_H

#include "quant/dtype.h"

#include <stdint.h>

struct hy_tensor {
    enum hy_dtype dtype;  /* F32, F16 or BF16 for matmul weights */
    int64_t       rows;   /* out features (N) */
    int64_t       cols;   /* in features (K) */
    const void   *data;   /* rows * cols elements; NULL = absent */
};

/* Element (r, c) widened to f32. */
static inline float hy_tensor_get(const struct hy_tensor *t, int64_t r, int64_t c)
{
    int64_t i = r * t->cols + c;
    switch (t->dtype) {
    case HY_DTYPE_F32:
        return ((const float *)t->data)[i];
    case HY_DTYPE_BF16:
        return hy_bf16_to_f32(((const uint16_t *)t->data)[i]);
    default:
        return hy_f16_to_f32(((const uint16_t *)t->data)[i]);
    }
}

#endif
