/* run_config.c - cann-recipes-infer style YAML job config (libyaml document API).
 *
 * The schema is one flat table (section, key, kind, range, field offset). Parsing walks the YAML
 * mapping tree: a key is either a leaf of its section, a nested section, or an error naming the
 * full key path. Cross-key checks (multi-rank, with_ckpt, dataset_path) run after the walk, once
 * the Ascend-only warning has been printed.
 */
#include "config/run_config.h"

#include "base/err.h"
#include "base/fileio.h"
#include "base/log.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

/* ------------------------------------------------------------------------------------------ */
/* Schema                                                                                       */

enum vkind {
    V_STR,   /* any scalar, kept as a string */
    V_BOOL,  /* true/false */
    V_INT,   /* int32 in [lo, hi] */
    V_I64,   /* int64 in [lo, hi] */
    V_FLOAT, /* float in [lo, hi] ((lo, hi] when lo_open) */
    V_ENUM,  /* one of choices */
};

#define NO_FIELD ((size_t)-1)
#define F(name) offsetof(struct hy_run_config, name)

struct key_spec {
    const char *section; /* "model_config", "model_config.custom_params", ... */
    const char *name;
    enum vkind kind;
    int ascend_only; /* accepted, type-checked, ignored, named in the warning */
    size_t off;      /* field in struct hy_run_config, or NO_FIELD */
    double lo, hi;
    int lo_open;
    const char *const *choices; /* V_ENUM: NULL-terminated */
};

static const char *const dtype_choices[] = {"bfloat16", "float32", NULL};
/* model_config.kv_cache_dtype (hyinfer extension; vLLM's --kv-cache-dtype names, see hy_kv_dtype_parse) */
static const char *const kv_dtype_choices[] = {"auto", "bf16", "bfloat16", "fp8", "fp8_e4m3", "fp32", "float32", NULL};
static const char *const dataset_choices[] = {"default", "LongBench", "InfiniteBench", NULL};

#define I32MAX 2147483647.0
#define I64MAX 9223372036854775807.0

#define SAMPLING_KEYS(sec)                                                                                             \
    {sec, "temperature", V_FLOAT, 0, F(temperature), 0, 1e6, 0, NULL},                                                 \
        {sec, "top_p", V_FLOAT, 0, F(top_p), 0, 1, 1, NULL}, {sec, "top_k", V_INT, 0, F(top_k), 0, I32MAX, 0, NULL},   \
        {sec, "min_p", V_FLOAT, 0, F(min_p), 0, 1, 0, NULL},                                                           \
        {sec, "repetition_penalty", V_FLOAT, 0, F(repetition_penalty), 0, 1e6, 1, NULL},                               \
    {                                                                                                                  \
        sec, "seed", V_I64, 0, F(seed), 0, I64MAX, 0, NULL                                                             \
    }

static const struct key_spec specs[] = {
    {"model_config", "model_name", V_STR, 0, F(model_name), 0, 0, 0, NULL},
    {"model_config", "model_path", V_STR, 0, F(model_path), 0, 0, 0, NULL},
    {"model_config", "dtype", V_ENUM, 0, F(dtype), 0, 0, 0, dtype_choices},
    {"model_config", "kv_cache_dtype", V_ENUM, 0, F(kv_cache_dtype), 0, 0, 0, kv_dtype_choices},
    {"model_config", "with_ckpt", V_BOOL, 0, F(with_ckpt), 0, 0, 0, NULL},
    {"model_config", "next_n", V_INT, 0, F(next_n), 0, 16, 0, NULL},
    {"model_config", "output_path", V_STR, 0, F(output_path), 0, 0, 0, NULL},
    {"model_config", "platform_version", V_STR, 1, NO_FIELD, 0, 0, 0, NULL},
    {"model_config", "exe_mode", V_STR, 1, NO_FIELD, 0, 0, 0, NULL},
    {"model_config", "enable_profiler", V_BOOL, 1, NO_FIELD, 0, 0, 0, NULL},
    {"model_config", "enable_cache_compile", V_BOOL, 1, NO_FIELD, 0, 0, 0, NULL},
    {"model_config", "enable_static_kernel", V_BOOL, 1, NO_FIELD, 0, 0, 0, NULL},
    {"model_config", "force_eplb", V_BOOL, 1, NO_FIELD, 0, 0, 0, NULL},
    {"model_config", "enable_weight_nz", V_BOOL, 1, NO_FIELD, 0, 0, 0, NULL},
    {"model_config.custom_params", "enable_online_split_weight", V_BOOL, 1, NO_FIELD, 0, 0, 0, NULL},
    {"model_config.custom_params", "enable_multi_streams", V_BOOL, 1, NO_FIELD, 0, 0, 0, NULL},
    {"model_config.custom_params", "enable_sp", V_BOOL, 0, F(enable_sp), 0, 0, 0, NULL},

    {"data_config", "dataset", V_ENUM, 0, F(dataset), 0, 0, 0, dataset_choices},
    {"data_config", "dataset_path", V_STR, 0, F(dataset_path), 0, 0, 0, NULL},
    {"data_config", "input_truncated_len", V_INT, 0, F(input_truncated_len), 0, I32MAX, 0, NULL},
    {"data_config", "apply_chat_template", V_BOOL, 0, F(apply_chat_template), 0, 0, 0, NULL},

    {"parallel_config", "world_size", V_INT, 0, F(world_size), 1, I32MAX, 0, NULL},
    {"parallel_config", "attn_tp_size", V_INT, 0, F(attn_tp_size), 1, I32MAX, 0, NULL},
    {"parallel_config", "dense_tp_size", V_INT, 0, F(dense_tp_size), 1, I32MAX, 0, NULL},
    {"parallel_config", "moe_tp_size", V_INT, 0, F(moe_tp_size), 1, I32MAX, 0, NULL},
    {"parallel_config", "embed_tp_size", V_INT, 0, F(embed_tp_size), 1, I32MAX, 0, NULL},
    {"parallel_config", "lmhead_tp_size", V_INT, 0, F(lmhead_tp_size), 1, I32MAX, 0, NULL},
    {"parallel_config", "o_proj_tp_size", V_INT, 0, F(o_proj_tp_size), 1, I32MAX, 0, NULL},
    {"parallel_config", "cp_size", V_INT, 0, F(cp_size), 1, I32MAX, 0, NULL},
    {"parallel_config", "shared_tp_size", V_INT, 0, F(shared_tp_size), 1, I32MAX, 0, NULL},

    {"scheduler_config", "max_new_tokens", V_INT, 0, F(max_new_tokens), 1, I32MAX, 0, NULL},
    {"scheduler_config", "batch_size", V_INT, 0, F(batch_size), 1, I32MAX, 0, NULL},
    {"scheduler_config", "mem_fraction_static", V_FLOAT, 1, NO_FIELD, 0, 1, 1, NULL},
    {"scheduler_config", "max_prefill_tokens", V_INT, 0, F(max_prefill_tokens), 0, I32MAX, 0, NULL},
    {"scheduler_config", "block_size", V_INT, 0, F(block_size), 1, I32MAX, 0, NULL},
    {"scheduler_config", "num_reserved_decode_tokens", V_INT, 0, F(num_reserved_decode_tokens), 0, I32MAX, 0, NULL},

    SAMPLING_KEYS("sampling"),
    SAMPLING_KEYS("scheduler_config.sampling"),
};
#define N_SPECS (sizeof(specs) / sizeof(specs[0]))

/* Maps that may appear; "" is the document root. */
static const char *const sections[] = {
    "model_config",
    "data_config",
    "parallel_config",
    "scheduler_config",
    "sampling",
    "model_config.custom_params",
    "scheduler_config.sampling",
};
#define N_SECTIONS (sizeof(sections) / sizeof(sections[0]))

/* ------------------------------------------------------------------------------------------ */
/* Parse state                                                                                  */

struct ctx {
    const char *file;
    yaml_document_t *doc;
    struct hy_run_config *cfg;
    int line[N_SPECS]; /* 1-based line of each key's value, 0 = absent */
    char *warn;        /* Ascend-only keys seen, ", "-joined */
    size_t warn_len;
};

static int node_line(const yaml_node_t *n)
{
    return (int)n->start_mark.line + 1;
}

static const char *node_kind_name(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a sequence";
    default:
        return "a scalar";
    }
}

/* Copies a scalar for messages: at most 60 bytes, with "..." when cut. */
static void show_value(char *buf, size_t cap, const yaml_node_t *v)
{
    const char *s = (const char *)v->data.scalar.value;
    size_t n = v->data.scalar.length;
    if (n > 60)
        snprintf(buf, cap, "\"%.60s...\"", s);
    else
        snprintf(buf, cap, "\"%.*s\"", (int)n, s);
}

static int is_plain(const yaml_node_t *v)
{
    return v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static int is_null_scalar(const yaml_node_t *v)
{
    if (v->type != YAML_SCALAR_NODE || !is_plain(v))
        return 0;
    const char *s = (const char *)v->data.scalar.value;
    return v->data.scalar.length == 0 || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
           !strcmp(s, "NULL");
}

static int add_warning(struct ctx *c, const char *full)
{
    size_t n = strlen(full);
    char *w = realloc(c->warn, c->warn_len + n + 3);
    if (!w)
        return hy_err_set("%s: out of memory", c->file);
    if (c->warn_len) {
        memcpy(w + c->warn_len, ", ", 2);
        c->warn_len += 2;
    }
    memcpy(w + c->warn_len, full, n + 1);
    c->warn_len += n;
    c->warn = w;
    return 0;
}

static void describe_range(char *buf, size_t cap, const struct key_spec *s)
{
    const char *what = s->kind == V_FLOAT ? "a number" : "an integer";
    if (s->hi >= I32MAX)
        snprintf(buf, cap, "%s %s %.17g", what, s->lo_open ? ">" : ">=", s->lo);
    else
        snprintf(buf, cap, "%s in %s%.17g, %.17g]", what, s->lo_open ? "(" : "[", s->lo, s->hi);
}

static int set_value(struct ctx *c, size_t si, const char *full, const yaml_node_t *v)
{
    const struct key_spec *s = &specs[si];
    char *base = (char *)c->cfg;
    int line = node_line(v);
    char shown[80], want[96];

    if (s->ascend_only && add_warning(c, full) != 0)
        return -1;
    c->line[si] = line;
    if (v->type != YAML_SCALAR_NODE)
        return hy_err_set("%s:%d: %s: expected a single value, got %s", c->file, line, full, node_kind_name(v));
    if (is_null_scalar(v))
        return 0; /* keep the default */
    const char *text = (const char *)v->data.scalar.value;
    size_t len = v->data.scalar.length;
    show_value(shown, sizeof(shown), v);
    if (strlen(text) != len)
        return hy_err_set("%s:%d: %s: value contains a NUL byte", c->file, line, full);

    switch (s->kind) {
    case V_STR:
    case V_ENUM: {
        if (s->kind == V_ENUM) {
            int ok = 0;
            size_t k;
            want[0] = '\0';
            for (k = 0; s->choices[k]; k++) {
                if (!strcmp(text, s->choices[k]))
                    ok = 1;
                snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s", k ? ", " : "", s->choices[k]);
            }
            if (!ok)
                return hy_err_set("%s:%d: %s: expected one of %s, got %s", c->file, line, full, want, shown);
        }
        if (s->off == NO_FIELD)
            return 0;
        char **dst = (char **)(base + s->off);
        char *copy = strdup(text);
        if (!copy)
            return hy_err_set("%s: out of memory", c->file);
        free(*dst);
        *dst = copy;
        return 0;
    }
    case V_BOOL: {
        int b;
        if (is_plain(v) && (!strcmp(text, "true") || !strcmp(text, "True") || !strcmp(text, "TRUE")))
            b = 1;
        else if (is_plain(v) && (!strcmp(text, "false") || !strcmp(text, "False") || !strcmp(text, "FALSE")))
            b = 0;
        else
            return hy_err_set("%s:%d: %s: expected true or false, got %s%s", c->file, line, full, shown,
                              is_plain(v) ? "" : " (a quoted string)");
        if (s->off != NO_FIELD)
            *(int *)(base + s->off) = b;
        return 0;
    }
    case V_INT:
    case V_I64:
    case V_FLOAT: {
        describe_range(want, sizeof(want), s);
        if (!is_plain(v))
            return hy_err_set("%s:%d: %s: expected %s, got %s (a quoted string)", c->file, line, full, want, shown);
        char *end = NULL;
        errno = 0;
        double d;
        long long ll = 0;
        if (s->kind == V_FLOAT) {
            d = strtod(text, &end);
            if (end == text || *end || errno == ERANGE || !isfinite(d))
                return hy_err_set("%s:%d: %s: expected %s, got %s", c->file, line, full, want, shown);
        } else {
            size_t i = (text[0] == '-' || text[0] == '+') ? 1 : 0;
            if (text[i] == '\0')
                return hy_err_set("%s:%d: %s: expected %s, got %s", c->file, line, full, want, shown);
            for (; text[i]; i++)
                if (text[i] < '0' || text[i] > '9')
                    return hy_err_set("%s:%d: %s: expected %s, got %s", c->file, line, full, want, shown);
            ll = strtoll(text, &end, 10);
            if (errno == ERANGE)
                return hy_err_set("%s:%d: %s: expected %s, got %s (out of range)", c->file, line, full, want, shown);
            d = (double)ll;
        }
        if ((s->lo_open ? d <= s->lo : d < s->lo) || d > s->hi)
            return hy_err_set("%s:%d: %s: expected %s, got %s", c->file, line, full, want, shown);
        if (s->off == NO_FIELD)
            return 0;
        if (s->kind == V_FLOAT)
            *(float *)(base + s->off) = (float)d;
        else if (s->kind == V_INT)
            *(int32_t *)(base + s->off) = (int32_t)ll;
        else
            *(int64_t *)(base + s->off) = (int64_t)ll;
        return 0;
    }
    }
    return hy_err_set("%s:%d: %s: internal error: bad key kind", c->file, line, full);
}

/* Levenshtein distance of two short strings, capped at 9. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 9;
    int row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb] > 9 ? 9 : row[lb];
}

/* The last path component of a section name ("model_config.custom_params" -> "custom_params"). */
static const char *section_leaf(const char *sec)
{
    const char *dot = strrchr(sec, '.');
    return dot ? dot + 1 : sec;
}

/* 1 if `sec` is a direct child section of `parent` ("" = root). */
static int section_child_of(const char *sec, const char *parent)
{
    size_t n = strlen(parent);
    if (n == 0)
        return strchr(sec, '.') == NULL;
    return !strncmp(sec, parent, n) && sec[n] == '.' && strchr(sec + n + 1, '.') == NULL;
}

static int unknown_key(struct ctx *c, const char *path, const char *key, const char *full, int line)
{
    const char *best = NULL;
    int best_d = 3;
    for (size_t i = 0; i < N_SPECS; i++) {
        if (strcmp(specs[i].section, path) != 0)
            continue;
        int d = edit_distance(key, specs[i].name);
        if (d < best_d) {
            best_d = d;
            best = specs[i].name;
        }
    }
    for (size_t i = 0; i < N_SECTIONS; i++) {
        if (!section_child_of(sections[i], path))
            continue;
        int d = edit_distance(key, section_leaf(sections[i]));
        if (d < best_d) {
            best_d = d;
            best = section_leaf(sections[i]);
        }
    }
    if (best)
        return hy_err_set("%s:%d: %s: unknown key (did you mean %s?)", c->file, line, full, best);
    return hy_err_set("%s:%d: %s: unknown key", c->file, line, full);
}

static int walk_map(struct ctx *c, const yaml_node_t *map, const char *path)
{
    const yaml_node_pair_t *p;
    for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        const yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (!k || !v)
            return hy_err_set("%s: malformed YAML document", c->file);
        if (k->type != YAML_SCALAR_NODE)
            return hy_err_set("%s:%d: %s%skeys must be plain names, got %s", c->file, node_line(k), path,
                              *path ? ": " : "", node_kind_name(k));
        const char *key = (const char *)k->data.scalar.value;
        char full[256];
        snprintf(full, sizeof(full), "%s%s%s", path, *path ? "." : "", key);

        for (const yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
            const yaml_node_t *k2 = yaml_document_get_node(c->doc, q->key);
            if (k2 && k2->type == YAML_SCALAR_NODE && !strcmp((const char *)k2->data.scalar.value, key))
                return hy_err_set("%s:%d: %s: duplicate key (first on line %d)", c->file, node_line(k), full,
                                  node_line(k2));
        }

        size_t si;
        for (si = 0; si < N_SPECS; si++)
            if (!strcmp(specs[si].section, path) && !strcmp(specs[si].name, key))
                break;
        if (si < N_SPECS) {
            if (set_value(c, si, full, v) != 0)
                return -1;
            continue;
        }
        size_t sec;
        for (sec = 0; sec < N_SECTIONS; sec++)
            if (!strcmp(sections[sec], full))
                break;
        if (sec == N_SECTIONS)
            return unknown_key(c, path, key, full, node_line(k));
        if (is_null_scalar(v))
            continue; /* "custom_params:" with nothing under it */
        if (v->type != YAML_MAPPING_NODE)
            return hy_err_set("%s:%d: %s: expected a mapping of keys, got %s", c->file, node_line(v), full,
                              node_kind_name(v));
        if (walk_map(c, v, full) != 0)
            return -1;
    }
    return 0;
}

static int spec_line(const struct ctx *c, const char *section, const char *name)
{
    for (size_t i = 0; i < N_SPECS; i++)
        if (!strcmp(specs[i].section, section) && !strcmp(specs[i].name, name))
            return c->line[i];
    return 0;
}

/* "file:12: " or "file: " when the line is unknown. */
static void where(char *buf, size_t cap, const char *file, int line)
{
    if (line > 0)
        snprintf(buf, cap, "%s:%d: ", file, line);
    else
        snprintf(buf, cap, "%s: ", file);
}

/* Every size >= 1 dividing world_size (the job's rank count is checked at start, config/parallel.h);
 * o_proj_tp_size / shared_tp_size follow attn_tp_size / dense_tp_size (1 or equal); no context
 * parallelism (cp_size 1). */
static int check_parallel(struct ctx *c)
{
    const struct hy_run_config *cfg = c->cfg;
    static const char *const names[] = {"attn_tp_size", "dense_tp_size", "moe_tp_size", "embed_tp_size",
                                        "lmhead_tp_size"};
    const int32_t vals[] = {cfg->attn_tp_size, cfg->dense_tp_size, cfg->moe_tp_size, cfg->embed_tp_size,
                            cfg->lmhead_tp_size};
    char at[300];
    for (int i = 0; i < 5; i++)
        if (cfg->world_size % vals[i] != 0) {
            where(at, sizeof(at), c->file, spec_line(c, "parallel_config", names[i]));
            return hy_err_set("%sparallel_config.%s=%d does not divide world_size %d", at, names[i], (int)vals[i],
                              (int)cfg->world_size);
        }
    if (cfg->o_proj_tp_size != 1 && cfg->o_proj_tp_size != cfg->attn_tp_size) {
        where(at, sizeof(at), c->file, spec_line(c, "parallel_config", "o_proj_tp_size"));
        return hy_err_set("%sparallel_config.o_proj_tp_size=%d: o_proj is split with the attention heads "
                          "(attn_tp_size %d); set it to 1 or %d",
                          at, (int)cfg->o_proj_tp_size, (int)cfg->attn_tp_size, (int)cfg->attn_tp_size);
    }
    if (cfg->shared_tp_size != 1 && cfg->shared_tp_size != cfg->dense_tp_size) {
        where(at, sizeof(at), c->file, spec_line(c, "parallel_config", "shared_tp_size"));
        return hy_err_set("%sparallel_config.shared_tp_size=%d: the shared expert is split with the dense MLP "
                          "(dense_tp_size %d); set it to 1 or %d",
                          at, (int)cfg->shared_tp_size, (int)cfg->dense_tp_size, (int)cfg->dense_tp_size);
    }
    if (cfg->cp_size != 1) {
        where(at, sizeof(at), c->file, spec_line(c, "parallel_config", "cp_size"));
        return hy_err_set("%sparallel_config.cp_size=%d: context parallelism is not implemented; set cp_size: 1", at,
                          (int)cfg->cp_size);
    }
    return 0;
}

/* Resolves a relative path against the YAML's directory when it exists there. */
static int resolve_path(struct ctx *c, char **path)
{
    if (!*path || (*path)[0] == '/' || !strcmp(c->cfg->config_dir, "."))
        return 0;
    char *cand = hy_path_join(c->cfg->config_dir, *path);
    if (!cand)
        return hy_err_set("%s: out of memory", c->file);
    struct stat st;
    if (stat(cand, &st) == 0) {
        free(*path);
        *path = cand;
    } else {
        free(cand);
    }
    return 0;
}

static int check_and_finish(struct ctx *c)
{
    struct hy_run_config *cfg = c->cfg;
    char at[300];
    if (!cfg->model_path || !cfg->model_path[0])
        return hy_err_set("%s: model_config.model_path: required key missing (the Hugging Face "
                          "checkpoint directory)",
                          c->file);
    if (!cfg->with_ckpt) {
        where(at, sizeof(at), c->file, spec_line(c, "model_config", "with_ckpt"));
        return hy_err_set("%smodel_config.with_ckpt=False: random weights are not supported; set "
                          "with_ckpt: True and point model_path at a checkpoint",
                          at);
    }
    if (check_parallel(c) != 0)
        return -1;
    if (cfg->dataset_path && !cfg->dataset_path[0]) {
        free(cfg->dataset_path);
        cfg->dataset_path = NULL;
    }
    if (strcmp(cfg->dataset, "default") != 0 && !cfg->dataset_path) {
        where(at, sizeof(at), c->file, spec_line(c, "data_config", "dataset"));
        return hy_err_set("%sdata_config.dataset=%s: needs data_config.dataset_path (a .jsonl "
                          "file)",
                          at, cfg->dataset);
    }
    if (cfg->output_path && !cfg->output_path[0]) {
        free(cfg->output_path);
        cfg->output_path = NULL;
    }
    if (resolve_path(c, &cfg->model_path) != 0 || resolve_path(c, &cfg->dataset_path) != 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Public API                                                                                   */

/* What hyinfer does with a key beyond its value rule (docs/cli.md prints these). */
static const struct {
    const char *key, *note;
} key_notes[] = {
    {"model_config.model_name", "a label in the report"},
    {"model_config.model_path", "the checkpoint directory (required)"},
    {"model_config.dtype", "the compute mode, as --dtype"},
    {"model_config.kv_cache_dtype", "hyinfer extension: as --kv-cache-dtype"},
    {"model_config.with_ckpt", "False (random weights) is refused"},
    {"model_config.next_n", "MTP speculative tokens (0 = off; more than 8 is refused)"},
    {"model_config.output_path", "writes the completions as JSON"},
    {"model_config.platform_version", "Ascend SoC name"},
    {"model_config.exe_mode", "Ascend graph mode: decode already runs without per-step allocation"},
    {"model_config.enable_profiler", "Ascend profiler"},
    {"model_config.enable_cache_compile", "Ascend graph cache"},
    {"model_config.enable_static_kernel", "Ascend static kernels"},
    {"model_config.force_eplb", "Ascend expert load balancing"},
    {"model_config.enable_weight_nz", "Ascend NZ weight layout"},
    {"model_config.custom_params.enable_online_split_weight", "Ascend weight split at load"},
    {"model_config.custom_params.enable_multi_streams", "Ascend multi-stream overlap"},
    {"model_config.custom_params.enable_sp", "sequence-parallel o_proj"},
    {"data_config.dataset", "the prompt source"},
    {"data_config.dataset_path", "the prompt file"},
    {"data_config.input_truncated_len", "longer prompts are cut from the middle"},
    {"data_config.apply_chat_template", "render each prompt as a user turn"},
    {"parallel_config.world_size", "ranks; must match the job's"},
    {"parallel_config.o_proj_tp_size", "1 or attn_tp_size; other values are refused"},
    {"parallel_config.shared_tp_size", "1 or dense_tp_size; other values are refused"},
    {"parallel_config.cp_size", "only 1: context parallelism is not implemented"},
    {"scheduler_config.mem_fraction_static", "Ascend memory share (serve's equivalent: --gpu-memory-utilization)"},
    {"scheduler_config.max_new_tokens", "tokens generated per prompt"},
    {"scheduler_config.batch_size", "prompts decoded together"},
    {"scheduler_config.block_size", "tokens per KV block"},
    {"scheduler_config.max_prefill_tokens", "prefill token budget per step (0 = input_truncated_len x batch_size)"},
    {"scheduler_config.num_reserved_decode_tokens",
     "no effect: decode slots reserved in Ascend graphs; the KV cache holds each sequence's full length"},
};

static const char *key_note(const struct key_spec *k, const char *full)
{
    for (size_t j = 0; j < sizeof(key_notes) / sizeof(key_notes[0]); j++)
        if (!strcmp(key_notes[j].key, full))
            return key_notes[j].note;
    if (strstr(k->section, "sampling"))
        return "hyinfer extension: sampling (unset: generation_config.json)";
    if (!strcmp(k->section, "parallel_config"))
        return "must divide world_size";
    return "";
}

void hy_run_config_print_keys(FILE *f)
{
    size_t n_impl = 0, n_ascend = 0, n_noop = 0;
    for (size_t i = 0; i < N_SPECS; i++) {
        char full[160];
        snprintf(full, sizeof(full), "%s.%s", specs[i].section, specs[i].name);
        if (specs[i].ascend_only)
            n_ascend++;
        else if (!strncmp(key_note(&specs[i], full), "no effect", 9))
            n_noop++;
        else
            n_impl++;
    }
    fprintf(f,
            "%zu keys: %zu implemented (some values refused, as noted), %zu accepted with no effect, %zu accepted "
            "with a warning line naming them (Ascend-only, no effect); any other key is an error.\n\n",
            N_SPECS, n_impl, n_noop, n_ascend);
    fprintf(f, "| YAML key | hyinfer | value | note |\n| --- | --- | --- | --- |\n");
    for (size_t i = 0; i < N_SPECS; i++) {
        const struct key_spec *k = &specs[i];
        char full[160], val[256];
        snprintf(full, sizeof(full), "%s.%s", k->section, k->name);
        switch (k->kind) {
        case V_STR:
            snprintf(val, sizeof(val), "string");
            break;
        case V_BOOL:
            snprintf(val, sizeof(val), "true / false");
            break;
        case V_ENUM:
            val[0] = '\0';
            for (int j = 0; k->choices[j]; j++)
                snprintf(val + strlen(val), sizeof(val) - strlen(val), "%s`%s`", j ? ", " : "", k->choices[j]);
            break;
        default:
            describe_range(val, sizeof(val), k);
            break;
        }
        const char *note = key_note(k, full);
        const char *status = k->ascend_only                   ? "warning, no effect"
                             : !strncmp(note, "no effect", 9) ? "accepted, no effect"
                                                              : "implemented";
        fprintf(f, "| `%s` | %s | %s | %s |\n", full, status, val, note);
    }
}

int hy_run_config_init(struct hy_run_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->model_name = strdup("hy3");
    cfg->dtype = strdup("bfloat16");
    cfg->kv_cache_dtype = strdup("auto");
    cfg->dataset = strdup("default");
    cfg->with_ckpt = 1;
    cfg->world_size = cfg->attn_tp_size = cfg->moe_tp_size = cfg->embed_tp_size = 1;
    cfg->lmhead_tp_size = cfg->dense_tp_size = cfg->o_proj_tp_size = cfg->cp_size = 1;
    cfg->shared_tp_size = 1;
    cfg->batch_size = 1;
    cfg->max_new_tokens = 128;
    cfg->block_size = 128;
    cfg->temperature = -1.0f;
    cfg->top_p = -1.0f;
    cfg->top_k = -1;
    cfg->seed = -1;
    cfg->min_p = -1.0f;
    cfg->repetition_penalty = -1.0f;
    if (!cfg->model_name || !cfg->dtype || !cfg->kv_cache_dtype || !cfg->dataset) {
        hy_run_config_free(cfg);
        return hy_err_set("run config: out of memory");
    }
    return 0;
}

void hy_run_config_free(struct hy_run_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->model_name);
    free(cfg->model_path);
    free(cfg->dtype);
    free(cfg->kv_cache_dtype);
    free(cfg->output_path);
    free(cfg->dataset);
    free(cfg->dataset_path);
    free(cfg->config_path);
    free(cfg->config_dir);
    free(cfg->ignored_keys);
    memset(cfg, 0, sizeof(*cfg));
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

int hy_run_config_load(const char *yaml_path, struct hy_run_config *cfg)
{
    char *text = NULL;
    size_t len = 0;
    int rc = -1, parser_ok = 0, doc_ok = 0;
    yaml_parser_t parser;
    yaml_document_t doc;
    struct ctx c;
    memset(&c, 0, sizeof(c));
    c.file = yaml_path;
    c.doc = &doc;
    c.cfg = cfg;

    if (hy_run_config_init(cfg) != 0)
        return -1;
    cfg->config_path = strdup(yaml_path);
    cfg->config_dir = dir_of(yaml_path);
    if (!cfg->config_path || !cfg->config_dir) {
        hy_err_set("%s: out of memory", yaml_path);
        goto done;
    }
    if (hy_file_read_all(yaml_path, &text, &len) != 0)
        goto done;
    if (!yaml_parser_initialize(&parser)) {
        hy_err_set("%s: out of memory (YAML parser)", yaml_path);
        goto done;
    }
    parser_ok = 1;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        hy_err_set("%s:%d:%d: YAML syntax error: %s%s%s", yaml_path, (int)parser.problem_mark.line + 1,
                   (int)parser.problem_mark.column + 1, parser.problem ? parser.problem : "unknown problem",
                   parser.context ? " " : "", parser.context ? parser.context : "");
        goto done;
    }
    doc_ok = 1;
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || is_null_scalar(root)) {
        hy_err_set("%s: empty config (expected a mapping with model_config, data_config, "
                   "parallel_config, scheduler_config)",
                   yaml_path);
        goto done;
    }
    if (root->type != YAML_MAPPING_NODE) {
        hy_err_set("%s:%d: top level: expected a mapping of sections, got %s", yaml_path, node_line(root),
                   node_kind_name(root));
        goto done;
    }
    {
        yaml_document_t extra;
        if (!yaml_parser_load(&parser, &extra)) {
            hy_err_set("%s:%d:%d: YAML syntax error: %s", yaml_path, (int)parser.problem_mark.line + 1,
                       (int)parser.problem_mark.column + 1, parser.problem ? parser.problem : "unknown problem");
            goto done;
        }
        const yaml_node_t *r2 = yaml_document_get_root_node(&extra);
        int line2 = r2 ? node_line(r2) : 0;
        yaml_document_delete(&extra);
        if (r2) {
            hy_err_set("%s:%d: a second YAML document; a config is one document", yaml_path, line2);
            goto done;
        }
    }
    if (walk_map(&c, root, "") != 0)
        goto done;
    if (c.warn) {
        hy_log_warn("%s: Ascend-only keys have no effect here and are ignored: %s", c.file, c.warn);
        cfg->ignored_keys = c.warn;
        c.warn = NULL;
    }
    if (check_and_finish(&c) != 0)
        goto done;
    rc = 0;
done:
    if (doc_ok)
        yaml_document_delete(&doc);
    if (parser_ok)
        yaml_parser_delete(&parser);
    free(text);
    free(c.warn);
    if (rc != 0)
        hy_run_config_free(cfg);
    return rc;
}
