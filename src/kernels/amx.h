/* amx.h - the AMX-BF16 matmul of the amx level (internal to src/kernels; math and layout in amx.c). */
#ifndef HY_KERNELS_AMX_H
#define HY_KERNELS_AMX_H

#include "quant/tensor.h"

#include <stdint.h>

/* Below this many tokens hy_amx_matmul_bf16x takes the avx512 level's AVX512-BF16 matmul (decode is
 * bound by weight bandwidth, which its streaming tiles reach; a 16-token tile would be mostly padding). */
#define HY_AMX_MIN_T 32

/* y[T, N] = x[T, K] . W^T on AMX tiles (contract of hy_matmul_bf16x, kernels.h): x rows hold
 * bf16-representable values, W BF16 or FP8 / MXFP8 / MXFP4; others (F32, F16) and T < HY_AMX_MIN_T
 * go to hy_avx512bf16_matmul_bf16x (avx512_bf16.h). fp32 accumulation; bf16 denormals flushed to
 * zero. Threads split N.
 * Call only if hy_cpu_supports(HY_ISA_AMX) (tile permission granted). Temporary memory: x packed
 * (round_up(T, 32) x round_up(K, 32) bf16) plus per thread a 32-row bf16 panel; on allocation
 * failure the call falls back to hy_avx512bf16_matmul_bf16x (same result contract). */
void hy_amx_matmul_bf16x(float *y, const float *x, int64_t T, const struct hy_tensor *W);

#endif
