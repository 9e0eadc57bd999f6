/* err.h - per-thread "last error" message, dlerror-style.
 *
 * Functions that can fail on outside input (files, JSON, YAML, flags, HTTP bodies) return a
 * negative int (or NULL) and leave a one-line, human-readable reason here, naming the file /
 * key / tensor and the problem. The buffer is thread-local, so server threads never mix them up.
 */
#ifndef HY_BASE_ERR_H
#define HY_BASE_ERR_H

#include <stddef.h>

#if defined(__GNUC__)
#define HY_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define HY_PRINTF(a, b)
#endif

/* Formats the message into the thread's error buffer (truncated at 1024 bytes).
 * Returns -1 so callers can write `return hy_err_set("...")`. */
int hy_err_set(const char *fmt, ...) HY_PRINTF(1, 2);

/* Prepends "prefix: " to the current message (e.g. the file name at an outer level). Returns -1. */
int hy_err_prefix(const char *fmt, ...) HY_PRINTF(1, 2);

/* The current message; "" when none. Valid until the next hy_err_* call on this thread. */
const char *hy_err_msg(void);

/* Clears the message. */
void hy_err_clear(void);

#endif
