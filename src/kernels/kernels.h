/* kernels.h - the compute kernels of the forward pass (OpenMP-threaded). Each call goes through the
 * kernel table of the ISA level chosen once at first use (kernel_table.h: ref = the scalar oracle in
 * ref.c, avx2 = AVX2+FMA+F16C; HYINFER_ISA=ref|avx2|avx512|amx forces a level, falling back with an
 * error message if the CPU/OS cannot run it). Results can differ in the last bits between levels;
 * within one level they are deterministic and independent of T and of the thread count.
 *
 * Batch invariance (DESIGN.md §4): every output element is computed with a fixed reduction order
 * that does not depend on how many rows (tokens) are in the call, so a sequence's fp32 logits are
 * bitwise the same whatever else is batched with it and however its prompt is chunked.
 */
#ifndef HY_KERNELS_KERNELS_H
#define HY_KERNELS_KERNELS_H

#include "quant/tensor.h"

#include <stdint.h>

/* y[T, N] = x[T, K] · W^T, W [N, K] (F32/F16/BF16, or FP8 / MXFP8 / MXFP4 whose elements enter as
 * their exact dequantized values, quant/tensor.h), fp32 accumulation in a fixed order (8 interleaved
 * partial sums over k, summed pairwise at the end). x and y must not alias. Opt-in exception:
 * HYINFER_MXFP4_ACT=mxint8 routes MXFP4 weights to the W4A8 path (MXINT8 activations, integer block
 * dots; rules and order in kernels/w4a8.h), still batch- and thread-invariant, ref == avx2 bitwise. */
void hy_matmul(float *y, const float *x, int64_t T, const struct hy_tensor *W);

/* hy_matmul for inputs that are bf16 values (the bf16 compute mode rounds every matmul input): y[T, N]
 * = x[T, K] . W^T where each x element must be bf16-representable (others are rounded to bf16 first
 * by levels that use bf16 products). A level may then multiply bf16 x bf16 exactly and accumulate in
 * fp32 in its own order: at the amx level, T >= HY_AMX_MIN_T (kernels/amx.h) with BF16 or FP8/MX
 * weights runs on AMX tiles (kernels/amx.c), whose summation order depends on the 16-token tile a row
 * falls in, so the result is NOT batch-invariant. Where the CPU has AVX512_BF16 (the avx512 level,
 * and the amx level below HY_AMX_MIN_T), BF16 / FP8 / MX weights run on vdpbf16ps (kernels/avx512_bf16.c:
 * exact bf16 products, fp32 sums in its own fixed order, the same for every T: batch-invariant).
 * Otherwise (ref, avx2, AVX-512 without AVX512_BF16, F32 / F16 weights) it is hy_matmul exactly. The
 * fp32 compute mode must call hy_matmul. */
void hy_matmul_bf16x(float *y, const float *x, int64_t T, const struct hy_tensor *W);

/* Outputs n0 <= n < n1 of hy_matmul(x[T, K], W): y[t*ldy + (n - n0)], each bitwise equal to what
 * hy_matmul computes for it (same chain, whatever T or the range). Runs on the calling thread only (no
 * threads of its own): callers split N across the threads of their own parallel region.
 * 0 <= n0 <= n1 <= W->rows; y must not alias x. */
void hy_matmul_rows(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                    int64_t n1);

/* Outputs n0 <= n < n1 of hy_matmul_bf16x(x[T, K], W) on the calling thread, y[t*ldy + (n - n0)] (as
 * hy_matmul_rows), each bitwise equal to what hy_matmul_bf16x computes for it, whatever T, at every
 * level but amx; there it equals hy_matmul_bf16x below HY_AMX_MIN_T tokens (the AMX tiles of larger
 * calls sum in another order). x as for hy_matmul_bf16x; the fp32 mode calls hy_matmul_rows. */
void hy_matmul_rows_bf16x(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                          int64_t n1);

/* Dot product of a[n] and b[n] in the fixed order hy_matmul uses. */
float hy_dot_f32(const float *a, const float *b, int64_t n);

/* RMSNorm over each of T rows of width d: y = w * (x * rsqrt(mean(x^2) + eps)) (fp32 math;
 * spec §2). y may alias x. w[d] f32. */
void hy_rmsnorm(float *y, const float *x, const float *w, int64_t T, int64_t d, float eps);

/* Rotary embedding in place on x[n_heads, head_dim] of one token at position pos.
 * interleaved = 0: NeoX rotate_half pairs (j, j + head_dim/2); 1: GPT-J pairs (2i, 2i+1).
 * inv_freq[head_dim/2] = theta^(-2i/head_dim); angle = (float)pos * inv_freq[i] in fp32 (spec §2.3). */
void hy_rope(float *x, int64_t n_heads, int64_t head_dim, int32_t pos, const float *inv_freq, int interleaved);

/* out[n] = silu(gate[n]) * up[n]; out may alias gate. */
void hy_silu_mul(float *out, const float *gate, const float *up, int64_t n);

/* Rounds n floats to the nearest bf16 value in place (bf16 compute mode). */
void hy_round_bf16_inplace(float *x, int64_t n);

#endif
