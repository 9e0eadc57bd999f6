/* gptq.c - GPTQ rounding of one weight matrix (math and conventions: gptq.h). */
#include "quant/gptq.h"

#include "base/err.h"
#include "kernels/kernel_table.h"
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

#define CHOL_BLOCK 64 /* columns per parallel step of the Cholesky (one barrier each) */
#define INV_COLS 16   /* columns of L^-1 per task of the inverse */

/* In-place lower Cholesky factor of a [n, n] (row-major, lower triangle read and written; the upper
 * triangle is left as it was): a[i][j] = (a[i][j] - dot(a_i[0, j), a_j[0, j))) / a[j][j] with the
 * level's dot_f64, left-looking by blocks of CHOL_BLOCK columns: the block's diagonal part on one
 * thread, then its rows below in parallel. Every element is the same expression whatever the thread
 * count. Returns 0, or 1 when a pivot is not positive (a not positive definite). */
static int chol_lower(double *a, int64_t n, double (*dot)(const double *, const double *, int64_t))
{
    for (int64_t j0 = 0; j0 < n; j0 += CHOL_BLOCK) {
        const int64_t j1 = j0 + CHOL_BLOCK < n ? j0 + CHOL_BLOCK : n;
        for (int64_t j = j0; j < j1; j++) {
            double *aj = a + j * n;
            const double d = aj[j] - dot(aj, aj, j);
            if (!(d > 0.0) || !isfinite(d))
                return 1;
            aj[j] = sqrt(d);
            for (int64_t i = j + 1; i < j1; i++)
                a[i * n + j] = (a[i * n + j] - dot(a + i * n, aj, j)) / aj[j];
        }
#pragma omp parallel for schedule(dynamic, 16) if ((n - j1) * j1 >= 65536)
        for (int64_t i = j1; i < n; i++) {
            double *ai = a + i * n;
            for (int64_t j = j0; j < j1; j++)
                ai[j] = (ai[j] - dot(ai, a + j * n, j)) / a[j * n + j];
        }
    }
    return 0;
}

/* U = the upper Cholesky factor of Hd^-1 (Hd^-1 = U^T U) for a [n, n] holding the lower Cholesky
 * factor L of Hd in REVERSED order (J Hd J = L L^T, J the reversal): then Hd = R R^T with
 * R = J L J upper, and U = R^-1 = J L^-1 J (upper, positive diagonal: the unique factor). The
 * inverse is by forward substitution, one column c of L^-1 per task: m[c][i] = L^-1[i][c] =
 * -dot(L[i][c, i), m[c][c, i)) / L[i][i], m[c][c] = 1 / L[c][c]. Returns 0, 1 when an element is
 * not finite (Hd numerically singular), -1 out of memory. u [n, n] gets U (zeros below). */
static int upper_factor_of_inverse(const double *l, int64_t n, double *u,
                                   double (*dot)(const double *, const double *, int64_t))
{
    double *m = malloc((size_t)(n * n) * sizeof(double));
    if (!m)
        return -1;
    int bad = 0;
    /* INV_COLS columns per task, so that each row of L is read from memory once per task */
#pragma omp parallel for schedule(dynamic, 1) reduction(| : bad)
    for (int64_t c0 = 0; c0 < n; c0 += INV_COLS) {
        const int64_t c1 = c0 + INV_COLS < n ? c0 + INV_COLS : n;
        for (int64_t c = c0; c < c1; c++)
            m[c * n + c] = 1.0 / l[c * n + c];
        for (int64_t i = c0 + 1; i < n; i++) {
            const double *li = l + i * n;
            for (int64_t c = c0; c < c1 && c < i; c++) {
                double *mc = m + c * n;
                mc[i] = -dot(li + c, mc + c, i - c) / li[i];
            }
        }
        for (int64_t c = c0; c < c1; c++)
            for (int64_t i = c; i < n; i++)
                bad |= !isfinite(m[c * n + i]);
    }
    /* U[i][j] = L^-1[n-1-i][n-1-j] = m[n-1-j][n-1-i] for j >= i */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        double *ui = u + i * n;
        for (int64_t j = 0; j < i; j++)
            ui[j] = 0.0;
        for (int64_t j = i; j < n; j++)
            ui[j] = m[(n - 1 - j) * n + (n - 1 - i)];
    }
    free(m);
    return bad ? 1 : 0;
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
    double (*dot)(const double *, const double *, int64_t) = hy_kernels_active()->dot_f64;
    for (int attempt = 0; attempt <= 6 && rc == 1;
         attempt++, lambda = lambda * 10.0 > 1e-6 * mean ? lambda * 10.0 : 1e-6 * mean) {
        /* reversed order (upper_factor_of_inverse): a[i][j] = Hd[q[i]][q[j]], q[i] = p[K-1-i] */
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < K; i++) {
            const double *hr = h + p[K - 1 - i] * K;
            for (int64_t j = 0; j <= i; j++)
                a[i * K + j] = hr[p[K - 1 - j]];
            if (a[i * K + i] == 0.0)
                a[i * K + i] = 1.0;
            a[i * K + i] += lambda;
        }
        rc = chol_lower(a, K, dot);
        if (rc == 0)
            rc = upper_factor_of_inverse(a, K, u, dot);
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
    double (*dot)(const double *, const double *, int64_t) = hy_kernels_active()->dot_f64;
    double s = 0.0;
    for (int64_t i = 0; i < K; i++)
        s += d[i] * dot(h + i * K, d, K);
    return s;
}

#define OBJ_ROWS 64 /* rows the objectives are measured on (all when N <= 64, else every (N / 64)-th) */
#define GPTQ_ROWS 8 /* rows rounded together, so that each row of U is read once per 8 rows */
#define SPREAD_CHUNK 512 /* columns of the error spread per step (8 rows x 4 KiB + U's 4 KiB in L1) */

static int sampled(int64_t r, int64_t N) { return N <= OBJ_ROWS || r % (N / OBJ_ROWS) == 0; }

/* x[j] -= e * u[j] for j < n (GPTQ's error spread; element-wise, so any vector width gives the same bits). */
static void spread_error(double *restrict x, const double *restrict u, double e, int64_t n)
{
#pragma omp simd
    for (int64_t j = 0; j < n; j++)
        x[j] -= e * u[j];
}

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
        double *x = malloc((size_t)(GPTQ_ROWS * K) * sizeof(double)), *d = malloc((size_t)K * sizeof(double));
        if (!x || !d) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t r0 = 0; r0 < N; r0 += GPTQ_ROWS) {
            if (!x || !d)
                continue;
            const int64_t nr = N - r0 < GPTQ_ROWS ? N - r0 : GPTQ_ROWS;
            for (int64_t t = 0; t < nr; t++) {
                const int64_t r = r0 + t;
                const float *wr = w + r * K;
                uint8_t *qr = wq + r * rb, *sr = fmt == HY_QF_FP8_TENSOR ? NULL : sq + r * nb;
                hy_quant_row_rtn(wr, K, fmt, fp8_scale, o->mx_scale, qr, sr); /* the scales (kept), RTN codes */
                if (obj && sampled(r, N))
                    o_rtn += row_objective(wr, qr, sr, h, K, fmt, fp8_scale, d);
                if (fmt == HY_QF_MXFP4)
                    memset(qr, 0, (size_t)rb);
                for (int64_t i = 0; i < K; i++)
                    x[t * K + i] = (double)wr[p[i]];
            }
            for (int64_t i = 0; i < K; i++) {
                const int64_t c = p[i];
                const double *ui = u + i * K;
                double e[GPTQ_ROWS];
                for (int64_t t = 0; t < nr; t++) {
                    const int64_t r = r0 + t;
                    uint8_t *qr = wq + r * rb, *sr = fmt == HY_QF_FP8_TENSOR ? NULL : sq + r * nb;
                    const float v = (float)x[t * K + i];
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
                    e[t] = (x[t * K + i] - q) / ui[i];
                }
                /* one read of U's row i serves the tile, in chunks that stay in L1 */
                for (int64_t j0 = i + 1; j0 < K; j0 += SPREAD_CHUNK) {
                    const int64_t len = K - j0 < SPREAD_CHUNK ? K - j0 : SPREAD_CHUNK;
                    for (int64_t t = 0; t < nr; t++)
                        spread_error(x + t * K + j0, ui + j0, e[t], len);
                }
            }
            for (int64_t t = 0; obj && t < nr; t++) {
                const int64_t r = r0 + t;
                if (sampled(r, N))
                    o_gptq += row_objective(w + r * K, wq + r * rb, fmt == HY_QF_FP8_TENSOR ? NULL : sq + r * nb,
                                            h, K, fmt, fp8_scale, d);
            }
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
