#include "cache/kv_cache.h"

#include "base/err.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t hy_kv_cache_bytes(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t block_size,
                         int32_t n_blocks, enum hy_dtype dtype)
{
    return 2 * (size_t)n_layers * (size_t)n_blocks * (size_t)block_size * (size_t)n_kv_heads *
           (size_t)head_dim * hy_dtype_size(dtype);
}

int hy_kv_cache_init(struct hy_kv_cache *kv, int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                     int32_t block_size, int32_t n_blocks, enum hy_dtype dtype)
{
    memset(kv, 0, sizeof(*kv));
    if (n_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0 || block_size <= 0 || n_blocks <= 0 ||
        (dtype != HY_DTYPE_F32 && dtype != HY_DTYPE_BF16))
        return hy_err_set("kv cache: invalid geometry (layers %d, kv heads %d, head_dim %d, block_size %d, "
                          "blocks %d)", n_layers, n_kv_heads, head_dim, block_size, n_blocks);
    kv->n_layers = n_layers;
    kv->n_kv_heads = n_kv_heads;
    kv->head_dim = head_dim;
    kv->block_size = block_size;
    kv->n_blocks = n_blocks;
    kv->dtype = dtype;
    size_t per = hy_kv_cache_bytes(1, n_kv_heads, head_dim, block_size, n_blocks, dtype) / 2;
    kv->k = calloc((size_t)n_layers, sizeof(void *));
    kv->v = calloc((size_t)n_layers, sizeof(void *));
    if (!kv->k || !kv->v)
        goto oom;
    for (int32_t l = 0; l < n_layers; l++) {
        kv->k[l] = calloc(1, per);
        kv->v[l] = calloc(1, per);
        if (!kv->k[l] || !kv->v[l])
            goto oom;
    }
    return 0;
oom:
    hy_kv_cache_free(kv);
    return hy_err_set("kv cache: out of memory allocating %zu bytes",
                      hy_kv_cache_bytes(n_layers, n_kv_heads, head_dim, block_size, n_blocks, dtype));
}

void hy_kv_cache_free(struct hy_kv_cache *kv)
{
    for (int32_t l = 0; l < kv->n_layers; l++) {
        if (kv->k)
            free(kv->k[l]);
        if (kv->v)
            free(kv->v[l]);
    }
    free(kv->k);
    free(kv->v);
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

void hy_kv_cache_write(struct hy_kv_cache *kv, int32_t layer, int64_t slot, const float *k, const float *v)
{
    int64_t row = (int64_t)kv->n_kv_heads * kv->head_dim;
    store_row(kv->k[layer], kv->dtype, slot * row, k, row);
    store_row(kv->v[layer], kv->dtype, slot * row, v, row);
}

/* Reads head_dim elements at element offset off as f32 (a pointer into the cache for f32). */
static const float *load_row(const void *base, enum hy_dtype dt, int64_t off, int64_t n, float *buf)
{
    if (dt == HY_DTYPE_F32)
        return (const float *)base + off;
    const uint16_t *s = (const uint16_t *)base + off;
    for (int64_t i = 0; i < n; i++)
        buf[i] = hy_bf16_to_f32(s[i]);
    return buf;
}

void hy_kv_cache_attend(const struct hy_kv_cache *kv, int32_t layer, const float *q, int32_t n_heads,
                        const int32_t *block_table, int32_t n_ctx, float *scores, float *out)
{
    const int64_t D = kv->head_dim, row = (int64_t)kv->n_kv_heads * D;
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
            const float *kr = load_row(kv->k[layer], kv->dtype, slot * row + g * D, D, tmp);
            scores[j] = hy_dot_f32(qh, kr, D) * scale;
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
            const float *vr = load_row(kv->v[layer], kv->dtype, slot * row + g * D, D, tmp);
            const float p = scores[j] * inv;
            for (int64_t d = 0; d < D; d++)
                oh[d] += p * vr[d];
        }
    }
    if (tmp != rowbuf)
        free(tmp);
}
