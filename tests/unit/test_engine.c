/* test_engine.c - the serving engine on the hy3-golden-b checkpoint in fp32, where the forward is
 * batch- and chunk-invariant: greedy outputs must be IDENTICAL with prefix caching on and off,
 * for 8 concurrent requests vs one at a time, with every prompt chunked, and with a KV budget so
 * small that requests get preempted; each run also shows from the stats that the mechanism ran.
 * Plus: queue full, abort (blocks freed), invalid input, seeds, logprobs, stop ids, length caps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "engine/engine.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NREQ 8
#define MAXTOK 12
#define BOS 471
#define MAXP 64

static struct hy_model *model;

struct prompt {
    int32_t ids[MAXP];
    int32_t n;
};

/* What a run produced per request. */
struct result {
    int32_t toks[64];
    int32_t n;
    enum hy_engine_finish finish;
};

static struct prompt prompts[NREQ];
static struct result reference[NREQ]; /* one at a time, no prefix caching, no chunking */

static const char *golden_dir(void)
{
    static char path[1024];
    const char *root = getenv("HYINFER_ROOT"); /* unset: run from the repository root */
    snprintf(path, sizeof(path), "%s/tests/data/hy3-golden-llamacpp/hy3-golden-b", root && *root ? root : ".");
    return path;
}

static uint32_t lcg = 12345;
static int32_t rnd_id(void)
{
    lcg = lcg * 1103515245u + 12345u;
    return (int32_t)((lcg >> 8) % 470);
}

static void make_prompt(struct prompt *p, int32_t n)
{
    p->ids[0] = BOS;
    for (int32_t i = 1; i < n; i++)
        p->ids[i] = rnd_id();
    p->n = n;
}

static void base_config(struct hy_engine_config *c)
{
    hy_engine_config_init(c);
    c->max_model_len = 128;
    c->block_size = 4;
    c->kv_cache_memory_bytes = 8u << 20;
}

static void req_init(struct hy_engine_request *r, const struct prompt *p, int32_t max_tokens)
{
    memset(r, 0, sizeof(*r));
    r->prompt_ids = p->ids;
    r->n_prompt = (size_t)p->n;
    hy_sampling_params_init(&r->params);
    r->params.max_new_tokens = max_tokens;
    r->params.ignore_eos = 1;
    r->logprobs = -1;
}

static struct hy_engine *create(const struct hy_engine_config *c)
{
    struct hy_engine *e = hy_engine_create(model, c);
    if (!e)
        fail_msg("engine create: %s", hy_err_msg());
    return e;
}

/* Steps until idle, recording outputs of ids[0..n) into res[]. */
static void drain(struct hy_engine *e, const uint64_t *ids, int n, struct result *res)
{
    for (int steps = 0; hy_engine_has_work(e); steps++) {
        assert_true(steps < 5000); /* the engine must make progress */
        const struct hy_engine_output *o;
        size_t no;
        assert_int_equal(hy_engine_step(e, &o, &no), 0);
        for (size_t k = 0; k < no; k++)
            for (int i = 0; i < n; i++) {
                if (o[k].request_id != ids[i])
                    continue;
                if (o[k].token_id >= 0)
                    res[i].toks[res[i].n++] = o[k].token_id;
                res[i].finish = o[k].finish;
            }
    }
}

/* Runs prompts ps[0..n) with config c: all at once (concurrent) or one after another. */
static void run(const struct hy_engine_config *c, const struct prompt *ps, int n, int concurrent, struct result *res,
                struct hy_engine_stats *st)
{
    struct hy_engine *e = create(c);
    uint64_t ids[NREQ * 2];
    memset(res, 0, (size_t)n * sizeof(*res));
    for (int i = 0; i < n; i++) {
        struct hy_engine_request r;
        req_init(&r, &ps[i], MAXTOK);
        assert_int_equal(hy_engine_add_request(e, &r, &ids[i]), HY_ENGINE_OK);
        if (!concurrent)
            drain(e, ids + i, 1, res + i);
    }
    drain(e, ids, n, res);
    hy_engine_get_stats(e, st);
    assert_int_equal(st->num_blocks_used, 0);
    assert_int_equal(st->num_running, 0);
    hy_engine_free(e);
}

static void assert_same(const struct result *a, const struct result *b, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(a[i].n, MAXTOK);
        assert_int_equal(b[i].n, a[i].n);
        assert_memory_equal(a[i].toks, b[i].toks, (size_t)a[i].n * sizeof(int32_t));
        assert_int_equal(a[i].finish, HY_ENGINE_FINISHED_LENGTH);
        assert_int_equal(b[i].finish, HY_ENGINE_FINISHED_LENGTH);
    }
}

static int setup(void **state)
{
    (void)state;
    /* tiny batches: one thread avoids OpenMP spin-waits on a shared machine (results do not
     * depend on the thread count) */
    omp_set_num_threads(1);
    if (hy_model_load(golden_dir(), HY_COMPUTE_F32, &model)) {
        fprintf(stderr, "cannot load %s: %s\n", golden_dir(), hy_err_msg());
        return -1;
    }
    static const int32_t lens[NREQ] = {5, 17, 9, 33, 12, 26, 40, 21};
    for (int i = 0; i < NREQ; i++)
        make_prompt(&prompts[i], lens[i]);
    struct hy_engine_config c;
    struct hy_engine_stats st;
    base_config(&c);
    c.enable_prefix_caching = 0;
    run(&c, prompts, NREQ, 0, reference, &st);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hy_model_free(model);
    return 0;
}

static void test_concurrent_equals_sequential(void **state)
{
    (void)state;
    struct hy_engine_config c;
    struct hy_engine_stats st;
    struct result res[NREQ];
    base_config(&c);
    run(&c, prompts, NREQ, 1, res, &st);
    assert_same(reference, res, NREQ);
    printf("concurrent: max_batch_seqs=%d steps=%llu\n", st.max_batch_seqs, (unsigned long long)st.num_steps);
    assert_true(st.max_batch_seqs >= 8);
    c.enable_prefix_caching = 0; /* and the same without prefix caching */
    run(&c, prompts, NREQ, 1, res, &st);
    assert_same(reference, res, NREQ);
    assert_int_equal(st.prefix_hits, 0);
}

static void test_prefix_cache_hits(void **state)
{
    (void)state;
    struct hy_engine_config c;
    struct hy_engine_stats st;
    struct result res[NREQ];
    base_config(&c);
    /* the same prompts twice in a row: the second round hits */
    struct prompt twice[NREQ * 2];
    for (int i = 0; i < NREQ; i++)
        twice[i] = twice[NREQ + i] = prompts[i];
    struct result res2[NREQ * 2];
    run(&c, twice, NREQ * 2, 0, res2, &st);
    assert_same(reference, res2, NREQ);
    assert_same(reference, res2 + NREQ, NREQ);
    printf("repeat: prefix hits %llu of %llu tokens\n", (unsigned long long)st.prefix_hits,
           (unsigned long long)st.prefix_queries);
    assert_true(st.prefix_hits > 0);
    /* a shared 24-token "system prompt" with different suffixes, against no caching */
    struct prompt shared[4];
    struct prompt sys;
    make_prompt(&sys, 24);
    for (int i = 0; i < 4; i++) {
        shared[i] = sys;
        for (int j = 0; j < 5 + 3 * i; j++)
            shared[i].ids[shared[i].n++] = rnd_id();
    }
    run(&c, shared, 4, 0, res, &st);
    assert_true(st.prefix_hits >= 3 * 24);
    uint64_t hits_seq = st.prefix_hits;
    struct result nocache[4];
    c.enable_prefix_caching = 0;
    run(&c, shared, 4, 0, nocache, &st);
    assert_same(nocache, res, 4);
    /* concurrently: the first request's blocks are registered before the others are admitted
     * only if they arrive later, so just check the outputs */
    c.enable_prefix_caching = 1;
    run(&c, shared, 4, 1, res, &st);
    assert_same(nocache, res, 4);
    printf("shared prefix: %llu hit tokens (one at a time)\n", (unsigned long long)hits_seq);
}

static void test_chunked_prefill(void **state)
{
    (void)state;
    struct hy_engine_config c;
    struct hy_engine_stats st;
    struct result res[NREQ];
    base_config(&c);
    c.max_num_batched_tokens = 3; /* every prompt (>= 5 tokens) is split */
    run(&c, prompts, NREQ, 1, res, &st);
    assert_same(reference, res, NREQ);
    printf("chunked: %llu prompt chunks for %d prompts\n", (unsigned long long)st.prompt_chunks, NREQ);
    assert_true(st.prompt_chunks >= 2 * NREQ);
    run(&c, prompts, NREQ, 0, res, &st);
    assert_same(reference, res, NREQ);
}

static void test_preemption_small_kv(void **state)
{
    (void)state;
    struct hy_engine_config c;
    struct hy_engine_stats st;
    struct result res[NREQ];
    base_config(&c);
    c.max_model_len = 64;
    /* 1280 bytes per token (5 layers incl. MTP x K,V x 2 heads x 16 x fp32): 20 blocks of 4 */
    c.kv_cache_memory_bytes = 20 * 4 * 1280;
    for (int prefix = 0; prefix < 2; prefix++) {
        c.enable_prefix_caching = prefix;
        run(&c, prompts, NREQ, 1, res, &st);
        assert_int_equal(st.num_blocks_total, 20);
        assert_same(reference, res, NREQ);
        printf("small KV (prefix caching %s): %llu preemptions, max batch %d, %llu steps\n", prefix ? "on" : "off",
               (unsigned long long)st.num_preemptions, st.max_batch_seqs, (unsigned long long)st.num_steps);
        assert_true(st.num_preemptions > 0);
        if (prefix) /* 80 slots for 259 tokens: cached blocks were reused */
            assert_true(st.prefix_evictions > 0 && st.num_blocks_cached > 0);
    }
    /* and with chunking on top */
    c.max_num_batched_tokens = 7;
    run(&c, prompts, NREQ, 1, res, &st);
    assert_same(reference, res, NREQ);
    assert_true(st.num_preemptions > 0);
}

static void test_queue_full_and_invalid_input(void **state)
{
    (void)state;
    struct hy_engine_config c;
    base_config(&c);
    c.max_model_len = 32;
    c.max_waiting_requests = 2;
    struct hy_engine *e = create(&c);
    struct hy_engine_request r;
    uint64_t id;
    req_init(&r, &prompts[0], 4);
    assert_int_equal(hy_engine_add_request(e, &r, &id), HY_ENGINE_OK);
    assert_int_equal(hy_engine_add_request(e, &r, &id), HY_ENGINE_OK);
    assert_int_equal(hy_engine_add_request(e, &r, &id), HY_ENGINE_QUEUE_FULL);
    /* once admitted they no longer wait */
    const struct hy_engine_output *o;
    size_t no;
    assert_int_equal(hy_engine_step(e, &o, &no), 0);
    assert_int_equal(hy_engine_add_request(e, &r, &id), HY_ENGINE_OK);

    struct prompt bad = prompts[1];
    bad.ids[3] = 480;
    req_init(&r, &bad, 4);
    assert_int_equal(hy_engine_add_request(e, &r, &id), HY_ENGINE_ERROR);
    assert_non_null(strstr(hy_err_msg(), "outside the vocabulary"));
    bad.ids[3] = -1;
    assert_int_equal(hy_engine_add_request(e, &r, &id), HY_ENGINE_ERROR);
    r.n_prompt = 0;
    assert_int_equal(hy_engine_add_request(e, &r, &id), HY_ENGINE_ERROR);
    assert_non_null(strstr(hy_err_msg(), "empty prompt"));
    req_init(&r, &prompts[3], 4); /* 33 tokens > max_model_len 32 */
    assert_int_equal(hy_engine_add_request(e, &r, &id), HY_ENGINE_ERROR);
    assert_string_equal(hy_err_msg(), "Input length 33 exceeds the model's maximum context length 32");
    req_init(&r, &prompts[0], 0);
    assert_int_equal(hy_engine_add_request(e, &r, &id), HY_ENGINE_ERROR);
    req_init(&r, &prompts[0], 4);
    r.logprobs = 21;
    assert_int_equal(hy_engine_add_request(e, &r, &id), HY_ENGINE_ERROR);
    req_init(&r, &prompts[0], 4);
    r.params.top_p = 0.0f;
    assert_int_equal(hy_engine_add_request(e, &r, &id), HY_ENGINE_ERROR);
    assert_non_null(strstr(hy_err_msg(), "top_p"));
    hy_engine_free(e); /* with requests still queued: no leaks */

    /* a KV budget that cannot hold one max_model_len sequence */
    base_config(&c);
    c.max_model_len = 64;
    c.kv_cache_memory_bytes = 15 * 4 * 1280;
    assert_null(hy_engine_create(model, &c));
    assert_non_null(strstr(hy_err_msg(), "max_model_len 64 needs 16 KV blocks"));
    c.kv_cache_memory_bytes = 16 * 4 * 1280;
    e = create(&c);
    hy_engine_free(e);
    /* KV budget 0: half of MemAvailable, capped at max_num_seqs full-length sequences */
    c.kv_cache_memory_bytes = 0;
    e = create(&c);
    struct hy_engine_stats st;
    hy_engine_get_stats(e, &st);
    assert_int_equal(st.num_blocks_total, c.max_num_seqs * 64 / 4);
    hy_engine_free(e);
    c.max_model_len = 262145;
    assert_null(hy_engine_create(model, &c));
    assert_non_null(strstr(hy_err_msg(), "max_position_embeddings 262144"));
    c.max_model_len = 64;
    c.max_num_seqs = 0;
    assert_null(hy_engine_create(model, &c));
    assert_non_null(strstr(hy_err_msg(), "max_num_seqs"));
}

static void test_abort_frees_blocks(void **state)
{
    (void)state;
    struct hy_engine_config c;
    struct hy_engine_stats st;
    base_config(&c);
    c.max_num_seqs = 2;
    struct hy_engine *e = create(&c);
    struct hy_engine_request r;
    uint64_t ids[3];
    for (int i = 0; i < 3; i++) {
        req_init(&r, &prompts[3 + i], 50);
        assert_int_equal(hy_engine_add_request(e, &r, &ids[i]), HY_ENGINE_OK);
    }
    const struct hy_engine_output *o;
    size_t no;
    assert_int_equal(hy_engine_step(e, &o, &no), 0);
    assert_int_equal(hy_engine_step(e, &o, &no), 0);
    hy_engine_get_stats(e, &st);
    assert_int_equal(st.num_running, 2);
    assert_int_equal(st.num_waiting, 1);
    int32_t used = st.num_blocks_used;
    assert_int_equal(used, (33 + 2 + 3) / 4 + (12 + 2 + 3) / 4); /* 9 + 4 blocks */
    assert_int_equal(hy_engine_abort_request(e, ids[0]), 0);     /* running */
    assert_int_equal(hy_engine_abort_request(e, ids[2]), 0);     /* waiting */
    assert_int_equal(hy_engine_abort_request(e, ids[2]), -1);
    assert_int_equal(hy_engine_abort_request(e, 999), -1);
    hy_engine_get_stats(e, &st);
    assert_int_equal(st.num_blocks_used, 4);
    assert_int_equal(st.num_running, 1);
    assert_int_equal(st.num_waiting, 0);
    assert_int_equal(hy_engine_step(e, &o, &no), 0);
    int aborted = 0;
    for (size_t k = 0; k < no; k++)
        if (o[k].finish == HY_ENGINE_FINISHED_ABORT) {
            assert_int_equal(o[k].token_id, -1);
            assert_true(o[k].request_id == ids[0] || o[k].request_id == ids[2]);
            aborted++;
        }
    assert_int_equal(aborted, 2);
    assert_int_equal(hy_engine_abort_request(e, ids[1]), 0);
    hy_engine_get_stats(e, &st);
    assert_int_equal(st.num_blocks_used, 0);
    assert_true(hy_engine_has_work(e)); /* the abort is still to be reported */
    assert_int_equal(hy_engine_step(e, &o, &no), 0);
    assert_int_equal(no, 1);
    assert_int_equal(o[0].finish, HY_ENGINE_FINISHED_ABORT);
    assert_false(hy_engine_has_work(e));
    hy_engine_free(e);
}

/* Runs one request (with other traffic when busy) and returns its result. */
static struct result run_one(const struct hy_engine_request *r, int busy)
{
    struct hy_engine_config c;
    base_config(&c);
    struct hy_engine *e = create(&c);
    uint64_t ids[4];
    struct result res[4];
    memset(res, 0, sizeof(res));
    int n = 1;
    if (busy)
        for (; n < 4; n++) {
            struct hy_engine_request o;
            req_init(&o, &prompts[n], MAXTOK);
            o.params.temperature = 0.7f;
            assert_int_equal(hy_engine_add_request(e, &o, &ids[n]), HY_ENGINE_OK);
        }
    assert_int_equal(hy_engine_add_request(e, r, &ids[0]), HY_ENGINE_OK);
    drain(e, ids, n, res);
    hy_engine_free(e);
    return res[0];
}

static void test_seeded_sampling(void **state)
{
    (void)state;
    struct hy_engine_request r;
    req_init(&r, &prompts[2], 16);
    r.params.temperature = 1.0f;
    r.params.seed = 42;
    r.params.has_seed = 1;
    struct result a = run_one(&r, 0), b = run_one(&r, 1);
    assert_int_equal(a.n, 16);
    assert_int_equal(b.n, 16);
    assert_memory_equal(a.toks, b.toks, sizeof(int32_t) * 16);
    r.params.seed = 43;
    struct result d = run_one(&r, 0);
    assert_memory_not_equal(a.toks, d.toks, sizeof(int32_t) * 16);
    /* a seeded request that gets preempted keeps its RNG state: same tokens */
    struct hy_engine_config c;
    base_config(&c);
    c.max_model_len = 64;
    c.kv_cache_memory_bytes = 16 * 4 * 1280;
    struct hy_engine *e = create(&c);
    uint64_t ids[NREQ];
    struct result res[NREQ];
    memset(res, 0, sizeof(res));
    for (int i = 0; i < NREQ; i++) {
        struct hy_engine_request q;
        req_init(&q, &prompts[i], MAXTOK);
        if (i == NREQ - 1) /* the seeded request comes last: the newest is preempted first */
            q = r, q.params.seed = 42, q.params.max_new_tokens = 16;
        assert_int_equal(hy_engine_add_request(e, &q, &ids[i]), HY_ENGINE_OK);
    }
    drain(e, ids, NREQ, res);
    struct hy_engine_stats st;
    hy_engine_get_stats(e, &st);
    assert_true(st.num_preemptions > 0);
    assert_memory_equal(a.toks, res[NREQ - 1].toks, sizeof(int32_t) * 16);
    hy_engine_free(e);
}

static void test_logprobs_stop_ids_and_lengths(void **state)
{
    (void)state;
    struct hy_engine_config c;
    base_config(&c);
    c.max_model_len = 40;
    struct hy_engine *e = create(&c);
    struct hy_engine_request r;
    uint64_t ids[3];
    struct result res[3];
    memset(res, 0, sizeof(res));
    /* logprobs of greedy tokens: the chosen one is the top entry */
    req_init(&r, &prompts[0], MAXTOK);
    r.logprobs = 5;
    assert_int_equal(hy_engine_add_request(e, &r, &ids[0]), HY_ENGINE_OK);
    /* stop at the first occurrence of the reference's 4th token */
    int32_t stop = reference[1].toks[3];
    int first = 0;
    while (reference[1].toks[first] != stop)
        first++;
    req_init(&r, &prompts[1], MAXTOK);
    r.stop_token_ids = &stop;
    r.n_stop_token_ids = 1;
    assert_int_equal(hy_engine_add_request(e, &r, &ids[1]), HY_ENGINE_OK);
    /* 33-token prompt with max_model_len 40: 7 tokens, then length */
    req_init(&r, &prompts[3], 100);
    assert_int_equal(hy_engine_add_request(e, &r, &ids[2]), HY_ENGINE_OK);
    /* a prompt of exactly max_model_len tokens gets one token (as in vLLM) */
    struct prompt full;
    make_prompt(&full, 40);
    uint64_t full_id;
    req_init(&r, &full, 100);
    assert_int_equal(hy_engine_add_request(e, &r, &full_id), HY_ENGINE_OK);
    int full_n = 0;
    int checked = 0;
    for (int steps = 0; hy_engine_has_work(e); steps++) {
        assert_true(steps < 5000);
        const struct hy_engine_output *o;
        size_t no;
        assert_int_equal(hy_engine_step(e, &o, &no), 0);
        for (size_t k = 0; k < no; k++) {
            if (o[k].request_id == full_id) {
                full_n++;
                assert_int_equal(o[k].finish, HY_ENGINE_FINISHED_LENGTH);
                continue;
            }
            int i = o[k].request_id == ids[0] ? 0 : o[k].request_id == ids[1] ? 1 : 2;
            res[i].toks[res[i].n++] = o[k].token_id;
            res[i].finish = o[k].finish;
            if (i != 0) {
                assert_int_equal(o[k].n_top, 0);
                continue;
            }
            assert_int_equal(o[k].n_top, 5);
            assert_int_equal(o[k].top_ids[0], o[k].token_id);
            assert_true(o[k].logprob <= 0.0f);
            assert_true(fabsf(o[k].logprob - o[k].top_logprobs[0]) < 1e-6f);
            for (int j = 1; j < 5; j++)
                assert_true(o[k].top_logprobs[j] <= o[k].top_logprobs[j - 1]);
            checked++;
        }
    }
    assert_int_equal(checked, MAXTOK);
    assert_memory_equal(res[0].toks, reference[0].toks, sizeof(int32_t) * MAXTOK);
    assert_int_equal(res[1].n, first + 1);
    assert_int_equal(res[1].finish, HY_ENGINE_FINISHED_STOP);
    assert_memory_equal(res[1].toks, reference[1].toks, sizeof(int32_t) * (size_t)(first + 1));
    assert_int_equal(res[2].n, 7);
    assert_int_equal(res[2].finish, HY_ENGINE_FINISHED_LENGTH);
    assert_int_equal(full_n, 1);
    hy_engine_free(e);
}

/* bf16 compute (bf16 KV cache, half the bytes per block): runs and frees everything. */
/* A fresh engine refuses r at submit (HY_ENGINE_ERROR). */
static void assert_refused(const struct hy_engine_request *r)
{
    struct hy_engine_config c;
    base_config(&c);
    struct hy_engine *e = create(&c);
    uint64_t id;
    assert_int_equal(hy_engine_add_request(e, r, &id), HY_ENGINE_ERROR);
    hy_engine_free(e);
}

/* Token rules: a banned id never appears; a force rule fires once when its trigger is the last
 * token (the prompt's last token counts) and emits its sequence at any temperature; the free
 * tokens around it are the model's. */
static void test_token_rules(void **state)
{
    (void)state;
    struct hy_engine_request r;
    req_init(&r, &prompts[0], MAXTOK);
    struct result free_run = run_one(&r, 0);
    struct hy_token_rules rules;
    memset(&rules, 0, sizeof(rules));
    rules.banned[rules.n_banned++] = free_run.toks[0]; /* the greedy first choice is banned */
    r.rules = &rules;
    struct result banned = run_one(&r, 0);
    for (int i = 0; i < banned.n; i++)
        assert_int_not_equal(banned.toks[i], free_run.toks[0]);
    /* forced right after the prompt (trigger = the prompt's last token), then after token 7 */
    memset(&rules, 0, sizeof(rules));
    struct hy_force_rule *f = &rules.force[rules.n_force++];
    f->trigger = prompts[0].ids[prompts[0].n - 1];
    f->n = 3;
    f->seq[0] = 7, f->seq[1] = 11, f->seq[2] = 7;
    f = &rules.force[rules.n_force++];
    f->trigger = 11;
    f->n = 1;
    f->seq[0] = 5;
    for (int busy = 0; busy < 2; busy++) {
        r.params.temperature = busy ? 1.0f : 0.0f;
        struct result forced = run_one(&r, busy);
        assert_int_equal(forced.n, MAXTOK);
        assert_int_equal(forced.toks[0], 7);
        assert_int_equal(forced.toks[1], 11);
        assert_int_equal(forced.toks[2], 7);
        /* rule 1 cannot fire on the 11 inside rule 0's sequence (one rule at a time) */
        assert_false(forced.toks[3] == 5 && forced.toks[2] == 11);
    }
    /* a rule whose trigger ends rule 0's sequence fires right after it */
    rules.force[1].trigger = 7;
    r.params.temperature = 0.0f;
    struct result chained = run_one(&r, 0);
    assert_int_equal(chained.toks[3], 5);
    /* alternatives: after the forced 7 the model picks one of [11 12], [13], [11 14] (greedy and sampled) */
    memset(&rules, 0, sizeof(rules));
    f = &rules.force[rules.n_force++];
    f->trigger = prompts[0].ids[prompts[0].n - 1];
    f->n = 1;
    f->seq[0] = 7;
    const int32_t alts[3][2] = {{11, 12}, {13, -1}, {11, 14}};
    for (int k = 0; k < 3; k++) {
        f->alt_off[k + 1] = f->alt_off[k];
        for (int i = 0; i < 2 && alts[k][i] >= 0; i++)
            f->alt_ids[f->alt_off[k + 1]++] = alts[k][i];
    }
    f->n_alts = 3;
    int seen13 = 0, seen11 = 0;
    for (int run = 0; run < 6; run++) {
        r.params.temperature = run ? 2.0f : 0.0f;
        r.params.has_seed = 1;
        r.params.seed = (uint64_t)run;
        struct result alt = run_one(&r, run & 1);
        assert_int_equal(alt.toks[0], 7);
        if (alt.toks[1] == 13) {
            seen13++;
        } else {
            assert_int_equal(alt.toks[1], 11);
            assert_true(alt.toks[2] == 12 || alt.toks[2] == 14);
            seen11++;
        }
    }
    assert_int_equal(seen13 + seen11, 6);
    /* an alternative that is a prefix of another is refused */
    f->alt_ids[f->alt_off[1]] = 11; /* [13] -> [11], a prefix of [11 12] */
    assert_refused(&r);
    /* invalid ids are refused at submit */
    rules.banned[0] = 1 << 30;
    rules.n_banned = 1;
    assert_refused(&r);
}

static void test_bf16_smoke(void **state)
{
    (void)state;
    struct hy_model *m16;
    assert_int_equal(hy_model_load(golden_dir(), HY_COMPUTE_BF16, &m16), 0);
    struct hy_engine_config c;
    base_config(&c);
    c.max_model_len = 64;
    c.kv_cache_memory_bytes = 20 * 4 * 640;
    struct hy_engine *e = hy_engine_create(m16, &c);
    assert_non_null(e);
    uint64_t ids[NREQ];
    struct result res[NREQ];
    memset(res, 0, sizeof(res));
    for (int i = 0; i < NREQ; i++) {
        struct hy_engine_request r;
        req_init(&r, &prompts[i], MAXTOK);
        assert_int_equal(hy_engine_add_request(e, &r, &ids[i]), HY_ENGINE_OK);
    }
    drain(e, ids, NREQ, res);
    struct hy_engine_stats st;
    hy_engine_get_stats(e, &st);
    assert_int_equal(st.num_blocks_total, 20);
    assert_int_equal(st.num_blocks_used, 0);
    for (int i = 0; i < NREQ; i++)
        assert_int_equal(res[i].n, MAXTOK);
    hy_engine_free(e);
    hy_model_free(m16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_equals_sequential),
        cmocka_unit_test(test_prefix_cache_hits),
        cmocka_unit_test(test_chunked_prefill),
        cmocka_unit_test(test_preemption_small_kv),
        cmocka_unit_test(test_queue_full_and_invalid_input),
        cmocka_unit_test(test_abort_frees_blocks),
        cmocka_unit_test(test_seeded_sampling),
        cmocka_unit_test(test_logprobs_stop_ids_and_lengths),
        cmocka_unit_test(test_token_rules),
        cmocka_unit_test(test_bf16_smoke),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
