/* executor.c - step plans from the leader, executed by the worker ranks (executor.h). */
#include "engine/executor.h"

#include "model/shard.h"

#include "base/assert.h"
#include "base/err.h"
#include "base/log.h"
#include "comm/comm.h"

#include <stdlib.h>
#include <string.h>

enum plan_op { OP_EXIT = 1, OP_KV_INIT, OP_KV_FREE, OP_RESERVE, OP_FORWARD, OP_FORWARD_MTP };

/* The header every plan starts with, broadcast as raw bytes between ranks of one build: its size and
 * layout are fixed (no padding to leave undefined), checked at compile time. */
struct plan_hdr {
    int32_t op, kv_id, n_tokens, n_logits, n_seqs, table_total;
    int32_t flag;    /* KV_INIT: the cache's scale_fit; forward ops: the batch's mtp_zero_pos0 */
    int32_t pad;     /* zero */
    int64_t a, b, c; /* KV_INIT: block_size, n_blocks, kv dtype; RESERVE: max_tokens, max_ctx */
};
_Static_assert(sizeof(struct plan_hdr) == 56, "step plan header: 8 int32 + 3 int64, no padding");
_Static_assert(offsetof(struct plan_hdr, a) == 32, "step plan header: int64 fields after the int32 ones");
_Static_assert(HY_EXEC_MAX_KV == HY_SHARD_MAX_KV, "the shard's kv_used array is the executor's");

static int one_process(const struct hy_executor *ex)
{
    return ex->bcast == NULL;
}

static int send_hdr(struct hy_executor *ex, const struct plan_hdr *h)
{
    struct plan_hdr c = *h;
    return ex->bcast(ex->chan_ctx, &c, sizeof(c));
}

/* Body layout: tokens, positions, seq ids, logits rows, table lengths, tables (int32), slots
 * (int64, 8-aligned), hidden rows (f32, MTP only). */
static size_t body_ints(const struct plan_hdr *h)
{
    return 3 * (size_t)h->n_tokens + (size_t)h->n_logits + (size_t)h->n_seqs + (size_t)h->table_total;
}

static size_t body_bytes(const struct plan_hdr *h, int64_t H)
{
    const size_t n = (size_t)h->n_tokens;
    size_t b = (body_ints(h) * sizeof(int32_t) + 7) & ~(size_t)7;
    b += n * sizeof(int64_t);
    if (h->op == OP_FORWARD_MTP)
        b += n * (size_t)H * sizeof(float);
    return b;
}

struct body_view {
    int32_t *tok, *pos, *seq, *rows, *tlen, *tables;
    int64_t *slots;
    float *hidden;
};

static void body_map(const struct plan_hdr *h, uint8_t *buf, struct body_view *v)
{
    const size_t n = (size_t)h->n_tokens;
    int32_t *p = (int32_t *)buf;
    v->tok = p;
    v->pos = p + n;
    v->seq = p + 2 * n;
    v->rows = p + 3 * n;
    v->tlen = v->rows + h->n_logits;
    v->tables = v->tlen + h->n_seqs;
    const size_t off = (body_ints(h) * sizeof(int32_t) + 7) & ~(size_t)7;
    v->slots = (int64_t *)(buf + off);
    v->hidden = (float *)(buf + off + n * sizeof(int64_t));
}

/* Leader: the plan of one forward step (the batch as the workers will see it). */
static int send_forward(struct hy_executor *ex, const struct hy_kv_cache *kv, const struct hy_batch *b,
                        const float *hidden_in)
{
    const int64_t H = ex->hidden_size, n = b->n_tokens;
    struct plan_hdr h = {.op = hidden_in ? OP_FORWARD_MTP : OP_FORWARD,
                         .kv_id = kv->dist_id,
                         .n_tokens = b->n_tokens,
                         .n_logits = b->n_logits,
                         .flag = b->mtp_zero_pos0 != 0};
    for (int64_t t = 0; t < n; t++)
        if (b->seq_ids[t] + 1 > h.n_seqs)
            h.n_seqs = b->seq_ids[t] + 1;
    int32_t *tlen = calloc((size_t)h.n_seqs + 1, sizeof(int32_t));
    if (!tlen)
        return hy_err_set("executor: out of memory");
    for (int64_t t = 0; t < n; t++) {
        const int32_t need = b->positions[t] / kv->block_size + 1;
        if (need > tlen[b->seq_ids[t]])
            tlen[b->seq_ids[t]] = need;
    }
    for (int32_t i = 0; i < h.n_seqs; i++)
        h.table_total += tlen[i];
    const size_t bytes = body_bytes(&h, H);
    uint8_t *buf = calloc(1, bytes);
    if (!buf) {
        free(tlen);
        return hy_err_set("executor: out of memory for a %zu-byte step plan", bytes);
    }
    struct body_view v;
    body_map(&h, buf, &v);
    memcpy(v.tok, b->token_ids, (size_t)n * sizeof(int32_t));
    memcpy(v.pos, b->positions, (size_t)n * sizeof(int32_t));
    memcpy(v.seq, b->seq_ids, (size_t)n * sizeof(int32_t));
    if (b->n_logits)
        memcpy(v.rows, b->logits_rows, (size_t)b->n_logits * sizeof(int32_t));
    memcpy(v.tlen, tlen, (size_t)h.n_seqs * sizeof(int32_t));
    int32_t *tp = v.tables;
    for (int32_t i = 0; i < h.n_seqs; i++) {
        if (tlen[i])
            memcpy(tp, b->block_tables[i], (size_t)tlen[i] * sizeof(int32_t));
        tp += tlen[i];
    }
    memcpy(v.slots, b->slot_mapping, (size_t)n * sizeof(int64_t));
    if (hidden_in)
        memcpy(v.hidden, hidden_in, (size_t)(n * H) * sizeof(float));
    const int rc = send_hdr(ex, &h) || ex->bcast(ex->chan_ctx, buf, bytes);
    free(buf);
    free(tlen);
    return rc ? -1 : 0;
}

static int step(struct hy_executor *ex, struct hy_kv_cache *kv, const struct hy_batch *b, const float *hidden_in,
                float *logits, float *hidden_out)
{
    if (one_process(ex))
        return ex->be->forward(ex->be_ctx, kv, b, hidden_in, logits, hidden_out);
    HY_ASSERT(ex->rank == 0);
    struct hy_batch sb = *b;
    if (!logits) /* no rank computes logits the leader does not take */
        sb.n_logits = 0;
    if (ex->be->check(ex->be_ctx, kv, &sb, hidden_in != NULL, sb.n_tokens))
        return -1;
    if (send_forward(ex, kv, &sb, hidden_in))
        hy_dist_abort(1, "executor: cannot send a step plan: %s", hy_err_msg());
    if (ex->be->forward(ex->be_ctx, kv, &sb, hidden_in, logits, hidden_out)) /* the workers are in this step */
        hy_dist_abort(1, "forward: %s", hy_err_msg());
    return 0;
}

int hy_executor_forward(struct hy_executor *ex, struct hy_kv_cache *kv, const struct hy_batch *b, float *logits,
                        float *hidden_out)
{
    return step(ex, kv, b, NULL, logits, hidden_out);
}

int hy_executor_forward_mtp(struct hy_executor *ex, struct hy_kv_cache *kv, const struct hy_batch *b,
                            const float *hidden_in, float *logits, float *hidden_out)
{
    HY_ASSERT(hidden_in != NULL);
    return step(ex, kv, b, hidden_in, logits, hidden_out);
}

int hy_executor_kv_cache_init(struct hy_executor *ex, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks,
                              enum hy_dtype kv_dtype)
{
    if (ex->be->kv_init(ex->be_ctx, kv, block_size, n_blocks, kv_dtype))
        return -1;
    if (one_process(ex))
        return 0;
    HY_ASSERT(ex->rank == 0);
    int32_t id = 0;
    while (id < HY_EXEC_MAX_KV && ex->kv_used[id])
        id++;
    if (id == HY_EXEC_MAX_KV) {
        ex->be->kv_free(ex->be_ctx, kv);
        return hy_err_set("executor: more than %d KV caches alive at once", HY_EXEC_MAX_KV);
    }
    ex->kv_used[id] = 1;
    kv->dist_id = id;
    const struct plan_hdr h = {
        .op = OP_KV_INIT, .kv_id = id, .flag = kv->scale_fit, .a = block_size, .b = n_blocks, .c = kv_dtype};
    if (send_hdr(ex, &h))
        hy_dist_abort(1, "executor: cannot send a step plan: %s", hy_err_msg());
    return 0;
}

void hy_executor_kv_cache_free(struct hy_executor *ex, struct hy_kv_cache *kv)
{
    if (!one_process(ex) && kv->k) {
        HY_ASSERT(ex->rank == 0 && kv->dist_id >= 0 && kv->dist_id < HY_EXEC_MAX_KV && ex->kv_used[kv->dist_id]);
        const struct plan_hdr h = {.op = OP_KV_FREE, .kv_id = kv->dist_id};
        ex->kv_used[kv->dist_id] = 0;
        if (send_hdr(ex, &h))
            hy_dist_abort(1, "executor: cannot send a step plan: %s", hy_err_msg());
    }
    ex->be->kv_free(ex->be_ctx, kv);
}

int hy_executor_reserve(struct hy_executor *ex, int64_t max_tokens, int32_t max_ctx)
{
    if (!one_process(ex)) {
        HY_ASSERT(ex->rank == 0);
        if (max_tokens < 1 || max_ctx < 1)
            return hy_err_set("forward: cannot reserve for %lld tokens and %d positions", (long long)max_tokens,
                              max_ctx);
        const struct plan_hdr h = {.op = OP_RESERVE, .a = max_tokens, .b = max_ctx};
        if (ex->be->check(ex->be_ctx, NULL, NULL, 0, max_tokens))
            return -1;
        if (send_hdr(ex, &h))
            hy_dist_abort(1, "executor: cannot send a step plan: %s", hy_err_msg());
    }
    return ex->be->reserve(ex->be_ctx, max_tokens, max_ctx);
}

void hy_executor_exit(struct hy_executor *ex)
{
    if (one_process(ex))
        return;
    HY_ASSERT(ex->rank == 0);
    const struct plan_hdr h = {.op = OP_EXIT};
    if (send_hdr(ex, &h))
        hy_log_error("executor: cannot tell the workers the job ended: %s", hy_err_msg());
    if (ex->be->finish)
        ex->be->finish(ex->be_ctx, ex->rank);
}

/* Sequence ids of a plan are the step's entry indices, and a step may leave entries out: an MTP
 * chain step carries only the requests still drafting (engine/spec.c), so one token of entry 1
 * makes n_seqs 2. The bound only guards the block-table allocation against a corrupt header. */
#define MAX_PLAN_SEQS (1 << 20)

/* A forward plan's header as the leader could have sent it; -1 with hy_err_msg() naming the field. */
static int check_forward_hdr(const struct hy_kv_cache *kvs, const struct plan_hdr *h)
{
    if (h->n_tokens < 1 || h->n_logits < 0 || h->n_logits > h->n_tokens || h->n_seqs < 1 || h->n_seqs > MAX_PLAN_SEQS ||
        h->table_total < 0)
        return hy_err_set("executor: forward plan with %d tokens, %d logits rows, %d sequences, %d table entries",
                          h->n_tokens, h->n_logits, h->n_seqs, h->table_total);
    if (!kvs[h->kv_id].k)
        return hy_err_set("executor: forward plan names KV cache %d, which this rank does not hold", h->kv_id);
    return 0;
}

/* The body's own consistency: table lengths add up, sequence ids and logits rows in range. */
static int check_body(const struct plan_hdr *h, const struct body_view *v)
{
    int64_t total = 0;
    for (int32_t i = 0; i < h->n_seqs; i++) {
        if (v->tlen[i] < 0)
            return hy_err_set("executor: sequence %d has a block table of %d entries", i, v->tlen[i]);
        total += v->tlen[i];
    }
    if (total != h->table_total)
        return hy_err_set("executor: block tables hold %lld entries, the header says %d", (long long)total,
                          h->table_total);
    for (int32_t t = 0; t < h->n_tokens; t++)
        if (v->seq[t] < 0 || v->seq[t] >= h->n_seqs || v->pos[t] < 0)
            return hy_err_set("executor: token %d has sequence %d / position %d", t, v->seq[t], v->pos[t]);
    for (int32_t i = 0; i < h->n_logits; i++)
        if (v->rows[i] < 0 || v->rows[i] >= h->n_tokens)
            return hy_err_set("executor: logits row %d outside the %d tokens", v->rows[i], h->n_tokens);
    return 0;
}

static int run_forward(struct hy_executor *ex, struct hy_kv_cache *kvs, const struct plan_hdr *h)
{
    if (check_forward_hdr(kvs, h))
        return -1;
    const size_t bytes = body_bytes(h, ex->hidden_size);
    uint8_t *buf = calloc(1, bytes ? bytes : 1);
    const int32_t **tables = calloc((size_t)h->n_seqs + 1, sizeof(*tables));
    if (!buf || !tables) {
        free(buf);
        free(tables);
        return hy_err_set("executor: out of memory for a %zu-byte step plan", bytes);
    }
    struct body_view v;
    body_map(h, buf, &v);
    int rc = ex->bcast(ex->chan_ctx, buf, bytes) || check_body(h, &v);
    const int32_t *tp = v.tables;
    for (int32_t i = 0; i < h->n_seqs && !rc; i++) {
        tables[i] = tp;
        tp += v.tlen[i];
    }
    const struct hy_batch b = {h->n_tokens, v.tok, v.pos, v.slots, v.seq, tables, h->n_logits, v.rows, h->flag != 0};
    if (!rc)
        rc = ex->be->forward(ex->be_ctx, &kvs[h->kv_id], &b, h->op == OP_FORWARD_MTP ? v.hidden : NULL, NULL, NULL);
    free(buf);
    free(tables);
    return rc;
}

static int run_plan(struct hy_executor *ex, struct hy_kv_cache *kvs, const struct plan_hdr *h)
{
    if (h->op != OP_RESERVE && (h->kv_id < 0 || h->kv_id >= HY_EXEC_MAX_KV))
        return hy_err_set("executor: step plan names KV cache %d", h->kv_id);
    switch (h->op) {
    case OP_KV_INIT:
        if (kvs[h->kv_id].k)
            return hy_err_set("executor: KV cache %d created twice", h->kv_id);
        if (ex->be->kv_init(ex->be_ctx, &kvs[h->kv_id], (int32_t)h->a, (int32_t)h->b, (enum hy_dtype)h->c))
            return -1;
        kvs[h->kv_id].scale_fit = h->flag;
        return 0;
    case OP_KV_FREE:
        ex->be->kv_free(ex->be_ctx, &kvs[h->kv_id]);
        return 0;
    case OP_RESERVE:
        return ex->be->reserve(ex->be_ctx, h->a, (int32_t)h->b);
    case OP_FORWARD:
    case OP_FORWARD_MTP:
        return run_forward(ex, kvs, h);
    default:
        return hy_err_set("executor: unknown step plan op %d", h->op);
    }
}

int hy_executor_worker_run(struct hy_executor *ex)
{
    HY_ASSERT(!one_process(ex) && ex->rank > 0);
    struct hy_kv_cache *kvs = calloc(HY_EXEC_MAX_KV, sizeof(*kvs));
    if (!kvs)
        return hy_err_set("executor: out of memory");
    int rc = 0;
    for (;;) {
        struct plan_hdr h;
        memset(&h, 0, sizeof(h));
        if ((rc = ex->bcast(ex->chan_ctx, &h, sizeof(h))) != 0 || h.op == OP_EXIT || (rc = run_plan(ex, kvs, &h)) != 0)
            break;
    }
    for (int i = 0; i < HY_EXEC_MAX_KV; i++)
        if (kvs[i].k)
            ex->be->kv_free(ex->be_ctx, &kvs[i]);
    free(kvs);
    if (rc)
        return -1;
    if (ex->be->finish)
        ex->be->finish(ex->be_ctx, ex->rank);
    return 0;
}

void hy_executor_init_with(struct hy_executor *ex, const struct hy_exec_backend *be, void *be_ctx, int64_t hidden_size,
                           hy_exec_bcast_fn bcast, void *chan_ctx, int rank, uint8_t *kv_used)
{
    HY_ASSERT(be && (!bcast || (rank >= 0 && (rank > 0 || kv_used))));
    *ex = (struct hy_executor){be, be_ctx, hidden_size, bcast, chan_ctx, bcast ? rank : 0, kv_used};
}

/* The model backend: hy_model_* with the step watchdog of a multi-rank job around each forward step. */

static int model_check(void *ctx, const struct hy_kv_cache *kv, const struct hy_batch *b, int mtp, int64_t n_tokens)
{
    const struct hy_model *m = ctx;
    return b ? hy_model_check_step(m, kv, b, mtp) : hy_model_check_tokens(m, n_tokens);
}

static int model_kv_init(void *ctx, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks,
                         enum hy_dtype kv_dtype)
{
    return hy_model_kv_cache_init_dtype(ctx, kv, block_size, n_blocks, kv_dtype);
}

static void model_kv_free(void *ctx, struct hy_kv_cache *kv)
{
    (void)ctx;
    hy_kv_cache_free(kv);
}

static int model_reserve(void *ctx, int64_t max_tokens, int32_t max_ctx)
{
    return hy_model_reserve(ctx, max_tokens, max_ctx);
}

static int model_forward(void *ctx, struct hy_kv_cache *kv, const struct hy_batch *b, const float *hidden_in,
                         float *logits, float *hidden_out)
{
    struct hy_model *m = ctx;
    if (m->dist)
        hy_dist_step_begin();
    const int rc = hidden_in ? hy_model_forward_mtp(m, kv, b, hidden_in, logits, hidden_out)
                             : hy_model_forward(m, kv, b, logits, hidden_out);
    if (m->dist)
        hy_dist_step_end();
    return rc;
}

/* One line per rank at the end of a job: the same collective count and log hash on every rank of a
 * lockstep run (tests/dist compare them). */
static void model_finish(void *ctx, int rank)
{
    const struct hy_model *m = ctx;
    const struct hy_dist_stats *st = hy_dist_stats();
    hy_log_info("dist: rank %d done: %lld collectives, log hash %016llx, %lld steps, dummy steps %lld", rank,
                (long long)st->n, (unsigned long long)st->log_hash, (long long)m->dist->steps,
                (long long)st->dummy_steps);
}

static const struct hy_exec_backend model_backend = {
    model_check, model_kv_init, model_kv_free, model_reserve, model_forward, model_finish,
};

static int comm_bcast(void *chan_ctx, void *buf, size_t bytes)
{
    return hy_comm_bcast_idle(chan_ctx, buf, bytes, 0);
}

void hy_executor_init(struct hy_executor *ex, struct hy_model *m)
{
    if (!m->dist) {
        hy_executor_init_with(ex, &model_backend, m, m->cfg.hidden_size, NULL, NULL, 0, NULL);
        return;
    }
    hy_executor_init_with(ex, &model_backend, m, m->cfg.hidden_size, comm_bcast, m->dist->plan, m->dist->rank,
                          m->dist->kv_used);
}
