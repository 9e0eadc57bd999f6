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
    b.embed = T * H * (double)hy_dtype_size(m->embed.dtype);
    b.norms = H * 4.0;
    for (int L = 0; L < c->num_hidden_layers; L++) {
        const struct hy_layer *ly = &m->layers[L];
        const double ab = tbytes(&ly->wq) + tbytes(&ly->wk) + tbytes(&ly->wv) + tbytes(&ly->wo);
        const double ap = tparams(&ly->wq) + tparams(&ly->wk) + tparams(&ly->wv) + tparams(&ly->wo);
        b.attn += ab;
        b.norms += 2.0 * H * 4.0 + (ly->q_norm ? 2.0 * D * 4.0 : 0.0);
        b.kv_read += ctx_sum * nkv * D * 2.0 * kv_elem_bytes;
        f.attn_proj += 2.0 * T * ap;
        f.attn_core += 4.0 * nh * D * ctx_sum;
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
