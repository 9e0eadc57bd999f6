/* gptq.c - GPTQ rounding of one weight matrix (math and conventions: gptq.h). */
#include "quant/gptq.h"

#include "base/err.h"
#include "quant/formats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double hy_gptq_dequant(enum hy_qformat fmt, uint8_t code, float fp8_scale, uint8_t scale_byte)
{
    if (fmt == HY_QF_FP8_TENSOR)
        return (double)hy_e4m3_to_f32(code) * (double)fp8_scale;
    const double s = (double)hy_e8m0_to_f32(scale_byte);
    return (fmt == HY_QF_MXFP8 ? (double)hy_e4m3_to_f32(code) : (double)hy_e2m1_to_f32(code)) * s;
}

/* In-place lower Cholesky factor of a [n, n] (row-major, lower triangle read and written; the upper
 * triangle is left as it was). Returns 0, or 1 when a pivot is not positive (a not positive definite). */
static int chol_lower(double *a, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        double d = a[j * n + j];
        for (int64_t k = 0; k < j; k++)
            d -= a[j * n + k] * a[j * n + k];
        if (!(d > 0.0) || !isfinite(d))
            return 1;
        const double ljj = sqrt(d);
        a[j * n + j] = ljj;
        /* one thread: a parallel region per column costs a barrier per column, which under a loaded
         * machine took seconds at K = 1024 (n^3 / 6 flops: about 5 s at K = 4096) */
        for (int64_t i = j + 1; i < n; i++) {
            double s = a[i * n + j];
            for (int64_t k = 0; k < j; k++)
                s -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = s / ljj;
        }
    }
    return 0;
}

/* U = upper Cholesky factor of (L L^T)^-1 for lower-triangular L [n, n] (only its lower triangle is
 * read): inverse M = L^-1 (lower), Hinv = M^T M, then the upper factor of Hinv. Returns 0, 1 when
 * Hinv is not numerically positive definite, -1 out of memory. u [n, n] gets U (zeros below). */
static int inv_upper_factor(const double *l, int64_t n, double *u)
{
    double *m = calloc((size_t)(n * n), sizeof(double));
    if (!m)
        return -1;
    /* m = (L^-1)^T, row c = column c of L^-1 (forward substitution of unit vector c): every inner
     * loop below is a dot product of two contiguous rows */
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t c = 0; c < n; c++) {
        double *mc = m + c * n;
        mc[c] = 1.0 / l[c * n + c];
        for (int64_t i = c + 1; i < n; i++) {
            const double *li = l + i * n;
            double s = 0.0;
            for (int64_t k = c; k < i; k++)
                s += li[k] * mc[k];
            mc[i] = -s / li[i];
        }
    }
    /* Hinv[i][j] = sum_k L^-1[k][i] L^-1[k][j] = m[i] . m[j] over k >= max(i, j); lower triangle into u */
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j <= i; j++) {
            const double *mi = m + i * n, *mj = m + j * n;
            double s = 0.0;
            for (int64_t k = i; k < n; k++)
                s += mi[k] * mj[k];
            u[i * n + j] = s;
        }
    free(m);
    /* torch.linalg.cholesky(Hinv, upper=True): Hinv = U^T U, U = (lower factor of Hinv)^T */
    if (chol_lower(u, n))
        return 1;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = i + 1; j < n; j++) {
            u[i * n + j] = u[j * n + i];
            u[j * n + i] = 0.0;
        }
    return 0;
}

/* Column order: decreasing diag (ties: lower index first) with actorder, else identity. */
static int64_t *column_order(const double *h, int64_t K, int actorder)
{
    int64_t *p = malloc((size_t)K * sizeof(int64_t));
    if (!p)
        return NULL;
    for (int64_t i = 0; i < K; i++) {
        int64_t j = i;
        p[i] = i;
        if (!actorder)
            continue;
        while (j > 0 && h[p[j - 1] * K + p[j - 1]] < h[i * K + i]) { /* insertion sort, stable */
            p[j] = p[j - 1];
            j--;
        }
        p[j] = i;
    }
    return p;
}

/* Upper factor U of (Hd)^-1 in the column order p, Hd = h (permuted, dead diagonal -> 1) + λ I,
 * λ = damp * mean(diag), raising λ by 10x up to 6 times while Hd or its inverse is indefinite. */
static int hinv_factor(const double *h, int64_t K, const int64_t *p, double damp, double *u)
{
    double *a = malloc((size_t)(K * K) * sizeof(double));
    if (!a)
        return -1;
    double mean = 0.0;
    for (int64_t i = 0; i < K; i++) {
        const double d = h[p[i] * K + p[i]];
        mean += d == 0.0 ? 1.0 : d;
    }
    mean /= (double)K;
    double lambda = damp * mean;
    int rc = 1;
    /* retries: 10x, starting from at least 1e-6 * mean (a tiny or zero λ cannot rescue a rank-deficient H) */
    for (int attempt = 0; attempt <= 6 && rc == 1;
         attempt++, lambda = lambda * 10.0 > 1e-6 * mean ? lambda * 10.0 : 1e-6 * mean) {
        for (int64_t i = 0; i < K; i++) {
            for (int64_t j = 0; j <= i; j++)
                a[i * K + j] = h[p[i] * K + p[j]];
            if (a[i * K + i] == 0.0)
                a[i * K + i] = 1.0;
            a[i * K + i] += lambda;
        }
        rc = chol_lower(a, K);
        if (rc == 0)
            rc = inv_upper_factor(a, K, u);
    }
    free(a);
    return rc;
}

/* Code of value v (already divided by its scale, f32) in fmt. */
static uint8_t encode(enum hy_qformat fmt, float v)
{
    return fmt == HY_QF_MXFP4 ? hy_f32_to_e2m1(v) : hy_f32_to_e4m3(v);
}

void hy_quant_row_rtn(const float *w, int64_t K, enum hy_qformat fmt, float fp8_scale, enum hy_mx_scale_rule rule,
                      uint8_t *wq, uint8_t *sq)
{
    if (fmt == HY_QF_FP8_TENSOR) {
        for (int64_t k = 0; k < K; k++)
            wq[k] = hy_f32_to_e4m3(w[k] / fp8_scale);
        return;
    }
    hy_mx_quantize_row_rule(w, K, fmt == HY_QF_MXFP8 ? HY_MX_E4M3 : HY_MX_E2M1, rule, wq, sq);
}

static uint8_t code_at(const uint8_t *wq, enum hy_qformat fmt, int64_t k)
{
    return fmt == HY_QF_MXFP4 ? (uint8_t)((wq[k / 2] >> ((k & 1) * 4)) & 0xf) : wq[k];
}

/* d^T h d for d = dequant(codes) - w of one row; d [K] is scratch. */
static double row_objective(const float *w, const uint8_t *wq, const uint8_t *sq, const double *h, int64_t K,
                            enum hy_qformat fmt, float fp8_scale, double *d)
{
    for (int64_t k = 0; k < K; k++)
        d[k] = hy_gptq_dequant(fmt, code_at(wq, fmt, k), fp8_scale, sq ? sq[k / HY_MX_BLOCK] : 0) - (double)w[k];
    double s = 0.0;
    for (int64_t i = 0; i < K; i++) {
        double t = 0.0;
        for (int64_t j = 0; j < K; j++)
            t += h[i * K + j] * d[j];
        s += d[i] * t;
    }
    return s;
}

#define OBJ_ROWS 64 /* rows the objectives are measured on (all when N <= 64, else every (N / 64)-th) */

int hy_gptq_factor_init(const double *h, int64_t K, const struct hy_gptq_opts *o, struct hy_gptq_factor *f)
{
    memset(f, 0, sizeof(*f));
    if (K <= 0 || !h || !o || !(o->dampening_frac >= 0.0))
        return hy_err_set("gptq: bad arguments (K %lld)", (long long)K);
    f->perm = column_order(h, K, o->actorder);
    f->u = malloc((size_t)(K * K) * sizeof(double));
    int rc = f->perm && f->u ? hinv_factor(h, K, f->perm, o->dampening_frac, f->u) : -1;
    if (rc) {
        hy_gptq_factor_free(f);
        return rc < 0 ? hy_err_set("gptq: out of memory for K = %lld", (long long)K) : 1;
    }
    f->K = K;
    return 0;
}

void hy_gptq_factor_free(struct hy_gptq_factor *f)
{
    free(f->perm);
    free(f->u);
    memset(f, 0, sizeof(*f));
}

/* 0 when the matrix arguments are usable, else -1 with the error set. */
static int check_args(const float *w, const double *h, int64_t N, int64_t K, enum hy_qformat fmt, float fp8_scale,
                      const struct hy_gptq_opts *o, const uint8_t *wq, const uint8_t *sq)
{
    if (N <= 0 || K <= 0 || !w || !h || !o || !wq || (fmt != HY_QF_FP8_TENSOR && !sq) ||
        (fmt != HY_QF_FP8_TENSOR && fmt != HY_QF_MXFP8 && fmt != HY_QF_MXFP4) || (fmt == HY_QF_MXFP4 && K % 2) ||
        (fmt == HY_QF_FP8_TENSOR && !(fp8_scale > 0.0f)))
        return hy_err_set("gptq: bad arguments (N %lld, K %lld, format %d)", (long long)N, (long long)K, (int)fmt);
    return 0;
}

int hy_gptq_quantize(const float *w, const double *h, int64_t N, int64_t K, enum hy_qformat fmt, float fp8_scale,
                     const struct hy_gptq_opts *o, uint8_t *wq, uint8_t *sq, double obj[2])
{
    if (check_args(w, h, N, K, fmt, fp8_scale, o, wq, sq))
        return -1;
    struct hy_gptq_factor f;
    const int rc = hy_gptq_factor_init(h, K, o, &f);
    if (rc)
        return rc;
    const int r2 = hy_gptq_quantize_factored(w, h, &f, N, fmt, fp8_scale, o, wq, sq, obj);
    hy_gptq_factor_free(&f);
    return r2;
}

int hy_gptq_quantize_factored(const float *w, const double *h, const struct hy_gptq_factor *f, int64_t N,
                              enum hy_qformat fmt, float fp8_scale, const struct hy_gptq_opts *o, uint8_t *wq,
                              uint8_t *sq, double obj[2])
{
    const int64_t K = f ? f->K : 0;
    if (check_args(w, h, N, K, fmt, fp8_scale, o, wq, sq))
        return -1;
    const int64_t rb = fmt == HY_QF_MXFP4 ? K / 2 : K, nb = (K + HY_MX_BLOCK - 1) / HY_MX_BLOCK;
    const int64_t *p = f->perm;
    const double *u = f->u;
    double o_rtn = 0.0, o_gptq = 0.0;
    int oom = 0;
#pragma omp parallel reduction(+ : o_rtn, o_gptq)
    {
        double *x = malloc((size_t)K * sizeof(double)), *d = malloc((size_t)K * sizeof(double));
        if (!x || !d) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 4)
        for (int64_t r = 0; r < N; r++) {
            if (!x || !d)
                continue;
            const float *wr = w + r * K;
            uint8_t *qr = wq + r * rb, *sr = fmt == HY_QF_FP8_TENSOR ? NULL : sq + r * nb;
            hy_quant_row_rtn(wr, K, fmt, fp8_scale, o->mx_scale, qr, sr); /* the scales (kept) and the RTN codes */
            const int sampled = obj && (N <= OBJ_ROWS || r % (N / OBJ_ROWS) == 0);
            if (sampled)
                o_rtn += row_objective(wr, qr, sr, h, K, fmt, fp8_scale, d);
            if (fmt == HY_QF_MXFP4)
                memset(qr, 0, (size_t)rb);
            for (int64_t i = 0; i < K; i++)
                x[i] = (double)wr[p[i]];
            for (int64_t i = 0; i < K; i++) {
                const int64_t c = p[i];
                const float v = (float)x[i];
                uint8_t code;
                if (fmt == HY_QF_FP8_TENSOR)
                    code = encode(fmt, v / fp8_scale);
                else
                    code = encode(fmt, v * ldexpf(1.0f, 127 - (int)sr[c / HY_MX_BLOCK]));
                if (fmt == HY_QF_MXFP4)
                    qr[c / 2] |= (uint8_t)(code << ((c & 1) * 4));
                else
                    qr[c] = code;
                const double q = hy_gptq_dequant(fmt, code, fp8_scale, sr ? sr[c / HY_MX_BLOCK] : 0);
                const double e = (x[i] - q) / u[i * K + i];
                const double *ui = u + i * K;
                for (int64_t j = i + 1; j < K; j++)
                    x[j] -= e * ui[j];
            }
            if (sampled)
                o_gptq += row_objective(wr, qr, sr, h, K, fmt, fp8_scale, d);
        }
        free(x);
        free(d);
    }
    if (oom)
        return hy_err_set("gptq: out of memory");
    if (obj) {
        obj[0] = o_rtn;
        obj[1] = o_gptq;
    }
    return 0;
}
