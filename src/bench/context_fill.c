/* context_fill.c - the synthetic KV context of bench latency (context_fill.h). */
#include "bench/context_fill.h"

#include "quant/formats.h"

/* splitmix64 of (seed, layer, slot, element): reproducible whatever the thread split. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void fill_row(enum hy_dtype dt, void *base, int64_t slot, int64_t w, uint64_t key)
{
    for (int64_t i = 0; i < w; i++) {
        const float x = (float)((double)(mix64(key + (uint64_t)i) >> 11) * 0x1p-53 * 4.0 - 2.0);
        const int64_t at = slot * w + i;
        if (dt == HY_DTYPE_F32)
            ((float *)base)[at] = x;
        else if (dt == HY_DTYPE_BF16)
            ((uint16_t *)base)[at] = hy_f32_to_bf16(x);
        else
            ((uint8_t *)base)[at] = hy_f32_to_e4m3(x);
    }
}

void hy_bench_fill_context(struct hy_kv_cache *kv, const int64_t *slots, int64_t n, uint64_t seed)
{
    const int64_t wk = (int64_t)kv->n_kv_heads * kv->head_dim, wv = (int64_t)kv->n_kv_heads * kv->v_dim;
    for (int32_t L = 0; L < kv->n_layers; L++) {
#pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < n; j++) {
            const int64_t s = slots[j];
            const uint64_t key = mix64(seed ^ mix64(((uint64_t)L << 40) ^ (uint64_t)s));
            fill_row(kv->dtype, kv->k[L], s, wk, key);
            if (kv->v[L])
                fill_row(kv->dtype, kv->v[L], s, wv, key ^ 0x5555555555555555ull);
            for (int32_t g = 0; g < kv->n_kv_heads && kv->dtype == HY_DTYPE_F8_E4M3; g++) {
                kv->k_scale[L][s * kv->n_kv_heads + g] = 1.0f;
                if (kv->v_scale && kv->v_scale[L])
                    kv->v_scale[L][s * kv->n_kv_heads + g] = 1.0f;
            }
        }
    }
}
