/* kernel_table.h - the per-ISA kernel table behind the public kernels.h / attention.h API.
 *
 * One table per ISA level; the active one is chosen once (pthread_once) from hy_cpu_supports() and
 * HYINFER_ISA=ref|avx2|avx512|amx (a forced level the CPU/OS cannot run, or that has no kernels
 * here, logs an error and falls back to the best available level). Tests build the table of every
 * supported level with hy_kernels_table_for() and compare it against the ref table.
 *
 * Reduction-order contract for every level: each matmul output y[t,n] (and hy_dot_f32) is the
 * level's fixed chain over k (ref: 8 interleaved partial sums; avx2: one 8-lane FMA chain, lane j
 * taking k = j mod 8 in increasing k, zero-padded tail), then the fixed horizontal sum
 * ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)); it never depends on T, on the GEMV/GEMM path taken, or on
 * the thread count. Quantized weights (FP8 per-tensor, MXFP8, MXFP4; quant/tensor.h) run the same
 * chain on each element's exact dequantized f32 value hy_tensor_get (ref via hy_tensor_get, avx2
 * via avx2_quant.c: widened in registers for decode, into f32 panels for prefill), except that
 * per-tensor FP8 on avx2 and avx512 takes the raw scheme (avx2_quant.h: raw values, the scale
 * folded into each activation row), which differs from ref in rounding only.
 * avx512 (also the amx level's matmul): one 16-lane FMA chain, lane j taking k = j mod 16, masked
 * zero tail, then the halves added lane by lane and summed in the avx2 order (avx512_common.h).
 * The bf16-mode matmuls (matmul_bf16x, matmul_rows_bf16x) are these chains at the ref and avx2
 * levels and on AVX-512 CPUs without AVX512_BF16; with it they are avx512_bf16.c's vdpbf16ps chain
 * (T-invariant too, different rounding order); at the amx level matmul_bf16x with T >= HY_AMX_MIN_T
 * runs on AMX tiles, whose order depends on the 16-token tile a row falls in (bf16 mode only).
 */
#ifndef HY_KERNELS_KERNEL_TABLE_H
#define HY_KERNELS_KERNEL_TABLE_H

#include "base/cpu.h"
#include "kernels/kernels.h"
#include "kernels/kv_view.h"

struct hy_kernel_table {
    enum hy_isa isa;
    const char *name;
    void (*matmul)(float *y, const float *x, int64_t T, const struct hy_tensor *W);
    /* Same contract as hy_matmul_bf16x (kernels.h); levels without bf16 dot products: = matmul. */
    void (*matmul_bf16x)(float *y, const float *x, int64_t T, const struct hy_tensor *W);
    /* Same contract as hy_matmul_rows (kernels.h): outputs n0 <= n < n1 only, on the calling thread. */
    void (*matmul_rows)(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                        int64_t n1);
    /* Same contract as hy_matmul_rows_bf16x (kernels.h); levels without bf16 dot products: = matmul_rows. */
    void (*matmul_rows_bf16x)(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                              int64_t n1);
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    void (*rmsnorm)(float *y, const float *x, const float *w, int64_t T, int64_t d, float eps);
    void (*rope)(float *x, int64_t n_heads, int64_t head_dim, int32_t pos, const float *inv_freq, int interleaved);
    void (*silu_mul)(float *out, const float *gate, const float *up, int64_t n);
    void (*round_bf16)(float *x, int64_t n);
    /* Same contract as hy_attend (attention.h). */
    void (*attend)(const struct hy_kv_view *kv, const float *q, int32_t n_heads, const int32_t *block_table,
                   int32_t n_ctx, float *scores, float *out);
    /* Same contract as hy_attn_pv (attention.h). */
    void (*attn_pv)(float *out, int64_t ldo, const float *P, int64_t ldp, int64_t m, const float *C, int64_t ldc,
                    int64_t n, int64_t width);
    /* One scale evaluation of the FP8 scale fit (kernels/fp8_scale.h); bitwise equal at every level. */
    void (*fp8_fit_pass)(const float *x, int64_t n, float s, float out[3]);
    /* q[i] = hy_f32_to_e4m3(x[i] / s) for x[n] (f32), s > 0 (quant/formats.h); bitwise equal at every level. */
    void (*fp8_encode)(const float *x, int64_t n, float s, uint8_t *q);
    /* sum a[k] * b[k] over a[n], b[n] (f64; GPTQ's factorization, quantize/gptq.c): 8 lanes, lane j
     * taking k = j mod 8 in increasing k, each product rounded then added (never fused), lanes summed
     * ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)); bitwise equal at every level. n <= 0 gives +0. */
    double (*dot_f64)(const double *a, const double *b, int64_t n);
    /* x[t][j] -= dot_f64(e_t, v_j, nb) for t < nr, j < n, rows x_t = x + t * ldx, e_t = e + t * lde,
     * v_j = v + j * ldv (f64; GPTQ's deferred error update, quantize/gptq.c): each sum in dot_f64's lane
     * order, then one subtraction; bitwise equal at every level. */
    void (*gemm_sub_f64)(double *x, int64_t ldx, int64_t nr, const double *e, int64_t lde, const double *v, int64_t ldv,
                         int64_t nb, int64_t n);
    /* g[i][j] += a_t[i] * b_t[j] for t = 0, 1, ... nt - 1 in turn, i < ni, j < nj, rows g_i = g + i * ldg,
     * a_t = a + t * lda, b_t = b + t * ldb (f64; GPTQ's H += X^T X, quantize/calib.c): each product rounded
     * then added to the entry (never fused), one t at a time, so the bits are the same however the
     * caller splits i, j, or t (in increasing t); bitwise equal at every level. */
    void (*gemm_tn_acc_f64)(double *g, int64_t ldg, const double *a, int64_t lda, const double *b, int64_t ldb,
                            int64_t nt, int64_t ni, int64_t nj);
};

/* Fills *t with the kernels of level isa. Returns 0, or -1 with hy_err_msg() if the CPU/OS cannot
 * run that level or this build has no kernels for it. */
int hy_kernels_table_for(enum hy_isa isa, struct hy_kernel_table *t);

/* The active table (chosen once, see above). Never NULL. */
const struct hy_kernel_table *hy_kernels_active(void);

/* The best level with kernels that this CPU + OS can run. */
enum hy_isa hy_kernels_best_isa(void);

/* matmul_rows through a level's whole-tensor matmul: runs matmul on the row view [n0, n1) of W (data
 * and MX scales offset, same dtype/qscheme/scale) into a temporary and scatters it to y (ldy stride).
 * Used for tensors a level has no direct row-range kernel for (e.g. quantized ones). */
void hy_matmul_rows_by_view(void (*matmul)(float *, const float *, int64_t, const struct hy_tensor *), float *y,
                            int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0, int64_t n1);

/* Scalar reference kernels (ref.c, attention.c). */
void hy_ref_matmul(float *y, const float *x, int64_t T, const struct hy_tensor *W);
void hy_ref_matmul_rows(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                        int64_t n1);
float hy_ref_dot_f32(const float *a, const float *b, int64_t n);
void hy_ref_rmsnorm(float *y, const float *x, const float *w, int64_t T, int64_t d, float eps);
void hy_ref_rope(float *x, int64_t n_heads, int64_t head_dim, int32_t pos, const float *inv_freq, int interleaved);
void hy_ref_silu_mul(float *out, const float *gate, const float *up, int64_t n);
void hy_ref_round_bf16(float *x, int64_t n);
void hy_ref_attend(const struct hy_kv_view *kv, const float *q, int32_t n_heads, const int32_t *block_table,
                   int32_t n_ctx, float *scores, float *out);
void hy_ref_attn_pv(float *out, int64_t ldo, const float *P, int64_t ldp, int64_t m, const float *C, int64_t ldc,
                    int64_t n, int64_t width);
void hy_ref_fp8_fit_pass(const float *x, int64_t n, float s, float out[3]);
void hy_ref_fp8_encode(const float *x, int64_t n, float s, uint8_t *q);
double hy_ref_dot_f64(const double *a, const double *b, int64_t n);
void hy_ref_gemm_tn_acc_f64(double *g, int64_t ldg, const double *a, int64_t lda, const double *b, int64_t ldb,
                            int64_t nt, int64_t ni, int64_t nj);
void hy_ref_gemm_sub_f64(double *x, int64_t ldx, int64_t nr, const double *e, int64_t lde, const double *v, int64_t ldv,
                         int64_t nb, int64_t n);

/* AVX2 + FMA + F16C kernels (avx2.c, avx2_attn.c); call only if hy_cpu_supports(HY_ISA_AVX2). */
void hy_avx2_matmul(float *y, const float *x, int64_t T, const struct hy_tensor *W);
void hy_avx2_matmul_rows(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                         int64_t n1);
float hy_avx2_dot_f32(const float *a, const float *b, int64_t n);
void hy_avx2_rmsnorm(float *y, const float *x, const float *w, int64_t T, int64_t d, float eps);
void hy_avx2_rope(float *x, int64_t n_heads, int64_t head_dim, int32_t pos, const float *inv_freq, int interleaved);
void hy_avx2_silu_mul(float *out, const float *gate, const float *up, int64_t n);
void hy_avx2_round_bf16(float *x, int64_t n);
void hy_avx2_attend(const struct hy_kv_view *kv, const float *q, int32_t n_heads, const int32_t *block_table,
                    int32_t n_ctx, float *scores, float *out);
/* The avx2 attn_pv (avx2_attn.c); also the AVX-512 levels'. */
void hy_avx2_attn_pv(float *out, int64_t ldo, const float *P, int64_t ldp, int64_t m, const float *C, int64_t ldc,
                     int64_t n, int64_t width);
/* The avx2 fp8_fit_pass and fp8_encode (avx2_fp8_fit.c); also the AVX-512 levels'. */
void hy_avx2_fp8_fit_pass(const float *x, int64_t n, float s, float out[3]);
void hy_avx2_fp8_encode(const float *x, int64_t n, float s, uint8_t *q);
/* The avx2 dot_f64, gemm_sub_f64 and gemm_tn_acc_f64 (avx2_dot_f64.c); also the AVX-512 levels'. */
double hy_avx2_dot_f64(const double *a, const double *b, int64_t n);
void hy_avx2_gemm_tn_acc_f64(double *g, int64_t ldg, const double *a, int64_t lda, const double *b, int64_t ldb,
                             int64_t nt, int64_t ni, int64_t nj);
void hy_avx2_gemm_sub_f64(double *x, int64_t ldx, int64_t nr, const double *e, int64_t lde, const double *v,
                          int64_t ldv, int64_t nb, int64_t n);
/* hy_attend_multi for the avx2 table (bitwise equal to n_q hy_avx2_attend calls). */
void hy_avx2_attend_multi(const struct hy_kv_view *kv, const float *q, int32_t n_q, int32_t n_heads,
                          const int32_t *block_table, int32_t n_ctx0, float *scores, float *out);

/* AMX-BF16 (amx.c, amx.h): hy_amx_matmul_bf16x is the amx level's matmul_bf16x. */

/* AVX-512 F/BW/VL kernels (avx512.c); call only if hy_cpu_supports(HY_ISA_AVX512). */
void hy_avx512_matmul(float *y, const float *x, int64_t T, const struct hy_tensor *W);
void hy_avx512_matmul_rows(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                           int64_t n1);
float hy_avx512_dot_f32(const float *a, const float *b, int64_t n);
void hy_avx512_rmsnorm(float *y, const float *x, const float *w, int64_t T, int64_t d, float eps);
/* Rows [n0, n0+nb) of W (any kernel dtype or hy_avx512q_supported format) widened to f32:
 * dst[r*ldw + k], zeros for K <= k < round_up(K, 16); the values the avx512 chains use (per-tensor
 * FP8 in the raw scheme excepted: hy_avx512q_widen_rows_raw). */
void hy_avx512_widen_rows(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst);

#endif
