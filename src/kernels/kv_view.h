/* kv_view.h - what the attention kernels see of one layer of the paged KV cache.
 *
 * The cache (cache/kv_cache.h) owns the storage and fills a view per layer (hy_kv_cache_view);
 * the kernels read and write through the view and never include cache/. Layout (as the cache's):
 * K and V arrays of [n_slots, n_kv_heads, head_dim] elements of `dtype` (F32, BF16 or F8_E4M3); a
 * token's slot is block_table[pos / block_size] * block_size + pos % block_size.
 *
 * FP8 (F8_E4M3): element = e4m3(x / s), value = e4m3_to_f32(byte) * s, with
 *  - K: a dynamic scale per (slot, kv head) in k_scale[slot * n_kv_heads + head];
 *  - V: the static per-kv-head scale v_static[head] when v_static is set, else dynamic like K in
 *    v_scale[slot * n_kv_heads + head].
 * Dynamic scales are the least-squares fit of kernels/fp8_scale.h (scale_fit = 1) or amax / 448
 * (scale_fit = 0). Nothing here is owned by the view. */
#ifndef HY_KERNELS_KV_VIEW_H
#define HY_KERNELS_KV_VIEW_H

#include "quant/dtype.h"

#include <stdint.h>

struct hy_kv_view {
    int32_t n_kv_heads;
    int32_t head_dim;
    int32_t v_dim;       /* V row width per head (= head_dim except MLA caches: cache/kv_cache.h) */
    int32_t block_size;  /* tokens per block */
    enum hy_dtype dtype; /* HY_DTYPE_F32, HY_DTYPE_BF16 or HY_DTYPE_F8_E4M3 */
    void *k;             /* [n_slots, n_kv_heads, head_dim] */
    void *v;
    float *k_scale;        /* FP8: [n_slots * n_kv_heads] f32 multipliers; else NULL */
    float *v_scale;        /* FP8 with dynamic V: the same for V; else NULL */
    const float *v_static; /* FP8 with static V: [n_kv_heads] multipliers (> 0); else NULL */
    int scale_fit;         /* FP8: 1 = dynamic scales by the least-squares fit, 0 = amax / 448 */
};

/* FP8 scale multipliers of (slot, kv head g): K and V. Only for F8_E4M3 views. */
static inline float hy_kv_view_k_scale(const struct hy_kv_view *kv, int64_t slot, int32_t g)
{
    return kv->k_scale[slot * kv->n_kv_heads + g];
}

static inline float hy_kv_view_v_scale(const struct hy_kv_view *kv, int64_t slot, int32_t g)
{
    return kv->v_static ? kv->v_static[g] : kv->v_scale[slot * kv->n_kv_heads + g];
}

#endif
