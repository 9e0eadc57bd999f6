/* avx512_quant.h - AVX-512 F/BW/VL matmul kernels for quantized weights (internal to src/kernels).
 *
 * The same formats and the same exact element values as avx2_quant.h (FP8 E4M3 per-tensor / plain,
 * MXFP8, MXFP4 with E8M0 scales per 32 elements; every element enters the chain as hy_tensor_get),
 * fed into the 16-lane FMA chain of avx512_common.h. Element decoding (avx512_quant.c):
 * - E4M3: 16 bytes sign-extended to dwords (vpmovsxbd), << 20 and the mask 0x87F00000 give the f32
 *   bits of v * 2^-120 for every code (e = 0 lands on f32 subnormals), times scale * 2^120.
 * - E2M1: per 16 elements, vpshufb places the byte of element j in dword j, a variable shift picks
 *   its nibble, vpermps looks the code up in a 16-entry f32 table, times the scale (2^(s-127) for MX).
 * Scalar hy_tensor_get covers E4M3 NaN codes (the tile or panel block is recomputed), E4M3 scales
 * whose * 2^120 overflows, and the last K % 32 elements of a row.
 * Per-tensor (and unscaled) FP8 E4M3 takes avx2_quant.h's raw scheme: the weights enter the chain as
 * e4m3 * 2^-120 and each activation row is multiplied once per call by c = scale * 2^120
 * (hy_avx2q_fold_scale / hy_avx2q_scale_rows; a token whose scaled row is not finite takes the exact
 * values). The decode tiles and the prefill panels (hy_avx512q_widen_rows_raw) agree, so results
 * stay independent of T and of the thread count.
 * Call only if hy_cpu_supports(HY_ISA_AVX512).
 */
#ifndef HY_KERNELS_AVX512_QUANT_H
#define HY_KERNELS_AVX512_QUANT_H

#include "quant/tensor.h"

#include <stdint.h>

/* 1 if W is a format these kernels read (the formats of hy_avx2q_supported). */
int hy_avx512q_supported(const struct hy_tensor *W);

/* Rows [n0, n0+nb) for T tokens on the calling thread (4 tokens x 4 rows register tiles, each
 * 32-element block widened once per tile): y[t*ldy + j] = row t of x (stride ldx) . row n0+j of W. */
void hy_avx512q_rows(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t T, const struct hy_tensor *W,
                     int64_t n0, int64_t nb);

/* Decode GEMV/GEMM y[T, N] = x[T, K] . W^T (x rows of stride K): hy_avx512q_rows over groups of 4
 * rows, OpenMP in dynamic tasks of hy_task_groups (task_rows.h), the raw scheme's scaled rows formed once per call. */
void hy_avx512q_gemv(float *y, const float *x, int64_t T, const struct hy_tensor *W);

/* Widens rows [n0, n0+nb) of W to their exact f32 values: dst[r*ldw + k] for k < K, zeros for
 * K <= k < round_up(K, 16) (ldw >= round_up(K, 16)). The values hy_avx512q_rows feeds its chains,
 * except for per-tensor FP8 in the raw scheme (hy_avx512q_widen_rows_raw). */
void hy_avx512q_widen_rows(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst);

/* hy_avx512q_widen_rows giving the raw scheme's values (e4m3 * 2^-120) of a hy_avx2q_fold_scale W. */
void hy_avx512q_widen_rows_raw(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst);

#endif
