/* load_v3.c - binds a Hy3 (`hy_v3`) or dense Llama checkpoint (arch.h bind of hy_v3_arch): the
 * embedding, final norm and lm_head (tied or not), each layer's GQA attention (with QK-norm) and its
 * dense MLP or MoE block, and the MTP layer when config.json has one. */
#include "model/arch.h"
#include "model/bind.h"
#include "model/load_quant.h"

#include "base/err.h"
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>

static int bind_attention(struct hy_model *m, int L, struct hy_layer *ly)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t H = c->hidden_size, qd = (int64_t)c->num_attention_heads * c->head_dim,
                  kvd = (int64_t)c->num_key_value_heads * c->head_dim;
    char n[NAME_LEN];
#define P(suffix) (snprintf(n, sizeof(n), "model.layers.%d.%s", L, suffix), n)
    if (hy_bind_vec(m, P("input_layernorm.weight"), H, &ly->input_norm) ||
        hy_bind_vec(m, P("post_attention_layernorm.weight"), H, &ly->post_norm) ||
        hy_bind_linear(m, L, P("self_attn.q_proj"), qd, H, &ly->wq) ||
        hy_bind_linear(m, L, P("self_attn.k_proj"), kvd, H, &ly->wk) ||
        hy_bind_linear(m, L, P("self_attn.v_proj"), kvd, H, &ly->wv) ||
        hy_bind_linear(m, L, P("self_attn.o_proj"), H, qd, &ly->wo))
        return -1;
    if (c->qk_norm && (hy_bind_vec(m, P("self_attn.q_norm.weight"), c->head_dim, &ly->q_norm) ||
                       hy_bind_vec(m, P("self_attn.k_norm.weight"), c->head_dim, &ly->k_norm)))
        return -1;
#undef P
    return 0;
}

static int bind_layer(struct hy_model *m, int L, int is_moe)
{
    struct hy_layer *ly = &m->layers[L];
    ly->is_moe = is_moe;
    if (bind_attention(m, L, ly))
        return -1;
    if (is_moe) {
        char lp[NAME_LEN];
        snprintf(lp, sizeof(lp), "model.layers.%d", L);
        return hy_bind_moe(m, L, lp, ly);
    }
    char prefix[NAME_LEN];
    snprintf(prefix, sizeof(prefix), "model.layers.%d.mlp", L);
    return hy_bind_mlp(m, L, prefix, m->cfg.intermediate_size, &ly->mlp);
}

static int bind_mtp(struct hy_model *m)
{
    const struct hy_model_config *c = &m->cfg;
    const int L = c->num_hidden_layers;
    const int64_t H = c->hidden_size;
    char n[NAME_LEN];
    if (!hy_bind_find_fmt(m, n, "model.layers.%d.eh_proj.weight", L)) {
        hy_log_warn("config.json has num_nextn_predict_layers=1 but %s is absent: MTP layer not loaded", n);
        return 0;
    }
    struct hy_layer *ly = &m->layers[L];
    if (bind_layer(m, L, 1))
        return -1;
#define P(suffix) (snprintf(n, sizeof(n), "model.layers.%d.%s", L, suffix), n)
    if (hy_bind_vec(m, P("enorm.weight"), H, &ly->enorm) || hy_bind_vec(m, P("hnorm.weight"), H, &ly->hnorm) ||
        hy_bind_linear(m, L, P("eh_proj"), H, 2 * H, &ly->eh_proj) ||
        hy_bind_vec(m, P("final_layernorm.weight"), H, &ly->final_norm))
        return -1;
#undef P
    m->has_mtp = 1;
    return 0;
}

int hy_v3_bind_all(struct hy_model *m)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t V = c->vocab_size, H = c->hidden_size;
    if (hy_bind_table(m, "model.embed_tokens", V, H, &m->embed) ||
        hy_bind_vec(m, "model.norm.weight", H, &m->final_norm))
        return -1;
    if (c->tie_word_embeddings) {
        m->lm_head = m->embed;
    } else if (hy_bind_table(m, "lm_head", V, H, &m->lm_head)) {
        return -1;
    }
    int n_layers = c->num_hidden_layers + (c->num_nextn_predict_layers > 0);
    m->layers = calloc((size_t)n_layers, sizeof(*m->layers));
    if (!m->layers)
        return hy_err_set("out of memory");
    for (int L = 0; L < c->num_hidden_layers; L++)
        if (bind_layer(m, L, c->layer_is_moe[L]))
            return -1;
    if (c->num_nextn_predict_layers > 0 && bind_mtp(m))
        return -1;
    return hy_bind_inv_freq(m);
}
