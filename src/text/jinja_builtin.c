/* jinja_builtin.c - jinja2's operators, attribute / item access through the immutable sandbox, the
 * str / dict / list methods templates call, global functions, tests and filters (see
 * jinja_internal.h). Nothing here calls back into the evaluator: macros are not callable from
 * filters (map / select take filter and test names). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_internal.h"

typedef struct jv jv;
#define A (c->a)

void jb_check_undef(struct jbctx *c, const jv *x)
{
    if (x->kind == JV_UNDEF)
        jfail(A, "%s", x->u.undef);
}

static void step(struct jbctx *c, uint64_t n)
{
    *c->steps += n;
    if (*c->steps > c->max_steps)
        jfail(A, "template exceeds %llu evaluation steps", (unsigned long long)c->max_steps);
}

int jb_is_int(const jv *v)
{
    return v->kind == JV_INT || v->kind == JV_BOOL;
}
int jb_is_num(const jv *v)
{
    return jb_is_int(v) || v->kind == JV_FLOAT;
}
static int64_t iv(const jv *v)
{
    return v->kind == JV_INT ? v->u.i : v->u.b;
}
static double fv(const jv *v)
{
    return v->kind == JV_FLOAT ? v->u.f : (double)iv(v);
}
int jb_is_seq(const jv *v)
{
    return (v->kind == JV_LIST || v->kind == JV_TUPLE) && v->markup != 1;
}

static jv *new_str(struct jbctx *c, struct jbuf *b)
{
    return jv_str_nocopy(A, b->p ? b->p : "", b->n);
}

static jv *undef_attr(struct jbctx *c, const jv *obj, const char *name, size_t n)
{
    char *m = jarena_alloc(A, n + 80);
    snprintf(m, n + 80, "'%s' has no attribute '%.*s'", jv_object_type_repr(obj), (int)n, name);
    return jv_undef(A, m);
}

static jv *undef_elem(struct jbctx *c, const jv *obj, const jv *key)
{
    struct jbuf b = {0};
    jbuf_puts(A, &b, jv_object_type_repr(obj));
    jbuf_puts(A, &b, " has no element ");
    jv_write(A, &b, key, 1, 0);
    return jv_undef(A, b.p);
}

/* --------------------------------------------------------------------------------- iteration */

/* --------------------------------------------------------------------------------- operators */

static jv *int_result(struct jbctx *c, int ovf, int64_t r)
{
    if (ovf)
        jfail(A, "unsupported: integer overflow beyond 64 bits");
    return jv_int(A, r);
}

static jv *repeat(struct jbctx *c, jv *seq, int64_t k)
{
    if (k < 0)
        k = 0;
    if (seq->kind == JV_STR) {
        if (seq->u.str.n && (uint64_t)k > (SIZE_MAX / 2) / seq->u.str.n)
            jfail(A, "template needs more than %zu bytes of memory", A->limit);
        size_t tot = seq->u.str.n * (size_t)k;
        if (A->limit && tot > A->limit)
            jfail(A, "template needs more than %zu bytes of memory", A->limit);
        char *p = jarena_alloc(A, tot + 1);
        for (int64_t i = 0; i < k; i++)
            memcpy(p + (size_t)i * seq->u.str.n, seq->u.str.s, seq->u.str.n);
        jv *r = jv_str_nocopy(A, p, tot);
        r->markup = seq->markup;
        return r;
    }
    size_t n = seq->u.list.n;
    if (n && (uint64_t)k > (A->limit ? A->limit : SIZE_MAX / 16) / (n * sizeof(jv *)))
        jfail(A, "template needs more than %zu bytes of memory", A->limit);
    jv *r = seq->kind == JV_TUPLE ? jv_tuple(A, n * (size_t)k) : jv_list(A, n * (size_t)k);
    r->u.list.n = n * (size_t)k;
    for (int64_t i = 0; i < k; i++)
        if (n)
            memcpy(r->u.list.items + (size_t)i * n, seq->u.list.items, n * sizeof(jv *));
    return r;
}

static void escape_into(struct jbctx *c, struct jbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&':
            jbuf_puts(A, b, "&amp;");
            break;
        case '<':
            jbuf_puts(A, b, "&lt;");
            break;
        case '>':
            jbuf_puts(A, b, "&gt;");
            break;
        case '"':
            jbuf_puts(A, b, "&#34;");
            break;
        case '\'':
            jbuf_puts(A, b, "&#39;");
            break;
        default:
            jbuf_put(A, b, s + i, 1);
        }
    }
}

jv *jb_escape(struct jbctx *c, jv *x)
{
    if (x->kind == JV_STR && x->markup)
        return x;
    jv *s = jv_to_str(A, x);
    struct jbuf b = {0};
    escape_into(c, &b, s->u.str.s, s->u.str.n);
    jv *r = new_str(c, &b);
    r->markup = 1;
    return r;
}

jv *jb_binop(struct jbctx *c, int op, jv *x, jv *y)
{
    static const char *sym[] = {"", "+", "-", "*", "/", "//", "%", "**", "~"};
    if (op == OP_CONCAT) {
        jv *p = jv_to_str(A, x), *q = jv_to_str(A, y);
        struct jbuf b = {0};
        jbuf_put(A, &b, p->u.str.s, p->u.str.n);
        jbuf_put(A, &b, q->u.str.s, q->u.str.n);
        return new_str(c, &b);
    }
    jb_check_undef(c, x);
    jb_check_undef(c, y);
    if (jb_is_num(x) && jb_is_num(y)) {
        int fl = x->kind == JV_FLOAT || y->kind == JV_FLOAT;
        int64_t p = iv(x), q = iv(y), r = 0;
        double a = fv(x), b = fv(y);
        switch (op) {
        case OP_ADD:
            if (fl)
                return jv_float(A, a + b);
            {
                int ovf = __builtin_add_overflow(p, q, &r);
                return int_result(c, ovf, r);
            }
        case OP_SUB:
            if (fl)
                return jv_float(A, a - b);
            {
                int ovf = __builtin_sub_overflow(p, q, &r);
                return int_result(c, ovf, r);
            }
        case OP_MUL:
            if (fl)
                return jv_float(A, a * b);
            {
                int ovf = __builtin_mul_overflow(p, q, &r);
                return int_result(c, ovf, r);
            }
        case OP_DIV:
            if (b == 0)
                jfail(A, fl ? "float division by zero" : "division by zero");
            return jv_float(A, a / b);
        case OP_FLOORDIV:
        case OP_MOD:
            if (!fl) {
                if (q == 0)
                    jfail(A, op == OP_MOD ? "integer modulo by zero" : "integer division or modulo by zero");
                if (p == INT64_MIN && q == -1)
                    return op == OP_MOD ? jv_int(A, 0) : int_result(c, 1, 0);
                int64_t d = p / q, m = p % q;
                if (m != 0 && ((m < 0) != (q < 0))) {
                    d--;
                    m += q;
                }
                return jv_int(A, op == OP_MOD ? m : d);
            }
            if (b == 0)
                jfail(A, op == OP_MOD ? "float modulo" : "float floor division by zero");
            {
                double m = fmod(a, b);
                if (m != 0 && ((m < 0) != (b < 0)))
                    m += b;
                else if (m == 0)
                    m = copysign(0.0, b);
                if (op == OP_MOD)
                    return jv_float(A, m);
                double d = (a - m) / b;
                double fd = floor(d);
                if (d - fd > 0.5)
                    fd += 1.0;
                if (fd == 0)
                    fd = copysign(0.0, a / b);
                return jv_float(A, fd);
            }
        case OP_POW:
            if (!fl && q >= 0) {
                int64_t acc = 1, base = p;
                int64_t e = q;
                int ovf = 0;
                while (e > 0) {
                    if (e & 1)
                        ovf |= __builtin_mul_overflow(acc, base, &acc);
                    e >>= 1;
                    if (e)
                        ovf |= __builtin_mul_overflow(base, base, &base);
                    if (ovf)
                        break;
                }
                return int_result(c, ovf, acc);
            }
            if (a == 0 && b < 0)
                jfail(A, "0.0 cannot be raised to a negative power");
            if (a < 0 && b != floor(b))
                jfail(A, "unsupported: complex result of a fractional power");
            return jv_float(A, pow(a, b));
        }
    }
    if (op == OP_ADD) {
        if (x->kind == JV_STR && y->kind == JV_STR) {
            struct jbuf b = {0};
            if (x->markup || y->markup) {
                if (x->markup)
                    jbuf_put(A, &b, x->u.str.s, x->u.str.n);
                else
                    escape_into(c, &b, x->u.str.s, x->u.str.n);
                if (y->markup)
                    jbuf_put(A, &b, y->u.str.s, y->u.str.n);
                else
                    escape_into(c, &b, y->u.str.s, y->u.str.n);
                jv *r = new_str(c, &b);
                r->markup = 1;
                return r;
            }
            jbuf_put(A, &b, x->u.str.s, x->u.str.n);
            jbuf_put(A, &b, y->u.str.s, y->u.str.n);
            return new_str(c, &b);
        }
        if (x->kind == JV_STR && x->markup && y->kind != JV_STR)
            return jb_binop(c, OP_ADD, x, jb_escape(c, y));
        if (y->kind == JV_STR && y->markup && x->kind != JV_STR)
            return jb_binop(c, OP_ADD, jb_escape(c, x), y);
        if (jb_is_seq(x) && jb_is_seq(y) && x->kind == y->kind) {
            size_t n = x->u.list.n + y->u.list.n;
            jv *r = x->kind == JV_TUPLE ? jv_tuple(A, n) : jv_list(A, n);
            r->u.list.n = n;
            if (x->u.list.n)
                memcpy(r->u.list.items, x->u.list.items, x->u.list.n * sizeof(jv *));
            if (y->u.list.n)
                memcpy(r->u.list.items + x->u.list.n, y->u.list.items, y->u.list.n * sizeof(jv *));
            return r;
        }
        if (x->kind == JV_STR || (jb_is_seq(x))) {
            const char *tn = x->kind == JV_STR ? "str" : jv_type_name(x);
            jfail(A, "can only concatenate %s (not \"%s\") to %s", tn, jv_type_name(y), tn);
        }
    }
    if (op == OP_MUL) {
        if ((x->kind == JV_STR || jb_is_seq(x)) && jb_is_int(y))
            return repeat(c, x, iv(y));
        if ((y->kind == JV_STR || jb_is_seq(y)) && jb_is_int(x))
            return repeat(c, y, iv(x));
        if (x->kind == JV_STR || jb_is_seq(x))
            jfail(A, "can't multiply sequence by non-int of type '%s'", jv_type_name(y));
        if (y->kind == JV_STR || jb_is_seq(y))
            jfail(A, "can't multiply sequence by non-int of type '%s'", jv_type_name(x));
    }
    if (op == OP_MOD && x->kind == JV_STR)
        return jb_printf(c, x, y);
    jfail(A, "unsupported operand type(s) for %s: '%s' and '%s'", op == OP_POW ? "** or pow()" : sym[op],
          jv_type_name(x), jv_type_name(y));
}

static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (!nn)
        return h;
    if (nn > hn)
        return NULL;
    return memmem(h, hn, nd, nn);
}

int jb_contains(struct jbctx *c, jv *container, jv *item)
{
    switch (container->kind) {
    case JV_UNDEF:
        return 0;
    case JV_STR:
        if (item->kind != JV_STR) {
            jb_check_undef(c, item);
            jfail(A, "'in <string>' requires string as left operand, not %s", jv_type_name(item));
        }
        return find_bytes(container->u.str.s, container->u.str.n, item->u.str.s, item->u.str.n) != NULL;
    case JV_LIST:
    case JV_TUPLE:
        for (size_t i = 0; i < container->u.list.n; i++)
            if (jv_eq(container->u.list.items[i], item))
                return 1;
        return 0;
    case JV_DICT:
        if (item->kind == JV_LIST || item->kind == JV_DICT)
            jfail(A, "unhashable type: '%s'", jv_type_name(item));
        return jv_dict_get(container, item) != NULL;
    default:
        jfail(A, "argument of type '%s' is not iterable", jv_type_name(container));
    }
}

/* -------------------------------------------------------------------------- attribute access */

static jv *method(struct jbctx *c, jv *self, const char *name)
{
    jv *m = jarena_alloc(A, sizeof *m);
    m->kind = JV_METHOD;
    m->u.method.self = self;
    m->u.method.name = name;
    return m;
}

static const char *const str_methods[] = {
    "strip",        "lstrip",     "rstrip",  "split",      "rsplit",     "splitlines", "startswith",  "endswith",
    "replace",      "lower",      "upper",   "title",      "capitalize", "swapcase",   "casefold",    "find",
    "rfind",        "index",      "rindex",  "count",      "join",       "format",     "isdigit",     "isalpha",
    "isalnum",      "isspace",    "isupper", "islower",    "istitle",    "isnumeric",  "isdecimal",   "isidentifier",
    "isascii",      "center",     "ljust",   "rjust",      "zfill",      "partition",  "rpartition",  "removeprefix",
    "removesuffix", "expandtabs", "encode",  "format_map", "maketrans",  "translate",  "isprintable", NULL};
static const char *const dict_methods[] = {"items", "keys", "values", "get", "copy", NULL};
static const char *const dict_unsafe[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};
static const char *const list_methods[] = {"pop", "index", "count", "copy", NULL};
static const char *const list_unsafe[] = {"append", "reverse", "insert", "sort", "extend", "remove", "clear", NULL};
static const char *const tuple_methods[] = {"index", "count", NULL};

static const char *in_list(const char *const *l, const char *s, size_t n)
{
    for (; *l; l++)
        if (strlen(*l) == n && !memcmp(*l, s, n))
            return *l;
    return NULL;
}

static jv *unsafe(struct jbctx *c, const char *attr, const char *type)
{
    char *m = jarena_alloc(A, 160);
    snprintf(m, 160, "access to attribute '%s' of '%s' object is unsafe.", attr, type);
    return jv_undef(A, m);
}

static jv *loop_attr(struct jbctx *c, jv *obj, const char *name, size_t n)
{
    struct jloop *L = obj->u.loop;
#define IS(s) (n == sizeof(s) - 1 && !memcmp(name, s, n))
    if (IS("index"))
        return jv_int(A, (int64_t)L->i + 1);
    if (IS("index0"))
        return jv_int(A, (int64_t)L->i);
    if (IS("revindex"))
        return jv_int(A, (int64_t)(L->n - L->i));
    if (IS("revindex0"))
        return jv_int(A, (int64_t)(L->n - L->i - 1));
    if (IS("first"))
        return jv_bool(L->i == 0);
    if (IS("last"))
        return jv_bool(L->i + 1 == L->n);
    if (IS("length"))
        return jv_int(A, (int64_t)L->n);
    if (IS("depth"))
        return jv_int(A, L->depth);
    if (IS("depth0"))
        return jv_int(A, L->depth - 1);
    if (IS("previtem"))
        return L->i > 0 ? L->items[L->i - 1] : jv_undef(A, "there is no previous item");
    if (IS("nextitem"))
        return L->i + 1 < L->n ? L->items[L->i + 1] : jv_undef(A, "there is no next item");
    if (IS("cycle"))
        return method(c, obj, "cycle");
    if (IS("changed"))
        return method(c, obj, "changed");
#undef IS
    return undef_attr(c, obj, name, n);
}

jv *jb_getattr(struct jbctx *c, jv *obj, const char *name, size_t n)
{
    const char *m;
    if (n && name[0] == '_') {
        jb_check_undef(c, obj);
        char *t = jarena_strndup(A, name, n);
        return unsafe(c, t, jv_type_name(obj));
    }
    switch (obj->kind) {
    case JV_UNDEF:
        jb_check_undef(c, obj);
        break;
    case JV_DICT: {
        if ((m = in_list(dict_methods, name, n)))
            return method(c, obj, m);
        if ((m = in_list(dict_unsafe, name, n)))
            return unsafe(c, m, "dict");
        jv *v = jv_dict_getz(obj, name, n);
        if (v)
            return v;
        break;
    }
    case JV_STR:
        if ((m = in_list(str_methods, name, n)))
            return method(c, obj, m);
        break;
    case JV_LIST:
        if (obj->markup == 1)
            break;
        if ((m = in_list(list_methods, name, n)))
            return method(c, obj, m);
        if ((m = in_list(list_unsafe, name, n)))
            return unsafe(c, m, "list");
        break;
    case JV_TUPLE:
        if ((m = in_list(tuple_methods, name, n)))
            return method(c, obj, m);
        break;
    case JV_NS: {
        jv *v = jv_dict_getz(obj, name, n);
        if (v)
            return v;
        break;
    }
    case JV_LOOP:
        return loop_attr(c, obj, name, n);
    case JV_CYCLER:
        if (n == 4 && !memcmp(name, "next", 4))
            return method(c, obj, "next");
        if (n == 5 && !memcmp(name, "reset", 5))
            return method(c, obj, "reset");
        if (n == 7 && !memcmp(name, "current", 7) && !obj->u.cyc.joiner)
            return obj->u.cyc.items[obj->u.cyc.pos];
        break;
    case JV_INT:
    case JV_FLOAT:
    case JV_BOOL:
        if ((n == 4 && !memcmp(name, "real", 4)) || (n == 9 && !memcmp(name, "numerator", 9)))
            return obj;
        if (n == 4 && !memcmp(name, "imag", 4))
            return obj->kind == JV_FLOAT ? jv_float(A, 0.0) : jv_int(A, 0);
        break;
    default:
        break;
    }
    return undef_attr(c, obj, name, n);
}

static int64_t norm_index(int64_t i, size_t n, int *ok)
{
    if (i < 0)
        i += (int64_t)n;
    *ok = i >= 0 && (uint64_t)i < n;
    return i;
}

jv *jb_getitem(struct jbctx *c, jv *obj, jv *key)
{
    jb_check_undef(c, obj);
    if (obj->kind == JV_DICT) {
        if (key->kind == JV_LIST || key->kind == JV_DICT)
            return undef_elem(c, obj, key);
        jv *v = jv_dict_get(obj, key);
        if (v)
            return v;
    } else if (jb_is_seq(obj) && jb_is_int(key)) {
        int ok;
        int64_t i = norm_index(iv(key), obj->u.list.n, &ok);
        if (ok)
            return obj->u.list.items[i];
    } else if (obj->kind == JV_STR && jb_is_int(key)) {
        size_t len = ju_len(obj->u.str.s, obj->u.str.n);
        int ok;
        int64_t i = norm_index(iv(key), len, &ok);
        if (ok) {
            size_t o = ju_off(obj->u.str.s, obj->u.str.n, (size_t)i);
            uint32_t cp;
            size_t l = ju_dec(obj->u.str.s + o, obj->u.str.n - o, &cp);
            return jv_str_nocopy(A, obj->u.str.s + o, l);
        }
    }
    if (key->kind == JV_STR) {
        jv *r = jb_getattr(c, obj, key->u.str.s, key->u.str.n);
        return r;
    }
    return undef_elem(c, obj, key);
}

static void slice_bounds(struct jbctx *c, size_t len, jv *lo, jv *hi, jv *st, int64_t *start, int64_t *stop,
                         int64_t *stepv)
{
    jv *b[3] = {lo, hi, st};
    for (int k = 0; k < 3; k++)
        if (b[k] && b[k]->kind != JV_NONE && !jb_is_int(b[k])) {
            jb_check_undef(c, b[k]);
            jfail(A, "slice indices must be integers or None or have an __index__ method");
        }
    int64_t s = st && st->kind != JV_NONE ? iv(st) : 1;
    if (s == 0)
        jfail(A, "slice step cannot be zero");
    int64_t n = (int64_t)len;
    int64_t a, e;
    if (s > 0) {
        a = lo && lo->kind != JV_NONE ? iv(lo) : 0;
        e = hi && hi->kind != JV_NONE ? iv(hi) : n;
        if (a < 0)
            a = a + n < 0 ? 0 : a + n;
        if (a > n)
            a = n;
        if (e < 0)
            e = e + n < 0 ? 0 : e + n;
        if (e > n)
            e = n;
    } else {
        a = lo && lo->kind != JV_NONE ? iv(lo) : n - 1;
        e = hi && hi->kind != JV_NONE ? iv(hi) : -1 - n;
        if (a < 0)
            a = a + n < 0 ? -1 : a + n;
        if (a >= n)
            a = n - 1;
        if (e < 0)
            e = e + n < 0 ? -1 : e + n;
        if (e >= n)
            e = n - 1;
    }
    *start = a;
    *stop = e;
    *stepv = s;
}

jv *jb_slice(struct jbctx *c, jv *obj, jv *lo, jv *hi, jv *st)
{
    jb_check_undef(c, obj);
    if (obj->kind == JV_STR) {
        size_t len = ju_len(obj->u.str.s, obj->u.str.n);
        int64_t a, e, s;
        slice_bounds(c, len, lo, hi, st, &a, &e, &s);
        if (s == 1) {
            if (e <= a)
                return jv_str_nocopy(A, "", 0);
            size_t oa = ju_off(obj->u.str.s, obj->u.str.n, (size_t)a);
            size_t oe = ju_off(obj->u.str.s, obj->u.str.n, (size_t)e);
            return jv_str_nocopy(A, obj->u.str.s + oa, oe - oa);
        }
        size_t cnt;
        jv **chars = jb_iter(c, obj, &cnt);
        struct jbuf b = {0};
        for (int64_t i = a; s > 0 ? i < e : i > e; i += s)
            jbuf_put(A, &b, chars[i]->u.str.s, chars[i]->u.str.n);
        return new_str(c, &b);
    }
    if (jb_is_seq(obj)) {
        int64_t a, e, s;
        slice_bounds(c, obj->u.list.n, lo, hi, st, &a, &e, &s);
        jv *r = obj->kind == JV_TUPLE ? jv_tuple(A, 0) : jv_list(A, 0);
        for (int64_t i = a; s > 0 ? i < e : i > e; i += s)
            jv_list_push(A, r, obj->u.list.items[i]);
        return r;
    }
    jfail(A, "unsupported: slicing a %s", jv_object_type_repr(obj));
}

/* ---------------------------------------------------------------------------- calls (methods) */

jv *jb_items(struct jbctx *c, jv *d)
{
    jv *r = jv_list(A, d->u.dict.n);
    for (size_t i = 0; i < d->u.dict.n; i++) {
        jv *t = jv_tuple(A, 2);
        t->u.list.items[0] = d->u.dict.items[i].k;
        t->u.list.items[1] = d->u.dict.items[i].v;
        jv_list_push(A, r, t);
    }
    return r;
}

static jv *range_fn(struct jbctx *c, jv **args, size_t n)
{
    if (n < 1 || n > 3)
        jfail(A, "range expected at least 1 argument, got %zu", n);
    for (size_t i = 0; i < n; i++)
        if (!jb_is_int(args[i])) {
            jb_check_undef(c, args[i]);
            jfail(A, "'%s' object cannot be interpreted as an integer", jv_type_name(args[i]));
        }
    int64_t lo = n > 1 ? iv(args[0]) : 0, hi = n > 1 ? iv(args[1]) : iv(args[0]), st = n > 2 ? iv(args[2]) : 1;
    if (st == 0)
        jfail(A, "range() arg 3 must not be zero");
    long double cnt = st > 0 ? (hi > lo ? ((long double)hi - lo + st - 1) / st : 0)
                             : (lo > hi ? ((long double)lo - hi - st - 1) / -st : 0);
    if (cnt > 100000)
        jfail(A, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    size_t k = (size_t)cnt;
    jv *r = jv_list(A, k);
    for (size_t i = 0; i < k; i++)
        jv_list_push(A, r, jv_int(A, lo + (int64_t)i * st));
    r->markup = 2; /* a range object: iterable and sized, not printable as a list */
    step(c, k);
    return r;
}

jv *jb_call(struct jbctx *c, jv *fn, jv **args, size_t n, const char **kwn, jv **kwv, size_t nk)
{
    if (fn->kind == JV_UNDEF)
        jb_check_undef(c, fn);
    if (fn->kind == JV_FUNC) {
        switch (fn->u.func) {
        case JF_RANGE:
            if (nk)
                jfail(A, "range() takes no keyword arguments");
            return range_fn(c, args, n);
        case JF_NAMESPACE:
        case JF_DICT: {
            jv *d = jv_dict(A, 0);
            if (n > 1)
                jfail(A, "%s expected at most 1 argument, got %zu", fn->u.func == JF_DICT ? "dict" : "namespace", n);
            if (n == 1) {
                if (args[0]->kind == JV_DICT || args[0]->kind == JV_NS) {
                    for (size_t i = 0; i < args[0]->u.dict.n; i++)
                        jv_dict_set(A, d, args[0]->u.dict.items[i].k, args[0]->u.dict.items[i].v);
                } else {
                    size_t m;
                    jv **it = jb_iter(c, args[0], &m);
                    for (size_t i = 0; i < m; i++) {
                        if (!jb_is_seq(it[i]) || it[i]->u.list.n != 2)
                            jfail(A, "dictionary update sequence element #%zu has wrong length", i);
                        jv_dict_set(A, d, it[i]->u.list.items[0], it[i]->u.list.items[1]);
                    }
                }
            }
            for (size_t i = 0; i < nk; i++)
                jv_dict_set(A, d, jv_strz(A, kwn[i]), kwv[i]);
            if (fn->u.func == JF_NAMESPACE)
                d->kind = JV_NS;
            return d;
        }
        case JF_RAISE: {
            jv *m = n ? jv_to_str(A, args[0]) : jv_str_nocopy(A, "", 0);
            jfail(A, "%.*s", (int)m->u.str.n, m->u.str.s);
        }
        case JF_STRFTIME: {
            if (n != 1 || args[0]->kind != JV_STR)
                jfail(A, "strftime_now() argument must be str");
            struct tm tm;
            time_t now = c->now;
            localtime_r(&now, &tm);
            char fmt[512], out[1024];
            if (args[0]->u.str.n >= sizeof fmt || memchr(args[0]->u.str.s, 0, args[0]->u.str.n))
                jfail(A, "unsupported: strftime format");
            memcpy(fmt, args[0]->u.str.s, args[0]->u.str.n);
            fmt[args[0]->u.str.n] = 0;
            size_t w = strftime(out, sizeof out, fmt, &tm);
            if (!w && fmt[0])
                jfail(A, "unsupported: strftime format");
            return jv_str(A, out, w);
        }
        case JF_CYCLER:
        case JF_JOINER: {
            jv *y = jarena_alloc(A, sizeof *y);
            y->kind = JV_CYCLER;
            y->u.cyc.joiner = fn->u.func == JF_JOINER;
            if (y->u.cyc.joiner) {
                y->u.cyc.items = jarena_alloc(A, sizeof(jv *));
                jv *sep = jb_argn(args, n, 0, kwn, kwv, nk, "sep");
                y->u.cyc.items[0] = sep ? sep : jv_strz(A, ", ");
                y->u.cyc.n = 1;
            } else {
                if (!n)
                    jfail(A, "at least one item has to be provided");
                y->u.cyc.items = args;
                y->u.cyc.n = n;
            }
            return y;
        }
        }
    }
    if (fn->kind == JV_CYCLER) { /* joiner() call */
        if (!fn->u.cyc.joiner)
            jfail(A, "'Cycler' object is not callable");
        if (!fn->u.cyc.pos) {
            fn->u.cyc.pos = 1;
            return jv_str_nocopy(A, "", 0);
        }
        return fn->u.cyc.items[0];
    }
    if (fn->kind != JV_METHOD)
        jfail(A, "'%s' object is not callable", jv_type_name(fn));
    jv *self = fn->u.method.self;
    const char *m = fn->u.method.name;
    if (self->kind == JV_STR)
        return jb_str_method(c, self, m, args, n, kwn, kwv, nk);
    if (nk)
        jfail(A, "%s() takes no keyword arguments", m);
    if (self->kind == JV_DICT) {
        if (!strcmp(m, "items")) {
            jv *r = jb_items(c, self);
            r->markup = 2;
            return r;
        }
        if (!strcmp(m, "keys") || !strcmp(m, "values")) {
            jv *r = jv_list(A, self->u.dict.n);
            for (size_t i = 0; i < self->u.dict.n; i++)
                jv_list_push(A, r, m[0] == 'k' ? self->u.dict.items[i].k : self->u.dict.items[i].v);
            r->markup = 2;
            return r;
        }
        if (!strcmp(m, "get")) {
            jb_check_args(c, m, n, 1, 2);
            if (args[0]->kind == JV_LIST || args[0]->kind == JV_DICT)
                jfail(A, "unhashable type: '%s'", jv_type_name(args[0]));
            jv *v = jv_dict_get(self, args[0]);
            return v ? v : n > 1 ? args[1] : jv_none();
        }
        if (!strcmp(m, "copy")) {
            jv *d = jv_dict(A, self->u.dict.n);
            for (size_t i = 0; i < self->u.dict.n; i++)
                jv_dict_set(A, d, self->u.dict.items[i].k, self->u.dict.items[i].v);
            return d;
        }
    }
    if (jb_is_seq(self)) {
        if (!strcmp(m, "pop")) {
            jb_check_args(c, m, n, 0, 1);
            if (!self->u.list.n)
                jfail(A, "pop from empty list");
            int64_t i = n ? iv(args[0]) : -1;
            int ok;
            i = norm_index(i, self->u.list.n, &ok);
            if (!ok)
                jfail(A, "pop index out of range");
            jv *r = self->u.list.items[i];
            memmove(self->u.list.items + i, self->u.list.items + i + 1,
                    (self->u.list.n - (size_t)i - 1) * sizeof(jv *));
            self->u.list.n--;
            return r;
        }
        if (!strcmp(m, "index") || !strcmp(m, "count")) {
            jb_check_args(c, m, n, 1, 1);
            int64_t k = 0;
            for (size_t i = 0; i < self->u.list.n; i++)
                if (jv_eq(self->u.list.items[i], args[0])) {
                    if (m[0] == 'i')
                        return jv_int(A, (int64_t)i);
                    k++;
                }
            if (m[0] == 'i') {
                struct jbuf b = {0};
                jv_write(A, &b, args[0], 1, 0);
                jfail(A, "%s is not in %s", b.p ? b.p : "", self->kind == JV_TUPLE ? "tuple" : "list");
            }
            return jv_int(A, k);
        }
        if (!strcmp(m, "copy"))
            return jb_slice(c, self, NULL, NULL, NULL);
    }
    if (self->kind == JV_LOOP) {
        if (!strcmp(m, "cycle")) {
            if (!n)
                jfail(A, "no items for cycling given");
            return args[self->u.loop->i % n];
        }
        if (!strcmp(m, "changed")) {
            jv *t = jv_tuple(A, n);
            for (size_t i = 0; i < n; i++)
                t->u.list.items[i] = args[i];
            struct jloop *L = self->u.loop;
            if (L->last_changed && jv_eq(L->last_changed, t))
                return jv_bool(0);
            L->last_changed = t;
            return jv_bool(1);
        }
        jfail(A, "unsupported: loop.%s()", m);
    }
    if (self->kind == JV_CYCLER) {
        if (!strcmp(m, "next")) {
            jv *r = self->u.cyc.items[self->u.cyc.pos];
            self->u.cyc.pos = (self->u.cyc.pos + 1) % self->u.cyc.n;
            return r;
        }
        self->u.cyc.pos = 0;
        return jv_none();
    }
    jfail(A, "unsupported: calling %s.%s()", jv_type_name(self), m);
}

/* --------------------------------------------------------------------------------- globals */

int jb_global(const char *name)
{
    static const char *const g[] = {"range",        "namespace", "dict",  "raise_exception",
                                    "strftime_now", "cycler",    "joiner"};
    for (int i = 0; i < (int)(sizeof g / sizeof *g); i++)
        if (!strcmp(g[i], name))
            return i;
    return -1;
}

/* --------------------------------------------------------------------------------------- tests */

static const char *const test_names[] = {
    "boolean", "callable",  "defined", "divisibleby", "eq",     "equalto", "escaped",  "even",     "false",    "filter",
    "float",   "ge",        "gt",      "greaterthan", "in",     "integer", "iterable", "le",       "lessthan", "lower",
    "lt",      "mapping",   "ne",      "none",        "number", "odd",     "sameas",   "sequence", "string",   "test",
    "true",    "undefined", "upper",   "==",          "!=",     "<",       "<=",       ">",        ">=",       NULL};

static const char *const filter_names[] = {
    "abs",    "attr",       "batch",       "capitalize", "center",   "count",
    "d",      "default",    "dictsort",    "e",          "escape",   "filesizeformat",
    "first",  "float",      "forceescape", "format",     "groupby",  "indent",
    "int",    "items",      "join",        "last",       "length",   "list",
    "lower",  "map",        "max",         "min",        "pprint",   "random",
    "reject", "rejectattr", "replace",     "reverse",    "round",    "safe",
    "select", "selectattr", "slice",       "sort",       "string",   "striptags",
    "sum",    "title",      "tojson",      "trim",       "truncate", "unique",
    "upper",  "urlencode",  "urlize",      "wordcount",  "wordwrap", "xmlattr",
    NULL};

int jb_has_test(const char *name)
{
    return in_list(test_names, name, strlen(name)) != NULL;
}
int jb_has_filter(const char *name)
{
    return in_list(filter_names, name, strlen(name)) != NULL;
}

static int cmp_test(struct jbctx *c, jv *x, jv *y, int op)
{
    return jv_cmp(A, x, y, op);
}

int jb_test(struct jbctx *c, const char *t, jv *x, jv **args, size_t n)
{
    int k = x->kind;
#define T(s) (!strcmp(t, s))
    size_t need = T("divisibleby") || T("eq") || T("equalto") || T("==") || T("ne") || T("!=") || T("lt") ||
                          T("lessthan") || T("<") || T("le") || T("<=") || T("gt") || T("greaterthan") || T(">") ||
                          T("ge") || T(">=") || T("in") || T("sameas")
                      ? 1
                      : 0;
    if (n != need)
        jfail(A, "test '%s' takes %zu argument%s (%zu given)", t, need, need == 1 ? "" : "s", n);
    if (T("defined"))
        return k != JV_UNDEF;
    if (T("undefined"))
        return k == JV_UNDEF;
    if (T("none"))
        return k == JV_NONE;
    if (T("boolean"))
        return k == JV_BOOL;
    if (T("true"))
        return k == JV_BOOL && x->u.b;
    if (T("false"))
        return k == JV_BOOL && !x->u.b;
    if (T("integer"))
        return k == JV_INT;
    if (T("float"))
        return k == JV_FLOAT;
    if (T("number"))
        return k == JV_INT || k == JV_FLOAT || k == JV_BOOL;
    if (T("string"))
        return k == JV_STR;
    if (T("mapping"))
        return k == JV_DICT;
    if (T("iterable"))
        return k == JV_LIST || k == JV_TUPLE || k == JV_STR || k == JV_DICT || k == JV_UNDEF || k == JV_LOOP;
    if (T("sequence"))
        return (k == JV_LIST && x->markup != 1) || k == JV_TUPLE || k == JV_STR || k == JV_DICT || k == JV_UNDEF;
    if (T("callable"))
        return k == JV_MACRO || k == JV_METHOD || k == JV_FUNC || k == JV_UNDEF || (k == JV_CYCLER && x->u.cyc.joiner);
    if (T("escaped"))
        return k == JV_STR && x->markup;
    if (T("even") || T("odd") || T("divisibleby")) {
        jv *m = jb_binop(c, OP_MOD, x, need ? args[0] : jv_int(A, 2));
        int zero = m->kind == JV_FLOAT ? m->u.f == 0 : iv(m) == 0;
        return T("odd") ? !zero : zero;
    }
    if (T("eq") || T("equalto") || T("=="))
        return jv_eq(x, args[0]);
    if (T("ne") || T("!="))
        return !jv_eq(x, args[0]);
    if (T("lt") || T("lessthan") || T("<"))
        return cmp_test(c, x, args[0], '<');
    if (T("le") || T("<="))
        return cmp_test(c, x, args[0], 'l');
    if (T("gt") || T("greaterthan") || T(">"))
        return cmp_test(c, x, args[0], '>');
    if (T("ge") || T(">="))
        return cmp_test(c, x, args[0], 'g');
    if (T("in"))
        return jb_contains(c, args[0], x);
    if (T("sameas")) {
        jv *y = args[0];
        if (k == JV_NONE || k == JV_BOOL || y->kind == JV_NONE || y->kind == JV_BOOL)
            return k == y->kind && (k != JV_BOOL || x->u.b == y->u.b);
        if (k == JV_INT && y->kind == JV_INT && x->u.i >= -5 && x->u.i <= 256) /* CPython's cached ints */
            return x->u.i == y->u.i;
        return x == y;
    }
    if (T("lower") || T("upper")) {
        jv *s = jv_to_str(A, x);
        return jb_str_pred(c, s, T("lower") ? "islower" : "isupper");
    }
    if (T("filter"))
        return k == JV_STR && jb_has_filter(jarena_strndup(A, x->u.str.s, x->u.str.n));
    if (T("test"))
        return k == JV_STR && jb_has_test(jarena_strndup(A, x->u.str.s, x->u.str.n));
#undef T
    jfail(A, "unsupported test '%s'", t);
}
