/* lockstep.c - step plans from the leader, executed by the worker ranks (lockstep.h). */
#include "model/lockstep.h"

#include "model/shard.h"

#include "base/err.h"
#include "base/log.h"

#include <stdlib.h>
#include <string.h>

enum plan_op { OP_EXIT = 1, OP_KV_INIT, OP_KV_FREE, OP_RESERVE, OP_FORWARD, OP_FORWARD_MTP };

#define MAX_KV HY_DIST_MAX_KV

struct plan_hdr {
    int32_t op, kv_id, n_tokens, n_logits, n_seqs, table_total, want_logits, pad;
    int64_t a, b, c;
};

static int leader(const struct hy_model *m)
{
    return m->dist && m->dist->rank == 0 && m->dist->plan;
}

static int send_hdr(const struct hy_model *m, const struct plan_hdr *h)
{
    struct plan_hdr c = *h;
    return hy_comm_bcast_idle(m->dist->plan, &c, sizeof(c), 0);
}

/* Body layout: tokens, positions, seq ids, logits rows, table lengths, tables (int32), slots
 * (int64), hidden rows (f32). */
static size_t body_bytes(const struct plan_hdr *h, int64_t H)
{
    const size_t n = (size_t)h->n_tokens;
    size_t b = (3 * n + (size_t)h->n_logits + (size_t)h->n_seqs + (size_t)h->table_total) * sizeof(int32_t);
    b = (b + 7) & ~(size_t)7;
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
    size_t off = (3 * n + (size_t)h->n_logits + (size_t)h->n_seqs + (size_t)h->table_total) * sizeof(int32_t);
    off = (off + 7) & ~(size_t)7;
    v->slots = (int64_t *)(buf + off);
    v->hidden = (float *)(buf + off + n * sizeof(int64_t));
}

int hy_lockstep_send_forward(struct hy_model *m, const struct hy_kv_cache *kv, const struct hy_batch *b,
                             const float *hidden_in, int want_logits)
{
    if (!leader(m))
        return 0;
    const int64_t H = m->cfg.hidden_size, n = b->n_tokens;
    struct plan_hdr h = {.op = hidden_in ? OP_FORWARD_MTP : OP_FORWARD,
                         .kv_id = kv->dist_id,
                         .n_tokens = b->n_tokens,
                         .n_logits = b->n_logits,
                         .want_logits = want_logits,
                         .pad = b->mtp_zero_pos0 != 0}; /* forward ops: pad carries the MTP position-0 rule */
    for (int64_t t = 0; t < n; t++)
        if (b->seq_ids[t] + 1 > h.n_seqs)
            h.n_seqs = b->seq_ids[t] + 1;
    int32_t *tlen = calloc((size_t)h.n_seqs + 1, sizeof(int32_t));
    if (!tlen)
        return hy_err_set("lockstep: out of memory");
    for (int64_t t = 0; t < n; t++) {
        const int32_t need = b->positions[t] / kv->block_size + 1;
        if (need > tlen[b->seq_ids[t]])
            tlen[b->seq_ids[t]] = need;
    }
    for (int32_t i = 0; i < h.n_seqs; i++)
        h.table_total += tlen[i];
    const size_t bytes = body_bytes(&h, H);
    uint8_t *buf = malloc(bytes);
    if (!buf) {
        free(tlen);
        return hy_err_set("lockstep: out of memory for a %zu-byte step plan", bytes);
    }
    struct body_view v;
    body_map(&h, buf, &v);
    memcpy(v.tok, b->token_ids, (size_t)n * sizeof(int32_t));
    memcpy(v.pos, b->positions, (size_t)n * sizeof(int32_t));
    memcpy(v.seq, b->seq_ids, (size_t)n * sizeof(int32_t));
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
    int rc = send_hdr(m, &h) || hy_comm_bcast_idle(m->dist->plan, buf, bytes, 0);
    free(buf);
    free(tlen);
    return rc ? -1 : 0;
}

int hy_lockstep_kv_init(const struct hy_model *m, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks,
                        enum hy_dtype kv_dtype)
{
    if (!m->dist)
        return 0;
    if (!leader(m))
        return 0;
    int32_t id = 0;
    while (id < MAX_KV && m->dist->kv_used[id])
        id++;
    if (id == MAX_KV)
        return hy_err_set("lockstep: more than %d KV caches alive at once", MAX_KV);
    m->dist->kv_used[id] = 1;
    kv->dist_id = id;
    struct plan_hdr h = {.op = OP_KV_INIT, .kv_id = kv->dist_id, .a = block_size, .b = n_blocks, .c = kv_dtype};
    h.pad = kv->scale_fit;
    return send_hdr(m, &h);
}

int hy_lockstep_kv_free(struct hy_model *m, const struct hy_kv_cache *kv)
{
    if (!leader(m))
        return 0;
    struct plan_hdr h = {.op = OP_KV_FREE, .kv_id = kv->dist_id};
    m->dist->kv_used[kv->dist_id] = 0;
    return send_hdr(m, &h);
}

int hy_lockstep_reserve(struct hy_model *m, int64_t max_tokens, int32_t max_ctx)
{
    if (!leader(m))
        return 0;
    struct plan_hdr h = {.op = OP_RESERVE, .a = max_tokens, .b = max_ctx};
    return send_hdr(m, &h);
}

/* One line per rank at the end of a job: the same collective count and log hash on every rank of a
 * lockstep run (the tests compare them). */
static void log_done(const struct hy_model *m)
{
    const struct hy_dist_stats *st = hy_dist_stats();
    hy_log_info("dist: rank %d done: %lld collectives, log hash %016llx, %lld steps, dummy steps %lld", m->dist->rank,
                (long long)st->n, (unsigned long long)st->log_hash, (long long)m->dist->steps,
                (long long)st->dummy_steps);
}

void hy_lockstep_exit(struct hy_model *m)
{
    if (!leader(m) || !m->dist->ready) /* a load that failed half-way: the job is being aborted */
        return;
    struct plan_hdr h = {.op = OP_EXIT};
    send_hdr(m, &h);
    log_done(m);
}

void hy_model_kv_cache_free(struct hy_model *m, struct hy_kv_cache *kv)
{
    if (m && kv->k && hy_lockstep_kv_free(m, kv))
        hy_dist_abort(1, "lockstep: %s", hy_err_msg());
    hy_kv_cache_free(kv);
}

/* A forward plan's header as the leader could have sent it; -1 with hy_err_msg() naming the field. */
static int check_forward_hdr(const struct hy_kv_cache *kvs, const struct plan_hdr *h)
{
    if (h->n_tokens < 1 || h->n_logits < 0 || h->n_logits > h->n_tokens || h->n_seqs < 1 || h->n_seqs > h->n_tokens ||
        h->table_total < 0)
        return hy_err_set("lockstep: forward plan with %d tokens, %d logits rows, %d sequences, %d table entries",
                          h->n_tokens, h->n_logits, h->n_seqs, h->table_total);
    if (!kvs[h->kv_id].k)
        return hy_err_set("lockstep: forward plan names KV cache %d, which this rank does not hold", h->kv_id);
    return 0;
}

/* The body's own consistency: table lengths add up, sequence ids and logits rows in range. */
static int check_body(const struct plan_hdr *h, const struct body_view *v)
{
    int64_t total = 0;
    for (int32_t i = 0; i < h->n_seqs; i++) {
        if (v->tlen[i] < 0)
            return hy_err_set("lockstep: sequence %d has a block table of %d entries", i, v->tlen[i]);
        total += v->tlen[i];
    }
    if (total != h->table_total)
        return hy_err_set("lockstep: block tables hold %lld entries, the header says %d", (long long)total,
                          h->table_total);
    for (int32_t t = 0; t < h->n_tokens; t++)
        if (v->seq[t] < 0 || v->seq[t] >= h->n_seqs || v->pos[t] < 0)
            return hy_err_set("lockstep: token %d has sequence %d / position %d", t, v->seq[t], v->pos[t]);
    for (int32_t i = 0; i < h->n_logits; i++)
        if (v->rows[i] < 0 || v->rows[i] >= h->n_tokens)
            return hy_err_set("lockstep: logits row %d outside the %d tokens", v->rows[i], h->n_tokens);
    return 0;
}

static int run_forward(struct hy_model *m, struct hy_kv_cache *kvs, const struct plan_hdr *h)
{
    if (check_forward_hdr(kvs, h))
        return -1;
    const size_t bytes = body_bytes(h, m->cfg.hidden_size);
    uint8_t *buf = malloc(bytes ? bytes : 1);
    const int32_t **tables = calloc((size_t)h->n_seqs + 1, sizeof(*tables));
    if (!buf || !tables) {
        free(buf);
        free(tables);
        return hy_err_set("lockstep: out of memory for a %zu-byte step plan", bytes);
    }
    memset(buf, 0, bytes);
    struct body_view v;
    body_map(h, buf, &v);
    int rc = hy_comm_bcast_idle(m->dist->plan, buf, bytes, 0) || check_body(h, &v);
    const int32_t *tp = v.tables;
    for (int32_t i = 0; i < h->n_seqs && !rc; i++) {
        tables[i] = tp;
        tp += v.tlen[i];
    }
    const struct hy_batch b = {h->n_tokens, v.tok, v.pos, v.slots, v.seq, tables, h->n_logits, v.rows, h->pad != 0};
    m->dist->want_logits = h->want_logits;
    struct hy_kv_cache *kv = &kvs[h->kv_id];
    if (!rc)
        rc = h->op == OP_FORWARD ? hy_model_forward(m, kv, &b, NULL, NULL)
                                 : hy_model_forward_mtp(m, kv, &b, v.hidden, NULL, NULL);
    m->dist->want_logits = 0;
    free(buf);
    free(tables);
    return rc;
}

int hy_model_worker_run(struct hy_model *m)
{
    struct hy_kv_cache *kvs = calloc(MAX_KV, sizeof(*kvs));
    if (!kvs)
        hy_dist_abort(1, "lockstep: out of memory");
    int rc = 0;
    for (;;) {
        struct plan_hdr h;
        memset(&h, 0, sizeof(h));
        if (hy_comm_bcast_idle(m->dist->plan, &h, sizeof(h), 0))
            hy_dist_abort(1, "lockstep: %s", hy_err_msg());
        if (h.op == OP_EXIT)
            break;
        if (h.op != OP_RESERVE && (h.kv_id < 0 || h.kv_id >= MAX_KV))
            hy_dist_abort(1, "lockstep: step plan names KV cache %d", h.kv_id);
        switch (h.op) {
        case OP_KV_INIT:
            if (kvs[h.kv_id].k)
                hy_dist_abort(1, "lockstep: KV cache %d created twice", h.kv_id);
            rc = hy_model_kv_cache_init_dtype(m, &kvs[h.kv_id], (int32_t)h.a, (int32_t)h.b, (enum hy_dtype)h.c);
            kvs[h.kv_id].scale_fit = h.pad;
            break;
        case OP_KV_FREE:
            hy_kv_cache_free(&kvs[h.kv_id]);
            break;
        case OP_RESERVE:
            rc = hy_model_reserve(m, h.a, (int32_t)h.b);
            break;
        case OP_FORWARD:
        case OP_FORWARD_MTP:
            rc = run_forward(m, kvs, &h);
            break;
        default:
            hy_dist_abort(1, "lockstep: unknown step plan op %d", h.op);
        }
        if (rc)
            hy_dist_abort(1, "rank %d: %s", m->dist->rank, hy_err_msg());
    }
    for (int i = 0; i < MAX_KV; i++)
        hy_kv_cache_free(&kvs[i]);
    free(kvs);
    log_done(m);
    return 0;
}
