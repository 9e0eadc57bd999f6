/* latency.c - timed prefill and decode runs of `hyinfer bench latency` (latency.h). */
#include "bench/latency.h"

#include "base/err.h"
#include "base/timing.h"
#include "bench/context_fill.h"
#include "bench/util.h"
#include "engine/executor.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* out = after - before (the counters of hy_dist_stats only grow between resets). */
static void comm_delta(const struct hy_dist_stats *before, const struct hy_dist_stats *after,
                       struct hy_bench_comm_phase *out)
{
    for (int k = 0; k < HY_COLL_COUNT; k++) {
        out->calls[k] = after->calls[k] - before->calls[k];
        out->bytes[k] = after->bytes[k] - before->bytes[k];
        out->sec[k] = after->sec[k] - before->sec[k];
    }
    out->posted_sec = after->posted_sec - before->posted_sec;
    out->hidden_sec = after->hidden_sec - before->hidden_sec;
}

/* Touches one byte per page of every mapped checkpoint file so the timed runs do not pay page faults. */
void hy_bench_prefault_weights(const struct hy_model *m)
{
    uint64_t sum = 0;
    for (size_t f = 0; f < m->ck.n_files; f++) {
        const uint8_t *p = m->ck.files[f].map.data;
        const size_t n = m->ck.files[f].map.size;
        if (!p)
            continue;
#pragma omp parallel for reduction(+ : sum) schedule(static)
        for (size_t i = 0; i < n; i += 4096)
            sum += p[i];
    }
    volatile uint64_t keep = sum;
    (void)keep;
}

static int kv_elem_bytes(const struct hy_kv_cache *kv)
{
    return (int)hy_dtype_size(kv->dtype);
}

int hy_bench_run_prefill(struct hy_model *m, enum hy_dtype kv_dtype, int32_t len, uint64_t seed,
                         struct hy_bench_prefill *r)
{
    const int32_t bs = 16, nb = (len + bs - 1) / bs, V = m->cfg.vocab_size;
    struct hy_executor ex;
    hy_executor_init(&ex, m);
    struct hy_kv_cache kv;
    if (hy_executor_kv_cache_init(&ex, &kv, bs, nb, kv_dtype))
        return -1;
    int rc = -1;
    int32_t *ids = malloc((size_t)len * sizeof(int32_t)), *pos = malloc((size_t)len * sizeof(int32_t));
    int32_t *seq = calloc((size_t)len, sizeof(int32_t)), *table = malloc((size_t)nb * sizeof(int32_t));
    int64_t *slots = malloc((size_t)len * sizeof(int64_t));
    float *logits = malloc((size_t)V * sizeof(float));
    if (!ids || !pos || !seq || !table || !slots || !logits) {
        hy_err_set("bench: out of memory for a %d-token prefill", len);
        goto out;
    }
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int32_t i = 0; i < len; i++) {
        ids[i] = (int32_t)(hy_bench_xorshift(&st) % (uint64_t)V);
        pos[i] = i;
        slots[i] = i;
    }
    for (int32_t i = 0; i < nb; i++)
        table[i] = i;
    const int32_t *tables[1] = {table};
    int32_t last = len - 1;
    struct hy_batch b = {len, ids, pos, slots, seq, tables, 1, &last, 0};
    hy_model_prof_reset(m);
    const struct hy_dist_stats before = *hy_dist_stats();
    double t0 = hy_time_now();
    if (hy_executor_forward(&ex, &kv, &b, logits, NULL))
        goto out;
    r->secs = hy_time_now() - t0;
    comm_delta(&before, hy_dist_stats(), &r->comm);
    r->len = len;
    memcpy(r->stage, m->prof.sec, sizeof(r->stage));
    int32_t *ctx = pos; /* context length of token i = i + 1 */
    for (int32_t i = 0; i < len; i++)
        ctx[i] = i + 1;
    struct hy_bench_bytes by;
    hy_bench_account(m, m->prof.expert_hits, len, ctx, 1, kv_elem_bytes(&kv), &by, &r->flops);
    r->distinct_experts = by.distinct_experts;
    rc = 0;
out:
    free(ids);
    free(pos);
    free(seq);
    free(table);
    free(slots);
    free(logits);
    hy_executor_kv_cache_free(&ex, &kv);
    return rc;
}

static void bytes_add(struct hy_bench_bytes *d, const struct hy_bench_bytes *s)
{
    d->embed += s->embed;
    d->attn += s->attn;
    d->dense_mlp += s->dense_mlp;
    d->router += s->router;
    d->routed += s->routed;
    d->shared += s->shared;
    d->norms += s->norms;
    d->lm_head += s->lm_head;
    d->weights += s->weights;
    d->kv_read += s->kv_read;
    d->distinct_experts += s->distinct_experts;
    d->expert_selections += s->expert_selections;
}

int hy_bench_run_decode(struct hy_model *m, enum hy_dtype kv_dtype, int32_t batch, int32_t ctx0, int synthetic,
                        int32_t steps, uint64_t seed, struct hy_bench_decode *r)
{
    const int32_t bs = 16, V = m->cfg.vocab_size, total = ctx0 + steps + 1, bps = (total + bs - 1) / bs;
    const int32_t cap = batch * ctx0 > batch ? batch * ctx0 : batch;
    struct hy_executor ex;
    hy_executor_init(&ex, m);
    struct hy_kv_cache kv;
    if (hy_executor_kv_cache_init(&ex, &kv, bs, batch * bps, kv_dtype))
        return -1;
    int rc = -1;
    int32_t *ids = malloc((size_t)cap * sizeof(int32_t)), *pos = malloc((size_t)cap * sizeof(int32_t));
    int32_t *seq = malloc((size_t)cap * sizeof(int32_t)), *rows = malloc((size_t)batch * sizeof(int32_t));
    int32_t *tab = malloc((size_t)batch * (size_t)bps * sizeof(int32_t)),
            *ctx = malloc((size_t)batch * sizeof(int32_t));
    int64_t *slots = malloc((size_t)cap * sizeof(int64_t));
    const int32_t **tables = malloc((size_t)batch * sizeof(*tables));
    float *logits = malloc((size_t)batch * (size_t)V * sizeof(float));
    if (!ids || !pos || !seq || !rows || !tab || !ctx || !slots || !tables || !logits) {
        hy_err_set("bench: out of memory for a batch-%d decode", batch);
        goto out;
    }
    for (int32_t i = 0; i < batch * bps; i++)
        tab[i] = i;
    for (int32_t s = 0; s < batch; s++)
        tables[s] = tab + (size_t)s * bps;
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + 7;
    int32_t n = 0;
    for (int32_t s = 0; s < batch; s++)
        for (int32_t p = 0; p < ctx0; p++, n++) {
            ids[n] = (int32_t)(hy_bench_xorshift(&st) % (uint64_t)V);
            pos[n] = p;
            seq[n] = s;
            slots[n] = (int64_t)tables[s][p / bs] * bs + p % bs;
            if (p == ctx0 - 1)
                rows[s] = n;
        }
    if (ctx0 > 0 && synthetic) {
        hy_bench_fill_context(&kv, slots, n, seed);
    } else if (ctx0 > 0) {
        struct hy_batch pb = {n, ids, pos, slots, seq, tables, batch, rows, 0};
        if (hy_executor_forward(&ex, &kv, &pb, logits, NULL))
            goto out;
    }
    memset(r, 0, sizeof(*r));
    r->batch = batch;
    r->steps = steps;
    double timed = 0.0;
    struct hy_dist_stats before = *hy_dist_stats(); /* taken again before the first timed step */
    for (int32_t k = 0; k <= steps; k++) {          /* k = 0 is the warm-up step */
        const int32_t p = ctx0 + k;
        for (int32_t s = 0; s < batch; s++) {
            /* greedy next token keeps the inputs realistic; random when there are no logits yet */
            int32_t best = 0;
            if (k > 0 || (ctx0 > 0 && !synthetic)) {
                const float *lr = logits + (size_t)s * V;
                for (int32_t v = 1; v < V; v++)
                    if (lr[v] > lr[best])
                        best = v;
            } else {
                best = (int32_t)(hy_bench_xorshift(&st) % (uint64_t)V);
            }
            ids[s] = best;
            pos[s] = p;
            seq[s] = s;
            slots[s] = (int64_t)tables[s][p / bs] * bs + p % bs;
            rows[s] = s;
            ctx[s] = p + 1;
        }
        struct hy_batch db = {batch, ids, pos, slots, seq, tables, batch, rows, 0};
        hy_model_prof_reset(m);
        if (k == 1)
            before = *hy_dist_stats();
        double t0 = hy_time_now();
        if (hy_executor_forward(&ex, &kv, &db, logits, NULL))
            goto out;
        double dt = hy_time_now() - t0;
        if (k == 0)
            continue;
        timed += dt;
        for (int i = 0; i < HY_STAGE_COUNT; i++)
            r->stage[i] += m->prof.sec[i];
        struct hy_bench_bytes by;
        hy_bench_account(m, m->prof.expert_hits, batch, ctx, batch, kv_elem_bytes(&kv), &by, NULL);
        bytes_add(&r->bytes, &by);
    }
    comm_delta(&before, hy_dist_stats(), &r->comm);
    const double inv = steps > 0 ? 1.0 / steps : 0.0;
    for (int i = 0; i < HY_STAGE_COUNT; i++)
        r->stage[i] *= inv;
    double *bf[] = {&r->bytes.embed,  &r->bytes.attn,  &r->bytes.dense_mlp, &r->bytes.router,  &r->bytes.routed,
                    &r->bytes.shared, &r->bytes.norms, &r->bytes.lm_head,   &r->bytes.weights, &r->bytes.kv_read};
    for (size_t i = 0; i < sizeof(bf) / sizeof(bf[0]); i++)
        *bf[i] *= inv;
    r->step_s = timed * inv;
    r->tokens_per_s = timed > 0.0 ? (double)batch * steps / timed : 0.0;
    rc = 0;
out:
    free(ids);
    free(pos);
    free(seq);
    free(rows);
    free(tab);
    free(ctx);
    free(slots);
    free(tables);
    free(logits);
    hy_executor_kv_cache_free(&ex, &kv);
    return rc;
}
