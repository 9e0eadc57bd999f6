/* kv_cache.h - paged KV cache storage: per layer, n_blocks blocks of block_size token slots.
 *
 * Layout per layer: K and V arrays of [n_blocks * block_size, n_kv_heads, head_dim] elements
 * (f32 in float32 compute mode, bf16 in bfloat16 mode). A token's slot is
 * block_id * block_size + offset; sequences address their tokens through a block table
 * (block_table[pos / block_size]) and writes go through a slot_mapping (one slot per batch token).
 * The cache holds post-QK-norm, post-RoPE K and raw V (spec §2). It knows nothing about which
 * request owns which block; that bookkeeping belongs to the caller / scheduler.
 */
#ifndef HY_CACHE_KV_CACHE_H
#define HY_CACHE_KV_CACHE_H

#include "quant/dtype.h"

#include <stddef.h>
#include <stdint.h>

struct hy_kv_cache {
    int32_t       n_layers;     /* main layers + MTP layers */
    int32_t       n_kv_heads;
    int32_t       head_dim;
    int32_t       block_size;   /* tokens per block */
    int32_t       n_blocks;
    enum hy_dtype dtype;        /* HY_DTYPE_F32 or HY_DTYPE_BF16 */
    void        **k;            /* [n_layers] -> [n_blocks*block_size, n_kv_heads, head_dim] */
    void        **v;
};

/* Allocates a zeroed cache. Returns 0, or -1 with hy_err_msg() (bad sizes, out of memory with the
 * byte count). Free with hy_kv_cache_free. */
int hy_kv_cache_init(struct hy_kv_cache *kv, int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                     int32_t block_size, int32_t n_blocks, enum hy_dtype dtype);
void hy_kv_cache_free(struct hy_kv_cache *kv);

/* Bytes the cache needs for these sizes (for budgeting). */
size_t hy_kv_cache_bytes(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t block_size,
                         int32_t n_blocks, enum hy_dtype dtype);

/* Stores k[n_kv_heads*head_dim] and v[...] (f32) of one token into `slot` of `layer`. */
void hy_kv_cache_write(struct hy_kv_cache *kv, int32_t layer, int64_t slot, const float *k, const float *v);

/* Causal attention of one query token over its sequence's first n_ctx cached tokens:
 * q[n_heads, head_dim] (f32), out[n_heads, head_dim]; query head h reads KV head h / (n_heads /
 * n_kv_heads) (GQA, spec §2.4); scale = head_dim^-0.5; softmax in fp32; tokens addressed through
 * block_table. scores[n_ctx] is scratch. Fixed summation order over positions 0..n_ctx-1. */
void hy_kv_cache_attend(const struct hy_kv_cache *kv, int32_t layer, const float *q, int32_t n_heads,
                        const int32_t *block_table, int32_t n_ctx, float *scores, float *out);

#endif
