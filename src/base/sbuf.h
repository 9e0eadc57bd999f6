/* sbuf.h - a growable byte buffer for the server's text pipeline (always NUL-terminated). */
#ifndef HY_BASE_SBUF_H
#define HY_BASE_SBUF_H

#include <stddef.h>

struct hy_sbuf {
    char *p;    /* malloc'd; NULL until the first append */
    size_t len; /* bytes used (p[len] == 0 once allocated) */
    size_t cap; /* bytes allocated */
};

/* Appends n bytes. Returns 0, or -1 on OOM (buffer unchanged). */
int hy_sbuf_append(struct hy_sbuf *b, const char *s, size_t n);

/* Appends a NUL-terminated string. Returns 0 or -1 on OOM. */
int hy_sbuf_puts(struct hy_sbuf *b, const char *s);

/* printf-style append. Returns 0 or -1 on OOM / format error. */
int hy_sbuf_printf(struct hy_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Ensures room for `extra` more bytes (+ NUL). Returns 0 or -1 on OOM. */
int hy_sbuf_reserve(struct hy_sbuf *b, size_t extra);

/* Drops the first n bytes (n <= len). */
void hy_sbuf_consume(struct hy_sbuf *b, size_t n);

void hy_sbuf_free(struct hy_sbuf *b);

#endif
