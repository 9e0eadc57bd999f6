/* shard_ops.c - the forward pass split over the ranks of an mpirun job (struct hy_shard_ops of shard.h,
 * hy_shard_mpi_ops): vocabulary-parallel embedding and lm_head, attention-DP sub-batches, the o_proj
 * combines of attention TP (sequence parallel, exact gathers, or rank-order sums), the dense TP MLP and
 * the MoE exchange (moe_dist.c). Each one falls back to the one-process block (layers.c) where its
 * group has one rank. */
#include "model/shard.h"

#include "model/exchange.h"
#include "model/layers.h"
#include "model/moe_dist.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

static void embed_mpi(const struct hy_model *m, const int32_t *ids, int64_t T, float *x)
{
    struct hy_model_dist *d = m->dist;
    if (d->par.embed_tp_size <= 1) {
        hy_layers_embed_local(m, ids, T, x);
        return;
    }
    const int64_t H = m->cfg.hidden_size; /* vocabulary split: each row from the rank that holds it */
    float *mine = hy_shard_buf(d, HY_SLOT_OUT, (size_t)(T * H));
    if (!mine)
        dist_ok(-1);
    int64_t n = 0;
    for (int64_t t = 0; t < T; t++)
        if (ids[t] >= d->v0 && ids[t] < d->v0 + d->nv)
            for (int64_t i = 0; i < H; i++, n++)
                mine[n] = hy_tensor_get(&m->embed, ids[t] - d->v0, i);
    dist_ok(hy_exchange_gather_vocab_rows(d, d->embed, ids, T, m->cfg.vocab_size, H, mine, x));
}

static void ffn_mpi(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, int64_t I,
                    float *ga, float *gb, float *y)
{
    if (m->dist->par.dense_tp_size > 1)
        hy_moe_dist_ffn(m, e, x, T, I, m->dist->dense, ga, gb, y);
    else
        hy_layers_ffn_local(m, e, x, T, ga, gb, y);
}

static void experts_mpi(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
                        struct hy_forward_scratch *s, double t0)
{
    struct hy_model_prof *prof = prof_of(m);
    const double shared0 = prof ? prof->sec[HY_STAGE_SHARED] : 0.0;
    hy_moe_dist_moe(m, ly, x, T, s);
    if (prof) /* the routed stage without the shared expert moe_dist timed inside it */
        prof->sec[HY_STAGE_ROUTED] += hy_time_now() - t0 - (prof->sec[HY_STAGE_SHARED] - shared0);
}

/* With attention-DP groups, each group runs its own sequences (the sub-batch hy_model_forward prepared
 * in m->dist) and the groups' output rows are gathered; a group with no tokens this step runs none (a
 * dummy step) but joins the gather. */
static const float *attention_mpi(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b,
                                  const float *x, struct hy_forward_scratch *s, hy_attn_core_fn core)
{
    struct hy_model_dist *d = m->dist;
    if (d->dp_size <= 1) {
        core(m, kv, L, b, x, s);
        return s->tmp;
    }
    const int64_t T = b->n_tokens, H = m->cfg.hidden_size, n = d->n_loc;
    float *xs = hy_shard_buf(d, HY_SLOT_OUT, (size_t)(n * H)), *all = hy_shard_buf(d, HY_SLOT_SEND, (size_t)(T * H));
    if (!xs || !all)
        dist_ok(-1);
    for (int64_t i = 0; i < n; i++)
        memcpy(xs + i * H, x + (int64_t)d->loc_row[i] * H, (size_t)H * sizeof(float));
    const struct hy_batch sb = {(int32_t)n, NULL, d->loc_pos, d->loc_slot, d->loc_seq, b->block_tables, 0, NULL, 0};
    if (n > 0)
        core(m, kv, L, &sb, xs, s);
    dist_ok(hy_exchange_dp_rows(d, d->grp, T, H, s->tmp, all));
    return all;
}

/* This rank's heads (shard.c) put together over the attention TP group: sequence parallel (head
 * outputs to token slices, o_proj whole, rows gathered; hy_v3 only), sum (o_proj on this rank's head
 * columns, partials added in rank order) or exact (every head's output gathered, this rank's o_proj
 * rows, gathered). */
static void attn_out_mpi(const struct hy_model *m, const struct hy_tensor *wo, const float *att, int64_t T,
                         int64_t width, struct hy_forward_scratch *s, float *out)
{
    struct hy_model_dist *d = m->dist;
    const int64_t H = m->cfg.hidden_size;
    if (d->par.attn_tp_size <= 1) {
        linear(m, out, att, T, wo);
    } else if (d->par.enable_sp) {
        const int n = hy_comm_size(d->attn), me = hy_comm_rank(d->attn);
        const int64_t W = width, w = width / m->cfg.num_attention_heads * d->nh;
        int64_t lo, cnt, my_lo, my_n;
        size_t sc[HY_SHARD_MAX_RANKS], rc[HY_SHARD_MAX_RANKS], gc[HY_SHARD_MAX_RANKS];
        hy_shard_part(T, n, me, &my_lo, &my_n);
        for (int r = 0; r < n; r++) {
            hy_shard_part(T, n, r, &lo, &cnt);
            sc[r] = (size_t)(cnt * w) * sizeof(float);
            rc[r] = (size_t)(my_n * w) * sizeof(float);
            gc[r] = (size_t)(cnt * H) * sizeof(float);
        }
        float *rows = hy_shard_buf(d, HY_SLOT_FULL, (size_t)(my_n * W));
        if (!rows)
            dist_ok(-1);
        dist_ok(hy_comm_alltoallv(d->attn, att, sc, s->q, rc)); /* s->q, s->a: free after the attention */
        for (int r = 0; r < n; r++)                             /* rank r's heads are columns [r*w, (r+1)*w) */
            for (int64_t t = 0; t < my_n; t++)
                memcpy(rows + t * W + r * w, s->q + ((int64_t)r * my_n + t) * w, (size_t)w * sizeof(float));
        linear(m, s->a, rows, my_n, wo);
        dist_ok(hy_comm_allgatherv(d->attn, s->a, out, gc));
    } else if (d->sum) {
        linear(m, out, att, T, wo);
        dist_ok(hy_exchange_sum_rows(d, d->attn, out, T, H, out));
    } else {
        float *full = hy_shard_buf(d, HY_SLOT_FULL, (size_t)(T * width)),
              *part = hy_shard_buf(d, HY_SLOT_PART, (size_t)(T * H));
        if (!full || !part)
            dist_ok(-1);
        dist_ok(hy_exchange_gather_cols(d, d->attn, att, T, width, full));
        linear(m, part, full, T, wo);
        dist_ok(hy_exchange_gather_cols(d, d->attn, part, T, H, out));
    }
}

/* Every rank of the leader's lm_head group computes its vocabulary slice; only the leader stores
 * logits (the executor sends no logits rows when it takes none). */
static int logits_here_mpi(const struct hy_model *m, const float *logits)
{
    (void)logits;
    return m->dist->lm_compute;
}

static void lm_head_mpi(const struct hy_model *m, const float *rows, int64_t n, float *logits)
{
    struct hy_model_dist *d = m->dist;
    const int64_t H = m->cfg.hidden_size;
    if (d->par.lmhead_tp_size > 1) { /* vocabulary slices, gathered on the leader (world rank 0) */
        /* in chunks of rows of at most 1 GiB of logits (MPI counts are ints; every rank chunks alike) */
        const int64_t NL = n, V = m->cfg.vocab_size,
                      step = (INT64_C(1) << 30) / (V * 4) > 0 ? (INT64_C(1) << 30) / (V * 4) : 1;
        const int n = hy_comm_size(d->lmhead);
        size_t counts[HY_SHARD_MAX_RANKS];
        for (int64_t r0 = 0; r0 < NL; r0 += step) {
            const int64_t nl = NL - r0 < step ? NL - r0 : step;
            float *part = hy_shard_buf(d, HY_SLOT_ROWS, (size_t)(nl * d->lnv)),
                  *all = hy_shard_buf(d, HY_SLOT_OUT, (size_t)(nl * V));
            if (!part || !all)
                dist_ok(-1);
            linear(m, part, rows + r0 * H, nl, &m->lm_head);
            for (int r = 0; r < n; r++) {
                int64_t lo, w;
                hy_shard_part(V, n, r, &lo, &w);
                counts[r] = (size_t)(nl * w) * sizeof(float);
            }
            dist_ok(hy_comm_gatherv(d->lmhead, part, all, counts, 0));
            if (!logits)
                continue;
            const float *src = all;
            for (int r = 0; r < n; r++) {
                int64_t lo, w;
                hy_shard_part(V, n, r, &lo, &w);
                for (int64_t i = 0; i < nl; i++)
                    memcpy(logits + (r0 + i) * V + lo, src + i * w, (size_t)w * sizeof(float));
                src += nl * w;
            }
        }
    } else if (logits) {
        linear(m, logits, rows, n, &m->lm_head); /* fp32 logits (enable_lm_head_fp32) */
    }
}

static int check_tokens_mpi(const struct hy_model *m, int64_t T)
{
    return hy_shard_check_tokens(m, T);
}

static int reserve_mpi(struct hy_model *m, int64_t T)
{
    return hy_shard_reserve(m, T);
}

/* A step begins: counted, and with attention-DP groups the sub-batch of this rank's group for batch b
 * (token groups and the positions, slots and sequences of its own tokens; none: a dummy step). */
static int step_mpi(struct hy_model *m, const struct hy_batch *b)
{
    struct hy_model_dist *d = m->dist;
    const int64_t T = b->n_tokens;
    d->steps++;
    if (d->dp_size == 1)
        return 0;
    if (d->loc_cap < T) {
        free(d->grp);
        free(d->loc_row);
        free(d->loc_pos);
        free(d->loc_seq);
        free(d->loc_slot);
        d->grp = malloc((size_t)T * sizeof(int32_t));
        d->loc_row = malloc((size_t)T * sizeof(int32_t));
        d->loc_pos = malloc((size_t)T * sizeof(int32_t));
        d->loc_seq = malloc((size_t)T * sizeof(int32_t));
        d->loc_slot = malloc((size_t)T * sizeof(int64_t));
        d->loc_cap = T;
        if (!d->grp || !d->loc_row || !d->loc_pos || !d->loc_seq || !d->loc_slot) {
            d->loc_cap = 0;
            return hy_err_set("dist: out of memory for the sub-batch of %lld tokens", (long long)T);
        }
    }
    hy_exchange_token_groups(d, T, b->seq_ids, b->block_tables, d->grp);
    d->n_loc = 0;
    for (int64_t t = 0; t < T; t++)
        if (d->grp[t] == d->dp_rank) {
            d->loc_row[d->n_loc] = (int32_t)t;
            d->loc_pos[d->n_loc] = b->positions[t];
            d->loc_seq[d->n_loc] = b->seq_ids[t];
            d->loc_slot[d->n_loc++] = b->slot_mapping[t];
        }
    if (d->n_loc == 0) {
        d->dummy_steps++;
        hy_dist_stats()->dummy_steps++;
    }
    return 0;
}

const struct hy_shard_ops hy_shard_mpi_ops = {
    .check_tokens = check_tokens_mpi,
    .reserve = reserve_mpi,
    .step = step_mpi,
    .embed = embed_mpi,
    .ffn = ffn_mpi,
    .experts = experts_mpi,
    .attention = attention_mpi,
    .attn_out = attn_out_mpi,
    .logits_here = logits_here_mpi,
    .lm_head = lm_head_mpi,
};
