/* test_engine_loop.c - the server's engine thread (src/engine/engine_loop.c) on the
 * hy3-golden-b checkpoint (fp32, greedy): jobs submitted from many threads at once get exactly
 * the tokens a direct single-threaded engine run gives; n > 1 jobs route outputs to the right
 * choice; aborting one choice stops only that one; releasing a job early frees its KV blocks;
 * queue-full and invalid requests are reported to the submitter; stopping the thread ends the
 * waits of jobs still running; async submits call their notify hook and report the add's outcome
 * later; the drain aborts queued requests while running ones go on and new submits are refused.
 * Runs under ASan/UBSan too (make asan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "engine/engine.h"
#include "model/model.h"
#include "engine/engine_loop.h"

#define NREQ 6
#define MAXTOK 12

static struct hy_model *model;
static int32_t prompts[NREQ][40];
static int32_t plen[NREQ] = {5, 17, 9, 33, 12, 26};
static int32_t ref[NREQ][MAXTOK];

static const char *golden_dir(void)
{
    static char path[1024];
    const char *root = getenv("HYINFER_ROOT"); /* unset: run from the repository root */
    snprintf(path, sizeof(path), "%s/tests/data/hy3-golden-llamacpp/hy3-golden-b", root && *root ? root : ".");
    return path;
}

static struct hy_engine_request make_req(int i)
{
    struct hy_engine_request r;
    memset(&r, 0, sizeof(r));
    r.prompt_ids = prompts[i];
    r.n_prompt = (size_t)plen[i];
    hy_sampling_params_init(&r.params);
    r.params.max_new_tokens = MAXTOK;
    r.params.ignore_eos = 1;
    r.logprobs = -1;
    return r;
}

static struct hy_engine *new_engine(int32_t max_waiting)
{
    struct hy_engine_config c;
    hy_engine_config_init(&c);
    c.max_model_len = 128;
    c.kv_cache_memory_bytes = 8u << 20;
    c.max_waiting_requests = max_waiting;
    struct hy_engine *e = hy_engine_create(model, &c);
    assert_non_null(e);
    return e;
}

static int setup(void **state)
{
    (void)state;
    if (hy_model_load(golden_dir(), HY_COMPUTE_F32, &model)) {
        fprintf(stderr, "cannot load %s: %s\n", golden_dir(), hy_err_msg());
        return -1;
    }
    uint32_t lcg = 777;
    for (int i = 0; i < NREQ; i++) {
        prompts[i][0] = 471;
        for (int k = 1; k < plen[i]; k++) {
            lcg = lcg * 1103515245u + 12345u;
            prompts[i][k] = (int32_t)((lcg >> 8) % 470);
        }
    }
    /* reference: each request alone, driven directly */
    for (int i = 0; i < NREQ; i++) {
        struct hy_engine *e = new_engine(16);
        struct hy_engine_request r = make_req(i);
        uint64_t id;
        assert_int_equal(hy_engine_add_request(e, &r, &id), HY_ENGINE_OK);
        int n = 0;
        while (hy_engine_has_work(e)) {
            const struct hy_engine_output *o;
            size_t no;
            assert_int_equal(hy_engine_step(e, &o, &no), 0);
            for (size_t k = 0; k < no; k++)
                if (o[k].token_id >= 0 && n < MAXTOK)
                    ref[i][n++] = o[k].token_id;
        }
        assert_int_equal(n, MAXTOK);
        hy_engine_free(e);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hy_model_free(model);
    return 0;
}

/* Collects a job's tokens per choice until all are done. */
static void collect(struct hy_engine_loop *se, struct hy_engine_loop_job *j, int n, int32_t tok[][MAXTOK], int *cnt,
                    enum hy_engine_finish *fin)
{
    struct hy_engine_loop_out outs[64];
    int all = 0;
    while (!all) {
        size_t k = hy_engine_loop_job_wait(se, j, 5.0, outs, 64, &all);
        for (size_t q = 0; q < k; q++) {
            int s = outs[q].seq;
            assert_true(s >= 0 && s < n);
            if (outs[q].o.token_id >= 0) {
                assert_true(cnt[s] < MAXTOK);
                tok[s][cnt[s]++] = outs[q].o.token_id;
            }
            if (outs[q].o.finish != HY_ENGINE_RUNNING)
                fin[s] = outs[q].o.finish;
        }
    }
}

struct thr {
    struct hy_engine_loop *se;
    int i;
    int32_t tok[1][MAXTOK];
    int cnt[1];
    enum hy_engine_finish fin[1];
};

static void *client(void *arg)
{
    struct thr *t = arg;
    struct hy_engine_request r = make_req(t->i);
    struct hy_engine_loop_job *j;
    char err[256];
    if (hy_engine_loop_submit(t->se, &r, 1, &j, err, sizeof(err)) != HY_ENGINE_OK)
        return NULL;
    collect(t->se, j, 1, t->tok, t->cnt, t->fin);
    hy_engine_loop_job_release(t->se, j);
    return NULL;
}

static void test_concurrent_jobs(void **state)
{
    (void)state;
    struct hy_engine *e = new_engine(64);
    struct hy_engine_loop *se = hy_engine_loop_start(e, 0);
    assert_non_null(se);
    for (int round = 0; round < 3; round++) {
        struct thr t[NREQ];
        pthread_t th[NREQ];
        memset(t, 0, sizeof(t));
        for (int i = 0; i < NREQ; i++) {
            t[i].se = se;
            t[i].i = i;
            assert_int_equal(pthread_create(&th[i], NULL, client, &t[i]), 0);
        }
        for (int i = 0; i < NREQ; i++) {
            pthread_join(th[i], NULL);
            assert_int_equal(t[i].cnt[0], MAXTOK);
            assert_memory_equal(t[i].tok[0], ref[i], sizeof(ref[i]));
            assert_int_equal(t[i].fin[0], HY_ENGINE_FINISHED_LENGTH);
        }
    }
    struct hy_engine_stats st;
    hy_engine_loop_stats(se, &st);
    assert_int_equal(st.num_running, 0);
    assert_int_equal(st.num_blocks_used, 0);
    assert_true(st.max_batch_seqs >= 2);
    hy_engine_loop_stop(se);
    hy_engine_loop_free(se);
    hy_engine_free(e);
}

static void test_n_choices_and_abort(void **state)
{
    (void)state;
    struct hy_engine *e = new_engine(64);
    struct hy_engine_loop *se = hy_engine_loop_start(e, 0);
    struct hy_engine_request r[3] = {make_req(0), make_req(3), make_req(5)};
    struct hy_engine_loop_job *j;
    char err[256];
    assert_int_equal(hy_engine_loop_submit(se, r, 3, &j, err, sizeof(err)), HY_ENGINE_OK);
    /* abort choice 1 right away; 0 and 2 run to the end with their own tokens */
    hy_engine_loop_job_abort(se, j, 1);
    int32_t tok[3][MAXTOK];
    int cnt[3] = {0};
    enum hy_engine_finish fin[3] = {0};
    collect(se, j, 3, tok, cnt, fin);
    assert_int_equal(cnt[0], MAXTOK);
    assert_int_equal(cnt[2], MAXTOK);
    assert_memory_equal(tok[0], ref[0], sizeof(ref[0]));
    assert_memory_equal(tok[2], ref[5], sizeof(ref[5]));
    assert_true(cnt[1] < MAXTOK);
    hy_engine_loop_job_release(se, j);

    /* release early: blocks come back */
    struct hy_engine_request big = make_req(3);
    big.params.max_new_tokens = 90;
    assert_int_equal(hy_engine_loop_submit(se, &big, 1, &j, err, sizeof(err)), HY_ENGINE_OK);
    struct hy_engine_loop_out outs[8];
    int all = 0;
    while (hy_engine_loop_job_wait(se, j, 5.0, outs, 8, &all) == 0 && !all)
        ;
    hy_engine_loop_job_release(se, j);
    struct hy_engine_stats st;
    for (int i = 0; i < 500; i++) {
        hy_engine_loop_stats(se, &st);
        if (st.num_running == 0 && st.num_blocks_used == 0)
            break;
        usleep(10000);
    }
    assert_int_equal(st.num_running, 0);
    assert_int_equal(st.num_blocks_used, 0);

    /* invalid request: the engine's message reaches the submitter */
    int32_t bad_ids[2] = {471, 99999};
    struct hy_engine_request bad = make_req(0);
    bad.prompt_ids = bad_ids;
    bad.n_prompt = 2;
    assert_int_equal(hy_engine_loop_submit(se, &bad, 1, &j, err, sizeof(err)), HY_ENGINE_ERROR);
    assert_null(j);
    assert_true(strlen(err) > 0);

    /* stop with a job still running: its wait ends with all choices done */
    big.params.max_new_tokens = 100;
    assert_int_equal(hy_engine_loop_submit(se, &big, 1, &j, err, sizeof(err)), HY_ENGINE_OK);
    hy_engine_loop_stop(se);
    all = 0;
    for (int i = 0; i < 100 && !all; i++)
        hy_engine_loop_job_wait(se, j, 0.1, outs, 8, &all);
    assert_true(all);
    hy_engine_loop_job_release(se, j);
    /* after stop: a code the server maps to 503, not a message to match */
    assert_int_equal(hy_engine_loop_submit(se, &big, 1, &j, err, sizeof(err)), HY_ENGINE_SHUTTING_DOWN);
    hy_engine_loop_free(se);
    hy_engine_free(e);
}

static void test_queue_full(void **state)
{
    (void)state;
    struct hy_engine *e = new_engine(1);
    struct hy_engine_loop *se = hy_engine_loop_start(e, 0);
    /* max_waiting_requests 1: a job of two choices is added in one go (no step in between), so the
     * second add finds one waiting and is refused; the first is rolled back */
    struct hy_engine_request r[2] = {make_req(1), make_req(2)};
    struct hy_engine_loop_job *j;
    char err[256];
    assert_int_equal(hy_engine_loop_submit(se, r, 2, &j, err, sizeof(err)), HY_ENGINE_QUEUE_FULL);
    assert_null(j);
    struct hy_engine_stats st;
    for (int i = 0; i < 200; i++) {
        hy_engine_loop_stats(se, &st);
        if (st.num_waiting + st.num_running == 0)
            break;
        usleep(10000);
    }
    assert_int_equal(st.num_waiting + st.num_running, 0);
    /* one choice fits */
    assert_int_equal(hy_engine_loop_submit(se, r, 1, &j, err, sizeof(err)), HY_ENGINE_OK);
    int32_t tok[1][MAXTOK];
    int cnt[1] = {0};
    enum hy_engine_finish fin[1] = {0};
    collect(se, j, 1, tok, cnt, fin);
    assert_int_equal(cnt[0], MAXTOK);
    assert_memory_equal(tok[0], ref[1], sizeof(ref[1]));
    hy_engine_loop_job_release(se, j);
    hy_engine_loop_stop(se);
    hy_engine_loop_free(se);
    hy_engine_free(e);
}

static int notified;

static void count_notify(void *arg)
{
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_RELAXED);
}

static int wait_status(struct hy_engine_loop *se, struct hy_engine_loop_job *j)
{
    char err[256];
    int rc = HY_SRV_ADD_PENDING;
    for (int i = 0; i < 500 && rc == HY_SRV_ADD_PENDING; i++) {
        rc = hy_engine_loop_job_status(se, j, err, sizeof(err));
        if (rc == HY_SRV_ADD_PENDING)
            usleep(2000);
    }
    return rc;
}

static void test_async_and_drain(void **state)
{
    (void)state;
    struct hy_engine_config c;
    hy_engine_config_init(&c);
    c.max_model_len = 128;
    c.kv_cache_memory_bytes = 8u << 20;
    c.max_num_seqs = 1; /* the second job waits in the engine's queue */
    c.max_waiting_requests = 1;
    struct hy_engine *e = hy_engine_create(model, &c);
    assert_non_null(e);
    struct hy_engine_loop *se = hy_engine_loop_start(e, 0);
    char err[256];
    /* queue full comes through the status, later */
    struct hy_engine_request two[2] = {make_req(1), make_req(2)};
    struct hy_engine_loop_job *jf;
    assert_int_equal(hy_engine_loop_submit_async(se, two, 2, &jf, count_notify, &notified, err, sizeof(err)),
                     HY_ENGINE_OK);
    assert_int_equal(wait_status(se, jf), HY_ENGINE_QUEUE_FULL);
    assert_true(__atomic_load_n(&notified, __ATOMIC_RELAXED) >= 1);
    hy_engine_loop_job_release(se, jf);
    /* a released async job is dropped or aborted: no leak, no touch of its requests */
    struct hy_engine_request gone = make_req(4);
    assert_int_equal(hy_engine_loop_submit_async(se, &gone, 1, &jf, count_notify, &notified, err, sizeof(err)),
                     HY_ENGINE_OK);
    hy_engine_loop_job_release(se, jf);
    memset(&gone, 0xff, sizeof(gone));
    /* A runs (long), B waits */
    struct hy_engine_request ra = make_req(0), rb = make_req(3);
    ra.params.max_new_tokens = 100;
    struct hy_engine_loop_job *ja, *jb;
    assert_int_equal(hy_engine_loop_submit_async(se, &ra, 1, &ja, count_notify, &notified, err, sizeof(err)),
                     HY_ENGINE_OK);
    assert_int_equal(wait_status(se, ja), HY_ENGINE_OK);
    struct hy_engine_loop_out outs[128];
    int all = 0, na = 0;
    int32_t toka[128];
    enum hy_engine_finish fina = HY_ENGINE_RUNNING;
    while (na == 0) {
        size_t k = hy_engine_loop_job_wait(se, ja, 5.0, outs, 128, &all);
        for (size_t q = 0; q < k; q++)
            if (outs[q].o.token_id >= 0)
                toka[na++] = outs[q].o.token_id;
        assert_false(all);
    }
    assert_int_equal(hy_engine_loop_submit_async(se, &rb, 1, &jb, count_notify, &notified, err, sizeof(err)),
                     HY_ENGINE_OK);
    assert_int_equal(wait_status(se, jb), HY_ENGINE_OK);
    hy_engine_loop_drain(se);
    struct hy_engine_loop_job *jc;
    assert_int_equal(hy_engine_loop_submit_async(se, &rb, 1, &jc, NULL, NULL, err, sizeof(err)),
                     HY_ENGINE_SHUTTING_DOWN);
    assert_int_equal(hy_engine_loop_submit(se, &rb, 1, &jc, err, sizeof(err)), HY_ENGINE_SHUTTING_DOWN);
    /* B: aborted without a token */
    int32_t tokb[1][MAXTOK];
    int cntb[1] = {0};
    enum hy_engine_finish finb[1] = {0};
    collect(se, jb, 1, tokb, cntb, finb);
    assert_int_equal(cntb[0], 0);
    assert_int_equal(finb[0], HY_ENGINE_FINISHED_ABORT);
    /* A runs on to its end */
    while (!all) {
        size_t k = hy_engine_loop_job_wait(se, ja, 5.0, outs, 128, &all);
        for (size_t q = 0; q < k; q++) {
            if (outs[q].o.token_id >= 0 && na < 128)
                toka[na++] = outs[q].o.token_id;
            if (outs[q].o.finish != HY_ENGINE_RUNNING)
                fina = outs[q].o.finish;
        }
    }
    assert_int_equal(na, 100);
    assert_int_equal(fina, HY_ENGINE_FINISHED_LENGTH);
    assert_memory_equal(toka, ref[0], sizeof(ref[0]));
    hy_engine_loop_job_release(se, ja);
    hy_engine_loop_job_release(se, jb);
    hy_engine_loop_stop(se);
    hy_engine_loop_free(se);
    hy_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_jobs),
        cmocka_unit_test(test_n_choices_and_abort),
        cmocka_unit_test(test_queue_full),
        cmocka_unit_test(test_async_and_drain),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
