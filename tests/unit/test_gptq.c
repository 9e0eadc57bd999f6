/* test_gptq.c - GPTQ rounding (src/quantize/gptq.h) against an independent reference written here in
 * the Optimal Brain Quantization form (Frantar & Alistarh 2022, "Optimal Brain Compression", eq. 3-4):
 * the full inverse Hd^-1 by Gauss-Jordan elimination, and after each column the rank-1 downdate
 * Hinv -= Hinv[:, i] Hinv[i, :] / Hinv[i][i] instead of gptq.c's Cholesky factor. Both are exact
 * reformulations of one another, so the codes agree up to rounding-boundary flips of last-bit
 * differences. Also: H = I with no dampening is exactly round-to-nearest; the objective drops on
 * correlated inputs; indefinite H and bad arguments are reported; the factor U (blocked, threaded
 * Cholesky in reversed order, then L^-1) is upper with U^T U Hd = I to rounding, at sizes across the
 * block edges, and bitwise the same on 1 and 2 threads, as are the codes; every level's dot_f64 and
 * gemm_sub_f64 (kernel_table.h) are bitwise the ref's. Formats: fp8, MXFP8, MXFP4 and Ascend int8 rows (W8A8). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "kernels/kernel_table.h"
#include "quantize/calib.h"
#include "quant/formats.h"
#include "quantize/gptq.h"
#include "unit/avx512_emu.h"

#include <omp.h>

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) /* [0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}
static double nrand(void)
{
    double a = urand() + 1e-12, b = urand();
    return sqrt(-2.0 * log(a)) * cos(6.283185307179586 * b);
}

/* H = X^T X / n for n rows of correlated inputs x = z A (A random [K, K] mixing, plus a few loud
 * channels as in LLM activations). */
static double *correlated_h(int64_t K, int64_t n)
{
    double *a = malloc((size_t)(K * K) * sizeof(double)), *h = calloc((size_t)(K * K), sizeof(double));
    double *x = malloc((size_t)K * sizeof(double)), *z = malloc((size_t)K * sizeof(double));
    for (int64_t i = 0; i < K * K; i++)
        a[i] = nrand() * (i % (K + 1) == 0 ? 3.0 : 0.5);
    for (int64_t r = 0; r < n; r++) {
        for (int64_t k = 0; k < K; k++)
            z[k] = nrand() * (k % 7 == 0 ? 4.0 : 1.0);
        for (int64_t j = 0; j < K; j++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++)
                s += z[k] * a[k * K + j];
            x[j] = s;
        }
        for (int64_t i = 0; i < K; i++)
            for (int64_t j = 0; j < K; j++)
                h[i * K + j] += x[i] * x[j] / (double)n;
    }
    free(a);
    free(x);
    free(z);
    return h;
}

static float *random_w(int64_t N, int64_t K)
{
    float *w = malloc((size_t)(N * K) * sizeof(float));
    for (int64_t i = 0; i < N * K; i++)
        w[i] = (float)(nrand() * 0.02 * (i % 13 == 0 ? 3.0 : 1.0));
    return w;
}

static float amax_scale(const float *w, int64_t n)
{
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++)
        m = fabsf(w[i]) > m ? fabsf(w[i]) : m;
    return m / 448.0f;
}

/* Scale bytes per row in sq: MX one E8M0 per 32 columns, int8 one f32 (gptq.h). */
static int64_t scale_bytes(enum hy_qformat f, int64_t K)
{
    return f == HY_QF_W8A8_DYN ? 4 : (K + 31) / 32;
}

/* The int8 row scale written independently: max|w| / 127, at least FLT_EPSILON. */
static float i8_scale(const float *w, int64_t K)
{
    float a = 0.0f;
    for (int64_t k = 0; k < K; k++)
        if (fabsf(w[k]) > a)
            a = fabsf(w[k]);
    return a / 127.0f > 1.1920929e-7f ? a / 127.0f : 1.1920929e-7f;
}

static uint8_t code_of(const uint8_t *q, enum hy_qformat f, int64_t k)
{
    return f == HY_QF_MXFP4 ? (uint8_t)((q[k / 2] >> ((k & 1) * 4)) & 0xf) : q[k];
}

/* ---- the reference ------------------------------------------------------------------------- */

/* In-place inverse of a [n, n] by Gauss-Jordan with partial pivoting; 0 or 1 (singular). */
static int gj_inverse(double *a, int64_t n)
{
    double *b = calloc((size_t)(n * 2 * n), sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        memcpy(b + i * 2 * n, a + i * n, (size_t)n * sizeof(double));
        b[i * 2 * n + n + i] = 1.0;
    }
    for (int64_t c = 0; c < n; c++) {
        int64_t piv = c;
        for (int64_t r = c + 1; r < n; r++)
            if (fabs(b[r * 2 * n + c]) > fabs(b[piv * 2 * n + c]))
                piv = r;
        if (b[piv * 2 * n + c] == 0.0) {
            free(b);
            return 1;
        }
        for (int64_t j = 0; j < 2 * n; j++) {
            double t = b[c * 2 * n + j];
            b[c * 2 * n + j] = b[piv * 2 * n + j];
            b[piv * 2 * n + j] = t;
        }
        const double d = b[c * 2 * n + c];
        for (int64_t j = 0; j < 2 * n; j++)
            b[c * 2 * n + j] /= d;
        for (int64_t r = 0; r < n; r++) {
            if (r == c || b[r * 2 * n + c] == 0.0)
                continue;
            const double f = b[r * 2 * n + c];
            for (int64_t j = 0; j < 2 * n; j++)
                b[r * 2 * n + j] -= f * b[c * 2 * n + j];
        }
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(a + i * n, b + i * 2 * n + n, (size_t)n * sizeof(double));
    free(b);
    return 0;
}

/* Reference GPTQ (no retries of the dampening): codes into wq (layout of gptq.h), MX scales by the
 * OCP rule of the original rows. */
static void ref_gptq(const float *w, const double *h, int64_t N, int64_t K, enum hy_qformat f, float s8, double damp,
                     int actorder, enum hy_mx_scale_rule rule, uint8_t *wq, uint8_t *sq)
{
    int64_t *p = malloc((size_t)K * sizeof(int64_t));
    for (int64_t i = 0; i < K; i++)
        p[i] = i;
    if (actorder) /* decreasing diag, stable (selection of the earliest maximum) */
        for (int64_t i = 0; i < K; i++) {
            int64_t best = i;
            for (int64_t j = i + 1; j < K; j++)
                if (h[p[j] * K + p[j]] > h[p[best] * K + p[best]])
                    best = j;
            const int64_t t = p[best];
            memmove(p + i + 1, p + i, (size_t)(best - i) * sizeof(int64_t));
            p[i] = t;
        }
    double mean = 0.0;
    for (int64_t i = 0; i < K; i++)
        mean += h[i * K + i] == 0.0 ? 1.0 : h[i * K + i];
    mean /= (double)K;
    double *hinv0 = malloc((size_t)(K * K) * sizeof(double)), *hinv = malloc((size_t)(K * K) * sizeof(double));
    for (int64_t i = 0; i < K; i++) {
        for (int64_t j = 0; j < K; j++)
            hinv0[i * K + j] = h[p[i] * K + p[j]];
        if (hinv0[i * K + i] == 0.0)
            hinv0[i * K + i] = 1.0;
        hinv0[i * K + i] += damp * mean;
    }
    assert_int_equal(gj_inverse(hinv0, K), 0);
    const int64_t rb = f == HY_QF_MXFP4 ? K / 2 : K, nb = scale_bytes(f, K);
    double *x = malloc((size_t)K * sizeof(double));
    uint8_t *tmp = malloc((size_t)K);
    for (int64_t r = 0; r < N; r++) {
        uint8_t *sr = sq ? sq + r * nb : NULL;
        const float si = f == HY_QF_W8A8_DYN ? i8_scale(w + r * K, K) : 0.0f;
        if (f == HY_QF_W8A8_DYN)
            memcpy(sr, &si, 4);
        else if (f != HY_QF_FP8_TENSOR)
            hy_mx_quantize_row_rule(w + r * K, K, f == HY_QF_MXFP8 ? HY_MX_E4M3 : HY_MX_E2M1, rule, tmp, sr);
        memset(wq + r * rb, 0, (size_t)rb);
        memcpy(hinv, hinv0, (size_t)(K * K) * sizeof(double));
        for (int64_t i = 0; i < K; i++)
            x[i] = w[r * K + p[i]];
        for (int64_t i = 0; i < K; i++) {
            const int64_t c = p[i];
            if (f == HY_QF_W8A8_DYN) { /* RNE of x / s, clamped to the symmetric range */
                const float t = rintf((float)x[i] / si);
                const int8_t code = (int8_t)(t > 127.0f ? 127.0f : t < -127.0f ? -127.0f : t);
                wq[r * rb + c] = (uint8_t)code;
                const double e = (x[i] - (double)code * (double)si) / hinv[i * K + i];
                for (int64_t j = i + 1; j < K; j++)
                    x[j] -= e * hinv[i * K + j];
            } else {
                const double scale = f == HY_QF_FP8_TENSOR ? s8 : ldexp(1.0, (int)sr[c / 32] - 127);
                const float v = (float)x[i] * (float)(1.0 / scale);
                const uint8_t code =
                    f == HY_QF_MXFP4 ? hy_f32_to_e2m1(v) : hy_f32_to_e4m3(f == HY_QF_FP8_TENSOR ? (float)x[i] / s8 : v);
                if (f == HY_QF_MXFP4)
                    wq[r * rb + c / 2] |= (uint8_t)(code << ((c & 1) * 4));
                else
                    wq[r * rb + c] = code;
                const double q = (f == HY_QF_MXFP4 ? hy_e2m1_to_f32(code) : hy_e4m3_to_f32(code)) * scale;
                const double e = (x[i] - q) / hinv[i * K + i];
                for (int64_t j = i + 1; j < K; j++)
                    x[j] -= e * hinv[i * K + j];
            }
            /* remove column/row i from the inverse: the inverse of Hd restricted to the columns left */
            const double d = hinv[i * K + i];
            for (int64_t a = i + 1; a < K; a++)
                for (int64_t b = i + 1; b < K; b++)
                    hinv[a * K + b] -= hinv[a * K + i] * hinv[i * K + b] / d;
        }
    }
    free(p);
    free(hinv0);
    free(hinv);
    free(x);
    free(tmp);
}

/* d^T h d summed over rows, d = dequant(codes) - w. */
static double objective(const float *w, const uint8_t *wq, const uint8_t *sq, const double *h, int64_t N, int64_t K,
                        enum hy_qformat f, float s8)
{
    const int64_t rb = f == HY_QF_MXFP4 ? K / 2 : K, nb = scale_bytes(f, K);
    double tot = 0.0, *d = malloc((size_t)K * sizeof(double));
    for (int64_t r = 0; r < N; r++) {
        float rs = s8;
        if (f == HY_QF_W8A8_DYN)
            memcpy(&rs, sq + r * nb, 4);
        for (int64_t k = 0; k < K; k++)
            d[k] = hy_gptq_dequant(f, code_of(wq + r * rb, f, k), rs,
                                   sq && f != HY_QF_W8A8_DYN ? sq[r * nb + k / 32] : 0) -
                   w[r * K + k];
        for (int64_t i = 0; i < K; i++)
            for (int64_t j = 0; j < K; j++)
                tot += d[i] * h[i * K + j] * d[j];
    }
    free(d);
    return tot;
}

static const enum hy_qformat FORMATS[4] = {HY_QF_FP8_TENSOR, HY_QF_MXFP8, HY_QF_MXFP4, HY_QF_W8A8_DYN};

/* H = I, no dampening: GPTQ spreads nothing and is round-to-nearest, code for code. */
static void test_identity_is_rtn(void **state)
{
    (void)state;
    const int64_t N = 24, K = 96;
    float *w = random_w(N, K);
    double *h = calloc((size_t)(K * K), sizeof(double));
    for (int64_t i = 0; i < K; i++)
        h[i * K + i] = 1.0;
    uint8_t *q = malloc((size_t)(N * K)), *s = malloc((size_t)(N * 4)), *rq = malloc((size_t)K), *rs = malloc(4);
    const float s8 = amax_scale(w, N * K);
    for (int fi = 0; fi < 4; fi++) {
        const enum hy_qformat f = FORMATS[fi];
        const int64_t rb = f == HY_QF_MXFP4 ? K / 2 : K, nb = scale_bytes(f, K);
        const struct hy_gptq_opts o = {.dampening_frac = 0.0, .actorder = 1};
        double obj[2];
        assert_int_equal(hy_gptq_quantize(w, h, N, K, f, s8, &o, q, s, obj), 0);
        for (int64_t r = 0; r < N; r++) {
            if (f == HY_QF_FP8_TENSOR) {
                for (int64_t k = 0; k < K; k++)
                    assert_int_equal(q[r * K + k], hy_f32_to_e4m3(w[r * K + k] / s8));
                continue;
            }
            if (f == HY_QF_W8A8_DYN) { /* RNE(w / s), s = max|w| / 127: codes within [-127, 127] */
                const float si = i8_scale(w + r * K, K);
                for (int64_t k = 0; k < K; k++)
                    rq[k] = (uint8_t)(int8_t)rintf(w[r * K + k] / si);
                memcpy(rs, &si, 4);
            } else {
                hy_mx_quantize_row(w + r * K, K, f == HY_QF_MXFP8 ? HY_MX_E4M3 : HY_MX_E2M1, rq, rs);
            }
            assert_memory_equal(q + r * rb, rq, (size_t)rb);
            assert_memory_equal(s + r * nb, rs, (size_t)nb);
        }
        assert_true(obj[0] == obj[1]);
    }
    free(w);
    free(h);
    free(q);
    free(s);
    free(rq);
    free(rs);
}

/* Correlated H: gptq.c equals the OBQ reference (codes; objective to 1e-6) and beats RTN. */
static void test_matches_reference(void **state)
{
    (void)state;
    const int64_t N = 16, K = 64;
    float *w = random_w(N, K);
    double *h = correlated_h(K, 4 * K);
    h[5 * K + 5] = 0.0; /* a dead input: row/column 5 zero */
    for (int64_t j = 0; j < K; j++)
        h[5 * K + j] = h[j * K + 5] = 0.0;
    uint8_t *q = malloc((size_t)(N * K)), *s = malloc((size_t)(N * 4)), *rq = malloc((size_t)(N * K)),
            *rs = malloc((size_t)(N * 4));
    const float s8 = amax_scale(w, N * K);
    for (int fi = 0; fi < 4; fi++)
        for (int act = 0; act < 4; act++) { /* bit 0: actorder, bit 1: MX scale rule mse */
            const enum hy_qformat f = FORMATS[fi];
            const int64_t nb = scale_bytes(f, K);
            const enum hy_mx_scale_rule rule = act & 2 ? HY_MX_SCALE_MSE : HY_MX_SCALE_OCP;
            if ((f == HY_QF_FP8_TENSOR || f == HY_QF_W8A8_DYN) && rule != HY_MX_SCALE_OCP)
                continue;
            const struct hy_gptq_opts o = {.dampening_frac = 0.01, .actorder = act & 1, .mx_scale = rule};
            double obj[2];
            assert_int_equal(hy_gptq_quantize(w, h, N, K, f, s8, &o, q, s, obj), 0);
            ref_gptq(w, h, N, K, f, s8, 0.01, act & 1, rule, rq, f == HY_QF_FP8_TENSOR ? NULL : rs);
            int64_t same = 0;
            const int64_t rb = f == HY_QF_MXFP4 ? K / 2 : K;
            for (int64_t r = 0; r < N; r++)
                for (int64_t k = 0; k < K; k++)
                    same += code_of(q + r * rb, f, k) == code_of(rq + r * rb, f, k);
            if (f != HY_QF_FP8_TENSOR)
                assert_memory_equal(s, rs, (size_t)(N * nb));
            const double og = objective(w, q, f == HY_QF_FP8_TENSOR ? NULL : s, h, N, K, f, s8),
                         orf = objective(w, rq, f == HY_QF_FP8_TENSOR ? NULL : rs, h, N, K, f, s8);
            print_message(
                "format %d actorder %d mse %d: codes equal %lld/%lld, objective rtn %.4g gptq %.4g ref %.4g\n", fi,
                act & 1, act >> 1, (long long)same, (long long)(N * K), obj[0], og, orf);
            assert_true(same >= N * K - 2); /* last-bit differences may flip a tie or two */
            assert_true(fabs(og - obj[1]) <= 1e-9 * og);
            assert_true(fabs(og - orf) <= 1e-3 * orf);
            assert_true(og < 0.8 * obj[0]);
        }
    free(w);
    free(h);
    free(q);
    free(s);
    free(rq);
    free(rs);
}

/* One factor serves several matrices (q/k/v share H): bytes equal the one-shot call for each. */
static void test_shared_factor(void **state)
{
    (void)state;
    const int64_t N = 8, K = 64;
    double *h = correlated_h(K, 2 * K);
    const struct hy_gptq_opts o = {.dampening_frac = 0.01, .actorder = 1, .mx_scale = HY_MX_SCALE_MSE};
    struct hy_gptq_factor f;
    assert_int_equal(hy_gptq_factor_init(h, K, &o, &f), 0);
    uint8_t q1[8 * 64], s1[8 * 4], q2[8 * 64], s2[8 * 4];
    for (int m = 0; m < 4; m++) {
        float *w = random_w(N, K);
        const enum hy_qformat fm = FORMATS[m];
        const float s8 = amax_scale(w, N * K);
        double a[2], b[2];
        assert_int_equal(hy_gptq_quantize_factored(w, h, &f, N, fm, s8, &o, q1, s1, a), 0);
        assert_int_equal(hy_gptq_quantize(w, h, N, K, fm, s8, &o, q2, s2, b), 0);
        assert_memory_equal(q1, q2, (size_t)(fm == HY_QF_MXFP4 ? N * K / 2 : N * K));
        if (fm != HY_QF_FP8_TENSOR)
            assert_memory_equal(s1, s2, (size_t)(N * scale_bytes(fm, K)));
        assert_true(a[0] == b[0] && a[1] == b[1]);
        free(w);
    }
    hy_gptq_factor_free(&f);
    assert_null(f.ut);
    free(h);
}

/* Reference of hy_gptq_quantize_coupled: OBQ over one group's R x K elements with the full Hessian
 * F = (G_g + λ_G I) kron (H + λ_H I) inverted by Gauss-Jordan, elements in row-major order (rows by
 * decreasing diag G_g, columns by decreasing diag H, with actorder), the rank-1 downdate after each. */
static void ref_coupled(const float *w, const double *h, const double *g, int64_t N, int64_t R, int64_t K,
                        enum hy_qformat f, float s8, double damp, int actorder, uint8_t *wq, uint8_t *sq)
{
    const int64_t rb = f == HY_QF_MXFP4 ? K / 2 : K, nb = scale_bytes(f, K), E = R * K;
    int64_t *p = malloc((size_t)K * sizeof(int64_t)), * or = malloc((size_t)R * sizeof(int64_t));
    double *fi = malloc((size_t)(E * E) * sizeof(double)), *x = malloc((size_t)E * sizeof(double));
    uint8_t *tmp = malloc((size_t)K);
    for (int64_t i = 0; i < K; i++)
        p[i] = i;
    if (actorder)
        for (int64_t i = 0; i < K; i++) {
            int64_t best = i;
            for (int64_t j = i + 1; j < K; j++)
                if (h[p[j] * K + p[j]] > h[p[best] * K + p[best]])
                    best = j;
            const int64_t t = p[best];
            memmove(p + i + 1, p + i, (size_t)(best - i) * sizeof(int64_t));
            p[i] = t;
        }
    double mh = 0.0;
    for (int64_t i = 0; i < K; i++)
        mh += h[i * K + i] / (double)K;
    for (int64_t g0 = 0; g0 < N; g0 += R) {
        const double *gg = g + (g0 / R) * R * R;
        double mg = 0.0;
        for (int64_t a = 0; a < R; a++) {
            or [a] = a;
            mg += gg[a * R + a] / (double)R;
        }
        if (actorder)
            for (int64_t a = 0; a < R; a++) {
                int64_t best = a;
                for (int64_t b = a + 1; b < R; b++)
                    if (gg[or[b] * R + or [b]] > gg[or[best] * R + or [best]])
                        best = b;
                const int64_t t = or [best];
                memmove(or +a + 1, or +a, (size_t)(best - a) * sizeof(int64_t));
                or [a] = t;
            }
        for (int64_t a = 0; a < R; a++)
            for (int64_t i = 0; i < K; i++)
                for (int64_t b = 0; b < R; b++)
                    for (int64_t j = 0; j < K; j++)
                        fi[(a * K + i) * E + b * K + j] = (gg[or[a] * R + or [b]] + (a == b ? damp * mg : 0.0)) *
                                                          (h[p[i] * K + p[j]] + (i == j ? damp * mh : 0.0));
        assert_int_equal(gj_inverse(fi, E), 0);
        for (int64_t a = 0; a < R; a++) {
            const int64_t r = g0 + or [a];
            if (f == HY_QF_W8A8_DYN) {
                const float si = i8_scale(w + r * K, K);
                memcpy(sq + r * nb, &si, 4);
            } else if (f != HY_QF_FP8_TENSOR) {
                hy_mx_quantize_row(w + r * K, K, f == HY_QF_MXFP8 ? HY_MX_E4M3 : HY_MX_E2M1, tmp, sq + r * nb);
            }
            memset(wq + r * rb, 0, (size_t)rb);
            for (int64_t i = 0; i < K; i++)
                x[a * K + i] = w[r * K + p[i]];
        }
        for (int64_t e = 0; e < E; e++) {
            const int64_t r = g0 + or [e / K], c = p[e % K];
            double q;
            if (f == HY_QF_W8A8_DYN) {
                float si;
                memcpy(&si, sq + r * nb, 4);
                const float t = rintf((float)x[e] / si);
                const int8_t code = (int8_t)(t > 127.0f ? 127.0f : t < -127.0f ? -127.0f : t);
                wq[r * rb + c] = (uint8_t)code;
                q = (double)code * (double)si;
            } else {
                const double scale = f == HY_QF_FP8_TENSOR ? s8 : ldexp(1.0, (int)sq[r * nb + c / 32] - 127);
                const float v = f == HY_QF_FP8_TENSOR ? (float)x[e] / s8 : (float)x[e] * (float)(1.0 / scale);
                const uint8_t code = f == HY_QF_MXFP4 ? hy_f32_to_e2m1(v) : hy_f32_to_e4m3(v);
                if (f == HY_QF_MXFP4)
                    wq[r * rb + c / 2] |= (uint8_t)(code << ((c & 1) * 4));
                else
                    wq[r * rb + c] = code;
                q = (f == HY_QF_MXFP4 ? hy_e2m1_to_f32(code) : hy_e4m3_to_f32(code)) * scale;
            }
            const double err = (x[e] - q) / fi[e * E + e];
            for (int64_t j = e + 1; j < E; j++)
                x[j] -= err * fi[e * E + j];
            const double d = fi[e * E + e];
            for (int64_t a = e + 1; a < E; a++)
                for (int64_t b = e + 1; b < E; b++)
                    fi[a * E + b] -= fi[a * E + e] * fi[e * E + b] / d;
        }
    }
    free(p);
    free(or);
    free(fi);
    free(x);
    free(tmp);
}

/* tr(dW^T G dW H) summed over the groups, dW = dequant(codes) - w. */
static double kron_objective(const float *w, const uint8_t *wq, const uint8_t *sq, const double *h, const double *g,
                             int64_t N, int64_t R, int64_t K, enum hy_qformat f, float s8)
{
    const int64_t rb = f == HY_QF_MXFP4 ? K / 2 : K, nb = scale_bytes(f, K);
    double *d = malloc((size_t)(N * K) * sizeof(double)), tot = 0.0;
    for (int64_t r = 0; r < N; r++) {
        float rs = s8;
        if (f == HY_QF_W8A8_DYN)
            memcpy(&rs, sq + r * nb, 4);
        for (int64_t k = 0; k < K; k++)
            d[r * K + k] = hy_gptq_dequant(f, code_of(wq + r * rb, f, k), rs,
                                           sq && f != HY_QF_W8A8_DYN ? sq[r * nb + k / 32] : 0) -
                           w[r * K + k];
    }
    for (int64_t r = 0; r < N; r++)
        for (int64_t r2 = r - r % R; r2 < r - r % R + R; r2++) {
            const double gv = g[(r / R) * R * R + (r % R) * R + r2 % R];
            for (int64_t i = 0; i < K; i++)
                for (int64_t j = 0; j < K; j++)
                    tot += gv * d[r * K + i] * h[i * K + j] * d[r2 * K + j];
        }
    free(d);
    return tot;
}

/* Row groups with their own G: hy_gptq_quantize_coupled equals the Kronecker OBQ reference (codes, up to
 * a tie or two), lowers tr(dW^T G dW H) below the uncoupled rows', and with G = I gives the uncoupled
 * codes bitwise (the same on 1 and 2 threads); N not a multiple of group_rows is refused. */
static void test_coupled_rows(void **state)
{
    (void)state;
    enum { N = 12, R = 4, K = 32, NB = 4 }; /* NB: scale bytes per row, enough for every format */
    float *w = random_w(N, K);
    double *h = correlated_h(K, 4 * K), *gi = calloc(N / R * R * R, sizeof(double));
    double *g = correlated_h(R, 3 * R), *gs = malloc(N / R * R * R * sizeof(double));
    for (int64_t b = 0; b < N / R; b++) /* three groups: G, G with its rows reversed, 2 G */
        for (int64_t a = 0; a < R; a++)
            for (int64_t c = 0; c < R; c++) {
                gs[b * R * R + a * R + c] =
                    b == 1 ? g[(R - 1 - a) * R + R - 1 - c] : (b == 2 ? 2.0 : 1.0) * g[a * R + c];
                gi[b * R * R + a * R + c] = a == c;
            }
    uint8_t q[N * K], s[N * NB], rq[N * K], rs[N * NB], u[N * K], us[N * NB];
    const float s8 = amax_scale(w, N * K);
    for (int fi = 0; fi < 4; fi++)
        for (int act = 0; act < 2; act++) {
            const enum hy_qformat f = FORMATS[fi];
            const int64_t rb = f == HY_QF_MXFP4 ? K / 2 : K;
            const struct hy_gptq_opts o = {.dampening_frac = 0.01, .actorder = act};
            struct hy_gptq_factor fa;
            double obj[2], ou[2];
            assert_int_equal(hy_gptq_factor_init(h, K, &o, &fa), 0);
            assert_int_equal(hy_gptq_quantize_coupled(w, h, &fa, N, gs, R, f, s8, &o, q, s, obj), 0);
            ref_coupled(w, h, gs, N, R, K, f, s8, 0.01, act, rq, rs);
            assert_int_equal(hy_gptq_quantize_factored(w, h, &fa, N, f, s8, &o, u, us, ou), 0);
            int64_t same = 0;
            for (int64_t r = 0; r < N; r++)
                for (int64_t k = 0; k < K; k++)
                    same += code_of(q + r * rb, f, k) == code_of(rq + r * rb, f, k);
            const uint8_t *sp = f == HY_QF_FP8_TENSOR ? NULL : s;
            const double oc = kron_objective(w, q, sp, h, gs, N, R, K, f, s8),
                         orf = kron_objective(w, rq, f == HY_QF_FP8_TENSOR ? NULL : rs, h, gs, N, R, K, f, s8),
                         ound = kron_objective(w, u, f == HY_QF_FP8_TENSOR ? NULL : us, h, gs, N, R, K, f, s8);
            print_message("format %d actorder %d: codes equal %lld/%d, tr(dW^T G dW H) coupled %.4g ref %.4g "
                          "uncoupled %.4g\n",
                          fi, act, (long long)same, N * K, oc, orf, ound);
            assert_true(same >= N * K - 2);
            assert_true(fabs(oc - orf) <= 1e-3 * orf);
            assert_true(oc < 0.9 * ound);
            assert_true(obj[0] == ou[0]); /* the same RTN rows measured */
            /* G = I: the uncoupled codes, bitwise, on 1 and 2 threads */
            for (int th = 1; th <= 2; th++) {
                omp_set_num_threads(th);
                assert_int_equal(hy_gptq_quantize_coupled(w, h, &fa, N, gi, R, f, s8, &o, q, s, obj), 0);
                assert_memory_equal(q, u, (size_t)(N * rb));
                if (f != HY_QF_FP8_TENSOR)
                    assert_memory_equal(s, us, (size_t)(N * scale_bytes(f, K)));
                assert_true(obj[1] == ou[1]);
            }
            omp_set_num_threads(2);
            hy_gptq_factor_free(&fa);
        }
    struct hy_gptq_factor fa;
    const struct hy_gptq_opts o = {.dampening_frac = 0.01, .actorder = 1};
    assert_int_equal(hy_gptq_factor_init(h, K, &o, &fa), 0);
    assert_int_equal(hy_gptq_quantize_coupled(w, h, &fa, N, gs, 5, HY_QF_FP8_TENSOR, s8, &o, q, s, NULL), -1);
    assert_int_equal(hy_gptq_quantize_coupled(w, h, &fa, N, NULL, R, HY_QF_FP8_TENSOR, s8, &o, q, s, NULL), -1);
    hy_gptq_factor_free(&fa);
    free(w);
    free(h);
    free(g);
    free(gs);
    free(gi);
}

static void test_indefinite_and_bad_args(void **state)
{
    (void)state;
    const int64_t N = 4, K = 32;
    float *w = random_w(N, K);
    double *h = calloc((size_t)(K * K), sizeof(double));
    for (int64_t i = 0; i < K; i++)
        h[i * K + i] = -1.0;
    uint8_t q[4 * 32], s[4];
    const struct hy_gptq_opts o = {.dampening_frac = 0.01, .actorder = 1};
    assert_int_equal(hy_gptq_quantize(w, h, N, K, HY_QF_MXFP8, 1.0f, &o, q, s, NULL), 1);
    /* rank-deficient H (2 rows of inputs) with a tiny dampening: the retries reach a usable λ */
    memset(h, 0, (size_t)(K * K) * sizeof(double));
    for (int r = 0; r < 2; r++) {
        double x[32];
        for (int64_t i = 0; i < K; i++)
            x[i] = nrand();
        for (int64_t i = 0; i < K; i++)
            for (int64_t j = 0; j < K; j++)
                h[i * K + j] += x[i] * x[j] / 2.0;
    }
    const struct hy_gptq_opts tiny = {.dampening_frac = 1e-30, .actorder = 1};
    assert_int_equal(hy_gptq_quantize(w, h, N, K, HY_QF_MXFP8, 1.0f, &tiny, q, s, NULL), 0);
    h[0] = 1.0;
    assert_int_equal(hy_gptq_quantize(w, h, N, K - 1, HY_QF_MXFP4, 1.0f, &o, q, s, NULL), -1);  /* odd K */
    assert_int_equal(hy_gptq_quantize(w, h, N, K, HY_QF_FP8_TENSOR, 0.0f, &o, q, s, NULL), -1); /* scale 0 */
    assert_int_equal(hy_gptq_quantize(w, h, N, K, HY_QF_NONE, 1.0f, &o, q, s, NULL), -1);
    free(w);
    free(h);
}

/* The ref table into *ref, and every other level this CPU runs plus the emulated avx512 one into
 * levels[HY_ISA_COUNT + 1]; returns how many levels. */
static int level_tables(struct hy_kernel_table *ref, struct hy_kernel_table *levels)
{
    int nl = 0;
    assert_int_equal(hy_kernels_table_for(HY_ISA_REF, ref), 0);
    for (int isa = HY_ISA_REF + 1; isa < HY_ISA_COUNT; isa++)
        if (hy_kernels_table_for((enum hy_isa)isa, &levels[nl]) == 0)
            nl++;
    if (hy_test_avx512_emu_table(&levels[nl]) == 0)
        nl++;
    return nl;
}

/* dot_f64 of every level (avx512: the emulated table too) bitwise equal to ref, for lengths across
 * the 8-lane tails, with signed zeros, huge / tiny magnitudes and cancellation; and close to a long
 * double sum. gemm_sub_f64 of every level bitwise equal to x -= ref dot_f64 per element (rows beyond
 * nr untouched). */
static void test_dot_f64_levels(void **state)
{
    (void)state;
    struct hy_kernel_table ref, levels[HY_ISA_COUNT + 1];
    const int nl = level_tables(&ref, levels);
    enum { MAXN = 4099 };
    double *a = malloc(MAXN * sizeof(double)), *b = malloc(MAXN * sizeof(double));
    long cases = 0;
    for (int n = 0; n <= MAXN; n = n < 70 ? n + 1 : n < 4096 ? 4096 : n + 1) {
        for (int rep = 0; rep < 4; rep++) {
            for (int k = 0; k < n; k++) {
                a[k] = nrand() * ldexp(1.0, (int)(urand() * 60) - 30);
                b[k] = rep == 1 ? -a[k] * 0.5 : nrand();
                if (rep == 2 && k % 3 == 0)
                    a[k] = -0.0;
            }
            if (rep == 3 && n > 2) /* cancellation: a huge pair that sums to 0 */
                a[0] = 1e300, b[0] = 1.0, a[n - 1] = -1e300, b[n - 1] = 1.0;
            const double want = ref.dot_f64(a, b, n);
            for (int l = 0; l < nl; l++, cases++) {
                const double got = levels[l].dot_f64(a, b, n);
                if (memcmp(&got, &want, sizeof(got)))
                    fail_msg("%s dot_f64 n %d rep %d: %a != ref %a", levels[l].name, n, rep, got, want);
            }
            if (rep == 0) {
                long double exact = 0.0L, mag = 0.0L;
                for (int k = 0; k < n; k++) {
                    exact += (long double)a[k] * b[k];
                    mag += fabsl((long double)a[k] * b[k]);
                }
                assert_true(fabsl((long double)want - exact) <= 1e-14L * mag + 1e-300L);
            }
        }
    }
    const double z = ref.dot_f64(a, b, 0);
    assert_true(z == 0.0 && !signbit(z));
    /* gemm_sub_f64: x[t][j] -= ref dot_f64(e_t, v_j, nb), bitwise, for row counts around its 4-row tiles */
    enum { LD = 150 };
    double *e = malloc(9 * LD * sizeof(double)), *v = malloc(37 * LD * sizeof(double));
    double *x0 = malloc(9 * 37 * sizeof(double)), *xw = malloc(9 * 37 * sizeof(double)),
           *xg = malloc(9 * 37 * sizeof(double));
    for (int k = 0; k < 9 * LD; k++)
        e[k] = nrand();
    for (int k = 0; k < 37 * LD; k++)
        v[k] = nrand() * ldexp(1.0, (int)(urand() * 20) - 10);
    for (int k = 0; k < 9 * 37; k++)
        x0[k] = nrand();
    const int nbs[] = {0, 1, 7, 8, 9, 63, 128, 131};
    for (int nr = 1; nr <= 9; nr++)
        for (size_t q = 0; q < sizeof(nbs) / sizeof(nbs[0]); q++) {
            const int nb = nbs[q];
            memcpy(xw, x0, 9 * 37 * sizeof(double));
            for (int t = 0; t < nr; t++)
                for (int j = 0; j < 37; j++)
                    xw[t * 37 + j] -= ref.dot_f64(e + t * LD, v + j * LD, nb);
            memcpy(xg, x0, 9 * 37 * sizeof(double));
            ref.gemm_sub_f64(xg, 37, nr, e, LD, v, LD, nb, 37);
            assert_memory_equal(xg, xw, 9 * 37 * sizeof(double));
            for (int l = 0; l < nl; l++, cases++) {
                memcpy(xg, x0, 9 * 37 * sizeof(double));
                levels[l].gemm_sub_f64(xg, 37, nr, e, LD, v, LD, nb, 37);
                if (memcmp(xg, xw, 9 * 37 * sizeof(double)))
                    fail_msg("%s gemm_sub_f64 nr %d nb %d differs from ref", levels[l].name, nr, nb);
            }
        }
    free(e);
    free(v);
    free(x0);
    free(xw);
    free(xg);
    fprintf(stderr, "dot_f64: %ld level cases bitwise equal to ref (%d levels)\n", cases, nl);
    free(a);
    free(b);
}

/* gemm_tn_acc_f64 of every level bitwise the ref's for tiles around its 4 x 8 register block (rows and
 * columns past it, leading dimensions wider than the tile, no tokens); and the ref's bits the same when
 * the tokens, rows or columns are split across calls (the observer's chunks and tiles, quantize/calib.c).
 * Odd columns of a hold f32 values widened, as the observer's (exact products); even ones full f64
 * values, whose products round (a fused multiply-add would change the bits). */
static void test_gemm_tn_acc_levels(void **state)
{
    (void)state;
    struct hy_kernel_table ref, levels[HY_ISA_COUNT + 1];
    const int nl = level_tables(&ref, levels);
    enum { NT = 131, LDA = 11, LDB = 21, LDG = 23, ROWS = 10 };
    double *a = malloc(NT * LDA * sizeof(double)), *b = malloc(NT * LDB * sizeof(double));
    double *g0 = malloc(ROWS * LDG * sizeof(double)), *gw = malloc(ROWS * LDG * sizeof(double)),
           *gg = malloc(ROWS * LDG * sizeof(double));
    for (int k = 0; k < NT * LDA; k++)
        a[k] = k % 2 ? (float)(nrand() * ldexp(1.0, (int)(urand() * 16) - 8)) : nrand();
    for (int k = 0; k < NT * LDB; k++)
        b[k] = k % 7 == 3 ? -0.0 : (float)nrand();
    for (int k = 0; k < ROWS * LDG; k++)
        g0[k] = nrand();
    const int nts[] = {0, 1, 3, 64, NT};
    long cases = 0;
    for (int ni = 1; ni <= ROWS; ni++)
        for (int nj = 1; nj <= LDB; nj++)
            for (size_t q = 0; q < sizeof(nts) / sizeof(nts[0]); q++) {
                const int nt = nts[q];
                memcpy(gw, g0, ROWS * LDG * sizeof(double));
                ref.gemm_tn_acc_f64(gw, LDG, a, LDA, b, LDB, nt, ni, nj);
                for (int i = 0; i < ROWS; i++) /* entries outside the tile untouched */
                    for (int j = 0; j < LDG; j++)
                        if (i >= ni || j >= nj)
                            assert_memory_equal(&gw[i * LDG + j], &g0[i * LDG + j], sizeof(double));
                /* split: tokens [0, nt/2) then the rest; rows and columns in two parts */
                memcpy(gg, g0, ROWS * LDG * sizeof(double));
                const int th = nt / 2, ih = ni / 2, jh = (nj + 1) / 2;
                for (int part = 0; part < 2; part++) {
                    const double *ap = a + (part ? th * LDA : 0), *bp = b + (part ? th * LDB : 0);
                    const int n = part ? nt - th : th;
                    ref.gemm_tn_acc_f64(gg, LDG, ap, LDA, bp, LDB, n, ih, jh);
                    ref.gemm_tn_acc_f64(gg + jh, LDG, ap, LDA, bp + jh, LDB, n, ih, nj - jh);
                    ref.gemm_tn_acc_f64(gg + ih * LDG, LDG, ap + ih, LDA, bp, LDB, n, ni - ih, nj);
                }
                assert_memory_equal(gg, gw, ROWS * LDG * sizeof(double));
                for (int l = 0; l < nl; l++, cases++) {
                    memcpy(gg, g0, ROWS * LDG * sizeof(double));
                    levels[l].gemm_tn_acc_f64(gg, LDG, a, LDA, b, LDB, nt, ni, nj);
                    if (memcmp(gg, gw, ROWS * LDG * sizeof(double)))
                        fail_msg("%s gemm_tn_acc_f64 ni %d nj %d nt %d differs from ref", levels[l].name, ni, nj, nt);
                }
            }
    /* the sums themselves: g[i][j] = g0 + sum_t a_t[i] b_t[j], to the rounding of NT additions */
    memcpy(gw, g0, ROWS * LDG * sizeof(double));
    ref.gemm_tn_acc_f64(gw, LDG, a, LDA, b, LDB, NT, ROWS, LDB);
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < LDB; j++) {
            long double exact = g0[i * LDG + j], mag = fabsl((long double)g0[i * LDG + j]);
            for (int t = 0; t < NT; t++) {
                exact += (long double)a[t * LDA + i] * b[t * LDB + j];
                mag += fabsl((long double)a[t * LDA + i] * b[t * LDB + j]);
            }
            assert_true(fabsl((long double)gw[i * LDG + j] - exact) <= 1e-13L * mag);
        }
    fprintf(stderr, "gemm_tn_acc_f64: %ld level cases bitwise equal to ref (%d levels)\n", cases, nl);
    free(a);
    free(b);
    free(g0);
    free(gw);
    free(gg);
}

/* hy_calib_gram_add: the lower triangle bitwise the plain loop g[i][j] += x_t[i] x_t[j] (t in order) for
 * K across its 8-column panels and 32-row tasks and T across its 128-token chunks, also when the rows
 * come in two calls; the same bits on 1 and 2 threads; the upper triangle outside the diagonal tiles
 * untouched. */
static void test_gram_add(void **state)
{
    (void)state;
    const int64_t Ks[] = {1, 7, 8, 9, 33, 100, 1030}, Ts[] = {1, 5, 128, 300};
    for (size_t ki = 0; ki < sizeof(Ks) / sizeof(Ks[0]); ki++)
        for (size_t ti = 0; ti < sizeof(Ts) / sizeof(Ts[0]); ti++) {
            const int64_t K = Ks[ki], T = Ts[ti];
            if (K == 1030 && T != 300)
                continue;
            float *x = malloc((size_t)(T * K) * sizeof(float));
            double *want = calloc((size_t)(K * K), sizeof(double)), *got = malloc((size_t)(K * K) * sizeof(double));
            double *pack = malloc(hy_calib_gram_scratch(K) * sizeof(double));
            assert_non_null(x);
            assert_non_null(want);
            assert_non_null(got);
            assert_non_null(pack);
            for (int64_t k = 0; k < T * K; k++)
                x[k] = k % 11 == 4 ? 0.0f : (float)(nrand() * ldexp(1.0, (int)(urand() * 12) - 6));
            for (int64_t i = 0; i < K; i++)
                for (int64_t t = 0; t < T; t++)
                    for (int64_t j = 0; j <= i; j++)
                        want[i * K + j] += (double)x[t * K + i] * (double)x[t * K + j];
            for (int threads = 1; threads <= 2; threads++)
                for (int split = 0; split < 2; split++) {
                    omp_set_num_threads(threads);
                    for (int64_t k = 0; k < K * K; k++)
                        got[k] = -1.0;
                    for (int64_t i = 0; i < K; i++)
                        for (int64_t j = 0; j <= i; j++)
                            got[i * K + j] = 0.0;
                    for (int64_t i = 0; i < K; i++) /* the diagonal tiles' upper part is scratch */
                        for (int64_t j = i + 1; j < K && j / 8 == i / 8; j++)
                            got[i * K + j] = 0.0;
                    const int64_t th = split ? T / 2 : T;
                    hy_calib_gram_add(got, K, x, th, pack);
                    hy_calib_gram_add(got, K, x + th * K, T - th, pack);
                    for (int64_t i = 0; i < K; i++)
                        for (int64_t j = 0; j < K; j++) {
                            if (j <= i && memcmp(&got[i * K + j], &want[i * K + j], sizeof(double)))
                                fail_msg("gram K %lld T %lld threads %d split %d: [%lld][%lld] %a != %a", (long long)K,
                                         (long long)T, threads, split, (long long)i, (long long)j, got[i * K + j],
                                         want[i * K + j]);
                            if (j > i && j / 8 != i / 8 && got[i * K + j] != -1.0)
                                fail_msg("gram K %lld: upper [%lld][%lld] written", (long long)K, (long long)i,
                                         (long long)j);
                        }
                }
            omp_set_num_threads(2);
            free(x);
            free(want);
            free(got);
            free(pack);
        }
}

/* hy_calib_qk_weights against the formula written out (mean over heads of 1 / (mean_d q^2 + eps)), with
 * known values (a zero head gives 1 / eps); hy_calib_weighted_gram_add against sum_t w_t x_t x_t^T in f64 (rows
 * scaled in f32: relative 1e-6), and equal to hy_calib_gram_add when every weight is 1. */
static void test_qk_weighted_gram(void **state)
{
    (void)state;
    enum { T = 37, NH = 3, D = 8, K = 21 };
    const float eps = 1e-6f;
    float q[T * NH * D], x[T * K], xs[T * K];
    double w[T], ones[T];
    for (int i = 0; i < T * NH * D; i++)
        q[i] = (float)(nrand() * ldexp(1.0, (int)(urand() * 8) - 4));
    for (int d = 0; d < D; d++) { /* token 0: heads of 1s, 2s and 0s */
        q[0 * D + d] = 1.0f;
        q[1 * D + d] = 2.0f;
        q[2 * D + d] = 0.0f;
    }
    hy_calib_qk_weights(q, T, NH, D, eps, w);
    const double w0 = (1.0 / (1.0 + (double)eps) + 1.0 / (4.0 + (double)eps) + 1.0 / (double)eps) / 3.0;
    assert_true(fabs(w[0] - w0) <= 1e-12 * w0);
    for (int t = 1; t < T; t++) {
        double sum = 0.0;
        for (int h = 0; h < NH; h++) {
            double ms = 0.0;
            for (int d = 0; d < D; d++)
                ms += (double)q[(t * NH + h) * D + d] * (double)q[(t * NH + h) * D + d] / D;
            sum += 1.0 / (ms + (double)eps);
        }
        if (fabs(w[t] - sum / NH) > 1e-12 * (sum / NH))
            fail_msg("qk weight of token %d: %.17g != %.17g", t, w[t], sum / NH);
    }
    for (int i = 0; i < T * K; i++)
        x[i] = (float)nrand();
    double *got = calloc(K * K, sizeof(double)), *plain = calloc(K * K, sizeof(double)),
           *want = calloc(K * K, sizeof(double));
    double *pack = malloc(hy_calib_gram_scratch(K) * sizeof(double));
    assert_non_null(got);
    assert_non_null(plain);
    assert_non_null(want);
    assert_non_null(pack);
    hy_calib_weighted_gram_add(got, K, x, T, w, xs, pack);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < K; i++)
            for (int j = 0; j <= i; j++)
                want[i * K + j] += w[t] * (double)x[t * K + i] * (double)x[t * K + j];
    for (int i = 0; i < K; i++)
        for (int j = 0; j <= i; j++) {
            const double scale = sqrt(want[i * K + i] * want[j * K + j]);
            if (fabs(got[i * K + j] - want[i * K + j]) > 1e-6 * scale)
                fail_msg("weighted gram [%d][%d]: %.17g != %.17g", i, j, got[i * K + j], want[i * K + j]);
        }
    for (int t = 0; t < T; t++)
        ones[t] = 1.0;
    memset(got, 0, K * K * sizeof(double));
    hy_calib_weighted_gram_add(got, K, x, T, ones, xs, pack);
    hy_calib_gram_add(plain, K, x, T, pack);
    for (int i = 0; i < K; i++)
        for (int j = 0; j <= i; j++)
            assert_memory_equal(&got[i * K + j], &plain[i * K + j], sizeof(double));
    free(got);
    free(plain);
    free(want);
    free(pack);
}

/* The factor at K across the Cholesky's 64-column blocks and the inverse's 64-column tasks: perm a
 * permutation, U upper with a positive diagonal, U^T U Hd = I (Hd = h permuted + λ I), and the
 * same bytes on 1 and 2 threads. */
static void test_factor_properties(void **state)
{
    (void)state;
    const int64_t sizes[] = {1, 2, 17, 63, 64, 65, 130, 200, 600}; /* 600: the Cholesky's rows in parallel */
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        const int64_t K = sizes[si];
        double *h = correlated_h(K, K < 300 ? 3 * K + 4 : K + 64);
        for (int act = 0; act < 2; act++) {
            const struct hy_gptq_opts o = {.dampening_frac = 0.01, .actorder = act, .mx_scale = HY_MX_SCALE_OCP};
            struct hy_gptq_factor f1, f2;
            omp_set_num_threads(1);
            assert_int_equal(hy_gptq_factor_init(h, K, &o, &f1), 0);
            omp_set_num_threads(2);
            assert_int_equal(hy_gptq_factor_init(h, K, &o, &f2), 0);
            assert_memory_equal(f1.perm, f2.perm, (size_t)K * sizeof(int64_t));
            assert_memory_equal(f1.ut, f2.ut, (size_t)(K * K) * sizeof(double));
            double mean = 0.0;
            char *seen = calloc((size_t)K, 1);
            for (int64_t i = 0; i < K; i++) {
                assert_true(f1.perm[i] >= 0 && f1.perm[i] < K && !seen[f1.perm[i]]);
                seen[f1.perm[i]] = 1;
                mean += h[i * K + i];
            }
            free(seen);
            const double lambda = 0.01 * mean / (double)K;
            double worst = 0.0;
            for (int64_t i = 0; i < K; i++) {
                assert_true(f1.ut[i * K + i] > 0.0);
                for (int64_t j = i + 1; j < K; j++)
                    assert_true(f1.ut[i * K + j] == 0.0); /* U^T is lower */
            }
            /* (U^T U Hd)[i][j] = sum_k (U^T U)[i][k] Hd[k][j] */
            double *utu = calloc((size_t)(K * K), sizeof(double));
            for (int64_t i = 0; i < K; i++)
                for (int64_t k = 0; k < K; k++) {
                    double s = 0.0;
                    for (int64_t r = 0; r <= (i < k ? i : k); r++)
                        s += f1.ut[i * K + r] * f1.ut[k * K + r]; /* U[r][i] U[r][k] */
                    utu[i * K + k] = s;
                }
            for (int64_t i = 0; i < K; i++)
                for (int64_t j = 0; j < K; j++) {
                    double s = 0.0;
                    for (int64_t k = 0; k < K; k++)
                        s += utu[i * K + k] * (h[f1.perm[k] * K + f1.perm[j]] + (k == j ? lambda : 0.0));
                    const double e = fabs(s - (i == j ? 1.0 : 0.0));
                    worst = e > worst ? e : worst;
                }
            assert_true(worst < 1e-8);
            free(utu);
            if (K >= 64) { /* the codes too: tiles of 8 rows and 128-column blocks, on 1 and 2 threads */
                const int64_t N = 21;
                float *w = random_w(N, K);
                uint8_t *q1 = malloc((size_t)(N * K)), *q2 = malloc((size_t)(N * K)), *s1 = malloc((size_t)(N * K)),
                        *s2 = malloc((size_t)(N * K));
                double o1[2], o2[2];
                omp_set_num_threads(1);
                assert_int_equal(hy_gptq_quantize_factored(w, h, &f1, N, HY_QF_MXFP8, 1.0f, &o, q1, s1, o1), 0);
                omp_set_num_threads(2);
                assert_int_equal(hy_gptq_quantize_factored(w, h, &f1, N, HY_QF_MXFP8, 1.0f, &o, q2, s2, o2), 0);
                assert_memory_equal(q1, q2, (size_t)(N * K));
                assert_memory_equal(o1, o2, sizeof(o1));
                assert_true(o1[1] < o1[0]);
                free(w);
                free(q1);
                free(q2);
                free(s1);
                free(s2);
            }
            hy_gptq_factor_free(&f1);
            hy_gptq_factor_free(&f2);
        }
        free(h);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_is_rtn),         cmocka_unit_test(test_matches_reference),
        cmocka_unit_test(test_shared_factor),           cmocka_unit_test(test_coupled_rows),
        cmocka_unit_test(test_indefinite_and_bad_args), cmocka_unit_test(test_dot_f64_levels),
        cmocka_unit_test(test_gemm_tn_acc_levels),      cmocka_unit_test(test_gram_add),
        cmocka_unit_test(test_qk_weighted_gram),        cmocka_unit_test(test_factor_properties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
