/* pretok.c - normalizers and pre-tokenizers of Hugging Face tokenizer.json (Prepend, Replace,
 * Split, ByteLevel, Metaspace; Sequence is flattened at load time) and the tiktoken split.
 *
 * A segment of text (between added tokens) is normalized, then cut into pieces step by step
 * exactly as the `tokenizers` crate's PreTokenizedString does: every step refines every current
 * piece; empty pieces disappear. Regexes are PCRE2 with UTF + UCP, JIT-compiled, and
 * PCRE2_MATCH_INVALID_UTF so that invalid UTF-8 input never makes matching fail (invalid bytes
 * simply never match and end up in non-match pieces).
 */
#include "text/tok_internal.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

pcre2_code *hy_tok_regex_compile(const char *pattern, size_t len)
{
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &errcode,
                                   &erroff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof(msg));
        hy_err_set("bad regex at offset %zu: %s", (size_t)erroff, (const char *)msg);
        return NULL;
    }
    /* JIT is an optimization: when unavailable, pcre2_match interprets. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    return re;
}

int hy_pieces_push(struct hy_pieces *l, const char *p, size_t n, int first)
{
    if (n == 0)
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct hy_piece *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].p = p;
    l->v[l->n].n = n;
    l->v[l->n].first = first;
    l->n++;
    return 0;
}

int hy_tok_scratch_init(struct hy_tok_scratch *s)
{
    memset(s, 0, sizeof(*s));
    s->md = pcre2_match_data_create(4, NULL);
    s->mctx = pcre2_match_context_create(NULL);
    s->jstack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
    if (!s->md || !s->mctx || !s->jstack) {
        hy_tok_scratch_free(s);
        return hy_err_set("tokenizer: out of memory");
    }
    pcre2_jit_stack_assign(s->mctx, NULL, s->jstack);
    return 0;
}

void hy_tok_scratch_free(struct hy_tok_scratch *s)
{
    pcre2_match_data_free(s->md);
    pcre2_match_context_free(s->mctx);
    pcre2_jit_stack_free(s->jstack);
    hy_arena_free(&s->arena);
    free(s->a.v);
    free(s->b.v);
    free(s->segs);
    free(s->sym);
    free(s->prev);
    free(s->next);
    free(s->cut);
    free(s->heap);
    free(s->ids);
    memset(s, 0, sizeof(*s));
}

static int seg_push(struct hy_tok_scratch *s, size_t *nseg, size_t st, size_t en, int m)
{
    if (*nseg == s->seg_cap) {
        size_t cap = s->seg_cap ? s->seg_cap * 2 : 64;
        struct hy_seg *v = realloc(s->segs, cap * sizeof(*v));
        if (!v)
            return -1;
        s->segs = v;
        s->seg_cap = cap;
    }
    s->segs[*nseg].st = st;
    s->segs[*nseg].en = en;
    s->segs[*nseg].m = m;
    (*nseg)++;
    return 0;
}

static size_t char_len(const char *p, size_t n)
{
    uint32_t cp;
    int l = hy_utf8_decode((const unsigned char *)p, n, &cp);
    return l > 0 ? (size_t)l : 1;
}

/* Lists the matches and the gaps between them of one piece into s->segs (covering it). */
static int find_matches(const struct hy_pt_step *st, struct hy_tok_scratch *s, const char *p, size_t n, size_t *nseg)
{
    *nseg = 0;
    size_t prev = 0, off = 0;
    if (st->re) {
        while (off <= n) {
            int rc = pcre2_match(st->re, (PCRE2_SPTR)p, n, off, 0, s->md, s->mctx);
            if (rc == PCRE2_ERROR_NOMATCH)
                break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof(msg));
                return hy_err_set("tokenizer: regex match failed: %s", (const char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
            size_t ms = ov[0], me = ov[1];
            if (ms > prev && seg_push(s, nseg, prev, ms, 0) != 0)
                return -1;
            if (me > ms && seg_push(s, nseg, ms, me, 1) != 0)
                return -1;
            prev = me;
            if (me == ms) { /* empty match: splits here, then move on by one character */
                if (ms >= n)
                    break;
                off = ms + char_len(p + ms, n - ms);
            } else {
                off = me;
            }
        }
    } else if (st->lit_len > 0) {
        while (off < n) {
            const char *q = memmem(p + off, n - off, st->lit, st->lit_len);
            if (!q)
                break;
            size_t ms = (size_t)(q - p), me = ms + st->lit_len;
            if (ms > prev && seg_push(s, nseg, prev, ms, 0) != 0)
                return -1;
            if (seg_push(s, nseg, ms, me, 1) != 0)
                return -1;
            prev = off = me;
        }
    }
    if (prev < n && seg_push(s, nseg, prev, n, 0) != 0)
        return -1;
    if (st->invert)
        for (size_t i = 0; i < *nseg; i++)
            s->segs[i].m = !s->segs[i].m;
    return 0;
}

/* Splits piece `pc` with `st`, appending the resulting pieces to `out`. */
static int split_piece(const struct hy_pt_step *st, struct hy_tok_scratch *s, const struct hy_piece *pc, int behavior,
                       struct hy_pieces *out)
{
    size_t nseg;
    if (find_matches(st, s, pc->p, pc->n, &nseg) != 0)
        return -1;
    struct hy_seg *g = s->segs;
    size_t k = 0; /* number of output segments kept in g (rewritten in place) */
    int prev_match = 0;
    switch (behavior) {
    case HY_SPLIT_REMOVED:
        for (size_t i = 0; i < nseg; i++)
            if (!g[i].m)
                g[k++] = g[i];
        break;
    case HY_SPLIT_KEEP_MATCHES:
        for (size_t i = 0; i < nseg; i++)
            if (g[i].m)
                g[k++] = g[i];
        break;
    case HY_SPLIT_ISOLATED:
        k = nseg;
        break;
    case HY_SPLIT_MERGED_PREV:
        for (size_t i = 0; i < nseg; i++) {
            if (g[i].m && !prev_match && k > 0)
                g[k - 1].en = g[i].en;
            else
                g[k++] = g[i];
            prev_match = g[i].m;
        }
        break;
    case HY_SPLIT_MERGED_NEXT: {
        /* right to left: a match joins the piece that follows it */
        size_t w = nseg;
        for (size_t r = nseg; r-- > 0;) {
            struct hy_seg cur = g[r];
            if (cur.m && !prev_match && w < nseg)
                g[w].st = cur.st;
            else
                g[--w] = cur;
            prev_match = cur.m;
        }
        for (size_t i = w; i < nseg; i++)
            g[k++] = g[i];
        break;
    }
    case HY_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < nseg; i++) {
            if (k > 0 && g[i].m == prev_match)
                g[k - 1].en = g[i].en;
            else
                g[k++] = g[i];
            prev_match = g[i].m;
        }
        break;
    default:
        return hy_err_set("tokenizer: unknown split behavior");
    }
    for (size_t i = 0; i < k; i++)
        if (hy_pieces_push(out, pc->p + g[i].st, g[i].en - g[i].st, pc->first && g[i].st == 0) != 0)
            return -1;
    return 0;
}

/* Returns a copy of p with every occurrence of `pat` replaced by `rep` (arena), or p itself when
 * there is none. */
static const char *replace_all(struct hy_arena *a, const char *p, size_t n, const char *pat, size_t pat_len,
                               const char *rep, size_t rep_len, size_t *out_n)
{
    size_t count = 0;
    for (const char *q = p; pat_len && (q = memmem(q, n - (size_t)(q - p), pat, pat_len)); q += pat_len)
        count++;
    if (count == 0) {
        *out_n = n;
        return p;
    }
    size_t m = n + count * rep_len - count * pat_len;
    char *buf = malloc(m + 1);
    if (!buf)
        return NULL;
    size_t w = 0, i = 0;
    while (i < n) {
        if (i + pat_len <= n && memcmp(p + i, pat, pat_len) == 0) {
            memcpy(buf + w, rep, rep_len);
            w += rep_len;
            i += pat_len;
        } else {
            buf[w++] = p[i++];
        }
    }
    const char *r = hy_arena_dup(a, buf, w);
    free(buf);
    *out_n = w;
    return r;
}

static const char *prepend(struct hy_arena *a, const char *pre, size_t pre_len, const char *p, size_t n)
{
    char *buf = malloc(pre_len + n + 1);
    if (!buf)
        return NULL;
    memcpy(buf, pre, pre_len);
    memcpy(buf + pre_len, p, n);
    const char *r = hy_arena_dup(a, buf, pre_len + n);
    free(buf);
    return r;
}

int hy_tok_pretokenize(const struct hy_tokenizer *t, struct hy_tok_scratch *s, const char *text, size_t len, int first)
{
    const char *cur = text;
    size_t n = len;
    for (int i = 0; i < t->n_norm; i++) {
        const struct hy_norm_step *ns = &t->norm[i];
        if (ns->kind == HY_NORM_PREPEND) {
            if (n == 0)
                continue;
            cur = prepend(&s->arena, ns->content, ns->content_len, cur, n);
            n += ns->content_len;
        } else {
            cur = replace_all(&s->arena, cur, n, ns->pattern, ns->pattern_len, ns->content, ns->content_len, &n);
        }
        if (!cur)
            return hy_err_set("tokenizer: out of memory");
    }
    s->a.n = 0;
    if (hy_pieces_push(&s->a, cur, n, first) != 0)
        return hy_err_set("tokenizer: out of memory");
    for (int i = 0; i < t->n_pt; i++) {
        const struct hy_pt_step *st = &t->pt[i];
        s->b.n = 0;
        for (size_t k = 0; k < s->a.n; k++) {
            struct hy_piece pc = s->a.v[k];
            int rc = 0;
            if (st->kind == HY_PT_SPLIT) {
                rc = split_piece(st, s, &pc, st->behavior, &s->b);
            } else if (st->kind == HY_PT_BYTELEVEL) {
                if (st->add_prefix_space && pc.p[0] != ' ') {
                    pc.p = prepend(&s->arena, " ", 1, pc.p, pc.n);
                    pc.n++;
                    if (!pc.p)
                        return hy_err_set("tokenizer: out of memory");
                }
                rc = st->re ? split_piece(st, s, &pc, HY_SPLIT_ISOLATED, &s->b)
                            : hy_pieces_push(&s->b, pc.p, pc.n, pc.first);
            } else { /* METASPACE */
                size_t rl = strlen(st->replacement);
                pc.p = replace_all(&s->arena, pc.p, pc.n, " ", 1, st->replacement, rl, &pc.n);
                if (!pc.p)
                    return hy_err_set("tokenizer: out of memory");
                int want = st->prepend == 1 || (st->prepend == 2 && pc.first);
                if (want && !(pc.n >= rl && memcmp(pc.p, st->replacement, rl) == 0)) {
                    pc.p = prepend(&s->arena, st->replacement, rl, pc.p, pc.n);
                    pc.n += rl;
                    if (!pc.p)
                        return hy_err_set("tokenizer: out of memory");
                }
                if (st->split) {
                    struct hy_pt_step lit = {.kind = HY_PT_SPLIT};
                    lit.lit = (char *)st->replacement;
                    lit.lit_len = rl;
                    rc = split_piece(&lit, s, &pc, HY_SPLIT_MERGED_NEXT, &s->b);
                } else {
                    rc = hy_pieces_push(&s->b, pc.p, pc.n, pc.first);
                }
            }
            if (rc != 0)
                return -1;
        }
        struct hy_pieces tmp = s->a;
        s->a = s->b;
        s->b = tmp;
    }
    return 0;
}
