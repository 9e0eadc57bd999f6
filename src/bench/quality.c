/* quality.c - next-token agreement of model A with reference model B (see quality.h). */
#include "bench/quality.h"

#include "base/err.h"
#include "engine/executor.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void hy_quality_stats_init(struct hy_quality_stats *s)
{
    memset(s, 0, sizeof(*s));
    s->max_kl_position = -1;
}

void hy_quality_summarize(const struct hy_quality_stats *s, struct hy_quality_summary *out)
{
    memset(out, 0, sizeof(*out));
    if (s->positions <= 0)
        return;
    const double n = (double)s->positions;
    out->top1_agreement = (double)s->top1_agree / n;
    out->top1_stderr = sqrt(out->top1_agreement * (1.0 - out->top1_agreement) / n);
    out->top5_agreement = (double)s->a_in_b_top5 / n;
    out->mean_kl = s->sum_kl / n;
    out->max_kl = s->max_kl;
    out->nll_a = s->sum_nll_a / n;
    out->nll_b = s->sum_nll_b / n;
    out->ppl_a = exp(out->nll_a);
    out->ppl_b = exp(out->nll_b);
}

/* exp(x) for -700 <= x <= 0 in double, written so that `omp simd` loops vectorize it (glibc's exp
 * does not vectorize without -ffast-math and was 3/4 of the run time on a 128k vocabulary; a
 * conditional in here would stop the vectorizer too, so callers keep x in range). x = k ln2 + r,
 * |r| <= ln2/2, exp(r) by its Taylor series to degree 13 (truncation < 5e-18 relative), times 2^k
 * built in the exponent bits. Relative error about 2e-16. */
#define EXP_NEG_MIN (-700.0)
static inline __attribute__((always_inline)) double exp_neg(double x)
{
    /* round to nearest by the 1.5 * 2^52 trick; k also sits in the low bits of t's mantissa */
    const double t = x * 1.4426950408889634 + 0x1.8p52;
    const double k = t - 0x1.8p52;
    const double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    uint64_t tu, su;
    memcpy(&tu, &t, sizeof(tu));
    su = (tu + 1023) << 52; /* tu = bits(1.5 * 2^52) + k; the shift drops the high bits */
    double sc;
    memcpy(&sc, &su, sizeof(sc));
    return p * sc;
}

/* sums[0] = sum exp(a - ma), sums[1] = sum exp(b - mb), sums[2] = sum exp(b - mb) (b - a), for
 * rows whose logits lie within 700 of their max. One body, compiled twice (AVX2+FMA, baseline). */
static inline __attribute__((always_inline)) void exp_sums_body(const float *la, const float *lb, int32_t V, double ma,
                                                                double mb, double *sums)
{
    double sa = 0.0, sb = 0.0, d = 0.0;
#pragma omp simd reduction(+ : sa, sb, d)
    for (int32_t v = 0; v < V; v++) {
        const double a = la[v], b = lb[v];
        const double eb = exp_neg(b - mb);
        sa += exp_neg(a - ma);
        sb += eb;
        d += eb * (b - a);
    }
    sums[0] = sa;
    sums[1] = sb;
    sums[2] = d;
}

__attribute__((target("avx2,fma"))) static void exp_sums_avx2(const float *la, const float *lb, int32_t V, double ma,
                                                              double mb, double *sums)
{
    exp_sums_body(la, lb, V, ma, mb, sums);
}

static void exp_sums_base(const float *la, const float *lb, int32_t V, double ma, double mb, double *sums)
{
    exp_sums_body(la, lb, V, ma, mb, sums);
}

static void exp_sums(const float *la, const float *lb, int32_t V, double ma, double mb, double *sums)
{
    static int use_avx2 = -1; /* benign race: every thread computes the same value */
    if (use_avx2 < 0)
        use_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (use_avx2)
        exp_sums_avx2(la, lb, V, ma, mb, sums);
    else
        exp_sums_base(la, lb, V, ma, mb, sums);
}

double hy_quality_exp_neg(double x)
{
    return x >= EXP_NEG_MIN && x <= 0.0 ? exp_neg(x) : exp(x);
}

/* Max, argmax (lowest id among ties) and min; -1 when a value is not finite. */
static int row_max(const float *x, int32_t V, double *mx, int32_t *arg, double *mn)
{
    float m = x[0], lo = x[0];
    int bad = 0;
#pragma omp simd reduction(max : m) reduction(min : lo) reduction(| : bad)
    for (int32_t v = 0; v < V; v++) {
        m = x[v] > m ? x[v] : m;
        lo = x[v] < lo ? x[v] : lo;
        bad |= !(x[v] - x[v] == 0.0f); /* NaN or infinite */
    }
    if (bad)
        return -1;
    int32_t k = 0;
    while (x[k] != m)
        k++;
    *mx = m;
    *arg = k;
    *mn = lo;
    return 0;
}

int hy_quality_row_measure(const float *la, const float *lb, int32_t V, int32_t target, struct hy_quality_row *r)
{
    if (V < 1)
        return hy_err_set("quality: vocabulary size %d", V);
    if (target < -1 || target >= V)
        return hy_err_set("quality: target id %d outside the vocabulary [0, %d)", target, V);
    double ma, mb, mina, minb;
    int32_t ta, tb;
    if (row_max(la, V, &ma, &ta, &mina))
        return hy_err_set("quality: model A produced a NaN or infinite logit");
    if (row_max(lb, V, &mb, &tb, &minb))
        return hy_err_set("quality: reference model B produced a NaN or infinite logit");
    /* S_x = sum exp(x - max_x); D = sum exp(b - max_b) (b - a); KL = D / S_b - lse_b + lse_a. */
    double sa = 0.0, sb = 0.0, d = 0.0;
    const float bt = lb[ta];
    int32_t above = 0; /* ids ranked before A's top-1 in B's order (value desc, id asc) */
    if (mina - ma >= EXP_NEG_MIN && minb - mb >= EXP_NEG_MIN) {
        double sums[3];
        exp_sums(la, lb, V, ma, mb, sums);
        sa = sums[0];
        sb = sums[1];
        d = sums[2];
    } else { /* a logit range over 700 nats: glibc's exp, which underflows gracefully */
        for (int32_t v = 0; v < V; v++) {
            const double a = la[v], b = lb[v];
            const double eb = exp(b - mb);
            sa += exp(a - ma);
            sb += eb;
            d += eb * (b - a);
        }
    }
#pragma omp simd reduction(+ : above)
    for (int32_t v = 0; v < V; v++)
        above += lb[v] > bt || (lb[v] == bt && v < ta);
    const double lse_a = ma + log(sa), lse_b = mb + log(sb);
    r->kl = d / sb - lse_b + lse_a;
    r->top1_a = ta;
    r->top1_b = tb;
    r->a_in_b_top5 = above < 5;
    r->nll_a = target >= 0 ? lse_a - (double)la[target] : 0.0;
    r->nll_b = target >= 0 ? lse_b - (double)lb[target] : 0.0;
    return 0;
}

int hy_quality_accumulate(struct hy_quality_stats *s, const float *la, const float *lb, int32_t n, int32_t V,
                          const int32_t *targets)
{
    if (n <= 0)
        return 0;
    struct hy_quality_row *rows = malloc((size_t)n * sizeof(*rows));
    if (!rows)
        return hy_err_set("quality: out of memory for %d rows", n);
    int bad = -1; /* lowest failing row */
#pragma omp parallel for schedule(dynamic, 1)
    for (int32_t i = 0; i < n; i++) {
        if (hy_quality_row_measure(la + (size_t)i * V, lb + (size_t)i * V, V, targets ? targets[i] : -1, &rows[i])) {
#pragma omp critical(hy_quality_bad)
            if (bad < 0 || i < bad)
                bad = i;
        }
    }
    if (bad >= 0) {
        /* the thread-local message may sit in another thread: measure that row again here */
        hy_quality_row_measure(la + (size_t)bad * V, lb + (size_t)bad * V, V, targets ? targets[bad] : -1, &rows[bad]);
        free(rows);
        return hy_err_prefix("position %lld", (long long)(s->positions + bad));
    }
    for (int32_t i = 0; i < n; i++) {
        const struct hy_quality_row *r = &rows[i];
        s->top1_agree += r->top1_a == r->top1_b;
        s->a_in_b_top5 += r->a_in_b_top5;
        s->sum_kl += r->kl;
        if (s->max_kl_position < 0 || r->kl > s->max_kl) {
            s->max_kl = r->kl;
            s->max_kl_position = s->positions + i;
        }
        s->sum_nll_a += r->nll_a;
        s->sum_nll_b += r->nll_b;
    }
    s->positions += n;
    free(rows);
    return 0;
}

int64_t hy_quality_tokens_needed(int32_t positions, int32_t bos)
{
    return bos >= 0 ? (int64_t)positions : (int64_t)positions + 1;
}

/* One model's state for a run: its KV cache (context positions, one sequence) and logits rows. */
struct side {
    const struct hy_quality_model *q;
    struct hy_model *m;
    struct hy_executor ex; /* runs m */
    struct hy_kv_cache kv;
    float *logits;
};

/* The KV cache of one side: the place where per-side cache options (dtype) apply. */
static int side_kv_init(struct side *sd, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks)
{
    return hy_executor_kv_cache_init(&sd->ex, kv, block_size, n_blocks, sd->q->kv_dtype);
}

int hy_quality_run(const struct hy_quality_model *qa, const struct hy_quality_model *qb, const int32_t *text,
                   int64_t n_text, int32_t bos, int32_t positions, int32_t context, int32_t rows_per_step,
                   struct hy_quality_stats *s)
{
    hy_quality_stats_init(s);
    const struct hy_model *a = qa->m, *b = qb->m;
    const int32_t V = a->cfg.vocab_size;
    if (b->cfg.vocab_size != V)
        return hy_err_set("quality: vocab sizes differ: model %d, reference %d", V, b->cfg.vocab_size);
    if (positions < 1)
        return hy_err_set("quality: positions %d: must be >= 1", positions);
    if (context < 2)
        return hy_err_set("quality: context %d: must be >= 2", context);
    if (context > a->cfg.max_position_embeddings || context > b->cfg.max_position_embeddings)
        return hy_err_set("quality: context %d exceeds max_position_embeddings (model %d, reference %d)", context,
                          a->cfg.max_position_embeddings, b->cfg.max_position_embeddings);
    if (rows_per_step < 1)
        return hy_err_set("quality: rows per step %d: must be >= 1", rows_per_step);
    if (bos >= V)
        return hy_err_set("quality: BOS id %d outside the vocabulary [0, %d)", bos, V);
    const int64_t need = hy_quality_tokens_needed(positions, bos);
    if (n_text < need)
        return hy_err_set("quality: %d positions need %lld text tokens, the text has %lld", positions, (long long)need,
                          (long long)n_text);
    for (int64_t i = 0; i < need; i++)
        if (text[i] < 0 || text[i] >= V)
            return hy_err_set("quality: text token %lld has id %d, outside the vocabulary [0, %d)", (long long)i,
                              text[i], V);
    if (rows_per_step > context)
        rows_per_step = context;

    const int32_t bs = 16, nb = (context + bs - 1) / bs;
    struct side sd[2] = {{.q = qa, .m = qa->m}, {.q = qb, .m = qb->m}};
    for (int k = 0; k < 2; k++)
        hy_executor_init(&sd[k].ex, sd[k].m);
    int32_t *win = malloc((size_t)context * sizeof(int32_t)), *tgt = malloc((size_t)context * sizeof(int32_t));
    int32_t *pos = malloc((size_t)context * sizeof(int32_t)), *seq = calloc((size_t)context, sizeof(int32_t));
    int32_t *rows = malloc((size_t)rows_per_step * sizeof(int32_t)), *table = malloc((size_t)nb * sizeof(int32_t));
    int64_t *slots = malloc((size_t)context * sizeof(int64_t));
    int rc = -1, kv_ok = 0;
    if (!win || !tgt || !pos || !seq || !rows || !table || !slots) {
        hy_err_set("quality: out of memory");
        goto out;
    }
    for (int k = 0; k < 2; k++) {
        sd[k].logits = malloc((size_t)rows_per_step * V * sizeof(float));
        if (!sd[k].logits) {
            hy_err_set("quality: out of memory for %d logits rows of %d", rows_per_step, V);
            goto out;
        }
        if (side_kv_init(&sd[k], &sd[k].kv, bs, nb)) {
            hy_err_prefix(k ? "reference KV cache" : "model KV cache");
            goto out;
        }
        kv_ok = k + 1;
    }
    for (int32_t i = 0; i < nb; i++)
        table[i] = i;
    for (int32_t i = 0; i < context; i++) {
        pos[i] = i;
        slots[i] = i;
    }
    for (int32_t i = 0; i < rows_per_step; i++)
        rows[i] = i;
    const int32_t *tables[1] = {table};

    int64_t o = 0;    /* next text token to predict (bos) or to feed (no bos) */
    int32_t done = 0; /* predictions made */
    while (done < positions) {
        /* window: win[0..len) inputs, tgt[0..len) the token each input position should predict */
        int32_t len = 0;
        const int32_t want = positions - done < context ? positions - done : context;
        if (bos >= 0) {
            win[len++] = bos;
            for (; len < want; len++)
                win[len] = text[o + len - 1];
            for (int32_t i = 0; i < len; i++)
                tgt[i] = text[o + i];
            o += len;
        } else {
            for (; len < want; len++) {
                win[len] = text[o + len];
                tgt[len] = text[o + len + 1];
            }
            o += len;
        }
        s->windows++;
        /* the KV cache is reused: each window writes positions 0.. before reading them */
        for (int32_t p0 = 0; p0 < len; p0 += rows_per_step) {
            const int32_t n = len - p0 < rows_per_step ? len - p0 : rows_per_step;
            struct hy_batch bt = {n, win + p0, pos + p0, slots + p0, seq, tables, n, rows, 0};
            for (int k = 0; k < 2; k++)
                if (hy_executor_forward(&sd[k].ex, &sd[k].kv, &bt, sd[k].logits, NULL)) {
                    hy_err_prefix("%s forward, window %lld, positions %d..%d", k ? "reference" : "model",
                                  (long long)s->windows - 1, p0, p0 + n - 1);
                    goto out;
                }
            if (hy_quality_accumulate(s, sd[0].logits, sd[1].logits, n, V, tgt + p0))
                goto out;
        }
        done += len;
    }
    rc = 0;
out:
    for (int k = 0; k < 2; k++) {
        free(sd[k].logits);
        if (k < kv_ok)
            hy_executor_kv_cache_free(&sd[k].ex, &sd[k].kv);
    }
    free(win);
    free(tgt);
    free(pos);
    free(seq);
    free(rows);
    free(table);
    free(slots);
    return rc;
}

/* Length of the UTF-8 sequence at p (strict: no overlongs, surrogates or code points > U+10FFFF),
 * or 0 when invalid. */
static size_t utf8_seq(const unsigned char *p, size_t left)
{
    const unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (left < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

int64_t hy_quality_utf8_chars(const char *text, size_t len)
{
    const unsigned char *p = (const unsigned char *)text;
    int64_t n = 0;
    for (size_t i = 0; i < len; n++) {
        size_t k = utf8_seq(p + i, len - i);
        if (!k)
            return hy_err_set("invalid UTF-8 at byte %zu", i);
        i += k;
    }
    return n;
}

int hy_quality_text_tail(const char *text, size_t len, double start_frac, size_t *byte_offset, int64_t *start_char,
                         int64_t *n_chars)
{
    if (!(start_frac >= 0.0 && start_frac < 1.0))
        return hy_err_set("text start fraction %g: must be in [0, 1)", start_frac);
    const int64_t total = hy_quality_utf8_chars(text, len);
    if (total < 0)
        return -1;
    const int64_t cut = (int64_t)((double)total * start_frac);
    const unsigned char *p = (const unsigned char *)text;
    size_t i = 0;
    for (int64_t c = 0; c < cut; c++)
        i += utf8_seq(p + i, len - i);
    *byte_offset = i;
    *start_char = cut;
    *n_chars = total;
    return 0;
}
