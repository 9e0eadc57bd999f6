/* quant_config.c - parsing and matching of config.json quantization_config (quant_config.h). */
#include "config/quant_config.h"

#include "config/quant_ascend.h"

#include "base/err.h"
#include "base/fileio.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *hy_qformat_name(enum hy_qformat f)
{
    switch (f) {
    case HY_QF_NONE:
        return "none";
    case HY_QF_FP8_TENSOR:
        return "fp8";
    case HY_QF_MXFP8:
        return "mxfp8";
    case HY_QF_MXFP4:
        return "mxfp4";
    case HY_QF_W8A8_DYN:
        return "w8a8-dynamic";
    case HY_QF_W8A8_STATIC:
        return "w8a8";
    }
    return "?";
}

const char *hy_quant_method_name(enum hy_quant_method m)
{
    return m == HY_QM_FP8                  ? "fp8"
           : m == HY_QM_COMPRESSED_TENSORS ? "compressed-tensors"
           : m == HY_QM_ASCEND             ? "ascend"
                                           : "none";
}

static void list_free(struct hy_quant_list *l)
{
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].text);
        pcre2_code_free((pcre2_code *)l->v[i].re);
    }
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

void hy_quant_config_free(struct hy_quant_config *qc)
{
    if (!qc)
        return;
    list_free(&qc->ignore);
    for (int g = 0; g < qc->n_groups; g++) {
        free(qc->groups[g].name);
        list_free(&qc->groups[g].targets);
    }
    free(qc->groups);
    json_decref((json_t *)qc->desc);
    for (int i = 0; i < qc->n_owned; i++)
        free(qc->owned[i]);
    free(qc->owned);
    memset(qc, 0, sizeof(*qc));
}

int hy_quant_config_own(struct hy_quant_config *qc, void *p)
{
    if (qc->n_owned == qc->cap_owned) {
        const int cap = qc->cap_owned ? 2 * qc->cap_owned : 64;
        void **o = realloc(qc->owned, (size_t)cap * sizeof(void *));
        if (!o) {
            free(p);
            return hy_err_set("out of memory");
        }
        qc->owned = o;
        qc->cap_owned = cap;
    }
    qc->owned[qc->n_owned++] = p;
    return 0;
}

static int list_add(struct hy_quant_list *l, const char *text, const char *what)
{
    struct hy_quant_pattern *v = realloc(l->v, (size_t)(l->n + 1) * sizeof(*v));
    if (!v)
        return hy_err_set("out of memory");
    l->v = v;
    struct hy_quant_pattern *p = &v[l->n];
    p->re = NULL;
    p->text = strdup(text);
    if (!p->text)
        return hy_err_set("out of memory");
    l->n++;
    if (strncmp(text, "re:", 3) == 0) {
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)(text + 3), PCRE2_ZERO_TERMINATED, PCRE2_UTF, &ec, &eo, NULL);
        if (!re) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ec, msg, sizeof(msg));
            return hy_err_set("%s entry \"%s\": bad regex at offset %zu: %s", what, text, (size_t)eo, (char *)msg);
        }
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
        p->re = re;
    }
    return 0;
}

/* A list of strings (or absent / null). */
static int read_list(json_t *arr, const char *what, struct hy_quant_list *l)
{
    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr))
        return hy_err_set("%s must be a list of strings", what);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (!s)
            return hy_err_set("%s[%zu] must be a string", what, i);
        if (list_add(l, s, what))
            return -1;
    }
    return 0;
}

/* Match priority of pattern p against module name: 3 exact, 2 regex / dotted prefix, 1 class, 0 none. */
static int pattern_match(const struct hy_quant_pattern *p, const char *module, int allow_class)
{
    if (p->re) {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern((pcre2_code *)p->re, NULL);
        if (!md)
            return 0;
        int rc =
            pcre2_match((pcre2_code *)p->re, (PCRE2_SPTR)module, PCRE2_ZERO_TERMINATED, 0, PCRE2_ANCHORED, md, NULL);
        pcre2_match_data_free(md);
        return rc >= 0 ? 2 : 0;
    }
    if (strcmp(p->text, module) == 0)
        return 3;
    size_t n = strlen(p->text);
    if (n && strncmp(p->text, module, n) == 0 && module[n] == '.')
        return 2;
    if (allow_class && strcmp(p->text, "Linear") == 0)
        return 1;
    return 0;
}

static int list_match(const struct hy_quant_list *l, const char *module, int allow_class)
{
    int best = 0;
    for (int i = 0; i < l->n; i++) {
        int r = pattern_match(&l->v[i], module, allow_class);
        if (r > best)
            best = r;
    }
    return best;
}

int hy_quant_config_lookup(const struct hy_quant_config *qc, const char *module, int *group)
{
    *group = -1;
    if (qc->method == HY_QM_ASCEND)
        return hy_quant_ascend_lookup(qc, module, group);
    if (qc->method == HY_QM_NONE || list_match(&qc->ignore, module, 0))
        return HY_QF_NONE;
    int best = 0, g_best = -1, tie = -1;
    for (int g = 0; g < qc->n_groups; g++) {
        int r = list_match(&qc->groups[g].targets, module, 1);
        if (r > best) {
            best = r;
            g_best = g;
            tie = -1;
        } else if (r && r == best) {
            tie = g;
        }
    }
    if (g_best < 0)
        return HY_QF_NONE;
    if (tie >= 0)
        return hy_err_set("quantization_config: module \"%s\" is targeted by both config_groups \"%s\" and \"%s\"",
                          module, qc->groups[g_best].name, qc->groups[tie].name);
    *group = g_best;
    return (int)qc->groups[g_best].format;
}

static int add_group(struct hy_quant_config *qc, const char *name, enum hy_qformat f, struct hy_quant_group **out)
{
    struct hy_quant_group *g = realloc(qc->groups, (size_t)(qc->n_groups + 1) * sizeof(*g));
    if (!g)
        return hy_err_set("out of memory");
    qc->groups = g;
    g = &g[qc->n_groups++];
    memset(g, 0, sizeof(*g));
    g->format = f;
    g->name = strdup(name);
    if (!g->name)
        return hy_err_set("out of memory");
    *out = g;
    return 0;
}

/* An integer pair [a, b] (weight_block_size / block_structure); -1 when absent or not a pair. */
static int read_pair(json_t *v, long long *a, long long *b)
{
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(json_array_get(v, 0)) ||
        !json_is_integer(json_array_get(v, 1)))
        return -1;
    *a = json_integer_value(json_array_get(v, 0));
    *b = json_integer_value(json_array_get(v, 1));
    return 0;
}

static int parse_fp8(json_t *q, struct hy_quant_config *qc)
{
    json_t *bs = json_object_get(q, "weight_block_size");
    if (bs && !json_is_null(bs)) {
        long long a, b;
        if (read_pair(bs, &a, &b))
            return hy_err_set("quant_method fp8: weight_block_size must be [rows, cols]");
        return hy_err_set("quant_method fp8 with weight_block_size [%lld, %lld] (block-quantized fp8) is not "
                          "supported; only per-tensor fp8 (Hy3-FP8) is",
                          a, b);
    }
    json_t *as = json_object_get(q, "activation_scheme");
    if (as && !json_is_null(as)) {
        const char *s = json_string_value(as);
        if (!s || (strcmp(s, "static") && strcmp(s, "dynamic")))
            return hy_err_set("quant_method fp8: activation_scheme must be \"static\" or \"dynamic\"");
        snprintf(qc->activation_scheme, sizeof(qc->activation_scheme), "%s", s);
    }
    const char *keys[] = {"ignored_layers", "ignore", "ignore_layers", "modules_to_not_convert"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (read_list(json_object_get(q, keys[i]), keys[i], &qc->ignore))
            return -1;
    struct hy_quant_group *g;
    if (add_group(qc, "fp8", HY_QF_FP8_TENSOR, &g))
        return -1;
    return list_add(&g->targets, "Linear", "targets");
}

/* The weights object of a config group -> format. */
static int weight_format(json_t *w, const char *gname, enum hy_qformat *f)
{
    if (!json_is_object(w))
        return hy_err_set("config_groups.%s.weights must be an object", gname);
    const char *type = json_string_value(json_object_get(w, "type"));
    json_t *nb = json_object_get(w, "num_bits");
    if (!type || strcmp(type, "float") != 0)
        return hy_err_set("config_groups.%s.weights.type \"%s\" is not supported (only \"float\": FP8 / MXFP8 / "
                          "MXFP4)",
                          gname, type ? type : "?");
    if (!json_is_integer(nb) || (json_integer_value(nb) != 8 && json_integer_value(nb) != 4))
        return hy_err_set("config_groups.%s.weights.num_bits must be 8 or 4", gname);
    const int bits = (int)json_integer_value(nb);
    const char *strategy = json_string_value(json_object_get(w, "strategy"));
    long long a = 0, b = 0;
    int have_block = 0;
    const char *bkeys[] = {"block_structure", "weight_block_size"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(w, bkeys[i]);
        if (!v || json_is_null(v))
            continue;
        if (read_pair(v, &a, &b))
            return hy_err_set("config_groups.%s.weights.%s must be [rows, cols]", gname, bkeys[i]);
        have_block = 1;
    }
    json_t *gs = json_object_get(w, "group_size");
    if (!have_block && strategy && strcmp(strategy, "group") == 0) {
        if (!json_is_integer(gs))
            return hy_err_set("config_groups.%s.weights: strategy \"group\" needs an integer group_size", gname);
        a = 1;
        b = json_integer_value(gs);
        have_block = 1;
    }
    if (!have_block && bits == 8 && strategy && strcmp(strategy, "tensor") == 0) {
        *f = HY_QF_FP8_TENSOR;
        return 0;
    }
    if (!have_block)
        return hy_err_set("config_groups.%s.weights: float%d with strategy \"%s\" is not supported (supported: "
                          "block [1, 32] (MX) or, for 8 bits, strategy \"tensor\")",
                          gname, bits, strategy ? strategy : "?");
    if (a != 1 || b != 32)
        return hy_err_set("config_groups.%s.weights: float%d with block [%lld, %lld] is not supported (only "
                          "[1, 32]: MXFP8 / MXFP4%s)",
                          gname, bits, a, b, bits == 4 && a == 1 && b == 16 ? "; [1, 16] is NVFP4" : "");
    *f = bits == 8 ? HY_QF_MXFP8 : HY_QF_MXFP4;
    return 0;
}

static int parse_ct(json_t *q, struct hy_quant_config *qc)
{
    if (read_list(json_object_get(q, "ignore"), "ignore", &qc->ignore))
        return -1;
    json_t *groups = json_object_get(q, "config_groups");
    if (!json_is_object(groups) || json_object_size(groups) == 0)
        return hy_err_set("compressed-tensors: config_groups must be a non-empty object");
    const char *gname;
    json_t *grp;
    json_object_foreach(groups, gname, grp)
    {
        if (!json_is_object(grp))
            return hy_err_set("config_groups.%s must be an object", gname);
        enum hy_qformat f = HY_QF_NONE;
        if (weight_format(json_object_get(grp, "weights"), gname, &f))
            return -1;
        struct hy_quant_group *g;
        if (add_group(qc, gname, f, &g))
            return -1;
        json_t *t = json_object_get(grp, "targets");
        if (!json_is_array(t) || json_array_size(t) == 0)
            return hy_err_set("config_groups.%s.targets must be a non-empty list", gname);
        char what[160];
        snprintf(what, sizeof(what), "config_groups.%s.targets", gname);
        if (read_list(t, what, &g->targets))
            return -1;
        json_t *ia = json_object_get(grp, "input_activations");
        if (json_is_object(ia)) {
            const char *ty = json_string_value(json_object_get(ia, "type"));
            json_t *ab = json_object_get(ia, "num_bits");
            json_t *dyn = json_object_get(ia, "dynamic");
            snprintf(g->act, sizeof(g->act), "%s%lld %s%s", ty ? ty : "?",
                     json_is_integer(ab) ? (long long)json_integer_value(ab) : 0LL,
                     json_string_value(json_object_get(ia, "strategy"))
                         ? json_string_value(json_object_get(ia, "strategy"))
                         : "",
                     json_is_true(dyn) ? " dynamic" : "");
        }
    }
    return 0;
}

static int parse_obj(json_t *q, struct hy_quant_config *qc)
{
    if (!json_is_object(q))
        return hy_err_set("quantization_config must be an object");
    const char *m = json_string_value(json_object_get(q, "quant_method"));
    if (!m)
        return hy_err_set("quantization_config.quant_method is missing");
    if (strcmp(m, "fp8") == 0) {
        qc->method = HY_QM_FP8;
        return parse_fp8(q, qc);
    }
    if (strcmp(m, "compressed-tensors") == 0 || strcmp(m, "compressed_tensors") == 0) {
        qc->method = HY_QM_COMPRESSED_TENSORS;
        return parse_ct(q, qc);
    }
    return hy_err_set("quantization_config.quant_method \"%s\" is not supported (supported: fp8 (Hy3-FP8), "
                      "compressed-tensors with float8/float4 [1, 32] blocks (MXFP8 / MXFP4))",
                      m);
}

int hy_quant_config_parse_text(const char *json_text, struct hy_quant_config *qc)
{
    memset(qc, 0, sizeof(*qc));
    json_error_t je;
    json_t *q = json_loads(json_text, JSON_REJECT_DUPLICATES, &je);
    if (!q)
        return hy_err_set("quantization_config: invalid JSON at line %d: %s", je.line, je.text);
    int rc = parse_obj(q, qc);
    json_decref(q);
    return rc;
}

int hy_quant_config_load(const char *model_dir, struct hy_quant_config *qc)
{
    memset(qc, 0, sizeof(*qc));
    char *desc = hy_path_join(model_dir, HY_ASCEND_DESCRIPTION);
    if (desc && hy_file_exists(desc)) {
        int rc = hy_quant_ascend_load(desc, qc);
        free(desc);
        if (rc)
            return -1;
        char *cfg = hy_path_join(model_dir, "config.json");
        json_t *root = cfg ? json_load_file(cfg, 0, NULL) : NULL;
        const int both = root && json_object_get(root, "quantization_config") &&
                         !json_is_null(json_object_get(root, "quantization_config"));
        json_decref(root);
        rc = both ? hy_err_set("%s: quantization_config is set and the directory also has %s (an Ascend "
                               "checkpoint); remove one of the two",
                               cfg, HY_ASCEND_DESCRIPTION)
                  : 0;
        free(cfg);
        return rc;
    }
    free(desc);
    char *path = hy_path_join(model_dir, "config.json");
    if (!path)
        return hy_err_set("out of memory");
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    int rc = 0;
    if (!root) {
        rc = hy_err_set("%s: invalid JSON at line %d: %s", path, je.line, je.text);
    } else {
        json_t *q = json_object_get(root, "quantization_config");
        if (q && !json_is_null(q) && parse_obj(q, qc))
            rc = hy_err_prefix("%s", path);
    }
    json_decref(root);
    free(path);
    return rc;
}
