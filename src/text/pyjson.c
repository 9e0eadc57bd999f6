/* pyjson.c - Python json.dumps / str() text forms of jansson values (see pyjson.h). */
#include "text/pyjson.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <math.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- buffer */

void hy_pyjson_buf_init(struct hy_pyjson_buf *b)
{
    memset(b, 0, sizeof *b);
}

static int buf_reserve(struct hy_pyjson_buf *b, size_t extra)
{
    if (b->failed)
        return -1;
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            b->failed = 1;
            return -1;
        }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

int hy_pyjson_buf_append(struct hy_pyjson_buf *b, const char *s, size_t n)
{
    if (buf_reserve(b, n))
        return -1;
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int hy_pyjson_buf_puts(struct hy_pyjson_buf *b, const char *s)
{
    return hy_pyjson_buf_append(b, s, strlen(s));
}

static int buf_putc(struct hy_pyjson_buf *b, char c)
{
    return hy_pyjson_buf_append(b, &c, 1);
}

char *hy_pyjson_buf_take(struct hy_pyjson_buf *b)
{
    if (b->failed || buf_reserve(b, 0)) {
        hy_pyjson_buf_free(b);
        return NULL;
    }
    char *p = b->data;
    hy_pyjson_buf_init(b);
    return p;
}

void hy_pyjson_buf_free(struct hy_pyjson_buf *b)
{
    free(b->data);
    hy_pyjson_buf_init(b);
}

/* ---------------------------------------------------------------- numbers */

/* Splits "d.ddde±X" (from %e) into its digits and exponent. */
static int split_sci(const char *sci, char *digits, int *exp10)
{
    int nd = 0;
    const char *s = sci;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9')
            digits[nd++] = *s;
    *exp10 = atoi(s + 1);
    return nd;
}

/* digits (nd of them) * 10^(exp10 - nd + 1) as a double. */
static double digits_value(const char *digits, int nd, int exp10)
{
    char buf[48];
    memcpy(buf, digits, (size_t)nd);
    snprintf(buf + nd, sizeof buf - (size_t)nd, "e%d", exp10 - nd + 1);
    return strtod(buf, NULL);
}

/* Adds delta (+1 or -1) to the last of nd digits, with carry / borrow; renormalizes so that the
 * first digit is non-zero (adjusting *exp10). Returns the new digit count. */
static int digits_step(char *digits, int nd, int *exp10, int delta)
{
    int i = nd - 1;
    if (delta > 0) {
        while (i >= 0 && digits[i] == '9')
            digits[i--] = '0';
        if (i >= 0) {
            digits[i]++;
        } else { /* 99..9 + 1 = 100..0 */
            memmove(digits + 1, digits, (size_t)nd);
            digits[0] = '1';
            nd++;
            (*exp10)++;
        }
    } else {
        while (i >= 0 && digits[i] == '0')
            digits[i--] = '9';
        if (i >= 0)
            digits[i]--;
        if (digits[0] == '0' && nd > 1) { /* 10..0 - 1 = 09..9 */
            memmove(digits, digits + 1, (size_t)(nd - 1));
            nd--;
            (*exp10)--;
        }
    }
    return nd;
}

/* The digits Python's repr picks for finite x > 0: the fewest significant digits that read back
 * as x, and of those the nearest to x. The correctly rounded p-digit value is the nearest; when it
 * misses x's rounding interval (possible next to a power of two, where the interval is lopsided)
 * its neighbour on the other side of x may still hit it. */
static void shortest_digits(double x, char *digits, int *nd_out, int *exp_out)
{
    char sci[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(sci, sizeof sci, "%.*e", p - 1, x);
        int exp10;
        int nd = split_sci(sci, digits, &exp10);
        double back = digits_value(digits, nd, exp10);
        if (back != x && p < 17) {
            char alt[24];
            int aexp = exp10;
            memcpy(alt, digits, (size_t)nd);
            int and_ = digits_step(alt, nd, &aexp, back < x ? 1 : -1);
            if (digits_value(alt, and_, aexp) == x) {
                memcpy(digits, alt, (size_t)and_);
                nd = and_;
                exp10 = aexp;
                back = x;
            }
        }
        if (back == x || p == 17) {
            while (nd > 1 && digits[nd - 1] == '0')
                nd--;
            *nd_out = nd;
            *exp_out = exp10;
            return;
        }
    }
}

int hy_pyjson_float_repr(double x, char *out)
{
    if (isnan(x))
        return sprintf(out, "nan");
    if (isinf(x))
        return sprintf(out, x < 0 ? "-inf" : "inf");
    if (x == 0)
        return sprintf(out, signbit(x) ? "-0.0" : "0.0");

    char digits[24];
    int nd = 0, exp10 = 0, neg = signbit(x) != 0;
    shortest_digits(fabs(x), digits, &nd, &exp10);
    int decpt = exp10 + 1; /* x = 0.d1d2...dn * 10^decpt */

    char *o = out;
    if (neg)
        *o++ = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -decpt; i++)
                *o++ = '0';
            for (int i = 0; i < nd; i++)
                *o++ = digits[i];
        } else if (decpt >= nd) {
            for (int i = 0; i < nd; i++)
                *o++ = digits[i];
            for (int i = nd; i < decpt; i++)
                *o++ = '0';
            *o++ = '.';
            *o++ = '0';
        } else {
            for (int i = 0; i < decpt; i++)
                *o++ = digits[i];
            *o++ = '.';
            for (int i = decpt; i < nd; i++)
                *o++ = digits[i];
        }
        *o = '\0';
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++)
                *o++ = digits[i];
        }
        o += sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
    return (int)(o - out);
}

static int put_int(struct hy_pyjson_buf *b, const json_t *v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    return hy_pyjson_buf_append(b, tmp, (size_t)n);
}

/* ---------------------------------------------------------------- json.dumps */

static int dumps_string(struct hy_pyjson_buf *b, const char *s, size_t n)
{
    if (buf_putc(b, '"'))
        return -1;
    size_t run = 0; /* start of the pending unescaped run */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        hy_pyjson_buf_append(b, s + run, i - run);
        run = i + 1;
        char esc[8];
        switch (c) {
        case '"':
            hy_pyjson_buf_puts(b, "\\\"");
            break;
        case '\\':
            hy_pyjson_buf_puts(b, "\\\\");
            break;
        case '\n':
            hy_pyjson_buf_puts(b, "\\n");
            break;
        case '\r':
            hy_pyjson_buf_puts(b, "\\r");
            break;
        case '\t':
            hy_pyjson_buf_puts(b, "\\t");
            break;
        case '\b':
            hy_pyjson_buf_puts(b, "\\b");
            break;
        case '\f':
            hy_pyjson_buf_puts(b, "\\f");
            break;
        default:
            snprintf(esc, sizeof esc, "\\u%04x", c);
            hy_pyjson_buf_puts(b, esc);
        }
    }
    hy_pyjson_buf_append(b, s + run, n - run);
    return buf_putc(b, '"');
}

int hy_pyjson_dumps(struct hy_pyjson_buf *b, const json_t *v)
{
    char tmp[40];
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_NULL:
        return hy_pyjson_buf_puts(b, "null");
    case JSON_TRUE:
        return hy_pyjson_buf_puts(b, "true");
    case JSON_FALSE:
        return hy_pyjson_buf_puts(b, "false");
    case JSON_INTEGER:
        return put_int(b, v);
    case JSON_REAL: {
        double x = json_real_value(v);
        if (isnan(x))
            return hy_pyjson_buf_puts(b, "NaN");
        if (isinf(x))
            return hy_pyjson_buf_puts(b, x < 0 ? "-Infinity" : "Infinity");
        int n = hy_pyjson_float_repr(x, tmp);
        return hy_pyjson_buf_append(b, tmp, (size_t)n);
    }
    case JSON_STRING:
        return dumps_string(b, json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        buf_putc(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                hy_pyjson_buf_puts(b, ", ");
            hy_pyjson_dumps(b, json_array_get(v, i));
        }
        return buf_putc(b, ']');
    }
    case JSON_OBJECT: {
        const char *key;
        json_t *val;
        int first = 1;
        buf_putc(b, '{');
        json_object_foreach((json_t *)v, key, val)
        {
            if (!first)
                hy_pyjson_buf_puts(b, ", ");
            first = 0;
            dumps_string(b, key, strlen(key));
            hy_pyjson_buf_puts(b, ": ");
            hy_pyjson_dumps(b, val);
        }
        return buf_putc(b, '}');
    }
    }
    return -1;
}

/* ---------------------------------------------------------------- str() / repr() */

/* Python's str.isprintable for one non-ASCII code point: false for the general categories
 * Cc, Cf, Cs, Co, Cn, Zl, Zp, Zs. Asked of PCRE2's Unicode tables (compiled once). */
static pcre2_code *g_nonprint;
static pthread_once_t g_nonprint_once = PTHREAD_ONCE_INIT;

static void nonprint_compile(void)
{
    int err;
    PCRE2_SIZE off;
    g_nonprint = pcre2_compile((PCRE2_SPTR) "[\\p{Cc}\\p{Cf}\\p{Cs}\\p{Co}\\p{Cn}\\p{Zl}\\p{Zp}\\p{Zs}]",
                               PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_ANCHORED, &err, &off, NULL);
}

static int is_printable_utf8(const char *s, size_t n, pcre2_match_data *md)
{
    if (!g_nonprint || !md)
        return 1;
    int rc = pcre2_match(g_nonprint, (PCRE2_SPTR)s, n, 0, PCRE2_NO_UTF_CHECK, md, NULL);
    return rc < 0;
}

/* Decodes one UTF-8 sequence at s[0..n); returns its byte length (1 for a stray byte, whose
 * value then stands for the code point) and the code point in *cp. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || len > n) {
        *cp = c;
        return 1;
    }
    uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1fu) : len == 3 ? (c & 0x0fu) : (c & 0x07u);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            *cp = c;
            return 1;
        }
        v = (v << 6) | (s[i] & 0x3fu);
    }
    *cp = v;
    return len;
}

static int repr_string(struct hy_pyjson_buf *b, const char *s, size_t n)
{
    char quote = '\'';
    if (memchr(s, '\'', n) && !memchr(s, '"', n))
        quote = '"';
    pthread_once(&g_nonprint_once, nonprint_compile);
    pcre2_match_data *md = NULL;
    buf_putc(b, quote);
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = utf8_next(u + i, n - i, &cp);
        char esc[16];
        if (cp == (uint32_t)quote || cp == '\\') {
            esc[0] = '\\';
            esc[1] = (char)cp;
            esc[2] = '\0';
            hy_pyjson_buf_puts(b, esc);
        } else if (cp == '\t') {
            hy_pyjson_buf_puts(b, "\\t");
        } else if (cp == '\n') {
            hy_pyjson_buf_puts(b, "\\n");
        } else if (cp == '\r') {
            hy_pyjson_buf_puts(b, "\\r");
        } else if (cp < 0x20 || cp == 0x7f || (len == 1 && cp >= 0x80)) {
            snprintf(esc, sizeof esc, "\\x%02x", (unsigned)cp);
            hy_pyjson_buf_puts(b, esc);
        } else if (cp < 0x80) {
            buf_putc(b, (char)cp);
        } else {
            if (!md)
                md = pcre2_match_data_create(1, NULL);
            if (is_printable_utf8(s + i, len, md))
                hy_pyjson_buf_append(b, s + i, len);
            else {
                if (cp <= 0xff)
                    snprintf(esc, sizeof esc, "\\x%02x", (unsigned)cp);
                else if (cp <= 0xffff)
                    snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
                else
                    snprintf(esc, sizeof esc, "\\U%08x", (unsigned)cp);
                hy_pyjson_buf_puts(b, esc);
            }
        }
        i += len;
    }
    pcre2_match_data_free(md);
    return buf_putc(b, quote);
}

/* repr(v): like str(v) except that strings are quoted. */
static int py_repr(struct hy_pyjson_buf *b, const json_t *v)
{
    if (v && json_is_string(v))
        return repr_string(b, json_string_value(v), json_string_length(v));
    return hy_pyjson_str(b, v);
}

int hy_pyjson_str(struct hy_pyjson_buf *b, const json_t *v)
{
    char tmp[40];
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_NULL:
        return hy_pyjson_buf_puts(b, "None");
    case JSON_TRUE:
        return hy_pyjson_buf_puts(b, "True");
    case JSON_FALSE:
        return hy_pyjson_buf_puts(b, "False");
    case JSON_INTEGER:
        return put_int(b, v);
    case JSON_REAL: {
        int n = hy_pyjson_float_repr(json_real_value(v), tmp);
        return hy_pyjson_buf_append(b, tmp, (size_t)n);
    }
    case JSON_STRING:
        return hy_pyjson_buf_append(b, json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        buf_putc(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                hy_pyjson_buf_puts(b, ", ");
            py_repr(b, json_array_get(v, i));
        }
        return buf_putc(b, ']');
    }
    case JSON_OBJECT: {
        const char *key;
        json_t *val;
        int first = 1;
        buf_putc(b, '{');
        json_object_foreach((json_t *)v, key, val)
        {
            if (!first)
                hy_pyjson_buf_puts(b, ", ");
            first = 0;
            repr_string(b, key, strlen(key));
            hy_pyjson_buf_puts(b, ": ");
            py_repr(b, val);
        }
        return buf_putc(b, '}');
    }
    }
    return -1;
}

/* ---------------------------------------------------------------- types */

int hy_pyjson_repr_string(struct hy_pyjson_buf *b, const char *s, size_t n)
{
    return repr_string(b, s, n);
}

int hy_pyjson_dumps_string(struct hy_pyjson_buf *b, const char *s, size_t n)
{
    return dumps_string(b, s, n);
}

const char *hy_pyjson_type_name(const json_t *v)
{
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_NULL:
        return "NoneType";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    case JSON_INTEGER:
        return "int";
    case JSON_REAL:
        return "float";
    case JSON_STRING:
        return "str";
    case JSON_ARRAY:
        return "list";
    case JSON_OBJECT:
        return "dict";
    }
    return "object";
}

int hy_pyjson_truthy(const json_t *v)
{
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_NULL:
    case JSON_FALSE:
        return 0;
    case JSON_TRUE:
        return 1;
    case JSON_INTEGER:
        return json_integer_value(v) != 0;
    case JSON_REAL:
        return json_real_value(v) != 0.0;
    case JSON_STRING:
        return json_string_length(v) != 0;
    case JSON_ARRAY:
        return json_array_size(v) != 0;
    case JSON_OBJECT:
        return json_object_size(v) != 0;
    }
    return 1;
}
