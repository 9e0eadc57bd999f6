/* shard.c - one rank's slice of the weights and its group communicators (shard.h). */
#include "model/shard.h"

#include "model/model.h"

#include "base/assert.h"
#include "base/err.h"
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hy_shard_part(int64_t total, int parts, int i, int64_t *lo, int64_t *n)
{
    const int64_t a = total * i / parts, b = total * (i + 1) / parts;
    *lo = a;
    *n = b - a;
}

float *hy_shard_buf(struct hy_model_dist *d, enum hy_shard_slot slot, size_t floats)
{
    HY_ASSERT(slot >= 0 && slot < HY_SLOT_COUNT);
    if (floats == 0)
        floats = 1;
    if (d->cap[slot] < floats) {
        float *p = realloc(d->buf[slot], floats * sizeof(float));
        if (!p) {
            hy_err_set("dist: out of memory for %zu staging floats", floats);
            return NULL;
        }
        d->buf[slot] = p;
        d->cap[slot] = floats;
    }
    return d->buf[slot];
}

/* Rows [r0, r0 + n) of t as a view (the quantization scales move with their rows). */
static void slice_rows(struct hy_tensor *t, int64_t r0, int64_t n)
{
    if (!t->data)
        return;
    t->data = (const uint8_t *)t->data + r0 * hy_tensor_row_bytes(t);
    if (t->qscheme == HY_QS_MX32)
        t->mx_scales += r0 * ((t->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK);
    if (t->row_scale)
        t->row_scale += r0;
    if (t->row_bias)
        t->row_bias += r0;
    t->rows = n;
}

static void drop(struct hy_tensor *t)
{
    t->data = NULL;
    t->mx_scales = NULL;
    t->rows = 0;
}

static int own(struct hy_model_dist *d, void *p)
{
    if (d->n_owned == d->cap_owned) {
        int cap = d->cap_owned ? d->cap_owned * 2 : 64;
        void **o = realloc(d->owned, (size_t)cap * sizeof(void *));
        if (!o)
            return hy_err_set("dist: out of memory");
        d->owned = o;
        d->cap_owned = cap;
    }
    d->owned[d->n_owned++] = p;
    return 0;
}

/* Columns [c0, c0 + n) of t copied into an owned buffer (the sum mode's row-parallel matrices). */
static int slice_cols(struct hy_model_dist *d, struct hy_tensor *t, int64_t c0, int64_t n, const char *what)
{
    if (!t->data)
        return 0;
    const int f4 = t->dtype == HY_DTYPE_F4_E2M1;
    if (t->qscheme == HY_QS_W8A8_STATIC) /* quant_bias folds the offset over all K columns: it cannot be split */
        return hy_err_set("dist: %s is static W8A8; use the exact combine (--tp-combine exact) for this checkpoint",
                          what);
    if ((t->qscheme == HY_QS_MX32 && (c0 % HY_MX_BLOCK || (n % HY_MX_BLOCK && c0 + n != t->cols))) ||
        (f4 && (c0 % 2 || n % 2)))
        return hy_err_set("dist: %s columns [%lld, %lld) do not fall on the %s block boundaries; use the exact "
                          "combine (--tp-combine exact) for this checkpoint",
                          what, (long long)c0, (long long)(c0 + n), f4 ? "MXFP4" : "MX");
    struct hy_tensor s = *t;
    s.cols = n;
    const int64_t rb_old = hy_tensor_row_bytes(t), rb = hy_tensor_row_bytes(&s);
    const int64_t off = f4 ? c0 / 2 : c0 * (int64_t)hy_dtype_size(t->dtype);
    uint8_t *data = malloc((size_t)(t->rows * rb) + 1);
    if (!data || own(d, data)) {
        free(data);
        return hy_err_set("dist: out of memory slicing %s", what);
    }
    for (int64_t r = 0; r < t->rows; r++)
        memcpy(data + r * rb, (const uint8_t *)t->data + r * rb_old + off, (size_t)rb);
    s.data = data;
    if (t->qscheme == HY_QS_MX32) {
        const int64_t nb_old = (t->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK, nb = (n + HY_MX_BLOCK - 1) / HY_MX_BLOCK;
        uint8_t *sc = malloc((size_t)(t->rows * nb) + 1);
        if (!sc || own(d, sc)) {
            free(sc);
            return hy_err_set("dist: out of memory slicing %s", what);
        }
        for (int64_t r = 0; r < t->rows; r++)
            memcpy(sc + r * nb, t->mx_scales + r * nb_old + c0 / HY_MX_BLOCK, (size_t)nb);
        s.mx_scales = sc;
    }
    *t = s;
    return 0;
}

/* A SwiGLU MLP split over `parts` ranks by intermediate width: gate/up rows; down by output rows
 * (exact: the full intermediate is gathered first) or by input columns (sum). */
static int shard_mlp(struct hy_model_dist *d, struct hy_expert *e, int parts, int i, int sum, const char *what)
{
    if (!e->gate.data || parts == 1)
        return 0;
    int64_t c0, nc, r0, nr;
    hy_shard_part(e->gate.rows, parts, i, &c0, &nc);
    slice_rows(&e->gate, c0, nc);
    slice_rows(&e->up, c0, nc);
    if (sum)
        return slice_cols(d, &e->down, c0, nc, what);
    hy_shard_part(e->down.rows, parts, i, &r0, &nr);
    slice_rows(&e->down, r0, nr);
    return 0;
}

static int make_groups(struct hy_model_dist *d)
{
    const struct hy_parallel_config *p = &d->par;
    const int r = d->rank;
    return hy_comm_dup(d->world, &d->plan) || hy_comm_split(d->world, r / p->attn_tp_size, r, &d->attn) ||
           hy_comm_split(d->world, r % p->attn_tp_size, r, &d->dp) ||
           hy_comm_split(d->world, r / p->dense_tp_size, r, &d->dense) ||
           hy_comm_split(d->world, r / p->embed_tp_size, r, &d->embed) ||
           hy_comm_split(d->world, r / p->lmhead_tp_size, r, &d->lmhead) ||
           hy_comm_split(d->world, r / p->moe_tp_size, r, &d->moe);
}

/* Local heads of the attention TP group; -1 with the reason when the sizes do not fit. */
static int plan_heads(struct hy_model_dist *d, const struct hy_model_config *c)
{
    const int n = d->par.attn_tp_size, i = d->rank % n;
    const int32_t nh = c->num_attention_heads, nkv = c->arch == HY_ARCH_HY_V4 ? 1 : c->num_key_value_heads;
    if (nh % n)
        return hy_err_set("parallel_config: attn_tp_size %d does not divide num_attention_heads %d", n, nh);
    if (n <= nkv ? nkv % n : n % nkv)
        return hy_err_set("parallel_config: attn_tp_size %d and num_key_value_heads %d: one must divide the other", n,
                          nkv);
    d->nh = nh / n;
    d->q_head0 = i * d->nh;
    d->nkv = n <= nkv ? nkv / n : 1;
    d->kv_head0 = n <= nkv ? i * d->nkv : i / (n / nkv);
    hy_shard_part(c->hidden_size, n, i, &d->o_row0, &d->o_rows);
    return 0;
}

/* hy_v4 MLA heads [q_head0, q_head0 + nh) of a layer (spec hy4_architecture.md §6): q_b and kv_b rows and
 * the precomputed W_UK^T by head, the gate rows and sinks of those heads; o_proj by the heads' input columns
 * (sum) or by output rows (exact, after the heads' outputs are gathered). The latent projections (q_a, kv_a),
 * the indexer and the cache rows stay whole: every rank keeps the full latent cache. */
static int shard_mla(struct hy_model *m, struct hy_layer *ly, int L)
{
    struct hy_model_dist *d = m->dist;
    const struct hy_v4_config *v = &m->cfg.v4;
    const int64_t h0 = d->q_head0, nh = d->nh, dn = v->qk_nope_head_dim, dqk = dn + v->qk_rope_head_dim,
                  dv = v->v_head_dim, rkv = v->kv_lora_rank;
    char what[96];
    if (d->par.attn_tp_size == 1)
        return 0;
    slice_rows(&ly->q_b, h0 * dqk, nh * dqk);
    slice_rows(&ly->kv_b, h0 * (dn + dv), nh * (dn + dv));
    slice_rows(&ly->attn_gate, h0 * dv, nh * dv);
    float *uk = malloc((size_t)(nh * rkv * dn) * sizeof(float) + 1), *sink = NULL;
    if (ly->sink && !(sink = malloc((size_t)nh * sizeof(float))))
        uk = (free(uk), NULL);
    if (!uk)
        return hy_err_set("dist: out of memory");
    memcpy(uk, ly->w_uk_t + h0 * rkv * dn, (size_t)(nh * rkv * dn) * sizeof(float));
    free(ly->w_uk_t);
    ly->w_uk_t = uk;
    if (ly->sink) {
        memcpy(sink, ly->sink + h0, (size_t)nh * sizeof(float));
        free(ly->sink);
        ly->sink = sink;
    }
    snprintf(what, sizeof(what), "layer %d o_proj", L);
    if (d->sum)
        return slice_cols(d, &ly->wo, h0 * dv, nh * dv, what);
    slice_rows(&ly->wo, d->o_row0, d->o_rows);
    return 0;
}

static int shard_layer(struct hy_model *m, struct hy_layer *ly, int L)
{
    struct hy_model_dist *d = m->dist;
    const struct hy_model_config *c = &m->cfg;
    const int64_t D = c->head_dim;
    char what[96];
    if (c->arch == HY_ARCH_HY_V4) {
        if (shard_mla(m, ly, L))
            return -1;
    } else {
        slice_rows(&ly->wq, (int64_t)d->q_head0 * D, (int64_t)d->nh * D);
        slice_rows(&ly->wk, (int64_t)d->kv_head0 * D, (int64_t)d->nkv * D);
        slice_rows(&ly->wv, (int64_t)d->kv_head0 * D, (int64_t)d->nkv * D);
    }
    if (c->arch != HY_ARCH_HY_V4 && d->par.attn_tp_size > 1 && !d->par.enable_sp) { /* SP keeps o_proj whole */
        snprintf(what, sizeof(what), "layer %d o_proj", L);
        if (d->sum ? slice_cols(d, &ly->wo, (int64_t)d->q_head0 * D, (int64_t)d->nh * D, what)
                   : (slice_rows(&ly->wo, d->o_row0, d->o_rows), 0))
            return -1;
    }
    const int dn = d->par.dense_tp_size, di = d->rank % dn;
    snprintf(what, sizeof(what), "layer %d mlp.down_proj", L);
    if (shard_mlp(d, &ly->mlp, dn, di, d->sum, what))
        return -1;
    snprintf(what, sizeof(what), "layer %d shared_mlp.down_proj", L);
    if (shard_mlp(d, &ly->shared, dn, di, d->sum, what))
        return -1;
    for (int32_t e = 0; ly->experts && e < c->num_experts; e++) {
        struct hy_expert *x = &ly->experts[e];
        if (e < d->e0 || e >= d->e0 + d->ne) {
            drop(&x->gate);
            drop(&x->up);
            drop(&x->down);
            continue;
        }
        snprintf(what, sizeof(what), "layer %d expert %d down_proj", L, e);
        if (shard_mlp(d, x, d->moe_tp, d->moe_tp_rank, d->sum, what))
            return -1;
    }
    return 0;
}

/* The static V scales of the local KV heads only. */
static int shard_v_scales(struct hy_model *m)
{
    const struct hy_model_dist *d = m->dist;
    const int32_t nl = m->cfg.num_hidden_layers + (m->cfg.num_nextn_predict_layers > 0);
    for (int32_t L = 0; m->v_cache_scale && L < nl; L++) {
        float *v = m->v_cache_scale[L];
        if (!v)
            continue;
        float *s = malloc((size_t)d->nkv * sizeof(float));
        if (!s)
            return hy_err_set("dist: out of memory");
        memcpy(s, v + d->kv_head0, (size_t)d->nkv * sizeof(float));
        free(v);
        m->v_cache_scale[L] = s;
    }
    return 0;
}

/* What hy_v4 runs over several ranks: attention TP over all of them (no attention-DP groups, no sequence
 * parallel yet); dense / expert / vocabulary splits as for hy_v3. */
static int check_v4_layout(const struct hy_model_dist *d)
{
    if (d->par.attn_tp_size != d->size)
        return hy_err_set("parallel_config: hy_v4 (Hy4-preview) runs attention tensor parallel over all %d ranks "
                          "(attn_tp_size %d); attention data parallel (--data-parallel-size > 1) is not implemented "
                          "for it yet",
                          d->size, d->par.attn_tp_size);
    if (d->par.enable_sp)
        return hy_err_set("parallel_config: enable_sp (sequence-parallel o_proj) is not implemented for hy_v4 yet");
    return 0;
}

int hy_model_shard(struct hy_model *m, struct hy_comm *world, const struct hy_parallel_config *par)
{
    const struct hy_model_config *c = &m->cfg;
    struct hy_model_dist *d = calloc(1, sizeof(*d));
    if (!d)
        return hy_err_set("dist: out of memory");
    m->dist = d;
    d->par = *par;
    d->world = world;
    d->rank = hy_comm_rank(world);
    d->size = hy_comm_size(world);
    if (d->size > HY_SHARD_MAX_RANKS)
        return hy_err_set("dist: %d ranks; at most %d are supported", d->size, HY_SHARD_MAX_RANKS);
    if (hy_parallel_check(&d->par, d->size) || (c->arch == HY_ARCH_HY_V4 && check_v4_layout(d)))
        return -1;
    d->sum = d->par.combine_sum;
    d->dispatch = hy_parallel_dispatch(&d->par, c->num_experts_per_tok);
    d->dp_size = d->size / d->par.attn_tp_size;
    d->dp_rank = d->rank / d->par.attn_tp_size;
    d->moe_tp = d->par.moe_tp_size;
    d->moe_ep = d->size / d->moe_tp;
    d->ep_rank = d->rank / d->moe_tp;
    d->moe_tp_rank = d->rank % d->moe_tp;
    if (plan_heads(d, c))
        return -1;
    if (c->num_experts > 0) {
        if (c->num_experts % d->moe_ep)
            return hy_err_set("parallel_config: expert parallel size %d (world_size / moe_tp_size) does not divide "
                              "num_experts %d",
                              d->moe_ep, c->num_experts);
        d->ne = c->num_experts / d->moe_ep;
        d->e0 = d->ep_rank * d->ne;
    }
    hy_shard_part(c->vocab_size, d->par.embed_tp_size, d->rank % d->par.embed_tp_size, &d->v0, &d->nv);
    hy_shard_part(c->vocab_size, d->par.lmhead_tp_size, d->rank % d->par.lmhead_tp_size, &d->lv0, &d->lnv);
    d->lm_compute = d->rank / d->par.lmhead_tp_size == 0;
    if (make_groups(d))
        return -1;
    slice_rows(&m->embed, d->v0, d->nv);
    if (d->lm_compute)
        slice_rows(&m->lm_head, d->lv0, d->lnv);
    else
        drop(&m->lm_head);
    const int32_t nl = c->num_hidden_layers + (m->has_mtp ? 1 : 0);
    for (int32_t L = 0; L < nl; L++)
        if (shard_layer(m, &m->layers[L], L))
            return -1;
    if (shard_v_scales(m))
        return -1;
    hy_log_info("dist: rank %d/%d: attention heads %d-%d (KV %d-%d), DP group %d/%d, experts %d-%d (moe_tp %d), "
                "vocab %lld-%lld, lm_head %s, combine %s, dispatch %s",
                d->rank, d->size, d->q_head0, d->q_head0 + d->nh - 1, d->kv_head0, d->kv_head0 + d->nkv - 1, d->dp_rank,
                d->dp_size, d->e0, d->e0 + d->ne - 1, d->moe_tp, (long long)d->v0, (long long)(d->v0 + d->nv - 1),
                d->lm_compute ? "computed" : "skipped", d->sum ? "sum" : "exact", hy_moe_dispatch_name(d->dispatch));
    return 0;
}

void hy_model_shard_free(struct hy_model *m)
{
    struct hy_model_dist *d = m->dist;
    if (!d)
        return;
    for (int i = 0; i < d->n_owned; i++)
        free(d->owned[i]);
    free(d->owned);
    for (int i = 0; i < HY_SLOT_COUNT; i++)
        free(d->buf[i]);
    free(d->grp);
    free(d->loc_row);
    free(d->loc_pos);
    free(d->loc_seq);
    free(d->loc_slot);
    hy_comm_free(d->moe);
    hy_comm_free(d->lmhead);
    hy_comm_free(d->embed);
    hy_comm_free(d->dense);
    hy_comm_free(d->dp);
    hy_comm_free(d->attn);
    hy_comm_free(d->plan);
    free(d);
    m->dist = NULL;
}

int32_t hy_model_dp_groups(const struct hy_model *m)
{
    return m->dist ? m->dist->dp_size : 1;
}

int hy_shard_reserve(struct hy_model *m, int64_t T)
{
    struct hy_model_dist *d = m->dist;
    const struct hy_model_config *c = &m->cfg;
    const int64_t H = c->hidden_size, K = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
    int64_t wide = (int64_t)c->num_attention_heads * (c->arch == HY_ARCH_HY_V4 ? c->v4.v_head_dim : c->head_dim);
    const int64_t shared = (int64_t)c->moe_intermediate_size * (c->num_shared_experts > 0 ? c->num_shared_experts : 1);
    wide = wide > H ? wide : H;
    wide = wide > c->intermediate_size ? wide : c->intermediate_size;
    wide = wide > shared ? wide : shared;
    const int64_t pairs = c->num_experts > 0 ? T * K * H : T * H;
    const size_t want[HY_SLOT_COUNT] = {(size_t)(T * wide), (size_t)(T * H), (size_t)(T * H), (size_t)pairs,
                                        (size_t)pairs,      (size_t)pairs,   (size_t)pairs,   (size_t)(T * H),
                                        (size_t)(T * wide), (size_t)(T * H)};
    for (int i = 0; i < HY_SLOT_COUNT; i++) {
        const size_t had = d->cap[i];
        float *b = hy_shard_buf(d, (enum hy_shard_slot)i, want[i]);
        if (!b)
            return -1;
        if (d->cap[i] > had)
            memset(b, 0, d->cap[i] * sizeof(float));
    }
    return 0;
}

int hy_shard_check_tokens(const struct hy_model *m, int64_t T)
{
    const struct hy_model_dist *d = m->dist;
    const struct hy_model_config *c = &m->cfg;
    const int64_t H = c->hidden_size, K = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
    int64_t wide = (int64_t)c->num_attention_heads * (c->arch == HY_ARCH_HY_V4 ? c->v4.v_head_dim : c->head_dim);
    wide = wide > c->intermediate_size ? wide : c->intermediate_size;
    wide = wide > H ? wide : H;
    const int64_t lim = INT32_MAX, gather = T * wide * 4, pairs = c->num_experts > 0 && !d->sum ? T * K * H * 4 : 0;
    if (gather > lim)
        return hy_err_set("dist: a step of %lld tokens gathers %lld bytes of activations in one exchange, above MPI's "
                          "%lld; lower --max-num-batched-tokens (or the prompt length per step)",
                          (long long)T, (long long)gather, (long long)lim);
    if (pairs > lim)
        return hy_err_set("dist: a step of %lld tokens moves %lld bytes of expert outputs (%lld tokens x top-%lld x "
                          "hidden %lld x 4 B) in one exchange, above MPI's %lld; lower --max-num-batched-tokens to "
                          "%lld or less, or use the sum combine (--tp-combine sum)",
                          (long long)T, (long long)pairs, (long long)T, (long long)K, (long long)H, (long long)lim,
                          (long long)(lim / (K * H * 4)));
    return 0;
}
