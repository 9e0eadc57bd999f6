/* stop.c - stop-string matching with hold-back of pending partial matches. */
#include "text/stop.h"

#include <stdlib.h>
#include <string.h>

int hy_stop_init(struct hy_stop_matcher *m, const char *const *stops, size_t n)
{
    memset(m, 0, sizeof(*m));
    if (n == 0)
        return 0;
    m->stops = calloc(n, sizeof(char *));
    if (!m->stops)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!stops[i] || !stops[i][0])
            continue;
        m->stops[m->n] = strdup(stops[i]);
        if (!m->stops[m->n]) {
            hy_stop_free(m);
            return -1;
        }
        m->n++;
    }
    return 0;
}

/* Length of the longest proper suffix of s[0..len) that is a prefix of some stop string. */
static size_t pending_suffix(const struct hy_stop_matcher *m, const char *s, size_t len)
{
    size_t best = 0;
    for (size_t i = 0; i < m->n; i++) {
        size_t sl = strlen(m->stops[i]);
        size_t k = sl - 1 < len ? sl - 1 : len;
        for (; k > best; k--)
            if (!memcmp(s + len - k, m->stops[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

int hy_stop_feed(struct hy_stop_matcher *m, const char *text, size_t len, struct hy_sbuf *out)
{
    if (m->matched)
        return 1;
    if (m->n == 0)
        return hy_sbuf_append(out, text, len);
    if (hy_sbuf_append(&m->held, text, len))
        return -1;
    const char *h = m->held.p;
    size_t hl = m->held.len;
    /* earliest match of any stop string */
    size_t first = (size_t)-1;
    for (size_t i = 0; i < m->n; i++) {
        const char *f = memmem(h, hl, m->stops[i], strlen(m->stops[i]));
        if (f && (size_t)(f - h) < first) {
            first = (size_t)(f - h);
            m->which = m->stops[i];
        }
    }
    if (first != (size_t)-1) {
        if (hy_sbuf_append(out, h, first))
            return -1;
        m->matched = 1;
        m->held.len = 0;
        m->held.p[0] = 0;
        return 1;
    }
    size_t keep = pending_suffix(m, h, hl);
    if (hy_sbuf_append(out, h, hl - keep))
        return -1;
    hy_sbuf_consume(&m->held, hl - keep);
    return 0;
}

int hy_stop_flush(struct hy_stop_matcher *m, struct hy_sbuf *out)
{
    if (m->matched || m->held.len == 0)
        return 0;
    int rc = hy_sbuf_append(out, m->held.p, m->held.len);
    hy_sbuf_consume(&m->held, m->held.len);
    return rc;
}

void hy_stop_free(struct hy_stop_matcher *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->stops[i]);
    free(m->stops);
    hy_sbuf_free(&m->held);
    memset(m, 0, sizeof(*m));
}
