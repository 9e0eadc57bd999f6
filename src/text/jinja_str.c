/* jinja_str.c - Python's str methods as templates call them (strip, split, replace, find, format,
 * startswith, case mapping through the C.UTF-8 locale, printf-style %, ...), for jinja_builtin.c and
 * jinja_filter.c. Calls only jinja_value.c. */
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

#include "text/jinja_internal.h"

typedef struct jv jv;
#define A (c->a)

static void check_undef(struct jbctx *c, const jv *x)
{
    if (x->kind == JV_UNDEF)
        jfail(A, "%s", x->u.undef);
}

static int is_int(const jv *v)
{
    return v->kind == JV_INT || v->kind == JV_BOOL;
}
static int is_num(const jv *v)
{
    return is_int(v) || v->kind == JV_FLOAT;
}
static int64_t iv(const jv *v)
{
    return v->kind == JV_INT ? v->u.i : v->u.b;
}
static double fv(const jv *v)
{
    return v->kind == JV_FLOAT ? v->u.f : (double)iv(v);
}
static jv *new_str(struct jbctx *c, struct jbuf *b)
{
    return jv_str_nocopy(A, b->p ? b->p : "", b->n);
}

static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (!nn)
        return h;
    if (nn > hn)
        return NULL;
    return memmem(h, hn, nd, nn);
}

/* ------------------------------------------------------------------------------ case mapping */

static locale_t g_utf8;
static pthread_once_t g_utf8_once = PTHREAD_ONCE_INIT;
static void utf8_init(void)
{
    g_utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

static uint32_t cp_case(struct jbctx *c, uint32_t cp, int upper)
{
    if (cp < 0x80) {
        if (upper && cp >= 'a' && cp <= 'z')
            return cp - 32;
        if (!upper && cp >= 'A' && cp <= 'Z')
            return cp + 32;
        return cp;
    }
    pthread_once(&g_utf8_once, utf8_init);
    if (!g_utf8)
        jfail(A, "unsupported: case mapping of non-ASCII text (no C.UTF-8 locale)");
    if (cp == 0xdf && upper)
        jfail(A, "unsupported: multi-character case mapping");
    return (uint32_t)(upper ? towupper_l((wint_t)cp, g_utf8) : towlower_l((wint_t)cp, g_utf8));
}

static int cp_cased_lower(uint32_t cp)
{
    return cp < 0x80 ? (cp >= 'a' && cp <= 'z') : (g_utf8 && iswlower_l((wint_t)cp, g_utf8));
}
static int cp_cased_upper(uint32_t cp)
{
    return cp < 0x80 ? (cp >= 'A' && cp <= 'Z') : (g_utf8 && iswupper_l((wint_t)cp, g_utf8));
}
static int cp_alpha(uint32_t cp)
{
    if (cp < 0x80)
        return (cp | 32) >= 'a' && (cp | 32) <= 'z';
    pthread_once(&g_utf8_once, utf8_init);
    return g_utf8 && iswalpha_l((wint_t)cp, g_utf8);
}

static void put_cp(struct jbctx *c, struct jbuf *b, uint32_t cp)
{
    char o[4];
    jbuf_put(A, b, o, ju_enc(cp, o));
}

/* mode: 'l' lower, 'u' upper, 't' title, 'c' capitalize, 's' swapcase */
jv *jb_case_map(struct jbctx *c, const jv *s, int mode)
{
    struct jbuf b = {0};
    int prev_cased = 0, first = 1;
    for (size_t i = 0; i < s->u.str.n;) {
        uint32_t cp;
        size_t l = ju_dec(s->u.str.s + i, s->u.str.n - i, &cp);
        uint32_t o = cp;
        switch (mode) {
        case 'l':
            o = cp_case(c, cp, 0);
            break;
        case 'u':
            o = cp_case(c, cp, 1);
            break;
        case 'c':
            o = cp_case(c, cp, first);
            break;
        case 's':
            o = cp_case(c, cp, !cp_cased_upper(cp));
            break;
        case 't': {
            o = cp_case(c, cp, !prev_cased);
            prev_cased = cp_cased_lower(cp) || cp_cased_upper(cp) || (cp >= 0x80 && cp_alpha(cp));
            break;
        }
        }
        put_cp(c, &b, o);
        first = 0;
        i += l;
    }
    return new_str(c, &b);
}

/* ------------------------------------------------------------------------------- str methods */

static int in_chars(const jv *chars, uint32_t cp)
{
    for (size_t i = 0; i < chars->u.str.n;) {
        uint32_t d;
        i += ju_dec(chars->u.str.s + i, chars->u.str.n - i, &d);
        if (d == cp)
            return 1;
    }
    return 0;
}

/* which: 1 left, 2 right, 3 both */
jv *jb_strip(struct jbctx *c, const jv *s, const jv *chars, int which)
{
    const char *p = s->u.str.s;
    size_t n = s->u.str.n, st = 0;
    if (chars && chars->kind != JV_NONE && chars->kind != JV_STR)
        jfail(A, "strip arg must be None or str");
    int ws = !chars || chars->kind == JV_NONE;
    if (which & 1)
        while (st < n) {
            uint32_t cp;
            size_t l = ju_dec(p + st, n - st, &cp);
            if (ws ? !ju_isspace(cp) : !in_chars(chars, cp))
                break;
            st += l;
        }
    if (which & 2)
        while (n > st) {
            size_t k = n - 1;
            while (k > st && ((unsigned char)p[k] & 0xc0) == 0x80)
                k--;
            uint32_t cp;
            ju_dec(p + k, n - k, &cp);
            if (ws ? !ju_isspace(cp) : !in_chars(chars, cp))
                break;
            n = k;
        }
    return jv_str_nocopy(A, p + st, n - st);
}

const jv *jb_want_str(struct jbctx *c, const jv *x, const char *what)
{
    if (x->kind != JV_STR) {
        check_undef(c, x);
        jfail(A, "%s must be str, not %s", what, jv_type_name(x));
    }
    return x;
}

static jv *split(struct jbctx *c, const jv *s, const jv *sep, int64_t maxsplit, int right)
{
    jv *r = jv_list(A, 0);
    const char *p = s->u.str.s;
    size_t n = s->u.str.n;
    if (!sep || sep->kind == JV_NONE) {
        /* whitespace runs; empty strings dropped */
        jv *parts = jv_list(A, 0);
        size_t i = 0;
        if (!right) {
            while (i < n) {
                i += ju_lstrip_ws(p + i, n - i);
                if (i >= n)
                    break;
                if (maxsplit >= 0 && (int64_t)parts->u.list.n == maxsplit) {
                    jv_list_push(A, parts, jv_str_nocopy(A, p + i, n - i));
                    break;
                }
                size_t st = i;
                while (i < n) {
                    uint32_t cp;
                    size_t l = ju_dec(p + i, n - i, &cp);
                    if (ju_isspace(cp))
                        break;
                    i += l;
                }
                jv_list_push(A, parts, jv_str_nocopy(A, p + st, i - st));
            }
            return parts;
        }
        /* rsplit(None, maxsplit) */
        size_t e = n;
        while (e > 0) {
            e = ju_rstrip_ws(p, e);
            if (!e)
                break;
            if (maxsplit >= 0 && (int64_t)parts->u.list.n == maxsplit) {
                jv_list_push(A, parts, jv_str_nocopy(A, p, e));
                break;
            }
            size_t st = e;
            while (st > 0) {
                size_t k = st - 1;
                while (k > 0 && ((unsigned char)p[k] & 0xc0) == 0x80)
                    k--;
                uint32_t cp;
                ju_dec(p + k, st - k, &cp);
                if (ju_isspace(cp))
                    break;
                st = k;
            }
            jv_list_push(A, parts, jv_str_nocopy(A, p + st, e - st));
            e = st;
        }
        for (size_t k = parts->u.list.n; k-- > 0;)
            jv_list_push(A, r, parts->u.list.items[k]);
        return r;
    }
    jb_want_str(c, sep, "sep");
    if (!sep->u.str.n)
        jfail(A, "empty separator");
    const char *q = sep->u.str.s;
    size_t m = sep->u.str.n;
    if (!right) {
        size_t i = 0;
        int64_t cnt = 0;
        for (;;) {
            const char *f = (maxsplit < 0 || cnt < maxsplit) ? find_bytes(p + i, n - i, q, m) : NULL;
            if (!f) {
                jv_list_push(A, r, jv_str_nocopy(A, p + i, n - i));
                return r;
            }
            jv_list_push(A, r, jv_str_nocopy(A, p + i, (size_t)(f - (p + i))));
            i = (size_t)(f - p) + m;
            cnt++;
        }
    }
    jv *parts = jv_list(A, 0);
    size_t e = n;
    int64_t cnt = 0;
    for (;;) {
        const char *f = NULL;
        if (maxsplit < 0 || cnt < maxsplit)
            for (size_t k = e >= m ? e - m + 1 : 0; k-- > 0;)
                if (!memcmp(p + k, q, m)) {
                    f = p + k;
                    break;
                }
        if (!f) {
            jv_list_push(A, parts, jv_str_nocopy(A, p, e));
            break;
        }
        jv_list_push(A, parts, jv_str_nocopy(A, f + m, e - (size_t)(f - p) - m));
        e = (size_t)(f - p);
        cnt++;
    }
    for (size_t k = parts->u.list.n; k-- > 0;)
        jv_list_push(A, r, parts->u.list.items[k]);
    return r;
}

jv *jb_replace(struct jbctx *c, const jv *s, const jv *old, const jv *new, int64_t count)
{
    jb_want_str(c, old, "replace() argument 1");
    jb_want_str(c, new, "replace() argument 2");
    struct jbuf b = {0};
    const char *p = s->u.str.s;
    size_t n = s->u.str.n, i = 0;
    int64_t done = 0;
    if (!old->u.str.n) {
        for (;;) {
            if (count >= 0 && done >= count) {
                jbuf_put(A, &b, p + i, n - i);
                break;
            }
            jbuf_put(A, &b, new->u.str.s, new->u.str.n);
            done++;
            if (i >= n)
                break;
            uint32_t cp;
            size_t l = ju_dec(p + i, n - i, &cp);
            jbuf_put(A, &b, p + i, l);
            i += l;
        }
        return new_str(c, &b);
    }
    while (i <= n) {
        const char *f = (count < 0 || done < count) ? find_bytes(p + i, n - i, old->u.str.s, old->u.str.n) : NULL;
        if (!f) {
            jbuf_put(A, &b, p + i, n - i);
            break;
        }
        jbuf_put(A, &b, p + i, (size_t)(f - (p + i)));
        jbuf_put(A, &b, new->u.str.s, new->u.str.n);
        i = (size_t)(f - p) + old->u.str.n;
        done++;
    }
    return new_str(c, &b);
}

static int64_t find(const jv *s, const jv *sub, int right)
{
    const char *p = s->u.str.s;
    size_t n = s->u.str.n, m = sub->u.str.n;
    const char *f = NULL;
    if (!right)
        f = find_bytes(p, n, sub->u.str.s, m);
    else if (m <= n)
        for (size_t k = n - m + 1; k-- > 0;)
            if (!memcmp(p + k, sub->u.str.s, m)) {
                f = p + k;
                break;
            }
    return f ? (int64_t)ju_len(p, (size_t)(f - p)) : -1;
}

static int affix(struct jbctx *c, const jv *s, const jv *x, int end)
{
    if (x->kind == JV_TUPLE) {
        for (size_t i = 0; i < x->u.list.n; i++)
            if (affix(c, s, x->u.list.items[i], end))
                return 1;
        return 0;
    }
    if (x->kind != JV_STR) {
        check_undef(c, x);
        jfail(A, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith",
              jv_type_name(x));
    }
    if (x->u.str.n > s->u.str.n)
        return 0;
    return !memcmp(s->u.str.s + (end ? s->u.str.n - x->u.str.n : 0), x->u.str.s, x->u.str.n);
}

/* str.format with {} / {N} / {name} / {!r} and no format spec */
static jv *str_format(struct jbctx *c, const jv *fmt, jv **args, size_t n, const char **kwn, jv **kwv, size_t nk)
{
    struct jbuf b = {0};
    const char *p = fmt->u.str.s;
    size_t len = fmt->u.str.n, auto_i = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '}') {
            if (i + 1 < len && p[i + 1] == '}') {
                jbuf_put(A, &b, "}", 1);
                i++;
                continue;
            }
            jfail(A, "Single '}' encountered in format string");
        }
        if (p[i] != '{') {
            jbuf_put(A, &b, p + i, 1);
            continue;
        }
        if (i + 1 < len && p[i + 1] == '{') {
            jbuf_put(A, &b, "{", 1);
            i++;
            continue;
        }
        size_t e = i + 1;
        while (e < len && p[e] != '}' && p[e] != '!' && p[e] != ':' && p[e] != '{')
            e++;
        const char *field = p + i + 1;
        size_t fl = e - i - 1;
        int conv = 0;
        if (e < len && p[e] == '!') {
            if (e + 2 < len && (p[e + 1] == 'r' || p[e + 1] == 's'))
                conv = p[e + 1];
            else
                jfail(A, "unsupported: str.format conversion");
            e += 2;
        }
        if (e >= len || p[e] != '}')
            jfail(A, "unsupported: str.format field with a format spec");
        jv *v = NULL;
        if (!fl) {
            if (auto_i >= n)
                jfail(A, "Replacement index %zu out of range for positional args tuple", auto_i);
            v = args[auto_i++];
        } else if (field[0] >= '0' && field[0] <= '9') {
            size_t k = 0;
            for (size_t j = 0; j < fl; j++) {
                if (field[j] < '0' || field[j] > '9')
                    jfail(A, "unsupported: str.format field '%.*s'", (int)fl, field);
                k = k * 10 + (size_t)(field[j] - '0');
            }
            if (k >= n)
                jfail(A, "Replacement index %zu out of range for positional args tuple", k);
            v = args[k];
        } else {
            for (size_t j = 0; j < nk; j++)
                if (strlen(kwn[j]) == fl && !memcmp(kwn[j], field, fl))
                    v = kwv[j];
            if (!v)
                jfail(A, "'%.*s'", (int)fl, field);
        }
        jv_write(A, &b, v, conv == 'r', 0);
        i = e;
    }
    return new_str(c, &b);
}

/* printf-style `fmt % args` (%s %r %d %i %f %e %g %x %o %c %%, flags, width, precision) */
jv *jb_printf(struct jbctx *c, jv *fmt, jv *args)
{
    jv **av = &args;
    size_t an = 1, ai = 0;
    if (args->kind == JV_TUPLE) {
        av = args->u.list.items;
        an = args->u.list.n;
    }
    int dict_arg = args->kind == JV_DICT;
    struct jbuf b = {0};
    const char *p = fmt->u.str.s;
    size_t len = fmt->u.str.n;
    for (size_t i = 0; i < len; i++) {
        if (p[i] != '%') {
            jbuf_put(A, &b, p + i, 1);
            continue;
        }
        if (++i >= len)
            jfail(A, "incomplete format");
        if (p[i] == '%') {
            jbuf_put(A, &b, "%", 1);
            continue;
        }
        if (p[i] == '(')
            jfail(A, "unsupported: %%(name) formatting");
        char spec[32];
        size_t k = 0;
        spec[k++] = '%';
        while (i < len && strchr("-+ #0", p[i]) && k < 8)
            spec[k++] = p[i++];
        while (i < len && p[i] >= '0' && p[i] <= '9' && k < 16)
            spec[k++] = p[i++];
        if (i < len && p[i] == '.') {
            spec[k++] = p[i++];
            while (i < len && p[i] >= '0' && p[i] <= '9' && k < 24)
                spec[k++] = p[i++];
        }
        if (i >= len)
            jfail(A, "incomplete format");
        char conv = p[i];
        if (ai >= an || dict_arg)
            jfail(A, dict_arg ? "format requires a mapping" : "not enough arguments for format string");
        jv *v = av[ai++];
        char out[512];
        if (conv == 's' || conv == 'r') {
            struct jbuf t = {0};
            jv_write(A, &t, v, conv == 'r', 0);
            if (k == 1) {
                jbuf_put(A, &b, t.p ? t.p : "", t.n);
                continue;
            }
            spec[k++] = 's';
            spec[k] = 0;
            char *q = jarena_alloc(A, t.n + 600);
            int w = snprintf(q, t.n + 600, spec, t.p ? t.p : "");
            jbuf_put(A, &b, q, (size_t)(w < 0 ? 0 : w));
            continue;
        }
        if (!is_num(v)) {
            check_undef(c, v);
            jfail(A, "%%%c format: a real number is required, not %s", conv, jv_type_name(v));
        }
        int w;
        if (strchr("dixXoc", conv)) {
            if (conv == 'c')
                jfail(A, "unsupported: %%c formatting");
            int64_t x = v->kind == JV_FLOAT ? (int64_t)v->u.f : iv(v);
            spec[k++] = 'l';
            spec[k++] = 'l';
            spec[k++] = conv == 'i' ? 'd' : conv;
            spec[k] = 0;
            w = snprintf(out, sizeof out, spec, (long long)x);
        } else if (strchr("feEgG", conv)) {
            spec[k++] = conv;
            spec[k] = 0;
            w = snprintf(out, sizeof out, spec, fv(v));
        } else
            jfail(A, "unsupported format character '%c'", conv);
        jbuf_put(A, &b, out, (size_t)(w < 0 ? 0 : w));
    }
    if (ai < an && !dict_arg)
        jfail(A, "not all arguments converted during string formatting");
    return new_str(c, &b);
}

jv *jb_str_join(struct jbctx *c, const jv *sep, jv *it)
{
    size_t n;
    jv **items = jb_iter(c, it, &n);
    struct jbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (items[i]->kind != JV_STR)
            jfail(A, "sequence item %zu: expected str instance, %s found", i, jv_type_name(items[i]));
        if (i)
            jbuf_put(A, &b, sep->u.str.s, sep->u.str.n);
        jbuf_put(A, &b, items[i]->u.str.s, items[i]->u.str.n);
    }
    return new_str(c, &b);
}

int jb_str_pred(struct jbctx *c, const jv *s, const char *name)
{
    size_t n = s->u.str.n;
    const char *p = s->u.str.s;
    if (!strcmp(name, "isascii")) {
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)p[i] >= 0x80)
                return 0;
        return 1;
    }
    if (!n)
        return 0;
    int any_cased = 0;
    int prev_cased = 0, title_ok = 1, title_any = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = ju_dec(p + i, n - i, &cp);
        i += l;
        int dig = cp >= '0' && cp <= '9';
        if (cp >= 0x80 && strcmp(name, "isspace") && strcmp(name, "isalpha") && strcmp(name, "isupper") &&
            strcmp(name, "islower") && strcmp(name, "istitle") && strcmp(name, "isalnum"))
            jfail(A, "unsupported: str.%s() of non-ASCII text", name);
        if (!strcmp(name, "isdigit") || !strcmp(name, "isnumeric") || !strcmp(name, "isdecimal")) {
            if (!dig)
                return 0;
        } else if (!strcmp(name, "isalpha")) {
            if (!cp_alpha(cp))
                return 0;
        } else if (!strcmp(name, "isalnum")) {
            if (!cp_alpha(cp) && !dig) {
                if (cp >= 0x80)
                    jfail(A, "unsupported: str.isalnum() of non-ASCII text");
                return 0;
            }
        } else if (!strcmp(name, "isspace")) {
            if (!ju_isspace(cp))
                return 0;
        } else if (!strcmp(name, "isupper") || !strcmp(name, "islower")) {
            pthread_once(&g_utf8_once, utf8_init);
            int up = cp_cased_upper(cp), lo = cp_cased_lower(cp);
            if (name[2] == 'u' ? lo : up)
                return 0;
            any_cased |= up || lo;
        } else if (!strcmp(name, "istitle")) {
            pthread_once(&g_utf8_once, utf8_init);
            int up = cp_cased_upper(cp), lo = cp_cased_lower(cp);
            if (up) {
                if (prev_cased)
                    title_ok = 0;
                prev_cased = 1;
                title_any = 1;
            } else if (lo) {
                if (!prev_cased)
                    title_ok = 0;
                prev_cased = 1;
            } else
                prev_cased = 0;
        } else if (!strcmp(name, "isidentifier")) {
            if (!(cp == '_' || cp_alpha(cp) || (dig && i > l)))
                return 0;
        } else if (!strcmp(name, "isprintable")) {
            if (cp < 0x20 || cp == 0x7f)
                return 0;
        }
    }
    if (!strcmp(name, "isupper") || !strcmp(name, "islower"))
        return any_cased;
    if (!strcmp(name, "istitle"))
        return title_ok && title_any;
    return 1;
}

jv *jb_argn(jv **args, size_t n, size_t i, const char **kwn, jv **kwv, size_t nk, const char *kw)
{
    if (i < n)
        return args[i];
    for (size_t k = 0; k < nk; k++)
        if (kw && !strcmp(kwn[k], kw))
            return kwv[k];
    return NULL;
}

void jb_check_args(struct jbctx *c, const char *fn, size_t n, size_t lo, size_t hi)
{
    if (n < lo || n > hi)
        jfail(A, "%s() takes %s %zu argument%s (%zu given)", fn, n < lo ? "at least" : "at most", n < lo ? lo : hi,
              (n < lo ? lo : hi) == 1 ? "" : "s", n);
}

jv *jb_pad(struct jbctx *c, const jv *s, int64_t width, const jv *fill, int mode)
{
    size_t len = ju_len(s->u.str.s, s->u.str.n);
    if (width <= (int64_t)len)
        return (jv *)s;
    if (width > 1 << 24)
        jfail(A, "unsupported: padding to %lld", (long long)width);
    const char *f = " ";
    size_t fl = 1;
    if (fill) {
        jb_want_str(c, fill, "fill character");
        if (ju_len(fill->u.str.s, fill->u.str.n) != 1)
            jfail(A, "The fill character must be exactly one character long");
        f = fill->u.str.s;
        fl = fill->u.str.n;
    }
    size_t tot = (size_t)width - len, left = 0;
    if (mode == 'c')
        left = tot / 2 + (tot & (size_t)width & 1);
    else if (mode == 'r')
        left = tot;
    struct jbuf b = {0};
    for (size_t i = 0; i < left; i++)
        jbuf_put(A, &b, f, fl);
    jbuf_put(A, &b, s->u.str.s, s->u.str.n);
    for (size_t i = left; i < tot; i++)
        jbuf_put(A, &b, f, fl);
    return new_str(c, &b);
}

jv *jb_str_method(struct jbctx *c, jv *self, const char *m, jv **args, size_t n, const char **kwn, jv **kwv, size_t nk)
{
    const jv *s = self;
    if (nk && strcmp(m, "format") && strcmp(m, "split") && strcmp(m, "rsplit") && strcmp(m, "replace"))
        jfail(A, "%s() takes no keyword arguments", m);
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        jb_check_args(c, m, n, 0, 1);
        return jb_strip(c, s, n ? args[0] : NULL, m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3);
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv *sep = jb_argn(args, n, 0, kwn, kwv, nk, "sep"), *ms = jb_argn(args, n, 1, kwn, kwv, nk, "maxsplit");
        if (ms && !is_int(ms))
            jfail(A, "'%s' object cannot be interpreted as an integer", jv_type_name(ms));
        return split(c, s, sep, ms ? iv(ms) : -1, m[0] == 'r');
    }
    if (!strcmp(m, "splitlines")) {
        jv *r = jv_list(A, 0);
        int keep = n && jv_truthy(args[0]);
        const char *p = s->u.str.s;
        size_t len = s->u.str.n, st = 0;
        for (size_t i = 0; i < len;) {
            uint32_t cp;
            size_t l = ju_dec(p + i, len - i, &cp);
            int brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) ||
                      cp == 0x85 || cp == 0x2028 || cp == 0x2029;
            if (!brk) {
                i += l;
                continue;
            }
            size_t e = i + l;
            if (cp == '\r' && e < len && p[e] == '\n')
                e++;
            jv_list_push(A, r, jv_str_nocopy(A, p + st, (keep ? e : i) - st));
            st = i = e;
        }
        if (st < len)
            jv_list_push(A, r, jv_str_nocopy(A, p + st, len - st));
        return r;
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        jb_check_args(c, m, n, 1, 1);
        return jv_bool(affix(c, s, args[0], m[0] == 'e'));
    }
    if (!strcmp(m, "replace")) {
        jb_check_args(c, m, n + nk, 2, 3);
        jv *cnt = jb_argn(args, n, 2, kwn, kwv, nk, "count");
        return jb_replace(c, s, args[0], args[1], cnt ? iv(cnt) : -1);
    }
    if (!strcmp(m, "lower") || !strcmp(m, "casefold"))
        return jb_case_map(c, s, 'l');
    if (!strcmp(m, "upper"))
        return jb_case_map(c, s, 'u');
    if (!strcmp(m, "title"))
        return jb_case_map(c, s, 't');
    if (!strcmp(m, "capitalize")) {
        jv *low = jb_case_map(c, s, 'l');
        if (!low->u.str.n)
            return low;
        uint32_t cp;
        size_t l = ju_dec(s->u.str.s, s->u.str.n, &cp);
        struct jbuf b = {0};
        put_cp(c, &b, cp_case(c, cp, 1));
        size_t l2 = ju_off(low->u.str.s, low->u.str.n, 1);
        (void)l;
        jbuf_put(A, &b, low->u.str.s + l2, low->u.str.n - l2);
        return new_str(c, &b);
    }
    if (!strcmp(m, "swapcase"))
        return jb_case_map(c, s, 's');
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex") ||
        !strcmp(m, "count")) {
        jb_check_args(c, m, n, 1, 1);
        jb_want_str(c, args[0], "substring");
        if (!strcmp(m, "count")) {
            if (!args[0]->u.str.n)
                return jv_int(A, (int64_t)ju_len(s->u.str.s, s->u.str.n) + 1);
            int64_t k = 0;
            size_t i = 0;
            const char *f;
            while ((f = find_bytes(s->u.str.s + i, s->u.str.n - i, args[0]->u.str.s, args[0]->u.str.n))) {
                k++;
                i = (size_t)(f - s->u.str.s) + args[0]->u.str.n;
            }
            return jv_int(A, k);
        }
        int64_t r = find(s, args[0], m[0] == 'r');
        if (r < 0 && strstr(m, "index"))
            jfail(A, "substring not found");
        return jv_int(A, r);
    }
    if (!strcmp(m, "join")) {
        jb_check_args(c, m, n, 1, 1);
        return jb_str_join(c, s, args[0]);
    }
    if (!strcmp(m, "format"))
        return str_format(c, s, args, n, kwn, kwv, nk);
    if (!strncmp(m, "is", 2))
        return jv_bool(jb_str_pred(c, s, m));
    if (!strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust")) {
        jb_check_args(c, m, n, 1, 2);
        if (!is_int(args[0]))
            jfail(A, "'%s' object cannot be interpreted as an integer", jv_type_name(args[0]));
        return jb_pad(c, s, iv(args[0]), n > 1 ? args[1] : NULL, m[0]);
    }
    if (!strcmp(m, "zfill")) {
        jb_check_args(c, m, n, 1, 1);
        if (!is_int(args[0]))
            jfail(A, "'%s' object cannot be interpreted as an integer", jv_type_name(args[0]));
        size_t len = ju_len(s->u.str.s, s->u.str.n);
        if (iv(args[0]) <= (int64_t)len)
            return self;
        if (iv(args[0]) > 1 << 24)
            jfail(A, "unsupported: zfill to %lld", (long long)iv(args[0]));
        struct jbuf b = {0};
        size_t st = 0;
        if (s->u.str.n && (s->u.str.s[0] == '-' || s->u.str.s[0] == '+')) {
            jbuf_put(A, &b, s->u.str.s, 1);
            st = 1;
        }
        for (int64_t i = 0; i < iv(args[0]) - (int64_t)len; i++)
            jbuf_put(A, &b, "0", 1);
        jbuf_put(A, &b, s->u.str.s + st, s->u.str.n - st);
        return new_str(c, &b);
    }
    if (!strcmp(m, "partition") || !strcmp(m, "rpartition")) {
        jb_check_args(c, m, n, 1, 1);
        jb_want_str(c, args[0], "separator");
        if (!args[0]->u.str.n)
            jfail(A, "empty separator");
        int64_t at = find(s, args[0], m[0] == 'r');
        jv *t = jv_tuple(A, 3);
        if (at < 0) {
            jv *e = jv_str_nocopy(A, "", 0);
            t->u.list.items[0] = m[0] == 'r' ? e : self;
            t->u.list.items[1] = e;
            t->u.list.items[2] = m[0] == 'r' ? self : e;
            return t;
        }
        size_t o = ju_off(s->u.str.s, s->u.str.n, (size_t)at);
        t->u.list.items[0] = jv_str_nocopy(A, s->u.str.s, o);
        t->u.list.items[1] = args[0];
        t->u.list.items[2] = jv_str_nocopy(A, s->u.str.s + o + args[0]->u.str.n, s->u.str.n - o - args[0]->u.str.n);
        return t;
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        jb_check_args(c, m, n, 1, 1);
        jb_want_str(c, args[0], m);
        if (!affix(c, s, args[0], m[6] == 's'))
            return self;
        size_t k = args[0]->u.str.n;
        return m[6] == 's' ? jv_str_nocopy(A, s->u.str.s, s->u.str.n - k)
                           : jv_str_nocopy(A, s->u.str.s + k, s->u.str.n - k);
    }
    jfail(A, "unsupported: str.%s()", m);
}
