/* quant_ascend.c - quant_model_description.json of Ascend checkpoints (quant_ascend.h). */
#include "config/quant_ascend.h"

#include "base/err.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *suf)
{
    const size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

/* String-valued globals: which are informational and which name a feature not built yet. */
static int global_string(const char *key, const char *val, struct hy_quant_config *qc)
{
    if (strcmp(key, "model_quant_type") == 0) {
        snprintf(qc->model_quant_type, sizeof(qc->model_quant_type), "%s", val);
        return 1;
    }
    if (strcmp(key, "version") == 0)
        return 1;
    if ((!strcmp(key, "kv_cache_type") || !strcmp(key, "kv_quant_type")) && !strcmp(val, "C8")) {
        qc->kv_c8 = 1; /* the per-layer k/v_proj.kv_cache_scale / offset (kv_scales.c) */
        return 1;
    }
    static const char *const refused[] = {"kv_cache_type", "kv_quant_type", "fa_quant_type", "reduce_quant_type",
                                          "indexer_quant_type"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        if (strcmp(key, refused[i]) == 0)
            return hy_err_set("\"%s\": \"%s\" is not supported yet (attention / indexer activation quantization, "
                              "KV caches other than C8; supported: FLOAT, W8A8 and W8A8_DYNAMIC linears, C8 KV "
                              "scales)",
                              key, val);
    if (ends_with(key, ".quant_type"))
        return hy_err_set("\"%s\": \"%s\" (per-attention activation quantization) is not supported yet", key, val);
    return 0;
}

/* 1 for the global keys whose value is a type name (a string): model_quant_type, version, the KV /
 * attention quantization types. Tensor entries are the keys with a '.'. */
static int is_string_global(const char *key)
{
    static const char *const keys[] = {"model_quant_type", "version",           "kv_cache_type",     "kv_quant_type",
                                       "fa_quant_type",    "reduce_quant_type", "indexer_quant_type"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (!strcmp(key, keys[i]))
            return 1;
    return 0;
}

/* "an integer", "an object", ... for an error message */
static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    case JSON_STRING:
        break;
    }
    return "a string";
}

static int check_type(const char *name, const char *type)
{
    if (!strcmp(type, "FLOAT") || !strcmp(type, "W8A8") || !strcmp(type, "W8A8_DYNAMIC"))
        return 0;
    if (!strcmp(type, "C8")) {
        if (ends_with(name, "_proj.kv_cache_scale") || ends_with(name, "_proj.kv_cache_offset"))
            return 0;
        return hy_err_set("tensor \"%s\": type C8 marks KV cache scales (<layer>.self_attn.k_proj / v_proj "
                          ".kv_cache_scale / .kv_cache_offset), not this tensor",
                          name);
    }
    if (!strcmp(type, "W4A8_DYNAMIC"))
        return hy_err_set("tensor \"%s\": type W4A8_DYNAMIC (int4 weights) is not supported yet (supported: FLOAT, "
                          "W8A8, W8A8_DYNAMIC)",
                          name);
    return hy_err_set("tensor \"%s\": type \"%s\" is not supported (supported: FLOAT, W8A8, W8A8_DYNAMIC)", name, type);
}

/* The vLLM fused group of a linear weight name (specs/ascend_w8a8.md §1): q/k/v -> qkv_proj, gate/up ->
 * gate_up_proj, q_a / kv_a -> fused_qkv_a_proj, a layer's experts -> experts; 0 when it is in none. */
static int fused_key(const char *name, char *out, size_t cap)
{
    if (!ends_with(name, ".weight"))
        return 0;
    char m[512];
    snprintf(m, sizeof(m), "%.*s", (int)(strlen(name) - 7), name);
    const char *ex = strstr(m, ".mlp.experts.");
    if (ex && ex[13] >= '0' && ex[13] <= '9') {
        snprintf(out, cap, "%.*s.mlp.experts", (int)(ex - m), m);
        return 1;
    }
    char *dot = strrchr(m, '.');
    if (!dot)
        return 0;
    const char *leaf = dot + 1;
    const char *group = !strcmp(leaf, "q_proj") || !strcmp(leaf, "k_proj") || !strcmp(leaf, "v_proj") ? "qkv_proj"
                        : !strcmp(leaf, "gate_proj") || !strcmp(leaf, "up_proj")                      ? "gate_up_proj"
                        : !strcmp(leaf, "q_a_proj") || !strcmp(leaf, "kv_a_proj_with_mqa") ? "fused_qkv_a_proj"
                                                                                           : NULL;
    if (!group)
        return 0;
    snprintf(out, cap, "%.*s.%s", (int)(dot - m), m, group);
    return 1;
}

static int parse(json_t *root, struct hy_quant_config *qc)
{
    if (!json_is_object(root))
        return hy_err_set("must be a JSON object");
    qc->method = HY_QM_ASCEND;
    qc->groups = calloc(2, sizeof(*qc->groups));
    json_t *desc = json_object(), *fused = json_object();
    qc->desc = desc;
    if (!qc->groups || !desc || !fused) {
        json_decref(fused);
        return hy_err_set("out of memory");
    }
    qc->n_groups = 2;
    qc->groups[0].name = strdup("W8A8_DYNAMIC");
    qc->groups[0].format = HY_QF_W8A8_DYN;
    qc->groups[1].name = strdup("W8A8");
    qc->groups[1].format = HY_QF_W8A8_STATIC;
    int rc = 0;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (!json_is_string(v)) {                            /* non-string globals: group_size, metadata, optional */
            if (strchr(key, '.') || is_string_global(key)) { /* a tensor entry or a type-valued global */
                rc = hy_err_set("\"%s\": %s where a type name belongs (a string such as \"W8A8_DYNAMIC\", "
                                "\"W8A8\" or \"FLOAT\")",
                                key, json_kind(v));
                break;
            }
            if (!strcmp(key, "optional") && json_is_object(v) && json_object_get(v, "quarot")) {
                rc = hy_err_set("\"optional\": a QuaRot rotation (optional.quarot) is not supported");
                break;
            }
            continue;
        }
        const char *val = json_string_value(v);
        const int g = global_string(key, val, qc);
        if (g < 0) {
            rc = -1;
            break;
        }
        if (g > 0)
            continue;
        if ((rc = check_type(key, val)))
            break;
        if (ends_with(key, ".div.mul_scale")) {
            rc = hy_err_set("tensor \"%s\": unfused smoothing scales (msModelSlim's non-fusion smooth quant) are not "
                            "supported",
                            key);
            break;
        }
        if (ends_with(key, "norm.bias") && !strstr(key, ".indexer.")) { /* the indexer's LayerNorm has its own */
            rc = hy_err_set("tensor \"%s\": a norm bias (anti-outlier smoothing m4) is not supported yet", key);
            break;
        }
        char fk[512];
        if (fused_key(key, fk, sizeof(fk))) {
            json_t *first = json_object_get(fused, fk);
            if (!first) {
                json_object_set_new(fused, fk, json_string(key));
            } else {
                const char *fn = json_string_value(first),
                           *ft = json_string_value(json_object_get(desc, fn)); /* first is already in desc */
                if (strcmp(ft, val)) {
                    rc = hy_err_set("fused module \"%s\": \"%s\" is %s but \"%s\" is %s (vLLM-Ascend loads them as "
                                    "one layer: the types must agree)",
                                    fk, fn, ft, key, val);
                    break;
                }
            }
        }
        if (json_object_set(desc, key, v)) {
            rc = hy_err_set("out of memory");
            break;
        }
    }
    json_decref(fused);
    if (!rc && !qc->kv_c8) { /* C8 tensors without the global that turns them on: vLLM-Ascend would ignore them */
        const char *k;
        json_t *t;
        json_object_foreach(desc, k, t)
        {
            if (!strcmp(json_string_value(t), "C8"))
                return hy_err_set("tensor \"%s\" is typed C8 but the description has no \"kv_cache_type\": \"C8\"", k);
        }
    }
    return rc;
}

int hy_quant_ascend_load(const char *path, struct hy_quant_config *qc)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return hy_err_set("%s: invalid JSON at line %d: %s", path, je.line, je.text);
    const int rc = parse(root, qc);
    json_decref(root);
    return rc ? hy_err_prefix("%s", path) : 0;
}

const char *hy_quant_ascend_type(const struct hy_quant_config *qc, const char *tensor)
{
    return qc->method == HY_QM_ASCEND ? json_string_value(json_object_get((const json_t *)qc->desc, tensor)) : NULL;
}

int hy_quant_ascend_foreach(const struct hy_quant_config *qc,
                            int (*fn)(const char *tensor, const char *type, void *ctx), void *ctx)
{
    const char *key;
    json_t *v;
    json_t *desc = qc->desc;
    json_object_foreach(desc, key, v)
    {
        if (fn(key, json_string_value(v), ctx))
            return -1;
    }
    return 0;
}

int hy_quant_ascend_lookup(const struct hy_quant_config *qc, const char *module, int *group)
{
    *group = -1;
    char name[512];
    snprintf(name, sizeof(name), "%s.weight", module);
    const json_t *desc = qc->desc;
    const char *type = json_string_value(json_object_get(desc, name));
    if (!type)
        type = json_string_value(json_object_get(desc, module)); /* a stacked tensor's own name */
    if (!type) { /* vLLM-Ascend refuses this; the loader takes a float weight as FLOAT (hand-made descriptions
                    often lack the MTP layer) and refuses an int8 one */
        *group = HY_QGROUP_UNDESCRIBED;
        return HY_QF_NONE;
    }
    if (!strcmp(type, "FLOAT"))
        return HY_QF_NONE;
    *group = strcmp(type, "W8A8_DYNAMIC") == 0 ? 0 : 1;
    return (int)qc->groups[*group].format;
}
