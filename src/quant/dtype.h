/* dtype.h - tensor element types and exact scalar conversions (bf16, f16 -> f32). */
#ifndef HY_QUANT_DTYPE_H
#define HY_QUANT_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum hy_dtype {
    HY_DTYPE_UNKNOWN = 0,
    HY_DTYPE_F32,
    HY_DTYPE_F16,
    HY_DTYPE_BF16,
    HY_DTYPE_F64,
    HY_DTYPE_F8_E4M3,
    HY_DTYPE_F8_E5M2,
    HY_DTYPE_F8_E8M0,
    HY_DTYPE_I64,
    HY_DTYPE_I32,
    HY_DTYPE_I16,
    HY_DTYPE_I8,
    HY_DTYPE_U8,
    HY_DTYPE_BOOL,
    HY_DTYPE_F4_E2M1, /* FP4 E2M1, two per byte (element 2j in the low nibble); in files: U8 */
    HY_DTYPE_COUNT
};

/* Safetensors dtype string ("BF16", "F8_E4M3", ...) -> enum; HY_DTYPE_UNKNOWN if unknown. */
enum hy_dtype hy_dtype_from_name(const char *name);
/* Enum -> safetensors name ("?" for unknown). */
const char *hy_dtype_name(enum hy_dtype t);
/* Bytes per element; 0 for unknown and for F4_E2M1 (half a byte: see hy_tensor_row_bytes). */
size_t hy_dtype_size(enum hy_dtype t);
/* 1 if matmul kernels can read weights of this type directly (F32, F16, BF16). */
int hy_dtype_is_kernel_float(enum hy_dtype t);

static inline float hy_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round to nearest even; NaN stays NaN. */
static inline uint16_t hy_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* f32 -> nearest bf16 value, returned as f32 (activation rounding in bf16 compute mode). */
static inline float hy_round_bf16(float f)
{
    return hy_bf16_to_f32(hy_f32_to_bf16(f));
}

float hy_f16_to_f32(uint16_t h);

/* Widens n elements of type t (F32, F16, BF16) at src into dst[n]. Returns 0, -1 for other types. */
int hy_dtype_to_f32(enum hy_dtype t, const void *src, float *dst, size_t n);

#endif
