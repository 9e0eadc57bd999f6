/* calib_attn.c - q_proj's attention statistics for the coupled GPTQ rounding (math: calib_attn.h). */
#include "quantize/calib_attn.h"

#include "base/err.h"
#include "quantize/calib_gram.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* cs, sn [D / 2] = cos, sin of RoPE's angles at position pos. */
static void trig(double pos, int64_t D, const float *inv_freq, double *cs, double *sn)
{
    for (int64_t i = 0; i < D / 2; i++) {
        const double ang = pos * (double)inv_freq[i];
        cs[i] = cos(ang);
        sn[i] = sin(ang);
    }
}

/* x [D] (f64) rotated by RoPE with the angles' cos/sin cs, sn (sign +1) or by its transpose (sign -1). */
static void rotate(double *x, int64_t D, const double *cs, const double *sn, int interleaved, double sign)
{
    const int64_t half = D / 2;
    for (int64_t i = 0; i < half; i++) {
        const double c = cs[i], s = sign * sn[i];
        const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        const double x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x1 * c + x0 * s;
    }
}

/* out [D] = gain * x / sqrt(mean x^2 + eps) (no gain: x itself), f64; returns 1 / (mean x^2 + eps), or 1
 * without a gain. */
static double norm_head(const float *x, int64_t D, const float *gain, float eps, double *out)
{
    if (!gain) {
        for (int64_t d = 0; d < D; d++)
            out[d] = (double)x[d];
        return 1.0;
    }
    double ss = 0.0;
    for (int64_t d = 0; d < D; d++)
        ss += (double)x[d] * x[d];
    const double inv2 = 1.0 / (ss / (double)D + (double)eps), inv = sqrt(inv2);
    for (int64_t d = 0; d < D; d++)
        out[d] = (double)gain[d] * ((double)x[d] * inv);
    return inv2;
}

/* One thread's scratch for one query head. */
struct scratch {
    double *p, *c, *qn, *kb, *cs, *sn, *pack;
    float *xs;
};

static int scratch_init(struct scratch *s, int64_t T, int64_t D)
{
    s->p = malloc((size_t)T * sizeof(double));
    s->c = malloc((size_t)(D * D) * sizeof(double));
    s->qn = malloc((size_t)D * sizeof(double));
    s->kb = malloc((size_t)D * sizeof(double));
    s->cs = malloc((size_t)(D / 2) * sizeof(double));
    s->sn = malloc((size_t)(D / 2) * sizeof(double));
    s->pack = malloc(hy_calib_gram_scratch(D) * sizeof(double));
    s->xs = malloc((size_t)(T * D) * sizeof(float));
    return s->p && s->c && s->qn && s->kb && s->cs && s->sn && s->pack && s->xs;
}

static void scratch_free(struct scratch *s)
{
    free(s->p);
    free(s->c);
    free(s->qn);
    free(s->kb);
    free(s->cs);
    free(s->sn);
    free(s->pack);
    free(s->xs);
}

/* gh [D, D] += M_t of query t of head h (calib_attn.h), its keys kn [T, nkv, D] already normalized and
 * rotated (g = h's kv head). */
static void add_query(double *gh, const float *q, const double *kn, int64_t t, int64_t h, int64_t g,
                      const struct hy_calib_attn_shape *a, struct scratch *s)
{
    const int64_t nh = a->n_heads, nkv = a->n_kv_heads, D = a->head_dim;
    double *p = s->p, *c = s->c, *qn = s->qn, *kb = s->kb;
    trig((double)t, D, a->inv_freq, s->cs, s->sn);
    const double w = norm_head(q + (t * nh + h) * D, D, a->q_norm, a->eps, qn);
    rotate(qn, D, s->cs, s->sn, a->interleaved, 1.0);
    const double scale = 1.0 / sqrt((double)D);
    double mx = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j <= t; j++) {
        const double *kj = kn + (j * nkv + g) * D;
        double sc = 0.0;
        for (int64_t d = 0; d < D; d++)
            sc += qn[d] * kj[d];
        p[j] = sc * scale;
        mx = p[j] > mx ? p[j] : mx;
    }
    for (int64_t j = 0; j <= t; j++)
        sum += (p[j] = exp(p[j] - mx));
    /* kbar = sum_j p_j k_j; c = Cov_p(k), the Gram of the centred rows sqrt(p_j) (k_j - kbar) rounded to
     * f32 (hy_calib_gram_add; lower triangle, then mirrored): positive semidefinite as computed */
    memset(kb, 0, (size_t)D * sizeof(double));
    for (int64_t j = 0; j <= t; j++) {
        const double pj = (p[j] /= sum), *kj = kn + (j * nkv + g) * D;
        for (int64_t d = 0; d < D; d++)
            kb[d] += pj * kj[d];
    }
    for (int64_t j = 0; j <= t; j++) {
        const double rj = sqrt(p[j]), *kj = kn + (j * nkv + g) * D;
        for (int64_t d = 0; d < D; d++)
            s->xs[j * D + d] = (float)(rj * (kj[d] - kb[d]));
    }
    memset(c, 0, (size_t)(D * D) * sizeof(double));
    hy_calib_gram_add(c, D, s->xs, t + 1, s->pack);
    for (int64_t d = 0; d < D; d++)
        for (int64_t e = 0; e < d; e++)
            c[e * D + d] = c[d * D + e];
    /* R_t^T c R_t: the transposed rotation on every column, then on every row */
    for (int64_t e = 0; e < D; e++) {
        for (int64_t d = 0; d < D; d++)
            qn[d] = c[d * D + e];
        rotate(qn, D, s->cs, s->sn, a->interleaved, -1.0);
        for (int64_t d = 0; d < D; d++)
            c[d * D + e] = qn[d];
    }
    for (int64_t d = 0; d < D; d++)
        rotate(c + d * D, D, s->cs, s->sn, a->interleaved, -1.0);
    const double f = w / (double)D;
    for (int64_t d = 0; d < D; d++) {
        const double gd = a->q_norm ? (double)a->q_norm[d] : 1.0;
        for (int64_t e = 0; e < D; e++)
            gh[d * D + e] += f * gd * (a->q_norm ? (double)a->q_norm[e] : 1.0) * c[d * D + e];
    }
}

int hy_calib_attn_g_add(double *G, const float *q, const float *k, int64_t T, const struct hy_calib_attn_shape *a,
                        int64_t stride)
{
    const int64_t nh = a->n_heads, nkv = a->n_kv_heads, D = a->head_dim;
    if (nh <= 0 || nkv <= 0 || nh % nkv || D <= 0 || D % 2)
        return hy_err_set("calibration: attention shape of %lld query heads, %lld kv heads, head_dim %lld: the "
                          "query heads must be a positive multiple of the kv heads and head_dim even",
                          (long long)nh, (long long)nkv, (long long)D);
    if (T <= 0 || stride < 1)
        return 0;
    const int64_t grp = nh / nkv;
    double *kn = malloc((size_t)(T * nkv * D) * sizeof(double)), *cs = malloc((size_t)(D / 2) * sizeof(double)),
           *sn = malloc((size_t)(D / 2) * sizeof(double));
    int oom = !kn || !cs || !sn;
    for (int64_t t = 0; !oom && t < T; t++) {
        trig((double)t, D, a->inv_freq, cs, sn);
        for (int64_t g = 0; g < nkv; g++) {
            double *kr = kn + (t * nkv + g) * D;
            norm_head(k + (t * nkv + g) * D, D, a->k_norm, a->eps, kr);
            rotate(kr, D, cs, sn, a->interleaved, 1.0);
        }
    }
    free(cs);
    free(sn);
    /* every thread's scratch is in place before any head is touched: out of memory leaves G as it was */
    if (!oom) {
#pragma omp parallel
        {
            struct scratch s;
            if (!scratch_init(&s, T, D)) {
#pragma omp atomic write
                oom = 1;
            }
#pragma omp barrier
            int failed;
#pragma omp atomic read
            failed = oom;
#pragma omp for schedule(dynamic, 1)
            for (int64_t h = 0; h < nh; h++)
                for (int64_t t = stride - 1; !failed && t < T; t += stride)
                    add_query(G + h * D * D, q, kn, t, h, h / grp, a, &s);
            scratch_free(&s);
        }
    }
    free(kn);
    return oom ? hy_err_set("calibration: out of memory for the attention statistics") : 0;
}
