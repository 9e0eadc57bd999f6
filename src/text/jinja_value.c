/* jinja_value.c - the Jinja interpreter's arena and Python values: construction from JSON, truthiness,
 * ==, ordering, str() / repr() and json.dumps of values (see jinja_internal.h). */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "text/jinja_internal.h"
#include "text/pyjson.h"

/* ------------------------------------------------------------------------------------------ arena */

struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    size_t last; /* offset of the newest block */
    max_align_t data[];
};

_Noreturn void jfail(struct jarena *a, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hy_err_set("%s", msg);
    longjmp(*a->jb, 1);
}

void *jarena_alloc(struct jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    struct jchunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (a->limit && a->total + cap > a->limit)
            jfail(a, "template needs more than %zu bytes of memory", a->limit);
        c = malloc(sizeof *c + cap);
        if (!c)
            jfail(a, "out of memory");
        c->cap = cap;
        c->used = 0;
        c->last = 0;
        a->total += cap;
        if (a->head && n > 65536) { /* big block: keep the current chunk on top */
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    char *p = (char *)c->data + c->used;
    c->last = c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void *jarena_grow(struct jarena *a, void *p, size_t n, size_t m)
{
    if (m <= n)
        return p;
    struct jchunk *c = a->head;
    if (p && c && (char *)p == (char *)c->data + c->last) {
        size_t need = (m + 15) & ~(size_t)15;
        if (c->last + need <= c->cap) {
            c->used = c->last + need;
            return p;
        }
    }
    void *q = jarena_alloc(a, m);
    if (n)
        memcpy(q, p, n);
    return q;
}

char *jarena_strndup(struct jarena *a, const char *s, size_t n)
{
    char *p = jarena_alloc(a, n + 1);
    if (n)
        memcpy(p, s, n);
    return p;
}

void jarena_free(struct jarena *a)
{
    struct jchunk *c = a->head;
    while (c) {
        struct jchunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->total = 0;
    free(a->tmp);
    a->tmp = NULL;
}

/* -------------------------------------------------------------------------------------- values */

static struct jv g_none = {.kind = JV_NONE};
static struct jv g_true = {.kind = JV_BOOL, .u.b = 1};
static struct jv g_false = {.kind = JV_BOOL, .u.b = 0};

struct jv *jv_none(void)
{
    return &g_none;
}
struct jv *jv_bool(int b)
{
    return b ? &g_true : &g_false;
}

static struct jv *mk(struct jarena *a, int kind)
{
    struct jv *v = jarena_alloc(a, sizeof *v);
    v->kind = (unsigned char)kind;
    return v;
}

struct jv *jv_undef(struct jarena *a, const char *msg)
{
    struct jv *v = mk(a, JV_UNDEF);
    v->u.undef = msg;
    return v;
}

struct jv *jv_int(struct jarena *a, int64_t i)
{
    struct jv *v = mk(a, JV_INT);
    v->u.i = i;
    return v;
}

struct jv *jv_float(struct jarena *a, double f)
{
    struct jv *v = mk(a, JV_FLOAT);
    v->u.f = f;
    return v;
}

struct jv *jv_str_nocopy(struct jarena *a, const char *s, size_t n)
{
    struct jv *v = mk(a, JV_STR);
    v->u.str.s = s;
    v->u.str.n = n;
    return v;
}

struct jv *jv_str(struct jarena *a, const char *s, size_t n)
{
    return jv_str_nocopy(a, jarena_strndup(a, s, n), n);
}
struct jv *jv_strz(struct jarena *a, const char *s)
{
    return jv_str(a, s, strlen(s));
}

struct jv *jv_list(struct jarena *a, size_t cap)
{
    struct jv *v = mk(a, JV_LIST);
    v->u.list.cap = cap;
    v->u.list.items = cap ? jarena_alloc(a, cap * sizeof(struct jv *)) : NULL;
    return v;
}

struct jv *jv_tuple(struct jarena *a, size_t n)
{
    struct jv *v = jv_list(a, n);
    v->kind = JV_TUPLE;
    v->u.list.n = n;
    return v;
}

struct jv *jv_dict(struct jarena *a, size_t cap)
{
    struct jv *v = mk(a, JV_DICT);
    v->u.dict.cap = cap;
    v->u.dict.items = cap ? jarena_alloc(a, cap * sizeof(struct jkv)) : NULL;
    return v;
}

void jv_list_push(struct jarena *a, struct jv *l, struct jv *x)
{
    if (l->u.list.n == l->u.list.cap) {
        size_t nc = l->u.list.cap ? 2 * l->u.list.cap : 4;
        l->u.list.items =
            jarena_grow(a, l->u.list.items, l->u.list.cap * sizeof(struct jv *), nc * sizeof(struct jv *));
        l->u.list.cap = nc;
    }
    l->u.list.items[l->u.list.n++] = x;
}

static int hash_eq(const struct jv *x, const struct jv *y)
{
    if (x->kind == JV_STR && y->kind == JV_STR)
        return x->u.str.n == y->u.str.n && !memcmp(x->u.str.s, y->u.str.s, x->u.str.n);
    return jv_eq(x, y);
}

struct jv *jv_dict_get(const struct jv *d, const struct jv *k)
{
    for (size_t i = 0; i < d->u.dict.n; i++)
        if (hash_eq(d->u.dict.items[i].k, k))
            return d->u.dict.items[i].v;
    return NULL;
}

struct jv *jv_dict_getz(const struct jv *d, const char *k, size_t n)
{
    for (size_t i = 0; i < d->u.dict.n; i++) {
        const struct jv *key = d->u.dict.items[i].k;
        if (key->kind == JV_STR && key->u.str.n == n && !memcmp(key->u.str.s, k, n))
            return d->u.dict.items[i].v;
    }
    return NULL;
}

void jv_dict_set(struct jarena *a, struct jv *d, struct jv *k, struct jv *v)
{
    for (size_t i = 0; i < d->u.dict.n; i++)
        if (hash_eq(d->u.dict.items[i].k, k)) {
            d->u.dict.items[i].v = v;
            return;
        }
    if (d->u.dict.n == d->u.dict.cap) {
        size_t nc = d->u.dict.cap ? 2 * d->u.dict.cap : 4;
        d->u.dict.items = jarena_grow(a, d->u.dict.items, d->u.dict.cap * sizeof(struct jkv), nc * sizeof(struct jkv));
        d->u.dict.cap = nc;
    }
    d->u.dict.items[d->u.dict.n].k = k;
    d->u.dict.items[d->u.dict.n].v = v;
    d->u.dict.n++;
}

struct jv *jv_from_json(struct jarena *a, const void *json, int depth)
{
    const json_t *j = json;
    if (depth > 1000)
        jfail(a, "JSON nested too deeply");
    switch (j ? json_typeof(j) : JSON_NULL) {
    case JSON_NULL:
        return jv_none();
    case JSON_TRUE:
        return jv_bool(1);
    case JSON_FALSE:
        return jv_bool(0);
    case JSON_INTEGER:
        return jv_int(a, json_integer_value(j));
    case JSON_REAL:
        return jv_float(a, json_real_value(j));
    case JSON_STRING:
        return jv_str(a, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        struct jv *l = jv_list(a, json_array_size(j));
        for (size_t i = 0; i < json_array_size(j); i++)
            jv_list_push(a, l, jv_from_json(a, json_array_get(j, i), depth + 1));
        return l;
    }
    case JSON_OBJECT: {
        struct jv *d = jv_dict(a, json_object_size(j));
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v)
        {
            struct jkv *kv = &d->u.dict.items[d->u.dict.n++];
            kv->k = jv_str(a, k, strlen(k));
            kv->v = jv_from_json(a, v, depth + 1);
        }
        return d;
    }
    }
    return jv_none();
}

int jv_truthy(const struct jv *v)
{
    switch (v->kind) {
    case JV_UNDEF:
    case JV_NONE:
        return 0;
    case JV_BOOL:
        return v->u.b;
    case JV_INT:
        return v->u.i != 0;
    case JV_FLOAT:
        return v->u.f != 0.0;
    case JV_STR:
        return v->u.str.n != 0;
    case JV_LIST:
        return v->markup || v->u.list.n != 0; /* a generator is always true */
    case JV_TUPLE:
        return v->u.list.n != 0;
    case JV_DICT:
        return v->u.dict.n != 0;
    default:
        return 1;
    }
}

const char *jv_type_name(const struct jv *v)
{
    static const char *names[] = {"Undefined",
                                  "NoneType",
                                  "bool",
                                  "int",
                                  "float",
                                  "str",
                                  "list",
                                  "tuple",
                                  "dict",
                                  "Namespace",
                                  "Macro",
                                  "LoopContext",
                                  "builtin_function_or_method",
                                  "function",
                                  "Cycler"};
    if (v->kind == JV_STR && v->markup)
        return "Markup";
    if (v->kind == JV_LIST && v->markup)
        return "generator";
    return names[v->kind];
}

const char *jv_object_type_repr(const struct jv *v)
{
    switch (v->kind) {
    case JV_NONE:
        return "None";
    case JV_BOOL:
        return "bool object";
    case JV_INT:
        return "int object";
    case JV_FLOAT:
        return "float object";
    case JV_STR:
        return v->markup ? "markupsafe.Markup object" : "str object";
    case JV_LIST:
        return v->markup ? "generator object" : "list object";
    case JV_TUPLE:
        return "tuple object";
    case JV_DICT:
        return "dict object";
    case JV_NS:
        return "jinja2.utils.Namespace object";
    case JV_MACRO:
        return "jinja2.runtime.Macro object";
    case JV_LOOP:
        return "jinja2.runtime.LoopContext object";
    case JV_CYCLER:
        return v->u.cyc.joiner ? "jinja2.utils.Joiner object" : "jinja2.utils.Cycler object";
    case JV_UNDEF:
        return "jinja2.runtime.Undefined object";
    default:
        return "builtin_function_or_method object";
    }
}

static int is_num(const struct jv *v)
{
    return v->kind == JV_BOOL || v->kind == JV_INT || v->kind == JV_FLOAT;
}
static double num_f(const struct jv *v)
{
    return v->kind == JV_FLOAT ? v->u.f : v->kind == JV_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t num_i(const struct jv *v)
{
    return v->kind == JV_INT ? v->u.i : v->u.b;
}

int jv_eq(const struct jv *x, const struct jv *y)
{
    if (is_num(x) && is_num(y)) {
        if (x->kind == JV_FLOAT || y->kind == JV_FLOAT) {
            /* exact int/float comparison as Python does */
            if (x->kind == JV_FLOAT && y->kind == JV_FLOAT)
                return x->u.f == y->u.f;
            const struct jv *fl = x->kind == JV_FLOAT ? x : y, *in = x->kind == JV_FLOAT ? y : x;
            double f = fl->u.f;
            if (f != f || isinf(f) || f != floor(f))
                return 0;
            if (f < -9.3e18 || f > 9.3e18)
                return 0;
            return (int64_t)f == num_i(in);
        }
        return num_i(x) == num_i(y);
    }
    if (x->kind != y->kind) {
        int xl = x->kind == JV_LIST || x->kind == JV_TUPLE, yl = y->kind == JV_LIST || y->kind == JV_TUPLE;
        (void)xl;
        (void)yl;
        return 0;
    }
    switch (x->kind) {
    case JV_UNDEF:
    case JV_NONE:
        return 1;
    case JV_STR:
        return x->u.str.n == y->u.str.n && !memcmp(x->u.str.s, y->u.str.s, x->u.str.n);
    case JV_LIST:
    case JV_TUPLE:
        if (x->markup || y->markup)
            return x == y;
        if (x->u.list.n != y->u.list.n)
            return 0;
        for (size_t i = 0; i < x->u.list.n; i++)
            if (!jv_eq(x->u.list.items[i], y->u.list.items[i]))
                return 0;
        return 1;
    case JV_DICT:
        if (x->u.dict.n != y->u.dict.n)
            return 0;
        for (size_t i = 0; i < x->u.dict.n; i++) {
            const struct jv *o = jv_dict_get(y, x->u.dict.items[i].k);
            if (!o || !jv_eq(x->u.dict.items[i].v, o))
                return 0;
        }
        return 1;
    case JV_METHOD:
        return x->u.method.self == y->u.method.self && !strcmp(x->u.method.name, y->u.method.name);
    case JV_FUNC:
        return x->u.func == y->u.func;
    default:
        return x == y;
    }
}

static const char *cmp_sym(int op)
{
    return op == '<' ? "<" : op == '>' ? ">" : op == 'l' ? "<=" : ">=";
}

/* three-way compare or raise TypeError for op */
static int order3(struct jarena *a, const struct jv *x, const struct jv *y, int op, int fold, int depth)
{
    if (depth > 200)
        jfail(a, "maximum recursion depth exceeded in comparison");
    if (is_num(x) && is_num(y)) {
        if (x->kind != JV_FLOAT && y->kind != JV_FLOAT) {
            int64_t p = num_i(x), q = num_i(y);
            return p < q ? -1 : p > q;
        }
        double p = num_f(x), q = num_f(y);
        if (p != p || q != q)
            return 2; /* unordered: every comparison false */
        return p < q ? -1 : p > q;
    }
    if (x->kind == JV_STR && y->kind == JV_STR) {
        if (fold) { /* ASCII casefold (approximates str.lower for sort keys) */
            size_t n = x->u.str.n < y->u.str.n ? x->u.str.n : y->u.str.n;
            for (size_t i = 0; i < n; i++) {
                unsigned char p = (unsigned char)x->u.str.s[i], q = (unsigned char)y->u.str.s[i];
                if (p >= 'A' && p <= 'Z')
                    p = (unsigned char)(p + 32);
                if (q >= 'A' && q <= 'Z')
                    q = (unsigned char)(q + 32);
                if (p != q)
                    return p < q ? -1 : 1;
            }
            return x->u.str.n < y->u.str.n ? -1 : x->u.str.n > y->u.str.n;
        }
        size_t n = x->u.str.n < y->u.str.n ? x->u.str.n : y->u.str.n;
        int c = memcmp(x->u.str.s, y->u.str.s, n); /* UTF-8 byte order = code point order */
        if (c)
            return c < 0 ? -1 : 1;
        return x->u.str.n < y->u.str.n ? -1 : x->u.str.n > y->u.str.n;
    }
    if ((x->kind == JV_LIST && y->kind == JV_LIST && !x->markup && !y->markup) ||
        (x->kind == JV_TUPLE && y->kind == JV_TUPLE)) {
        size_t n = x->u.list.n < y->u.list.n ? x->u.list.n : y->u.list.n;
        for (size_t i = 0; i < n; i++) {
            if (jv_eq(x->u.list.items[i], y->u.list.items[i]))
                continue;
            return order3(a, x->u.list.items[i], y->u.list.items[i], op, fold, depth + 1);
        }
        return x->u.list.n < y->u.list.n ? -1 : x->u.list.n > y->u.list.n;
    }
    if (x->kind == JV_UNDEF)
        jfail(a, "%s", x->u.undef);
    if (y->kind == JV_UNDEF)
        jfail(a, "%s", y->u.undef);
    jfail(a, "'%s' not supported between instances of '%s' and '%s'", cmp_sym(op), jv_type_name(x), jv_type_name(y));
}

int jv_cmp(struct jarena *a, const struct jv *x, const struct jv *y, int op)
{
    int c = order3(a, x, y, op, 0, 0);
    if (c == 2)
        return 0;
    switch (op) {
    case '<':
        return c < 0;
    case '>':
        return c > 0;
    case 'l':
        return c <= 0;
    default:
        return c >= 0;
    }
}

int jv_order(struct jarena *a, const struct jv *x, const struct jv *y, int fold)
{
    int c = order3(a, x, y, '<', fold, 0);
    return c == 2 ? 0 : c;
}

/* -------------------------------------------------------------------------------------- buffers */

void jbuf_put(struct jarena *a, struct jbuf *b, const char *s, size_t n)
{
    if (!n)
        return;
    if (b->limit && b->n + n > b->limit)
        jfail(a, "output exceeds %zu bytes", b->limit);
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1)
            nc *= 2;
        b->p = jarena_grow(a, b->p, b->cap, nc);
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void jbuf_puts(struct jarena *a, struct jbuf *b, const char *s)
{
    jbuf_put(a, b, s, strlen(s));
}

/* runs a pyjson string writer into a malloc'd scratch buffer (a->tmp while in use) and copies it */
static void put_pyjson(struct jarena *a, struct jbuf *b, const char *s, size_t n, int repr)
{
    struct hy_pyjson_buf t;
    hy_pyjson_buf_init(&t);
    if (repr)
        hy_pyjson_repr_string(&t, s, n);
    else
        hy_pyjson_dumps_string(&t, s, n);
    if (t.failed) {
        hy_pyjson_buf_free(&t);
        jfail(a, "out of memory");
    }
    a->tmp = t.data;
    jbuf_put(a, b, t.data, t.len);
    a->tmp = NULL;
    hy_pyjson_buf_free(&t);
}

static void put_int(struct jarena *a, struct jbuf *b, int64_t i)
{
    char t[32];
    int n = snprintf(t, sizeof t, "%lld", (long long)i);
    jbuf_put(a, b, t, (size_t)n);
}

void jv_write(struct jarena *a, struct jbuf *b, const struct jv *v, int repr, int depth)
{
    char t[40];
    if (depth > 500)
        jfail(a, "maximum recursion depth exceeded while getting the repr of an object");
    switch (v->kind) {
    case JV_UNDEF:
        if (repr)
            jbuf_puts(a, b, "Undefined");
        return;
    case JV_NONE:
        jbuf_puts(a, b, "None");
        return;
    case JV_BOOL:
        jbuf_puts(a, b, v->u.b ? "True" : "False");
        return;
    case JV_INT:
        put_int(a, b, v->u.i);
        return;
    case JV_FLOAT:
        jbuf_put(a, b, t, (size_t)hy_pyjson_float_repr(v->u.f, t));
        return;
    case JV_STR:
        if (repr) {
            if (v->markup)
                jbuf_puts(a, b, "Markup(");
            put_pyjson(a, b, v->u.str.s, v->u.str.n, 1);
            if (v->markup)
                jbuf_puts(a, b, ")");
        } else
            jbuf_put(a, b, v->u.str.s, v->u.str.n);
        return;
    case JV_LIST:
    case JV_TUPLE:
        if (v->markup)
            jfail(a, "unsupported: printing a generator object");
        jbuf_puts(a, b, v->kind == JV_LIST ? "[" : "(");
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (i)
                jbuf_puts(a, b, ", ");
            jv_write(a, b, v->u.list.items[i], 1, depth + 1);
        }
        if (v->kind == JV_TUPLE && v->u.list.n == 1)
            jbuf_puts(a, b, ",");
        jbuf_puts(a, b, v->kind == JV_LIST ? "]" : ")");
        return;
    case JV_DICT:
    case JV_NS:
        if (v->kind == JV_NS)
            jbuf_puts(a, b, "<Namespace ");
        jbuf_puts(a, b, "{");
        for (size_t i = 0; i < v->u.dict.n; i++) {
            if (i)
                jbuf_puts(a, b, ", ");
            jv_write(a, b, v->u.dict.items[i].k, 1, depth + 1);
            jbuf_puts(a, b, ": ");
            jv_write(a, b, v->u.dict.items[i].v, 1, depth + 1);
        }
        jbuf_puts(a, b, "}");
        if (v->kind == JV_NS)
            jbuf_puts(a, b, ">");
        return;
    case JV_MACRO:
        if (v->u.macro.def->kind == NODE_MACRO) {
            jbuf_puts(a, b, "<Macro '");
            jbuf_puts(a, b, v->u.macro.def->name);
            jbuf_puts(a, b, "'>");
        } else
            jbuf_puts(a, b, "<Macro 'caller'>");
        return;
    case JV_LOOP: {
        jbuf_puts(a, b, "<LoopContext ");
        put_int(a, b, (int64_t)v->u.loop->i + 1);
        jbuf_puts(a, b, "/");
        put_int(a, b, (int64_t)v->u.loop->n);
        jbuf_puts(a, b, ">");
        return;
    }
    default:
        jfail(a, "unsupported: printing a %s", jv_object_type_repr(v));
    }
}

struct jv *jv_to_str(struct jarena *a, const struct jv *v)
{
    if (v->kind == JV_STR)
        return jv_str_nocopy(a, v->u.str.s, v->u.str.n);
    struct jbuf b = {0};
    jv_write(a, &b, v, 0, 0);
    return jv_str_nocopy(a, b.p ? b.p : "", b.n);
}

/* ------------------------------------------------------------------------------------ json.dumps */

static void dumps_str(struct jarena *a, struct jbuf *b, const char *s, size_t n, int ascii)
{
    if (!ascii) {
        put_pyjson(a, b, s, n, 0);
        return;
    }
    jbuf_puts(a, b, "\"");
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = ju_dec(s + i, n - i, &cp);
        char t[16];
        if (cp < 0x80) {
            if (cp == '"')
                jbuf_puts(a, b, "\\\"");
            else if (cp == '\\')
                jbuf_puts(a, b, "\\\\");
            else if (cp == '\n')
                jbuf_puts(a, b, "\\n");
            else if (cp == '\r')
                jbuf_puts(a, b, "\\r");
            else if (cp == '\t')
                jbuf_puts(a, b, "\\t");
            else if (cp == '\b')
                jbuf_puts(a, b, "\\b");
            else if (cp == '\f')
                jbuf_puts(a, b, "\\f");
            else if (cp < 0x20 || cp == 0x7f) {
                snprintf(t, sizeof t, "\\u%04x", (unsigned)cp);
                jbuf_puts(a, b, t);
            } else {
                char c = (char)cp;
                jbuf_put(a, b, &c, 1);
            }
        } else if (cp < 0x10000) {
            snprintf(t, sizeof t, "\\u%04x", (unsigned)cp);
            jbuf_puts(a, b, t);
        } else {
            uint32_t v = cp - 0x10000;
            snprintf(t, sizeof t, "\\u%04x\\u%04x", (unsigned)(0xd800 + (v >> 10)), (unsigned)(0xdc00 + (v & 0x3ff)));
            jbuf_puts(a, b, t);
        }
        i += l;
    }
    jbuf_puts(a, b, "\"");
}

static void newline_indent(struct jarena *a, struct jbuf *b, const struct jdumps *o, int level)
{
    jbuf_puts(a, b, "\n");
    for (int i = 0; i < level; i++)
        jbuf_puts(a, b, o->indent);
}

static int key_cmp_sort(struct jarena *a, const struct jkv *x, const struct jkv *y)
{
    return jv_order(a, x->k, y->k, 0);
}

/* json key text: str as is; int/float/bool/None converted as json.dumps does */
static void dumps_key(struct jarena *a, struct jbuf *b, const struct jv *k, const struct jdumps *o)
{
    char t[40];
    switch (k->kind) {
    case JV_STR:
        dumps_str(a, b, k->u.str.s, k->u.str.n, o->ensure_ascii);
        return;
    case JV_INT:
        snprintf(t, sizeof t, "\"%lld\"", (long long)k->u.i);
        jbuf_puts(a, b, t);
        return;
    case JV_BOOL:
        jbuf_puts(a, b, k->u.b ? "\"true\"" : "\"false\"");
        return;
    case JV_NONE:
        jbuf_puts(a, b, "\"null\"");
        return;
    case JV_FLOAT: {
        jbuf_puts(a, b, "\"");
        double x = k->u.f;
        if (x != x)
            jbuf_puts(a, b, "NaN");
        else if (isinf(x))
            jbuf_puts(a, b, x < 0 ? "-Infinity" : "Infinity");
        else
            jbuf_put(a, b, t, (size_t)hy_pyjson_float_repr(x, t));
        jbuf_puts(a, b, "\"");
        return;
    }
    default:
        jfail(a, "keys must be str, int, float, bool or None, not %s", jv_type_name(k));
    }
}

void jv_dumps(struct jarena *a, struct jbuf *b, const struct jv *v, const struct jdumps *o, int level)
{
    char t[40];
    if (level > 500)
        jfail(a, "maximum recursion depth exceeded while encoding a JSON object");
    switch (v->kind) {
    case JV_NONE:
        jbuf_puts(a, b, "null");
        return;
    case JV_BOOL:
        jbuf_puts(a, b, v->u.b ? "true" : "false");
        return;
    case JV_INT:
        put_int(a, b, v->u.i);
        return;
    case JV_FLOAT: {
        double x = v->u.f;
        if (x != x)
            jbuf_puts(a, b, "NaN");
        else if (isinf(x))
            jbuf_puts(a, b, x < 0 ? "-Infinity" : "Infinity");
        else
            jbuf_put(a, b, t, (size_t)hy_pyjson_float_repr(x, t));
        return;
    }
    case JV_STR:
        dumps_str(a, b, v->u.str.s, v->u.str.n, o->ensure_ascii);
        return;
    case JV_LIST:
    case JV_TUPLE:
        if (v->markup)
            break;
        if (!v->u.list.n) {
            jbuf_puts(a, b, "[]");
            return;
        }
        jbuf_puts(a, b, "[");
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (i)
                jbuf_puts(a, b, o->item_sep);
            if (o->indent)
                newline_indent(a, b, o, level + 1);
            jv_dumps(a, b, v->u.list.items[i], o, level + 1);
        }
        if (o->indent)
            newline_indent(a, b, o, level);
        jbuf_puts(a, b, "]");
        return;
    case JV_DICT: {
        if (!v->u.dict.n) {
            jbuf_puts(a, b, "{}");
            return;
        }
        size_t n = v->u.dict.n;
        const struct jkv *items = v->u.dict.items;
        if (o->sort_keys) {
            struct jkv *s = jarena_alloc(a, n * sizeof *s);
            memcpy(s, items, n * sizeof *s);
            for (size_t i = 1; i < n; i++) { /* insertion sort: stable, raises on mixed key types */
                struct jkv x = s[i];
                size_t j = i;
                while (j > 0 && key_cmp_sort(a, &s[j - 1], &x) > 0) {
                    s[j] = s[j - 1];
                    j--;
                }
                s[j] = x;
            }
            items = s;
        }
        jbuf_puts(a, b, "{");
        for (size_t i = 0; i < n; i++) {
            if (i)
                jbuf_puts(a, b, o->item_sep);
            if (o->indent)
                newline_indent(a, b, o, level + 1);
            dumps_key(a, b, items[i].k, o);
            jbuf_puts(a, b, o->key_sep);
            jv_dumps(a, b, items[i].v, o, level + 1);
        }
        if (o->indent)
            newline_indent(a, b, o, level);
        jbuf_puts(a, b, "}");
        return;
    }
    default:
        break;
    }
    jfail(a, "Object of type %s is not JSON serializable", jv_type_name(v));
}

/* ------------------------------------------------------------------------------------ iteration */

struct jv **jb_iter(struct jbctx *c, struct jv *x, size_t *n)
{
    switch (x->kind) {
    case JV_UNDEF:
        *n = 0;
        return NULL;
    case JV_LIST:
    case JV_TUPLE:
        *n = x->u.list.n;
        return x->u.list.items;
    case JV_DICT: {
        struct jv **r = jarena_alloc(c->a, (x->u.dict.n + 1) * sizeof *r);
        for (size_t i = 0; i < x->u.dict.n; i++)
            r[i] = x->u.dict.items[i].k;
        *n = x->u.dict.n;
        return r;
    }
    case JV_STR: {
        size_t cnt = ju_len(x->u.str.s, x->u.str.n), o = 0;
        struct jv **r = jarena_alloc(c->a, (cnt + 1) * sizeof *r);
        for (size_t i = 0; i < cnt; i++) {
            uint32_t cp;
            size_t l = ju_dec(x->u.str.s + o, x->u.str.n - o, &cp);
            r[i] = jv_str_nocopy(c->a, x->u.str.s + o, l);
            o += l;
        }
        *n = cnt;
        return r;
    }
    default:
        jfail(c->a, "'%s' object is not iterable", jv_type_name(x));
    }
}

/* ---------------------------------------------------------------------------------------- UTF-8 */

size_t ju_enc(uint32_t cp, char *o)
{
    size_t k = 0;
    if (cp < 0x80)
        o[k++] = (char)cp;
    else if (cp < 0x800) {
        o[k++] = (char)(0xc0 | (cp >> 6));
        o[k++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        o[k++] = (char)(0xe0 | (cp >> 12));
        o[k++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[k++] = (char)(0x80 | (cp & 0x3f));
    } else {
        o[k++] = (char)(0xf0 | (cp >> 18));
        o[k++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        o[k++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[k++] = (char)(0x80 | (cp & 0x3f));
    }
    return k;
}

size_t ju_dec(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80 || n < 2) {
        *cp = u[0];
        return 1;
    }
    if (u[0] < 0xe0) {
        *cp = ((uint32_t)(u[0] & 0x1f) << 6) | (u[1] & 0x3f);
        return 2;
    }
    if (u[0] < 0xf0 || n < 4) {
        if (n < 3) {
            *cp = u[0];
            return 1;
        }
        *cp = ((uint32_t)(u[0] & 0x0f) << 12) | ((uint32_t)(u[1] & 0x3f) << 6) | (u[2] & 0x3f);
        return 3;
    }
    *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3f) << 12) | ((uint32_t)(u[2] & 0x3f) << 6) |
          (u[3] & 0x3f);
    return 4;
}

size_t ju_len(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

size_t ju_off(const char *s, size_t n, size_t i)
{
    size_t off = 0;
    while (off < n && i > 0) {
        off++;
        while (off < n && ((unsigned char)s[off] & 0xc0) == 0x80)
            off++;
        i--;
    }
    return off;
}

int ju_isspace(uint32_t c)
{
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

size_t ju_rstrip_ws(const char *s, size_t n)
{
    while (n > 0) {
        size_t st = n - 1;
        while (st > 0 && ((unsigned char)s[st] & 0xc0) == 0x80)
            st--;
        uint32_t cp;
        ju_dec(s + st, n - st, &cp);
        if (!ju_isspace(cp))
            break;
        n = st;
    }
    return n;
}

size_t ju_lstrip_ws(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = ju_dec(s + i, n - i, &cp);
        if (!ju_isspace(cp))
            break;
        i += l;
    }
    return i;
}
