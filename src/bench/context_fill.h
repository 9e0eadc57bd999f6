/* context_fill.h - a synthetic KV context for decode benches (bench latency --context-fill synthetic).
 *
 * Decode at a long context costs what its attention reads and computes; the values in the cache do not change
 * that (top-k selection, softmax and the P.V product do the same work whatever the keys). Filling the rows
 * directly measures decode at 32k tokens without the untimed prefill that would otherwise take hours on a
 * small machine. The next-token logits of such a context are meaningless; only timings are. */
#ifndef HY_BENCH_CONTEXT_FILL_H
#define HY_BENCH_CONTEXT_FILL_H

#include "cache/kv_cache.h"

#include <stdint.h>

/* Writes pseudo-random values (uniform in [-2, 2), from seed) into every layer's K row and, where the layer has
 * one, V row at each of slots[0..n) (n >= 0, each slot < n_blocks * block_size, not checked): F32 / BF16 as
 * stored; F8_E4M3 as e4m3 bytes with scale 1 (dynamic scales set; static V scales left as they are).
 * Threads split the slots (OpenMP); the values depend on (seed, layer, slot) only. */
void hy_bench_fill_context(struct hy_kv_cache *kv, const int64_t *slots, int64_t n, uint64_t seed);

#endif
