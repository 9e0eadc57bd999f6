/* block_pool.h - bookkeeping of the paged KV cache's blocks: reference counts, a free queue in
 * eviction order and a hash map for prefix caching (vLLM v1 BlockPool; DESIGN.md §2).
 *
 * Blocks are numbered 0..n_blocks-1 and their ids never change, so block tables are append-only.
 * A block with ref_cnt 0 sits in the free queue (a doubly-linked list, head = least recently
 * freed = next to be evicted). A full block may carry a hash (chained over the whole prefix, see
 * hy_block_hash) and then stays findable in the hash map while it waits in the free queue; it is
 * evicted (hash dropped) only when hy_block_pool_alloc reuses it. The pool holds no KV data.
 *
 * A hit never rests on the hash alone: a cached block records its token ids and its parent
 * (block id + that block's generation, bumped at every eviction), and a lookup walks the chain
 * from the first block, so a hit at block k means the whole k-block prefix is identical, even
 * if someone crafts 64-bit hash collisions (token ids come from users).
 */
#ifndef HY_CACHE_BLOCK_POOL_H
#define HY_CACHE_BLOCK_POOL_H

#include <stddef.h>
#include <stdint.h>

struct hy_block {
    int32_t ref_cnt;     /* sequences using the block; 0 = in the free queue */
    int32_t prev, next;  /* free queue links (-1 = none) */
    int32_t hnext;       /* next block in the same hash bucket (-1 = none) */
    int has_hash;        /* registered in the hash map */
    uint64_t hash;       /* chained hash of the prefix ending with this block */
    uint32_t gen;        /* bumped each time the block's hash is dropped */
    int32_t parent_id;   /* cached block before this one in its prefix (-1 for the first) */
    uint32_t parent_gen; /* parent's gen when this block was registered */
};

struct hy_block_pool {
    int32_t n_blocks;
    int32_t block_size;      /* tokens per block */
    struct hy_block *blocks; /* [n_blocks] */
    int32_t *tokens;         /* [n_blocks * block_size] ids of cached blocks (verify hits) */
    int32_t free_head, free_tail;
    int32_t n_free;       /* blocks in the free queue (ref_cnt 0, cached or not) */
    int32_t *buckets;     /* [n_buckets] first block of each hash bucket (-1 = empty) */
    uint32_t n_buckets;   /* power of two */
    int32_t n_cached;     /* blocks with a hash */
    uint64_t n_evictions; /* cached blocks whose hash was dropped on reuse */
};

/* Chained block hash: a 64-bit mix of parent_hash (0 for the first block) and the n token ids
 * of the block (an index for the map; hits are verified, see above). Never returns 0. */
uint64_t hy_block_hash(uint64_t parent_hash, const int32_t *tokens, int32_t n);

/* Creates a pool of n_blocks (>= 1) blocks of block_size (>= 1) tokens; all free, queue order
 * 0..n_blocks-1. Returns 0, or -1 with hy_err_msg() (bad sizes, out of memory). */
int hy_block_pool_init(struct hy_block_pool *p, int32_t n_blocks, int32_t block_size);
void hy_block_pool_free(struct hy_block_pool *p);

/* Takes n blocks from the head of the free queue (evicting their hashes), ref_cnt 1 each, ids
 * into out[n]. All or nothing: returns 0, or -1 (no error message) when fewer than n are free. */
int hy_block_pool_alloc(struct hy_block_pool *p, int32_t n, int32_t *out);

/* hy_block_pool_alloc whose first block has id % classes == cls (the first such block in eviction
 * order; the head of the queue when none is free). The attention-DP groups of a multi-rank job
 * own a sequence by its first block id (model/shard.h), so this places a new sequence in group cls. */
int hy_block_pool_alloc_class(struct hy_block_pool *p, int32_t n, int32_t *out, int32_t classes, int32_t cls);

/* Drops one reference from each of ids[n] in order; a block reaching 0 goes to the tail of the
 * free queue (keeping its hash, so it can still be hit until evicted). */
void hy_block_pool_release(struct hy_block_pool *p, const int32_t *ids, int32_t n);

/* Adds a reference to a block found by lookup (taking it out of the free queue if it was there). */
void hy_block_pool_touch(struct hy_block_pool *p, int32_t id);

/* Finds the cached block with this hash whose parent is the cached block parent_id (-1: a first
 * block) in its current generation and whose token ids equal tokens[block_size]. Returns its id,
 * or -1 (also on a hash collision). */
int32_t hy_block_pool_lookup(const struct hy_block_pool *p, uint64_t hash, int32_t parent_id, const int32_t *tokens);

/* Registers full block id (referenced) under hash as the child of cached block parent_id (-1 for
 * a first block) seen in generation parent_gen; tokens[block_size] are copied. Returns the
 * canonical cached block for this (parent, tokens): id itself, or the block already registered
 * for the same content (id is then left uncached, a duplicate). Returns -1 (nothing registered)
 * when the parent is no longer cached in that generation or another content holds the hash. */
int32_t hy_block_pool_cache(struct hy_block_pool *p, int32_t id, uint64_t hash, int32_t parent_id, uint32_t parent_gen,
                            const int32_t *tokens);

/* Blocks in use (ref_cnt > 0). */
int32_t hy_block_pool_num_used(const struct hy_block_pool *p);

#endif
