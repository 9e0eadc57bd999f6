/* fp8_scale.h - a per-row FP8 E4M3 scale fitted to the least squared error (the FP8 KV cache's
 * dynamic K / V scales, cache/kv_cache.h).
 *
 * A row x[n] is stored as codes c_i = e4m3(x_i / s) and read back as c_i * s. The amax rule,
 * s = amax / 448, maps the largest element exactly onto E4M3's largest value; every other element
 * lands wherever it lands on the 3-bit mantissa grid. The fit searches s for the smallest
 * err(s) = sum_i (s * e4m3(x_i / s) - x_i)^2:
 *   starts s0 * 2^(j / HY_FP8_FIT_STARTS), j = 0 .. HY_FP8_FIT_STARTS - 1, s0 = amax / 448 (one
 *   octave: scales below s0 clip amax, scales a factor 2 above it repeat the grid one binade down);
 *   from each start HY_FP8_FIT_REFITS least-squares refits s <- sum x_i c_i / sum c_i^2 with the
 *   codes c of the current s (the alternating step of a Lloyd-Max quantizer with a fixed grid);
 *   every s evaluated is a candidate, and the smallest error wins (first one on ties).
 * j = 0 before any refit is the amax rule itself, so the fitted error is never larger than it.
 * Measured on models/hy3-tiny, fp8 against fp32 KV (bench quality, fp32 compute, 4000 held-out
 * positions): amax/448 scales top-1 0.960 / mean KL 0.0045 at context 192, 0.962 / 0.0056 at
 * 1024; fitted (16 starts, 2 refits) 0.980 / 0.0015 and 0.978 / 0.0023. 8 starts: 0.983 / 0.0018
 * and 0.976 / 0.0030; 32 starts with 3 refits: 0.980 / 0.0016 and 0.979 / 0.0023. On random rows
 * the fitted squared error is 0.60 of amax/448's, a brute-force search over 4096 scales 0.60
 * (test_fp8_scale.c). Weighting the error by the queries' covariance (GPTQ-style rounding of K)
 * or subtracting a per-channel K mean gained less than this and needs calibration data. */
#ifndef HY_KERNELS_FP8_SCALE_H
#define HY_KERNELS_FP8_SCALE_H

#include <stdint.h>

#define HY_FP8_FIT_STARTS 16
#define HY_FP8_FIT_REFITS 2

/* One evaluation of scale s > 0 over x[n] (f32): with r_i = hy_e4m3_round(x_i / s) (an f32 value,
 * quant/formats.h) and d_i = r_i * s - x_i (a product then a difference, never fused),
 * out[0] = sum d_i^2, out[1] = sum x_i r_i, out[2] = sum r_i^2, each summed in 8 lanes
 * (element i in lane i % 8, in increasing i) combined as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)),
 * so that every level's pass is bitwise equal to hy_ref_fp8_fit_pass. */
typedef void (*hy_fp8_fit_pass_fn)(const float *x, int64_t n, float s, float out[3]);

/* The amax rule's scale of row x[n] (f32): max |x_i| / 448, NaN elements never winning the max (0 for
 * an all-zero or all-NaN row). */
float hy_fp8_scale_amax(const float *x, int64_t n);

/* The fitted scale of row x[n] (n >= 1, f32), by the search above with pass (a level's
 * fp8_fit_pass, kernel_table.h). Rows whose s0 = amax / 448 is 0 (all zero or NaN elements: NaN
 * never wins the amax; or amax / 448 underflows) or infinite (an infinite element) return s0, the
 * amax rule's value; NaN elements elsewhere make every error NaN, so s0 is kept. Deterministic: a
 * function of x's bits and of the pass. */
float hy_fp8_scale_fit_with(hy_fp8_fit_pass_fn pass, const float *x, int64_t n);

/* hy_fp8_scale_fit_with through the active kernel table (kernels.h): bitwise the same at every
 * level. */
float hy_fp8_scale_fit(const float *x, int64_t n);

#endif
