/* dataset.c - prompts for offline runs: the default prompt list, LongBench / InfiniteBench jsonl. */
#include "cli/dataset.h"

#include "base/env.h"
#include "base/err.h"
#include "base/fileio.h"
#include "config/run_config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hy_dataset_free(struct hy_dataset *ds)
{
    if (!ds)
        return;
    for (size_t i = 0; i < ds->n; i++) {
        free(ds->prompts[i]);
        if (ds->references)
            free(ds->references[i]);
    }
    free(ds->prompts);
    free(ds->references);
    free(ds->source);
    memset(ds, 0, sizeof(*ds));
}

/* Appends one record; takes ownership of prompt and ref (ref may be NULL). */
static int ds_push(struct hy_dataset *ds, size_t *cap, char *prompt, char *ref)
{
    if (ds->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        char **np = realloc(ds->prompts, nc * sizeof(char *));
        if (np)
            ds->prompts = np;
        char **nr = np ? realloc(ds->references, nc * sizeof(char *)) : NULL;
        if (nr)
            ds->references = nr;
        if (!np || !nr) {
            free(prompt);
            free(ref);
            return hy_err_set("%s: out of memory", ds->source);
        }
        *cap = nc;
    }
    ds->prompts[ds->n] = prompt;
    ds->references[ds->n] = ref;
    ds->n++;
    return 0;
}

int hy_dataset_load_prompt_array(const char *path, struct hy_dataset *out)
{
    memset(out, 0, sizeof(*out));
    out->source = strdup(path);
    if (!out->source)
        return hy_err_set("%s: out of memory", path);
    char *text = NULL;
    size_t len = 0, cap = 0;
    if (hy_file_read_all(path, &text, &len) != 0)
        goto fail;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    free(text);
    if (!root) {
        hy_err_set("%s:%d: invalid JSON: %s", path, jerr.line, jerr.text);
        goto fail;
    }
    if (!json_is_array(root)) {
        json_decref(root);
        hy_err_set("%s: expected a JSON array of prompt strings", path);
        goto fail;
    }
    size_t i;
    json_t *v;
    json_array_foreach(root, i, v)
    {
        if (!json_is_string(v) || json_string_length(v) == 0) {
            json_decref(root);
            hy_err_set("%s: element %zu: expected a non-empty string", path, i);
            goto fail;
        }
        if (strlen(json_string_value(v)) != json_string_length(v)) {
            json_decref(root);
            hy_err_set("%s: element %zu: prompt contains a NUL character", path, i);
            goto fail;
        }
        char *p = strdup(json_string_value(v));
        if (!p || ds_push(out, &cap, p, NULL) != 0) {
            free(p);
            json_decref(root);
            hy_err_set("%s: out of memory", path);
            goto fail;
        }
    }
    json_decref(root);
    if (out->n == 0) {
        hy_err_set("%s: no prompts (an empty array)", path);
        goto fail;
    }
    return 0;
fail:
    hy_dataset_free(out);
    return -1;
}

/* A required string field of a jsonl record; NULL with the error set. */
static const char *qa_string(const char *path, size_t line, json_t *rec, const char *key)
{
    json_t *v = json_object_get(rec, key);
    if (!v) {
        hy_err_set("%s:%zu: missing field \"%s\"", path, line, key);
        return NULL;
    }
    if (!json_is_string(v)) {
        hy_err_set("%s:%zu: field \"%s\": expected a string", path, line, key);
        return NULL;
    }
    if (strlen(json_string_value(v)) != json_string_length(v)) {
        hy_err_set("%s:%zu: field \"%s\": contains a NUL character", path, line, key);
        return NULL;
    }
    return json_string_value(v);
}

/* The first reference answer: *ref = copy or NULL when absent. Returns -1 on a bad type. */
static int qa_reference(const char *path, size_t line, json_t *rec, const char *key, char **ref)
{
    *ref = NULL;
    json_t *v = json_object_get(rec, key);
    if (!v || json_is_null(v))
        return 0;
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            if (!json_is_string(e))
                return hy_err_set("%s:%zu: field \"%s\"[%zu]: expected a string", path, line, key, i);
        }
        v = json_array_size(v) ? json_array_get(v, 0) : NULL;
        if (!v)
            return 0;
    } else if (!json_is_string(v)) {
        return hy_err_set("%s:%zu: field \"%s\": expected a string or an array of strings", path, line, key);
    }
    *ref = strdup(json_string_value(v));
    if (!*ref)
        return hy_err_set("%s: out of memory", path);
    return 0;
}

int hy_dataset_load_qa_jsonl(const char *path, const char *answer_field, struct hy_dataset *out)
{
    memset(out, 0, sizeof(*out));
    out->source = strdup(path);
    if (!out->source)
        return hy_err_set("%s: out of memory", path);
    char *text = NULL;
    size_t len = 0, cap = 0;
    if (hy_file_read_all(path, &text, &len) != 0)
        goto fail;
    size_t line = 0;
    for (char *p = text; p < text + len;) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        char *end = nl ? nl : text + len;
        line++;
        char *q = p;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q == end) {
            p = end + 1;
            continue;
        }
        json_error_t jerr;
        json_t *rec = json_loadb(p, (size_t)(end - p), 0, &jerr);
        if (!rec) {
            hy_err_set("%s:%zu: invalid JSON (column %d): %s", path, line, jerr.column, jerr.text);
            goto fail_text;
        }
        if (!json_is_object(rec)) {
            json_decref(rec);
            hy_err_set("%s:%zu: expected a JSON object per line", path, line);
            goto fail_text;
        }
        const char *ctx = qa_string(path, line, rec, "context");
        const char *in = ctx ? qa_string(path, line, rec, "input") : NULL;
        char *ref = NULL;
        if (!in || qa_reference(path, line, rec, answer_field, &ref) != 0) {
            json_decref(rec);
            goto fail_text;
        }
        size_t n = strlen(ctx) + strlen(in) + sizeof(HY_DATASET_QA_TEMPLATE);
        char *prompt = malloc(n);
        if (prompt)
            snprintf(prompt, n, HY_DATASET_QA_TEMPLATE, ctx, in);
        json_decref(rec);
        if (!prompt) {
            free(ref);
            hy_err_set("%s: out of memory", path);
            goto fail_text;
        }
        if (ds_push(out, &cap, prompt, ref) != 0)
            goto fail_text;
        p = end + 1;
    }
    free(text);
    if (out->n == 0) {
        hy_err_set("%s: no records (the file is empty)", path);
        goto fail;
    }
    return 0;
fail_text:
    free(text);
fail:
    hy_dataset_free(out);
    return -1;
}

/* Finds data/prompts_default.json; returns a malloc'd path or NULL with the error set. */
static char *find_default_prompts(const struct hy_run_config *cfg, const char *root)
{
    const char *bases[6];
    char *owned[6] = {NULL};
    int nb = 0;
    if (root) {
        bases[nb++] = root;
        owned[nb] = hy_path_join(root, "..");
        bases[nb] = owned[nb];
        nb++;
    }
    struct hy_env_params ep; /* read now: HYINFER_ROOT may change between calls (tests) */
    hy_env_params_read(&ep);
    if (ep.root)
        bases[nb++] = ep.root;
    if (cfg->config_dir) {
        owned[nb] = hy_path_join(cfg->config_dir, "..");
        bases[nb] = owned[nb];
        nb++;
        bases[nb++] = cfg->config_dir;
    }
    bases[nb++] = ".";
    char *found = NULL;
    char tried[900] = "";
    for (int i = 0; i < nb && !found; i++) {
        if (!bases[i])
            continue;
        char *cand = hy_path_join(bases[i], HY_DATASET_DEFAULT_FILE);
        if (!cand)
            break;
        if (hy_file_exists(cand)) {
            found = cand;
        } else {
            size_t t = strlen(tried);
            snprintf(tried + t, sizeof(tried) - t, "%s%s", t ? ", " : "", cand);
            free(cand);
        }
    }
    for (int i = 0; i < 6; i++)
        free(owned[i]);
    if (!found)
        hy_err_set("data_config.dataset=default: cannot find %s (tried %s); set "
                   "data_config.dataset_path",
                   HY_DATASET_DEFAULT_FILE, tried);
    return found;
}

int hy_dataset_load(const struct hy_run_config *cfg, const char *root, struct hy_dataset *out)
{
    memset(out, 0, sizeof(*out));
    const char *ds = cfg->dataset ? cfg->dataset : "default";
    if (!strcmp(ds, "default")) {
        if (cfg->dataset_path)
            return hy_dataset_load_prompt_array(cfg->dataset_path, out);
        char *path = find_default_prompts(cfg, root);
        if (!path)
            return -1;
        int rc = hy_dataset_load_prompt_array(path, out);
        free(path);
        return rc;
    }
    const char *answer = !strcmp(ds, "LongBench") ? "answers" : !strcmp(ds, "InfiniteBench") ? "answer" : NULL;
    if (!answer)
        return hy_err_set("data_config.dataset=%s: unknown dataset (default, LongBench, "
                          "InfiniteBench)",
                          ds);
    if (!cfg->dataset_path)
        return hy_err_set("data_config.dataset=%s: needs data_config.dataset_path", ds);
    return hy_dataset_load_qa_jsonl(cfg->dataset_path, answer, out);
}
