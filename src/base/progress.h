/* progress.h - one self-overwriting progress line on a terminal for long phases (model load,
 * quantize, bench), so minutes of work are never silent.
 *
 * The line goes to stderr only when stderr is a terminal (isatty) and the log level is info or
 * more (HYINFER_LOG=error|warn silence it); otherwise every call is a no-op, so logs, pipes and
 * tests see nothing of it. It is redrawn at most every 0.25 s. */
#ifndef HY_BASE_PROGRESS_H
#define HY_BASE_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

enum hy_progress_unit {
    HY_PROGRESS_BYTES, /* done/total are bytes: shown as GB with a GB/s rate */
    HY_PROGRESS_ITEMS, /* done/total are counts (layers, steps): shown as "k/n" with a per-second rate */
};

struct hy_progress {
    const char *what; /* "load", "quantize": the line's prefix (not owned; must outlive the progress) */
    int64_t total;    /* > 0 for a percentage; 0 = unknown */
    enum hy_progress_unit unit;
    int64_t done; /* updated atomically by hy_progress_add */
    double t0, t_draw;
    int active;     /* drawing at all (terminal, log level) */
    int drawn;      /* a line is on the screen (end must finish it) */
    int busy;       /* a hy_progress_add is redrawing */
    char label[64]; /* what is being worked on, shown after the figures ("" = nothing) */
    FILE *out;      /* stderr, or the stream given to hy_progress_begin_to */
};

/* Starts a progress of `total` units (0 = unknown) named `what` on stderr, when it is a terminal
 * and the log level is info or more; else p stays inactive (every other call a no-op). */
void hy_progress_begin(struct hy_progress *p, const char *what, int64_t total, enum hy_progress_unit unit);

/* The same on stream `out`, drawn whatever it is (for tests). out must outlive p. */
void hy_progress_begin_to(struct hy_progress *p, FILE *out, const char *what, int64_t total,
                          enum hy_progress_unit unit);

/* Adds n units done. Thread-safe (any OpenMP thread may call it); one caller at a time redraws,
 * the others return at once. */
void hy_progress_add(struct hy_progress *p, int64_t n);

/* Sets the units done to n (a single-threaded caller's absolute position, e.g. layer index) and
 * redraws when due. Not for concurrent use with hy_progress_add. */
void hy_progress_set(struct hy_progress *p, int64_t n);

/* Sets the text shown after the figures (e.g. the tensor being quantized), truncated to 63 bytes;
 * NULL clears it. Shown from the next redraw on. Single-threaded callers only. */
void hy_progress_label(struct hy_progress *p, const char *label);

/* Starts a phase: sets the units done to n and the label, and redraws at once (a phase may be long:
 * its line must show while it runs). Single-threaded callers only. */
void hy_progress_phase(struct hy_progress *p, int64_t n, const char *label);

/* Erases the drawn line (if any) so that an ordinary line can be printed; the next redraw draws it
 * again. */
void hy_progress_clear(struct hy_progress *p);

/* Ends it: when a line was drawn, it is replaced by a final one ("what: 6.60 GB in 5.1 s (1.29
 * GB/s)") followed by a newline. p may be reused with hy_progress_begin afterwards. */
void hy_progress_end(struct hy_progress *p);

#endif
