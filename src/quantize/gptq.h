/* gptq.h - GPTQ rounding of one weight matrix into the formats of `hyinfer quantize`.
 *
 * Math: Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained
 * Transformers", Algorithm 1 (the Cholesky form of Optimal Brain Quantization). With H = E[x x^T]
 * over calibration inputs x of the layer, the columns of W are rounded one at a time and the
 * rounding error of column i is spread over the columns not yet rounded so that the layer output
 * error tr((Q - W) H (Q - W)^T) stays small:
 *   Hd = H + λ I, λ = dampening_frac * mean(diag H)   (diag entries that are 0, inputs never seen,
 *                                                       are set to 1 first)
 *   U  = upper Cholesky factor of Hd^-1 (Hd^-1 = U^T U), in the processing order of the columns
 *   for each i: q_i = Q(w_i); e = (w_i - q_i) / U[i][i]; w_j -= e * U[i][j] for j > i
 *   (the updates of columns past i's block of 128 summed first and applied once per block, the
 *   paper's lazy batch form: the same math, another rounding order)
 * Rows are independent (each has its own w), so they run in parallel. With actorder the columns are
 * processed in order of decreasing diag H (vLLM / llm-compressor "actorder"; the stored layout is
 * unchanged). Scales are fixed before rounding, from the original W, by the same rules as
 * round-to-nearest (quantize.h): fp8 per-tensor s given by the caller, MX block scales by the rule of
 * o->mx_scale from each block of W (llm-compressor's "static" groups). Q rounds to nearest even, saturating.
 * With H = identity and dampening 0 the result is exactly round-to-nearest.
 */
#ifndef HY_QUANTIZE_GPTQ_H
#define HY_QUANTIZE_GPTQ_H

#include "config/quant_config.h"
#include "quant/formats.h"

#include <stdint.h>

struct hy_gptq_opts {
    double dampening_frac;          /* λ / mean(diag H); 0.01 is GPTQ's and llm-compressor's default */
    int actorder;                   /* 1: columns by decreasing diag H; 0: in index order */
    enum hy_mx_scale_rule mx_scale; /* MX block scales (quant/formats.h), fixed from W before rounding */
};

/* Quantizes w [N, K] (f32, row-major) with the Hessian proxy h [K, K] (f64, symmetric, e.g. the mean
 * of x x^T over calibration rows; only read) into:
 *   fmt HY_QF_FP8_TENSOR: wq [N, K] E4M3 codes of w / fp8_scale (sq unused, may be NULL);
 *   fmt HY_QF_MXFP8:      wq [N, K] E4M3 codes, sq [N, ceil(K/32)] E8M0 block scales;
 *   fmt HY_QF_MXFP4:      wq [N, K/2] E2M1 nibbles (element 2j low), sq [N, ceil(K/32)] (K even);
 *   fmt HY_QF_W8A8_DYN / HY_QF_W8A8_STATIC: wq [N, K] int8 codes in [-127, 127], sq [N] f32 row scales
 *                         (4 bytes per row, native order) s_n = hy_quant_i8_row_scale of row n of W.
 * obj (may be NULL) receives {RTN objective, GPTQ objective}: tr((Q - W) H (Q - W)^T) summed over
 * rows, with the undamped h, for the round-to-nearest codes and for the GPTQ codes; over all rows
 * when N <= 32, else over rows 0, N/32, 2 N/32, ... (32 of them; a diagnostic: h is read once for all
 * of them, 2 K^2 multiply-adds per row measured).
 * If Hd is not positive definite, λ is raised (10x, and to at least 1e-6 mean(diag H)) up to 6 times. Returns 0; 1 when Hd stayed
 * indefinite (nothing written: fall back to round-to-nearest); -1 out of memory or bad arguments
 * (with hy_err_msg()). Threads: OpenMP over tiles of 8 rows, over the rows of each 64-column block
 * of the Cholesky (4 at a time), over 64-column tasks of the triangular inverse and over column
 * chunks of the objectives; every value is the same expression whatever the thread count, and the sums are the
 * kernel table's dot_f64 / gemm_sub_f64 (bitwise equal at every level), so the output is a function
 * of the inputs only. Memory: about 3 K^2 doubles while factoring (K^2 kept: U^T), plus 8 K +
 * 128 (128 + 8) doubles per thread and 4 * 32 K for the objectives. Time: K^3 / 3 multiply-adds for
 * the factor (one Cholesky of Hd in reversed order and one triangular inverse, whose reversal is U;
 * gptq.c), N K^2 / 2 for the rounding, done with GPTQ's lazy batch updates: within a block of 128
 * columns the error goes to the block's columns at once, to the later columns once per block as
 * x -= E U[block, later] (gemm_sub_f64 on U^T's rows, which are U's columns, read once per 8 rows).
 * Timings: docs/tuning.md. */
int hy_gptq_quantize(const float *w, const double *h, int64_t N, int64_t K, enum hy_qformat fmt, float fp8_scale,
                     const struct hy_gptq_opts *o, uint8_t *wq, uint8_t *sq, double obj[2]);

/* The factor of one H (column order and upper Cholesky factor of the damped inverse), which every
 * matrix reading the same inputs (q/k/v, gate/up) can share: hy_gptq_quantize = init + factored + free. */
struct hy_gptq_factor {
    int64_t K;
    int64_t *perm; /* [K] processing order of the columns */
    double *ut;    /* [K, K] U^T (lower triangle, zeros above) for U the upper factor in that order */
};

/* Factor of h [K, K] under o (dampening_frac, actorder). Returns 0, 1 (indefinite, as above; *f empty),
 * -1 (out of memory / bad arguments, hy_err_msg()). Free with hy_gptq_factor_free. */
int hy_gptq_factor_init(const double *h, int64_t K, const struct hy_gptq_opts *o, struct hy_gptq_factor *f);
void hy_gptq_factor_free(struct hy_gptq_factor *f);

/* hy_gptq_quantize with a factor from hy_gptq_factor_init of the same h and o (h is still read for
 * obj; o->mx_scale is used here). Returns 0 or -1. */
int hy_gptq_quantize_factored(const float *w, const double *h, const struct hy_gptq_factor *f, int64_t N,
                              enum hy_qformat fmt, float fp8_scale, const struct hy_gptq_opts *o, uint8_t *wq,
                              uint8_t *sq, double obj[2]);

/* hy_gptq_quantize_factored with the rows coupled in groups (the output-side Kronecker factor of
 * K-FAC, Martens & Grosse 2015): minimises tr((Q - W)^T G (Q - W) H) where G is block diagonal over the
 * N / group_rows groups of consecutive rows (g [N / group_rows, group_rows, group_rows] f64, symmetric,
 * e.g. q_proj's attention statistics per head, calib.h). The upper Cholesky factor of (G kron H)^-1 is
 * U_G kron U_H, so OBQ's sequential rounding in row-major order is: each row by GPTQ (U_H, as above),
 * then its total change d = w_r - q_r (its values when its rounding started minus the codes' values)
 * spread over its group's later rows, w_r' -= U_G[r][r'] / U_G[r][r] d. Rows of a group go in order of
 * decreasing diag G_g with actorder; G_g + λ I with λ = dampening_frac * mean(diag G_g) (raised as for
 * H; a G_g that stays indefinite leaves its rows uncoupled). Step a rounds the a-th row of every group,
 * in tiles of 8 as above. With G = identity the codes are hy_gptq_quantize_factored's. obj as above
 * (the H-only objective of each measured row). Memory: N K + groups x group_rows^2 doubles more.
 * Returns 0, or -1 (bad arguments, N not a multiple of group_rows, out of memory). */
int hy_gptq_quantize_coupled(const float *w, const double *h, const struct hy_gptq_factor *f, int64_t N,
                             const double *g, int64_t group_rows, enum hy_qformat fmt, float fp8_scale,
                             const struct hy_gptq_opts *o, uint8_t *wq, uint8_t *sq, double obj[2]);

/* Round-to-nearest of one row w[K] in fmt: fp8 codes of w / fp8_scale, MX codes and block scales by
 * rule (formats.h), or int8 codes RNE(w / s) clamped to [-127, 127] with s = hy_quant_i8_row_scale(w)
 * stored as f32 in sq[0..4). The codes `hyinfer quantize` writes without calibration, and where GPTQ starts. */
void hy_quant_row_rtn(const float *w, int64_t K, enum hy_qformat fmt, float fp8_scale, enum hy_mx_scale_rule rule,
                      uint8_t *wq, uint8_t *sq);

/* Ascend W8A8's weight scale of one row w[K]: max_k |w_k| / 127 in f32, at least FLT_EPSILON
 * (msModelSlim's symmetric min-max rule, specs/ascend_w8a8.md §2). */
float hy_quant_i8_row_scale(const float *w, int64_t K);

/* Value of column k's element code c under row r's scales (the dequantization the loader applies):
 * fp8: e4m3(c) * fp8_scale; MX: elem(c) * 2^(sq[r, k/32] - 127); int8: (int8)c * fp8_scale, which
 * holds the row's scale. Exposed for tests. */
double hy_gptq_dequant(enum hy_qformat fmt, uint8_t code, float fp8_scale, uint8_t scale_byte);

#endif
