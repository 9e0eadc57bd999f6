/* test_scheduler.c - the scheduler without a model: token budget, chunked prefill, decode-first
 * order, FIFO admission under max_num_seqs, prefix-cache reuse, preemption of the newest request
 * and its recompute. A "step" here is schedule + update + one fake token per sampled request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sched/scheduler.h"

#include <string.h>

#define BS 4

struct fixture {
    struct hy_block_pool pool;
    struct hy_scheduler s;
};

static void setup_fx(struct fixture *f, int32_t n_blocks, int32_t max_seqs, int32_t budget, int prefix)
{
    struct hy_sched_config c = {max_seqs, budget, prefix, 16, 1, 0, 0};
    assert_int_equal(hy_block_pool_init(&f->pool, n_blocks, BS), 0);
    assert_int_equal(hy_scheduler_init(&f->s, &c, &f->pool, 64), 0);
}

static void teardown_fx(struct fixture *f)
{
    hy_scheduler_free(&f->s);
    hy_block_pool_free(&f->pool);
}

static struct hy_request *mk(uint64_t id, int32_t n_prompt, int32_t first)
{
    int32_t ids[256];
    for (int32_t i = 0; i < n_prompt; i++)
        ids[i] = first + i;
    struct hy_request *r = hy_request_create(id, ids, n_prompt, 256, BS);
    assert_non_null(r);
    return r;
}

/* One step: returns the plan (copied into out[] as {id, n_tokens}) and appends token 1000 to
 * each request that got logits. */
static int32_t step(struct fixture *f, uint64_t *ids, int32_t *ns)
{
    const struct hy_sched_plan *p = hy_scheduler_schedule(&f->s);
    int32_t n = p->n;
    for (int32_t i = 0; i < n; i++) {
        ids[i] = p->entries[i].req->id;
        ns[i] = p->entries[i].n_tokens;
    }
    hy_scheduler_update(&f->s, p);
    for (int32_t i = 0; i < n; i++)
        if (p->entries[i].wants_logits)
            assert_int_equal(hy_request_append(p->entries[i].req, 1000), 0);
    return n;
}

/* Attention-DP groups (dp_groups 3): each new request's first block lands in the group (id mod 3) with
 * the fewest running requests, so three requests fill three groups and a fourth goes to the group
 * whose request has finished. */
static void test_dp_groups_balance(void **state)
{
    (void)state;
    struct fixture f;
    uint64_t ids[8];
    int32_t ns[8];
    struct hy_sched_config c = {4, 64, 0, 16, 3, 0, 0};
    assert_int_equal(hy_block_pool_init(&f.pool, 30, BS), 0);
    assert_int_equal(hy_scheduler_init(&f.s, &c, &f.pool, 64), 0);
    struct hy_request *r[4];
    for (int i = 0; i < 3; i++) {
        r[i] = mk((uint64_t)i + 1, 9, 100 * i); /* 3 blocks each: ids in queue order would give 0, 3, 6 */
        assert_int_equal(hy_scheduler_add(&f.s, r[i]), 0);
    }
    assert_int_equal(step(&f, ids, ns), 3);
    int seen[3] = {0};
    for (int i = 0; i < 3; i++)
        seen[r[i]->blocks[0] % 3]++;
    assert_int_equal(seen[0], 1);
    assert_int_equal(seen[1], 1);
    assert_int_equal(seen[2], 1);
    const int32_t freed = r[1]->blocks[0] % 3;
    hy_scheduler_finish(&f.s, r[1]);
    r[3] = mk(4, 5, 400);
    assert_int_equal(hy_scheduler_add(&f.s, r[3]), 0);
    step(&f, ids, ns);
    assert_int_equal(r[3]->blocks[0] % 3, freed);
    hy_scheduler_finish(&f.s, r[0]);
    hy_scheduler_finish(&f.s, r[2]);
    hy_scheduler_finish(&f.s, r[3]);
    hy_request_free(r[0]);
    hy_request_free(r[1]);
    hy_request_free(r[2]);
    hy_request_free(r[3]);
    teardown_fx(&f);
}

static void test_chunked_prefill_and_budget(void **state)
{
    (void)state;
    struct fixture f;
    uint64_t ids[8];
    int32_t ns[8];
    setup_fx(&f, 32, 4, 8, 0);
    struct hy_request *r = mk(1, 20, 0);
    assert_int_equal(hy_scheduler_add(&f.s, r), 0);
    assert_int_equal(step(&f, ids, ns), 1);
    assert_int_equal(ns[0], 8);
    assert_int_equal(r->n_computed, 8);
    assert_int_equal(r->n_blocks, 2);
    assert_int_equal(r->n_tokens, 20); /* no logits yet */
    step(&f, ids, ns);
    assert_int_equal(ns[0], 8);
    step(&f, ids, ns);
    assert_int_equal(ns[0], 4);
    assert_int_equal(r->n_tokens, 21); /* sampled after the last chunk */
    step(&f, ids, ns);
    assert_int_equal(ns[0], 1); /* decode */
    assert_int_equal(r->n_computed, 21);
    assert_int_equal(r->n_blocks, 6);
    assert_int_equal(f.s.stats.prompt_chunks, 3);
    hy_scheduler_finish(&f.s, r);
    assert_int_equal(hy_block_pool_num_used(&f.pool), 0);
    hy_request_free(r);
    teardown_fx(&f);
}

static void test_decode_first_then_prefill(void **state)
{
    (void)state;
    struct fixture f;
    uint64_t ids[8];
    int32_t ns[8];
    setup_fx(&f, 64, 4, 6, 0);
    struct hy_request *a = mk(1, 3, 0), *b = mk(2, 30, 100);
    hy_scheduler_add(&f.s, a);
    hy_scheduler_add(&f.s, b);
    assert_int_equal(step(&f, ids, ns), 2); /* a: 3 tokens, b: the 3 left of the budget */
    assert_int_equal(ids[0], 1);
    assert_int_equal(ns[0], 3);
    assert_int_equal(ids[1], 2);
    assert_int_equal(ns[1], 3);
    /* a decodes (1 token), b gets the rest of the budget */
    assert_int_equal(step(&f, ids, ns), 2);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ns[0], 1);
    assert_int_equal(ids[1], 2);
    assert_int_equal(ns[1], 5);
    /* b takes the whole budget while it prefills: c waits */
    hy_scheduler_finish(&f.s, a);
    struct hy_request *c = mk(3, 2, 200);
    hy_scheduler_add(&f.s, c);
    assert_int_equal(step(&f, ids, ns), 1);
    assert_int_equal(ns[0], 6);
    assert_int_equal(c->status, HY_REQ_WAITING);
    hy_scheduler_finish(&f.s, b);
    hy_scheduler_finish(&f.s, c);
    hy_request_free(a);
    hy_request_free(b);
    hy_request_free(c);
    teardown_fx(&f);
}

static void test_admission_fifo_max_seqs(void **state)
{
    (void)state;
    struct fixture f;
    uint64_t ids[8];
    int32_t ns[8];
    struct hy_request *r[4];
    setup_fx(&f, 64, 2, 100, 0);
    for (int i = 0; i < 4; i++) {
        r[i] = mk((uint64_t)i + 1, 5, 10 * i);
        assert_int_equal(hy_scheduler_add(&f.s, r[i]), 0);
    }
    assert_int_equal(step(&f, ids, ns), 2);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 2);
    assert_int_equal(f.s.n_waiting, 2);
    hy_scheduler_finish(&f.s, r[1]);
    assert_int_equal(step(&f, ids, ns), 2); /* decode of 1, prefill of 3 (FIFO) */
    assert_int_equal(ids[1], 3);
    assert_int_equal(r[3]->status, HY_REQ_WAITING);
    hy_scheduler_finish(&f.s, r[3]); /* abort while waiting */
    assert_int_equal(f.s.n_waiting, 0);
    for (int i = 0; i < 4; i++) {
        hy_scheduler_finish(&f.s, r[i]);
        hy_request_free(r[i]);
    }
    assert_int_equal(hy_block_pool_num_used(&f.pool), 0);
    teardown_fx(&f);
    /* waiting queue bound */
    setup_fx(&f, 8, 1, 8, 0);
    struct hy_request *q[17];
    for (int i = 0; i < 17; i++) {
        q[i] = mk((uint64_t)i, 1, 0);
        assert_int_equal(hy_scheduler_add(&f.s, q[i]), i < 16 ? 0 : -1);
    }
    for (int i = 0; i < 17; i++)
        hy_request_free(q[i]);
    teardown_fx(&f);
}

static void test_prefix_reuse(void **state)
{
    (void)state;
    struct fixture f;
    uint64_t ids[8];
    int32_t ns[8];
    setup_fx(&f, 32, 4, 64, 1);
    struct hy_request *a = mk(1, 12, 0);
    hy_scheduler_add(&f.s, a);
    step(&f, ids, ns);
    assert_int_equal(f.pool.n_cached, 3); /* 12 tokens = 3 full blocks registered */
    assert_int_equal(f.s.stats.prefix_hits, 0);
    /* same prompt while a still runs: 2 blocks shared (the last token is always recomputed) */
    struct hy_request *b = mk(2, 12, 0);
    hy_scheduler_add(&f.s, b);
    step(&f, ids, ns);
    assert_int_equal(ids[1], 2);
    assert_int_equal(ns[1], 4);
    assert_int_equal(b->blocks[0], a->blocks[0]);
    assert_int_equal(b->blocks[1], a->blocks[1]);
    assert_true(b->blocks[2] != a->blocks[2]);
    assert_int_equal(f.pool.blocks[a->blocks[0]].ref_cnt, 2);
    assert_int_equal(f.s.stats.prefix_hits, 8);
    assert_int_equal(f.s.stats.prefix_queries, 24);
    /* a shared first block, then a different suffix: one block hit */
    struct hy_request *c = mk(3, 10, 0);
    c->tokens[4] = 77;
    hy_scheduler_add(&f.s, c);
    step(&f, ids, ns);
    assert_int_equal(c->n_blocks, 3);
    assert_int_equal(c->blocks[0], a->blocks[0]);
    assert_int_equal(ns[2], 6);
    assert_int_equal(f.s.stats.prefix_hits, 12);
    /* after all finish, the cached blocks survive in the free queue and hit again */
    hy_scheduler_finish(&f.s, a);
    hy_scheduler_finish(&f.s, b);
    hy_scheduler_finish(&f.s, c);
    assert_int_equal(hy_block_pool_num_used(&f.pool), 0);
    struct hy_request *d = mk(4, 13, 0);
    hy_scheduler_add(&f.s, d);
    step(&f, ids, ns);
    assert_int_equal(ns[0], 1);
    assert_int_equal(d->blocks[2], a->blocks[2]);
    hy_scheduler_finish(&f.s, d);
    hy_request_free(a);
    hy_request_free(b);
    hy_request_free(c);
    hy_request_free(d);
    teardown_fx(&f);
}

static void test_preempt_newest_and_recompute(void **state)
{
    (void)state;
    struct fixture f;
    uint64_t ids[8];
    int32_t ns[8];
    setup_fx(&f, 6, 4, 64, 0); /* 24 token slots */
    struct hy_request *a = mk(1, 8, 0), *b = mk(2, 8, 100);
    hy_scheduler_add(&f.s, a);
    hy_scheduler_add(&f.s, b);
    step(&f, ids, ns); /* both prefilled: 4 blocks used */
    assert_int_equal(hy_block_pool_num_used(&f.pool), 4);
    step(&f, ids, ns); /* both need a 3rd block: 6 used */
    for (int i = 0; i < 3; i++)
        step(&f, ids, ns);
    assert_int_equal(a->n_tokens, 13);
    assert_int_equal(f.s.stats.num_preemptions, 0);
    /* position 12 needs a 4th block each: only one fits, b (newest) is preempted */
    assert_int_equal(step(&f, ids, ns), 1);
    assert_int_equal(ids[0], 1);
    assert_int_equal(f.s.stats.num_preemptions, 1);
    assert_int_equal(b->status, HY_REQ_WAITING);
    assert_int_equal(b->n_computed, 0);
    assert_int_equal(b->n_blocks, 0);
    assert_int_equal(b->n_tokens, 13); /* its outputs are kept */
    assert_int_equal(f.s.waiting[0], b);
    assert_int_equal(hy_block_pool_num_used(&f.pool), 4);
    /* when a finishes, b is recomputed (prompt + outputs) in one chunk and samples again */
    hy_scheduler_finish(&f.s, a);
    assert_int_equal(step(&f, ids, ns), 1);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ns[0], 13);
    assert_int_equal(b->n_tokens, 14);
    /* the newest is also the victim when it is the one asking: only c can run alone */
    hy_scheduler_finish(&f.s, b);
    teardown_fx(&f);
    setup_fx(&f, 4, 4, 64, 0);
    struct hy_request *c = mk(3, 7, 0), *d = mk(4, 7, 50);
    hy_scheduler_add(&f.s, c);
    hy_scheduler_add(&f.s, d);
    assert_int_equal(step(&f, ids, ns), 2);
    assert_int_equal(step(&f, ids, ns), 2); /* position 7: still block 1 */
    assert_int_equal(step(&f, ids, ns), 1); /* position 8 needs a block each: d preempted */
    assert_int_equal(ids[0], 3);
    assert_int_equal(d->n_preemptions, 1);
    assert_int_equal(f.s.n_running, 1);
    /* no admission in a step that preempted; the next step admits d only if blocks allow */
    assert_int_equal(step(&f, ids, ns), 1);
    assert_int_equal(ids[0], 3);
    hy_scheduler_finish(&f.s, c);
    hy_scheduler_finish(&f.s, d);
    assert_int_equal(hy_block_pool_num_used(&f.pool), 0);
    hy_request_free(a);
    hy_request_free(b);
    hy_request_free(c);
    hy_request_free(d);
    teardown_fx(&f);
}

/* Two requests admitted in the same step compute the same first blocks; the second's duplicates
 * stay uncached, and its own later block is chained to the first's cached blocks, so a third
 * request with the second's prompt hits all three blocks. */
static void test_prefix_duplicates_then_diverge(void **state)
{
    (void)state;
    struct fixture f;
    uint64_t ids[8];
    int32_t ns[8];
    setup_fx(&f, 32, 4, 64, 1);
    struct hy_request *a = mk(1, 13, 0), *b = mk(2, 13, 0);
    b->tokens[9] = 99; /* blocks 0, 1 equal, block 2 differs */
    hy_scheduler_add(&f.s, a);
    hy_scheduler_add(&f.s, b);
    assert_int_equal(step(&f, ids, ns), 2);
    assert_int_equal(f.s.stats.prefix_hits, 0);
    assert_int_equal(f.pool.n_cached, 4); /* a's 3 blocks + b's block 2 */
    assert_false(f.pool.blocks[b->blocks[0]].has_hash);
    assert_true(f.pool.blocks[b->blocks[2]].has_hash);
    struct hy_request *c = mk(3, 14, 0);
    memcpy(c->tokens, b->tokens, 13 * sizeof(int32_t));
    hy_scheduler_add(&f.s, c);
    step(&f, ids, ns);
    assert_int_equal(f.s.stats.prefix_hits, 12);
    assert_int_equal(c->blocks[0], a->blocks[0]);
    assert_int_equal(c->blocks[2], b->blocks[2]);
    hy_scheduler_finish(&f.s, a);
    hy_scheduler_finish(&f.s, b);
    hy_scheduler_finish(&f.s, c);
    hy_request_free(a);
    hy_request_free(b);
    hy_request_free(c);
    teardown_fx(&f);
}

static uint32_t rng = 1;
static uint32_t rnd(uint32_t n)
{
    rng = rng * 1664525u + 1013904223u;
    return (rng >> 8) % n;
}

/* Block bookkeeping invariants after a step: ref counts equal table memberships, the free queue
 * holds exactly the unreferenced blocks, a block shared by two tables is a registered prefix
 * block holding the same tokens in both, tables cover the computed tokens. */
static void check_invariants(struct fixture *f)
{
    const struct hy_block_pool *p = &f->pool;
    int32_t refs[64] = {0};
    for (int32_t i = 0; i < f->s.n_running; i++) {
        const struct hy_request *r = f->s.running[i];
        assert_true(r->n_blocks * BS >= r->n_computed);
        assert_true(r->n_computed <= r->n_tokens);
        for (int32_t k = 0; k < r->n_blocks; k++)
            refs[r->blocks[k]]++;
        for (int32_t k = 0; k < r->n_cached_blocks; k++) {
            const struct hy_block *b = &p->blocks[r->blocks[k]];
            if (b->has_hash)
                assert_memory_equal(p->tokens + (size_t)r->blocks[k] * BS, r->tokens + k * BS, BS * sizeof(int32_t));
        }
    }
    for (int32_t i = 0; i < f->s.n_waiting; i++)
        assert_int_equal(f->s.waiting[i]->n_blocks, 0);
    int32_t n_free = 0;
    for (int32_t id = p->free_head; id >= 0; id = p->blocks[id].next) {
        assert_int_equal(p->blocks[id].ref_cnt, 0);
        n_free++;
    }
    assert_int_equal(n_free, p->n_free);
    for (int32_t id = 0; id < p->n_blocks; id++) {
        assert_int_equal(p->blocks[id].ref_cnt, refs[id]);
        if (refs[id] > 1)
            assert_true(p->blocks[id].has_hash);
    }
}

/* Random traffic (shared prefixes, aborts) on a small pool: invariants hold every step, every
 * request finishes, all blocks come back. */
static void test_random_traffic(void **state)
{
    (void)state;
    for (int prefix = 0; prefix < 2; prefix++) {
        struct fixture f;
        setup_fx(&f, 12, 4, 7, prefix);
        struct hy_request *reqs[40];
        int32_t target[40];
        int n_done = 0, n_added = 0;
        uint64_t ids[8];
        int32_t ns[8];
        for (int steps = 0; n_done < 40; steps++) {
            assert_true(steps < 5000);
            while (n_added < 40 && f.s.n_waiting < 3 && rnd(2)) {
                int32_t n = 1 + (int32_t)rnd(20), toks[32];
                for (int32_t i = 0; i < n; i++)
                    toks[i] = i < 8 ? (int32_t)rnd(2) : (int32_t)rnd(50); /* common prefixes */
                reqs[n_added] = hy_request_create((uint64_t)n_added, toks, n, 48, BS);
                target[n_added] = n + 1 + (int32_t)rnd(20);
                assert_int_equal(hy_scheduler_add(&f.s, reqs[n_added]), 0);
                n_added++;
            }
            int32_t np = step(&f, ids, ns);
            int32_t total = 0;
            for (int32_t i = 0; i < np; i++)
                total += ns[i];
            assert_true(total <= 7);
            check_invariants(&f);
            for (int i = 0; i < n_added; i++) {
                struct hy_request *r = reqs[i];
                if (!r || r->status == HY_REQ_FINISHED)
                    continue;
                if (r->n_tokens >= target[i] || rnd(100) == 0) { /* done or aborted */
                    hy_scheduler_finish(&f.s, r);
                    hy_request_free(r);
                    reqs[i] = NULL;
                    n_done++;
                }
            }
            check_invariants(&f);
        }
        assert_int_equal(hy_block_pool_num_used(&f.pool), 0);
        if (prefix)
            assert_true(f.s.stats.prefix_hits > 0);
        assert_true(f.s.stats.num_preemptions > 0);
        teardown_fx(&f);
    }
}

/* Drafts: a decode step schedules the last token plus the drafts, blocks cover the lookahead, rejected
 * rows do not count as computed, drafts that overflow the budget are dropped, preemption clears them,
 * and a prefix hit gives back its last block when drop_last_hit_block is set. */
static void test_spec_drafts(void **state)
{
    (void)state;
    struct fixture f;
    struct hy_sched_config c = {2, 4, 1, 16, 1, 3, 1};
    assert_int_equal(hy_block_pool_init(&f.pool, 16, BS), 0);
    assert_int_equal(hy_scheduler_init(&f.s, &c, &f.pool, 64), 0);
    struct hy_request *a = mk(1, 4, 10);
    assert_int_equal(hy_scheduler_add(&f.s, a), 0);
    const struct hy_sched_plan *p = hy_scheduler_schedule(&f.s);
    assert_int_equal(p->n, 1);
    assert_int_equal(p->entries[0].n_tokens, 4);
    assert_int_equal(a->n_blocks, 2); /* 4 tokens + 3 lookahead slots */
    hy_scheduler_update(&f.s, p);
    assert_int_equal(hy_request_append(a, 1000), 0); /* 5 known, 4 computed */
    a->drafts[0] = 7, a->drafts[1] = 8, a->drafts[2] = 9, a->n_drafts = 3;
    p = hy_scheduler_schedule(&f.s);
    assert_int_equal(p->entries[0].n_tokens, 4); /* last token + 3 drafts = the whole budget */
    assert_int_equal(p->entries[0].n_drafts, 3);
    assert_true(p->entries[0].wants_logits);
    assert_int_equal(a->n_blocks, 3); /* positions up to 4 + 4 + 3 - 1 */
    hy_scheduler_reject(&f.s, 0, 2);  /* draft 1 accepted, 2 and 3 rejected */
    hy_scheduler_update(&f.s, p);
    assert_int_equal(a->n_computed, 6);
    assert_int_equal(a->n_drafts, 0);
    assert_int_equal(hy_request_append(a, 7), 0);
    assert_int_equal(hy_request_append(a, 1001), 0); /* 7 known, 6 computed */
    /* more drafts than the budget holds: the last ones are dropped; the waiting request gets nothing */
    struct hy_request *b = mk(2, 2, 50);
    assert_int_equal(hy_scheduler_add(&f.s, b), 0);
    for (int i = 0; i < 5; i++)
        a->drafts[i] = i + 1;
    a->n_drafts = 5;
    p = hy_scheduler_schedule(&f.s);
    assert_int_equal(p->n, 1);
    assert_int_equal(p->entries[0].req, a);
    assert_int_equal(p->entries[0].n_tokens, 4);
    assert_int_equal(p->entries[0].n_drafts, 3);
    hy_scheduler_update(&f.s, p); /* nothing rejected: all rows count */
    assert_int_equal(a->n_computed, 10);
    hy_scheduler_finish(&f.s, a);
    hy_scheduler_finish(&f.s, b);
    hy_request_free(a);
    hy_request_free(b);
    /* prefix hit of 2 full blocks gives back the last one */
    struct hy_request *d = mk(3, 9, 10), *e = mk(4, 9, 10);
    assert_int_equal(hy_scheduler_add(&f.s, d), 0);
    while (d->n_computed < 9) {
        p = hy_scheduler_schedule(&f.s);
        hy_scheduler_update(&f.s, p);
    }
    hy_scheduler_finish(&f.s, d);
    assert_int_equal(hy_scheduler_add(&f.s, e), 0);
    p = hy_scheduler_schedule(&f.s);
    assert_int_equal(p->entries[0].start, 4); /* block 0 hit; block 1 recomputed */
    hy_scheduler_update(&f.s, p);
    hy_scheduler_finish(&f.s, e);
    hy_request_free(d);
    hy_request_free(e);
    teardown_fx(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunked_prefill_and_budget),
        cmocka_unit_test(test_decode_first_then_prefill),
        cmocka_unit_test(test_admission_fifo_max_seqs),
        cmocka_unit_test(test_prefix_reuse),
        cmocka_unit_test(test_preempt_newest_and_recompute),
        cmocka_unit_test(test_prefix_duplicates_then_diverge),
        cmocka_unit_test(test_random_traffic),
        cmocka_unit_test(test_dp_groups_balance),
        cmocka_unit_test(test_spec_drafts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
