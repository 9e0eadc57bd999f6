#include "base/progress.h"

#include "base/log.h"
#include "base/timing.h"

#include <string.h>
#include <unistd.h>

#define DRAW_INTERVAL 0.25 /* seconds between redraws */

static void start(struct hy_progress *p, FILE *out, int active, const char *what, int64_t total,
                  enum hy_progress_unit unit)
{
    memset(p, 0, sizeof(*p));
    p->what = what;
    p->total = total > 0 ? total : 0;
    p->unit = unit;
    p->out = out;
    p->active = active;
    p->t0 = hy_time_now();
    p->t_draw = p->t0;
}

void hy_progress_begin(struct hy_progress *p, const char *what, int64_t total, enum hy_progress_unit unit)
{
    const int tty = isatty(fileno(stderr)) == 1 && (int)hy_log_get_level() >= (int)HY_LOG_INFO;
    start(p, stderr, tty, what, total, unit);
}

void hy_progress_begin_to(struct hy_progress *p, FILE *out, const char *what, int64_t total, enum hy_progress_unit unit)
{
    start(p, out, 1, what, total, unit);
}

/* "1.23 / 6.60 GB (18%), 1.05 GB/s" or "12/80 (15%), 0.52/s" into buf */
static void format_line(const struct hy_progress *p, int64_t done, double secs, char *buf, size_t len)
{
    const double rate = secs > 0 ? (double)done / secs : 0;
    int k;
    if (p->unit == HY_PROGRESS_BYTES) {
        k = p->total ? snprintf(buf, len, "%.2f / %.2f GB", (double)done / 1e9, (double)p->total / 1e9)
                     : snprintf(buf, len, "%.2f GB", (double)done / 1e9);
    } else {
        k = p->total ? snprintf(buf, len, "%lld/%lld", (long long)done, (long long)p->total)
                     : snprintf(buf, len, "%lld", (long long)done);
    }
    if (k < 0 || (size_t)k >= len)
        return;
    if (p->total)
        k += snprintf(buf + k, len - (size_t)k, " (%.0f%%)", 100.0 * (double)done / (double)p->total);
    if (k < 0 || (size_t)k >= len)
        return;
    if (p->unit == HY_PROGRESS_BYTES)
        snprintf(buf + k, len - (size_t)k, ", %.2f GB/s", rate / 1e9);
    else
        snprintf(buf + k, len - (size_t)k, ", %.2f/s", rate);
}

static void draw(struct hy_progress *p, int64_t done)
{
    char line[128];
    format_line(p, done, hy_time_now() - p->t0, line, sizeof(line));
    /* \033[K: clear what a longer line left */
    fprintf(p->out, "\r%s: %s%s%s\033[K", p->what, line, p->label[0] ? " - " : "", p->label);
    fflush(p->out);
    p->drawn = 1;
}

static void maybe_draw(struct hy_progress *p, int64_t done)
{
    const double now = hy_time_now();
    if (now - p->t_draw < DRAW_INTERVAL)
        return;
    p->t_draw = now;
    draw(p, done);
}

void hy_progress_add(struct hy_progress *p, int64_t n)
{
    if (!p->active)
        return;
    const int64_t done = __atomic_add_fetch(&p->done, n, __ATOMIC_RELAXED);
    if (__atomic_exchange_n(&p->busy, 1, __ATOMIC_ACQUIRE)) /* one drawer at a time; the others skip */
        return;
    maybe_draw(p, done);
    __atomic_store_n(&p->busy, 0, __ATOMIC_RELEASE);
}

void hy_progress_set(struct hy_progress *p, int64_t n)
{
    if (!p->active)
        return;
    p->done = n;
    maybe_draw(p, n);
}

void hy_progress_label(struct hy_progress *p, const char *label)
{
    snprintf(p->label, sizeof(p->label), "%s", label ? label : "");
}

void hy_progress_phase(struct hy_progress *p, int64_t n, const char *label)
{
    if (!p->active)
        return;
    p->done = n;
    hy_progress_label(p, label);
    p->t_draw = hy_time_now();
    draw(p, n);
}

void hy_progress_clear(struct hy_progress *p)
{
    if (!p->active || !p->drawn)
        return;
    fputs("\r\033[K", p->out);
    fflush(p->out);
    p->drawn = 0;
}

void hy_progress_end(struct hy_progress *p)
{
    if (!p->active)
        return;
    if (p->drawn) {
        const double secs = hy_time_now() - p->t0, rate = secs > 0 ? (double)p->done / secs : 0;
        if (p->unit == HY_PROGRESS_BYTES)
            fprintf(p->out, "\r%s: %.2f GB in %.1f s (%.2f GB/s)\033[K\n", p->what, (double)p->done / 1e9, secs,
                    rate / 1e9);
        else
            fprintf(p->out, "\r%s: %lld in %.1f s (%.2f/s)\033[K\n", p->what, (long long)p->done, secs, rate);
        fflush(p->out);
    }
    p->active = 0;
    p->drawn = 0;
}
