/* load_v4.c - binds a Hy4-preview (`hy_v4`) checkpoint to struct hy_model (spec hy4_architecture.md §13:
 * hub tensor names, BF16 matrices, F32 hc_* / sinks / selection bias; the MTP layer model.mtp_layers.0.*). */
#include "model/arch.h"
#include "model/bind.h"

#include "base/err.h"
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* name = "<lp>.<suffix>" */
static const char *nm(char *buf, const char *lp, const char *suffix)
{
    snprintf(buf, NAME_LEN, "%s.%s", lp, suffix);
    return buf;
}

/* An F32-kept [rows, cols] (cols 0: [rows]) tensor by full name as a malloc'd f32 copy. */
static int bind_f32_named(const struct hy_model *m, const char *name, int64_t rows, int64_t cols, float **out)
{
    const struct hy_st_tensor *t = hy_checkpoint_find(&m->ck, name);
    if (!t)
        return hy_err_set("tensor \"%s\" is missing from the checkpoint", name);
    return hy_bind_f32(t, rows, cols, out);
}

/* W_UK^h transposed for every head: w_uk_t[h, c, d] = kv_b[h*(d_n+d_v) + d, c] (spec §6.4). */
static int make_w_uk_t(const struct hy_model_config *c, struct hy_layer *ly)
{
    const struct hy_v4_config *v = &c->v4;
    const int64_t nh = c->num_attention_heads, dn = v->qk_nope_head_dim, rkv = v->kv_lora_rank,
                  blk = v->qk_nope_head_dim + v->v_head_dim;
    ly->w_uk_t = malloc((size_t)(nh * rkv * dn) * sizeof(float));
    if (!ly->w_uk_t)
        return hy_err_set("out of memory");
    for (int64_t h = 0; h < nh; h++)
        for (int64_t d = 0; d < dn; d++)
            for (int64_t k = 0; k < rkv; k++)
                ly->w_uk_t[(h * rkv + k) * dn + d] = hy_tensor_get(&ly->kv_b, h * blk + d, k);
    return 0;
}

/* Gated MLA with sinks (spec §6.1) and, when has_indexer, the lightning indexer (§7.1). */
static int bind_attention(struct hy_model *m, int L, const char *lp, int has_indexer, struct hy_layer *ly)
{
    const struct hy_model_config *c = &m->cfg;
    const struct hy_v4_config *v = &c->v4;
    const int64_t H = c->hidden_size, nh = c->num_attention_heads, rq = v->q_lora_rank, rkv = v->kv_lora_rank,
                  dr = v->qk_rope_head_dim;
    char n[NAME_LEN];
    if (hy_bind_vec(m, nm(n, lp, "input_layernorm.weight"), H, &ly->input_norm) ||
        hy_bind_vec(m, nm(n, lp, "post_attention_layernorm.weight"), H, &ly->post_norm) ||
        hy_bind_linear(m, L, nm(n, lp, "self_attn.q_a_proj"), rq, H, &ly->q_a) ||
        hy_bind_vec(m, nm(n, lp, "self_attn.q_a_layernorm.weight"), rq, &ly->q_a_norm) ||
        hy_bind_linear(m, L, nm(n, lp, "self_attn.q_b_proj"), nh * (v->qk_nope_head_dim + dr), rq, &ly->q_b) ||
        hy_bind_linear(m, L, nm(n, lp, "self_attn.kv_a_proj_with_mqa"), rkv + dr, H, &ly->kv_a) ||
        hy_bind_vec(m, nm(n, lp, "self_attn.kv_a_layernorm.weight"), rkv, &ly->kv_a_norm) ||
        hy_bind_matrix(m, nm(n, lp, "self_attn.kv_b_proj.weight"), nh * (v->qk_nope_head_dim + v->v_head_dim), rkv,
                       &ly->kv_b) ||
        make_w_uk_t(c, ly) || hy_bind_linear(m, L, nm(n, lp, "self_attn.o_proj"), H, nh * v->v_head_dim, &ly->wo))
        return -1;
    if (v->gated && hy_bind_linear(m, L, nm(n, lp, "self_attn.linear_gate"), nh * v->v_head_dim, H, &ly->attn_gate))
        return -1;
    if (v->learnable_sink && bind_f32_named(m, nm(n, lp, "self_attn.learnable_sink_param"), nh, 0, &ly->sink))
        return -1;
    if (!has_indexer)
        return 0;
    const int64_t HI = v->index_n_heads, dI = v->index_head_dim;
    /* the indexer stays unquantized in quantized checkpoints (as the router, hc_* and the sinks) */
    if (hy_bind_matrix(m, nm(n, lp, "self_attn.indexer.wq_b.weight"), HI * dI, rq, &ly->idx_wq_b) ||
        hy_bind_matrix(m, nm(n, lp, "self_attn.indexer.wk.weight"), dI, H, &ly->idx_wk) ||
        hy_bind_vec(m, nm(n, lp, "self_attn.indexer.k_norm.weight"), dI, &ly->idx_k_norm_w) ||
        hy_bind_vec(m, nm(n, lp, "self_attn.indexer.k_norm.bias"), dI, &ly->idx_k_norm_b) ||
        bind_f32_named(m, nm(n, lp, "self_attn.indexer.weights_proj.weight"), HI, H, &ly->idx_weights))
        return -1;
    return 0;
}

/* The two hyper-connection sites of a main layer (spec §4.1). */
static int bind_hc(struct hy_model *m, const char *lp, struct hy_layer *ly)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t C = c->v4.hc_mult, H = c->hidden_size;
    const char *site[2] = {"hc_attn_layer", "hc_mlp_layer"};
    char n[NAME_LEN], sub[NAME_LEN];
    for (int i = 0; i < 2; i++) {
        snprintf(sub, sizeof(sub), "%s.hc_pre.hc_fn", site[i]);
        if (bind_f32_named(m, nm(n, lp, sub), 2 * C, C * H, &ly->hc_fn[i]))
            return -1;
        snprintf(sub, sizeof(sub), "%s.hc_pre.hc_base", site[i]);
        if (bind_f32_named(m, nm(n, lp, sub), 2 * C, 0, &ly->hc_base[i]))
            return -1;
        snprintf(sub, sizeof(sub), "%s.hc_pre.hc_scale", site[i]);
        if (bind_f32_named(m, nm(n, lp, sub), 2, 0, &ly->hc_scale[i]))
            return -1;
    }
    return 0;
}

static int bind_mlp_of(struct hy_model *m, int L, const char *lp, int is_moe, struct hy_layer *ly)
{
    ly->is_moe = is_moe;
    if (is_moe) {
        if (hy_bind_moe(m, L, lp, ly))
            return -1;
        for (int64_t e = 0; e < m->cfg.num_experts; e++) /* routed experts only; the shared one is unclamped */
            ly->experts[e].clamp = m->cfg.v4.swiglu_limit;
        return 0;
    }
    char n[NAME_LEN];
    return hy_bind_mlp(m, L, nm(n, lp, "mlp"), m->cfg.intermediate_size, &ly->mlp);
}

static int bind_mtp(struct hy_model *m)
{
    const struct hy_model_config *c = &m->cfg;
    const int L = c->num_hidden_layers;
    const int64_t H = c->hidden_size;
    const char *lp = "model.mtp_layers.0";
    char n[NAME_LEN];
    if (!hy_checkpoint_find(&m->ck, nm(n, lp, "eh_proj.weight"))) {
        hy_log_warn("config.json has num_nextn_predict_layers=1 but %s is absent: MTP layer not loaded", n);
        return 0;
    }
    struct hy_layer *ly = &m->layers[L];
    if (bind_attention(m, L, lp, c->v4.index_topk > 0, ly) || bind_mlp_of(m, L, lp, 1, ly) ||
        hy_bind_vec(m, nm(n, lp, "enorm.weight"), H, &ly->enorm) ||
        hy_bind_vec(m, nm(n, lp, "hnorm.weight"), H, &ly->hnorm) ||
        hy_bind_linear(m, L, nm(n, lp, "eh_proj"), H, 2 * H, &ly->eh_proj) ||
        hy_bind_vec(m, nm(n, lp, "final_layernorm.weight"), H, &ly->final_norm))
        return -1;
    m->has_mtp = 1;
    return 0;
}

static int in_list(const char *rest, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(rest, *list) == 0)
            return 1;
    return 0;
}

/* 1 if `rest` (a tensor name after "model.layers.L." or "model.mtp_layers.0.") belongs to that layer under
 * config.json: main = a backbone layer (hyper-connections), else the MTP layer; indexer = a full layer;
 * moe = MoE MLP. Per-expert spellings (mlp.experts.E.*_proj.weight) are accepted like the fused ones. */
static int expected_in_layer(const struct hy_model_config *c, const char *rest, int main, int indexer, int moe)
{
    static const char *const attn[] = {"input_layernorm.weight",          "post_attention_layernorm.weight",
                                       "self_attn.q_a_proj.weight",       "self_attn.q_a_layernorm.weight",
                                       "self_attn.q_b_proj.weight",       "self_attn.kv_a_proj_with_mqa.weight",
                                       "self_attn.kv_a_layernorm.weight", "self_attn.kv_b_proj.weight",
                                       "self_attn.o_proj.weight",         NULL};
    static const char *const idx[] = {"self_attn.indexer.wq_b.weight",         "self_attn.indexer.wk.weight",
                                      "self_attn.indexer.k_norm.weight",       "self_attn.indexer.k_norm.bias",
                                      "self_attn.indexer.weights_proj.weight", NULL};
    static const char *const hc[] = {"hc_attn_layer.hc_pre.hc_fn",
                                     "hc_attn_layer.hc_pre.hc_base",
                                     "hc_attn_layer.hc_pre.hc_scale",
                                     "hc_mlp_layer.hc_pre.hc_fn",
                                     "hc_mlp_layer.hc_pre.hc_base",
                                     "hc_mlp_layer.hc_pre.hc_scale",
                                     NULL};
    static const char *const mtp[] = {"enorm.weight", "hnorm.weight", "eh_proj.weight", "final_layernorm.weight", NULL};
    static const char *const dense[] = {"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight", NULL};
    static const char *const sparse[] = {"mlp.gate.weight",
                                         "mlp.gate.e_score_correction_bias",
                                         "mlp.experts.gate_up_proj",
                                         "mlp.experts.down_proj",
                                         "mlp.shared_experts.gate_proj.weight",
                                         "mlp.shared_experts.up_proj.weight",
                                         "mlp.shared_experts.down_proj.weight",
                                         NULL};
    if (in_list(rest, attn) || (indexer && in_list(rest, idx)) || (main ? in_list(rest, hc) : in_list(rest, mtp)) ||
        in_list(rest, moe ? sparse : dense))
        return 1;
    if (c->v4.gated && strcmp(rest, "self_attn.linear_gate.weight") == 0)
        return 1;
    if (c->v4.learnable_sink && strcmp(rest, "self_attn.learnable_sink_param") == 0)
        return 1;
    int e, len = 0;
    char proj[16];
    if (moe && sscanf(rest, "mlp.experts.%d.%15[a-z_].weight%n", &e, proj, &len) == 2 && rest[len] == '\0' && e >= 0 &&
        e < c->num_experts)
        return !strcmp(proj, "gate_proj") || !strcmp(proj, "up_proj") || !strcmp(proj, "down_proj");
    return 0;
}

/* 1 if name is a tensor of this checkpoint under config.json (quantization companions "<module>.weight_scale(_inv)",
 * ".input_scale", Ascend's ".weight_offset" / ".input_offset" / ".deq_scale" / ".quant_bias", and
 * "experts.<gate_up / down>_proj_scale" are judged by their weight). */
static int expected_tensor(const struct hy_model *m, const char *name)
{
    const struct hy_model_config *c = &m->cfg;
    static const char *const globals[] = {"model.embed_tokens.weight",
                                          "model.norm.weight",
                                          "lm_head.weight",
                                          "model.hc_head.hc_head_fn",
                                          "model.hc_head.hc_head_base",
                                          "model.hc_head.hc_head_scale",
                                          NULL};
    char base[NAME_LEN];
    snprintf(base, sizeof(base), "%s", name);
    const size_t n = strlen(base);
    static const char *const companions[][2] = {
        {".weight_scale_inv", ".weight"}, {".weight_scale", ".weight"},
        {".input_scale", ".weight"},      {".weight_offset", ".weight"}, /* Ascend W8A8 */
        {".input_offset", ".weight"},     {".deq_scale", ".weight"},
        {".quant_bias", ".weight"},       {"_proj_scale", "_proj"}};
    for (size_t i = 0; i < sizeof(companions) / sizeof(companions[0]); i++) {
        const size_t k = strlen(companions[i][0]);
        if (n > k && strcmp(base + n - k, companions[i][0]) == 0) {
            snprintf(base + n - k, sizeof(base) - (n - k), "%s", companions[i][1]);
            break;
        }
    }
    if (in_list(base, globals))
        return 1;
    int L, len = 0;
    if (sscanf(base, "model.layers.%d.%n", &L, &len) == 1 && len > 0)
        return L >= 0 && L < c->num_hidden_layers &&
               expected_in_layer(c, base + len, 1, c->v4.index_topk > 0 && c->v4.indexer_full[L], c->layer_is_moe[L]);
    if (sscanf(base, "model.mtp_layers.%d.%n", &L, &len) == 1 && len > 0)
        return L == 0 && c->num_nextn_predict_layers > 0 &&
               expected_in_layer(c, base + len, 0, c->v4.index_topk > 0, 1);
    return 0;
}

/* Every checkpoint tensor must belong to the model config.json describes: a tensor of a layer it does not
 * have, an indexer on a "shared" layer, a dense MLP on a MoE layer, ... is refused by name. */
static int check_no_extra(const struct hy_model *m)
{
    for (size_t i = 0; i < m->ck.n_index; i++)
        if (!expected_tensor(m, m->ck.index[i]->name))
            return hy_err_set("unexpected tensor \"%s\": not part of a hy_v4 checkpoint with this config.json "
                              "(num_hidden_layers %d, indexer_types, mlp_layer_types, num_nextn_predict_layers %d)",
                              m->ck.index[i]->name, m->cfg.num_hidden_layers, m->cfg.num_nextn_predict_layers);
    return 0;
}

int hy_v4_bind_all(struct hy_model *m)
{
    const struct hy_model_config *c = &m->cfg;
    const struct hy_v4_config *v = &c->v4;
    const int64_t V = c->vocab_size, H = c->hidden_size, C = v->hc_mult;
    if (c->tie_word_embeddings)
        return hy_err_set("hy_v4 with tie_word_embeddings true is not supported (Hy4 has a separate lm_head)");
    if (check_no_extra(m) || hy_bind_table(m, "model.embed_tokens", V, H, &m->embed) ||
        hy_bind_vec(m, "model.norm.weight", H, &m->final_norm) || hy_bind_table(m, "lm_head", V, H, &m->lm_head) ||
        bind_f32_named(m, "model.hc_head.hc_head_fn", C, C * H, &m->hc_head_fn) ||
        bind_f32_named(m, "model.hc_head.hc_head_base", C, 0, &m->hc_head_base) ||
        bind_f32_named(m, "model.hc_head.hc_head_scale", 1, 0, &m->hc_head_scale))
        return -1;
    const int n_layers = c->num_hidden_layers + (c->num_nextn_predict_layers > 0);
    m->layers = calloc((size_t)n_layers, sizeof(*m->layers));
    if (!m->layers)
        return hy_err_set("out of memory");
    for (int L = 0; L < c->num_hidden_layers; L++) {
        char lp[NAME_LEN];
        snprintf(lp, sizeof(lp), "model.layers.%d", L);
        struct hy_layer *ly = &m->layers[L];
        if (bind_attention(m, L, lp, v->index_topk > 0 && v->indexer_full[L], ly) || bind_hc(m, lp, ly) ||
            bind_mlp_of(m, L, lp, c->layer_is_moe[L], ly))
            return -1;
    }
    if (c->num_nextn_predict_layers > 0 && bind_mtp(m))
        return -1;
    return hy_bind_inv_freq(m); /* head_dim = qk_rope_head_dim: RoPE on the last qk_rope_head_dim dims (§6.3) */
}
