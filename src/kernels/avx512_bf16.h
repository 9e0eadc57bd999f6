/* avx512_bf16.h - the AVX512-BF16 matmul_bf16x of the avx512 level (internal to src/kernels; math in
 * avx512_bf16.c). */
#ifndef HY_KERNELS_AVX512_BF16_H
#define HY_KERNELS_AVX512_BF16_H

#include "model/tensor.h"

#include <stdint.h>

/* Below this many tokens hy_avx512bf16_matmul_bf16x takes the f32 avx512 matmul (decode: bound by
 * weight bandwidth, not by FLOPs). */
#define HY_BF16X_MIN_T 32

/* Contract of hy_matmul_bf16x (kernels.h) on vdpbf16ps: x bf16-representable, W BF16 / FP8 / MXFP8 /
 * MXFP4 (others, and T < HY_BF16X_MIN_T: hy_avx512_matmul). Deterministic, T- and thread-invariant
 * within this path. Temporary memory: x as bf16 (T x round_up(K, 32)) and per thread a 16-row panel.
 * Call only if the CPU has AVX-512 F/BW/VL and AVX512_BF16 (hy_cpu_caps()->avx512bf16). */
void hy_avx512bf16_matmul_bf16x(float *y, const float *x, int64_t T, const struct hy_tensor *W);

#endif
