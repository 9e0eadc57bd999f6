/* reasoning.c - <think SUF> ... </think SUF> splitting with marker hold-back. */
#include "text/reasoning.h"

#include <string.h>

void hy_reasoning_init_markers(struct hy_reasoning *r, int start_in_reasoning, const char *open, const char *close)
{
    memset(r, 0, sizeof(*r));
    r->in_reasoning = start_in_reasoning ? 1 : 0;
    r->markers[0] = open;
    r->markers[1] = close;
}

void hy_reasoning_init(struct hy_reasoning *r, int start_in_reasoning)
{
    hy_reasoning_init_markers(r, start_in_reasoning, HY_THINK_OPEN, HY_THINK_CLOSE);
}

int hy_reasoning_feed(struct hy_reasoning *r, const char *text, size_t len, struct hy_sbuf *content,
                      struct hy_sbuf *reasoning)
{
    if (hy_sbuf_append(&r->held, text, len))
        return -1;
    for (;;) {
        const char *h = r->held.p;
        size_t hl = r->held.len;
        struct hy_sbuf *side = r->in_reasoning ? reasoning : content;
        /* earliest complete marker */
        size_t pos = (size_t)-1;
        int which = -1;
        for (int i = 0; i < 2; i++) {
            const char *f = hl ? memmem(h, hl, r->markers[i], strlen(r->markers[i])) : NULL;
            if (f && (size_t)(f - h) < pos) {
                pos = (size_t)(f - h);
                which = i;
            }
        }
        if (which >= 0) {
            if (hy_sbuf_append(side, h, pos))
                return -1;
            r->in_reasoning = which == 0;
            hy_sbuf_consume(&r->held, pos + strlen(r->markers[which]));
            continue;
        }
        /* hold back the longest suffix that may begin a marker */
        size_t keep = 0;
        for (int i = 0; i < 2; i++) {
            size_t ml = strlen(r->markers[i]);
            for (size_t k = ml - 1 < hl ? ml - 1 : hl; k > keep; k--)
                if (!memcmp(h + hl - k, r->markers[i], k)) {
                    keep = k;
                    break;
                }
        }
        if (hy_sbuf_append(side, h, hl - keep))
            return -1;
        hy_sbuf_consume(&r->held, hl - keep);
        return 0;
    }
}

int hy_reasoning_flush(struct hy_reasoning *r, struct hy_sbuf *content, struct hy_sbuf *reasoning)
{
    if (r->held.len == 0)
        return 0;
    int rc = hy_sbuf_append(r->in_reasoning ? reasoning : content, r->held.p, r->held.len);
    hy_sbuf_consume(&r->held, r->held.len);
    return rc;
}

static const char *last_occurrence(const char *s, size_t len, const char *needle)
{
    size_t nl = strlen(needle);
    const char *last = NULL, *p = s;
    while (len >= nl) {
        const char *f = memmem(p, len, needle, nl);
        if (!f)
            break;
        last = f;
        len -= (size_t)(f - p) + 1;
        p = f + 1;
    }
    return last;
}

int hy_reasoning_prompt_open_markers(const char *prompt, size_t len, const char *open, const char *close)
{
    if (!prompt || !open || !close || !open[0] || !close[0])
        return 0;
    const char *o = last_occurrence(prompt, len, open);
    const char *c = last_occurrence(prompt, len, close);
    return o && (!c || o > c);
}

int hy_reasoning_prompt_open(const char *prompt, size_t len)
{
    return hy_reasoning_prompt_open_markers(prompt, len, HY_THINK_OPEN, HY_THINK_CLOSE);
}

void hy_reasoning_free(struct hy_reasoning *r)
{
    hy_sbuf_free(&r->held);
}
