/* block_pool.c - ref counts, the free queue in eviction order, the prefix-cache hash map. */
#include "cache/block_pool.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

/* 64x64 -> 128-bit multiply folded to 64 bits (the wyhash mixing step). */
static uint64_t mum(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

uint64_t hy_block_hash(uint64_t parent_hash, const int32_t *tokens, int32_t n)
{
    const uint64_t k0 = 0xa0761d6478bd642fULL, k1 = 0xe7037ed1a0b428dbULL, k2 = 0x8ebc6af09c88c6e3ULL;
    uint64_t h = mum(parent_hash ^ k0, k1 ^ (uint64_t)n);
    int32_t i = 0;
    for (; i + 1 < n; i += 2) {
        uint64_t w = (uint64_t)(uint32_t)tokens[i] | (uint64_t)(uint32_t)tokens[i + 1] << 32;
        h = mum(h ^ w ^ k2, k1 ^ (h >> 29));
    }
    if (i < n)
        h = mum(h ^ (uint64_t)(uint32_t)tokens[i] ^ k0, k2);
    h = mum(h ^ k1, k0 ^ (uint64_t)i);
    return h ? h : 1;
}

int hy_block_pool_init(struct hy_block_pool *p, int32_t n_blocks, int32_t block_size)
{
    memset(p, 0, sizeof(*p));
    if (n_blocks < 1 || block_size < 1 || (int64_t)n_blocks * block_size > INT32_MAX)
        return hy_err_set("block pool: bad sizes n_blocks=%d block_size=%d", n_blocks, block_size);
    p->n_buckets = 16;
    while (p->n_buckets < 2u * (uint32_t)n_blocks)
        p->n_buckets *= 2;
    p->blocks = calloc((size_t)n_blocks, sizeof(*p->blocks));
    p->tokens = malloc((size_t)n_blocks * (size_t)block_size * sizeof(int32_t));
    p->buckets = malloc(p->n_buckets * sizeof(int32_t));
    if (!p->blocks || !p->tokens || !p->buckets) {
        hy_block_pool_free(p);
        return hy_err_set("block pool: out of memory (%d blocks)", n_blocks);
    }
    p->n_blocks = n_blocks;
    p->block_size = block_size;
    for (uint32_t b = 0; b < p->n_buckets; b++)
        p->buckets[b] = -1;
    for (int32_t i = 0; i < n_blocks; i++) {
        p->blocks[i].prev = i - 1;
        p->blocks[i].next = i + 1 < n_blocks ? i + 1 : -1;
        p->blocks[i].hnext = -1;
    }
    p->free_head = 0;
    p->free_tail = n_blocks - 1;
    p->n_free = n_blocks;
    return 0;
}

void hy_block_pool_free(struct hy_block_pool *p)
{
    free(p->blocks);
    free(p->tokens);
    free(p->buckets);
    memset(p, 0, sizeof(*p));
}

static void queue_remove(struct hy_block_pool *p, int32_t id)
{
    struct hy_block *b = &p->blocks[id];
    if (b->prev >= 0)
        p->blocks[b->prev].next = b->next;
    else
        p->free_head = b->next;
    if (b->next >= 0)
        p->blocks[b->next].prev = b->prev;
    else
        p->free_tail = b->prev;
    b->prev = b->next = -1;
    p->n_free--;
}

static void queue_append(struct hy_block_pool *p, int32_t id)
{
    struct hy_block *b = &p->blocks[id];
    b->prev = p->free_tail;
    b->next = -1;
    if (p->free_tail >= 0)
        p->blocks[p->free_tail].next = id;
    else
        p->free_head = id;
    p->free_tail = id;
    p->n_free++;
}

static uint32_t bucket_of(const struct hy_block_pool *p, uint64_t hash)
{
    return (uint32_t)(hash ^ (hash >> 32)) & (p->n_buckets - 1);
}

/* Drops a block's hash from the map. */
static void uncache(struct hy_block_pool *p, int32_t id)
{
    struct hy_block *b = &p->blocks[id];
    int32_t *link = &p->buckets[bucket_of(p, b->hash)];
    while (*link != id)
        link = &p->blocks[*link].hnext;
    *link = b->hnext;
    b->hnext = -1;
    b->has_hash = 0;
    b->gen++;
    p->n_cached--;
    p->n_evictions++;
}

int hy_block_pool_alloc(struct hy_block_pool *p, int32_t n, int32_t *out)
{
    if (n < 0 || n > p->n_free)
        return -1;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = p->free_head;
        queue_remove(p, id);
        if (p->blocks[id].has_hash)
            uncache(p, id);
        p->blocks[id].ref_cnt = 1;
        out[i] = id;
    }
    return 0;
}

int hy_block_pool_alloc_class(struct hy_block_pool *p, int32_t n, int32_t *out, int32_t classes, int32_t cls)
{
    if (n < 1 || n > p->n_free || classes <= 1)
        return hy_block_pool_alloc(p, n, out);
    int32_t id = p->free_head;
    while (id >= 0 && id % classes != cls)
        id = p->blocks[id].next;
    if (id < 0)
        return hy_block_pool_alloc(p, n, out);
    queue_remove(p, id);
    if (p->blocks[id].has_hash)
        uncache(p, id);
    p->blocks[id].ref_cnt = 1;
    out[0] = id;
    return hy_block_pool_alloc(p, n - 1, out + 1);
}

void hy_block_pool_release(struct hy_block_pool *p, const int32_t *ids, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        struct hy_block *b = &p->blocks[ids[i]];
        if (b->ref_cnt > 0 && --b->ref_cnt == 0)
            queue_append(p, ids[i]);
    }
}

void hy_block_pool_touch(struct hy_block_pool *p, int32_t id)
{
    if (p->blocks[id].ref_cnt++ == 0)
        queue_remove(p, id);
}

/* 1 if cached block b sits on parent_id (-1 = none) as currently cached. */
static int parent_ok(const struct hy_block_pool *p, const struct hy_block *b, int32_t parent_id)
{
    if (b->parent_id != parent_id)
        return 0;
    return parent_id < 0 || (p->blocks[parent_id].has_hash && p->blocks[parent_id].gen == b->parent_gen);
}

static int same_tokens(const struct hy_block_pool *p, int32_t id, const int32_t *tokens)
{
    return !memcmp(p->tokens + (size_t)id * p->block_size, tokens, (size_t)p->block_size * sizeof(int32_t));
}

/* The block registered under hash, or -1. */
static int32_t find_hash(const struct hy_block_pool *p, uint64_t hash)
{
    for (int32_t id = p->buckets[bucket_of(p, hash)]; id >= 0; id = p->blocks[id].hnext)
        if (p->blocks[id].hash == hash)
            return id;
    return -1;
}

int32_t hy_block_pool_lookup(const struct hy_block_pool *p, uint64_t hash, int32_t parent_id, const int32_t *tokens)
{
    int32_t id = find_hash(p, hash);
    if (id < 0 || !parent_ok(p, &p->blocks[id], parent_id) || !same_tokens(p, id, tokens))
        return -1; /* a miss, or a collision: the map holds one block per hash */
    return id;
}

int32_t hy_block_pool_cache(struct hy_block_pool *p, int32_t id, uint64_t hash, int32_t parent_id, uint32_t parent_gen,
                            const int32_t *tokens)
{
    const struct hy_block *pb = parent_id >= 0 ? &p->blocks[parent_id] : NULL;
    if (pb && (!pb->has_hash || pb->gen != parent_gen))
        return -1;
    int32_t old = find_hash(p, hash);
    if (old >= 0)
        return hy_block_pool_lookup(p, hash, parent_id, tokens);
    struct hy_block *b = &p->blocks[id];
    if (b->has_hash)
        return -1; /* cached under another hash: a caller bug, keep the map consistent */
    uint32_t bk = bucket_of(p, hash);
    memcpy(p->tokens + (size_t)id * p->block_size, tokens, (size_t)p->block_size * sizeof(int32_t));
    b->hash = hash;
    b->parent_id = parent_id;
    b->parent_gen = parent_gen;
    b->has_hash = 1;
    b->hnext = p->buckets[bk];
    p->buckets[bk] = id;
    p->n_cached++;
    return id;
}

int32_t hy_block_pool_num_used(const struct hy_block_pool *p)
{
    return p->n_blocks - p->n_free;
}
