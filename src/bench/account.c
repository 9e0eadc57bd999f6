/* account.c - byte and FLOP accounting of a forward call (see account.h). */
#include "bench/account.h"

#include <string.h>

static double tbytes(const struct hy_tensor *t)
{
    return t->data ? (double)hy_tensor_bytes(t) : 0.0; /* quantized: elements + scales */
}

static double tparams(const struct hy_tensor *t)
{
    return t->data ? (double)t->rows * (double)t->cols : 0.0;
}

static double mlp_bytes(const struct hy_expert *e)
{
    return tbytes(&e->gate) + tbytes(&e->up) + tbytes(&e->down);
}

static double mlp_params(const struct hy_expert *e)
{
    return tparams(&e->gate) + tparams(&e->up) + tparams(&e->down);
}

/* hy_v4 attention of layer ly (spec hy4_architecture.md §6-§8, the absorbed form hy_v4.c runs): weight
 * bytes and projection parameters (q_a, q_b, kv_a, o_proj, gate, the W_UV rows of kv_b, the f32 W_UK^T
 * copy, the indexer on full layers, the hyper-connection fn matrices); the cache rows read (the selected
 * min(ctx, index_topk) latents + the indexer keys of every causal position on full layers) and the
 * attention-core FLOPs (logits over the 576-wide latent+rope key, the latent weighted sum, the indexer
 * scores). */
static void v4_attention(const struct hy_model *m, const struct hy_layer *ly, const int32_t *ctx, int32_t n_tokens,
                         int kv_elem_bytes, double *bytes, double *params, double *kv_read, double *core)
{
    const struct hy_model_config *c = &m->cfg;
    const struct hy_v4_config *v = &c->v4;
    const double nh = c->num_attention_heads, dn = v->qk_nope_head_dim, dv = v->v_head_dim, rkv = v->kv_lora_rank,
                 kw = v->kv_lora_rank + v->qk_rope_head_dim, HI = v->index_n_heads, dI = v->index_head_dim,
                 H = c->hidden_size, C = v->hc_mult;
    const struct hy_tensor *ts[] = {&ly->q_a, &ly->q_b, &ly->kv_a, &ly->wo, &ly->attn_gate, &ly->idx_wq_b, &ly->idx_wk};
    *bytes = *params = 0.0;
    for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
        *bytes += tbytes(ts[i]);
        *params += tparams(ts[i]);
    }
    const double uv = nh * dv * rkv, uk = nh * rkv * dn;
    *bytes += uv * (double)hy_dtype_size(ly->kv_b.dtype) + uk * 4.0;
    *params += uv + uk;
    if (ly->idx_weights) {
        *bytes += HI * H * 4.0;
        *params += HI * H;
    }
    if (ly->hc_fn[0]) {
        *bytes += 2.0 * (2.0 * C) * C * H * 4.0;
        *params += 2.0 * (2.0 * C) * C * H;
    }
    *kv_read = *core = 0.0;
    for (int32_t t = 0; t < n_tokens; t++) {
        const double n_sel = v->index_topk > 0 && ctx[t] > v->index_topk ? v->index_topk : ctx[t];
        *kv_read += n_sel * kw * kv_elem_bytes;
        *core += nh * n_sel * (2.0 * kw + 2.0 * rkv);
        if (ly->idx_weights) {
            *kv_read += ctx[t] * dI * kv_elem_bytes;
            *core += 2.0 * HI * dI * ctx[t];
        }
    }
}

void hy_bench_account(const struct hy_model *m, const int64_t *expert_hits, int32_t n_tokens, const int32_t *ctx,
                      int32_t n_logits, int kv_elem_bytes, struct hy_bench_bytes *bytes, struct hy_bench_flops *flops)
{
    const struct hy_model_config *c = &m->cfg;
    const double H = c->hidden_size, D = c->head_dim, nh = c->num_attention_heads, nkv = c->num_key_value_heads;
    const double T = n_tokens, E = c->num_experts;
    struct hy_bench_bytes b;
    struct hy_bench_flops f;
    memset(&b, 0, sizeof(b));
    memset(&f, 0, sizeof(f));
    double ctx_sum = 0.0;
    for (int32_t t = 0; t < n_tokens; t++)
        ctx_sum += ctx[t];
    b.embed = T * (double)hy_tensor_row_bytes(&m->embed);
    b.norms = H * 4.0;
    for (int L = 0; L < c->num_hidden_layers; L++) {
        const struct hy_layer *ly = &m->layers[L];
        if (c->arch == HY_ARCH_HY_V4) {
            double ab, ap, kvr, core;
            v4_attention(m, ly, ctx, n_tokens, kv_elem_bytes, &ab, &ap, &kvr, &core);
            b.attn += ab;
            b.norms += 2.0 * H * 4.0 + (double)(c->v4.q_lora_rank + c->v4.kv_lora_rank) * 4.0;
            b.kv_read += kvr;
            f.attn_proj += 2.0 * T * ap;
            f.attn_core += core;
        } else {
            const double ab = tbytes(&ly->wq) + tbytes(&ly->wk) + tbytes(&ly->wv) + tbytes(&ly->wo);
            const double ap = tparams(&ly->wq) + tparams(&ly->wk) + tparams(&ly->wv) + tparams(&ly->wo);
            b.attn += ab;
            b.norms += 2.0 * H * 4.0 + (ly->q_norm ? 2.0 * D * 4.0 : 0.0);
            b.kv_read += ctx_sum * nkv * D * 2.0 * kv_elem_bytes;
            f.attn_proj += 2.0 * T * ap;
            f.attn_core += 4.0 * nh * D * ctx_sum;
        }
        if (!ly->is_moe) {
            b.dense_mlp += mlp_bytes(&ly->mlp);
            f.dense_mlp += 2.0 * T * mlp_params(&ly->mlp);
            continue;
        }
        b.router += E * H * 4.0 + E * 4.0;
        f.router += 2.0 * T * E * H;
        b.shared += mlp_bytes(&ly->shared);
        f.shared += 2.0 * T * mlp_params(&ly->shared);
        if (!expert_hits || L >= m->prof.n_layers)
            continue;
        for (int e = 0; e < c->num_experts && e < m->prof.n_experts; e++) {
            const int64_t hits = expert_hits[(int64_t)L * m->prof.n_experts + e];
            if (hits <= 0)
                continue;
            b.distinct_experts++;
            b.expert_selections += hits;
            b.routed += mlp_bytes(&ly->experts[e]);
            f.routed += 2.0 * (double)hits * mlp_params(&ly->experts[e]);
        }
    }
    if (n_logits > 0) {
        b.lm_head = tbytes(&m->lm_head);
        f.lm_head = 2.0 * n_logits * tparams(&m->lm_head);
    }
    b.weights = b.embed + b.attn + b.dense_mlp + b.router + b.routed + b.shared + b.norms + b.lm_head;
    f.total = f.attn_proj + f.attn_core + f.dense_mlp + f.router + f.routed + f.shared + f.lm_head;
    if (bytes)
        *bytes = b;
    if (flops)
        *flops = f;
}
