/* block_pool.h - bookkeeping of the paged KV cache's blocks: reference counts, a free queue in
 * eviction order and a hash map for prefix caching (vLLM v1 BlockPool; DESIGN.md §2).
 *
 * Blocks are numbered 0..n_blocks-1 and their ids never change, so block tables are append-only.
 * A block with ref_cnt 0 sits in the free queue (a doubly-linked list, head = least recently
 * freed = next to be evicted). A full block may carry a hash (chained over the whole prefix, see
 * hy_block_hash) and then stays findable in the hash map while it waits in the free queue; it is
 * evicted (hash dropped) only when hy_block_pool_alloc reuses it. The pool holds no KV data.
 */
#ifndef HY_CACHE_BLOCK_POOL_H
#define HY_CACHE_BLOCK_POOL_H

#include <stddef.h>
#include <stdint.h>

struct hy_block {
    int32_t  ref_cnt;     /* sequences using the block; 0 = in the free queue */
    int32_t  prev, next;  /* free queue links (-1 = none) */
    int32_t  hnext;       /* next block in the same hash bucket (-1 = none) */
    int      has_hash;    /* registered in the hash map */
    uint64_t hash;        /* chained hash of the prefix ending with this block */
    uint64_t parent_hash; /* hash of the previous block (0 for the first) */
};

struct hy_block_pool {
    int32_t          n_blocks;
    int32_t          block_size;  /* tokens per block */
    struct hy_block *blocks;      /* [n_blocks] */
    int32_t         *tokens;      /* [n_blocks * block_size] token ids of hashed blocks (verification) */
    int32_t          free_head, free_tail;
    int32_t          n_free;      /* blocks in the free queue (ref_cnt 0, cached or not) */
    int32_t         *buckets;     /* [n_buckets] first block of each hash bucket (-1 = empty) */
    uint32_t         n_buckets;   /* power of two */
    int32_t          n_cached;    /* blocks with a hash */
    uint64_t         n_evictions; /* cached blocks whose hash was dropped on reuse */
};

/* Chained block hash: a strong 64-bit mix of parent_hash (0 for the first block) and the
 * n token ids of the block. Never returns 0. */
uint64_t hy_block_hash(uint64_t parent_hash, const int32_t *tokens, int32_t n);

/* Creates a pool of n_blocks (>= 1) blocks of block_size (>= 1) tokens; all free, queue order
 * 0..n_blocks-1. Returns 0, or -1 with hy_err_msg() (bad sizes, out of memory). */
int hy_block_pool_init(struct hy_block_pool *p, int32_t n_blocks, int32_t block_size);
void hy_block_pool_free(struct hy_block_pool *p);

/* Takes n blocks from the head of the free queue (evicting their hashes), ref_cnt 1 each, ids
 * into out[n]. All or nothing: returns 0, or -1 (no error message) when fewer than n are free. */
int hy_block_pool_alloc(struct hy_block_pool *p, int32_t n, int32_t *out);

/* Drops one reference from each of ids[n] in order; a block reaching 0 goes to the tail of the
 * free queue (keeping its hash, so it can still be hit until evicted). */
void hy_block_pool_release(struct hy_block_pool *p, const int32_t *ids, int32_t n);

/* Adds a reference to a block found by lookup (taking it out of the free queue if it was there). */
void hy_block_pool_touch(struct hy_block_pool *p, int32_t id);

/* Finds the cached block for (hash, parent_hash, tokens[block_size]); the stored token ids and
 * parent hash are compared so a hash collision is a miss. Returns its id, or -1. */
int32_t hy_block_pool_lookup(const struct hy_block_pool *p, uint64_t hash, uint64_t parent_hash,
                             const int32_t *tokens);

/* Registers a full, referenced block under hash (tokens[block_size] are copied). No-op if the
 * block already has a hash or another block is registered under the same hash (a duplicate). */
void hy_block_pool_cache(struct hy_block_pool *p, int32_t id, uint64_t hash, uint64_t parent_hash,
                         const int32_t *tokens);

/* Blocks in use (ref_cnt > 0). */
int32_t hy_block_pool_num_used(const struct hy_block_pool *p);

#endif
