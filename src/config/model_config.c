#include "config/model_config.h"

#include "base/err.h"
#include "base/fileio.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Field readers: absent -> default; wrong type -> error naming the field. */
static int get_int(json_t *o, const char *key, int64_t def, int64_t lo, int64_t hi, int32_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = (int32_t)def;
        return 0;
    }
    int64_t x;
    if (json_is_integer(v))
        x = json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9e15)
        x = (int64_t)json_real_value(v);
    else
        return hy_err_set("field \"%s\" must be an integer", key);
    if (x < lo || x > hi)
        return hy_err_set("field \"%s\" = %lld is out of range [%lld, %lld]", key, (long long)x, (long long)lo,
                          (long long)hi);
    *out = (int32_t)x;
    return 0;
}

/* A field without a default: absent or null -> "field X is required". */
static int get_req_int(json_t *o, const char *key, int64_t lo, int64_t hi, int32_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return hy_err_set("field \"%s\" is required", key);
    return get_int(o, key, 0, lo, hi, out);
}

static int get_num(json_t *o, const char *key, double def, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v))
        return hy_err_set("field \"%s\" must be a number", key);
    *out = json_number_value(v);
    if (!isfinite(*out))
        return hy_err_set("field \"%s\" is not finite", key);
    return 0;
}

static int get_bool(json_t *o, const char *key, int def, int *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return hy_err_set("field \"%s\" must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

/* Adds the ids of an int-or-list field to cfg->eos_token_ids (deduplicated). */
static int add_eos(struct hy_model_config *cfg, json_t *v, const char *key)
{
    if (!v || json_is_null(v))
        return 0;
    json_t *one = v;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    for (size_t i = 0; i < n; i++) {
        if (json_is_array(v))
            one = json_array_get(v, i);
        if (!json_is_integer(one) || json_integer_value(one) < 0 || json_integer_value(one) > INT32_MAX)
            return hy_err_set("field \"%s\" must be a non-negative integer or a list of them", key);
        int32_t id = (int32_t)json_integer_value(one);
        if (hy_model_config_is_eos(cfg, id))
            continue;
        if (cfg->n_eos >= HY_MAX_EOS)
            return hy_err_set("field \"%s\": more than %d eos ids", key, HY_MAX_EOS);
        cfg->eos_token_ids[cfg->n_eos++] = id;
    }
    return 0;
}

static int read_rope(json_t *root, struct hy_model_config *c)
{
    double theta;
    if (get_num(root, "rope_theta", 10000.0, &theta))
        return -1;
    const char *params_keys[] = {"rope_parameters", "rope_scaling"};
    for (int i = 0; i < 2; i++) {
        json_t *p = json_object_get(root, params_keys[i]);
        if (!p || json_is_null(p))
            continue;
        if (!json_is_object(p))
            return hy_err_set("field \"%s\" must be an object", params_keys[i]);
        json_t *t = json_object_get(p, "rope_type");
        if (!t)
            t = json_object_get(p, "type");
        if (t && (!json_is_string(t) || strcmp(json_string_value(t), "default") != 0))
            return hy_err_set("%s.rope_type \"%s\" is not supported (only \"default\", plain RoPE)", params_keys[i],
                              json_is_string(t) ? json_string_value(t) : "?");
        if (json_object_get(p, "rope_theta") && get_num(p, "rope_theta", theta, &theta))
            return hy_err_prefix("%s", params_keys[i]);
    }
    if (!(theta > 0))
        return hy_err_set("rope_theta must be > 0");
    c->rope_theta = theta;
    return get_bool(root, "rope_interleaved", 0, &c->rope_interleaved);
}

static int read_layer_types(json_t *root, struct hy_model_config *c)
{
    json_t *types = json_object_get(root, "mlp_layer_types");
    int nl = c->num_hidden_layers;
    if (c->arch == HY_ARCH_LLAMA) {
        memset(c->layer_is_moe, 0, sizeof(c->layer_is_moe));
        return 0;
    }
    if (types && !json_is_null(types)) {
        if (!json_is_array(types) || (int)json_array_size(types) < nl)
            return hy_err_set("field \"mlp_layer_types\" must be a list of at least num_hidden_layers (%d) "
                              "entries \"dense\"/\"sparse\"",
                              nl);
        for (int i = 0; i < nl; i++) {
            const char *s = json_string_value(json_array_get(types, i));
            if (s && strcmp(s, "dense") == 0)
                c->layer_is_moe[i] = 0;
            else if (s && (strcmp(s, "sparse") == 0 || strcmp(s, "moe") == 0))
                c->layer_is_moe[i] = 1;
            else
                return hy_err_set("mlp_layer_types[%d] must be \"dense\" or \"sparse\"", i);
        }
        /* Readers differ (vLLM uses first_k_dense_replace, transformers mlp_layer_types): when both
         * are given they must describe the same layers. */
        json_t *fk = json_object_get(root, "first_k_dense_replace");
        if (fk && !json_is_null(fk)) {
            int32_t k;
            if (get_int(root, "first_k_dense_replace", 0, 0, nl, &k))
                return -1;
            for (int i = 0; i < nl; i++)
                if (c->layer_is_moe[i] != (i >= k))
                    return hy_err_set("mlp_layer_types[%d] is \"%s\" but first_k_dense_replace (%d) makes "
                                      "layer %d %s",
                                      i, c->layer_is_moe[i] ? "sparse" : "dense", k, i, i >= k ? "sparse" : "dense");
        }
        c->first_k_dense_replace = 0;
        while (c->first_k_dense_replace < nl && !c->layer_is_moe[c->first_k_dense_replace])
            c->first_k_dense_replace++;
    } else {
        if (get_int(root, "first_k_dense_replace", 1, 0, nl, &c->first_k_dense_replace))
            return -1;
        for (int i = 0; i < nl; i++)
            c->layer_is_moe[i] = i >= c->first_k_dense_replace;
    }
    c->layer_is_moe[nl] = 1; /* the MTP layer is a full MoE layer (spec §1, §4) */
    return 0;
}

static int read_moe(json_t *root, struct hy_model_config *c)
{
    int32_t ne, ne_alias, ne_v4, mis, ehd;
    double sf;
    /* hy_v4 (DeepSeek-style names): n_routed_experts, n_shared_experts, routed_scaling_factor, norm_topk_prob */
    const int v4 = c->arch == HY_ARCH_HY_V4;
    if (get_int(root, "num_experts", 0, 0, 1 << 16, &ne) ||
        get_int(root, "num_local_experts", 0, 0, 1 << 16, &ne_alias) ||
        get_int(root, "n_routed_experts", 0, 0, 1 << 16, &ne_v4) ||
        get_int(root, "num_experts_per_tok", 0, 0, 1 << 16, &c->num_experts_per_tok) ||
        get_int(root, v4 ? "n_shared_experts" : "num_shared_experts", 1, 0, 64, &c->num_shared_experts) ||
        get_int(root, "moe_intermediate_size", 0, 0, 1 << 20, &mis) ||
        get_int(root, "expert_hidden_dim", 0, 0, 1 << 20, &ehd) ||
        get_num(root, v4 ? "routed_scaling_factor" : "router_scaling_factor", 1.0, &sf) ||
        get_bool(root, v4 ? "norm_topk_prob" : "route_norm", 1, &c->route_norm) ||
        get_bool(root, "enable_moe_fp32_combine", 0, &c->enable_moe_fp32_combine) ||
        get_bool(root, "enable_lm_head_fp32", 1, &c->enable_lm_head_fp32) ||
        get_int(root, "num_nextn_predict_layers", 0, 0, 1, &c->num_nextn_predict_layers))
        return -1;
    c->num_experts = ne ? ne : ne_alias ? ne_alias : ne_v4;
    c->moe_intermediate_size = mis ? mis : ehd;
    c->router_scaling_factor = (float)sf;
    if (mis && ehd && mis != ehd)
        return hy_err_set("moe_intermediate_size (%d) and expert_hidden_dim (%d) disagree", mis, ehd);
    int any_moe = c->num_nextn_predict_layers > 0;
    for (int i = 0; i < c->num_hidden_layers; i++)
        any_moe |= c->layer_is_moe[i];
    if (!any_moe)
        return 0;
    if (c->num_experts <= 0)
        return hy_err_set("field \"num_experts\" is required (MoE layers present)");
    if (c->num_experts_per_tok <= 0 || c->num_experts_per_tok > c->num_experts || c->num_experts_per_tok > 64)
        return hy_err_set("num_experts_per_tok (%d) must be in [1, min(64, num_experts=%d)]", c->num_experts_per_tok,
                          c->num_experts);
    if (c->moe_intermediate_size <= 0)
        return hy_err_set("field \"moe_intermediate_size\" (or \"expert_hidden_dim\") is required");
    return 0;
}

/* indexer_types: a list of num_hidden_layers "full" / "shared" (layer 0 full); absent -> transformers'
 * default rule, full at layer 0 and at 1, 5, 9, ... (every 4th from 1), which is Hy4-preview's list. */
static int read_indexer_types(json_t *root, struct hy_model_config *c)
{
    struct hy_v4_config *v = &c->v4;
    const int nl = c->num_hidden_layers;
    json_t *types = json_object_get(root, "indexer_types");
    if (!types || json_is_null(types)) {
        for (int i = 0; i < nl; i++)
            v->indexer_full[i] = i == 0 || (i - 1) % 4 == 0;
    } else {
        if (!json_is_array(types) || (int)json_array_size(types) != nl)
            return hy_err_set("field \"indexer_types\" must be a list of num_hidden_layers (%d) entries "
                              "\"full\"/\"shared\"",
                              nl);
        for (int i = 0; i < nl; i++) {
            const char *s = json_string_value(json_array_get(types, i));
            if (!s || (strcmp(s, "full") != 0 && strcmp(s, "shared") != 0))
                return hy_err_set("indexer_types[%d] must be \"full\" or \"shared\"", i);
            v->indexer_full[i] = strcmp(s, "full") == 0;
        }
        if (!v->indexer_full[0])
            return hy_err_set("indexer_types[0] must be \"full\" (a shared layer reuses an earlier full layer's "
                              "selection)");
    }
    v->indexer_full[nl] = 1; /* the MTP layer has its own indexer (spec §11.1) */
    return 0;
}

/* The hy_v4 fields (spec hy4_architecture.md §1); the MoE and generic fields are read by the callers. */
static int read_v4(json_t *root, struct hy_model_config *c)
{
    struct hy_v4_config *v = &c->v4;
    double mag = 2.0, eps = 1e-6, lim = 0.0;
    int32_t n_group = 1, topk_group = 1;
    int use_dsa = 1;
    if (get_req_int(root, "q_lora_rank", 1, 1 << 20, &v->q_lora_rank) ||
        get_req_int(root, "kv_lora_rank", 1, 1 << 20, &v->kv_lora_rank) ||
        get_req_int(root, "qk_nope_head_dim", 1, 1 << 16, &v->qk_nope_head_dim) ||
        get_req_int(root, "qk_rope_head_dim", 2, 1 << 16, &v->qk_rope_head_dim) ||
        get_req_int(root, "v_head_dim", 1, 1 << 16, &v->v_head_dim) || get_bool(root, "gated_mla", 1, &v->gated) ||
        get_bool(root, "learnable_sink", 1, &v->learnable_sink) || get_bool(root, "use_dsa", 1, &use_dsa) ||
        get_int(root, "index_topk", 0, 0, INT32_MAX, &v->index_topk) ||
        get_int(root, "index_n_heads", 0, 0, 4096, &v->index_n_heads) ||
        get_int(root, "index_head_dim", 0, 0, 1 << 16, &v->index_head_dim) ||
        get_req_int(root, "hc_mult", 1, 64, &v->hc_mult) || get_num(root, "hc_magnitude", 2.0, &mag) ||
        get_num(root, "hc_eps", 1e-6, &eps) || get_num(root, "swiglu_limit", 0.0, &lim) ||
        get_int(root, "n_group", 1, 0, 1 << 16, &n_group) || get_int(root, "topk_group", 1, 0, 1 << 16, &topk_group))
        return -1;
    v->hc_magnitude = (float)mag;
    v->hc_eps = (float)eps;
    v->swiglu_limit = (float)lim;
    if (v->qk_rope_head_dim % 2)
        return hy_err_set("qk_rope_head_dim (%d) must be even for RoPE", v->qk_rope_head_dim);
    if (!(lim >= 0))
        return hy_err_set("swiglu_limit (%g) must be >= 0", lim);
    if (n_group > 1 || topk_group > 1)
        return hy_err_set("n_group (%d) / topk_group (%d) > 1 (grouped routing) is not supported for hy_v4", n_group,
                          topk_group);
    int enable_ihc = 1;
    if (get_bool(root, "enable_ihc", 1, &enable_ihc))
        return -1;
    if (!enable_ihc)
        return hy_err_set("enable_ihc false is not supported (hy_v4 checkpoints carry hyper-connection weights)");
    const char *gt = json_string_value(json_object_get(root, "gating_type"));
    if (v->gated && gt && strcmp(gt, "elementwise") != 0)
        return hy_err_set("gating_type \"%s\" is not supported (only \"elementwise\")", gt);
    const char *sf = json_string_value(json_object_get(root, "scoring_func"));
    if (sf && strcmp(sf, "sigmoid") != 0)
        return hy_err_set("scoring_func \"%s\" is not supported for hy_v4 (only sigmoid)", sf);
    if (!use_dsa)
        v->index_topk = 0;
    if (v->index_topk > 0) {
        if (v->index_n_heads <= 0 || v->index_head_dim <= v->qk_rope_head_dim)
            return hy_err_set("index_n_heads (%d) must be > 0 and index_head_dim (%d) > qk_rope_head_dim (%d)",
                              v->index_n_heads, v->index_head_dim, v->qk_rope_head_dim);
        if (read_indexer_types(root, c))
            return -1;
    }
    /* MLA: one latent per token (num_key_value_heads is ignored, as every reader does); head_dim is the RoPE
     * width (transformers overwrites the file's value the same way); pairs (2i, 2i+1) (spec §6.3) */
    c->num_key_value_heads = c->num_attention_heads;
    c->head_dim = v->qk_rope_head_dim;
    c->rope_interleaved = 1;
    c->qk_norm = 0;
    return 0;
}

static int parse_config(json_t *root, struct hy_model_config *c)
{
    if (!json_is_object(root))
        return hy_err_set("top level must be a JSON object");
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    if (!mt)
        return hy_err_set("field \"model_type\" is missing");
    snprintf(c->model_type, sizeof(c->model_type), "%s", mt);
    if (strcmp(mt, "hy_v3") == 0)
        c->arch = HY_ARCH_HY_V3;
    else if (strcmp(mt, "hy_v4") == 0)
        c->arch = HY_ARCH_HY_V4;
    else if (strcmp(mt, "llama") == 0)
        c->arch = HY_ARCH_LLAMA;
    else
        return hy_err_set("unknown architecture: model_type \"%s\" (supported: hy_v3, hy_v4, llama)", mt);

    const char *act = json_string_value(json_object_get(root, "hidden_act"));
    if (act && strcmp(act, "silu") != 0)
        return hy_err_set("hidden_act \"%s\" is not supported (only silu)", act);
    int attn_bias = 0, mlp_bias = 0;
    if (get_bool(root, "attention_bias", 0, &attn_bias) || get_bool(root, "mlp_bias", 0, &mlp_bias))
        return -1;
    if (attn_bias || mlp_bias)
        return hy_err_set("attention_bias / mlp_bias true is not supported");

    const int32_t big = 1 << 24;
    if (get_req_int(root, "vocab_size", 1, INT32_MAX, &c->vocab_size) ||
        get_req_int(root, "hidden_size", 1, big, &c->hidden_size) ||
        get_req_int(root, "num_hidden_layers", 1, HY_MAX_LAYERS, &c->num_hidden_layers) ||
        get_req_int(root, "num_attention_heads", 1, 4096, &c->num_attention_heads))
        return -1;
    if (get_int(root, "num_key_value_heads", c->num_attention_heads, 1, 4096, &c->num_key_value_heads) ||
        get_int(root, "head_dim", c->hidden_size / c->num_attention_heads, 1, 1 << 16, &c->head_dim) ||
        get_int(root, "intermediate_size", 0, 0, big, &c->intermediate_size) ||
        get_int(root, "max_position_embeddings", 4096, 1, INT32_MAX, &c->max_position_embeddings) ||
        get_bool(root, "tie_word_embeddings", 0, &c->tie_word_embeddings) ||
        get_bool(root, "qk_norm", c->arch == HY_ARCH_HY_V3, &c->qk_norm))
        return -1;
    if (c->arch != HY_ARCH_HY_V4 && c->num_attention_heads % c->num_key_value_heads) /* hy_v4: ignored (MLA) */
        return hy_err_set("num_attention_heads (%d) is not a multiple of num_key_value_heads (%d)",
                          c->num_attention_heads, c->num_key_value_heads);
    if (c->head_dim <= 0) /* the default hidden_size / num_attention_heads can be 0 */
        return hy_err_set("head_dim is 0: hidden_size (%d) < num_attention_heads (%d) and no \"head_dim\"",
                          c->hidden_size, c->num_attention_heads);
    if (c->head_dim % 2)
        return hy_err_set("head_dim (%d) must be even for RoPE", c->head_dim);
    double eps;
    if (get_num(root, "rms_norm_eps", 1e-6, &eps))
        return -1;
    if (!(eps > 0 && eps < 1))
        return hy_err_set("rms_norm_eps (%g) must be in (0, 1)", eps);
    c->rms_norm_eps = (float)eps;
    if (read_rope(root, c) || read_layer_types(root, c) || read_moe(root, c) ||
        (c->arch == HY_ARCH_HY_V4 && read_v4(root, c)))
        return -1;
    int any_dense = 0;
    for (int i = 0; i < c->num_hidden_layers; i++)
        any_dense |= !c->layer_is_moe[i];
    if (any_dense && c->intermediate_size <= 0)
        return hy_err_set("field \"intermediate_size\" is required (dense layers present)");
    if (c->arch == HY_ARCH_LLAMA)
        c->num_nextn_predict_layers = 0;

    if (get_int(root, "bos_token_id", -1, -1, INT32_MAX, &c->bos_token_id) ||
        get_int(root, "pad_token_id", -1, -1, INT32_MAX, &c->pad_token_id) ||
        get_int(root, "sep_token_id", -1, -1, INT32_MAX, &c->sep_token_id) ||
        get_int(root, "eod_token_id", -1, -1, INT32_MAX, &c->eod_token_id))
        return -1;
    return add_eos(c, json_object_get(root, "eos_token_id"), "eos_token_id");
}

static int load_json_file(const char *path, json_t **out)
{
    json_error_t je;
    *out = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!*out)
        return hy_err_set("%s: invalid JSON at line %d: %s", path, je.line, je.text);
    return 0;
}

int hy_model_config_load(const char *model_dir, struct hy_model_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    char *path = hy_path_join(model_dir, "config.json");
    if (!path)
        return hy_err_set("out of memory");
    int rc = -1;
    json_t *root = NULL;
    if (!hy_file_exists(path)) {
        hy_err_set("%s: not found (is %s a model directory?)", path, model_dir);
        goto out;
    }
    if (load_json_file(path, &root))
        goto out;
    if (parse_config(root, cfg)) {
        hy_err_prefix("%s", path);
        goto out;
    }
    free(path);
    path = hy_path_join(model_dir, "generation_config.json");
    if (path && hy_file_exists(path)) {
        json_t *gen = NULL;
        if (load_json_file(path, &gen))
            goto out;
        int r = json_is_object(gen) ? add_eos(cfg, json_object_get(gen, "eos_token_id"), "eos_token_id")
                                    : hy_err_set("top level must be a JSON object");
        json_decref(gen);
        if (r) {
            hy_err_prefix("%s", path);
            goto out;
        }
    }
    rc = 0;
out:
    json_decref(root);
    free(path);
    return rc;
}

int hy_model_config_is_eos(const struct hy_model_config *cfg, int32_t id)
{
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_token_ids[i] == id)
            return 1;
    return 0;
}
