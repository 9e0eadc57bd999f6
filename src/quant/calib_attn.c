/* calib_attn.c - q_proj's attention statistics for the coupled GPTQ rounding (math: calib_attn.h). */
#include "quant/calib_attn.h"

#include "base/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x [D] (f64) rotated by RoPE at position pos (sign +1) or by its transpose (sign -1). */
static void rotate(double *x, int64_t D, double pos, const float *inv_freq, int interleaved, double sign)
{
    const int64_t half = D / 2;
    for (int64_t i = 0; i < half; i++) {
        const double ang = pos * (double)inv_freq[i], c = cos(ang), s = sign * sin(ang);
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

int hy_calib_attn_g_add(double *G, const float *q, const float *k, int64_t T, const struct hy_calib_attn_shape *a,
                        int64_t stride)
{
    const int64_t nh = a->n_heads, nkv = a->n_kv_heads, D = a->head_dim, grp = nh / nkv;
    if (T <= 0 || stride < 1)
        return 0;
    double *kn = malloc((size_t)(T * nkv * D) * sizeof(double));
    if (!kn)
        return hy_err_set("calibration: out of memory for the attention statistics");
    for (int64_t t = 0; t < T; t++)
        for (int64_t g = 0; g < nkv; g++) {
            double *kr = kn + (t * nkv + g) * D;
            norm_head(k + (t * nkv + g) * D, D, a->k_norm, a->eps, kr);
            rotate(kr, D, (double)t, a->inv_freq, a->interleaved, 1.0);
        }
    const double scale = 1.0 / sqrt((double)D);
    int oom = 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t h = 0; h < nh; h++) {
        const int64_t g = h / grp;
        double *p = malloc((size_t)T * sizeof(double)), *c = malloc((size_t)(D * D) * sizeof(double));
        double *qn = malloc((size_t)D * sizeof(double)), *kb = malloc((size_t)D * sizeof(double));
        if (!p || !c || !qn || !kb) {
#pragma omp atomic write
            oom = 1;
        }
        for (int64_t t = stride - 1; p && c && qn && kb && t < T; t += stride) {
            const double w = norm_head(q + (t * nh + h) * D, D, a->q_norm, a->eps, qn);
            rotate(qn, D, (double)t, a->inv_freq, a->interleaved, 1.0);
            double mx = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j <= t; j++) {
                const double *kj = kn + (j * nkv + g) * D;
                double s = 0.0;
                for (int64_t d = 0; d < D; d++)
                    s += qn[d] * kj[d];
                p[j] = s * scale;
                mx = p[j] > mx ? p[j] : mx;
            }
            for (int64_t j = 0; j <= t; j++)
                sum += (p[j] = exp(p[j] - mx));
            /* c = sum_j p_j k_j k_j^T - kbar kbar^T (lower triangle, then mirrored) */
            memset(c, 0, (size_t)(D * D) * sizeof(double));
            memset(kb, 0, (size_t)D * sizeof(double));
            for (int64_t j = 0; j <= t; j++) {
                const double pj = p[j] / sum, *kj = kn + (j * nkv + g) * D;
                for (int64_t d = 0; d < D; d++) {
                    const double pd = pj * kj[d];
                    kb[d] += pd;
                    double *cd = c + d * D;
                    for (int64_t e = 0; e <= d; e++)
                        cd[e] += pd * kj[e];
                }
            }
            for (int64_t d = 0; d < D; d++)
                for (int64_t e = 0; e <= d; e++)
                    c[e * D + d] = c[d * D + e] -= kb[d] * kb[e];
            /* R_t^T c R_t: the transposed rotation on every column, then on every row */
            for (int64_t e = 0; e < D; e++) {
                for (int64_t d = 0; d < D; d++)
                    qn[d] = c[d * D + e];
                rotate(qn, D, (double)t, a->inv_freq, a->interleaved, -1.0);
                for (int64_t d = 0; d < D; d++)
                    c[d * D + e] = qn[d];
            }
            for (int64_t d = 0; d < D; d++)
                rotate(c + d * D, D, (double)t, a->inv_freq, a->interleaved, -1.0);
            double *gh = G + h * D * D;
            const double f = w / (double)D;
            for (int64_t d = 0; d < D; d++) {
                const double gd = a->q_norm ? (double)a->q_norm[d] : 1.0;
                for (int64_t e = 0; e < D; e++)
                    gh[d * D + e] += f * gd * (a->q_norm ? (double)a->q_norm[e] : 1.0) * c[d * D + e];
            }
        }
        free(p);
        free(c);
        free(qn);
        free(kb);
    }
    free(kn);
    return oom ? hy_err_set("calibration: out of memory for the attention statistics") : 0;
}
