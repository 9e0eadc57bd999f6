/* kv_cache.h - paged KV cache storage: per layer, n_blocks blocks of block_size token slots.
 *
 * Layout per layer: K and V arrays of [n_blocks * block_size, n_kv_heads, head_dim] elements
 * (f32, bf16 or FP8 E4M3FN; f32 in float32 compute mode and bf16 in bfloat16 mode unless
 * --kv-cache-dtype says otherwise). A token's slot is block_id * block_size + offset; sequences
 * address their tokens through a block table (block_table[pos / block_size]) and writes go through
 * a slot_mapping (one slot per batch token). The cache holds post-QK-norm, post-RoPE K and raw V
 * (spec §2). It knows nothing about which request owns which block; that bookkeeping belongs to
 * the caller / scheduler. Writes and attention are kernels (kernels/attention.h) over the view of
 * one layer that hy_kv_cache_view fills.
 *
 * FP8 (HY_DTYPE_F8_E4M3, spec §5.3 "C8"): element = e4m3(x / s), value = e4m3_to_f32(byte) * s.
 *  - K: dynamic scale per (token, kv_head), kept in f32 next to the cache in
 *    k_scale[layer][slot * n_kv_heads + head]: by default the least-squared-error fit of
 *    kernels/fp8_scale.h (searched from s0 = amax(|k[head_dim]|) / 448; never a larger error than
 *    s0), or s0 itself when the rule given to hy_kv_cache_init_ex is amax (default:
 *    HYINFER_KV_FP8_SCALE, base/env.h).
 *  - V: a static per-kv-head scale (checkpoint `self_attn.v_cache.scale`) for layers given one at
 *    init (v_static[layer][head]; elements saturate to +-448), else dynamic per (token, kv_head)
 *    like K, in v_scale[layer][slot * n_kv_heads + head].
 *  A row whose amax is 0 (or whose amax / 448 underflows to 0) gets scale 0 under either rule and
 *  zero bytes, so it dequantizes to exact zeros, never NaN/inf. Scales are pure functions of the token's own row, so
 *  fp32-mode batch/chunk invariance holds with FP8 too. The attention kernels read the bytes and
 *  scales directly (no dequantized copy of the cache).
 */
#ifndef HY_CACHE_KV_CACHE_H
#define HY_CACHE_KV_CACHE_H

#include "kernels/kv_view.h"
#include "quant/dtype.h"

#include <stddef.h>
#include <stdint.h>

struct hy_kv_cache {
    int32_t n_layers; /* main layers + MTP layers */
    int32_t n_kv_heads;
    int32_t head_dim;
    int32_t v_dim;      /* V row width per head: head_dim, except in an MLA cache (hy_kv_cache_init_mla) */
    int32_t block_size; /* tokens per block */
    int32_t n_blocks;
    enum hy_dtype dtype; /* HY_DTYPE_F32, HY_DTYPE_BF16 or HY_DTYPE_F8_E4M3 */
    void **k;            /* [n_layers] -> [n_blocks*block_size, n_kv_heads, head_dim] */
    void **v;            /* [n_layers] -> [n_blocks*block_size, n_kv_heads, v_dim], or NULL (MLA layer without one) */
    /* FP8 only (all NULL otherwise); every pointer owned by the cache. */
    float **k_scale;  /* [n_layers] -> [n_blocks*block_size, n_kv_heads] f32 multipliers */
    float **v_scale;  /* [n_layers] -> same, dynamic V; NULL entry where v_static is set */
    float **v_static; /* [n_layers] -> NULL or [n_kv_heads] static V multipliers (> 0) */
    int scale_fit;    /* FP8: 1 = dynamic scales by the least-squares fit (kernels/fp8_scale.h,
                                   the default), 0 = amax / 448 (HYINFER_KV_FP8_SCALE=amax) */
    int32_t dist_id;  /* multi-rank jobs: the id the workers know this cache by (engine/executor.h) */
};

/* Allocates a zeroed cache of dtype F32, BF16 or F8_E4M3 (FP8 with dynamic V scales in every
 * layer). Returns 0, or -1 with hy_err_msg() (bad sizes or dtype, out of memory with the byte
 * count). Free with hy_kv_cache_free. */
int hy_kv_cache_init(struct hy_kv_cache *kv, int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t block_size,
                     int32_t n_blocks, enum hy_dtype dtype);

/* The same; for F8_E4M3, v_static (may be NULL) is [n_layers] -> NULL (dynamic V in that layer)
 * or [n_kv_heads] static V scales, copied; each must be finite and > 0, else -1 naming the layer
 * and head; scale_fit is the dynamic scale rule: 1 = least-squares fit, 0 = amax / 448, < 0 = the
 * process default (HYINFER_KV_FP8_SCALE, base/env.h). Both ignored for F32 / BF16. */
int hy_kv_cache_init_ex(struct hy_kv_cache *kv, int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                        int32_t block_size, int32_t n_blocks, enum hy_dtype dtype, const float *const *v_static,
                        int scale_fit);
void hy_kv_cache_free(struct hy_kv_cache *kv);

/* An MLA cache (hy_v4, spec hy4_architecture.md §8): per layer one K row of k_dim elements per slot (the
 * normalised latent then the rope key, n_kv_heads = 1) and, where has_v[layer] is 1, one V row of v_dim
 * elements (the indexer key of a `full` layer; v[layer] is NULL elsewhere). dtype F32 or BF16 (no FP8
 * for MLA yet: -1 naming it). Returns 0, or -1 with hy_err_msg() (bad sizes, out of memory). Free with
 * hy_kv_cache_free. */
int hy_kv_cache_init_mla(struct hy_kv_cache *kv, int32_t n_layers, int32_t k_dim, int32_t v_dim, const uint8_t *has_v,
                         int32_t block_size, int32_t n_blocks, enum hy_dtype dtype);

/* Bytes one token slot takes in such a cache: n_layers * k_dim + n_v_layers * v_dim elements. */
size_t hy_kv_cache_token_bytes_mla(int32_t n_layers, int32_t k_dim, int32_t n_v_layers, int32_t v_dim,
                                   enum hy_dtype dtype);

/* Bytes one token slot takes over all n_layers: K + V elements, plus for F8_E4M3 the f32 K scales
 * and the f32 dynamic V scales of the (n_layers - n_static_v_layers) layers without a static one. */
size_t hy_kv_cache_token_bytes(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, enum hy_dtype dtype,
                               int32_t n_static_v_layers);

/* Bytes the cache needs for these sizes (for budgeting): n_blocks * block_size token slots
 * (hy_kv_cache_token_bytes with every V scale dynamic for FP8). */
size_t hy_kv_cache_bytes(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t block_size, int32_t n_blocks,
                         enum hy_dtype dtype);

/* --kv-cache-dtype / model_config.kv_cache_dtype values (vLLM's names): NULL or "auto" ->
 * HY_DTYPE_UNKNOWN (the compute dtype: f32 in float32 mode, bf16 in bfloat16 mode); "bf16" |
 * "bfloat16" -> BF16; "fp8" | "fp8_e4m3" -> F8_E4M3; "fp32" | "float32" -> F32. Anything else
 * (e.g. vLLM's "fp8_e5m2") returns -1 with hy_err_msg() naming the value and the choices. */
int hy_kv_dtype_parse(const char *s, enum hy_dtype *out);

/* "fp32", "bf16", "fp8_e4m3", or "auto" for HY_DTYPE_UNKNOWN. */
const char *hy_kv_dtype_name(enum hy_dtype dt);

/* The view of `layer` (0 <= layer < n_layers) that the kernels read and write (kernels/kv_view.h,
 * kernels/attention.h: hy_kv_write*, hy_attend*). Points into the cache; valid until it is freed. */
struct hy_kv_view hy_kv_cache_view(const struct hy_kv_cache *kv, int32_t layer);

#endif
