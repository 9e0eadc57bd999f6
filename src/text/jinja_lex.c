/* jinja_lex.c - the Jinja lexer: template text -> tokens, with jinja2's whitespace rules as
 * transformers configures them (trim_blocks, lstrip_blocks, `-` / `+` markers, raw blocks,
 * comments, newline normalization and the dropped trailing newline). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_internal.h"

struct lexer {
    struct jarena *a;
    const char *s;
    size_t n, pos;
    int line;
    struct jtok *toks;
    size_t nt, cap;
};

static struct jtok *push(struct lexer *L, int kind)
{
    if (L->nt == L->cap) {
        size_t nc = L->cap ? 2 * L->cap : 256;
        L->toks = jarena_grow(L->a, L->toks, L->cap * sizeof *L->toks, nc * sizeof *L->toks);
        L->cap = nc;
    }
    struct jtok *t = &L->toks[L->nt++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->line = L->line;
    return t;
}

static int count_lines(const char *s, size_t n)
{
    int c = 0;
    for (size_t i = 0; i < n; i++)
        c += s[i] == '\n';
    return c;
}

/* finds "{{", "{%" or "{#" from pos; returns offset or n */
static size_t find_open(const char *s, size_t n, size_t pos)
{
    for (size_t i = pos; i + 1 < n; i++)
        if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#'))
            return i;
    return n;
}

/* lstrip_blocks: drops spaces/tabs ending text when they follow a newline (or line start) */
static size_t lstrip_text(const char *t, size_t n, int line_starting)
{
    size_t l = n;
    while (l > 0 && t[l - 1] != '\n')
        l--;
    if (l == 0 && !line_starting)
        return n;
    for (size_t i = l; i < n;) {
        uint32_t cp;
        size_t k = ju_dec(t + i, n - i, &cp);
        if (!ju_isspace(cp))
            return n;
        i += k;
    }
    return l;
}

static void emit_text(struct lexer *L, const char *t, size_t n)
{
    if (!n)
        return;
    struct jtok *k = push(L, TK_TEXT);
    k->s = t;
    k->n = n;
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    return i + ju_lstrip_ws(s + i, n - i);
}

/* is there "{%[-+]? raw [-]?%}" / endraw at i? returns the end offset (after %}) or 0 */
static size_t match_word_tag(const char *s, size_t n, size_t i, const char *word, int *lsign, int *rminus)
{
    if (i + 2 > n || s[i] != '{' || s[i + 1] != '%')
        return 0;
    size_t j = i + 2;
    *lsign = 0;
    if (j < n && (s[j] == '-' || s[j] == '+'))
        *lsign = s[j++];
    while (j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r'))
        j++;
    size_t wl = strlen(word);
    if (j + wl > n || memcmp(s + j, word, wl))
        return 0;
    j += wl;
    while (j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r'))
        j++;
    *rminus = 0;
    if (j < n && s[j] == '-') {
        *rminus = 1;
        j++;
    }
    if (j + 2 > n || s[j] != '%' || s[j + 1] != '}')
        return 0;
    return j + 2;
}

static void decode_string(struct lexer *L, struct jtok *t, const char *s, size_t n)
{
    char *o = jarena_alloc(L->a, n * 4 + 1); /* \x escapes may grow to 2 bytes, \N.. not supported */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\' || i + 1 >= n) {
            o[k++] = c;
            continue;
        }
        char e = s[++i];
        uint32_t cp = 0;
        int hex = 0;
        switch (e) {
        case 'n':
            o[k++] = '\n';
            continue;
        case 't':
            o[k++] = '\t';
            continue;
        case 'r':
            o[k++] = '\r';
            continue;
        case '\\':
        case '\'':
        case '"':
            o[k++] = e;
            continue;
        case '\n':
            continue;
        case 'a':
            o[k++] = '\a';
            continue;
        case 'b':
            o[k++] = '\b';
            continue;
        case 'f':
            o[k++] = '\f';
            continue;
        case 'v':
            o[k++] = '\v';
            continue;
        case 'x':
            hex = 2;
            break;
        case 'u':
            hex = 4;
            break;
        case 'U':
            hex = 8;
            break;
        case 'N':
            jfail(L->a, "line %d: unsupported string escape '\\N{...}'", t->line);
        default:
            if (e >= '0' && e <= '7') {
                int d = 0;
                while (d < 3 && i < n && s[i] >= '0' && s[i] <= '7') {
                    cp = cp * 8 + (uint32_t)(s[i] - '0');
                    i++;
                    d++;
                }
                i--;
                break;
            }
            o[k++] = '\\';
            o[k++] = e;
            continue;
        }
        if (hex) {
            for (int d = 0; d < hex; d++) {
                if (i + 1 >= n || !isxdigit((unsigned char)s[i + 1]))
                    jfail(L->a, "line %d: truncated \\%c escape in a string", t->line, e);
                char h = s[++i];
                cp = cp * 16 + (uint32_t)(isdigit((unsigned char)h) ? h - '0' : (tolower((unsigned char)h) - 'a' + 10));
            }
        }
        if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
            jfail(L->a, "line %d: unsupported string escape (surrogate or out of range code point)", t->line);
        k += ju_enc(cp, o + k);
    }
    t->s = o;
    t->n = k;
}

static int digit_run(const char *s, size_t n, size_t *i, int (*isd)(int))
{
    size_t st = *i;
    while (*i < n &&
           (isd((unsigned char)s[*i]) || (s[*i] == '_' && *i > st && *i + 1 < n && isd((unsigned char)s[*i + 1]))))
        (*i)++;
    return *i > st;
}

static int is_dec(int c)
{
    return c >= '0' && c <= '9';
}

/* lexes the inside of a {{ }} or {% %} tag; returns the offset after the closing marker */
static size_t lex_tag(struct lexer *L, size_t i, int block, int *trail_minus)
{
    const char *s = L->s;
    size_t n = L->n;
    int depth = 0;
    const char close = block ? '%' : '}';
    for (;;) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\f' || s[i] == '\v')) {
            if (s[i] == '\n')
                L->line++;
            i++;
        }
        if (i >= n)
            jfail(L->a, "line %d: unexpected end of template, expected '%s'", L->line, block ? "%}" : "}}");
        if (depth == 0 && s[i] == '-' && i + 2 < n && s[i + 1] == close && s[i + 2] == '}') {
            *trail_minus = 1;
            return i + 3;
        }
        if (depth == 0 && s[i] == close && i + 1 < n && s[i + 1] == '}') {
            *trail_minus = 0;
            return i + 2;
        }
        char c = s[i];
        if (isalpha((unsigned char)c) || c == '_') {
            size_t st = i;
            while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '_'))
                i++;
            struct jtok *t = push(L, TK_NAME);
            t->s = jarena_strndup(L->a, s + st, i - st);
            t->n = i - st;
            continue;
        }
        if (isdigit((unsigned char)c)) {
            size_t st = i;
            struct jtok *t = push(L, TK_INT);
            if (c == '0' && i + 1 < n && strchr("xXoObB", s[i + 1])) {
                int base = strchr("xX", s[i + 1]) ? 16 : strchr("oO", s[i + 1]) ? 8 : 2;
                i += 2;
                uint64_t v = 0;
                size_t ds = i;
                while (i < n && (isxdigit((unsigned char)s[i]) || s[i] == '_')) {
                    if (s[i] != '_') {
                        int d = isdigit((unsigned char)s[i]) ? s[i] - '0' : tolower((unsigned char)s[i]) - 'a' + 10;
                        if (d >= base)
                            break;
                        if (v > (UINT64_MAX >> 4))
                            jfail(L->a, "line %d: integer literal too large", L->line);
                        v = v * (uint64_t)base + (uint64_t)d;
                    }
                    i++;
                }
                if (i == ds || v > INT64_MAX)
                    jfail(L->a, "line %d: bad integer literal", L->line);
                t->i = (int64_t)v;
                continue;
            }
            digit_run(s, n, &i, is_dec);
            int isf = 0;
            if (i + 1 < n && s[i] == '.' && isdigit((unsigned char)s[i + 1])) {
                i++;
                digit_run(s, n, &i, is_dec);
                isf = 1;
            }
            if (i < n && (s[i] == 'e' || s[i] == 'E')) {
                size_t j = i + 1;
                if (j < n && (s[j] == '+' || s[j] == '-'))
                    j++;
                if (j < n && isdigit((unsigned char)s[j])) {
                    i = j;
                    digit_run(s, n, &i, is_dec);
                    isf = 1;
                }
            }
            char buf[128];
            size_t k = 0;
            for (size_t j = st; j < i && k < sizeof buf - 1; j++)
                if (s[j] != '_')
                    buf[k++] = s[j];
            buf[k] = 0;
            if (i - st >= sizeof buf - 1)
                jfail(L->a, "line %d: number literal too long", L->line);
            if (isf) {
                t->kind = TK_FLOAT;
                t->f = strtod(buf, NULL);
            } else {
                char *e;
                unsigned long long v = strtoull(buf, &e, 10);
                if (k > 19 || v > INT64_MAX)
                    jfail(L->a, "line %d: unsupported integer literal beyond 64 bits", L->line);
                t->i = (int64_t)v;
            }
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t st = ++i;
            int line = L->line;
            while (i < n && s[i] != c) {
                if (s[i] == '\\' && i + 1 < n)
                    i++;
                if (s[i] == '\n')
                    L->line++;
                i++;
            }
            if (i >= n)
                jfail(L->a, "line %d: unexpected end of string", line);
            struct jtok *t = push(L, TK_STRING);
            t->line = line;
            decode_string(L, t, s + st, i - st);
            i++;
            continue;
        }
        static const char *ops2[] = {"//", "**", "==", "!=", ">=", "<="};
        size_t ol = 0;
        for (size_t k = 0; k < sizeof ops2 / sizeof *ops2; k++)
            if (i + 1 < n && s[i] == ops2[k][0] && s[i + 1] == ops2[k][1])
                ol = 2;
        if (!ol && strchr("+-*/%~<>=.,:|()[]{}", c) && c)
            ol = 1;
        if (!ol)
            jfail(L->a, "line %d: unexpected char '%c'", L->line, c);
        if (c == '(' || c == '[' || c == '{')
            depth++;
        if ((c == ')' || c == ']' || c == '}') && depth > 0)
            depth--;
        struct jtok *t = push(L, TK_OP);
        t->s = jarena_strndup(L->a, s + i, ol);
        t->n = ol;
        i += ol;
    }
}

struct jtok *jlex(struct jarena *a, const char *src, size_t len, size_t *n_out)
{
    struct lexer L = {.a = a, .line = 1};
    /* newline normalization (\r\n, \r -> \n) and the dropped trailing newline */
    char *s = jarena_alloc(a, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else
            s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n')
        n--;
    L.s = s;
    L.n = n;
    size_t pos = 0;
    int line_starting = 1;
    while (pos < n) {
        size_t o = find_open(s, n, pos);
        const char *text = s + pos;
        size_t tl = o - pos;
        if (o >= n) {
            emit_text(&L, text, tl);
            L.line += count_lines(text, tl);
            break;
        }
        char kind = s[o + 1];
        char sign = o + 2 < n && (s[o + 2] == '-' || s[o + 2] == '+') ? s[o + 2] : 0;
        int rl, rm;
        size_t raw_end = kind == '%' ? match_word_tag(s, n, o, "raw", &rl, &rm) : 0;
        int tag_line = L.line + count_lines(text, tl);
        if (sign == '-')
            tl = ju_rstrip_ws(text, tl);
        else if (sign != '+' && kind != '{')
            tl = lstrip_text(text, tl, line_starting);
        emit_text(&L, text, tl);
        L.line = tag_line;
        if (raw_end) {
            size_t p = raw_end;
            if (rm)
                p = skip_ws(s, n, p);
            L.line += count_lines(s + raw_end, p - raw_end);
            size_t q = p, end = 0;
            int el = 0, em = 0;
            for (; q < n; q++)
                if (s[q] == '{' && (end = match_word_tag(s, n, q, "endraw", &el, &em)))
                    break;
            if (!end)
                jfail(a, "line %d: unexpected end of template, expected 'endraw'", L.line);
            size_t dl = q - p;
            if (el == '-')
                dl = ju_rstrip_ws(s + p, dl);
            else if (el != '+')
                dl = lstrip_text(s + p, dl, 0);
            emit_text(&L, s + p, dl);
            L.line += count_lines(s + p, end - p);
            pos = end;
            if (em) {
                size_t e2 = skip_ws(s, n, pos);
                L.line += count_lines(s + pos, e2 - pos);
                pos = e2;
            } else if (pos < n && s[pos] == '\n') {
                pos++;
                L.line++;
            }
            line_starting = pos > 0 && s[pos - 1] == '\n';
            continue;
        }
        size_t i = o + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            size_t e = i;
            while (e + 1 < n && !(s[e] == '#' && s[e + 1] == '}'))
                e++;
            if (e + 1 >= n)
                jfail(a, "line %d: missing end of comment tag", L.line);
            int minus = e > i && s[e - 1] == '-';
            L.line += count_lines(s + o, e + 2 - o);
            pos = e + 2;
            if (minus) {
                size_t e2 = skip_ws(s, n, pos);
                L.line += count_lines(s + pos, e2 - pos);
                pos = e2;
            } else if (pos < n && s[pos] == '\n') {
                pos++;
                L.line++;
            }
            line_starting = pos > 0 && s[pos - 1] == '\n';
            continue;
        }
        int block = kind == '%';
        push(&L, block ? TK_BLOCK_BEGIN : TK_VAR_BEGIN);
        int minus = 0;
        pos = lex_tag(&L, i, block, &minus);
        push(&L, block ? TK_BLOCK_END : TK_VAR_END);
        if (minus) {
            size_t e2 = skip_ws(s, n, pos);
            L.line += count_lines(s + pos, e2 - pos);
            pos = e2;
        } else if (block && pos < n && s[pos] == '\n') {
            pos++;
            L.line++;
        }
        line_starting = pos > 0 && s[pos - 1] == '\n';
    }
    push(&L, TK_EOF);
    *n_out = L.nt;
    return L.toks;
}
