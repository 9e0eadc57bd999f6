/* spec_gate.c - the speculation gate: measured decode speed with and without drafts (spec.h). */
#include "engine/spec.h"

#include <string.h>

#define WINDOW 8        /* pure-decode steps per measurement window */
#define FIRST_WINDOW 2  /* the first plain window (where the MTP KV pass is first measured) */
#define EXPLOIT_MIN 4   /* windows in the faster mode before the first probe of the other */
#define EXPLOIT_MAX 64  /* probes that keep losing are spaced out up to this many windows */
#define HARD_STEPS 4096 /* pure-decode steps with the MTP layer off once drafting cannot win */

void hy_spec_gate_init(struct hy_spec *s)
{
    s->mode = 0;
    s->probing = 1;
    s->hard_left = 0;
    s->win_steps = s->exploit_left = s->skip = 0;
    s->exploit_len = EXPLOIT_MIN;
    s->win_tokens = s->win_seqs = s->win_drafts = 0;
    s->win_sec = s->win_mtp_sec = 0.0;
    memset(s->rate, 0, sizeof(s->rate));
    memset(s->have, 0, sizeof(s->have));
    s->cost_off = s->sync_rel = 0.0;
    s->stats.drafting = !s->cfg.gate;
}

int hy_spec_drafting(const struct hy_spec *s)
{
    return !s->cfg.gate || (s->mode && s->hard_left == 0);
}

int hy_spec_mtp_active(const struct hy_spec *s)
{
    return !s->cfg.gate || s->hard_left == 0;
}

static double ema(double old, double v, int have, double w)
{
    return have ? (1.0 - w) * old + w * v : v;
}

static void clear_window(struct hy_spec *s)
{
    s->win_steps = 0;
    s->win_tokens = s->win_seqs = s->win_drafts = 0;
    s->win_sec = s->win_mtp_sec = 0.0;
}

static void set_mode(struct hy_spec *s, int mode)
{
    if (s->mode != mode)
        s->skip = 1;
    s->mode = mode;
    s->stats.drafting = hy_spec_drafting(s);
    s->stats.rate_on = s->rate[1];
    s->stats.rate_off = s->rate[0];
}

/* Ends the current window with its measured rate and picks the next mode. */
static void window_end(struct hy_spec *s)
{
    const int mode = s->mode, other = !mode;
    const double rate = (double)s->win_tokens / s->win_sec;
    if (!mode)
        s->cost_off = ema(s->cost_off, s->win_sec / (double)s->win_seqs, s->have[0], 0.5);
    s->rate[mode] = ema(s->rate[mode], rate, s->have[mode], 0.5);
    s->have[mode] = 1;
    if (mode)
        s->stats.gate_windows_on++;
    else
        s->stats.gate_windows_off++;
    clear_window(s);
    int next = mode;
    if (!s->have[other]) { /* measure the other mode once */
        next = other;
        s->probing = 1;
    } else if (s->probing) { /* a probe window ended: keep the faster mode */
        const int best = s->rate[1] >= s->rate[0];
        s->exploit_len = best == mode                       ? EXPLOIT_MIN
                         : s->exploit_len * 2 > EXPLOIT_MAX ? EXPLOIT_MAX
                                                            : s->exploit_len * 2;
        s->exploit_left = s->exploit_len;
        s->probing = 0;
        next = best;
    } else if (--s->exploit_left <= 0) { /* probe the other mode again */
        next = other;
        s->probing = 1;
    }
    set_mode(s, next);
}

/* Drafting lost: plain decode for a doubled exploit stretch (hard = 1: with the MTP layer off). */
static void drafting_lost(struct hy_spec *s, int hard)
{
    const double rate = (double)s->win_tokens / s->win_sec;
    s->rate[1] = ema(s->rate[1], rate, s->have[1], 0.5);
    s->have[1] = 1;
    s->stats.gate_windows_on++;
    s->exploit_len = s->exploit_len * 2 > EXPLOIT_MAX ? EXPLOIT_MAX : s->exploit_len * 2;
    s->exploit_left = s->exploit_len;
    s->probing = 0;
    if (hard) {
        s->hard_left = HARD_STEPS;
        s->stats.gate_hard_off++;
    } else {
        s->stats.gate_early_off++;
    }
    clear_window(s);
    set_mode(s, 0);
}

void hy_spec_gate_step(struct hy_spec *s, int pure_decode, int32_t n_seqs, int64_t tokens, double seconds,
                       double mtp_seconds)
{
    if (!s->cfg.gate || !pure_decode || seconds <= 0.0 || n_seqs <= 0)
        return;
    if (s->hard_left > 0) {
        if (--s->hard_left == 0) { /* new requests may draft again: start over */
            const uint64_t keep_hard = s->stats.gate_hard_off;
            hy_spec_gate_init(s);
            s->stats.gate_hard_off = keep_hard;
        }
        return;
    }
    if (s->skip) { /* the step after a switch still ran the old mode's drafts */
        s->skip = 0;
        s->win_drafts = 0;
        return;
    }
    s->win_tokens += tokens;
    s->win_seqs += n_seqs;
    s->win_sec += seconds;
    s->win_mtp_sec += mtp_seconds;
    s->win_steps++;
    if (!s->mode && seconds > mtp_seconds) /* the MTP KV pass of plain steps, relative to the rest */
        s->sync_rel = ema(s->sync_rel, mtp_seconds / (seconds - mtp_seconds), s->sync_rel > 0.0, 0.1);
    if (s->mode && s->win_steps >= 2) {
        const double seqs = (double)s->win_seqs;
        const double plain_bound = (s->win_sec - s->win_mtp_sec) * (1.0 + s->sync_rel);
        const double best_case = (1.0 + (double)s->win_drafts / seqs) * s->cost_off / (1.0 + s->sync_rel);
        if (s->have[0] && best_case < s->win_sec / seqs) {
            drafting_lost(s, 1);
            return;
        }
        if ((double)s->win_tokens / seqs * plain_bound < s->win_sec) {
            drafting_lost(s, 0);
            return;
        }
    }
    if (s->win_steps >= (!s->mode && !s->have[0] ? FIRST_WINDOW : WINDOW))
        window_end(s);
}
