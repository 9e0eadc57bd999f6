/* toolcall.c - the incremental Hy3 / Hy4 tool-call parser, marker discovery and schema coercion. */
#include "text/toolcall.h"

#include "base/err.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_names[HY_TM_COUNT] = {
    "<tool_calls", "</tool_calls", "<tool_call",  "</tool_call", "<tool_sep", "<arg_key",
    "</arg_key",   "<arg_value",   "</arg_value", "<think",      "</think",
};

void hy_tool_markers_init_dialect(struct hy_tool_markers *m, const char *suffix, int dialect)
{
    char suf[HY_TM_SUFFIX_MAX]; /* a local copy: the text[] writes must not read from *m */
    snprintf(suf, sizeof(suf), "%s", suffix ? suffix : "");
    memset(m, 0, sizeof(*m));
    memcpy(m->suffix, suf, sizeof(suf));
    for (int i = 0; i < HY_TM_COUNT; i++) {
        snprintf(m->text[i], sizeof(m->text[i]), "%s%s>", k_names[i], suf);
        m->len[i] = strlen(m->text[i]);
        m->id[i] = -1;
    }
    for (int i = 0; i < HY_TT_COUNT; i++)
        m->turn_id[i] = -1;
    hy_tool_markers_set_dialect(m, dialect);
}

void hy_tool_markers_init(struct hy_tool_markers *m, const char *suffix)
{
    hy_tool_markers_init_dialect(m, suffix, HY_TOOL_DIALECT_HY3);
}

void hy_tool_markers_set_dialect(struct hy_tool_markers *m, int dialect)
{
    m->dialect = dialect == HY_TOOL_DIALECT_HY4 ? HY_TOOL_DIALECT_HY4 : HY_TOOL_DIALECT_HY3;
}

static int is_regex_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

int hy_tool_tag_match(const char *s, size_t len, size_t *suf_off, size_t *suf_len)
{
    static const char *const names[] = {"think", "tool_calls", "tool_call", "arg_key", "arg_value"};
    if (len < 3 || s[0] != '<' || s[len - 1] != '>')
        return 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const size_t nl = strlen(names[i]);
        if (len < nl + 2 || memcmp(s + 1, names[i], nl))
            continue;
        const size_t off = 1 + nl, sl = len - 1 - off; /* between the name and the final '>' */
        if (sl == 1 || (sl && s[off] != ':'))
            continue; /* "<tool_call" + "s>" is tried as tool_calls */
        int ok = 1;
        for (size_t k = off + 1; k < off + sl && ok; k++)
            ok = !is_regex_space((unsigned char)s[k]) && s[k] != '>';
        if (!ok)
            continue;
        *suf_off = off;
        *suf_len = sl;
        return 1;
    }
    return 0;
}

/* Collects the suffix of s[0..len) into *found / suf; -1 on a disagreement or an oversized suffix. */
static int take_tag(const char *s, size_t len, char *suf, size_t cap, int *found, char *first, size_t first_cap)
{
    size_t off = 0, sl = 0;
    if (!hy_tool_tag_match(s, len, &off, &sl))
        return 0;
    if (sl >= cap || sl >= HY_TM_SUFFIX_MAX)
        return hy_err_set("tool calls: the vocabulary's tag %.*s has a suffix longer than %d bytes", (int)len, s,
                          (int)(cap < HY_TM_SUFFIX_MAX ? cap : HY_TM_SUFFIX_MAX) - 1);
    if (!*found) {
        memcpy(suf, s + off, sl);
        suf[sl] = 0;
        snprintf(first, first_cap, "%.*s", (int)len, s);
        *found = 1;
        return 0;
    }
    if (strlen(suf) != sl || memcmp(suf, s + off, sl))
        return hy_err_set("tool calls: the vocabulary spells its tags with two suffixes: %s and %.*s", first, (int)len,
                          s);
    return 0;
}

int hy_tool_suffix_from_vocab(const struct hy_tokenizer *tok, char *suf, size_t cap)
{
    if (!cap)
        return hy_err_set("tool calls: no room for the suffix");
    suf[0] = 0;
    int found = 0;
    char first[HY_TM_MAX_LEN + 8] = "";
    const int n = hy_tokenizer_added_count(tok);
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        int32_t id = -1;
        const char *t = hy_tokenizer_added_token(tok, i, &len, &id);
        if (t && take_tag(t, len, suf, cap, &found, first, sizeof(first))) {
            suf[0] = 0;
            return -1;
        }
    }
    if (!found) { /* no added tag: the ordinary vocabulary (tags are added tokens in every checkpoint seen) */
        const int32_t nv = hy_tokenizer_vocab_size(tok);
        for (int32_t id = 0; id < nv; id++) {
            size_t len = 0;
            const char *t = hy_tokenizer_token_bytes(tok, id, &len);
            if (t && len > 2 && t[0] == '<' && take_tag(t, len, suf, cap, &found, first, sizeof(first))) {
                suf[0] = 0;
                return -1;
            }
        }
    }
    return found;
}

/* "<｜" NAME SUF "｜>" with U+FF5C bars. */
static void turn_spelling(char *out, size_t cap, const char *name, const char *suf)
{
    snprintf(out, cap, "<\xef\xbd\x9c%s%s\xef\xbd\x9c>", name, suf);
}

/* The id of the first of NAME+suffix, NAME:opensource, NAME found in tok (its text in out), or -1. */
static int32_t find_turn_token(const struct hy_tokenizer *tok, const char *name, const char *suffix, char *out,
                               size_t cap)
{
    const char *const sufs[] = {suffix ? suffix : "", ":opensource", ""};
    for (int i = 0; i < 3; i++) {
        turn_spelling(out, cap, name, sufs[i]);
        int32_t id = hy_tokenizer_token_to_id(tok, out);
        if (id >= 0)
            return id;
    }
    out[0] = 0;
    return -1;
}

int hy_tool_dialect_from_vocab(const struct hy_tokenizer *tok, const char *suffix)
{
    char t[HY_TM_MAX_LEN];
    return find_turn_token(tok, "hy_middle", suffix, t, sizeof(t)) >= 0 ? HY_TOOL_DIALECT_HY4 : HY_TOOL_DIALECT_HY3;
}

int hy_tool_markers_from_vocab(const struct hy_tokenizer *tok, struct hy_tool_markers *m)
{
    static const char *const turn_names[HY_TT_COUNT] = {"hy_start", "hy_middle", "hy_end", "reasoning_mode"};
    char suffix[HY_TM_SUFFIX_MAX];
    const int found = hy_tool_suffix_from_vocab(tok, suffix, sizeof(suffix));
    hy_tool_markers_init_dialect(m, found < 0 ? "" : suffix, HY_TOOL_DIALECT_HY3);
    hy_tool_markers_set_dialect(m, hy_tool_dialect_from_vocab(tok, m->suffix));
    for (int k = 0; k < HY_TM_COUNT; k++)
        m->id[k] = hy_tokenizer_token_to_id(tok, m->text[k]);
    for (int k = 0; k < HY_TT_COUNT; k++)
        m->turn_id[k] = find_turn_token(tok, turn_names[k], m->suffix, m->turn_text[k], sizeof(m->turn_text[k]));
    if (found < 0)
        return -2; /* hy_err_msg() names the two spellings */
    if (m->id[HY_TM_CALLS_OPEN] < 0)
        return hy_err_set("tool calls: the vocabulary has no %s token (the tag suffix read from the vocabulary is "
                          "\"%s\")",
                          m->text[HY_TM_CALLS_OPEN], m->suffix);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* JSON helpers */

int hy_json_escape_append(struct hy_sbuf *out, const char *s, size_t len)
{
    if (hy_sbuf_reserve(out, len + len / 4 + 8))
        return -1;
    size_t run = 0; /* bytes copied verbatim in one go */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char ubuf[8];
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        default:
            if (c < 0x20) {
                snprintf(ubuf, sizeof(ubuf), "\\u%04x", c);
                esc = ubuf;
            }
        }
        if (!esc)
            continue;
        if (hy_sbuf_append(out, s + run, i - run) || hy_sbuf_puts(out, esc))
            return -1;
        run = i + 1;
    }
    return hy_sbuf_append(out, s + run, len - run);
}

static int append_json_string(struct hy_sbuf *out, const char *s, size_t len)
{
    return hy_sbuf_puts(out, "\"") || hy_json_escape_append(out, s, len) || hy_sbuf_puts(out, "\"") ? -1 : 0;
}

/* Python's repr(float): the shortest digits that read back, fixed notation for exponents in
 * [-4, 16), else d.ddde+XX; a whole number gets ".0". inf/nan (not JSON) are written as Python's
 * json.dumps does. */
static int append_python_float(struct hy_sbuf *out, double v)
{
    if (isnan(v))
        return hy_sbuf_puts(out, "NaN");
    if (isinf(v))
        return hy_sbuf_puts(out, v < 0 ? "-Infinity" : "Infinity");
    char buf[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    /* buf = [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0, neg = buf[0] == '-';
    const char *p = buf + neg;
    for (; *p && *p != 'e'; p++)
        if (isdigit((unsigned char)*p))
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    int exp = atoi(p + 1);
    struct hy_sbuf *o = out;
    int rc = neg ? hy_sbuf_puts(o, "-") : 0;
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            rc |= hy_sbuf_puts(o, "0.");
            for (int i = 0; i < -exp - 1; i++)
                rc |= hy_sbuf_puts(o, "0");
            rc |= hy_sbuf_append(o, digits, (size_t)nd);
        } else {
            for (int i = 0; i <= exp; i++)
                rc |= hy_sbuf_append(o, i < nd ? &digits[i] : "0", 1);
            rc |= hy_sbuf_puts(o, ".");
            if (nd > exp + 1)
                rc |= hy_sbuf_append(o, digits + exp + 1, (size_t)(nd - exp - 1));
            else
                rc |= hy_sbuf_puts(o, "0");
        }
    } else {
        rc |= hy_sbuf_append(o, digits, 1);
        if (nd > 1)
            rc |= hy_sbuf_puts(o, ".") | hy_sbuf_append(o, digits + 1, (size_t)(nd - 1));
        rc |= hy_sbuf_printf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    return rc ? -1 : 0;
}

/* Appends a parsed JSON value the way Python's json.dumps(ensure_ascii=False) writes it: ", " and
 * ": " separators, keys in their order, UTF-8 raw, floats as repr() writes them (at any depth). */
static int append_json_value(struct hy_sbuf *out, const json_t *v)
{
    if (json_is_real(v))
        return append_python_float(out, json_real_value(v));
    if (json_is_string(v))
        return append_json_string(out, json_string_value(v), json_string_length(v));
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        int rc = hy_sbuf_puts(out, "{"), first = 1;
        json_object_foreach((json_t *)v, k, x)
        {
            rc = rc || (first ? 0 : hy_sbuf_puts(out, ", ")) || append_json_string(out, k, strlen(k)) ||
                 hy_sbuf_puts(out, ": ") || append_json_value(out, x);
            first = 0;
        }
        return rc || hy_sbuf_puts(out, "}") ? -1 : 0;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        int rc = hy_sbuf_puts(out, "[");
        json_array_foreach(v, i, x) rc = rc || (i ? hy_sbuf_puts(out, ", ") : 0) || append_json_value(out, x);
        return rc || hy_sbuf_puts(out, "]") ? -1 : 0;
    }
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    if (!s)
        return -1;
    int rc = hy_sbuf_puts(out, s);
    free(s);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* schema coercion */

enum { T_STRING = 1, T_BOOLEAN = 2, T_INTEGER = 4, T_NUMBER = 8, T_OBJECT = 16, T_ARRAY = 32, T_NULL = 64 };

static int prefix_ci(const char *s, const char *pre)
{
    return !strncasecmp(s, pre, strlen(pre));
}

static int type_bit(const char *t)
{
    static const char *const str[] = {"string", "str", "text", "varchar", "char", "enum"};
    for (size_t i = 0; i < sizeof(str) / sizeof(str[0]); i++)
        if (!strcasecmp(t, str[i]))
            return T_STRING;
    if (!strcasecmp(t, "boolean") || !strcasecmp(t, "bool") || !strcasecmp(t, "binary"))
        return T_BOOLEAN;
    if (prefix_ci(t, "int") || prefix_ci(t, "uint") || prefix_ci(t, "long") || prefix_ci(t, "short") ||
        prefix_ci(t, "unsigned"))
        return T_INTEGER;
    if (prefix_ci(t, "num") || prefix_ci(t, "float") || prefix_ci(t, "double"))
        return T_NUMBER;
    if (!strcasecmp(t, "object") || !strcasecmp(t, "dict") || !strcasecmp(t, "map"))
        return T_OBJECT;
    if (!strcasecmp(t, "array") || !strcasecmp(t, "list"))
        return T_ARRAY;
    if (!strcasecmp(t, "null"))
        return T_NULL;
    return 0;
}

static int types_of(const json_t *schema)
{
    if (!json_is_object(schema))
        return 0;
    const json_t *t = json_object_get(schema, "type");
    if (json_is_string(t))
        return type_bit(json_string_value(t));
    if (json_is_array(t)) {
        int bits = 0;
        size_t i;
        const json_t *x;
        json_array_foreach(t, i, x) if (json_is_string(x)) bits |= type_bit(json_string_value(x));
        return bits;
    }
    static const char *const alts[] = {"anyOf", "oneOf"};
    for (int a = 0; a < 2; a++) {
        const json_t *l = json_object_get(schema, alts[a]);
        if (!json_is_array(l))
            continue;
        int bits = 0;
        size_t i;
        const json_t *x;
        json_array_foreach(l, i, x) bits |= types_of(x);
        return bits;
    }
    return 0;
}

/* No type information means string (vLLM, SGLang). */
static int allowed_types(const json_t *schema)
{
    int t = types_of(schema);
    return t ? t : T_STRING;
}

const json_t *hy_tool_arg_schema(const json_t *tools, const char *name, const char *key)
{
    size_t i;
    const json_t *tool;
    if (!json_is_array(tools) || !name)
        return NULL;
    json_array_foreach(tools, i, tool)
    {
        const json_t *fn = json_object_get(tool, "function");
        const json_t *fname = json_object_get(fn, "name");
        if (!json_is_string(fname) || strcmp(json_string_value(fname), name))
            continue;
        const json_t *props = json_object_get(json_object_get(fn, "parameters"), "properties");
        return key && json_is_object(props) ? json_object_get(props, key) : NULL;
    }
    return NULL;
}

static int is_integer_text(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

/* A malloc'd, NUL-terminated copy of s[0..n) without leading/trailing whitespace (NULL on OOM). */
static char *strip_dup(const char *s, size_t n)
{
    size_t a = 0, b = n;
    while (a < b && isspace((unsigned char)s[a]))
        a++;
    while (b > a && isspace((unsigned char)s[b - 1]))
        b--;
    char *d = malloc(b - a + 1);
    if (d) {
        memcpy(d, s + a, b - a);
        d[b - a] = 0;
    }
    return d;
}

int hy_tool_coerce_value(const json_t *schema, const char *v, size_t len, struct hy_sbuf *out)
{
    const int types = allowed_types(schema);
    if (types == T_STRING)
        return append_json_string(out, v, len);
    char *s = strip_dup(v, len); /* the stripped text, NUL-terminated */
    if (!s)
        return -1;
    int rc = 1; /* 1: not decided yet */
    if ((types & T_NULL) && !strcmp(s, "null"))
        rc = hy_sbuf_puts(out, "null");
    if (rc == 1 && (types & T_BOOLEAN) && (!strcasecmp(s, "true") || !strcasecmp(s, "false")))
        rc = hy_sbuf_puts(out, !strcasecmp(s, "true") ? "true" : "false");
    if (rc == 1 && (types & T_INTEGER) && is_integer_text(s)) {
        errno = 0;
        long long x = strtoll(s, NULL, 10);
        if (!errno)
            rc = hy_sbuf_printf(out, "%lld", x);
    }
    if (rc == 1 && (types & T_NUMBER) && *s) {
        char *end = NULL;
        errno = 0;
        double x = strtod(s, &end);
        if (!*end && !errno && isfinite(x)) {
            if (strpbrk(s, ".eE") || !is_integer_text(s))
                rc = append_python_float(out, x);
            else
                rc = hy_sbuf_printf(out, "%lld", strtoll(s, NULL, 10));
        }
    }
    json_t *j = NULL;
    if (rc == 1 && (types & (T_OBJECT | T_ARRAY))) {
        j = json_loads(s, JSON_DECODE_ANY, NULL);
        if (j)
            rc = append_json_value(out, j);
    }
    if (rc == 1 && (types & T_STRING))
        rc = append_json_string(out, v, len);
    if (rc == 1 && !j) {
        j = json_loads(s, JSON_DECODE_ANY, NULL);
        if (j)
            rc = append_json_value(out, j);
    }
    if (rc == 1)
        rc = append_json_string(out, v, len);
    json_decref(j);
    free(s);
    return rc ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* the parser */

/* ST_JSON: a Hy3 call whose body after <tool_sep> is a JSON object, buffered to </tool_call> */
enum { ST_TEXT, ST_CALLS, ST_NAME, ST_ARGS, ST_KEY, ST_VALUE_WAIT, ST_VALUE, ST_RAW, ST_JSON };

void hy_toolcall_init(struct hy_toolcall_parser *p, const struct hy_tool_markers *mk, const json_t *tools)
{
    memset(p, 0, sizeof(*p));
    p->mk = mk;
    p->tools = tools;
    p->state = ST_TEXT;
}

void hy_toolcall_free(struct hy_toolcall_parser *p)
{
    hy_sbuf_free(&p->in);
    hy_sbuf_free(&p->raw);
    hy_sbuf_free(&p->acc);
    free(p->key);
    for (int i = 0; i < p->n_calls; i++) {
        free(p->calls[i].name);
        hy_sbuf_free(&p->calls[i].args);
    }
    free(p->calls);
    memset(p, 0, sizeof(*p));
}

static int all_space(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return 0;
    return 1;
}

static struct hy_tool_call *cur_call(struct hy_toolcall_parser *p)
{
    return &p->calls[p->n_calls - 1];
}

/* Markers that matter in a state (the first complete one in the input is acted on). */
static unsigned interest(int state)
{
    const unsigned all_tool = (1u << HY_TM_THINK_OPEN) - 1;
    switch (state) {
    case ST_TEXT:
        return 1u << HY_TM_CALLS_OPEN;
    case ST_VALUE:
        return 1u << HY_TM_VALUE_CLOSE;
    case ST_RAW:
        return 0;
    default:
        return all_tool;
    }
}

/* Everything from here on is content verbatim: prefix, then the undecided input. */
static int go_raw(struct hy_toolcall_parser *p, struct hy_sbuf *content, const char *prefix, size_t n)
{
    if (hy_sbuf_append(content, prefix, n) || hy_sbuf_append(content, p->in.p, p->in.len))
        return -1;
    hy_sbuf_consume(&p->in, p->in.len);
    p->state = ST_RAW;
    return 0;
}

/* S2/S3: the raw text of the unannounced part goes back as content, then the rest verbatim. */
static int salvage(struct hy_toolcall_parser *p, struct hy_sbuf *content, const char *bad, size_t n)
{
    if (hy_sbuf_append(content, p->raw.p, p->raw.len))
        return -1;
    p->raw.len = 0;
    return go_raw(p, content, bad, n);
}

/* Text t[0..n) with no complete marker of interest in it. */
static int on_text(struct hy_toolcall_parser *p, const char *t, size_t n, struct hy_sbuf *content)
{
    if (!n)
        return 0;
    switch (p->state) {
    case ST_TEXT:
    case ST_RAW:
        return hy_sbuf_append(content, t, n);
    case ST_CALLS:
        if (!all_space(t, n))
            return salvage(p, content, t, n);
        return hy_sbuf_append(&p->raw, t, n);
    case ST_NAME:
        return hy_sbuf_append(&p->raw, t, n) || hy_sbuf_append(&p->acc, t, n) ? -1 : 0;
    case ST_KEY:
        return hy_sbuf_append(&p->acc, t, n);
    case ST_ARGS:
    case ST_VALUE_WAIT: { /* whitespace between pairs is dropped whatever the chunking */
        size_t i = 0;
        while (i < n && isspace((unsigned char)t[i]))
            i++;
        if (i < n && t[i] == '{' && p->state == ST_ARGS && !p->n_args && p->mk->dialect == HY_TOOL_DIALECT_HY3) {
            p->acc.len = 0; /* a JSON-object body instead of <arg_key> pairs: parsed at </tool_call> */
            p->state = ST_JSON;
            return hy_sbuf_append(&p->acc, t + i, n - i);
        }
        return i == n ? 0 : go_raw(p, content, t + i, n - i);
    }
    case ST_JSON:
        return hy_sbuf_append(&p->acc, t, n);
    case ST_VALUE:
        return p->value_streams ? hy_json_escape_append(&cur_call(p)->args, t, n) : hy_sbuf_append(&p->acc, t, n);
    }
    return 0;
}

static int announce(struct hy_toolcall_parser *p, struct hy_sbuf *content, const char *mtext, size_t mlen)
{
    char *name = strip_dup(p->acc.p ? p->acc.p : "", p->acc.len);
    if (!name)
        return -1;
    if (!name[0]) {
        free(name);
        return salvage(p, content, mtext, mlen);
    }
    if (p->n_calls == p->cap_calls) {
        int cap = p->cap_calls ? 2 * p->cap_calls : 4;
        struct hy_tool_call *c = realloc(p->calls, (size_t)cap * sizeof(*c));
        if (!c) {
            free(name);
            return -1;
        }
        p->calls = c;
        p->cap_calls = cap;
    }
    struct hy_tool_call *c = &p->calls[p->n_calls++];
    memset(c, 0, sizeof(*c));
    c->name = name;
    p->block_calls++;
    p->n_args = 0;
    p->raw.len = 0;
    p->state = ST_ARGS;
    return hy_sbuf_puts(&c->args, "{");
}

static int on_marker(struct hy_toolcall_parser *p, int m, struct hy_sbuf *content)
{
    const char *mt = p->mk->text[m];
    const size_t ml = p->mk->len[m];
    switch (p->state) {
    case ST_TEXT: /* only <tool_calls> is of interest */
        p->raw.len = 0;
        p->block_calls = 0;
        p->state = ST_CALLS;
        return hy_sbuf_append(&p->raw, mt, ml);
    case ST_CALLS:
        if (m == HY_TM_CALL_OPEN) {
            p->acc.len = 0;
            p->state = ST_NAME;
            return hy_sbuf_append(&p->raw, mt, ml);
        }
        if (m == HY_TM_CALLS_CLOSE) {
            int rc = 0;
            if (!p->block_calls) /* S2: an empty block is text */
                rc = hy_sbuf_append(content, p->raw.p, p->raw.len) || hy_sbuf_append(content, mt, ml);
            p->raw.len = 0;
            p->state = ST_TEXT;
            return rc ? -1 : 0;
        }
        return salvage(p, content, mt, ml);
    case ST_NAME:
        if (p->mk->dialect == HY_TOOL_DIALECT_HY4) {
            /* the nearer of <arg_key> and </tool_call> ends the name; then it acts in ST_ARGS */
            if (m != HY_TM_KEY_OPEN && m != HY_TM_CALL_CLOSE)
                return salvage(p, content, mt, ml);
            if (announce(p, content, mt, ml))
                return -1;
            return p->state == ST_ARGS ? on_marker(p, m, content) : 0;
        }
        if (m == HY_TM_SEP)
            return announce(p, content, mt, ml);
        return salvage(p, content, mt, ml);
    case ST_ARGS:
        if (m == HY_TM_KEY_OPEN) {
            p->acc.len = 0;
            p->state = ST_KEY;
            return 0;
        }
        if (m == HY_TM_CALL_CLOSE) {
            struct hy_tool_call *c = cur_call(p);
            c->complete = 1;
            p->n_complete++;
            p->raw.len = 0;
            p->state = ST_CALLS;
            return hy_sbuf_puts(&c->args, "}");
        }
        return go_raw(p, content, mt, ml);
    case ST_KEY:
        if (m != HY_TM_KEY_CLOSE)
            return go_raw(p, content, mt, ml);
        free(p->key);
        p->key = strip_dup(p->acc.p ? p->acc.p : "", p->acc.len);
        if (!p->key)
            return -1;
        p->state = ST_VALUE_WAIT;
        return 0;
    case ST_VALUE_WAIT: {
        if (m != HY_TM_VALUE_OPEN)
            return go_raw(p, content, mt, ml);
        struct hy_tool_call *c = cur_call(p);
        const json_t *schema = hy_tool_arg_schema(p->tools, c->name, p->key);
        p->value_streams = allowed_types(schema) == T_STRING;
        p->acc.len = 0;
        p->state = ST_VALUE;
        if (!p->value_streams)
            return 0;
        int rc = (p->n_args++ ? hy_sbuf_puts(&c->args, ", ") : 0) ||
                 append_json_string(&c->args, p->key, strlen(p->key)) || hy_sbuf_puts(&c->args, ": \"");
        return rc ? -1 : 0;
    }
    case ST_JSON: {
        /* the body must be one JSON object (vLLM's hy_v3 json.loads); else S4 with the body as text */
        json_t *j = m == HY_TM_CALL_CLOSE ? json_loadb(p->acc.p ? p->acc.p : "", p->acc.len, 0, NULL) : NULL;
        if (!json_is_object(j)) {
            json_decref(j);
            if (hy_sbuf_append(content, p->acc.p ? p->acc.p : "", p->acc.len))
                return -1;
            p->acc.len = 0;
            return go_raw(p, content, mt, ml);
        }
        struct hy_tool_call *c = cur_call(p);
        struct hy_sbuf o = {0};
        int rc = append_json_value(&o, j) || hy_sbuf_append(&c->args, o.p + 1, o.len - 1); /* "{" is written */
        hy_sbuf_free(&o);
        json_decref(j);
        p->acc.len = 0;
        c->complete = 1;
        p->n_complete++;
        p->raw.len = 0;
        p->state = ST_CALLS;
        return rc ? -1 : 0;
    }
    case ST_VALUE: {
        struct hy_tool_call *c = cur_call(p);
        p->state = ST_ARGS;
        if (p->value_streams)
            return hy_sbuf_puts(&c->args, "\"");
        const json_t *schema = hy_tool_arg_schema(p->tools, c->name, p->key);
        int rc = (p->n_args++ ? hy_sbuf_puts(&c->args, ", ") : 0) ||
                 append_json_string(&c->args, p->key, strlen(p->key)) || hy_sbuf_puts(&c->args, ": ") ||
                 hy_tool_coerce_value(schema, p->acc.p ? p->acc.p : "", p->acc.len, &c->args);
        return rc ? -1 : 0;
    }
    }
    return 0;
}

int hy_toolcall_feed(struct hy_toolcall_parser *p, const char *text, size_t len, struct hy_sbuf *content)
{
    if (hy_sbuf_append(&p->in, text, len))
        return -1;
    while (p->in.len) {
        const unsigned want = interest(p->state);
        const char *h = p->in.p;
        const size_t hl = p->in.len;
        if (!want) {
            if (on_text(p, h, hl, content))
                return -1;
            hy_sbuf_consume(&p->in, hl);
            return 0;
        }
        size_t pos = (size_t)-1;
        int which = -1;
        for (int m = 0; m < HY_TM_COUNT; m++) {
            if (!(want >> m & 1))
                continue;
            const char *f = memmem(h, hl, p->mk->text[m], p->mk->len[m]);
            if (f && (size_t)(f - h) < pos) {
                pos = (size_t)(f - h);
                which = m;
            }
        }
        if (which >= 0) {
            /* copy out: on_text may redirect the rest of the input (marker included) to content */
            char *pre = malloc(pos + 1);
            if (!pre)
                return -1;
            memcpy(pre, h, pos);
            hy_sbuf_consume(&p->in, pos);
            const int st = p->state;
            int rc = on_text(p, pre, pos, content);
            free(pre);
            if (rc)
                return -1;
            if (p->state != st)
                continue; /* the text broke the markup: ST_RAW took the rest */
            hy_sbuf_consume(&p->in, p->mk->len[which]);
            if (on_marker(p, which, content))
                return -1;
            continue;
        }
        /* hold back the longest tail that may begin a marker of interest */
        size_t keep = 0;
        for (int m = 0; m < HY_TM_COUNT; m++) {
            if (!(want >> m & 1))
                continue;
            const size_t ml = p->mk->len[m];
            for (size_t k = ml - 1 < hl ? ml - 1 : hl; k > keep; k--)
                if (!memcmp(h + hl - k, p->mk->text[m], k)) {
                    keep = k;
                    break;
                }
        }
        const size_t take = hl - keep;
        if (!take)
            return 0;
        char *t = malloc(take);
        if (!t)
            return -1;
        memcpy(t, h, take);
        hy_sbuf_consume(&p->in, take);
        int rc = on_text(p, t, take, content);
        free(t);
        if (rc)
            return -1;
        if (p->state == ST_RAW)
            continue;
        return 0;
    }
    return 0;
}

int hy_toolcall_finish(struct hy_toolcall_parser *p, struct hy_sbuf *content)
{
    int rc = 0;
    switch (p->state) {
    case ST_TEXT:
    case ST_RAW:
        rc = hy_sbuf_append(content, p->in.p, p->in.len);
        break;
    case ST_CALLS:
    case ST_NAME:
        /* S2/S3: nothing announced since the block start / the last call: raw text is content;
         * whitespace after complete calls is dropped */
        if (!p->block_calls || p->state == ST_NAME || !all_space(p->in.p, p->in.len))
            rc = hy_sbuf_append(content, p->raw.p, p->raw.len) || hy_sbuf_append(content, p->in.p, p->in.len);
        break;
    case ST_VALUE: /* S5: held value text is value text */
        if (p->value_streams)
            rc = hy_json_escape_append(&cur_call(p)->args, p->in.p, p->in.len);
        break;
    default:
        break; /* S5: an unfinished key or buffered value writes nothing */
    }
    hy_sbuf_consume(&p->in, p->in.len);
    p->raw.len = 0;
    p->state = ST_RAW;
    return rc ? -1 : 0;
}
