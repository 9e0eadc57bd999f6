/* load.c - binds checkpoint tensors to struct hy_model (both Hy3 spellings, spec §3). */
#include "model/model.h"

#include "model/load_internal.h"
#include "model/load_quant.h"
#include "model/lockstep.h"
#include "model/shard.h"

#include "base/env.h"
#include "base/err.h"
#include "base/log.h"
#include "base/timing.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct hy_st_tensor *find_fmt(const struct hy_model *m, char *name, const char *fmt, ...) HY_PRINTF(3, 4);

static const struct hy_st_tensor *find_fmt(const struct hy_model *m, char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, NAME_LEN, fmt, ap);
    va_end(ap);
    return hy_checkpoint_find(&m->ck, name);
}

static int check_shape(const struct hy_st_tensor *t, int ndim, const int64_t *shape)
{
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = t->shape[i] == shape[i];
    if (ok)
        return 0;
    char got[128] = "", want[128] = "";
    for (int i = 0; i < t->ndim; i++)
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    for (int i = 0; i < ndim; i++)
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%lld", i ? ", " : "", (long long)shape[i]);
    return hy_err_set("tensor \"%s\" has shape [%s] but config.json implies [%s]", t->name, got, want);
}

static int check_float_dtype(const struct hy_st_tensor *t)
{
    if (hy_dtype_is_kernel_float(t->dtype))
        return 0;
    return hy_err_set("unsupported dtype %s for tensor \"%s\" (supported: BF16, F16, F32)", t->dtype_name, t->name);
}

/* A [rows, cols] matrix by name; missing -> error. */
int hy_ld_matrix(const struct hy_model *m, const char *name, int64_t rows, int64_t cols, struct hy_tensor *out)
{
    const struct hy_st_tensor *t = hy_checkpoint_find(&m->ck, name);
    if (!t)
        return hy_err_set("tensor \"%s\" is missing from the checkpoint", name);
    int64_t shape[2] = {rows, cols};
    if (check_float_dtype(t) || check_shape(t, 2, shape))
        return -1;
    out->dtype = t->dtype;
    out->rows = rows;
    out->cols = cols;
    out->data = t->data;
    return 0;
}

/* A [n] vector (or [rows, cols] when cols > 0) widened to a malloc'd f32 copy. */
int hy_ld_f32(const struct hy_st_tensor *t, int64_t rows, int64_t cols, float **out)
{
    int64_t shape[2] = {rows, cols};
    if (check_float_dtype(t) || check_shape(t, cols > 0 ? 2 : 1, shape))
        return -1;
    size_t n = (size_t)rows * (size_t)(cols > 0 ? cols : 1);
    *out = malloc(n * sizeof(float));
    if (!*out)
        return hy_err_set("out of memory");
    hy_dtype_to_f32(t->dtype, t->data, *out, n);
    return 0;
}

int hy_ld_vec(const struct hy_model *m, const char *name, int64_t n, float **out)
{
    const struct hy_st_tensor *t = hy_checkpoint_find(&m->ck, name);
    if (!t)
        return hy_err_set("tensor \"%s\" is missing from the checkpoint", name);
    return hy_ld_f32(t, n, 0, out);
}

/* A linear weight by module name (without ".weight"): plain or quantized as quantization_config says. */
int hy_ld_linear(struct hy_model *m, int L, const char *module, int64_t rows, int64_t cols, struct hy_tensor *out)
{
    return hy_qload_linear(&m->quant, &m->ck, module, rows, cols, L == m->cfg.num_hidden_layers, out);
}

static int bind_attention(struct hy_model *m, int L, struct hy_layer *ly)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t H = c->hidden_size, qd = (int64_t)c->num_attention_heads * c->head_dim,
                  kvd = (int64_t)c->num_key_value_heads * c->head_dim;
    char n[NAME_LEN];
#define P(suffix) (snprintf(n, sizeof(n), "model.layers.%d.%s", L, suffix), n)
    if (hy_ld_vec(m, P("input_layernorm.weight"), H, &ly->input_norm) ||
        hy_ld_vec(m, P("post_attention_layernorm.weight"), H, &ly->post_norm) ||
        hy_ld_linear(m, L, P("self_attn.q_proj"), qd, H, &ly->wq) ||
        hy_ld_linear(m, L, P("self_attn.k_proj"), kvd, H, &ly->wk) ||
        hy_ld_linear(m, L, P("self_attn.v_proj"), kvd, H, &ly->wv) ||
        hy_ld_linear(m, L, P("self_attn.o_proj"), H, qd, &ly->wo))
        return -1;
    if (c->qk_norm && (hy_ld_vec(m, P("self_attn.q_norm.weight"), c->head_dim, &ly->q_norm) ||
                       hy_ld_vec(m, P("self_attn.k_norm.weight"), c->head_dim, &ly->k_norm)))
        return -1;
#undef P
    return 0;
}

int hy_ld_mlp(struct hy_model *m, int L, const char *prefix, int64_t width, struct hy_expert *e)
{
    const int64_t H = m->cfg.hidden_size;
    char n[NAME_LEN];
    snprintf(n, sizeof(n), "%s.gate_proj", prefix);
    if (hy_ld_linear(m, L, n, width, H, &e->gate))
        return -1;
    snprintf(n, sizeof(n), "%s.up_proj", prefix);
    if (hy_ld_linear(m, L, n, width, H, &e->up))
        return -1;
    snprintf(n, sizeof(n), "%s.down_proj", prefix);
    return hy_ld_linear(m, L, n, H, width, &e->down);
}

/* Fused experts: gate_up_proj [E, 2I, H] (rows 0..I-1 gate, I..2I-1 up) and down_proj [E, H, I],
 * plain or quantized (load_quant.h: scales "<name>_scale"). */
static int bind_fused_experts(struct hy_model *m, int L, const char *lp, struct hy_layer *ly,
                              const struct hy_st_tensor *gu)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t E = c->num_experts, I = c->moe_intermediate_size, H = c->hidden_size;
    const int lenient = L == c->num_hidden_layers;
    char n[NAME_LEN];
    const struct hy_st_tensor *dn = find_fmt(m, n, "%s.mlp.experts.down_proj", lp);
    if (!dn)
        return hy_err_set("tensor \"%s\" is missing (fused experts need gate_up_proj and down_proj)", n);
    struct hy_tensor *tmp = malloc((size_t)E * sizeof(*tmp));
    if (!tmp)
        return hy_err_set("out of memory");
    int rc = -1;
    if (hy_qload_stack(&m->quant, &m->ck, gu->name, E, 2 * I, H, lenient, tmp))
        goto out;
    for (int64_t e = 0; e < E; e++) {
        ly->experts[e].gate = hy_tensor_rows(&tmp[e], 0, I);
        ly->experts[e].up = hy_tensor_rows(&tmp[e], I, I);
    }
    if (hy_qload_stack(&m->quant, &m->ck, dn->name, E, H, I, lenient, tmp))
        goto out;
    for (int64_t e = 0; e < E; e++)
        ly->experts[e].down = tmp[e];
    rc = 0;
out:
    free(tmp);
    return rc;
}

int hy_ld_moe(struct hy_model *m, int L, const char *lp, struct hy_layer *ly)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t E = c->num_experts, I = c->moe_intermediate_size, H = c->hidden_size;
    char n[NAME_LEN];
    const struct hy_st_tensor *t = find_fmt(m, n, "%s.mlp.router.gate.weight", lp);
    if (!t)
        t = find_fmt(m, n, "%s.mlp.gate.weight", lp);
    if (!t)
        return hy_err_set("%s is MoE but neither mlp.router.gate.weight nor mlp.gate.weight exists", lp);
    if (hy_ld_f32(t, E, H, &ly->router))
        return -1;
    t = find_fmt(m, n, "%s.mlp.expert_bias", lp);
    if (!t)
        t = find_fmt(m, n, "%s.mlp.e_score_correction_bias", lp);
    if (!t) /* hy_v4 (and DeepSeek-style) spelling: the bias lives on the router module */
        t = find_fmt(m, n, "%s.mlp.gate.e_score_correction_bias", lp);
    if (t) {
        if (hy_ld_f32(t, E, 0, &ly->expert_bias))
            return -1;
    } else if (!(ly->expert_bias = calloc((size_t)E, sizeof(float)))) {
        return hy_err_set("out of memory");
    }
    ly->experts = calloc((size_t)E, sizeof(*ly->experts));
    if (!ly->experts)
        return hy_err_set("out of memory");
    const struct hy_st_tensor *gu = find_fmt(m, n, "%s.mlp.experts.gate_up_proj", lp);
    if (gu) {
        if (bind_fused_experts(m, L, lp, ly, gu))
            return -1;
    } else {
        for (int e = 0; e < E; e++) {
            char prefix[NAME_LEN];
            snprintf(prefix, sizeof(prefix), "%s.mlp.experts.%d", lp, e);
            if (hy_ld_mlp(m, L, prefix, I, &ly->experts[e]))
                return -1;
        }
    }
    if (c->num_shared_experts > 0) {
        const int64_t W = I * c->num_shared_experts;
        char prefix[NAME_LEN / 2]; /* + ".gate_proj.weight" fits n */
        snprintf(prefix, sizeof(prefix), "%s.mlp.shared_mlp", lp);
        snprintf(n, sizeof(n), "%s.gate_proj.weight", prefix);
        if (!hy_checkpoint_find(&m->ck, n))
            snprintf(prefix, sizeof(prefix), "%s.mlp.shared_experts", lp);
        if (hy_ld_mlp(m, L, prefix, W, &ly->shared))
            return -1;
    }
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
        return hy_ld_moe(m, L, lp, ly);
    }
    char prefix[NAME_LEN];
    snprintf(prefix, sizeof(prefix), "model.layers.%d.mlp", L);
    return hy_ld_mlp(m, L, prefix, m->cfg.intermediate_size, &ly->mlp);
}

static int bind_mtp(struct hy_model *m)
{
    const struct hy_model_config *c = &m->cfg;
    const int L = c->num_hidden_layers;
    const int64_t H = c->hidden_size;
    char n[NAME_LEN];
    if (!find_fmt(m, n, "model.layers.%d.eh_proj.weight", L)) {
        hy_log_warn("config.json has num_nextn_predict_layers=1 but %s is absent: MTP layer not loaded", n);
        return 0;
    }
    struct hy_layer *ly = &m->layers[L];
    if (bind_layer(m, L, 1))
        return -1;
#define P(suffix) (snprintf(n, sizeof(n), "model.layers.%d.%s", L, suffix), n)
    if (hy_ld_vec(m, P("enorm.weight"), H, &ly->enorm) || hy_ld_vec(m, P("hnorm.weight"), H, &ly->hnorm) ||
        hy_ld_linear(m, L, P("eh_proj"), H, 2 * H, &ly->eh_proj) ||
        hy_ld_vec(m, P("final_layernorm.weight"), H, &ly->final_norm))
        return -1;
#undef P
    m->has_mtp = 1;
    return 0;
}

static int bind_all(struct hy_model *m)
{
    const struct hy_model_config *c = &m->cfg;
    if (c->arch == HY_ARCH_HY_V4)
        return hy_v4_bind_all(m);
    const int64_t V = c->vocab_size, H = c->hidden_size;
    if (hy_qload_check_unquantized(&m->ck, "model.embed_tokens.weight", "embedding") ||
        (!c->tie_word_embeddings && hy_qload_check_unquantized(&m->ck, "lm_head.weight", "lm_head")) ||
        hy_ld_matrix(m, "model.embed_tokens.weight", V, H, &m->embed) ||
        hy_ld_vec(m, "model.norm.weight", H, &m->final_norm))
        return -1;
    if (c->tie_word_embeddings) {
        m->lm_head = m->embed;
    } else if (hy_ld_matrix(m, "lm_head.weight", V, H, &m->lm_head)) {
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
    return hy_ld_inv_freq(m);
}

int hy_ld_inv_freq(struct hy_model *m)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t half = c->head_dim / 2;
    m->inv_freq = malloc((size_t)half * sizeof(float));
    if (!m->inv_freq)
        return hy_err_set("out of memory");
    for (int64_t i = 0; i < half; i++)
        m->inv_freq[i] = (float)(1.0 / pow(c->rope_theta, (double)(2 * i) / (double)c->head_dim));
    return 0;
}

void hy_load_params_default(struct hy_load_params *p, enum hy_compute_dtype compute)
{
    p->compute = compute;
    p->format = hy_load_format_default();
    p->moe_grouped = hy_env_params()->moe_grouped;
    p->comm = NULL;
    p->par = NULL;
}

int hy_model_load(const char *model_dir, enum hy_compute_dtype compute, struct hy_model **out)
{
    struct hy_load_params p;
    hy_load_params_default(&p, compute);
    return hy_model_load_ex(model_dir, &p, out);
}

int hy_model_load_ex(const char *model_dir, const struct hy_load_params *lp, struct hy_model **out)
{
    double t0 = hy_time_now();
    *out = NULL;
    struct hy_model *m = calloc(1, sizeof(*m));
    if (!m)
        return hy_err_set("out of memory");
    m->compute = lp->compute;
    m->moe_per_expert = !lp->moe_grouped;
    if (hy_model_config_load(model_dir, &m->cfg) || hy_quant_config_load(model_dir, &m->quant) ||
        hy_checkpoint_open(model_dir, &m->ck))
        goto fail;
    if (hy_qload_check_description(&m->quant, &m->ck) || bind_all(m)) {
        hy_err_prefix("%s", model_dir);
        goto fail;
    }
    if (hy_model_load_kv_scales(m, model_dir))
        goto fail;
    if (lp->comm && hy_comm_size(lp->comm) > 1 && hy_model_shard(m, lp->comm, lp->par)) {
        hy_err_prefix("%s", model_dir);
        goto fail;
    }
    if (hy_model_place(m, lp->format))
        goto fail;
    if (m->dist)
        m->dist->ready = 1;
    m->load_seconds = hy_time_now() - t0;
    *out = m;
    return 0;
fail:
    hy_model_free(m);
    return -1;
}

static void free_layer(struct hy_layer *ly)
{
    free(ly->input_norm);
    free(ly->post_norm);
    free(ly->q_norm);
    free(ly->k_norm);
    free(ly->router);
    free(ly->expert_bias);
    free(ly->experts);
    free(ly->enorm);
    free(ly->hnorm);
    free(ly->final_norm);
    free(ly->q_a_norm);
    free(ly->kv_a_norm);
    free(ly->w_uk_t);
    free(ly->sink);
    free(ly->idx_k_norm_w);
    free(ly->idx_k_norm_b);
    free(ly->idx_weights);
    for (int i = 0; i < 2; i++) {
        free(ly->hc_fn[i]);
        free(ly->hc_base[i]);
        free(ly->hc_scale[i]);
    }
}

void hy_model_free(struct hy_model *m)
{
    if (!m)
        return;
    hy_lockstep_exit(m);
    hy_model_shard_free(m);
    if (m->layers) {
        int n_layers = m->cfg.num_hidden_layers + (m->cfg.num_nextn_predict_layers > 0);
        for (int L = 0; L < n_layers; L++)
            free_layer(&m->layers[L]);
    }
    free(m->layers);
    hy_model_free_kv_scales(m);
    free(m->prof.expert_hits);
    hy_model_release_scratch(m);
    free(m->final_norm);
    free(m->inv_freq);
    free(m->hc_head_fn);
    free(m->hc_head_base);
    free(m->hc_head_scale);
    hy_checkpoint_close(&m->ck);
    hy_quant_config_free(&m->quant);
    hy_model_place_release(m);
    free(m);
}

int hy_model_kv_cache_init(const struct hy_model *m, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks)
{
    return hy_model_kv_cache_init_dtype(m, kv, block_size, n_blocks, HY_DTYPE_UNKNOWN);
}
