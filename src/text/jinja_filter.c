/* jinja_filter.c - jinja2's built-in filters (3.1 semantics) plus transformers' tojson; filters
 * jinja2 has but this interpreter does not do exactly (groupby, truncate, wordwrap, pprint, random,
 * striptags, xmlattr, urlize, urlencode, filesizeformat) raise "unsupported filter". */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "text/jinja_internal.h"

typedef struct jv jv;
#define A (c->a)

struct fargs {
    jv **args;
    size_t n;
    const char **kwn;
    jv **kwv;
    size_t nk;
    int *used;
    const char *filter;
};

/* parameter i (after the input) by position or keyword; NULL when absent */
static jv *arg(struct jbctx *c, struct fargs *f, size_t i, const char *kw)
{
    jv *r = NULL;
    if (i < f->n)
        r = f->args[i];
    for (size_t k = 0; k < f->nk; k++)
        if (kw && !strcmp(f->kwn[k], kw)) {
            if (r)
                jfail(A, "%s() got multiple values for argument '%s'", f->filter, kw);
            r = f->kwv[k];
            f->used[k] = 1;
        }
    return r;
}

static void done(struct jbctx *c, struct fargs *f, size_t max_pos)
{
    if (f->n > max_pos)
        jfail(A, "%s() takes %zu positional argument%s but %zu were given", f->filter, max_pos + 1, max_pos ? "s" : "",
              f->n + 1);
    for (size_t k = 0; k < f->nk; k++)
        if (!f->used[k])
            jfail(A, "%s() got an unexpected keyword argument '%s'", f->filter, f->kwn[k]);
}

static jv *new_str(struct jbctx *c, struct jbuf *b)
{
    return jv_str_nocopy(A, b->p ? b->p : "", b->n);
}
static int64_t iv(const jv *v)
{
    return v->kind == JV_INT ? v->u.i : v->u.b;
}

static int64_t want_int(struct jbctx *c, const jv *v, const char *what)
{
    if (!jb_is_int(v)) {
        jb_check_undef(c, v);
        jfail(A, "%s: '%s' object cannot be interpreted as an integer", what, jv_type_name(v));
    }
    return iv(v);
}

static jv *gen(jv *l)
{
    l->markup = 1;
    return l;
}

static jv *list_of(struct jbctx *c, jv *x)
{
    size_t n;
    jv **it = jb_iter(c, x, &n);
    jv *r = jv_list(A, n);
    if (n)
        memcpy(r->u.list.items, it, n * sizeof(jv *));
    r->u.list.n = n;
    return r;
}

/* make_attrgetter: "a.b.0" through getitem */
static jv *attr_get(struct jbctx *c, jv *item, const jv *attr, jv *dflt)
{
    if (attr->kind == JV_INT)
        return jb_getitem(c, item, (jv *)attr);
    jb_want_str(c, attr, "attribute");
    const char *s = attr->u.str.s;
    size_t n = attr->u.str.n, st = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        const char *p = s + st;
        size_t l = i - st;
        int digits = l > 0;
        for (size_t k = 0; k < l; k++)
            digits &= p[k] >= '0' && p[k] <= '9';
        jv *key;
        if (digits) {
            int64_t v = 0;
            for (size_t k = 0; k < l && k < 18; k++)
                v = v * 10 + (p[k] - '0');
            key = jv_int(A, v);
        } else
            key = jv_str_nocopy(A, p, l);
        item = jb_getitem(c, item, key);
        if (dflt && item->kind == JV_UNDEF)
            item = dflt;
        st = i + 1;
    }
    return item;
}

/* sort keys: strings lowered when not case sensitive */
static jv *sort_key(struct jbctx *c, jv *x, int case_sensitive)
{
    if (!case_sensitive && x->kind == JV_STR)
        return jb_case_map(c, x, 'l');
    return x;
}

struct kitem {
    jv *key, *val;
};

static void merge_sort(struct jbctx *c, struct kitem *v, struct kitem *tmp, size_t n, int reverse)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    merge_sort(c, v, tmp, h, reverse);
    merge_sort(c, v + h, tmp, n - h, reverse);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        /* stable: take the right one only when strictly before (reverse: strictly after) */
        int o = reverse ? jv_order(A, v[i].key, v[j].key, 0) < 0 : jv_order(A, v[j].key, v[i].key, 0) < 0;
        tmp[k++] = o ? v[j++] : v[i++];
    }
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

static void sort_items(struct jbctx *c, struct kitem *v, size_t n, int reverse)
{
    struct kitem *tmp = jarena_alloc(A, (n + 1) * sizeof *tmp);
    merge_sort(c, v, tmp, n, reverse);
}

static jv *do_tojson(struct jbctx *c, jv *x, struct fargs *f)
{
    /* transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
    jv *ea = arg(c, f, 0, "ensure_ascii"), *ind = arg(c, f, 1, "indent"), *sep = arg(c, f, 2, "separators"),
       *sk = arg(c, f, 3, "sort_keys");
    done(c, f, 4);
    struct jdumps o = {
        .ensure_ascii = ea && jv_truthy(ea), .sort_keys = sk && jv_truthy(sk), .item_sep = ", ", .key_sep = ": "};
    if (ind && ind->kind != JV_NONE) {
        if (ind->kind == JV_STR)
            o.indent = jarena_strndup(A, ind->u.str.s, ind->u.str.n);
        else if (jb_is_int(ind)) {
            int64_t k = iv(ind);
            if (k > 1000)
                jfail(A, "unsupported: tojson indent %lld", (long long)k);
            char *s = jarena_alloc(A, (size_t)(k > 0 ? k : 0) + 1);
            for (int64_t i = 0; i < k; i++)
                s[i] = ' ';
            o.indent = s;
        } else
            jfail(A, "unsupported: tojson indent of type %s", jv_type_name(ind));
        o.item_sep = ",";
    }
    if (sep && sep->kind != JV_NONE) {
        if (!jb_is_seq(sep) || sep->u.list.n != 2 || sep->u.list.items[0]->kind != JV_STR ||
            sep->u.list.items[1]->kind != JV_STR)
            jfail(A, "unsupported: tojson separators must be two strings");
        o.item_sep = jarena_strndup(A, sep->u.list.items[0]->u.str.s, sep->u.list.items[0]->u.str.n);
        o.key_sep = jarena_strndup(A, sep->u.list.items[1]->u.str.s, sep->u.list.items[1]->u.str.n);
    }
    struct jbuf b = {0};
    jv_dumps(A, &b, x, &o, 0);
    return new_str(c, &b);
}

static jv *do_indent(struct jbctx *c, jv *x, struct fargs *f)
{
    jv *w = arg(c, f, 0, "width"), *first = arg(c, f, 1, "first"), *blank = arg(c, f, 2, "blank");
    done(c, f, 3);
    jv *s = jv_to_str(A, x);
    struct jbuf ind = {0};
    if (w && w->kind == JV_STR)
        jbuf_put(A, &ind, w->u.str.s, w->u.str.n);
    else {
        int64_t k = w ? want_int(c, w, "indent") : 4;
        if (k > 1 << 20)
            jfail(A, "unsupported: indent width %lld", (long long)k);
        for (int64_t i = 0; i < k; i++)
            jbuf_put(A, &ind, " ", 1);
    }
    /* s += "\n"; lines = s.splitlines() */
    struct jbuf t = {0};
    jbuf_put(A, &t, s->u.str.s, s->u.str.n);
    jbuf_put(A, &t, "\n", 1);
    jv *ts = new_str(c, &t);
    jv *m = jb_getattr(c, ts, "splitlines", 10);
    jv *lines = jb_call(c, m, NULL, 0, NULL, NULL, 0);
    struct jbuf b = {0};
    size_t n = lines->u.list.n;
    if (blank && jv_truthy(blank)) {
        for (size_t i = 0; i < n; i++) {
            if (i) {
                jbuf_put(A, &b, "\n", 1);
                jbuf_put(A, &b, ind.p, ind.n);
            }
            jbuf_put(A, &b, lines->u.list.items[i]->u.str.s, lines->u.list.items[i]->u.str.n);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            jv *l = lines->u.list.items[i];
            if (i) {
                jbuf_put(A, &b, "\n", 1);
                if (l->u.str.n)
                    jbuf_put(A, &b, ind.p, ind.n);
            }
            jbuf_put(A, &b, l->u.str.s, l->u.str.n);
        }
    }
    if (first && jv_truthy(first)) {
        struct jbuf r = {0};
        jbuf_put(A, &r, ind.p, ind.n);
        jbuf_put(A, &r, b.p, b.n);
        return new_str(c, &r);
    }
    return new_str(c, &b);
}

/* int(str) as Python parses it; 0 = not a valid literal */
static int parse_int(const char *s, size_t n, int64_t base, int64_t *out)
{
    size_t i = ju_lstrip_ws(s, n);
    n = i + ju_rstrip_ws(s + i, n - i);
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        neg = s[i++] == '-';
    if (base == 0 || base == 16 || base == 8 || base == 2) {
        if (i + 1 < n && s[i] == '0' && strchr("xXoObB", s[i + 1])) {
            int b = strchr("xX", s[i + 1]) ? 16 : strchr("oO", s[i + 1]) ? 8 : 2;
            if (base && base != b)
                return 0;
            base = b;
            i += 2;
            if (i < n && s[i] == '_')
                i++;
        } else if (!base)
            base = 10;
    }
    if (i >= n)
        return 0;
    uint64_t v = 0;
    int prev_us = 1;
    for (; i < n; i++) {
        if (s[i] == '_') {
            if (prev_us)
                return 0;
            prev_us = 1;
            continue;
        }
        int d = s[i] >= '0' && s[i] <= '9'                 ? s[i] - '0'
                : (s[i] | 32) >= 'a' && (s[i] | 32) <= 'z' ? (s[i] | 32) - 'a' + 10
                                                           : 99;
        if (d >= base)
            return 0;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return -1;
        v = v * (uint64_t)base + (uint64_t)d;
        prev_us = 0;
    }
    if (prev_us)
        return 0;
    if (v > (uint64_t)INT64_MAX + (uint64_t)neg)
        return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

static int parse_float(const char *s, size_t n, double *out)
{
    size_t i = ju_lstrip_ws(s, n);
    n = i + ju_rstrip_ws(s + i, n - i);
    if (i >= n || n - i > 300)
        return 0;
    char buf[320];
    size_t k = 0;
    for (size_t j = i; j < n; j++) {
        if (s[j] == '_') {
            if (j == i || j + 1 >= n || !(s[j - 1] >= '0' && s[j - 1] <= '9') || !(s[j + 1] >= '0' && s[j + 1] <= '9'))
                return 0;
            continue;
        }
        buf[k++] = s[j];
    }
    buf[k] = 0;
    const char *p = buf + (buf[0] == '+' || buf[0] == '-');
    if (!strcasecmp(p, "inf") || !strcasecmp(p, "infinity") || !strcasecmp(p, "nan")) {
        double v = tolower((unsigned char)p[0]) == 'n' ? NAN : INFINITY;
        *out = buf[0] == '-' ? -v : v;
        return 1;
    }
    for (const char *q = p; *q; q++)
        if (!strchr("0123456789.eE+-", *q))
            return 0;
    char *e;
    *out = strtod(buf, &e);
    return *e == 0 && e != buf;
}

static jv *do_int(struct jbctx *c, jv *x, struct fargs *f)
{
    jv *d = arg(c, f, 0, "default"), *b = arg(c, f, 1, "base");
    done(c, f, 2);
    jv *dflt = d ? d : jv_int(A, 0);
    int64_t base = b ? want_int(c, b, "int") : 10;
    if (x->kind == JV_STR) {
        int64_t v;
        int r = parse_int(x->u.str.s, x->u.str.n, base, &v);
        if (r == 1)
            return jv_int(A, v);
        if (r < 0)
            jfail(A, "unsupported: integer beyond 64 bits");
        double fl;
        if (parse_float(x->u.str.s, x->u.str.n, &fl)) {
            if (fl != fl || isinf(fl))
                return dflt;
            if (fabs(fl) >= 9.2e18)
                jfail(A, "unsupported: integer beyond 64 bits");
            return jv_int(A, (int64_t)fl);
        }
        return dflt;
    }
    if (x->kind == JV_INT || x->kind == JV_BOOL)
        return jv_int(A, iv(x));
    if (x->kind == JV_FLOAT) {
        if (x->u.f != x->u.f || isinf(x->u.f))
            return dflt;
        if (fabs(x->u.f) >= 9.2e18)
            jfail(A, "unsupported: integer beyond 64 bits");
        return jv_int(A, (int64_t)x->u.f);
    }
    return dflt;
}

static jv *do_float(struct jbctx *c, jv *x, struct fargs *f)
{
    jv *d = arg(c, f, 0, "default");
    done(c, f, 1);
    if (x->kind == JV_FLOAT)
        return x;
    if (x->kind == JV_INT || x->kind == JV_BOOL)
        return jv_float(A, (double)iv(x));
    double v;
    if (x->kind == JV_STR && parse_float(x->u.str.s, x->u.str.n, &v))
        return jv_float(A, v);
    return d ? d : jv_float(A, 0.0);
}

static jv *do_round(struct jbctx *c, jv *x, struct fargs *f)
{
    jv *p = arg(c, f, 0, "precision"), *m = arg(c, f, 1, "method");
    done(c, f, 2);
    int64_t prec = p ? want_int(c, p, "round") : 0;
    const char *meth = "common";
    if (m) {
        jb_want_str(c, m, "method");
        meth = jarena_strndup(A, m->u.str.s, m->u.str.n);
    }
    if (strcmp(meth, "common") && strcmp(meth, "ceil") && strcmp(meth, "floor"))
        jfail(A, "method must be common, ceil or floor");
    if (!jb_is_num(x)) {
        jb_check_undef(c, x);
        jfail(A, "type %s doesn't define __round__ method", jv_type_name(x));
    }
    if (x->kind != JV_FLOAT && !strcmp(meth, "common")) {
        if (prec >= 0)
            return jv_int(A, iv(x));
        jfail(A, "unsupported: round of an int to negative precision");
    }
    double v = x->kind == JV_FLOAT ? x->u.f : (double)iv(x);
    if (prec < -300 || prec > 300)
        jfail(A, "unsupported: round precision %lld", (long long)prec);
    if (strcmp(meth, "common")) {
        double sc = pow(10.0, (double)prec);
        double r = (meth[0] == 'c' ? ceil(v * sc) : floor(v * sc)) / sc;
        return jv_float(A, r);
    }
    if (v != v || isinf(v))
        return jv_float(A, v);
    if (prec < 0)
        jfail(A, "unsupported: round to negative precision");
    char buf[400];
    snprintf(buf, sizeof buf, "%.*f", (int)prec, v); /* exact half-even on the binary value, as Python */
    return jv_float(A, strtod(buf, NULL));
}

/* select / reject / selectattr / rejectattr */
static jv *do_select(struct jbctx *c, jv *x, struct fargs *f, int attr, int keep)
{
    size_t n;
    jv **it = jb_iter(c, x, &n);
    size_t a0 = 0;
    jv *at = NULL;
    if (attr) {
        if (!f->n)
            jfail(A, "%s() missing the attribute argument", f->filter);
        at = f->args[0];
        a0 = 1;
    }
    for (size_t k = 0; k < f->nk; k++)
        jfail(A, "%s() got an unexpected keyword argument '%s'", f->filter, f->kwn[k]);
    const char *test = NULL;
    if (f->n > a0) {
        jb_want_str(c, f->args[a0], "test name");
        test = jarena_strndup(A, f->args[a0]->u.str.s, f->args[a0]->u.str.n);
        if (!jb_has_test(test))
            jfail(A, "No test named '%s'.", test);
    }
    jv *r = jv_list(A, 0);
    for (size_t i = 0; i < n; i++) {
        jv *v = attr ? attr_get(c, it[i], at, NULL) : it[i];
        int ok = test ? jb_test(c, test, v, f->args + a0 + 1, f->n - a0 - 1) : jv_truthy(v);
        if (ok == keep)
            jv_list_push(A, r, it[i]);
    }
    return gen(r);
}

static jv *do_map(struct jbctx *c, jv *x, struct fargs *f)
{
    size_t n;
    jv **it = jb_iter(c, x, &n);
    jv *r = jv_list(A, n);
    jv *at = NULL, *dflt = NULL;
    for (size_t k = 0; k < f->nk; k++) {
        if (!strcmp(f->kwn[k], "attribute"))
            at = f->kwv[k];
        else if (!strcmp(f->kwn[k], "default"))
            dflt = f->kwv[k];
    }
    if (at) {
        for (size_t k = 0; k < f->nk; k++)
            if (strcmp(f->kwn[k], "attribute") && strcmp(f->kwn[k], "default"))
                jfail(A, "Unexpected keyword argument '%s'", f->kwn[k]);
        if (f->n)
            jfail(A, "map() with attribute= takes no positional arguments");
        for (size_t i = 0; i < n; i++)
            jv_list_push(A, r, attr_get(c, it[i], at, dflt));
        return gen(r);
    }
    if (!f->n)
        jfail(A, "map requires a filter argument");
    jb_want_str(c, f->args[0], "filter name");
    const char *name = jarena_strndup(A, f->args[0]->u.str.s, f->args[0]->u.str.n);
    if (!jb_has_filter(name))
        jfail(A, "No filter named '%s'.", name);
    for (size_t i = 0; i < n; i++)
        jv_list_push(A, r, jb_filter(c, name, it[i], f->args + 1, f->n - 1, f->kwn, f->kwv, f->nk, 0));
    return gen(r);
}

static jv *do_sort(struct jbctx *c, jv *x, struct fargs *f, int mode)
{
    /* mode 's' sort, 'u' unique, 'm' min, 'M' max, 'd' dictsort */
    jv *rev = NULL, *cs = NULL, *at = NULL, *by = NULL;
    if (mode == 's') {
        rev = arg(c, f, 0, "reverse");
        cs = arg(c, f, 1, "case_sensitive");
        at = arg(c, f, 2, "attribute");
        done(c, f, 3);
    } else if (mode == 'd') {
        cs = arg(c, f, 0, "case_sensitive");
        by = arg(c, f, 1, "by");
        rev = arg(c, f, 2, "reverse");
        done(c, f, 3);
    } else {
        cs = arg(c, f, 0, "case_sensitive");
        at = arg(c, f, 1, "attribute");
        done(c, f, 2);
    }
    int case_sens = cs && jv_truthy(cs);
    size_t n;
    jv **it;
    if (mode == 'd') {
        if (x->kind != JV_DICT) {
            jb_check_undef(c, x);
            jfail(A, "You can only sort by either \"key\" or \"value\"");
        }
        jv *items = jb_items(c, x);
        it = items->u.list.items;
        n = items->u.list.n;
    } else
        it = jb_iter(c, x, &n);
    int pos = 0;
    if (by) {
        jb_want_str(c, by, "by");
        if (by->u.str.n == 5 && !memcmp(by->u.str.s, "value", 5))
            pos = 1;
        else if (!(by->u.str.n == 3 && !memcmp(by->u.str.s, "key", 3)))
            jfail(A, "You can only sort by either \"key\" or \"value\"");
    }
    struct kitem *v = jarena_alloc(A, (n + 1) * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        jv *k = mode == 'd' ? it[i]->u.list.items[pos] : at ? attr_get(c, it[i], at, NULL) : it[i];
        v[i].key = sort_key(c, k, case_sens);
        v[i].val = it[i];
    }
    if (mode == 'u') {
        jv *r = jv_list(A, 0);
        jv *seen = jv_list(A, 0);
        for (size_t i = 0; i < n; i++) {
            if (v[i].key->kind == JV_LIST || v[i].key->kind == JV_DICT)
                jfail(A, "unhashable type: '%s'", jv_type_name(v[i].key));
            int dup = 0;
            for (size_t k = 0; k < seen->u.list.n && !dup; k++)
                dup = jv_eq(seen->u.list.items[k], v[i].key);
            if (!dup) {
                jv_list_push(A, seen, v[i].key);
                jv_list_push(A, r, v[i].val);
            }
        }
        return gen(r);
    }
    if (mode == 'm' || mode == 'M') {
        if (!n)
            return jv_undef(A, "No aggregated item, sequence was empty.");
        size_t best = 0;
        for (size_t i = 1; i < n; i++) {
            int o = jv_order(A, v[i].key, v[best].key, 0);
            if (mode == 'm' ? o < 0 : o > 0)
                best = i;
        }
        return v[best].val;
    }
    sort_items(c, v, n, rev && jv_truthy(rev));
    jv *r = jv_list(A, n);
    for (size_t i = 0; i < n; i++)
        jv_list_push(A, r, v[i].val);
    return r;
}

static jv *do_join(struct jbctx *c, jv *x, struct fargs *f)
{
    jv *d = arg(c, f, 0, "d"), *at = arg(c, f, 1, "attribute");
    done(c, f, 2);
    size_t n;
    jv **it = jb_iter(c, x, &n);
    jv *sep = d ? jv_to_str(A, d) : jv_str_nocopy(A, "", 0);
    int markup = d && d->kind == JV_STR && d->markup;
    for (size_t i = 0; i < n && !markup; i++)
        markup = it[i]->kind == JV_STR && it[i]->markup;
    struct jbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        jv *v = at ? attr_get(c, it[i], at, NULL) : it[i];
        if (i)
            jbuf_put(A, &b, sep->u.str.s, sep->u.str.n);
        if (markup && !(v->kind == JV_STR && v->markup)) {
            jv *e = jb_escape(c, v);
            jbuf_put(A, &b, e->u.str.s, e->u.str.n);
        } else
            jv_write(A, &b, v, 0, 0);
    }
    jv *r = new_str(c, &b);
    r->markup = (unsigned char)markup;
    return r;
}

static jv *do_title(struct jbctx *c, jv *x)
{
    /* jinja2: words split at runs of [-\s({[<]; each word: first char upper, rest lower */
    jv *s = jv_to_str(A, x);
    struct jbuf b = {0};
    const char *p = s->u.str.s;
    size_t n = s->u.str.n, i = 0;
    while (i < n) {
        size_t st = i;
        int sepr = -1;
        while (i < n) {
            uint32_t cp;
            size_t l = ju_dec(p + i, n - i, &cp);
            int is_sep = ju_isspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
            if (sepr < 0)
                sepr = is_sep;
            if (is_sep != sepr)
                break;
            i += l;
        }
        jv *w = jv_str_nocopy(A, p + st, i - st);
        if (sepr)
            jbuf_put(A, &b, w->u.str.s, w->u.str.n);
        else {
            size_t l1 = ju_off(w->u.str.s, w->u.str.n, 1);
            jv *h = jb_case_map(c, jv_str_nocopy(A, w->u.str.s, l1), 'u');
            jv *t = jb_case_map(c, jv_str_nocopy(A, w->u.str.s + l1, w->u.str.n - l1), 'l');
            jbuf_put(A, &b, h->u.str.s, h->u.str.n);
            jbuf_put(A, &b, t->u.str.s, t->u.str.n);
        }
    }
    return new_str(c, &b);
}

static jv *do_batch_slice(struct jbctx *c, jv *x, struct fargs *f, int slice)
{
    jv *cnt = arg(c, f, 0, slice ? "slices" : "linecount"), *fill = arg(c, f, 1, "fill_with");
    done(c, f, 2);
    if (!cnt)
        jfail(A, "%s() missing 1 required positional argument", f->filter);
    int64_t k = want_int(c, cnt, f->filter);
    size_t n;
    jv **it = jb_iter(c, x, &n);
    jv *r = jv_list(A, 0);
    if (!slice) {
        if (k <= 0)
            jfail(A, "unsupported: batch of %lld", (long long)k);
        jv *cur = NULL;
        for (size_t i = 0; i < n; i++) {
            if (!cur || (int64_t)cur->u.list.n == k) {
                cur = jv_list(A, 0);
                jv_list_push(A, r, cur);
            }
            jv_list_push(A, cur, it[i]);
        }
        if (cur && fill && fill->kind != JV_NONE)
            while ((int64_t)cur->u.list.n < k)
                jv_list_push(A, cur, fill);
        return gen(r);
    }
    if (k <= 0)
        jfail(A, "unsupported: slice of %lld", (long long)k);
    size_t per = n / (size_t)k, extra = n % (size_t)k, off = 0;
    for (int64_t s = 0; s < k; s++) {
        size_t start = off, len = per + ((size_t)s < extra);
        jv *l = jv_list(A, len + 1);
        for (size_t i = 0; i < len; i++)
            jv_list_push(A, l, it[start + i]);
        if (fill && fill->kind != JV_NONE && (size_t)s >= extra)
            jv_list_push(A, l, fill);
        off += len;
        jv_list_push(A, r, l);
    }
    return gen(r);
}

static jv *length(struct jbctx *c, jv *x)
{
    switch (x->kind) {
    case JV_UNDEF:
        return jv_int(A, 0);
    case JV_STR:
        return jv_int(A, (int64_t)ju_len(x->u.str.s, x->u.str.n));
    case JV_LIST:
    case JV_TUPLE:
        if (x->markup == 1)
            break;
        return jv_int(A, (int64_t)x->u.list.n);
    case JV_DICT:
        return jv_int(A, (int64_t)x->u.dict.n);
    default:
        break;
    }
    jfail(A, "object of type '%s' has no len()", jv_type_name(x));
}

jv *jb_filter(struct jbctx *c, const char *name, jv *x, jv **args, size_t n, const char **kwn, jv **kwv, size_t nk,
              int line)
{
    (void)line;
    struct fargs F = {args, n, kwn, kwv, nk, jarena_alloc(A, (nk + 1) * sizeof(int)), name};
    struct fargs *f = &F;
#define N(s) (!strcmp(name, s))
    if (N("default") || N("d")) {
        jv *d = arg(c, f, 0, "default_value"), *b = arg(c, f, 1, "boolean");
        done(c, f, 2);
        if (x->kind == JV_UNDEF || (b && jv_truthy(b) && !jv_truthy(x)))
            return d ? d : jv_str_nocopy(A, "", 0);
        return x;
    }
    if (N("tojson"))
        return do_tojson(c, x, f);
    if (N("safe")) {
        done(c, f, 0);
        jv *s = jv_to_str(A, x);
        jv *r = jv_str_nocopy(A, s->u.str.s, s->u.str.n);
        r->markup = 1;
        return r;
    }
    if (N("escape") || N("e") || N("forceescape")) {
        done(c, f, 0);
        if (N("forceescape") && x->kind == JV_STR && x->markup)
            x = jv_str_nocopy(A, x->u.str.s, x->u.str.n);
        return jb_escape(c, x);
    }
    if (N("string")) {
        done(c, f, 0);
        if (x->kind == JV_STR)
            return x;
        return jv_to_str(A, x);
    }
    if (N("trim")) {
        jv *ch = arg(c, f, 0, "chars");
        done(c, f, 1);
        return jb_strip(c, jv_to_str(A, x), ch, 3);
    }
    if (N("length") || N("count")) {
        done(c, f, 0);
        return length(c, x);
    }
    if (N("list")) {
        done(c, f, 0);
        return list_of(c, x);
    }
    if (N("join"))
        return do_join(c, x, f);
    if (N("map"))
        return do_map(c, x, f);
    if (N("select") || N("reject"))
        return do_select(c, x, f, 0, name[0] == 's');
    if (N("selectattr") || N("rejectattr"))
        return do_select(c, x, f, 1, name[0] == 's');
    if (N("int"))
        return do_int(c, x, f);
    if (N("float"))
        return do_float(c, x, f);
    if (N("abs")) {
        done(c, f, 0);
        if (x->kind == JV_FLOAT)
            return jv_float(A, fabs(x->u.f));
        if (jb_is_int(x)) {
            if (iv(x) == INT64_MIN)
                jfail(A, "unsupported: integer overflow beyond 64 bits");
            return jv_int(A, iv(x) < 0 ? -iv(x) : iv(x));
        }
        jb_check_undef(c, x);
        jfail(A, "bad operand type for abs(): '%s'", jv_type_name(x));
    }
    if (N("round"))
        return do_round(c, x, f);
    if (N("first") || N("last")) {
        done(c, f, 0);
        size_t cnt;
        jv **it = jb_iter(c, x, &cnt);
        if (N("last") && x->kind == JV_LIST && x->markup == 1)
            jfail(A, "'generator' object is not reversible");
        if (!cnt)
            return jv_undef(A, N("first") ? "No first item, sequence was empty." : "No last item, sequence was empty.");
        return it[N("first") ? 0 : cnt - 1];
    }
    if (N("lower") || N("upper")) {
        done(c, f, 0);
        return jb_case_map(c, jv_to_str(A, x), name[0] == 'l' ? 'l' : 'u');
    }
    if (N("capitalize")) {
        done(c, f, 0);
        jv *s = jv_to_str(A, x);
        return jb_call(c, jb_getattr(c, s, "capitalize", 10), NULL, 0, NULL, NULL, 0);
    }
    if (N("title")) {
        done(c, f, 0);
        return do_title(c, x);
    }
    if (N("replace")) {
        jv *o = arg(c, f, 0, "old"), *nw = arg(c, f, 1, "new"), *cnt = arg(c, f, 2, "count");
        done(c, f, 3);
        if (!o || !nw)
            jfail(A, "replace() missing required arguments");
        jv *s = jv_to_str(A, x);
        return jb_replace(c, s, jv_to_str(A, o), jv_to_str(A, nw),
                          cnt && cnt->kind != JV_NONE ? want_int(c, cnt, "replace") : -1);
    }
    if (N("indent"))
        return do_indent(c, x, f);
    if (N("items")) {
        done(c, f, 0);
        if (x->kind == JV_UNDEF)
            return gen(jv_list(A, 0));
        if (x->kind != JV_DICT)
            jfail(A, "Can only get item pairs from a mapping.");
        return gen(jb_items(c, x));
    }
    if (N("dictsort"))
        return do_sort(c, x, f, 'd');
    if (N("sort"))
        return do_sort(c, x, f, 's');
    if (N("unique"))
        return do_sort(c, x, f, 'u');
    if (N("min"))
        return do_sort(c, x, f, 'm');
    if (N("max"))
        return do_sort(c, x, f, 'M');
    if (N("reverse")) {
        done(c, f, 0);
        if (x->kind == JV_STR)
            return jb_slice(c, x, NULL, NULL, jv_int(A, -1));
        size_t cnt;
        jv **it = jb_iter(c, x, &cnt);
        jv *r = jv_list(A, cnt);
        for (size_t i = cnt; i-- > 0;)
            jv_list_push(A, r, it[i]);
        return (jb_is_seq(x) || x->kind == JV_DICT) ? gen(r) : r;
    }
    if (N("sum")) {
        jv *at = arg(c, f, 0, "attribute"), *st = arg(c, f, 1, "start");
        done(c, f, 2);
        size_t cnt;
        jv **it = jb_iter(c, x, &cnt);
        jv *acc = st ? st : jv_int(A, 0);
        for (size_t i = 0; i < cnt; i++)
            acc = jb_binop(c, OP_ADD, acc, at ? attr_get(c, it[i], at, NULL) : it[i]);
        return acc;
    }
    if (N("batch"))
        return do_batch_slice(c, x, f, 0);
    if (N("slice"))
        return do_batch_slice(c, x, f, 1);
    if (N("wordcount")) {
        done(c, f, 0);
        jv *s = jv_to_str(A, x);
        int64_t k = 0;
        int in = 0;
        for (size_t i = 0; i < s->u.str.n;) {
            uint32_t cp;
            size_t l = ju_dec(s->u.str.s + i, s->u.str.n - i, &cp);
            int w = cp == '_' || (cp >= '0' && cp <= '9') || ((cp | 32) >= 'a' && (cp | 32) <= 'z');
            if (cp >= 0x80)
                jfail(A, "unsupported: wordcount of non-ASCII text");
            if (w && !in)
                k++;
            in = w;
            i += l;
        }
        return jv_int(A, k);
    }
    if (N("center")) {
        jv *w = arg(c, f, 0, "width");
        done(c, f, 1);
        return jb_pad(c, jv_to_str(A, x), w ? want_int(c, w, "center") : 80, NULL, 'c');
    }
    if (N("format")) {
        if (n && nk)
            jfail(A, "can't handle positional and keyword arguments at the same time");
        if (nk)
            jfail(A, "unsupported: format with keyword arguments");
        jv *t = jv_tuple(A, n);
        for (size_t i = 0; i < n; i++)
            t->u.list.items[i] = args[i];
        return jb_printf(c, jv_to_str(A, x), t);
    }
    if (N("attr")) {
        jv *nm = arg(c, f, 0, "name");
        done(c, f, 1);
        if (!nm)
            jfail(A, "attr() missing 1 required positional argument: 'name'");
        jb_want_str(c, nm, "attribute name");
        if (x->kind == JV_DICT) {
            jv *r = jb_getattr(c, x, nm->u.str.s, nm->u.str.n);
            if (r->kind == JV_METHOD || r->kind == JV_UNDEF)
                return r;
            char *msg = jarena_alloc(A, nm->u.str.n + 60);
            snprintf(msg, nm->u.str.n + 60, "'dict object' has no attribute '%.*s'", (int)nm->u.str.n, nm->u.str.s);
            return jv_undef(A, msg);
        }
        return jb_getattr(c, x, nm->u.str.s, nm->u.str.n);
    }
#undef N
    jfail(A, "unsupported filter '%s'", name);
}
