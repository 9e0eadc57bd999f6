/* stop.h - stop strings over streamed text (OpenAI `stop`).
 *
 * Text is fed in pieces as it is detokenized. Text that could still be the start of a stop
 * string is held back; once a stop string appears, the text before it is released and the stop
 * string itself and everything after it are dropped. So a client never sees any prefix of a stop
 * string that later completes, and never sees the stop string.
 */
#ifndef HY_TEXT_STOP_H
#define HY_TEXT_STOP_H

#include "base/sbuf.h"

#include <stddef.h>

struct hy_stop_matcher {
    char **stops; /* [n] copies, non-empty */
    size_t n;
    struct hy_sbuf held; /* text not yet released */
    int matched;         /* 1 once a stop string was seen (later feeds are ignored) */
    const char *which;   /* the stop string that matched (points into stops), else NULL */
};

/* Copies the n stop strings (empty strings are skipped). Returns 0 or -1 on OOM. */
int hy_stop_init(struct hy_stop_matcher *m, const char *const *stops, size_t n);

/* Feeds len bytes; appends the text that can be released to *out. Returns 1 when a stop string
 * matched (the text before it has been released; stop here), 0 otherwise, -1 on OOM. */
int hy_stop_feed(struct hy_stop_matcher *m, const char *text, size_t len, struct hy_sbuf *out);

/* End of generation without a match: releases the held text into *out. Returns 0 or -1 on OOM. */
int hy_stop_flush(struct hy_stop_matcher *m, struct hy_sbuf *out);

void hy_stop_free(struct hy_stop_matcher *m);

#endif
