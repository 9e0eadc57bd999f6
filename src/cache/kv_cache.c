#include "cache/kv_cache.h"

#include "base/err.h"
#include "kernels/fp8_scale.h"
#include "kernels/kernel_table.h"
#include "quant/formats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t hy_kv_cache_token_bytes(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, enum hy_dtype dtype,
                               int32_t n_static_v_layers)
{
    const size_t heads = (size_t)n_layers * (size_t)n_kv_heads;
    size_t b = 2 * heads * (size_t)head_dim * hy_dtype_size(dtype);
    if (dtype == HY_DTYPE_F8_E4M3) {
        const int32_t dyn_v = n_static_v_layers < n_layers ? n_layers - n_static_v_layers : 0;
        b += heads * sizeof(float) + (size_t)dyn_v * (size_t)n_kv_heads * sizeof(float);
    }
    return b;
}

size_t hy_kv_cache_bytes(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t block_size,
                         int32_t n_blocks, enum hy_dtype dtype)
{
    return hy_kv_cache_token_bytes(n_layers, n_kv_heads, head_dim, dtype, 0) * (size_t)n_blocks *
           (size_t)block_size;
}

int hy_kv_dtype_parse(const char *s, enum hy_dtype *out)
{
    if (!s || !strcmp(s, "auto"))
        *out = HY_DTYPE_UNKNOWN;
    else if (!strcmp(s, "bf16") || !strcmp(s, "bfloat16"))
        *out = HY_DTYPE_BF16;
    else if (!strcmp(s, "fp8") || !strcmp(s, "fp8_e4m3"))
        *out = HY_DTYPE_F8_E4M3;
    else if (!strcmp(s, "fp32") || !strcmp(s, "float32"))
        *out = HY_DTYPE_F32;
    else
        return hy_err_set("\"%s\": not a supported KV cache dtype (expected auto, bf16, bfloat16, fp8, fp8_e4m3, "
                          "fp32 or float32)", s);
    return 0;
}

const char *hy_kv_dtype_name(enum hy_dtype dt)
{
    switch (dt) {
    case HY_DTYPE_F32:
        return "fp32";
    case HY_DTYPE_BF16:
        return "bf16";
    case HY_DTYPE_F8_E4M3:
        return "fp8_e4m3";
    default:
        return "auto";
    }
}

int hy_kv_fp8_scale_fit_env(void)
{
    const char *rule = getenv("HYINFER_KV_FP8_SCALE");
    if (!rule || !strcmp(rule, "mse"))
        return 1;
    if (!strcmp(rule, "amax"))
        return 0;
    for (const char *p = rule; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return hy_err_set("HYINFER_KV_FP8_SCALE: a value with control characters is not a KV scale rule "
                              "(expected mse, the default, or amax)");
    return hy_err_set("HYINFER_KV_FP8_SCALE=\"%.64s\"%s: not a KV scale rule (expected mse, the default, or amax)",
                      rule, strlen(rule) > 64 ? "..." : "");
}

int hy_kv_cache_init(struct hy_kv_cache *kv, int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                     int32_t block_size, int32_t n_blocks, enum hy_dtype dtype)
{
    return hy_kv_cache_init_ex(kv, n_layers, n_kv_heads, head_dim, block_size, n_blocks, dtype, NULL);
}

int hy_kv_cache_init_ex(struct hy_kv_cache *kv, int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                        int32_t block_size, int32_t n_blocks, enum hy_dtype dtype, const float *const *v_static)
{
    memset(kv, 0, sizeof(*kv));
    if (n_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0 || block_size <= 0 || n_blocks <= 0 ||
        (dtype != HY_DTYPE_F32 && dtype != HY_DTYPE_BF16 && dtype != HY_DTYPE_F8_E4M3))
        return hy_err_set("kv cache: invalid geometry (layers %d, kv heads %d, head_dim %d, block_size %d, "
                          "blocks %d, dtype %s)", n_layers, n_kv_heads, head_dim, block_size, n_blocks,
                          hy_dtype_name(dtype));
    const int fp8 = dtype == HY_DTYPE_F8_E4M3;
    const int fit = fp8 ? hy_kv_fp8_scale_fit_env() : 0;
    if (fit < 0)
        return -1;
    kv->scale_fit = fit;
    int32_t n_static = 0;
    for (int32_t l = 0; fp8 && v_static && l < n_layers; l++) {
        if (!v_static[l])
            continue;
        n_static++;
        for (int32_t g = 0; g < n_kv_heads; g++)
            if (!(v_static[l][g] > 0.0f) || !isfinite(v_static[l][g]))
                return hy_err_set("kv cache: layer %d kv head %d: static V scale %g must be finite and > 0", l, g,
                                  (double)v_static[l][g]);
    }
    kv->n_layers = n_layers;
    kv->n_kv_heads = n_kv_heads;
    kv->head_dim = head_dim;
    kv->block_size = block_size;
    kv->n_blocks = n_blocks;
    kv->dtype = dtype;
    const size_t slots = (size_t)n_blocks * (size_t)block_size;
    const size_t per = slots * (size_t)n_kv_heads * (size_t)head_dim * hy_dtype_size(dtype);
    const size_t per_scale = slots * (size_t)n_kv_heads * sizeof(float);
    kv->k = calloc((size_t)n_layers, sizeof(void *));
    kv->v = calloc((size_t)n_layers, sizeof(void *));
    if (!kv->k || !kv->v)
        goto oom;
    if (fp8) {
        kv->k_scale = calloc((size_t)n_layers, sizeof(float *));
        kv->v_scale = calloc((size_t)n_layers, sizeof(float *));
        kv->v_static = calloc((size_t)n_layers, sizeof(float *));
        if (!kv->k_scale || !kv->v_scale || !kv->v_static)
            goto oom;
    }
    for (int32_t l = 0; l < n_layers; l++) {
        kv->k[l] = calloc(1, per);
        kv->v[l] = calloc(1, per);
        if (!kv->k[l] || !kv->v[l])
            goto oom;
        if (!fp8)
            continue;
        kv->k_scale[l] = calloc(1, per_scale);
        if (!kv->k_scale[l])
            goto oom;
        if (v_static && v_static[l]) {
            kv->v_static[l] = malloc((size_t)n_kv_heads * sizeof(float));
            if (!kv->v_static[l])
                goto oom;
            memcpy(kv->v_static[l], v_static[l], (size_t)n_kv_heads * sizeof(float));
        } else {
            kv->v_scale[l] = calloc(1, per_scale);
            if (!kv->v_scale[l])
                goto oom;
        }
    }
    return 0;
oom:
    hy_kv_cache_free(kv);
    return hy_err_set("kv cache: out of memory allocating %zu bytes",
                      hy_kv_cache_token_bytes(n_layers, n_kv_heads, head_dim, dtype, n_static) * slots);
}

void hy_kv_cache_free(struct hy_kv_cache *kv)
{
    for (int32_t l = 0; l < kv->n_layers; l++) {
        if (kv->k)
            free(kv->k[l]);
        if (kv->v)
            free(kv->v[l]);
        if (kv->k_scale)
            free(kv->k_scale[l]);
        if (kv->v_scale)
            free(kv->v_scale[l]);
        if (kv->v_static)
            free(kv->v_static[l]);
    }
    free(kv->k);
    free(kv->v);
    free(kv->k_scale);
    free(kv->v_scale);
    free(kv->v_static);
    memset(kv, 0, sizeof(*kv));
}

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

/* KV head g of token slot `slot` into an FP8 cache: K and V rows k[head_dim], v[head_dim]. */
static void write_head_fp8(struct hy_kv_cache *kv, int32_t layer, int64_t slot, int32_t g, const float *k,
                           const float *v)
{
    const int64_t D = kv->head_dim, si = slot * kv->n_kv_heads + g;
    uint8_t *kq = (uint8_t *)kv->k[layer] + si * D, *vq = (uint8_t *)kv->v[layer] + si * D;
    const float *vs = kv->v_static[layer];
    kv->k_scale[layer][si] = quant_head(k, D, 0.0f, kv->scale_fit, kq);
    if (vs)
        quant_head(v, D, vs[g], 0, vq);
    else
        kv->v_scale[layer][si] = quant_head(v, D, 0.0f, kv->scale_fit, vq);
}

void hy_kv_cache_write(struct hy_kv_cache *kv, int32_t layer, int64_t slot, const float *k, const float *v)
{
    const int64_t D = kv->head_dim, row = (int64_t)kv->n_kv_heads * D;
    if (kv->dtype != HY_DTYPE_F8_E4M3) {
        store_row(kv->k[layer], kv->dtype, slot * row, k, row);
        store_row(kv->v[layer], kv->dtype, slot * row, v, row);
        return;
    }
    for (int32_t g = 0; g < kv->n_kv_heads; g++)
        write_head_fp8(kv, layer, slot, g, k + g * D, v + g * D);
}

void hy_kv_cache_write_batch(struct hy_kv_cache *kv, int32_t layer, int64_t T, const int64_t *slot_mapping,
                             const float *k, const float *v)
{
    const int64_t G = kv->n_kv_heads, D = kv->head_dim;
    if (kv->dtype != HY_DTYPE_F8_E4M3) {
        for (int64_t t = 0; t < T; t++)
            hy_kv_cache_write(kv, layer, slot_mapping[t], k + t * G * D, v + t * G * D);
        return;
    }
    /* a fitted row costs ~4 us (48 scale evaluations of 128 elements), worth a parallel region even at
     * decode; amax / 448 rows (~0.2 us) only in bulk */
#pragma omp parallel for schedule(static) if (T * G > 1 && (kv->scale_fit || T * G >= 256))
    for (int64_t i = 0; i < T * G; i++)
        write_head_fp8(kv, layer, slot_mapping[i / G], (int32_t)(i % G), k + i * D, v + i * D);
}

/* Head g's row of `slot` (K: which = 0, V: 1) as f32: a pointer into the cache for f32, else
 * widened / dequantized into buf[head_dim]. */
static const float *load_row(const struct hy_kv_cache *kv, int which, int32_t layer, int64_t slot, int32_t g,
                             float *buf)
{
    const int64_t D = kv->head_dim, off = (slot * kv->n_kv_heads + g) * D;
    const void *base = which ? kv->v[layer] : kv->k[layer];
    if (kv->dtype == HY_DTYPE_F32)
        return (const float *)base + off;
    if (kv->dtype == HY_DTYPE_BF16) {
        const uint16_t *s = (const uint16_t *)base + off;
        for (int64_t i = 0; i < D; i++)
            buf[i] = hy_bf16_to_f32(s[i]);
        return buf;
    }
    const uint8_t *s = (const uint8_t *)base + off;
    const float sc = which ? hy_kv_cache_v_scale(kv, layer, slot, g) : hy_kv_cache_k_scale(kv, layer, slot, g);
    for (int64_t i = 0; i < D; i++)
        buf[i] = hy_e4m3_to_f32(s[i]) * sc;
    return buf;
}

/* Scalar reference attention (three passes: scores, softmax, weighted V sum), the oracle. */
void hy_ref_attend(const struct hy_kv_cache *kv, int32_t layer, const float *q, int32_t n_heads,
                   const int32_t *block_table, int32_t n_ctx, float *scores, float *out)
{
    const int64_t D = kv->head_dim;
    const int32_t group = n_heads / kv->n_kv_heads, bs = kv->block_size;
    const float scale = 1.0f / sqrtf((float)D);
    float rowbuf[512];
    float *tmp = D <= 512 ? rowbuf : malloc((size_t)D * sizeof(float));
    for (int32_t h = 0; h < n_heads; h++) {
        const int32_t g = h / group;
        const float *qh = q + h * D;
        float *oh = out + h * D;
        float mx = -INFINITY;
        for (int32_t j = 0; j < n_ctx; j++) {
            int64_t slot = (int64_t)block_table[j / bs] * bs + j % bs;
            const float *kr = load_row(kv, 0, layer, slot, g, tmp);
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
            const float *vr = load_row(kv, 1, layer, slot, g, tmp);
            const float p = scores[j] * inv;
            for (int64_t d = 0; d < D; d++)
                oh[d] += p * vr[d];
        }
    }
    if (tmp != rowbuf)
        free(tmp);
}

void hy_kv_cache_attend(const struct hy_kv_cache *kv, int32_t layer, const float *q, int32_t n_heads,
                        const int32_t *block_table, int32_t n_ctx, float *scores, float *out)
{
    hy_kernels_active()->attend(kv, layer, q, n_heads, block_table, n_ctx, scores, out);
}

void hy_kv_cache_attend_multi(const struct hy_kv_cache *kv, int32_t layer, const float *q, int32_t n_q,
                              int32_t n_heads, const int32_t *block_table, int32_t n_ctx0, float *scores,
                              float *out)
{
    const int64_t qs = (int64_t)n_heads * kv->head_dim;
#if defined(__x86_64__)
    if (hy_kernels_active()->attend == hy_avx2_attend) {
        hy_avx2_attend_multi(kv, layer, q, n_q, n_heads, block_table, n_ctx0, scores, out);
        return;
    }
#endif
    for (int32_t i = 0; i < n_q; i++)
        hy_kernels_active()->attend(kv, layer, q + i * qs, n_heads, block_table, n_ctx0 + i, scores, out + i * qs);
}
