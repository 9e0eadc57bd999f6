/* calib_attn.h - q_proj's attention statistics: the output-side factor G of the coupled GPTQ rounding
 * (quantize/gptq.h hy_gptq_quantize_coupled), one [head_dim, head_dim] matrix per query head.
 *
 * Why: a change dq of head h's query (q_proj's output, before the QK-norm) reaches the attention as
 * the change of the normalized, rotated query R_t D dq / rms(q_h(t)) (D = diag of the q_norm gain,
 * R_t the RoPE rotation at position t; the QK-norm's radial part dropped), and the scores move by
 * ds_j = (R_t D dq)^T k_j / (rms sqrt(head_dim)) for the keys k_j (after k_norm and RoPE). To second
 * order the attention probabilities' KL divergence is Var_{p_t}(ds) / 2, so the error costs
 *   dq^T M_t dq,  M_t = D R_t^T Cov_{p_t}(k) R_t D / (rms^2 head_dim),
 * Cov_{p_t}(k) = sum_j p_tj k_j k_j^T - kbar kbar^T, kbar = sum_j p_tj k_j, p_t token t's attention
 * probabilities over j <= t. Directions of dq that no key varies along cost nothing. GPTQ's per-row
 * objective treats every output dimension alike; with the Kronecker (K-FAC) approximation
 * sum_t (dW x_t)^T M_t (dW x_t) ~ tr(dW^T G dW H), G_h = sum_t M_t,h and H from the calibration inputs,
 * the rows of a head are rounded jointly. Measured on models/hy3-tiny, fp8 GPTQ of q_proj with this
 * statistic (numpy prototype experiments/gptq_qnorm_proto.py --mode kfac-cov): README "attention Hessian".
 * Without a q_norm the same holds with D = I and rms = 1 (the scores see dq directly).
 */
#ifndef HY_QUANTIZE_CALIB_ATTN_H
#define HY_QUANTIZE_CALIB_ATTN_H

#include <stdint.h>

/* The shapes and constants of one layer's attention. */
struct hy_calib_attn_shape {
    int64_t n_heads, n_kv_heads, head_dim; /* query head h reads kv head h / (n_heads / n_kv_heads) */
    const float *q_norm, *k_norm;          /* [head_dim] QK-norm gains, or both NULL (no QK-norm) */
    float eps;                             /* rms_norm_eps */
    const float *inv_freq;                 /* [head_dim / 2] RoPE inverse frequencies */
    int interleaved;                       /* RoPE pairs (2i, 2i+1) instead of (i, i + head_dim/2) */
};

/* G [n_heads, head_dim, head_dim] (f64, full symmetric matrices) += sum over the sampled queries t of
 * M_t,h (above), for one causal sequence of T tokens at positions 0..T-1: q [T, n_heads * head_dim]
 * and k [T, n_kv_heads * head_dim] the q_proj / k_proj outputs (f32, before QK-norm and RoPE). The
 * sampled queries are t = stride - 1, 2 stride - 1, ... (stride >= 1; every token at 1). Norms, RoPE
 * and softmax are recomputed in f64 (the forward pass's math, spec §2.2; softmax scale
 * 1 / sqrt(head_dim)); Cov_p(k) is the Gram of the centred rows sqrt(p_j) (k_j - kbar) rounded to f32
 * (hy_calib_gram_add's f64 sums), so each G_h is positive semidefinite as computed and matches the
 * formula to the f32 rounding of those rows (tests/unit/test_calib_attn.c: 2e-6 of G's largest entry).
 * Cost per head: about sum over the sampled t of (t + 1) head_dim^2 / 2 multiply-adds (16 queries of a
 * T-token window: 8.5 T head_dim^2 / 2); threads over heads (OpenMP), so G's bits do not depend on the
 * thread count. Returns 0; -1 (hy_err_msg()) when n_heads is not a positive multiple of n_kv_heads or
 * head_dim is odd, or out of memory, G then unchanged. */
int hy_calib_attn_g_add(double *G, const float *q, const float *k, int64_t T, const struct hy_calib_attn_shape *a,
                        int64_t stride);

#endif
