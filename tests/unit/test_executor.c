/* test_executor.c - the leader/worker step-plan protocol of engine/executor.c without mpirun: the
 * leader and N workers are threads of this process, the plan channel an in-process broadcast (a
 * barrier and a shared pointer), the model a recording backend. Covers:
 *  - every plan kind (KV init / free, reserve, forward, forward with no logits taken, MTP forward with
 *    hidden rows) arrives intact: each rank hashes what its backend was given and all hashes agree;
 *  - a step whose logits the leader does not take reaches every rank with no logits rows;
 *  - ids of freed caches are reused; the job's end returns every worker with 0 and calls finish once
 *    per rank;
 *  - malformed plans (unknown op, a cache id out of range or not held, bad counts, a body whose tables
 *    or sequence ids disagree with its header) make the worker return -1 naming the field;
 *  - attention-DP dummy steps: a step in which none of the batch's sequences belongs to this rank's
 *    group runs with an empty sub-batch and is counted (shard.h's step, as every worker runs it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/executor.h"

#include "base/err.h"
#include "comm/comm.h"
#include "model/shard.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_RANKS 4
#define HID 6

/* The in-process channel: rank 0 publishes its buffer, everyone copies it between two barriers. */
struct chan {
    pthread_barrier_t bar;
    const void *buf;
    size_t bytes;
};

struct rank_ctx {
    struct chan *c;
    int rank;
    /* what the backend saw */
    uint64_t hash;
    int n_kv_init, n_kv_free, n_reserve, n_forward, n_mtp, n_finish, logits_rows_seen;
    int rc;
    const char *err;
    char err_buf[256];
};

static int chan_bcast(void *ctx, void *buf, size_t bytes)
{
    struct rank_ctx *r = ctx;
    if (r->rank == 0) {
        r->c->buf = buf;
        r->c->bytes = bytes;
    }
    pthread_barrier_wait(&r->c->bar);
    const size_t sent = r->c->bytes;
    if (r->rank != 0 && sent == bytes)
        memcpy(buf, r->c->buf, bytes);
    pthread_barrier_wait(&r->c->bar);
    if (sent != bytes)
        return hy_err_set("test channel: rank %d expects %zu bytes, the leader sent %zu", r->rank, bytes, sent);
    return 0;
}

static void mix(uint64_t *h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ b[i]) * 0x100000001b3ull;
}

static void mix_i(uint64_t *h, int64_t v)
{
    mix(h, &v, sizeof(v));
}

static int be_check(void *ctx, const struct hy_kv_cache *kv, const struct hy_batch *b, int mtp, int64_t n)
{
    (void)ctx;
    (void)kv;
    (void)mtp;
    if (b ? b->n_tokens > 64 : n > 64)
        return hy_err_set("test backend: more than 64 tokens");
    return 0;
}

static int be_kv_init(void *ctx, struct hy_kv_cache *kv, int32_t bs, int32_t nb, enum hy_dtype dt)
{
    struct rank_ctx *r = ctx;
    memset(kv, 0, sizeof(*kv));
    kv->k = calloc(1, sizeof(void *));
    kv->block_size = bs;
    kv->n_blocks = nb;
    kv->dtype = dt;
    r->n_kv_init++;
    mix_i(&r->hash, 1000 + bs * 31 + nb * 7 + (int)dt);
    return 0;
}

static void be_kv_free(void *ctx, struct hy_kv_cache *kv)
{
    struct rank_ctx *r = ctx;
    if (!kv->k)
        return;
    r->n_kv_free++;
    mix_i(&r->hash, 2000 + kv->n_blocks);
    free(kv->k);
    memset(kv, 0, sizeof(*kv));
}

static int be_reserve(void *ctx, int64_t t, int32_t c)
{
    struct rank_ctx *r = ctx;
    r->n_reserve++;
    mix_i(&r->hash, 3000 + t * 13 + c);
    return 0;
}

static int be_forward(void *ctx, struct hy_kv_cache *kv, const struct hy_batch *b, const float *hidden_in,
                      float *logits, float *hidden_out)
{
    struct rank_ctx *r = ctx;
    (void)hidden_out;
    if (!kv->k)
        return hy_err_set("test backend: a step on a cache this rank does not hold");
    hidden_in ? r->n_mtp++ : r->n_forward++;
    r->logits_rows_seen += b->n_logits;
    mix_i(&r->hash, 4000 + b->n_tokens * 3 + (hidden_in != NULL) + 2 * b->mtp_zero_pos0);
    for (int32_t t = 0; t < b->n_tokens; t++) {
        mix_i(&r->hash, b->token_ids[t]);
        mix_i(&r->hash, b->positions[t]);
        mix_i(&r->hash, b->seq_ids[t]);
        mix_i(&r->hash, b->slot_mapping[t]);
        /* every block the token's sequence has up to its position */
        for (int32_t j = 0; j <= b->positions[t] / kv->block_size; j++)
            mix_i(&r->hash, b->block_tables[b->seq_ids[t]][j]);
        if (hidden_in)
            mix(&r->hash, hidden_in + (int64_t)t * HID, HID * sizeof(float));
    }
    mix(&r->hash, b->logits_rows, (size_t)b->n_logits * sizeof(int32_t));
    if (logits)
        for (int32_t i = 0; i < b->n_logits; i++)
            logits[i] = (float)b->logits_rows[i];
    return 0;
}

static void be_finish(void *ctx, int rank)
{
    struct rank_ctx *r = ctx;
    r->n_finish++;
    mix_i(&r->hash, 5000 + (rank > 0));
}

static const struct hy_exec_backend backend = {be_check, be_kv_init, be_kv_free, be_reserve, be_forward, be_finish};

static void *worker(void *arg)
{
    struct rank_ctx *r = arg;
    struct hy_executor ex;
    hy_executor_init_with(&ex, &backend, r, HID, chan_bcast, r, r->rank, NULL);
    r->rc = hy_executor_worker_run(&ex);
    if (r->rc) {
        snprintf(r->err_buf, sizeof(r->err_buf), "%s", hy_err_msg());
        r->err = r->err_buf;
    }
    return NULL;
}

struct job {
    struct chan c;
    struct rank_ctx rk[N_RANKS];
    pthread_t th[N_RANKS];
    uint8_t kv_used[HY_EXEC_MAX_KV];
    struct hy_executor ex; /* the leader's (this thread) */
};

static void job_start(struct job *j, int n_ranks)
{
    memset(j, 0, sizeof(*j));
    assert_int_equal(pthread_barrier_init(&j->c.bar, NULL, (unsigned)n_ranks), 0);
    for (int i = 0; i < n_ranks; i++) {
        j->rk[i].c = &j->c;
        j->rk[i].rank = i;
        j->rk[i].hash = 0xcbf29ce484222325ull;
    }
    for (int i = 1; i < n_ranks; i++)
        assert_int_equal(pthread_create(&j->th[i], NULL, worker, &j->rk[i]), 0);
    hy_executor_init_with(&j->ex, &backend, &j->rk[0], HID, chan_bcast, &j->rk[0], 0, j->kv_used);
}

static void job_join(struct job *j, int n_ranks)
{
    for (int i = 1; i < n_ranks; i++)
        pthread_join(j->th[i], NULL);
    pthread_barrier_destroy(&j->c.bar);
}

/* Two sequences (lengths 5 and 3, block size 4) as one prefill batch. */
struct batch_buf {
    int32_t tok[8], pos[8], seq[8], rows[8];
    int64_t slot[8];
    int32_t t0[2], t1[1];
    const int32_t *tables[2];
    float hidden[8 * HID];
};

static struct hy_batch make_batch(struct batch_buf *bb, int n_logits)
{
    bb->t0[0] = 3;
    bb->t0[1] = 1;
    bb->t1[0] = 6;
    bb->tables[0] = bb->t0;
    bb->tables[1] = bb->t1;
    for (int t = 0; t < 8; t++) {
        const int s = t < 5 ? 0 : 1, p = s ? t - 5 : t;
        bb->tok[t] = 100 + t * 11;
        bb->pos[t] = p;
        bb->seq[t] = s;
        bb->slot[t] = (int64_t)bb->tables[s][p / 4] * 4 + p % 4;
        for (int i = 0; i < HID; i++)
            bb->hidden[t * HID + i] = (float)(t * 0.5 - i);
    }
    bb->rows[0] = 4;
    bb->rows[1] = 7;
    return (struct hy_batch){8, bb->tok, bb->pos, bb->slot, bb->seq, bb->tables, n_logits, bb->rows, 1};
}

static void test_plans_reach_every_rank(void **state)
{
    (void)state;
    static struct job j;
    job_start(&j, N_RANKS);
    struct hy_kv_cache a, b;
    assert_int_equal(hy_executor_kv_cache_init(&j.ex, &a, 4, 16, HY_DTYPE_F32), 0);
    assert_int_equal(hy_executor_kv_cache_init(&j.ex, &b, 4, 9, HY_DTYPE_BF16), 0);
    assert_int_equal(a.dist_id, 0);
    assert_int_equal(b.dist_id, 1);
    assert_int_equal(hy_executor_reserve(&j.ex, 32, 64), 0);
    struct batch_buf bb;
    struct hy_batch bt = make_batch(&bb, 2);
    float logits[8];
    assert_int_equal(hy_executor_forward(&j.ex, &a, &bt, logits, NULL), 0);
    assert_true(logits[0] == 4.0f && logits[1] == 7.0f);
    assert_int_equal(hy_executor_forward(&j.ex, &b, &bt, NULL, NULL), 0); /* logits not taken */
    assert_int_equal(hy_executor_forward_mtp(&j.ex, &a, &bt, bb.hidden, logits, NULL), 0);
    /* an MTP chain step with only entry 1 still drafting: one token of sequence 1 (n_seqs 2 > n_tokens 1) */
    const int32_t row0 = 0;
    const struct hy_batch chain = {1, bb.tok + 5, bb.pos + 5, bb.slot + 5, bb.seq + 5, bb.tables, 1, &row0, 1};
    assert_int_equal(hy_executor_forward_mtp(&j.ex, &a, &chain, bb.hidden + 5 * HID, logits, NULL), 0);
    /* refused before the plan leaves: nothing reaches the workers */
    struct hy_batch big = bt;
    big.n_tokens = 65;
    assert_int_equal(hy_executor_forward(&j.ex, &a, &big, logits, NULL), -1);
    assert_int_equal(hy_executor_reserve(&j.ex, 0, 8), -1);
    hy_executor_kv_cache_free(&j.ex, &a);
    struct hy_kv_cache c;
    assert_int_equal(hy_executor_kv_cache_init(&j.ex, &c, 4, 3, HY_DTYPE_F32), 0);
    assert_int_equal(c.dist_id, 0); /* a's id again */
    hy_executor_kv_cache_free(&j.ex, &b);
    hy_executor_exit(&j.ex);
    job_join(&j, N_RANKS);
    for (int i = 0; i < N_RANKS; i++) {
        const struct rank_ctx *r = &j.rk[i];
        assert_int_equal(r->rc, 0);
        assert_int_equal(r->n_kv_init, 3);
        assert_int_equal(r->n_reserve, 1);
        assert_int_equal(r->n_forward, 2);
        assert_int_equal(r->n_mtp, 2);
        assert_int_equal(r->n_finish, 1);
        assert_int_equal(r->logits_rows_seen, 5); /* 2 + 0 (not taken) + 2 + 1 */
        if (i)
            assert_true(r->hash == j.rk[1].hash);
    }
    /* the workers freed what the leader still held (c) at the end: one more free than the leader */
    assert_int_equal(j.rk[0].n_kv_free, 2);
    for (int i = 1; i < N_RANKS; i++)
        assert_int_equal(j.rk[i].n_kv_free, 3);
    be_kv_free(&j.rk[0], &c); /* the leader's own copy (no plan after the end of the job) */
}

/* The wire header of executor.c (its _Static_assert pins the layout). */
struct wire_hdr {
    int32_t op, kv_id, n_tokens, n_logits, n_seqs, table_total, flag, pad;
    int64_t a, b, c;
};

/* Sends raw plans from this thread (rank 0) to one worker; the worker must stop with -1 naming want. */
static void expect_refused(const struct wire_hdr *plan, int n_plans, const void *body, size_t body_bytes,
                           const char *want)
{
    static struct job j;
    job_start(&j, 2);
    for (int i = 0; i < n_plans; i++) {
        struct wire_hdr h = plan[i];
        assert_int_equal(chan_bcast(&j.rk[0], &h, sizeof(h)), 0);
    }
    if (body) {
        void *copy = malloc(body_bytes);
        memcpy(copy, body, body_bytes);
        assert_int_equal(chan_bcast(&j.rk[0], copy, body_bytes), 0);
        free(copy);
    }
    job_join(&j, 2);
    assert_int_equal(j.rk[1].rc, -1);
    assert_non_null(j.rk[1].err);
    if (!strstr(j.rk[1].err, want))
        fail_msg("worker said \"%s\", expected \"%s\"", j.rk[1].err, want);
    assert_int_equal(j.rk[1].n_finish, 0);
}

static void test_malformed_plans_refused(void **state)
{
    (void)state;
    enum { KV_INIT = 2, FORWARD = 5 };
    const struct wire_hdr unknown = {.op = 99};
    expect_refused(&unknown, 1, NULL, 0, "unknown step plan op 99");
    const struct wire_hdr far = {.op = FORWARD, .kv_id = 70, .n_tokens = 1, .n_seqs = 1};
    expect_refused(&far, 1, NULL, 0, "names KV cache 70");
    const struct wire_hdr not_held = {.op = FORWARD, .kv_id = 3, .n_tokens = 1, .n_seqs = 1};
    expect_refused(&not_held, 1, NULL, 0, "does not hold");
    const struct wire_hdr twice[2] = {{.op = KV_INIT, .kv_id = 2, .a = 4, .b = 2},
                                      {.op = KV_INIT, .kv_id = 2, .a = 4, .b = 2}};
    expect_refused(twice, 2, NULL, 0, "created twice");
    const struct wire_hdr counts[2] = {{.op = KV_INIT, .kv_id = 0, .a = 4, .b = 2},
                                       {.op = FORWARD, .kv_id = 0, .n_tokens = 2, .n_logits = 3, .n_seqs = 1}};
    expect_refused(counts, 2, NULL, 0, "forward plan with 2 tokens, 3 logits rows");
    /* body: tok, pos, seq, tlen, table (int32), padding to 8 bytes, then slot (int64); the table
     * length says 2, the header 1 */
    const struct wire_hdr tables[2] = {{.op = KV_INIT, .kv_id = 0, .a = 4, .b = 2},
                                       {.op = FORWARD, .kv_id = 0, .n_tokens = 1, .n_seqs = 1, .table_total = 1}};
    int32_t body[8] = {5, 0, 0, 2, 0, 0, 0, 0};
    expect_refused(tables, 2, body, sizeof(body), "block tables hold 2 entries, the header says 1");
    int32_t body2[8] = {5, 0, 1, 1, 0, 0, 0, 0}; /* sequence 1 of 1 */
    expect_refused(tables, 2, body2, sizeof(body2), "token 0 has sequence 1");
}

/* The multi-rank shard's step on a rank of DP group 1 of 2 (struct hy_model_dist filled by hand: the
 * step reads only the group fields). A sequence's group is its first block id mod 2. */
static void test_dp_dummy_steps(void **state)
{
    (void)state;
    static struct hy_model m;
    struct hy_model_dist d;
    memset(&d, 0, sizeof(d));
    d.dp_size = 2;
    d.dp_rank = 1;
    m.dist = &d;
    int32_t t0[1] = {4}, t1[1] = {6};
    const int32_t *tables[2] = {t0, t1};
    const int32_t tok[3] = {5, 6, 7}, pos[3] = {0, 1, 0}, seq[3] = {0, 0, 1}, rows[1] = {2};
    const int64_t slot[3] = {64, 65, 96};
    const struct hy_batch b = {3, tok, pos, slot, seq, tables, 1, rows, 0};
    const int64_t stats0 = hy_dist_stats()->dummy_steps;
    assert_int_equal(hy_shard_mpi_ops.step(&m, &b), 0); /* blocks 4 and 6: both sequences in group 0 */
    assert_int_equal(d.n_loc, 0);
    assert_int_equal(d.steps, 1);
    assert_int_equal(d.dummy_steps, 1);
    assert_int_equal(hy_dist_stats()->dummy_steps, stats0 + 1);
    t1[0] = 7; /* sequence 1 now starts in group 1: its one token is this group's sub-batch */
    assert_int_equal(hy_shard_mpi_ops.step(&m, &b), 0);
    assert_int_equal(d.n_loc, 1);
    assert_int_equal(d.loc_row[0], 2);
    assert_int_equal(d.loc_pos[0], 0);
    assert_int_equal(d.loc_seq[0], 1);
    assert_int_equal(d.loc_slot[0], 96);
    assert_int_equal(d.steps, 2);
    assert_int_equal(d.dummy_steps, 1);
    assert_int_equal(hy_dist_stats()->dummy_steps, stats0 + 1);
    free(d.grp);
    free(d.loc_row);
    free(d.loc_pos);
    free(d.loc_seq);
    free(d.loc_slot);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plans_reach_every_rank),
        cmocka_unit_test(test_malformed_plans_refused),
        cmocka_unit_test(test_dp_dummy_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
