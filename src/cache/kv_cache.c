#include "cache/kv_cache.h"

#include "base/env.h"
#include "base/err.h"

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

size_t hy_kv_cache_bytes(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t block_size, int32_t n_blocks,
                         enum hy_dtype dtype)
{
    return hy_kv_cache_token_bytes(n_layers, n_kv_heads, head_dim, dtype, 0) * (size_t)n_blocks * (size_t)block_size;
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
                          "fp32 or float32)",
                          s);
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

int hy_kv_cache_init(struct hy_kv_cache *kv, int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t block_size,
                     int32_t n_blocks, enum hy_dtype dtype)
{
    return hy_kv_cache_init_ex(kv, n_layers, n_kv_heads, head_dim, block_size, n_blocks, dtype, NULL, -1);
}

int hy_kv_cache_init_ex(struct hy_kv_cache *kv, int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                        int32_t block_size, int32_t n_blocks, enum hy_dtype dtype, const float *const *v_static,
                        int scale_fit)
{
    memset(kv, 0, sizeof(*kv));
    if (n_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0 || block_size <= 0 || n_blocks <= 0 ||
        (dtype != HY_DTYPE_F32 && dtype != HY_DTYPE_BF16 && dtype != HY_DTYPE_F8_E4M3))
        return hy_err_set("kv cache: invalid geometry (layers %d, kv heads %d, head_dim %d, block_size %d, "
                          "blocks %d, dtype %s)",
                          n_layers, n_kv_heads, head_dim, block_size, n_blocks, hy_dtype_name(dtype));
    const int fp8 = dtype == HY_DTYPE_F8_E4M3;
    kv->scale_fit = fp8 ? (scale_fit < 0 ? hy_env_params()->kv_fp8_scale_fit : scale_fit != 0) : 0;
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
    kv->v_dim = head_dim;
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

size_t hy_kv_cache_token_bytes_mla(int32_t n_layers, int32_t k_dim, int32_t n_v_layers, int32_t v_dim,
                                   enum hy_dtype dtype)
{
    return ((size_t)n_layers * (size_t)k_dim + (size_t)n_v_layers * (size_t)v_dim) * hy_dtype_size(dtype);
}

int hy_kv_cache_init_mla(struct hy_kv_cache *kv, int32_t n_layers, int32_t k_dim, int32_t v_dim, const uint8_t *has_v,
                         int32_t block_size, int32_t n_blocks, enum hy_dtype dtype)
{
    memset(kv, 0, sizeof(*kv));
    if (dtype == HY_DTYPE_F8_E4M3)
        return hy_err_set("kv cache: an fp8 KV cache is not implemented for MLA (hy_v4) models yet; use "
                          "--kv-cache-dtype auto, bf16 or fp32");
    if (n_layers <= 0 || k_dim <= 0 || v_dim < 0 || block_size <= 0 || n_blocks <= 0 ||
        (dtype != HY_DTYPE_F32 && dtype != HY_DTYPE_BF16))
        return hy_err_set("kv cache: invalid MLA geometry (layers %d, k_dim %d, v_dim %d, block_size %d, blocks %d, "
                          "dtype %s)",
                          n_layers, k_dim, v_dim, block_size, n_blocks, hy_dtype_name(dtype));
    kv->n_layers = n_layers;
    kv->n_kv_heads = 1;
    kv->head_dim = k_dim;
    kv->v_dim = v_dim;
    kv->block_size = block_size;
    kv->n_blocks = n_blocks;
    kv->dtype = dtype;
    const size_t slots = (size_t)n_blocks * (size_t)block_size, es = hy_dtype_size(dtype);
    kv->k = calloc((size_t)n_layers, sizeof(void *));
    kv->v = calloc((size_t)n_layers, sizeof(void *));
    if (!kv->k || !kv->v)
        goto oom;
    for (int32_t l = 0; l < n_layers; l++) {
        if (!(kv->k[l] = calloc(slots, (size_t)k_dim * es)))
            goto oom;
        if (has_v && has_v[l] && v_dim > 0 && !(kv->v[l] = calloc(slots, (size_t)v_dim * es)))
            goto oom;
    }
    return 0;
oom:
    hy_kv_cache_free(kv);
    return hy_err_set("kv cache: out of memory allocating %zu bytes",
                      hy_kv_cache_token_bytes_mla(n_layers, k_dim, n_layers, v_dim, dtype) * slots);
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

struct hy_kv_view hy_kv_cache_view(const struct hy_kv_cache *kv, int32_t layer)
{
    struct hy_kv_view v = {
        .n_kv_heads = kv->n_kv_heads,
        .head_dim = kv->head_dim,
        .v_dim = kv->v_dim,
        .block_size = kv->block_size,
        .dtype = kv->dtype,
        .k = kv->k[layer],
        .v = kv->v[layer],
        .k_scale = kv->k_scale ? kv->k_scale[layer] : NULL,
        .v_scale = kv->v_scale ? kv->v_scale[layer] : NULL,
        .v_static = kv->v_static ? kv->v_static[layer] : NULL,
        .scale_fit = kv->scale_fit,
    };
    return v;
}
