/* detok.c - incremental, streaming-safe detokenization.
 *
 * Byte-level BPE tokens often end in the middle of a UTF-8 character (a CJK character or an
 * emoji is split over two or three tokens). The detokenizer appends each token's bytes to a
 * small holding buffer and emits only complete, valid UTF-8 characters; an incomplete but so far
 * valid tail is held back for the next token. Bytes that can never become valid UTF-8 are
 * replaced by U+FFFD, one per maximal invalid subpart (the WHATWG / Unicode "best practice"), so
 * what a client receives is always valid UTF-8. For valid text the concatenated output equals
 * hy_tokenizer_decode() of the same ids.
 */
#include "text/tokenizer.h"

#include <stdlib.h>
#include <string.h>

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Length of the longest prefix of s[0..n) that can start a valid UTF-8 sequence, and through
 * *need the full length that sequence would have. Returns 0 when s[0] cannot start one. */
static size_t valid_prefix(const unsigned char *s, size_t n, size_t *need)
{
    unsigned c = s[0];
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
        *need = 1;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF)
        *need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        *need = 3;
        if (c == 0xE0)
            lo = 0xA0;
        if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        *need = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else {
        *need = 1;
        return 0;
    }
    size_t k = 1;
    for (; k < *need && k < n; k++) {
        unsigned b = s[k];
        unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (b < l || b > h)
            break;
    }
    return k;
}

static int out_append(char **out, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n + 1 > *cap || !*out) {
        size_t c = *cap ? *cap : 64;
        while (c < *len + n + 1)
            c *= 2;
        char *b = realloc(*out, c);
        if (!b)
            return -1;
        *out = b;
        *cap = c;
    }
    memcpy(*out + *len, p, n);
    *len += n;
    (*out)[*len] = '\0';
    return 0;
}

void hy_detok_init(struct hy_detok *d, const struct hy_tokenizer *tok, int skip_special)
{
    memset(d, 0, sizeof(*d));
    d->tok = tok;
    d->skip_special = skip_special;
    d->strip_left = hy_tokenizer_strip_leading(tok);
}

/* Emits what can be emitted from pending + data; keeps an incomplete valid tail in pending. */
static int feed(struct hy_detok *d, const char *data, size_t n, char **out, size_t *out_len, size_t *out_cap)
{
    size_t total = d->n_pending + n;
    unsigned char small[64];
    unsigned char *buf = total <= sizeof(small) ? small : malloc(total);
    if (!buf)
        return -1;
    memcpy(buf, d->pending, d->n_pending);
    memcpy(buf + d->n_pending, data, n);
    d->n_pending = 0;
    size_t i = 0, run = 0; /* run: start of the current stretch of valid bytes */
    int rc = 0;
    while (i < total) {
        size_t need, ok = valid_prefix(buf + i, total - i, &need);
        if (ok == need) {
            i += need;
            continue;
        }
        if (ok > 0 && i + ok == total) { /* incomplete tail: hold it */
            memcpy(d->pending, buf + i, ok);
            d->n_pending = ok;
            break;
        }
        /* invalid: flush the valid run, then one U+FFFD for the maximal subpart */
        if (out_append(out, out_len, out_cap, (const char *)buf + run, i - run) != 0 ||
            out_append(out, out_len, out_cap, REPLACEMENT, 3) != 0) {
            rc = -1;
            break;
        }
        i += ok > 0 ? ok : 1;
        run = i;
    }
    if (rc == 0) {
        size_t end = i < total ? i : total;
        rc = out_append(out, out_len, out_cap, (const char *)buf + run, end - run);
    }
    if (buf != small)
        free(buf);
    return rc;
}

int hy_detok_push(struct hy_detok *d, int32_t id, char **out, size_t *out_len, size_t *out_cap)
{
    size_t n;
    const char *b = hy_tokenizer_token_bytes(d->tok, id, &n);
    if (!b)
        return -1;
    d->n_emitted++;
    if (d->skip_special && hy_tokenizer_is_special(d->tok, id))
        return 0;
    while (d->strip_left > 0 && n > 0) {
        if (*b == ' ') {
            b++;
            n--;
            d->strip_left--;
        } else {
            d->strip_left = 0;
        }
    }
    if (n == 0)
        return out_append(out, out_len, out_cap, "", 0);
    return feed(d, b, n, out, out_len, out_cap);
}

int hy_detok_flush(struct hy_detok *d, char **out, size_t *out_len, size_t *out_cap)
{
    int rc = 0;
    if (d->n_pending > 0)
        rc = out_append(out, out_len, out_cap, REPLACEMENT, 3);
    d->n_pending = 0;
    if (rc == 0 && !*out)
        rc = out_append(out, out_len, out_cap, "", 0);
    return rc;
}
