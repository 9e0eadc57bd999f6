/* test_calib_attn.c - q_proj's attention statistics (src/quantize/calib_attn.h) against the formula
 * written out with explicit rotation matrices: G_h = sum over sampled t of
 * w_t / head_dim * D R_t^T Cov_{p_t}(k) R_t D, with QK-norm (NeoX and interleaved RoPE pairs, GQA) and
 * without; query strides; symmetric and positive semi-definite; bitwise the same on 1 and 2 threads;
 * a RoPE pair no key has (no QK-norm) gets zero rows and columns: errors there cost nothing; shapes
 * it cannot use are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "quantize/calib_attn.h"

#include <omp.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { T = 11, NH = 4, NKV = 2, D = 8 };

static uint64_t rng = 0x243f6a8885a308d3ull;
static double nrand(void)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        u[i] = (double)(rng >> 11) / 9007199254740992.0;
    }
    return sqrt(-2.0 * log(u[0] + 1e-12)) * cos(6.283185307179586 * u[1]);
}

/* R [D, D] of RoPE at position pos: x' = R x. */
static void rope_matrix(double *r, double pos, const float *inv_freq, int interleaved)
{
    memset(r, 0, sizeof(double) * D * D);
    for (int i = 0; i < D / 2; i++) {
        const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + D / 2;
        const double c = cos(pos * (double)inv_freq[i]), s = sin(pos * (double)inv_freq[i]);
        r[a * D + a] = c;
        r[a * D + b] = -s;
        r[b * D + b] = c;
        r[b * D + a] = s;
    }
}

/* out = R (gain * x / rms) (gain NULL: R x); returns 1 / (mean x^2 + eps) (1 without a gain). */
static double ref_head(const float *x, const float *gain, float eps, const double *r, double *out)
{
    double ss = 0.0, y[D];
    for (int d = 0; d < D; d++)
        ss += (double)x[d] * x[d];
    const double w = gain ? 1.0 / (ss / D + (double)eps) : 1.0;
    for (int d = 0; d < D; d++)
        y[d] = gain ? (double)gain[d] * (double)x[d] * sqrt(w) : (double)x[d];
    for (int d = 0; d < D; d++) {
        out[d] = 0.0;
        for (int e = 0; e < D; e++)
            out[d] += r[d * D + e] * y[e];
    }
    return w;
}

static void ref_g(double *g, const float *q, const float *k, const struct hy_calib_attn_shape *a, int stride)
{
    double kr[T][NKV][D], r[D * D], qn[D];
    memset(g, 0, sizeof(double) * NH * D * D);
    for (int t = 0; t < T; t++) {
        rope_matrix(r, t, a->inv_freq, a->interleaved);
        for (int h = 0; h < NKV; h++)
            ref_head(k + (t * NKV + h) * D, a->k_norm, a->eps, r, kr[t][h]);
    }
    for (int t = stride - 1; t < T; t += stride) {
        rope_matrix(r, t, a->inv_freq, a->interleaved);
        for (int h = 0; h < NH; h++) {
            const int kv = h / (NH / NKV);
            const double w = ref_head(q + (t * NH + h) * D, a->q_norm, a->eps, r, qn);
            double p[T], mx = -1e300, sum = 0.0, kb[D] = {0}, cov[D * D] = {0}, m1[D * D], m2[D * D];
            for (int j = 0; j <= t; j++) {
                p[j] = 0.0;
                for (int d = 0; d < D; d++)
                    p[j] += qn[d] * kr[j][kv][d] / sqrt((double)D);
                mx = fmax(mx, p[j]);
            }
            for (int j = 0; j <= t; j++)
                sum += p[j] = exp(p[j] - mx);
            for (int j = 0; j <= t; j++)
                for (int d = 0; d < D; d++) {
                    kb[d] += p[j] / sum * kr[j][kv][d];
                    for (int e = 0; e < D; e++)
                        cov[d * D + e] += p[j] / sum * kr[j][kv][d] * kr[j][kv][e];
                }
            for (int d = 0; d < D; d++)
                for (int e = 0; e < D; e++)
                    cov[d * D + e] -= kb[d] * kb[e];
            for (int d = 0; d < D; d++) /* m1 = R^T cov, m2 = m1 R */
                for (int e = 0; e < D; e++) {
                    m1[d * D + e] = 0.0;
                    for (int i = 0; i < D; i++)
                        m1[d * D + e] += r[i * D + d] * cov[i * D + e];
                }
            for (int d = 0; d < D; d++)
                for (int e = 0; e < D; e++) {
                    m2[d * D + e] = 0.0;
                    for (int i = 0; i < D; i++)
                        m2[d * D + e] += m1[d * D + i] * r[i * D + e];
                }
            for (int d = 0; d < D; d++)
                for (int e = 0; e < D; e++)
                    g[(h * D + d) * D + e] +=
                        w / D * (a->q_norm ? (double)a->q_norm[d] * a->q_norm[e] : 1.0) * m2[d * D + e];
        }
    }
}

static void test_against_formula(void **state)
{
    (void)state;
    float q[T * NH * D], k[T * NKV * D], qg[D], kg[D], inv_freq[D / 2];
    for (int i = 0; i < T * NH * D; i++)
        q[i] = (float)(nrand() * (i % 5 == 0 ? 3.0 : 1.0));
    for (int i = 0; i < T * NKV * D; i++)
        k[i] = (float)nrand();
    for (int d = 0; d < D; d++) {
        qg[d] = (float)(0.5 + fabs(nrand()));
        kg[d] = (float)(0.5 + fabs(nrand()));
    }
    for (int i = 0; i < D / 2; i++)
        inv_freq[i] = powf(100.0f, -2.0f * (float)i / D);
    for (int norm = 0; norm < 2; norm++)
        for (int il = 0; il < 2; il++)
            for (int stride = 1; stride <= 3; stride += 2) {
                const struct hy_calib_attn_shape a = {NH,    NKV,      D, norm ? qg : NULL, norm ? kg : NULL,
                                                      1e-5f, inv_freq, il};
                double *got = calloc(NH * D * D, sizeof(double)), *two = calloc(NH * D * D, sizeof(double)),
                       want[NH * D * D];
                omp_set_num_threads(1);
                assert_int_equal(hy_calib_attn_g_add(got, q, k, T, &a, stride), 0);
                omp_set_num_threads(2);
                assert_int_equal(hy_calib_attn_g_add(two, q, k, T, &a, stride), 0);
                assert_memory_equal(got, two, sizeof(double) * NH * D * D);
                ref_g(want, q, k, &a, stride);
                for (int h = 0; h < NH; h++) {
                    double scale = 0.0;
                    for (int d = 0; d < D; d++)
                        scale = fmax(scale, want[(h * D + d) * D + d]);
                    assert_true(scale > 0.0);
                    for (int d = 0; d < D; d++)
                        for (int e = 0; e < D; e++) {
                            const double x = got[(h * D + d) * D + e];
                            if (fabs(x - want[(h * D + d) * D + e]) > 2e-6 * scale) /* f32 rows */
                                fail_msg("norm %d interleaved %d stride %d head %d [%d][%d]: %.17g != %.17g", norm, il,
                                         stride, h, d, e, x, want[(h * D + d) * D + e]);
                            if (fabs(x - got[(h * D + e) * D + d]) > 1e-12 * scale)
                                fail_msg("not symmetric at head %d [%d][%d]", h, d, e);
                        }
                    for (int trial = 0; trial < 8; trial++) { /* v^T G v >= 0 */
                        double v[D], quad = 0.0;
                        for (int d = 0; d < D; d++)
                            v[d] = nrand();
                        for (int d = 0; d < D; d++)
                            for (int e = 0; e < D; e++)
                                quad += v[d] * got[(h * D + d) * D + e] * v[e];
                        assert_true(quad >= -1e-12 * scale);
                    }
                }
                /* adding twice doubles (it accumulates) */
                assert_int_equal(hy_calib_attn_g_add(two, q, k, T, &a, stride), 0);
                for (int i = 0; i < NH * D * D; i++)
                    assert_true(fabs(two[i] - 2.0 * got[i]) <= 1e-12 * fabs(got[i]) + 1e-300);
                free(got);
                free(two);
            }
}

/* Without QK-norm, keys with nothing in RoPE pair 1 (dims 1 and 1 + D/2) give that pair zero rows and
 * columns in every G_h: a query error there moves no score. */
static void test_unread_directions_cost_nothing(void **state)
{
    (void)state;
    float q[T * NH * D], k[T * NKV * D], inv_freq[D / 2];
    for (int i = 0; i < T * NH * D; i++)
        q[i] = (float)nrand();
    for (int i = 0; i < T * NKV * D; i++)
        k[i] = (i % D == 1 || i % D == 1 + D / 2) ? 0.0f : (float)nrand();
    for (int i = 0; i < D / 2; i++)
        inv_freq[i] = powf(100.0f, -2.0f * (float)i / D);
    const struct hy_calib_attn_shape a = {NH, NKV, D, NULL, NULL, 1e-5f, inv_freq, 0};
    double *g = calloc(NH * D * D, sizeof(double));
    assert_int_equal(hy_calib_attn_g_add(g, q, k, T, &a, 1), 0);
    for (int h = 0; h < NH; h++) {
        double diag = 0.0;
        for (int d = 0; d < D; d++)
            diag += g[(h * D + d) * D + d];
        assert_true(diag > 0.0);
        for (int e = 0; e < D; e++)
            for (int d = 1; d < D; d += D / 2) {
                assert_true(fabs(g[(h * D + d) * D + e]) <= 1e-15 * diag);
                assert_true(fabs(g[(h * D + e) * D + d]) <= 1e-15 * diag);
            }
    }
    /* T = 0 and a bad stride add nothing */
    double before = g[0];
    assert_int_equal(hy_calib_attn_g_add(g, q, k, 0, &a, 1), 0);
    assert_int_equal(hy_calib_attn_g_add(g, q, k, T, &a, 0), 0);
    assert_true(g[0] == before);
    /* query heads not a multiple of the kv heads, no kv heads, an odd head_dim: refused, G unchanged */
    const struct hy_calib_attn_shape bad[3] = {{3, 2, D, NULL, NULL, 1e-5f, inv_freq, 0},
                                               {NH, 0, D, NULL, NULL, 1e-5f, inv_freq, 0},
                                               {NH, NKV, D - 1, NULL, NULL, 1e-5f, inv_freq, 0}};
    for (int i = 0; i < 3; i++)
        assert_int_equal(hy_calib_attn_g_add(g, q, k, T, &bad[i], 1), -1);
    assert_true(g[0] == before);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_formula),
        cmocka_unit_test(test_unread_directions_cost_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
