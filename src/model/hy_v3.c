/* hy_v3.c - the Hy3 (`hy_v3`, spec hy3_architecture.md §2, MTP §4.1) and dense Llama layers: pre-norm
 * GQA attention with QK-norm and RoPE over the paged cache, then a dense SwiGLU MLP or the MoE block
 * (layers.c); the MTP layer is the same block. Batch-first: every token writes its K/V at its slot and
 * attends to its own sequence through the block table; per-token math never depends on the rest of
 * the batch (fixed reduction orders), which makes fp32 logits batch- and chunk-invariant.
 */
#include "model/arch.h"
#include "model/layers.h"

#include "kernels/attention.h"
#include "kernels/kernels.h"

#include <omp.h>
#include <string.h>

/* Attention sub-block without the residual add: s->tmp[T, H] = o_proj(attn(norm(x))) for the T rows
 * of batch b (rounded in bf16 mode). With ranks, this rank's heads only (shard.h), the o_proj output
 * put together over the attention TP group (exact: head outputs gathered, o_proj rows gathered; sum:
 * partials added in rank order). */
static void attn_core(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b, const float *x,
                      struct hy_forward_scratch *s)
{
    const struct hy_model_config *c = &m->cfg;
    const struct hy_layer *ly = &m->layers[L];
    const int64_t T = b->n_tokens, H = c->hidden_size, D = c->head_dim, nh = m->attn_heads, nkv = m->attn_kv_heads;
    hy_rmsnorm(s->a, x, ly->input_norm, T, H, c->rms_norm_eps);
    maybe_round(m, s->a, T * H);
    if (grouped_on(m, T)) { /* q, k, v in one parallel region: row bands of all three, one barrier */
        const struct hy_tensor *Ws[3] = {&ly->wq, &ly->wk, &ly->wv};
        float *ys[3] = {s->q, s->k, s->v};
        hy_layers_linear_bands(m, s->a, T, 3, Ws, ys);
    } else {
        linear(m, s->q, s->a, T, &ly->wq);
        linear(m, s->k, s->a, T, &ly->wk);
        linear(m, s->v, s->a, T, &ly->wv);
    }
    maybe_round(m, s->q, T * nh * D);
    maybe_round(m, s->k, T * nkv * D);
    maybe_round(m, s->v, T * nkv * D);
    if (ly->q_norm) { /* QK-norm per head, before RoPE (spec §2.2) */
        hy_rmsnorm(s->q, s->q, ly->q_norm, T * nh, D, c->rms_norm_eps);
        hy_rmsnorm(s->k, s->k, ly->k_norm, T * nkv, D, c->rms_norm_eps);
    }
    for (int64_t t = 0; t < T; t++) {
        hy_rope(s->q + t * nh * D, nh, D, b->positions[t], m->inv_freq, c->rope_interleaved);
        hy_rope(s->k + t * nkv * D, nkv, D, b->positions[t], m->inv_freq, c->rope_interleaved);
    }
    maybe_round(m, s->q, T * nh * D);
    maybe_round(m, s->k, T * nkv * D);
    const struct hy_kv_view view = hy_kv_cache_view(kv, L);
    hy_kv_write_batch(&view, T, b->slot_mapping, s->k, s->v);
    int32_t max_ctx = 1;
    for (int64_t t = 0; t < T; t++)
        if (b->positions[t] + 1 > max_ctx)
            max_ctx = b->positions[t] + 1;
    if (T == 1) { /* decode: the attention kernel splits the heads over the threads itself (a parallel
                     region opened inside an inactive one would start a new thread team every call) */
        hy_attend(&view, s->q, (int32_t)nh, b->block_tables[b->seq_ids[0]], b->positions[0] + 1, s->scores, s->att);
    } else {
#pragma omp parallel
        hy_layers_attend_runs(&view, b, s, (int32_t)nh, D);
    }
    maybe_round(m, s->att, T * nh * D);
    m->shard_ops->attn_out(m, &ly->wo, s->att, T, (int64_t)c->num_attention_heads * D, s, s->tmp);
    maybe_round(m, s->tmp, T * H);
}

/* Attention sub-block: x[T,H] += o_proj(attn(norm(x))), through the shard (attention-DP groups run
 * attn_core over their own sequences, shard.h). */
static void attention_forward(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b,
                              float *x, struct hy_forward_scratch *s)
{
    const int64_t T = b->n_tokens, H = m->cfg.hidden_size;
    const float *delta = m->shard_ops->attention(m, kv, L, b, x, s, attn_core);
    for (int64_t i = 0; i < T * H; i++)
        x[i] += delta[i];
    maybe_round(m, x, T * H);
}

/* One decoder block (pre-norm attention + pre-norm dense MLP or MoE), x[T,H] updated in place. */
static void layer_forward(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b, float *x,
                          struct hy_forward_scratch *s)
{
    const struct hy_model_config *c = &m->cfg;
    const struct hy_layer *ly = &m->layers[L];
    const int64_t T = b->n_tokens, H = c->hidden_size;
    struct hy_model_prof *prof = prof_of(m);
    double t0 = prof_start(prof);
    attention_forward(m, kv, L, b, x, s);
    prof_stop(prof, HY_STAGE_ATTENTION, t0);
    hy_rmsnorm(s->a, x, ly->post_norm, T, H, c->rms_norm_eps);
    maybe_round(m, s->a, T * H);
    if (ly->is_moe) {
        hy_layers_moe(m, ly, s->a, T, s);
    } else {
        t0 = prof_start(prof);
        hy_layers_ffn(m, &ly->mlp, s->a, T, c->intermediate_size, s->ff_a, s->ff_b, s->y);
        prof_stop(prof, HY_STAGE_DENSE_MLP, t0);
    }
    for (int64_t i = 0; i < T * H; i++)
        x[i] += s->y[i];
    maybe_round(m, x, T * H);
}

static void v3_embed(const struct hy_model *m, const struct hy_batch *b, float *x, struct hy_forward_scratch *s)
{
    (void)s;
    hy_layers_embed(m, b->token_ids, b->n_tokens, x);
}

static const float *v3_head(const struct hy_model *m, const float *x, int64_t T, struct hy_forward_scratch *s)
{
    (void)m;
    (void)T;
    (void)s;
    return x;
}

static int64_t v3_streams(const struct hy_model_config *c)
{
    (void)c;
    return 1;
}

static size_t v3_kv_token_bytes(const struct hy_model *m, enum hy_dtype dt)
{
    return hy_kv_cache_token_bytes(hy_arch_cache_layers(&m->cfg), m->attn_kv_heads, m->cfg.head_dim, dt,
                                   dt == HY_DTYPE_F8_E4M3 ? m->n_v_cache_scales : 0);
}

static int v3_kv_init(const struct hy_model *m, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks,
                      enum hy_dtype dt)
{
    return hy_kv_cache_init_ex(kv, hy_arch_cache_layers(&m->cfg), m->attn_kv_heads, m->cfg.head_dim, block_size,
                               n_blocks, dt, (const float *const *)m->v_cache_scale, -1);
}

const struct hy_arch_ops hy_v3_arch = {
    .name = "hy_v3",
    .bind = hy_v3_bind_all,
    .streams = v3_streams,
    .embed = v3_embed,
    .layer = layer_forward,
    .head = v3_head,
    .kv_token_bytes = v3_kv_token_bytes,
    .kv_init = v3_kv_init,
    .mtp_block = layer_forward,
};
