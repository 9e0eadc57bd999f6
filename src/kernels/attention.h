/* attention.h - KV writes and causal attention over a paged KV view (kernels/kv_view.h).
 *
 * Every function runs the active kernel level's code (kernel_table.h) and reads / writes only the
 * storage the view points at; errors are the caller's to prevent (shapes are not checked here). */
#ifndef HY_KERNELS_ATTENTION_H
#define HY_KERNELS_ATTENTION_H

#include "kernels/kv_view.h"

#include <stdint.h>

/* Stores k[n_kv_heads * head_dim] and v[same] (f32) of one token into `slot` (F32: copied; BF16:
 * rounded to nearest even; FP8: quantized per kv head with the scales of kv_view.h, a zero-amax row
 * getting scale 0 and zero bytes). */
void hy_kv_write(const struct hy_kv_view *kv, int64_t slot, const float *k, const float *v);

/* T tokens at once: token t's rows k[t, n_kv_heads, head_dim], v[same] (f32) into slot
 * slot_mapping[t] (distinct slots). Equal to T hy_kv_write calls; FP8 views quantize the
 * T * n_kv_heads (token, kv head) rows in parallel (OpenMP; each row's bytes and scale depend on
 * that row alone, so the result does not depend on the thread count). */
void hy_kv_write_batch(const struct hy_kv_view *kv, int64_t T, const int64_t *slot_mapping, const float *k,
                       const float *v);

/* Causal attention of one query token over its sequence's first n_ctx cached tokens:
 * q[n_heads, head_dim] (f32), out[n_heads, head_dim]; query head h reads KV head h / (n_heads /
 * n_kv_heads) (GQA, spec §2.4); scale = head_dim^-0.5; softmax in fp32; tokens addressed through
 * block_table. scores[n_ctx] is scratch. Fixed summation order over positions 0..n_ctx-1.
 * FP8 views are dequantized inside the kernel (byte value times the row's scale). */
void hy_attend(const struct hy_kv_view *kv, const float *q, int32_t n_heads, const int32_t *block_table, int32_t n_ctx,
               float *scores, float *out);

/* n_q query tokens of one sequence at consecutive positions: token i has q + i * n_heads * head_dim
 * and out + i * n_heads * head_dim and attends to the first n_ctx0 + i cached tokens (n_ctx0 >= 1).
 * Results are bitwise identical to n_q hy_attend calls (the avx2 kernel walks each KV tile once for
 * up to 8 of the tokens, reusing it from L1); runs on the calling thread only. */
void hy_attend_multi(const struct hy_kv_view *kv, const float *q, int32_t n_q, int32_t n_heads,
                     const int32_t *block_table, int32_t n_ctx0, float *scores, float *out);

/* The P.V product of attention with explicit weights: out[j * ldo + d] = sum over i < n of
 * P[j * ldp + i] * C[i * ldc + d] for rows j < m and columns d < width (all f32; out does not overlap P or
 * C). Each output is one chain over i in increasing order starting from +0 (ref: product rounded then
 * added; avx2 and AVX-512 levels: fused multiply-add), so it never depends on m, on the other outputs or on
 * threads. Runs on the calling thread. Used by hy_v4's MLA (model/hy_v4.c: C = the gathered latent rows). */
void hy_attn_pv(float *out, int64_t ldo, const float *P, int64_t ldp, int64_t m, const float *C, int64_t ldc, int64_t n,
                int64_t width);

#endif
