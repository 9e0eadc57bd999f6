#include "model/safetensors.h"

#include "base/err.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HY_ST_MAX_HEADER (256u << 20) /* 256 MiB of JSON is already absurd */

static int parse_tensor(const char *label, const char *name, json_t *info, const uint8_t *data, uint64_t data_size,
                        struct hy_st_tensor *t)
{
    if (!json_is_object(info))
        return hy_err_set("%s: tensor \"%s\": header entry is not an object", label, name);
    const char *dt = json_string_value(json_object_get(info, "dtype"));
    json_t *shape = json_object_get(info, "shape");
    json_t *offs = json_object_get(info, "data_offsets");
    if (!dt || !json_is_array(shape) || !json_is_array(offs) || json_array_size(offs) != 2)
        return hy_err_set("%s: tensor \"%s\": needs dtype, shape and data_offsets [begin, end]", label, name);
    t->name = strdup(name);
    if (!t->name)
        return hy_err_set("out of memory");
    snprintf(t->dtype_name, sizeof(t->dtype_name), "%s", dt);
    t->dtype = hy_dtype_from_name(dt);
    size_t nd = json_array_size(shape);
    if (nd > HY_ST_MAX_DIMS)
        return hy_err_set("%s: tensor \"%s\": %zu dimensions (max %d)", label, name, nd, HY_ST_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(shape, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > (1ll << 40))
            return hy_err_set("%s: tensor \"%s\": bad shape entry %zu", label, name, i);
        t->shape[i] = json_integer_value(d);
        if (t->shape[i] && numel > (1ull << 50) / (uint64_t)t->shape[i]) /* checked before it can wrap */
            return hy_err_set("%s: tensor \"%s\": shape too large", label, name);
        numel *= (uint64_t)t->shape[i];
        if (numel > (1ull << 50))
            return hy_err_set("%s: tensor \"%s\": shape too large", label, name);
    }
    json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
    if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
        json_integer_value(e) < json_integer_value(b))
        return hy_err_set("%s: tensor \"%s\": data_offsets must be integers 0 <= begin <= end", label, name);
    uint64_t begin = (uint64_t)json_integer_value(b), end = (uint64_t)json_integer_value(e);
    if (end > data_size)
        return hy_err_set("%s: tensor \"%s\": data_offsets [%llu, %llu) run past the end of the data "
                          "(%llu bytes; file truncated?)",
                          label, name, (unsigned long long)begin, (unsigned long long)end,
                          (unsigned long long)data_size);
    size_t esz = hy_dtype_size(t->dtype);
    if (esz && numel * esz != end - begin) {
        char sh[160] = "";
        for (int i = 0; i < t->ndim; i++)
            snprintf(sh + strlen(sh), sizeof(sh) - strlen(sh), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        return hy_err_set("%s: tensor \"%s\": %llu bytes of data but shape [%s] of %s needs %llu", label, name,
                          (unsigned long long)(end - begin), sh, dt, (unsigned long long)(numel * esz));
    }
    /* Kernels read F32/F16/BF16 weights in place through typed pointers: they must be aligned. */
    if (esz > 1 && hy_dtype_is_kernel_float(t->dtype) && (uintptr_t)(data + begin) % esz)
        return hy_err_set("%s: tensor \"%s\": %s data at data offset %llu is not aligned to %zu bytes "
                          "(header length or offsets not padded)",
                          label, name, dt, (unsigned long long)begin, esz);
    t->data = data + begin;
    t->nbytes = (size_t)(end - begin);
    return 0;
}

static int cmp_by_offset(const void *a, const void *b)
{
    const struct hy_st_tensor *x = a, *y = b;
    const char *px = x->data, *py = y->data;
    return px < py ? -1 : px > py;
}

int hy_st_parse(const void *buf, size_t size, const char *label, struct hy_st_file *out)
{
    memset(out, 0, sizeof(*out));
    const uint8_t *p = buf;
    if (size < 8)
        return hy_err_set("%s: %zu bytes is too short for a safetensors file", label, size);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = (hl << 8) | p[i];
    if (hl > size - 8 || hl > HY_ST_MAX_HEADER)
        return hy_err_set("%s: header length %llu exceeds the file (%zu bytes; truncated or not safetensors)", label,
                          (unsigned long long)hl, size);
    json_error_t je;
    json_t *root = json_loadb((const char *)p + 8, (size_t)hl, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return hy_err_set("%s: header is not valid JSON (%s, position %d)", label, je.text, je.position);
    int rc = -1;
    if (!json_is_object(root)) {
        hy_err_set("%s: header is not a JSON object", label);
        goto out;
    }
    size_t n = json_object_size(root);
    out->tensors = calloc(n ? n : 1, sizeof(*out->tensors));
    if (!out->tensors) {
        hy_err_set("out of memory");
        goto out;
    }
    const char *key;
    json_t *val;
    const uint8_t *data = p + 8 + hl;
    uint64_t data_size = size - 8 - hl;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "__metadata__") == 0)
            continue;
        struct hy_st_tensor *t = &out->tensors[out->n_tensors++];
        if (parse_tensor(label, key, val, data, data_size, t))
            goto out;
    }
    /* Tensors may not overlap (a lying header could alias weights). */
    struct hy_st_tensor *sorted = malloc((out->n_tensors ? out->n_tensors : 1) * sizeof(*sorted));
    if (!sorted) {
        hy_err_set("out of memory");
        goto out;
    }
    memcpy(sorted, out->tensors, out->n_tensors * sizeof(*sorted));
    qsort(sorted, out->n_tensors, sizeof(*sorted), cmp_by_offset);
    /* Zero-size tensors occupy nothing; compare each tensor with the furthest-reaching one before it
     * (a zero-size tensor between two overlapping ones must not hide the overlap). */
    const struct hy_st_tensor *reach = NULL;
    for (size_t i = 0; i < out->n_tensors; i++) {
        if (!sorted[i].nbytes)
            continue;
        if (reach && (const char *)sorted[i].data < (const char *)reach->data + reach->nbytes) {
            hy_err_set("%s: tensors \"%s\" and \"%s\" overlap in the data region", label, reach->name, sorted[i].name);
            free(sorted);
            goto out;
        }
        if (!reach || (const char *)sorted[i].data + sorted[i].nbytes > (const char *)reach->data + reach->nbytes)
            reach = &sorted[i];
    }
    free(sorted);
    rc = 0;
out:
    json_decref(root);
    if (rc)
        hy_st_file_free(out);
    return rc;
}

int hy_st_open(const char *path, struct hy_st_file *out)
{
    struct hy_mapped_file m;
    if (hy_file_map(path, &m))
        return -1;
    if (hy_st_parse(m.data, m.size, path, out)) {
        hy_file_unmap(&m);
        return -1;
    }
    out->map = m;
    out->path = strdup(path);
    if (!out->path) {
        hy_st_file_free(out);
        return hy_err_set("out of memory");
    }
    return 0;
}

void hy_st_file_free(struct hy_st_file *f)
{
    for (size_t i = 0; i < f->n_tensors; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    free(f->path);
    hy_file_unmap(&f->map);
    memset(f, 0, sizeof(*f));
}

static int cmp_by_name(const void *a, const void *b)
{
    const struct hy_st_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* Collects the shard file names of an index.json (deduplicated, in first-seen order). */
static int read_index(const char *dir, const char *index_path, char ***names, size_t *n)
{
    json_error_t je;
    json_t *root = json_load_file(index_path, 0, &je);
    if (!root)
        return hy_err_set("%s: invalid JSON at line %d: %s", index_path, je.line, je.text);
    json_t *wm = json_object_get(root, "weight_map");
    int rc = -1;
    *names = NULL;
    *n = 0;
    if (!json_is_object(wm) || json_object_size(wm) == 0) {
        hy_err_set("%s: \"weight_map\" must be a non-empty object", index_path);
        goto out;
    }
    *names = calloc(json_object_size(wm), sizeof(char *));
    if (!*names)
        goto oom;
    const char *key;
    json_t *val;
    json_object_foreach(wm, key, val)
    {
        const char *f = json_string_value(val);
        if (!f || strchr(f, '/') || strcmp(f, "..") == 0) {
            hy_err_set("%s: weight_map[\"%s\"] must be a file name in %s", index_path, key, dir);
            goto out;
        }
        size_t i;
        for (i = 0; i < *n; i++)
            if (strcmp((*names)[i], f) == 0)
                break;
        if (i == *n && !((*names)[(*n)++] = strdup(f)))
            goto oom;
    }
    rc = 0;
    goto out;
oom:
    hy_err_set("out of memory");
out:
    json_decref(root);
    return rc;
}

static int find_single_file(const char *dir, char **name)
{
    *name = NULL;
    char *p = hy_path_join(dir, "model.safetensors");
    if (p && hy_file_exists(p)) {
        free(p);
        *name = strdup("model.safetensors");
        return 0;
    }
    free(p);
    DIR *d = opendir(dir);
    if (!d)
        return hy_err_set("%s: cannot open model directory", dir);
    struct dirent *e;
    int count = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 12 && strcmp(e->d_name + l - 12, ".safetensors") == 0) {
            count++;
            free(*name);
            *name = strdup(e->d_name);
        }
    }
    closedir(d);
    if (count == 1)
        return 0;
    free(*name);
    *name = NULL;
    return hy_err_set("%s: no model.safetensors or model.safetensors.index.json (%d *.safetensors files)", dir, count);
}

/* The shard index: model.safetensors.index.json, else the one *.safetensors.index.json of the directory
 * (msModelSlim writes quant_model_weights.safetensors.index.json); NULL when there is none (error set
 * only when there are several). */
static char *find_index(const char *dir, int *several)
{
    *several = 0;
    char *p = hy_path_join(dir, "model.safetensors.index.json");
    if (!p || hy_file_exists(p))
        return p;
    free(p);
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    struct dirent *e;
    char *found = NULL;
    while ((e = readdir(d))) {
        const size_t l = strlen(e->d_name), m = strlen(".safetensors.index.json");
        if (l <= m || strcmp(e->d_name + l - m, ".safetensors.index.json"))
            continue;
        if (found) {
            hy_err_set("%s: several shard indexes (%s, %s); keep one", dir, strrchr(found, '/') + 1, e->d_name);
            *several = 1;
            break;
        }
        found = hy_path_join(dir, e->d_name);
    }
    closedir(d);
    if (*several) {
        free(found);
        return NULL;
    }
    return found;
}

int hy_checkpoint_open(const char *dir, struct hy_checkpoint *ck)
{
    memset(ck, 0, sizeof(*ck));
    char **names = NULL;
    size_t n_names = 0;
    int several;
    char *index_path = find_index(dir, &several);
    int rc = -1;
    if (several)
        goto out;
    if (index_path && hy_file_exists(index_path)) {
        if (read_index(dir, index_path, &names, &n_names))
            goto out;
    } else {
        names = calloc(1, sizeof(char *));
        if (!names || find_single_file(dir, &names[0]))
            goto out;
        n_names = 1;
    }
    ck->files = calloc(n_names, sizeof(*ck->files));
    if (!ck->files) {
        hy_err_set("out of memory");
        goto out;
    }
    size_t total = 0;
    for (size_t i = 0; i < n_names; i++) {
        char *p = hy_path_join(dir, names[i]);
        if (!p || hy_st_open(p, &ck->files[i])) {
            free(p);
            goto out;
        }
        free(p);
        ck->n_files++;
        total += ck->files[i].n_tensors;
        ck->total_bytes += ck->files[i].map.size;
    }
    ck->index = malloc((total ? total : 1) * sizeof(*ck->index));
    if (!ck->index) {
        hy_err_set("out of memory");
        goto out;
    }
    for (size_t i = 0; i < ck->n_files; i++)
        for (size_t j = 0; j < ck->files[i].n_tensors; j++) {
            ck->files[i].tensors[j].file_index = (int)i;
            ck->index[ck->n_index++] = &ck->files[i].tensors[j];
        }
    qsort(ck->index, ck->n_index, sizeof(*ck->index), cmp_by_name);
    for (size_t i = 1; i < ck->n_index; i++)
        if (strcmp(ck->index[i - 1]->name, ck->index[i]->name) == 0) {
            hy_err_set("%s: tensor \"%s\" appears in two shards (%s and %s)", dir, ck->index[i]->name,
                       ck->files[ck->index[i - 1]->file_index].path, ck->files[ck->index[i]->file_index].path);
            goto out;
        }
    rc = 0;
out:
    for (size_t i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    free(index_path);
    if (rc)
        hy_checkpoint_close(ck);
    return rc;
}

void hy_checkpoint_close(struct hy_checkpoint *ck)
{
    for (size_t i = 0; i < ck->n_files; i++)
        hy_st_file_free(&ck->files[i]);
    free(ck->files);
    free(ck->index);
    memset(ck, 0, sizeof(*ck));
}

const struct hy_st_tensor *hy_checkpoint_find(const struct hy_checkpoint *ck, const char *name)
{
    size_t lo = 0, hi = ck->n_index;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(ck->index[mid]->name, name);
        if (c == 0)
            return ck->index[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
