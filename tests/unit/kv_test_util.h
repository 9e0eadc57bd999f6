/* kv_test_util.h - shorthands for tests that fill a paged KV cache and run attention kernels on it. */
#ifndef HY_TEST_KV_TEST_UTIL_H
#define HY_TEST_KV_TEST_UTIL_H

#include "cache/kv_cache.h"
#include "kernels/attention.h"

/* A pointer to the view of layer l of cache kv (a compound literal: valid in the enclosing block). */
#define KV_VIEW(kv, l) (&(struct hy_kv_view[1]){hy_kv_cache_view((kv), (l))}[0])

/* One token's k, v rows (f32, [n_kv_heads, head_dim]) into slot of layer. */
static inline void kv_write(struct hy_kv_cache *kv, int32_t layer, int64_t slot, const float *k, const float *v)
{
    const struct hy_kv_view w = hy_kv_cache_view(kv, layer);
    hy_kv_write(&w, slot, k, v);
}

#endif
