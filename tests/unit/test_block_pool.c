/* test_block_pool.c - block pool: alloc/free, LRU eviction order, prefix-cache hash hits and
 * misses (incl. collisions caught by the token check), ref counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cache/block_pool.h"

#define BS 4

static void test_alloc_all_or_nothing(void **state)
{
    (void)state;
    struct hy_block_pool p;
    int32_t ids[8];
    assert_int_equal(hy_block_pool_init(&p, 6, BS), 0);
    assert_int_equal(hy_block_pool_alloc(&p, 4, ids), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(ids[i], i); /* initial queue order */
    assert_int_equal(hy_block_pool_num_used(&p), 4);
    assert_int_equal(hy_block_pool_alloc(&p, 3, ids + 4), -1); /* only 2 free: nothing taken */
    assert_int_equal(p.n_free, 2);
    assert_int_equal(hy_block_pool_alloc(&p, 2, ids + 4), 0);
    assert_int_equal(hy_block_pool_num_used(&p), 6);
    assert_int_equal(hy_block_pool_alloc(&p, 1, ids + 6), -1);
    hy_block_pool_release(&p, ids, 6);
    assert_int_equal(hy_block_pool_num_used(&p), 0);
    hy_block_pool_free(&p);
    assert_int_equal(hy_block_pool_init(&p, 0, BS), -1);
}

/* The first block of a class allocation has id % classes == cls (the first such in queue order),
 * the rest come from the head; with none of the class free it behaves as hy_block_pool_alloc. */
static void test_alloc_class(void **state)
{
    (void)state;
    struct hy_block_pool p;
    int32_t ids[8];
    assert_int_equal(hy_block_pool_init(&p, 6, BS), 0);
    assert_int_equal(hy_block_pool_alloc_class(&p, 3, ids, 4, 3), 0);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 0);
    assert_int_equal(ids[2], 1);
    assert_int_equal(hy_block_pool_alloc_class(&p, 1, ids + 3, 4, 3), 0); /* no id = 3 mod 4 left: the head */
    assert_int_equal(ids[3], 2);
    assert_int_equal(hy_block_pool_alloc_class(&p, 3, ids + 4, 2, 1), -1); /* 2 free: nothing taken */
    assert_int_equal(p.n_free, 2);
    assert_int_equal(hy_block_pool_alloc_class(&p, 2, ids + 4, 2, 1), 0);
    assert_int_equal(ids[4], 5);
    assert_int_equal(ids[5], 4);
    hy_block_pool_release(&p, ids, 6);
    assert_int_equal(hy_block_pool_num_used(&p), 0);
    hy_block_pool_free(&p);
}

static void test_lru_order(void **state)
{
    (void)state;
    struct hy_block_pool p;
    int32_t ids[4], again[4];
    assert_int_equal(hy_block_pool_init(&p, 4, BS), 0);
    assert_int_equal(hy_block_pool_alloc(&p, 4, ids), 0);
    /* free in the order 2, 0, 3, 1: the next allocations must come back in that order */
    int32_t order[4] = {2, 0, 3, 1};
    for (int i = 0; i < 4; i++)
        hy_block_pool_release(&p, &order[i], 1);
    assert_int_equal(p.free_head, 2);
    assert_int_equal(p.free_tail, 1);
    assert_int_equal(hy_block_pool_alloc(&p, 4, again), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(again[i], order[i]);
    hy_block_pool_free(&p);
}

static void test_hash_hit_miss_evict(void **state)
{
    (void)state;
    struct hy_block_pool p;
    int32_t a[BS] = {1, 2, 3, 4}, b[BS] = {1, 2, 3, 5};
    int32_t ids[3];
    assert_int_equal(hy_block_pool_init(&p, 3, BS), 0);
    uint64_t ha = hy_block_hash(0, a, BS), hb = hy_block_hash(0, b, BS);
    assert_true(ha != hb);
    assert_true(hy_block_hash(ha, a, BS) != ha); /* the parent matters */
    assert_true(hy_block_hash(ha, a, BS) != hy_block_hash(hb, a, BS));
    assert_int_equal(hy_block_pool_alloc(&p, 1, ids), 0);
    assert_int_equal(hy_block_pool_lookup(&p, ha, -1, a), -1);
    assert_int_equal(hy_block_pool_cache(&p, ids[0], ha, -1, 0, a), ids[0]);
    assert_int_equal(p.n_cached, 1);
    assert_int_equal(hy_block_pool_lookup(&p, ha, -1, a), ids[0]);
    assert_int_equal(hy_block_pool_lookup(&p, hb, -1, b), -1);
    assert_int_equal(hy_block_pool_lookup(&p, ha, -1, b), -1); /* same hash, other tokens: collision */
    assert_int_equal(hy_block_pool_lookup(&p, ha, 2, a), -1);  /* other parent */
    /* a duplicate registration under the same hash returns the cached block, leaves its own */
    assert_int_equal(hy_block_pool_alloc(&p, 1, ids + 1), 0);
    assert_int_equal(hy_block_pool_cache(&p, ids[1], ha, -1, 0, a), ids[0]);
    assert_int_equal(hy_block_pool_cache(&p, ids[1], ha, -1, 0, b), -1); /* collision */
    assert_int_equal(p.n_cached, 1);
    assert_false(p.blocks[ids[1]].has_hash);
    /* freed cached block stays findable; touching it takes it back from the free queue */
    hy_block_pool_release(&p, ids, 1);
    assert_int_equal(hy_block_pool_lookup(&p, ha, -1, a), ids[0]);
    int32_t n_free = p.n_free;
    hy_block_pool_touch(&p, ids[0]);
    assert_int_equal(p.n_free, n_free - 1);
    assert_int_equal(p.blocks[ids[0]].ref_cnt, 1);
    hy_block_pool_release(&p, ids, 1);
    /* free queue now: block 2 (never used), then block 0 (cached): allocating 2 evicts it */
    assert_int_equal(hy_block_pool_alloc(&p, 1, ids + 2), 0);
    assert_int_equal(ids[2], 2);
    assert_int_equal(hy_block_pool_lookup(&p, ha, -1, a), ids[0]);
    int32_t x;
    assert_int_equal(hy_block_pool_alloc(&p, 1, &x), 0);
    assert_int_equal(x, ids[0]);
    assert_int_equal(hy_block_pool_lookup(&p, ha, -1, a), -1);
    assert_int_equal(p.n_cached, 0);
    assert_int_equal(p.n_evictions, 1);
    hy_block_pool_free(&p);
}

static void test_refcount(void **state)
{
    (void)state;
    struct hy_block_pool p;
    int32_t id, t[BS] = {9, 9, 9, 9};
    assert_int_equal(hy_block_pool_init(&p, 2, BS), 0);
    assert_int_equal(hy_block_pool_alloc(&p, 1, &id), 0);
    uint64_t h = hy_block_hash(0, t, BS);
    hy_block_pool_cache(&p, id, h, -1, 0, t);
    hy_block_pool_touch(&p, hy_block_pool_lookup(&p, h, -1, t)); /* a second sequence shares it */
    assert_int_equal(p.blocks[id].ref_cnt, 2);
    hy_block_pool_release(&p, &id, 1);
    assert_int_equal(hy_block_pool_num_used(&p), 1); /* still held */
    int32_t other[2];
    assert_int_equal(hy_block_pool_alloc(&p, 2, other), -1); /* a shared block is never evicted */
    hy_block_pool_release(&p, &id, 1);
    assert_int_equal(hy_block_pool_num_used(&p), 0);
    hy_block_pool_release(&p, &id, 1); /* extra release is ignored */
    assert_int_equal(p.n_free, 2);
    hy_block_pool_free(&p);
}

/* A child is found only under the very parent it was registered with: after the parent block is
 * evicted and reused for other content, even a forced hash collision does not reach the child. */
static void test_chain_survives_collisions(void **state)
{
    (void)state;
    struct hy_block_pool p;
    int32_t a[BS] = {1, 2, 3, 4}, b[BS] = {5, 6, 7, 8}, c[BS] = {9, 9, 9, 9};
    int32_t ids[2], x;
    assert_int_equal(hy_block_pool_init(&p, 2, BS), 0);
    assert_int_equal(hy_block_pool_alloc(&p, 2, ids), 0);
    uint64_t h0 = hy_block_hash(0, a, BS), h1 = hy_block_hash(h0, c, BS);
    assert_int_equal(hy_block_pool_cache(&p, ids[0], h0, -1, 0, a), ids[0]);
    uint32_t g = p.blocks[ids[0]].gen;
    assert_int_equal(hy_block_pool_cache(&p, ids[1], h1, ids[0], g, c), ids[1]);
    assert_int_equal(hy_block_pool_lookup(&p, h1, ids[0], c), ids[1]);
    /* free the parent first, the child stays held; the parent is evicted and re-cached as b */
    hy_block_pool_release(&p, ids, 1);
    assert_int_equal(hy_block_pool_alloc(&p, 1, &x), 0);
    assert_int_equal(x, ids[0]);
    uint64_t hb = hy_block_hash(0, b, BS);
    assert_int_equal(hy_block_pool_cache(&p, x, hb, -1, 0, b), x);
    assert_int_equal(hy_block_pool_lookup(&p, hb, -1, b), x);
    /* same parent id, same child tokens, the child's hash forced: still a miss */
    assert_int_equal(hy_block_pool_lookup(&p, h1, x, c), -1);
    /* registering under a parent seen in an older generation is refused */
    assert_int_equal(hy_block_pool_cache(&p, ids[1], h1 + 1, x, g, c), -1);
    hy_block_pool_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_all_or_nothing),      cmocka_unit_test(test_lru_order),
        cmocka_unit_test(test_hash_hit_miss_evict),       cmocka_unit_test(test_refcount),
        cmocka_unit_test(test_chain_survives_collisions), cmocka_unit_test(test_alloc_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
