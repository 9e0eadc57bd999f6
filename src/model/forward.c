/* forward.c - the entry points of the batch-first forward pass (model.h): scratch reservation, batch
 * checks, the attention-DP sub-batch of a multi-rank step, and the main model / layer range / MTP
 * layer passes, which run the architecture's embedding, layers and head (arch.h) over the shared
 * building blocks (layers.h).
 */
#include "model/model.h"

#include "model/arch.h"
#include "model/layers.h"

#include "base/err.h"
#include "base/timing.h"
#include "kernels/kernels.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* hy_model_reserve on this rank only (the forward pass grows its scratch with it: a step plan is
 * already out, so nothing else may be broadcast then). */
static int reserve_local(struct hy_model *m, int64_t max_tokens, int32_t max_ctx)
{
    if (max_tokens < 1 || max_ctx < 1)
        return hy_err_set("forward: cannot reserve for %lld tokens and %d positions", (long long)max_tokens, max_ctx);
    struct hy_forward_scratch *old = m->fwd;
    const int32_t thr = omp_get_max_threads() > 0 ? omp_get_max_threads() : 1;
    if (old && old->T >= max_tokens && old->max_ctx >= max_ctx && old->n_thr >= thr)
        return 0;
    if (old) { /* grow to cover both */
        max_tokens = old->T > max_tokens ? old->T : max_tokens;
        max_ctx = old->max_ctx > max_ctx ? old->max_ctx : max_ctx;
    }
    if (m->shard_ops->reserve(m, max_tokens))
        return -1;
    const int32_t n_thr = old && old->n_thr > thr ? old->n_thr : thr;
    struct hy_forward_scratch *s = hy_layers_scratch_new(m, max_tokens, max_ctx, n_thr);
    if (!s)
        return hy_err_set("forward: out of memory for the activations of %lld tokens (context %d, %d threads)",
                          (long long)max_tokens, max_ctx, n_thr);
    hy_layers_scratch_free(old);
    m->fwd = s;
    return 0;
}

int hy_model_reserve(struct hy_model *m, int64_t max_tokens, int32_t max_ctx)
{
    if (max_tokens < 1 || max_ctx < 1)
        return hy_err_set("forward: cannot reserve for %lld tokens and %d positions", (long long)max_tokens, max_ctx);
    if (hy_model_check_tokens(m, max_tokens))
        return -1;
    return reserve_local(m, max_tokens, max_ctx);
}

void hy_model_release_scratch(struct hy_model *m)
{
    hy_layers_scratch_free(m->fwd);
    m->fwd = NULL;
}

/* The model's scratch, grown first if batch b needs more (only when the caller did not reserve
 * enough with hy_model_reserve); NULL with hy_err_msg() on out of memory. */
static struct hy_forward_scratch *scratch_for(struct hy_model *m, const struct hy_batch *b)
{
    int32_t max_ctx = 1;
    for (int32_t t = 0; t < b->n_tokens; t++)
        if (b->positions[t] + 1 > max_ctx)
            max_ctx = b->positions[t] + 1;
    return reserve_local(m, b->n_tokens, max_ctx) ? NULL : m->fwd;
}

static int check_batch(const struct hy_model *m, const struct hy_kv_cache *kv, const struct hy_batch *b)
{
    const int64_t slots = (int64_t)kv->n_blocks * kv->block_size;
    if (b->n_tokens <= 0)
        return hy_err_set("forward: empty batch");
    for (int32_t t = 0; t < b->n_tokens; t++) {
        if (b->token_ids[t] < 0 || b->token_ids[t] >= m->cfg.vocab_size)
            return hy_err_set("token id %d is outside the vocabulary [0, %d)", b->token_ids[t], m->cfg.vocab_size);
        if (b->positions[t] < 0)
            return hy_err_set("negative position %d", b->positions[t]);
        if (b->slot_mapping[t] < 0 || b->slot_mapping[t] >= slots)
            return hy_err_set("slot %lld outside the KV cache (%lld slots)", (long long)b->slot_mapping[t],
                              (long long)slots);
    }
    for (int32_t i = 0; i < b->n_logits; i++)
        if (b->logits_rows[i] < 0 || b->logits_rows[i] >= b->n_tokens)
            return hy_err_set("logits row %d outside the batch", b->logits_rows[i]);
    return 0;
}

int hy_model_check_tokens(const struct hy_model *m, int64_t n_tokens)
{
    return m->shard_ops->check_tokens(m, n_tokens);
}

int hy_model_check_step(const struct hy_model *m, const struct hy_kv_cache *kv, const struct hy_batch *b, int mtp)
{
    if (mtp && !m->has_mtp)
        return hy_err_set("this model has no MTP layer");
    return check_batch(m, kv, b) || hy_model_check_tokens(m, b->n_tokens) ? -1 : 0;
}

int hy_model_forward(struct hy_model *m, struct hy_kv_cache *kv, const struct hy_batch *b, float *logits,
                     float *hidden_out)
{
    if (hy_model_check_step(m, kv, b, 0) || m->shard_ops->step(m, b))
        return -1;
    struct hy_model_prof *prof = prof_of(m);
    double before[HY_STAGE_COUNT], t0 = prof_start(prof);
    if (prof)
        memcpy(before, prof->sec, sizeof(before));
    const int64_t T = b->n_tokens;
    struct hy_forward_scratch *s = scratch_for(m, b);
    if (!s)
        return -1;
    float *x = s->x;
    const struct hy_arch_ops *a = m->arch;
    a->embed(m, b, x, s);
    for (int L = 0; L < m->cfg.num_hidden_layers; L++)
        a->layer(m, kv, L, b, x, s);
    const int rc = hy_layers_head(m, a->head(m, x, T, s), m->final_norm, b, logits, hidden_out, s);
    hy_layers_prof_finish(prof, t0, before, T);
    return rc;
}

int64_t hy_model_stream_width(const struct hy_model *m)
{
    return (int64_t)m->cfg.hidden_size * m->arch->streams(&m->cfg);
}

int hy_model_forward_layers(struct hy_model *m, struct hy_kv_cache *kv, const struct hy_batch *b, float *x,
                            int32_t from, int32_t to, float *hidden_out)
{
    const int32_t n_layers = m->cfg.num_hidden_layers;
    if (from < 0 || from > to || to > n_layers)
        return hy_err_set("forward: layers [%d, %d) outside [0, %d]", from, to, n_layers);
    if (m->dist)
        return hy_err_set("forward: a range of layers (calibration) runs in one process only, not under mpirun");
    if (check_batch(m, kv, b))
        return -1;
    struct hy_forward_scratch *s = scratch_for(m, b);
    if (!s)
        return -1;
    const int64_t T = b->n_tokens;
    const struct hy_arch_ops *a = m->arch;
    if (from == 0) /* the residual stream entering layer 0, as hy_model_forward */
        a->embed(m, b, x, s);
    for (int L = from; L < to; L++)
        a->layer(m, kv, L, b, x, s);
    if (to < n_layers || !hidden_out)
        return 0;
    return hy_layers_head(m, a->head(m, x, T, s), m->final_norm, b, NULL, hidden_out, s);
}

int hy_model_forward_mtp(struct hy_model *m, struct hy_kv_cache *kv, const struct hy_batch *b, const float *hidden_in,
                         float *logits, float *hidden_out)
{
    if (hy_model_check_step(m, kv, b, 1) || m->shard_ops->step(m, b))
        return -1;
    struct hy_model_prof *prof = prof_of(m);
    double before[HY_STAGE_COUNT], t0 = prof_start(prof);
    if (prof)
        memcpy(before, prof->sec, sizeof(before));
    const struct hy_model_config *c = &m->cfg;
    const int L = c->num_hidden_layers;
    const struct hy_layer *ly = &m->layers[L];
    const int64_t T = b->n_tokens, H = c->hidden_size;
    struct hy_forward_scratch *s = scratch_for(m, b);
    if (!s)
        return -1;
    float *x = s->x;
    /* u = eh_proj · [enorm(embed(tok)); hnorm(h)]  (embedding first, spec §4.1) */
    hy_layers_embed(m, b->token_ids, T, x);
    for (int64_t t = 0; t < T; t++) {
        if (b->mtp_zero_pos0 && b->positions[t] == 0)
            memset(x + t * H, 0, (size_t)H * sizeof(float));
        hy_rmsnorm(s->tmp + t * 2 * H, x + t * H, ly->enorm, 1, H, c->rms_norm_eps);
        hy_rmsnorm(s->tmp + t * 2 * H + H, hidden_in + t * H, ly->hnorm, 1, H, c->rms_norm_eps);
    }
    maybe_round(m, s->tmp, T * 2 * H);
    linear(m, x, s->tmp, T, &ly->eh_proj);
    maybe_round(m, x, T * H);
    m->arch->mtp_block(m, kv, L, b, x, s);
    int rc = hy_layers_head(m, x, ly->final_norm, b, logits, hidden_out, s);
    hy_layers_prof_finish(prof, t0, before, T);
    return rc;
}
