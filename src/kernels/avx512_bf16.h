/* avx512_bf16.h - the AVX512-BF16 matmul_bf16x / matmul_rows_bf16x of the avx512 level (and the amx
 * level's decode-sized calls); internal to src/kernels, math and exactness rules in avx512_bf16.c. */
#ifndef HY_KERNELS_AVX512_BF16_H
#define HY_KERNELS_AVX512_BF16_H

#include "quant/tensor.h"

#include <stdint.h>

/* From this many tokens on, hy_avx512bf16_matmul_bf16x widens 16-row blocks of quantized weights
 * into bf16 panels (each weight decoded once per call); below it, weights are decoded in registers
 * per 4-token tile. Both give the same chain, so the choice changes speed only. */
#define HY_BF16X_MIN_T 32

/* Contract of hy_matmul_bf16x (kernels.h) on vdpbf16ps: x bf16-representable (others are rounded to
 * bf16), W BF16 / FP8 / MXFP8 / MXFP4 (F32 / F16: hy_avx512_matmul). Deterministic, T- and
 * thread-invariant: each output is the chain of avx512_bf16.c whatever T. Temporary memory: x as bf16
 * (T x round_up(K, 32)), per thread a 16-row panel (prefill) or, for tiles that need one, a 4-row
 * panel. Call only if the CPU has AVX-512 F/BW/VL and AVX512_BF16 (hy_cpu_caps()->avx512bf16). */
void hy_avx512bf16_matmul_bf16x(float *y, const float *x, int64_t T, const struct hy_tensor *W);

/* Outputs n0 <= n < n1 of hy_avx512bf16_matmul_bf16x(x[T, K], W) on the calling thread, bitwise
 * equal to what that call computes for them (any T): y[t*ldy + (n - n0)]. x rows of stride K. */
void hy_avx512bf16_matmul_rows_bf16x(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W,
                                     int64_t n0, int64_t n1);

/* Rows [n0, n0+nv) of W (FP8 / MXFP8 / MXFP4 / FP4, or BF16) as the bf16 panel rows the prefill tiles
 * read: panel[r * round_up(K, 32) + k], natural element order, zero past K; bitwise what hy_bf16_panel
 * (bf16_panel.h) writes with W's per-tensor scale left out. panel: caller's, nv * round_up(K, 32)
 * words. Aborts if memory for a widened row cannot be had. For tests (the prefill runs the same code
 * per block of rows). */
void hy_avx512bf16_panel(const struct hy_tensor *W, int64_t n0, int64_t nv, uint16_t *panel);

/* How many decode groups (up to 4 weight rows) have been computed through a bf16 panel instead of the
 * in-register decoders (MXFP8 scale bytes outside the decoders' range, E4M3 NaN codes), in this
 * process; for tests that check which route ran. */
unsigned long hy_avx512bf16_panel_routes(void);

/* Whether E4M3 weights (per-tensor / unscaled FP8, MXFP8) marked nan_free decode through the AVX512_VBMI
 * byte tables (on by default where the CPU has AVX512_VBMI) or the exponent rebase; both give the same
 * bits. on = 0 / 1; 1 is ignored without AVX512_VBMI. Returns the previous setting. Process-wide, for
 * tests and benchmarks that compare the two; takes effect for calls that start after it. */
int hy_avx512bf16_set_vbmi(int on);

/* Whether MXFP4 / FP4 (E2M1) weights run in the E2M1 order (on by default): x and the prefill panels
 * take, in every full 64-element group, the even elements first and then the odd ones, and the decode
 * tiles decode 64 codes as two nibble vectors (fewer instructions per code); off: natural order, the
 * nibbles interleaved per 32 codes. Both are T- and thread-invariant; they differ in rounding order.
 * on = 0 / 1. Returns the previous setting. Process-wide, for tests and benchmarks that compare the
 * two; takes effect for calls that start after it. */
int hy_avx512bf16_set_e2m1_order(int on);

#endif
