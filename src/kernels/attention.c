/* attention.c - KV writes (F32 copy, BF16 rounding, FP8 quantization with fitted or amax scales) and
 * the scalar reference attention over a KV view, plus the dispatch to the active level's kernels
 * (attention.h). */
#include "kernels/attention.h"
#include "kernels/fp8_scale.h"
#include "kernels/kernel_table.h"
#include "kernels/scratch.h"
#include "quant/formats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void store_row(void *base, enum hy_dtype dt, int64_t off, const float *src, int64_t n)
{
    if (dt == HY_DTYPE_F32) {
        memcpy((float *)base + off, src, (size_t)n * sizeof(float));
    } else {
        uint16_t *d = (uint16_t *)base + off;
        for (int64_t i = 0; i < n; i++)
            d[i] = hy_f32_to_bf16(src[i]);
    }
}

/* One head's row x[n] -> E4M3 bytes q[n]. static_scale > 0: that scale (saturating); else the
 * dynamic scale, returned: fitted (fit != 0, kernels/fp8_scale.h) or amax / 448. A zero scale stores
 * zeros (dequantizes to 0, never NaN). */
static float quant_head(const float *x, int64_t n, float static_scale, int fit, uint8_t *q)
{
    float s = static_scale;
    if (!(s > 0.0f))
        s = fit ? hy_fp8_scale_fit(x, n) : hy_fp8_scale_amax(x, n);
    if (s == 0.0f) {
        memset(q, 0, (size_t)n);
        return 0.0f;
    }
    hy_kernels_active()->fp8_encode(x, n, s, q);
    return s;
}

/* KV head g of token slot `slot` into an FP8 view: K and V rows k[head_dim], v[head_dim]. */
static void write_head_fp8(const struct hy_kv_view *kv, int64_t slot, int32_t g, const float *k, const float *v)
{
    const int64_t D = kv->head_dim, si = slot * kv->n_kv_heads + g;
    uint8_t *kq = (uint8_t *)kv->k + si * D, *vq = (uint8_t *)kv->v + si * D;
    const float *vs = kv->v_static;
    kv->k_scale[si] = quant_head(k, D, 0.0f, kv->scale_fit, kq);
    if (vs)
        quant_head(v, D, vs[g], 0, vq);
    else
        kv->v_scale[si] = quant_head(v, D, 0.0f, kv->scale_fit, vq);
}

void hy_kv_write(const struct hy_kv_view *kv, int64_t slot, const float *k, const float *v)
{
    const int64_t D = kv->head_dim, row = (int64_t)kv->n_kv_heads * D;
    if (kv->dtype != HY_DTYPE_F8_E4M3) {
        store_row(kv->k, kv->dtype, slot * row, k, row);
        store_row(kv->v, kv->dtype, slot * row, v, row);
        return;
    }
    for (int32_t g = 0; g < kv->n_kv_heads; g++)
        write_head_fp8(kv, slot, g, k + g * D, v + g * D);
}

void hy_kv_write_batch(const struct hy_kv_view *kv, int64_t T, const int64_t *slot_mapping, const float *k,
                       const float *v)
{
    const int64_t G = kv->n_kv_heads, D = kv->head_dim;
    if (kv->dtype != HY_DTYPE_F8_E4M3) {
        for (int64_t t = 0; t < T; t++)
            hy_kv_write(kv, slot_mapping[t], k + t * G * D, v + t * G * D);
        return;
    }
    /* a fitted row costs ~4 us (48 scale evaluations of 128 elements), worth a parallel region even at
     * decode; amax / 448 rows (~0.2 us) only in bulk */
#pragma omp parallel for schedule(static) if (T * G > 1 && (kv->scale_fit || T * G >= 256))
    for (int64_t i = 0; i < T * G; i++)
        write_head_fp8(kv, slot_mapping[i / G], (int32_t)(i % G), k + i * D, v + i * D);
}

/* Head g's row of `slot` (K: which = 0, V: 1) as f32: a pointer into the cache for f32, else
 * widened / dequantized into buf[head_dim]. */
static const float *load_row(const struct hy_kv_view *kv, int which, int64_t slot, int32_t g, float *buf)
{
    const int64_t D = kv->head_dim, off = (slot * kv->n_kv_heads + g) * D;
    const void *base = which ? kv->v : kv->k;
    if (kv->dtype == HY_DTYPE_F32)
        return (const float *)base + off;
    if (kv->dtype == HY_DTYPE_BF16) {
        const uint16_t *s = (const uint16_t *)base + off;
        for (int64_t i = 0; i < D; i++)
            buf[i] = hy_bf16_to_f32(s[i]);
        return buf;
    }
    const uint8_t *s = (const uint8_t *)base + off;
    const float sc = which ? hy_kv_view_v_scale(kv, slot, g) : hy_kv_view_k_scale(kv, slot, g);
    for (int64_t i = 0; i < D; i++)
        buf[i] = hy_e4m3_to_f32(s[i]) * sc;
    return buf;
}

/* Scalar reference attention (three passes: scores, softmax, weighted V sum), the oracle. */
void hy_ref_attend(const struct hy_kv_view *kv, const float *q, int32_t n_heads, const int32_t *block_table,
                   int32_t n_ctx, float *scores, float *out)
{
    const int64_t D = kv->head_dim;
    const int32_t group = n_heads / kv->n_kv_heads, bs = kv->block_size;
    const float scale = 1.0f / sqrtf((float)D);
    static _Thread_local struct hy_scratch row; /* head_dim > 512: kept between calls */
    float rowbuf[512];
    float *tmp = D <= 512 ? rowbuf : hy_scratch_get(&row, (size_t)D * sizeof(float));
    if (!tmp) { /* out of memory: NaN outputs, never a crash */
        for (int64_t i = 0; i < (int64_t)n_heads * D; i++)
            out[i] = NAN;
        return;
    }
    for (int32_t h = 0; h < n_heads; h++) {
        const int32_t g = h / group;
        const float *qh = q + h * D;
        float *oh = out + h * D;
        float mx = -INFINITY;
        for (int32_t j = 0; j < n_ctx; j++) {
            int64_t slot = (int64_t)block_table[j / bs] * bs + j % bs;
            const float *kr = load_row(kv, 0, slot, g, tmp);
            scores[j] = hy_ref_dot_f32(qh, kr, D) * scale;
            if (scores[j] > mx)
                mx = scores[j];
        }
        float sum = 0.0f;
        for (int32_t j = 0; j < n_ctx; j++) {
            scores[j] = expf(scores[j] - mx);
            sum += scores[j];
        }
        const float inv = 1.0f / sum;
        memset(oh, 0, (size_t)D * sizeof(float));
        for (int32_t j = 0; j < n_ctx; j++) {
            int64_t slot = (int64_t)block_table[j / bs] * bs + j % bs;
            const float *vr = load_row(kv, 1, slot, g, tmp);
            const float p = scores[j] * inv;
            for (int64_t d = 0; d < D; d++)
                oh[d] += p * vr[d];
        }
    }
}

void hy_ref_attn_pv(float *out, int64_t ldo, const float *P, int64_t ldp, int64_t m, const float *C, int64_t ldc,
                    int64_t n, int64_t width)
{
    for (int64_t j = 0; j < m; j++) {
        float *o = out + j * ldo;
        for (int64_t d = 0; d < width; d++)
            o[d] = 0.0f;
        for (int64_t i = 0; i < n; i++) {
            const float p = P[j * ldp + i];
            const float *c = C + i * ldc;
            for (int64_t d = 0; d < width; d++)
                o[d] += p * c[d];
        }
    }
}

void hy_attn_pv(float *out, int64_t ldo, const float *P, int64_t ldp, int64_t m, const float *C, int64_t ldc, int64_t n,
                int64_t width)
{
    hy_kernels_active()->attn_pv(out, ldo, P, ldp, m, C, ldc, n, width);
}

void hy_attend(const struct hy_kv_view *kv, const float *q, int32_t n_heads, const int32_t *block_table, int32_t n_ctx,
               float *scores, float *out)
{
    hy_kernels_active()->attend(kv, q, n_heads, block_table, n_ctx, scores, out);
}

void hy_attend_multi(const struct hy_kv_view *kv, const float *q, int32_t n_q, int32_t n_heads,
                     const int32_t *block_table, int32_t n_ctx0, float *scores, float *out)
{
    const int64_t qs = (int64_t)n_heads * kv->head_dim;
#if defined(__x86_64__)
    if (hy_kernels_active()->attend == hy_avx2_attend) {
        hy_avx2_attend_multi(kv, q, n_q, n_heads, block_table, n_ctx0, scores, out);
        return;
    }
#endif
    for (int32_t i = 0; i < n_q; i++)
        hy_kernels_active()->attend(kv, q + i * qs, n_heads, block_table, n_ctx0 + i, scores, out + i * qs);
}
