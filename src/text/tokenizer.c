/* tokenizer.c - loading tokenizer.json / tiktoken files, the encode pipeline and decoding.
 *
 * Encode: added tokens are cut out first (leftmost, longest match at each position), every
 * stretch of text between them is normalized and pre-tokenized (pretok.c) and each piece is
 * BPE-merged (bpe.c). Everything a loaded tokenizer holds is read-only afterwards, so one
 * tokenizer can serve many threads; per-call state lives in struct hy_tok_scratch.
 */
#include "text/tokenizer.h"

#include "base/err.h"
#include "base/fileio.h"
#include "text/tok_internal.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HY_TOK_MAX_ID (1 << 22) /* refuse absurd ids (> 4M) rather than allocating for them */

/* Hunyuan's tiktoken split pattern (tokenization_hy.py PAT_STR); used when a tiktoken
 * directory's tokenizer_config.json carries no "pat_str". */
static const char HY_DEFAULT_PAT_STR[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* GPT-2 pre-tokenizer pattern (ByteLevel with use_regex true). */
static const char GPT2_PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ------------------------------------------------------------------------------------------ */
/* decoder steps (applied per token at load time; see header comment of hy_tokenizer_decode) */

enum { DEC_BYTELEVEL, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_STRIP };
struct dec_step {
    int kind;
    char *pat, *rep; /* REPLACE */
    size_t pat_len, rep_len;
    char ch;         /* STRIP: the character */
    int start, stop; /* STRIP */
};
struct dec_list {
    struct dec_step v[16];
    int n;
    int fused; /* a Fuse step was seen: later Strip applies to the whole output */
    int strip_leading;
};

static void dec_list_free(struct dec_list *d)
{
    for (int i = 0; i < d->n; i++) {
        free(d->v[i].pat);
        free(d->v[i].rep);
    }
    d->n = 0;
}

/* Applies the per-token decoder steps to a token's surface form. Returns a malloc'd buffer. */
static char *decode_surface(const struct dec_list *d, const char *surf, size_t n, size_t *out_n)
{
    char *cur = malloc(n + 1);
    if (!cur)
        return NULL;
    memcpy(cur, surf, n);
    cur[n] = '\0';
    size_t len = n;
    for (int i = 0; i < d->n; i++) {
        const struct dec_step *st = &d->v[i];
        if (st->kind == DEC_BYTELEVEL) {
            /* every character must be in the table, else the token is kept as is */
            char *b = malloc(len + 1);
            if (!b) {
                free(cur);
                return NULL;
            }
            size_t w = 0, k = 0;
            int ok = 1;
            while (k < len) {
                uint32_t cp;
                int cl = hy_utf8_decode((const unsigned char *)cur + k, len - k, &cp);
                int byte = cl ? hy_bytelevel_byte(cp) : -1;
                if (byte < 0) {
                    ok = 0;
                    break;
                }
                b[w++] = (char)byte;
                k += (size_t)cl;
            }
            if (ok) {
                free(cur);
                cur = b;
                len = w;
                cur[len] = '\0';
            } else {
                free(b);
            }
        } else if (st->kind == DEC_REPLACE) {
            if (st->pat_len == 0)
                continue;
            size_t cap = len + 1 + (st->rep_len > st->pat_len ? (len / st->pat_len + 1) * st->rep_len : 0);
            char *b = malloc(cap);
            if (!b) {
                free(cur);
                return NULL;
            }
            size_t w = 0, k = 0;
            while (k < len) {
                if (k + st->pat_len <= len && memcmp(cur + k, st->pat, st->pat_len) == 0) {
                    memcpy(b + w, st->rep, st->rep_len);
                    w += st->rep_len;
                    k += st->pat_len;
                } else {
                    b[w++] = cur[k++];
                }
            }
            b[w] = '\0';
            free(cur);
            cur = b;
            len = w;
        } else if (st->kind == DEC_BYTEFALLBACK) {
            unsigned v;
            char tail;
            if (len == 6 && sscanf(cur, "<0x%2X%c", &v, &tail) == 2 && tail == '>') {
                cur[0] = (char)v;
                len = 1;
            }
        } else if (st->kind == DEC_STRIP) {
            size_t a = 0, z = len;
            for (int k = 0; k < st->start && a < z && cur[a] == st->ch; k++)
                a++;
            for (int k = 0; k < st->stop && z > a && cur[z - 1] == st->ch; k++)
                z--;
            memmove(cur, cur + a, z - a);
            len = z - a;
            cur[len] = '\0';
        }
    }
    *out_n = len;
    return cur;
}

/* ------------------------------------------------------------------------------------------ */
/* small JSON helpers */

static const char *jstr(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int jbool(const json_t *o, const char *key, int dflt)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_boolean(v))
        return json_is_true(v);
    return dflt;
}

/* ------------------------------------------------------------------------------------------ */
/* construction */

static struct hy_tokenizer *tok_new(void)
{
    struct hy_tokenizer *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->unk_id = -1;
    t->bos_id = -1;
    for (int i = 0; i < 256; i++) {
        t->byte_id[i] = -1;
        t->fallback_id[i] = -1;
    }
    return t;
}

void hy_tokenizer_free(struct hy_tokenizer *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_pt; i++) {
        pcre2_code_free(t->pt[i].re);
        free(t->pt[i].lit);
    }
    free(t->pt);
    for (int i = 0; i < t->n_norm; i++) {
        free(t->norm[i].pattern);
        free(t->norm[i].content);
    }
    free(t->norm);
    free(t->added);
    free(t->tok);
    hy_strmap_free(&t->by_surf);
    hy_strmap_free(&t->by_model);
    hy_pairmap_free(&t->merges);
    hy_pairmap_free(&t->adjacent);
    hy_arena_free(&t->arena);
    free(t);
}

static int alloc_vocab(struct hy_tokenizer *t, int32_t n_vocab, size_t n_expected)
{
    t->n_vocab = n_vocab;
    t->tok = calloc(n_vocab > 0 ? (size_t)n_vocab : 1, sizeof(*t->tok));
    if (!t->tok || hy_strmap_init(&t->by_surf, n_expected) != 0 || hy_strmap_init(&t->by_model, n_expected) != 0)
        return hy_err_set("out of memory");
    return 0;
}

static int added_cmp(const void *a, const void *b)
{
    const struct hy_added *x = a, *y = b;
    unsigned char cx = (unsigned char)x->text[0], cy = (unsigned char)y->text[0];
    if (cx != cy)
        return cx < cy ? -1 : 1;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

/* Sorts added tokens for matching and builds the per-first-byte index. */
static void index_added(struct hy_tokenizer *t)
{
    if (t->n_added > 0)
        qsort(t->added, (size_t)t->n_added, sizeof(*t->added), added_cmp);
    int k = 0;
    for (int c = 0; c < 256; c++) {
        t->added_first[c] = k;
        while (k < t->n_added && (unsigned char)t->added[k].text[0] == c)
            k++;
    }
    t->added_first[256] = t->n_added;
}

/* Records added token `id` (content, flags). The decoder transform gives its bytes. */
static int set_added(struct hy_tokenizer *t, const struct dec_list *dec, int32_t id, const char *content, size_t len,
                     int special, int lstrip, int rstrip)
{
    const char *surf = hy_arena_dup(&t->arena, content, len);
    size_t bn;
    char *b = decode_surface(dec, content, len, &bn);
    const char *bytes = b ? hy_arena_dup(&t->arena, b, bn) : NULL;
    free(b);
    if (!surf || !bytes)
        return hy_err_set("out of memory");
    struct hy_tok_entry *e = &t->tok[id];
    e->surf = surf;
    e->surf_len = (uint32_t)len;
    e->bytes = bytes;
    e->bytes_len = (uint32_t)bn;
    e->added = 1;
    e->special = (uint8_t)(special != 0);
    if (hy_strmap_put(&t->by_surf, surf, len, id) != 0)
        return hy_err_set("out of memory");
    if (len > 0) {
        struct hy_added *a = &t->added[t->n_added++];
        a->text = surf;
        a->len = (uint32_t)len;
        a->id = id;
        a->special = (uint8_t)(special != 0);
        a->lstrip = (uint8_t)(lstrip != 0);
        a->rstrip = (uint8_t)(rstrip != 0);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* tokenizer.json */

static int add_norm(struct hy_tokenizer *t, const json_t *n, const char *path, int depth)
{
    if (json_is_null(n) || !n)
        return 0;
    if (depth > 8)
        return hy_err_set("%s: normalizer nested too deeply", path);
    const char *type = jstr(n, "type");
    if (!type)
        return hy_err_set("%s: normalizer without a \"type\"", path);
    if (strcmp(type, "Sequence") == 0) {
        const json_t *arr = json_object_get(n, "normalizers");
        if (!json_is_array(arr))
            return hy_err_set("%s: Sequence normalizer without \"normalizers\" array", path);
        size_t i;
        const json_t *v;
        json_array_foreach(arr, i, v) if (add_norm(t, v, path, depth + 1) != 0) return -1;
        return 0;
    }
    struct hy_norm_step st = {0};
    const char *pat = NULL, *content = NULL;
    if (strcmp(type, "Prepend") == 0) {
        st.kind = HY_NORM_PREPEND;
        content = jstr(n, "prepend");
        if (!content)
            return hy_err_set("%s: Prepend normalizer without \"prepend\" string", path);
    } else if (strcmp(type, "Replace") == 0) {
        st.kind = HY_NORM_REPLACE;
        const json_t *p = json_object_get(n, "pattern");
        pat = jstr(p, "String");
        content = jstr(n, "content");
        if (!pat || !content)
            return hy_err_set("%s: Replace normalizer: only {\"String\": ...} patterns with a "
                              "\"content\" string are supported",
                              path);
    } else {
        return hy_err_set("%s: normalizer type \"%s\" is not supported", path, type);
    }
    struct hy_norm_step *nv = realloc(t->norm, (size_t)(t->n_norm + 1) * sizeof(*nv));
    if (!nv)
        return hy_err_set("out of memory");
    t->norm = nv;
    st.content = strdup(content);
    st.content_len = strlen(content);
    if (pat) {
        st.pattern = strdup(pat);
        st.pattern_len = strlen(pat);
    }
    t->norm[t->n_norm++] = st;
    if (!st.content || (pat && !st.pattern))
        return hy_err_set("out of memory");
    return 0;
}

static int push_pt(struct hy_tokenizer *t, const struct hy_pt_step *st)
{
    struct hy_pt_step *nv = realloc(t->pt, (size_t)(t->n_pt + 1) * sizeof(*nv));
    if (!nv) {
        pcre2_code_free(st->re);
        free(st->lit);
        return hy_err_set("out of memory");
    }
    t->pt = nv;
    t->pt[t->n_pt++] = *st;
    return 0;
}

static int add_pretok(struct hy_tokenizer *t, const json_t *n, const char *path, int depth)
{
    if (json_is_null(n) || !n)
        return 0;
    if (depth > 8)
        return hy_err_set("%s: pre_tokenizer nested too deeply", path);
    const char *type = jstr(n, "type");
    if (!type)
        return hy_err_set("%s: pre_tokenizer without a \"type\"", path);
    if (strcmp(type, "Sequence") == 0) {
        const json_t *arr = json_object_get(n, "pretokenizers");
        if (!json_is_array(arr))
            return hy_err_set("%s: Sequence pre_tokenizer without \"pretokenizers\" array", path);
        size_t i;
        const json_t *v;
        json_array_foreach(arr, i, v) if (add_pretok(t, v, path, depth + 1) != 0) return -1;
        return 0;
    }
    if (t->byte_level)
        return hy_err_set("%s: pre_tokenizer \"%s\" after ByteLevel is not supported", path, type);
    struct hy_pt_step st = {0};
    if (strcmp(type, "Split") == 0) {
        st.kind = HY_PT_SPLIT;
        const json_t *p = json_object_get(n, "pattern");
        const char *re = jstr(p, "Regex"), *lit = jstr(p, "String");
        const char *beh = jstr(n, "behavior");
        st.invert = jbool(n, "invert", 0);
        if (!beh)
            return hy_err_set("%s: Split pre_tokenizer without \"behavior\"", path);
        if (strcmp(beh, "Removed") == 0)
            st.behavior = HY_SPLIT_REMOVED;
        else if (strcmp(beh, "Isolated") == 0)
            st.behavior = HY_SPLIT_ISOLATED;
        else if (strcmp(beh, "MergedWithPrevious") == 0)
            st.behavior = HY_SPLIT_MERGED_PREV;
        else if (strcmp(beh, "MergedWithNext") == 0)
            st.behavior = HY_SPLIT_MERGED_NEXT;
        else if (strcmp(beh, "Contiguous") == 0)
            st.behavior = HY_SPLIT_CONTIGUOUS;
        else
            return hy_err_set("%s: Split behavior \"%s\" is not supported", path, beh);
        if (re) {
            st.re = hy_tok_regex_compile(re, strlen(re));
            if (!st.re)
                return hy_err_prefix("%s: Split pattern", path);
        } else if (lit) {
            st.lit = strdup(lit);
            st.lit_len = strlen(lit);
            if (!st.lit)
                return hy_err_set("out of memory");
        } else {
            return hy_err_set("%s: Split pre_tokenizer needs pattern {\"Regex\"|\"String\": ...}", path);
        }
    } else if (strcmp(type, "ByteLevel") == 0) {
        st.kind = HY_PT_BYTELEVEL;
        st.add_prefix_space = jbool(n, "add_prefix_space", 1);
        if (jbool(n, "use_regex", 1)) {
            st.re = hy_tok_regex_compile(GPT2_PATTERN, sizeof(GPT2_PATTERN) - 1);
            if (!st.re)
                return hy_err_prefix("%s: ByteLevel", path);
        }
        t->byte_level = 1;
    } else if (strcmp(type, "Metaspace") == 0) {
        st.kind = HY_PT_METASPACE;
        const char *rep = jstr(n, "replacement");
        if (!rep)
            rep = "\xe2\x96\x81";
        if (strlen(rep) == 0 || strlen(rep) >= sizeof(st.replacement))
            return hy_err_set("%s: Metaspace replacement must be one character", path);
        strcpy(st.replacement, rep);
        const char *scheme = jstr(n, "prepend_scheme");
        if (scheme)
            st.prepend = strcmp(scheme, "always") == 0 ? 1 : strcmp(scheme, "first") == 0 ? 2 : 0;
        else
            st.prepend = jbool(n, "add_prefix_space", 1);
        st.split = jbool(n, "split", 1);
    } else if (strcmp(type, "Digits") == 0) {
        st.kind = HY_PT_SPLIT;
        st.behavior = HY_SPLIT_ISOLATED;
        const char *re = jbool(n, "individual_digits", 0) ? "\\p{N}" : "\\p{N}+";
        st.re = hy_tok_regex_compile(re, strlen(re));
        if (!st.re)
            return -1;
    } else {
        return hy_err_set("%s: pre_tokenizer type \"%s\" is not supported", path, type);
    }
    return push_pt(t, &st);
}

static int add_decoder(struct dec_list *d, const json_t *n, const char *path, int depth)
{
    if (json_is_null(n) || !n)
        return 0;
    if (depth > 8)
        return hy_err_set("%s: decoder nested too deeply", path);
    const char *type = jstr(n, "type");
    if (!type)
        return hy_err_set("%s: decoder without a \"type\"", path);
    if (strcmp(type, "Sequence") == 0) {
        const json_t *arr = json_object_get(n, "decoders");
        if (!json_is_array(arr))
            return hy_err_set("%s: Sequence decoder without \"decoders\" array", path);
        size_t i;
        const json_t *v;
        json_array_foreach(arr, i, v) if (add_decoder(d, v, path, depth + 1) != 0) return -1;
        return 0;
    }
    if (strcmp(type, "Fuse") == 0) {
        d->fused = 1;
        return 0;
    }
    if (d->n + 2 > (int)(sizeof(d->v) / sizeof(d->v[0])))
        return hy_err_set("%s: too many decoder steps", path);
    struct dec_step st = {0};
    if (strcmp(type, "ByteLevel") == 0) {
        st.kind = DEC_BYTELEVEL;
    } else if (strcmp(type, "ByteFallback") == 0) {
        st.kind = DEC_BYTEFALLBACK;
    } else if (strcmp(type, "Replace") == 0 || strcmp(type, "Metaspace") == 0) {
        const char *pat, *rep = " ";
        if (type[0] == 'R') {
            pat = jstr(json_object_get(n, "pattern"), "String");
            rep = jstr(n, "content");
            if (!pat || !rep)
                return hy_err_set("%s: Replace decoder: only {\"String\": ...} patterns with a "
                                  "\"content\" string are supported",
                                  path);
        } else {
            pat = jstr(n, "replacement");
            if (!pat)
                pat = "\xe2\x96\x81";
            const char *scheme = jstr(n, "prepend_scheme");
            int prepend = scheme ? strcmp(scheme, "never") != 0 : jbool(n, "add_prefix_space", 1);
            if (prepend && d->strip_leading < 1)
                d->strip_leading = 1;
        }
        st.kind = DEC_REPLACE;
        st.pat = strdup(pat);
        st.rep = strdup(rep);
        if (!st.pat || !st.rep) {
            free(st.pat);
            free(st.rep);
            return hy_err_set("out of memory");
        }
        st.pat_len = strlen(pat);
        st.rep_len = strlen(rep);
    } else if (strcmp(type, "Strip") == 0) {
        const char *c = jstr(n, "content");
        const json_t *a = json_object_get(n, "start"), *z = json_object_get(n, "stop");
        if (!c || strlen(c) != 1 || !json_is_integer(a) || !json_is_integer(z))
            return hy_err_set("%s: Strip decoder needs a one-byte \"content\", \"start\", \"stop\"", path);
        json_int_t av = json_integer_value(a), zv = json_integer_value(z);
        if (av < 0 || av > 64 || zv < 0 || zv > 64)
            return hy_err_set("%s: Strip decoder start/stop out of range", path);
        if (d->fused) {
            if (c[0] != ' ' || zv != 0)
                return hy_err_set("%s: Strip after Fuse: only leading spaces are supported", path);
            d->strip_leading = (int)av;
            return 0;
        }
        st.kind = DEC_STRIP;
        st.ch = c[0];
        st.start = (int)av;
        st.stop = (int)zv;
    } else {
        return hy_err_set("%s: decoder type \"%s\" is not supported", path, type);
    }
    d->v[d->n++] = st;
    return 0;
}

/* The id to prepend from a TemplateProcessing post_processor, or -1. */
static int32_t bos_from_post_processor(const json_t *pp)
{
    const char *type = jstr(pp, "type");
    if (!type)
        return -1;
    if (strcmp(type, "Sequence") == 0) {
        size_t i;
        const json_t *v;
        json_array_foreach(json_object_get(pp, "processors"), i, v)
        {
            int32_t id = bos_from_post_processor(v);
            if (id >= 0)
                return id;
        }
        return -1;
    }
    if (strcmp(type, "TemplateProcessing") != 0)
        return -1;
    const json_t *single = json_object_get(pp, "single");
    const json_t *first = json_array_get(single, 0);
    const json_t *sp = json_object_get(first, "SpecialToken");
    const char *name = jstr(sp, "id");
    if (!name)
        return -1;
    const json_t *ids = json_object_get(json_object_get(json_object_get(pp, "special_tokens"), name), "ids");
    const json_t *id = json_array_get(ids, 0);
    if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= HY_TOK_MAX_ID)
        return -1;
    return (int32_t)json_integer_value(id);
}

static int get_id(const json_t *v, const char *path, const char *what, int32_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= HY_TOK_MAX_ID)
        return hy_err_set("%s: %s: id must be an integer in [0, %d)", path, what, HY_TOK_MAX_ID);
    *out = (int32_t)json_integer_value(v);
    return 0;
}

static int build_from_hf(struct hy_tokenizer *t, const json_t *root, const char *path)
{
    if (!json_is_object(root))
        return hy_err_set("%s: top level is not a JSON object", path);
    const json_t *model = json_object_get(root, "model");
    if (!json_is_object(model))
        return hy_err_set("%s: no \"model\" object", path);
    const char *type = jstr(model, "type");
    if (type && strcmp(type, "BPE") != 0)
        return hy_err_set("%s: model type \"%s\" is not supported (only BPE)", path, type);
    const json_t *vocab = json_object_get(model, "vocab");
    const json_t *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab))
        return hy_err_set("%s: model.vocab is not an object", path);
    if (merges && !json_is_array(merges) && !json_is_null(merges))
        return hy_err_set("%s: model.merges is not an array", path);
    const json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_array(added) && !json_is_null(added))
        return hy_err_set("%s: added_tokens is not an array", path);

    /* ids */
    int32_t max_id = -1;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)vocab, key, v)
    {
        int32_t id;
        if (get_id(v, path, key, &id) != 0)
            return -1;
        if (id > max_id)
            max_id = id;
    }
    size_t i;
    json_array_foreach(added, i, v)
    {
        int32_t id;
        if (!json_is_object(v) || !jstr(v, "content"))
            return hy_err_set("%s: added_tokens[%zu] needs \"id\" and \"content\"", path, i);
        if (get_id(json_object_get(v, "id"), path, "added_tokens", &id) != 0)
            return -1;
        if (id > max_id)
            max_id = id;
    }
    if (alloc_vocab(t, max_id + 1, json_object_size(vocab) + json_array_size(added)) != 0)
        return -1;
    t->added = calloc(json_array_size(added) + 1, sizeof(*t->added));
    if (!t->added)
        return hy_err_set("out of memory");

    /* pipeline */
    if (add_norm(t, json_object_get(root, "normalizer"), path, 0) != 0 ||
        add_pretok(t, json_object_get(root, "pre_tokenizer"), path, 0) != 0)
        return -1;
    struct dec_list dec = {.n = 0};
    const json_t *jdec = json_object_get(root, "decoder");
    if ((!jdec || json_is_null(jdec)) && t->byte_level) {
        dec.v[dec.n++].kind = DEC_BYTELEVEL;
    } else if (add_decoder(&dec, jdec, path, 0) != 0) {
        dec_list_free(&dec);
        return -1;
    }
    t->strip_leading = dec.strip_leading;
    t->byte_fallback = jbool(model, "byte_fallback", 0);
    t->fuse_unk = jbool(model, "fuse_unk", 0);
    t->whole_word_first = jbool(model, "ignore_merges", 0);
    if (jstr(model, "continuing_subword_prefix") || jstr(model, "end_of_word_suffix")) {
        dec_list_free(&dec);
        return hy_err_set("%s: BPE continuing_subword_prefix / end_of_word_suffix are not supported", path);
    }

    /* vocab */
    int rc = 0;
    json_object_foreach((json_t *)vocab, key, v)
    {
        int32_t id = (int32_t)json_integer_value(v);
        size_t kl = strlen(key), bn;
        char *b = decode_surface(&dec, key, kl, &bn);
        struct hy_tok_entry *e = &t->tok[id];
        e->surf = hy_arena_dup(&t->arena, key, kl);
        e->bytes = b ? hy_arena_dup(&t->arena, b, bn) : NULL;
        free(b);
        if (!e->surf || !e->bytes) {
            rc = hy_err_set("out of memory");
            break;
        }
        e->surf_len = (uint32_t)kl;
        e->bytes_len = (uint32_t)bn;
        if (hy_strmap_put(&t->by_surf, e->surf, kl, id) != 0) {
            rc = hy_err_set("out of memory");
            break;
        }
        if (t->byte_level) {
            /* BPE over raw bytes: key by the bytes, when the surface is pure byte-level */
            int pure = 1;
            for (size_t k = 0; k < kl && pure;) {
                uint32_t cp;
                int cl = hy_utf8_decode((const unsigned char *)key + k, kl - k, &cp);
                pure = cl > 0 && hy_bytelevel_byte(cp) >= 0;
                k += cl > 0 ? (size_t)cl : 1;
            }
            if (pure && hy_strmap_put(&t->by_model, e->bytes, bn, id) != 0)
                rc = hy_err_set("out of memory");
            if (pure && bn == 1)
                t->byte_id[(unsigned char)e->bytes[0]] = id;
        } else if (hy_strmap_put(&t->by_model, e->surf, kl, id) != 0) {
            rc = hy_err_set("out of memory");
        }
        if (rc)
            break;
    }
    if (rc) {
        dec_list_free(&dec);
        return -1;
    }
    if (t->byte_fallback)
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof(name), "<0x%02X>", b);
            t->fallback_id[b] = hy_strmap_get(&t->by_surf, name, 6);
        }
    const char *unk = jstr(model, "unk_token");
    if (unk)
        t->unk_id = hy_strmap_get(&t->by_surf, unk, strlen(unk));

    /* merges (priority = position in the list) */
    size_t n_merges = json_array_size(merges);
    if (hy_pairmap_init(&t->merges, n_merges) != 0) {
        dec_list_free(&dec);
        return hy_err_set("out of memory");
    }
    char *buf = NULL;
    size_t buf_cap = 0;
    json_array_foreach(merges, i, v)
    {
        const char *a, *b;
        size_t al, bl;
        if (json_is_string(v)) {
            const char *s = json_string_value(v);
            const char *sp = strchr(s, ' ');
            if (!sp) {
                rc = hy_err_set("%s: merges[%zu] \"%s\" is not \"left right\"", path, i, s);
                break;
            }
            a = s;
            al = (size_t)(sp - s);
            b = sp + 1;
            bl = strlen(b);
        } else if (json_is_array(v) && json_array_size(v) == 2 && json_is_string(json_array_get(v, 0)) &&
                   json_is_string(json_array_get(v, 1))) {
            a = json_string_value(json_array_get(v, 0));
            b = json_string_value(json_array_get(v, 1));
            al = strlen(a);
            bl = strlen(b);
        } else {
            rc = hy_err_set("%s: merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", path, i);
            break;
        }
        if (al + bl + 1 > buf_cap) {
            buf_cap = (al + bl + 1) * 2;
            char *nb = realloc(buf, buf_cap);
            if (!nb) {
                rc = hy_err_set("out of memory");
                break;
            }
            buf = nb;
        }
        memcpy(buf, a, al);
        memcpy(buf + al, b, bl);
        int32_t ia = hy_strmap_get(&t->by_surf, a, al), ib = hy_strmap_get(&t->by_surf, b, bl);
        int32_t ic = hy_strmap_get(&t->by_surf, buf, al + bl);
        if (ia < 0 || ib < 0 || ic < 0) {
            rc = hy_err_set("%s: merges[%zu] (\"%.*s\" + \"%.*s\") uses a token not in the vocab", path, i, (int)al, a,
                            (int)bl, b);
            break;
        }
        if (hy_pairmap_put(&t->merges, ia, ib, (int32_t)i, ic) != 0) {
            rc = hy_err_set("out of memory");
            break;
        }
    }
    free(buf);
    if (rc) {
        dec_list_free(&dec);
        return -1;
    }

    /* added tokens */
    json_array_foreach(added, i, v)
    {
        int32_t id = (int32_t)json_integer_value(json_object_get(v, "id"));
        const json_t *c = json_object_get(v, "content");
        if (set_added(t, &dec, id, json_string_value(c), json_string_length(c), jbool(v, "special", 0),
                      jbool(v, "lstrip", 0), jbool(v, "rstrip", 0)) != 0) {
            rc = -1;
            break;
        }
    }
    dec_list_free(&dec);
    if (rc)
        return -1;
    index_added(t);
    if (hy_tok_build_adjacency(t) != 0)
        return hy_err_set("out of memory");
    t->bos_id = bos_from_post_processor(json_object_get(root, "post_processor"));
    if (t->bos_id >= t->n_vocab)
        t->bos_id = -1;
    return 0;
}

static int load_json_text(const char *data, size_t len, const char *path, json_t **out)
{
    json_error_t jerr;
    *out = json_loadb(data, len, JSON_ALLOW_NUL, &jerr);
    if (!*out)
        return hy_err_set("%s: invalid JSON at line %d column %d: %s", path, jerr.line, jerr.column, jerr.text);
    return 0;
}

/* Loads a tokenizer.json from memory; `name` is used in messages. Returns 0 or -1. */
int hy_tokenizer_load_json_mem(const char *data, size_t len, const char *name, struct hy_tokenizer **out)
{
    *out = NULL;
    json_t *root;
    if (load_json_text(data, len, name, &root) != 0)
        return -1;
    struct hy_tokenizer *t = tok_new();
    if (!t) {
        json_decref(root);
        return hy_err_set("%s: out of memory", name);
    }
    int rc = build_from_hf(t, root, name);
    json_decref(root);
    if (rc != 0) {
        hy_tokenizer_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

int hy_tokenizer_load_json(const char *path, struct hy_tokenizer **out)
{
    *out = NULL;
    char *data;
    size_t len;
    if (hy_file_read_all(path, &data, &len) != 0)
        return -1;
    int rc = hy_tokenizer_load_json_mem(data, len, path, out);
    free(data);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* tiktoken */

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Decodes standard base64 (with '=' padding) into out; returns the length or -1. */
static long b64decode(const char *s, size_t n, unsigned char *out)
{
    if (n == 0 || n % 4 != 0)
        return -1;
    size_t w = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
            } else {
                if (pad)
                    return -1;
                v[k] = b64val((unsigned char)s[i + k]);
                if (v[k] < 0)
                    return -1;
            }
        }
        uint32_t x = ((uint32_t)v[0] << 18) | ((uint32_t)v[1] << 12) | ((uint32_t)v[2] << 6) | (uint32_t)v[3];
        out[w++] = (unsigned char)(x >> 16);
        if (pad < 2)
            out[w++] = (unsigned char)(x >> 8);
        if (pad < 1)
            out[w++] = (unsigned char)x;
    }
    return (long)w;
}

struct tt_line {
    const char *b64;
    size_t b64_len;
    int32_t rank;
};

/* tiktoken specials when tokenizer_config.json names the Hunyuan remote-code tokenizer
 * (HYTokenizer) without listing them: appended after the ranks, as tokenization_hy.py does. */
static int hy_default_specials(char ***names, int *n)
{
    static const char *fixed[] = {"<|endoftext|>", "<|startoftext|>", "<|bos|>", "<|eos|>", "<|pad|>"};
    int total = 5 + 205;
    char **v = calloc((size_t)total, sizeof(*v));
    if (!v)
        return -1;
    for (int i = 0; i < total; i++) {
        char tmp[32];
        if (i < 5)
            snprintf(tmp, sizeof(tmp), "%s", fixed[i]);
        else
            snprintf(tmp, sizeof(tmp), "<|extra_%d|>", i - 5);
        v[i] = strdup(tmp);
        if (!v[i]) {
            for (int k = 0; k < i; k++)
                free(v[k]);
            free(v);
            return -1;
        }
    }
    *names = v;
    *n = total;
    return 0;
}

int hy_tokenizer_load_tiktoken(const char *tiktoken_path, const char *config_path, struct hy_tokenizer **out)
{
    *out = NULL;
    char *data = NULL, *cdata = NULL;
    size_t len, clen;
    json_t *cfg = NULL;
    struct tt_line *lines = NULL;
    struct hy_tokenizer *t = NULL;
    unsigned char *tmp = NULL;
    char **def_specials = NULL;
    int n_def = 0, rc = -1;

    if (hy_file_read_all(tiktoken_path, &data, &len) != 0)
        return -1;
    if (config_path) {
        if (hy_file_read_all(config_path, &cdata, &clen) != 0 || load_json_text(cdata, clen, config_path, &cfg) != 0)
            goto done;
        if (!json_is_object(cfg)) {
            hy_err_set("%s: top level is not a JSON object", config_path);
            goto done;
        }
    }

    /* parse "base64 rank" lines */
    size_t n_lines = 0, cap = 1024, max_b64 = 0;
    int32_t max_id = -1;
    lines = malloc(cap * sizeof(*lines));
    if (!lines) {
        hy_err_set("%s: out of memory", tiktoken_path);
        goto done;
    }
    size_t lineno = 0;
    for (size_t p = 0; p < len;) {
        size_t e = p;
        while (e < len && data[e] != '\n')
            e++;
        lineno++;
        size_t le = e;
        if (le > p && data[le - 1] == '\r')
            le--;
        if (le > p) {
            const char *sp = memchr(data + p, ' ', le - p);
            char *endp = NULL;
            long long r = sp ? strtoll(sp + 1, &endp, 10) : -1;
            if (!sp || sp == data + p || endp != data + le || sp + 1 == endp || r < 0 || r >= HY_TOK_MAX_ID) {
                hy_err_set("%s:%zu: expected \"base64 rank\"", tiktoken_path, lineno);
                goto done;
            }
            if (n_lines == cap) {
                cap *= 2;
                struct tt_line *nl = realloc(lines, cap * sizeof(*lines));
                if (!nl) {
                    hy_err_set("%s: out of memory", tiktoken_path);
                    goto done;
                }
                lines = nl;
            }
            lines[n_lines].b64 = data + p;
            lines[n_lines].b64_len = (size_t)(sp - (data + p));
            lines[n_lines].rank = (int32_t)r;
            if (lines[n_lines].b64_len > max_b64)
                max_b64 = lines[n_lines].b64_len;
            if (r > max_id)
                max_id = (int32_t)r;
            n_lines++;
        }
        p = e + 1;
    }
    if (n_lines == 0) {
        hy_err_set("%s: no tokens", tiktoken_path);
        goto done;
    }

    /* specials */
    const json_t *atd = cfg ? json_object_get(cfg, "added_tokens_decoder") : NULL;
    if (atd && !json_is_object(atd)) {
        hy_err_set("%s: added_tokens_decoder is not an object", config_path);
        goto done;
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)atd, key, v)
    {
        char *endp;
        long long id = strtoll(key, &endp, 10);
        if (*key == '\0' || *endp || id < 0 || id >= HY_TOK_MAX_ID || !json_is_object(v) || !jstr(v, "content")) {
            hy_err_set("%s: added_tokens_decoder[\"%s\"] needs an integer key and a \"content\"", config_path, key);
            goto done;
        }
        if (id > max_id)
            max_id = (int32_t)id;
    }
    if (!atd && cfg && jstr(cfg, "tokenizer_class") && strcmp(jstr(cfg, "tokenizer_class"), "HYTokenizer") == 0) {
        if (hy_default_specials(&def_specials, &n_def) != 0) {
            hy_err_set("out of memory");
            goto done;
        }
        max_id += n_def; /* appended after the ranks */
    }

    t = tok_new();
    if (!t || alloc_vocab(t, max_id + 1, n_lines + 256) != 0) {
        hy_err_set("%s: out of memory", tiktoken_path);
        goto done;
    }
    int32_t n_ranks_end = -1;
    tmp = malloc(max_b64 + 4);
    if (!tmp) {
        hy_err_set("%s: out of memory", tiktoken_path);
        goto done;
    }
    for (size_t k = 0; k < n_lines; k++) {
        long bl = b64decode(lines[k].b64, lines[k].b64_len, tmp);
        if (bl <= 0) {
            hy_err_set("%s: token with rank %d: bad base64 \"%.*s\"", tiktoken_path, lines[k].rank,
                       (int)(lines[k].b64_len > 40 ? 40 : lines[k].b64_len), lines[k].b64);
            goto done;
        }
        int32_t id = lines[k].rank;
        struct hy_tok_entry *e = &t->tok[id];
        if (e->surf) {
            hy_err_set("%s: rank %d appears twice", tiktoken_path, id);
            goto done;
        }
        const char *s = hy_arena_dup(&t->arena, (const char *)tmp, (size_t)bl);
        if (!s) {
            hy_err_set("%s: out of memory", tiktoken_path);
            goto done;
        }
        e->surf = e->bytes = s;
        e->surf_len = e->bytes_len = (uint32_t)bl;
        if (hy_strmap_get(&t->by_model, s, (size_t)bl) >= 0) {
            hy_err_set("%s: token of rank %d appears twice", tiktoken_path, id);
            goto done;
        }
        if (hy_strmap_put(&t->by_model, s, (size_t)bl, id) != 0 || hy_strmap_put(&t->by_surf, s, (size_t)bl, id) != 0) {
            hy_err_set("%s: out of memory", tiktoken_path);
            goto done;
        }
        if (bl == 1)
            t->byte_id[tmp[0]] = id;
        if (id > n_ranks_end)
            n_ranks_end = id;
    }
    /* merges: every split of a token into two tokens merges to it with priority = its rank */
    if (hy_pairmap_init(&t->merges, n_lines * 2) != 0) {
        hy_err_set("%s: out of memory", tiktoken_path);
        goto done;
    }
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const struct hy_tok_entry *e = &t->tok[id];
        for (uint32_t k = 1; e->surf && k < e->surf_len; k++) {
            int32_t a = hy_strmap_get(&t->by_model, e->surf, k);
            int32_t b = a >= 0 ? hy_strmap_get(&t->by_model, e->surf + k, e->surf_len - k) : -1;
            if (b >= 0 && hy_pairmap_put(&t->merges, a, b, id, id) != 0) {
                hy_err_set("%s: out of memory", tiktoken_path);
                goto done;
            }
        }
    }
    t->added = calloc((size_t)json_object_size(atd) + (size_t)n_def + 1, sizeof(*t->added));
    if (!t->added) {
        hy_err_set("out of memory");
        goto done;
    }
    struct dec_list nodec = {.n = 0};
    json_object_foreach((json_t *)atd, key, v)
    {
        int32_t id = (int32_t)strtoll(key, NULL, 10);
        const json_t *c = json_object_get(v, "content");
        if (set_added(t, &nodec, id, json_string_value(c), json_string_length(c), jbool(v, "special", 1),
                      jbool(v, "lstrip", 0), jbool(v, "rstrip", 0)) != 0)
            goto done;
    }
    for (int k = 0; k < n_def; k++)
        if (set_added(t, &nodec, n_ranks_end + 1 + k, def_specials[k], strlen(def_specials[k]), 1, 0, 0) != 0)
            goto done;
    index_added(t);

    const char *pat = cfg ? jstr(cfg, "pat_str") : NULL;
    if (!pat)
        pat = HY_DEFAULT_PAT_STR;
    struct hy_pt_step st = {.kind = HY_PT_SPLIT, .behavior = HY_SPLIT_KEEP_MATCHES};
    st.re = hy_tok_regex_compile(pat, strlen(pat));
    if (!st.re) {
        hy_err_prefix("%s: pat_str", config_path ? config_path : tiktoken_path);
        goto done;
    }
    if (push_pt(t, &st) != 0)
        goto done;
    t->byte_level = 1;
    t->whole_word_first = 1;
    t->is_tiktoken = 1;
    if (hy_tok_build_adjacency(t) != 0) {
        hy_err_set("out of memory");
        goto done;
    }
    rc = 0;

done:
    if (def_specials) {
        for (int k = 0; k < n_def; k++)
            free(def_specials[k]);
        free(def_specials);
    }
    free(tmp);
    free(lines);
    free(data);
    free(cdata);
    if (rc == 0 && cfg) {
        /* BOS policy */
        if (jbool(cfg, "add_bos_token", 0)) {
            const json_t *b = json_object_get(cfg, "bos_token");
            const char *name = json_is_string(b) ? json_string_value(b) : jstr(b, "content");
            t->bos_id = name ? hy_tokenizer_token_to_id(t, name) : -1;
        }
    }
    json_decref(cfg);
    if (rc != 0) {
        hy_tokenizer_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* directory */

/* Applies add_bos_token / bos_token of a tokenizer_config.json (when present) to the BOS policy. */
static int apply_config(struct hy_tokenizer *t, const char *config_path)
{
    char *data;
    size_t len;
    json_t *cfg;
    if (hy_file_read_all(config_path, &data, &len) != 0)
        return -1;
    int rc = load_json_text(data, len, config_path, &cfg);
    free(data);
    if (rc != 0)
        return -1;
    const json_t *add = json_object_get(cfg, "add_bos_token");
    if (json_is_boolean(add)) {
        t->bos_id = -1;
        if (json_is_true(add)) {
            const json_t *b = json_object_get(cfg, "bos_token");
            const char *name = json_is_string(b) ? json_string_value(b) : jstr(b, "content");
            t->bos_id = name ? hy_tokenizer_token_to_id(t, name) : -1;
            if (t->bos_id < 0) {
                json_decref(cfg);
                return hy_err_set("%s: add_bos_token is true but bos_token is not a known token", config_path);
            }
        }
    }
    json_decref(cfg);
    return 0;
}

int hy_tokenizer_load_dir(const char *dir, struct hy_tokenizer **out)
{
    *out = NULL;
    char *json_path = hy_path_join(dir, "tokenizer.json");
    char *cfg_path = hy_path_join(dir, "tokenizer_config.json");
    char *tt_path = NULL;
    int rc = -1;
    if (!json_path || !cfg_path) {
        hy_err_set("out of memory");
        goto done;
    }
    int have_cfg = hy_file_exists(cfg_path);
    if (hy_file_exists(json_path)) {
        if (hy_tokenizer_load_json(json_path, out) != 0)
            goto done;
        if (have_cfg && apply_config(*out, cfg_path) != 0) {
            hy_tokenizer_free(*out);
            *out = NULL;
            goto done;
        }
        rc = 0;
        goto done;
    }
    tt_path = hy_path_join(dir, "hy.tiktoken");
    if (tt_path && !hy_file_exists(tt_path)) {
        free(tt_path);
        tt_path = NULL;
        DIR *d = opendir(dir);
        char best[256] = "";
        struct dirent *de;
        while (d && (de = readdir(d))) {
            size_t l = strlen(de->d_name);
            if (l > 9 && l < sizeof(best) && strcmp(de->d_name + l - 9, ".tiktoken") == 0 &&
                (!best[0] || strcmp(de->d_name, best) < 0))
                strcpy(best, de->d_name);
        }
        if (d)
            closedir(d);
        if (best[0])
            tt_path = hy_path_join(dir, best);
    }
    if (!tt_path) {
        hy_err_set("%s: no tokenizer.json or *.tiktoken file", dir);
        goto done;
    }
    rc = hy_tokenizer_load_tiktoken(tt_path, have_cfg ? cfg_path : NULL, out);
done:
    free(json_path);
    free(cfg_path);
    free(tt_path);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* encode / decode */

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int encode_segment(const struct hy_tokenizer *t, struct hy_tok_scratch *s, const char *p, size_t n, int first)
{
    if (n == 0)
        return 0;
    if (hy_tok_pretokenize(t, s, p, n, first) != 0)
        return -1;
    for (size_t k = 0; k < s->a.n; k++)
        if (hy_tok_bpe_piece(t, s, s->a.v[k].p, s->a.v[k].n) != 0)
            return hy_err_set("tokenizer: out of memory");
    return 0;
}

int hy_tokenizer_encode(const struct hy_tokenizer *t, const char *text, size_t len, int allow_special, int32_t **ids,
                        size_t *n_ids)
{
    *ids = NULL;
    *n_ids = 0;
    struct hy_tok_scratch s;
    if (hy_tok_scratch_init(&s) != 0)
        return -1;
    size_t seg = 0, pos = 0;
    int rc = 0;
    while (pos < len && rc == 0) {
        unsigned char c = (unsigned char)text[pos];
        const struct hy_added *hit = NULL;
        for (int k = t->added_first[c]; k < t->added_first[c + 1]; k++) {
            const struct hy_added *a = &t->added[k];
            if (a->special && !allow_special)
                continue;
            if (a->len <= len - pos && memcmp(text + pos, a->text, a->len) == 0) {
                hit = a;
                break; /* sorted longest first */
            }
        }
        if (!hit) {
            pos++;
            continue;
        }
        size_t end = pos;
        if (hit->lstrip)
            while (end > seg && is_ws((unsigned char)text[end - 1]))
                end--;
        rc = encode_segment(t, &s, text + seg, end - seg, seg == 0);
        if (rc == 0 && hy_tok_emit(&s, hit->id) != 0)
            rc = hy_err_set("tokenizer: out of memory");
        pos += hit->len;
        if (hit->rstrip)
            while (pos < len && is_ws((unsigned char)text[pos]))
                pos++;
        seg = pos;
    }
    if (rc == 0)
        rc = encode_segment(t, &s, text + seg, len - seg, seg == 0);
    if (rc == 0) {
        *ids = s.ids;
        *n_ids = s.n_ids;
        s.ids = NULL;
    }
    hy_tok_scratch_free(&s);
    return rc;
}

const char *hy_tokenizer_token_bytes(const struct hy_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab)
        return NULL;
    const struct hy_tok_entry *e = &t->tok[id];
    if (!e->bytes) {
        *len = 0;
        return "";
    }
    *len = e->bytes_len;
    return e->bytes;
}

char *hy_tokenizer_decode(const struct hy_tokenizer *t, const int32_t *ids, size_t n, int skip_special)
{
    size_t len;
    return hy_tokenizer_decode_len(t, ids, n, skip_special, &len);
}

char *hy_tokenizer_decode_len(const struct hy_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                              size_t *out_len)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return NULL;
        total += t->tok[ids[i]].bytes_len;
    }
    char *out = malloc(total + 1);
    if (!out)
        return NULL;
    size_t w = 0;
    int strip = t->strip_leading;
    for (size_t i = 0; i < n; i++) {
        const struct hy_tok_entry *e = &t->tok[ids[i]];
        if (!e->bytes || (skip_special && e->special))
            continue;
        const char *b = e->bytes;
        size_t bl = e->bytes_len;
        while (strip > 0 && bl > 0) {
            if (*b == ' ') {
                b++;
                bl--;
                strip--;
            } else {
                strip = 0;
            }
        }
        memcpy(out + w, b, bl);
        w += bl;
    }
    out[w] = '\0';
    *out_len = w;
    return out;
}

int32_t hy_tokenizer_vocab_size(const struct hy_tokenizer *t)
{
    return t->n_vocab;
}

int32_t hy_tokenizer_token_to_id(const struct hy_tokenizer *t, const char *token)
{
    return hy_strmap_get(&t->by_surf, token, strlen(token));
}

int hy_tokenizer_added_count(const struct hy_tokenizer *t)
{
    return t->n_added;
}

const char *hy_tokenizer_added_token(const struct hy_tokenizer *t, int i, size_t *len, int32_t *id)
{
    if (i < 0 || i >= t->n_added)
        return NULL;
    *len = t->added[i].len;
    *id = t->added[i].id;
    return t->added[i].text;
}

int hy_tokenizer_is_special(const struct hy_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && t->tok[id].special;
}

int32_t hy_tokenizer_add_bos(const struct hy_tokenizer *t)
{
    return t->bos_id;
}

int hy_tokenizer_strip_leading(const struct hy_tokenizer *t)
{
    return t->strip_leading;
}
