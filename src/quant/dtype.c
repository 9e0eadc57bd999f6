#include "quant/dtype.h"

static const struct {
    const char *name;
    size_t size;
} dtype_info[HY_DTYPE_COUNT] = {
    [HY_DTYPE_UNKNOWN] = {"?", 0},       [HY_DTYPE_F32] = {"F32", 4},         [HY_DTYPE_F16] = {"F16", 2},
    [HY_DTYPE_BF16] = {"BF16", 2},       [HY_DTYPE_F64] = {"F64", 8},         [HY_DTYPE_F8_E4M3] = {"F8_E4M3", 1},
    [HY_DTYPE_F8_E5M2] = {"F8_E5M2", 1}, [HY_DTYPE_F8_E8M0] = {"F8_E8M0", 1}, [HY_DTYPE_I64] = {"I64", 8},
    [HY_DTYPE_I32] = {"I32", 4},         [HY_DTYPE_I16] = {"I16", 2},         [HY_DTYPE_I8] = {"I8", 1},
    [HY_DTYPE_U8] = {"U8", 1},           [HY_DTYPE_BOOL] = {"BOOL", 1},       [HY_DTYPE_F4_E2M1] = {"F4_E2M1", 0},
};

enum hy_dtype hy_dtype_from_name(const char *name)
{
    for (int t = 1; t < HY_DTYPE_COUNT; t++)
        if (t != HY_DTYPE_F4_E2M1 && strcmp(dtype_info[t].name, name) == 0)
            return (enum hy_dtype)t;
    return HY_DTYPE_UNKNOWN;
}

const char *hy_dtype_name(enum hy_dtype t)
{
    return (t > 0 && t < HY_DTYPE_COUNT) ? dtype_info[t].name : "?";
}

size_t hy_dtype_size(enum hy_dtype t)
{
    return (t > 0 && t < HY_DTYPE_COUNT) ? dtype_info[t].size : 0;
}

int hy_dtype_is_kernel_float(enum hy_dtype t)
{
    return t == HY_DTYPE_F32 || t == HY_DTYPE_F16 || t == HY_DTYPE_BF16;
}

float hy_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalize */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int hy_dtype_to_f32(enum hy_dtype t, const void *src, float *dst, size_t n)
{
    switch (t) {
    case HY_DTYPE_F32:
        memcpy(dst, src, n * 4);
        return 0;
    case HY_DTYPE_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, (const char *)src + 2 * i, 2);
            dst[i] = hy_bf16_to_f32(h);
        }
        return 0;
    case HY_DTYPE_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, (const char *)src + 2 * i, 2);
            dst[i] = hy_f16_to_f32(h);
        }
        return 0;
    default:
        return -1;
    }
}
