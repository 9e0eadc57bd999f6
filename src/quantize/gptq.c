/* gptq.c - GPTQ rounding of one weight matrix (math and conventions: gptq.h). */
#include "quantize/gptq.h"

#include "base/err.h"
#include "kernels/kernel_table.h"
#include "quant/formats.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

double hy_gptq_dequant(enum hy_qformat fmt, uint8_t code, float fp8_scale, uint8_t scale_byte)
{
    if (hy_qformat_is_int8(fmt))
        return (double)(int8_t)code * (double)fp8_scale;
    if (fmt == HY_QF_FP8_TENSOR)
        return (double)hy_e4m3_to_f32(code) * (double)fp8_scale;
    const double s = (double)hy_e8m0_to_f32(scale_byte);
    return (fmt == HY_QF_MXFP8 ? (double)hy_e4m3_to_f32(code) : (double)hy_e2m1_to_f32(code)) * s;
}

#define CHOL_BLOCK 64 /* columns per parallel step of the Cholesky (one barrier each) */
#define CHOL_ROWS 4   /* rows below a block per step of the Cholesky (the avx2 gemm_sub_f64's 4 rows) */
#define INV_COLS 64   /* columns of L^-1 per task of the inverse (each task reads all of L once) */

/* In-place lower Cholesky factor of a [n, n] (row-major, lower triangle read and written; the upper
 * triangle is left as it was): a[i][j] = (a[i][j] - dot(a_i[0, j), a_j[0, j))) / a[j][j] with the
 * level's dot_f64, left-looking by blocks of CHOL_BLOCK columns: the block's diagonal part on one
 * thread, then its rows below in parallel, CHOL_ROWS at a time. Every element is the same
 * expression whatever the thread count. Returns 0, or 1 when a pivot is not positive (a not
 * positive definite). */
static int chol_lower(double *a, int64_t n, double (*dot)(const double *, const double *, int64_t))
{
    void (*gemm_sub)(double *, int64_t, int64_t, const double *, int64_t, const double *, int64_t, int64_t, int64_t) =
        hy_kernels_active()->gemm_sub_f64;
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
        /* rows in fours: the four dots with row j share its loads (gemm_sub_f64 with one column, each
         * x -= dot in dot_f64's order, so every element is the expression above) */
#pragma omp parallel for schedule(dynamic, 4) if ((n - j1) * j1 >= 65536)
        for (int64_t i0 = j1; i0 < n; i0 += CHOL_ROWS) {
            const int64_t nr = n - i0 < CHOL_ROWS ? n - i0 : CHOL_ROWS;
            double *ai = a + i0 * n;
            for (int64_t j = j0; j < j1; j++) {
                gemm_sub(ai + j, n, nr, ai, n, a + j * n, n, j, 1);
                for (int64_t t = 0; t < nr; t++)
                    ai[t * n + j] /= a[j * n + j];
            }
        }
    }
    return 0;
}

/* U^T, U = the upper Cholesky factor of Hd^-1 (Hd^-1 = U^T U), for a [n, n] holding the lower Cholesky
 * factor L of Hd in REVERSED order (J Hd J = L L^T, J the reversal): then Hd = R R^T with
 * R = J L J upper, and U = R^-1 = J L^-1 J (upper, positive diagonal: the unique factor). The
 * inverse is by forward substitution, one column c of L^-1 per task: m[c][i] = L^-1[i][c] =
 * -dot(L[i][c, i), m[c][c, i)) / L[i][i], m[c][c] = 1 / L[c][c]. Returns 0, 1 when an element is
 * not finite (Hd numerically singular), -1 out of memory. ut [n, n] gets U^T (zeros above the diagonal). */
static int upper_factor_of_inverse(const double *l, int64_t n, double *ut,
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
    /* U^T[j][i] = U[i][j] = L^-1[n-1-i][n-1-j] = m[n-1-j][n-1-i] for i <= j: row j of U^T is row n-1-j
     * of m reversed */
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; j++) {
        double *utj = ut + j * n;
        const double *mr = m + (n - 1 - j) * n + (n - 1);
        for (int64_t i = 0; i <= j; i++)
            utj[i] = mr[-i];
        for (int64_t i = j + 1; i < n; i++)
            utj[i] = 0.0;
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

/* U^T for the upper factor U of (Hd)^-1 in the column order p, Hd = h (permuted, dead diagonal -> 1) + λ I,
 * λ = damp * mean(diag), raising λ by 10x up to 6 times while Hd or its inverse is indefinite. */
static int hinv_factor(const double *h, int64_t K, const int64_t *p, double damp, double *ut)
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
            rc = upper_factor_of_inverse(a, K, ut, dot);
    }
    free(a);
    return rc;
}

/* Code of value v (already divided by its scale, f32) in fmt. */
static uint8_t encode(enum hy_qformat fmt, float v)
{
    return fmt == HY_QF_MXFP4 ? hy_f32_to_e2m1(v) : hy_f32_to_e4m3(v);
}

/* int8 code of v (already divided by its scale): RNE, clamped to [-127, 127]. */
static uint8_t encode_i8(float v)
{
    const float r = rintf(v);
    return (uint8_t)(int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
}

float hy_quant_i8_row_scale(const float *w, int64_t K)
{
    float amax = 0.0f;
    for (int64_t k = 0; k < K; k++)
        amax = fabsf(w[k]) > amax ? fabsf(w[k]) : amax;
    const float s = amax / 127.0f;
    return s > FLT_EPSILON ? s : FLT_EPSILON;
}

/* The row's own scale: int8 reads it from the row's 4 scale bytes, fp8 has the tensor's. */
static float row_scale_of(enum hy_qformat fmt, const uint8_t *sr, float fp8_scale)
{
    if (!hy_qformat_is_int8(fmt))
        return fp8_scale;
    float s;
    memcpy(&s, sr, sizeof(s));
    return s;
}

void hy_quant_row_rtn(const float *w, int64_t K, enum hy_qformat fmt, float fp8_scale, enum hy_mx_scale_rule rule,
                      uint8_t *wq, uint8_t *sq)
{
    if (hy_qformat_is_int8(fmt)) {
        const float s = hy_quant_i8_row_scale(w, K);
        memcpy(sq, &s, sizeof(s));
        for (int64_t k = 0; k < K; k++)
            wq[k] = encode_i8(w[k] / s);
        return;
    }
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

/* Value of column c's code in a row whose scale is rs (row_scale_of) and scale bytes sr (MX: one per block). */
static double dequant_at(enum hy_qformat fmt, uint8_t code, float rs, const uint8_t *sr, int64_t c)
{
    return hy_gptq_dequant(fmt, code, rs, sr && !hy_qformat_is_int8(fmt) ? sr[c / HY_MX_BLOCK] : 0);
}

/* d = dequant(codes) - w of one row [K]. */
static void row_error(const float *w, const uint8_t *wq, const uint8_t *sq, int64_t K, enum hy_qformat fmt,
                      float fp8_scale, double *d)
{
    const float rs = row_scale_of(fmt, sq, fp8_scale);
    for (int64_t k = 0; k < K; k++)
        d[k] = dequant_at(fmt, code_at(wq, fmt, k), rs, sq, k) - (double)w[k];
}

#define OBJ_ROWS 32    /* rows the objectives are measured on: all when N <= 32, else rows 0, N/32, 2N/32, ... */
#define GPTQ_ROWS 8    /* rows rounded together, so that each row of U is read once per 8 rows */
#define GPTQ_BLOCK 128 /* columns whose error updates the later columns at once (lazy batch updates) */

/* The objective slot of row r (0 <= slot < min(N, OBJ_ROWS)), or -1 when r is not measured. */
static int64_t obj_slot(int64_t r, int64_t N)
{
    const int64_t step = N <= OBJ_ROWS ? 1 : N / OBJ_ROWS;
    return r % step == 0 && r / step < OBJ_ROWS ? r / step : -1;
}

/* sum over the S rows d_s [K] of dd of d_s^T h d_s, reading h once: y = -(D h) by gemm_sub over
 * column chunks in parallel, then the products summed serially (deterministic). -1 out of memory. */
static int objectives(const double *dd, int64_t S, const double *h, int64_t K, double *out)
{
    double *y = calloc((size_t)(S * K), sizeof(double));
    if (!y)
        return -1;
    void (*gemm_sub)(double *, int64_t, int64_t, const double *, int64_t, const double *, int64_t, int64_t, int64_t) =
        hy_kernels_active()->gemm_sub_f64;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t j0 = 0; j0 < K; j0 += 64)
        gemm_sub(y + j0, K, S, dd, K, h + j0 * K, K, K, K - j0 < 64 ? K - j0 : 64);
    for (int64_t s = 0; s < S; s++) {
        double o = 0.0;
        for (int64_t j = 0; j < K; j++)
            o -= dd[s * K + j] * y[s * K + j];
        out[s] = o;
    }
    free(y);
    return 0;
}

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
    f->ut = malloc((size_t)(K * K) * sizeof(double));
    int rc = f->perm && f->ut ? hinv_factor(h, K, f->perm, o->dampening_frac, f->ut) : -1;
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
    free(f->ut);
    memset(f, 0, sizeof(*f));
}

/* 0 when the matrix arguments are usable, else -1 with the error set. */
static int check_args(const float *w, const double *h, int64_t N, int64_t K, enum hy_qformat fmt, float fp8_scale,
                      const struct hy_gptq_opts *o, const uint8_t *wq, const uint8_t *sq)
{
    if (N <= 0 || K <= 0 || !w || !h || !o || !wq || (fmt != HY_QF_FP8_TENSOR && !sq) ||
        (fmt != HY_QF_FP8_TENSOR && fmt != HY_QF_MXFP8 && fmt != HY_QF_MXFP4 && !hy_qformat_is_int8(fmt)) ||
        (fmt == HY_QF_MXFP4 && K % 2) || (fmt == HY_QF_FP8_TENSOR && !(fp8_scale > 0.0f)))
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

/* The shared state of one matrix's rounding. */
struct job {
    const float *w;    /* [N, K] the original rows (scales, objectives) */
    const double *src; /* [N, K] the rows' values to round (coupled rows), or NULL: w */
    const struct hy_gptq_factor *f;
    int64_t N, K, rb, nb;
    enum hy_qformat fmt;
    float fp8_scale;
    const struct hy_gptq_opts *o;
    uint8_t *wq, *sq;
    double *dd; /* objectives' row errors: RTN [0, S), GPTQ [S, 2S) */
    int64_t S;
};

/* GPTQ of the n rows rows[0..n) of j (any order, each once per call), in tiles of GPTQ_ROWS in
 * parallel: scales and RTN codes from w, then each tile's rows (values from src or w, in the factor's
 * column order) rounded column by column with the lazy batch updates. -1 out of memory. */
static int round_rows(const struct job *j, const int64_t *rows, int64_t n)
{
    const int64_t K = j->K, rb = j->rb, nb = j->nb, S = j->S;
    const enum hy_qformat fmt = j->fmt;
    const float fp8_scale = j->fp8_scale;
    const int64_t *p = j->f->perm;
    const double *ut = j->f->ut;
    void (*gemm_sub)(double *, int64_t, int64_t, const double *, int64_t, const double *, int64_t, int64_t, int64_t) =
        hy_kernels_active()->gemm_sub_f64;
    int oom = 0;
#pragma omp parallel
    {
        double *x = malloc((size_t)(GPTQ_ROWS * K) * sizeof(double));
        double eb[GPTQ_ROWS * GPTQ_BLOCK]; /* the tile's errors (x - q) / U[i][i] over the current block */
        double *tile = malloc((size_t)(GPTQ_BLOCK * GPTQ_BLOCK) * sizeof(double)); /* the block's part of U */
        if (!x || !tile) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t i0 = 0; i0 < n; i0 += GPTQ_ROWS) {
            if (!x || !tile)
                continue;
            const int64_t nr = n - i0 < GPTQ_ROWS ? n - i0 : GPTQ_ROWS, *tr = rows + i0;
            for (int64_t t = 0; t < nr; t++) {
                const int64_t r = tr[t];
                const float *wr = j->w + r * K;
                uint8_t *qr = j->wq + r * rb, *sr = fmt == HY_QF_FP8_TENSOR ? NULL : j->sq + r * nb;
                hy_quant_row_rtn(wr, K, fmt, fp8_scale, j->o->mx_scale, qr, sr); /* the scales (kept), RTN codes */
                if (S && obj_slot(r, j->N) >= 0)
                    row_error(wr, qr, sr, K, fmt, fp8_scale, j->dd + obj_slot(r, j->N) * K);
                if (fmt == HY_QF_MXFP4)
                    memset(qr, 0, (size_t)rb);
                for (int64_t i = 0; i < K; i++)
                    x[t * K + i] = j->src ? j->src[r * K + p[i]] : (double)wr[p[i]];
            }
            for (int64_t b0 = 0; b0 < K; b0 += GPTQ_BLOCK) { /* lazy batch updates (GPTQ paper, step 3) */
                const int64_t b1 = b0 + GPTQ_BLOCK < K ? b0 + GPTQ_BLOCK : K, nbk = b1 - b0;
                for (int64_t a = 0; a < nbk; a++) /* the block's rows of U: tile[a][c] = U[b0+a][b0+c] */
                    for (int64_t c = a; c < nbk; c++)
                        tile[a * GPTQ_BLOCK + c] = ut[(b0 + c) * K + b0 + a];
                for (int64_t i = b0; i < b1; i++) {
                    const int64_t c = p[i];
                    const double *ti = tile + (i - b0) * GPTQ_BLOCK + (i - b0); /* ti[j] = U[i][i + j] */
                    for (int64_t t = 0; t < nr; t++) {
                        const int64_t r = tr[t];
                        uint8_t *qr = j->wq + r * rb, *sr = fmt == HY_QF_FP8_TENSOR ? NULL : j->sq + r * nb;
                        const float v = (float)x[t * K + i], rs = row_scale_of(fmt, sr, fp8_scale);
                        uint8_t code;
                        if (hy_qformat_is_int8(fmt))
                            code = encode_i8(v / rs);
                        else if (fmt == HY_QF_FP8_TENSOR)
                            code = encode(fmt, v / fp8_scale);
                        else
                            code = encode(fmt, v * ldexpf(1.0f, 127 - (int)sr[c / HY_MX_BLOCK]));
                        if (fmt == HY_QF_MXFP4)
                            qr[c / 2] |= (uint8_t)(code << ((c & 1) * 4));
                        else
                            qr[c] = code;
                        const double q = dequant_at(fmt, code, rs, sr, c);
                        const double e = (x[t * K + i] - q) / ti[0];
                        eb[t * GPTQ_BLOCK + (i - b0)] = e;
                        spread_error(x + t * K + i + 1, ti + 1, e, b1 - i - 1); /* the block's own columns */
                    }
                }
                /* the columns after the block, once per block: x[t][j] -= dot(e_t, U[b0..b1)[j]) */
                if (b1 < K)
                    gemm_sub(x + b1, K, nr, eb, GPTQ_BLOCK, ut + b1 * K + b0, K, nbk, K - b1);
            }
            for (int64_t t = 0; S && t < nr; t++) {
                const int64_t r = tr[t];
                if (obj_slot(r, j->N) >= 0)
                    row_error(j->w + r * K, j->wq + r * rb, fmt == HY_QF_FP8_TENSOR ? NULL : j->sq + r * nb, K, fmt,
                              fp8_scale, j->dd + (S + obj_slot(r, j->N)) * K);
            }
        }
        free(x);
        free(tile);
    }
    return oom ? -1 : 0;
}

/* Sets up j (the objectives' scratch allocated when obj is wanted); -1 on bad arguments / out of memory. */
static int job_init(struct job *j, const float *w, const double *h, const struct hy_gptq_factor *f, int64_t N,
                    enum hy_qformat fmt, float fp8_scale, const struct hy_gptq_opts *o, uint8_t *wq, uint8_t *sq,
                    const double *obj)
{
    const int64_t K = f ? f->K : 0;
    if (check_args(w, h, N, K, fmt, fp8_scale, o, wq, sq))
        return -1;
    *j = (struct job){.w = w,
                      .f = f,
                      .N = N,
                      .K = K,
                      .rb = fmt == HY_QF_MXFP4 ? K / 2 : K,
                      .nb = hy_qformat_is_int8(fmt) ? (int64_t)sizeof(float) : (K + HY_MX_BLOCK - 1) / HY_MX_BLOCK,
                      .fmt = fmt,
                      .fp8_scale = fp8_scale,
                      .o = o,
                      .wq = wq,
                      .sq = sq,
                      .S = obj ? (N < OBJ_ROWS ? N : OBJ_ROWS) : 0};
    if (j->S && !(j->dd = malloc((size_t)(2 * j->S * K) * sizeof(double))))
        return hy_err_set("gptq: out of memory");
    return 0;
}

/* Fills obj from j's row errors (when asked) and frees j's scratch; rc passes through (an
 * out-of-memory rc or failure here: -1 with the error set). */
static int job_finish(struct job *j, const double *h, double obj[2], int rc)
{
    double *per = j->S && rc == 0 ? malloc((size_t)(2 * j->S) * sizeof(double)) : NULL;
    if (rc || (j->S && (!per || objectives(j->dd, 2 * j->S, h, j->K, per)))) {
        free(j->dd);
        free(per);
        return hy_err_set("gptq: out of memory");
    }
    if (obj) {
        obj[0] = obj[1] = 0.0;
        for (int64_t s = 0; s < j->S; s++) {
            obj[0] += per[s];
            obj[1] += per[j->S + s];
        }
    }
    free(j->dd);
    free(per);
    return 0;
}

int hy_gptq_quantize_factored(const float *w, const double *h, const struct hy_gptq_factor *f, int64_t N,
                              enum hy_qformat fmt, float fp8_scale, const struct hy_gptq_opts *o, uint8_t *wq,
                              uint8_t *sq, double obj[2])
{
    struct job j;
    if (job_init(&j, w, h, f, N, fmt, fp8_scale, o, wq, sq, obj))
        return -1;
    int64_t *rows = malloc((size_t)N * sizeof(int64_t));
    if (rows)
        for (int64_t r = 0; r < N; r++)
            rows[r] = r;
    const int rc = rows ? round_rows(&j, rows, N) : -1;
    free(rows);
    return job_finish(&j, h, obj, rc);
}

int hy_gptq_quantize_coupled(const float *w, const double *h, const struct hy_gptq_factor *f, int64_t N,
                             const double *g, int64_t group_rows, enum hy_qformat fmt, float fp8_scale,
                             const struct hy_gptq_opts *o, uint8_t *wq, uint8_t *sq, double obj[2])
{
    if (!g || group_rows <= 0 || N % group_rows)
        return hy_err_set("gptq: bad row groups (N %lld, group_rows %lld)", (long long)N, (long long)group_rows);
    struct job j;
    if (job_init(&j, w, h, f, N, fmt, fp8_scale, o, wq, sq, obj))
        return -1;
    const int64_t K = j.K, G = N / group_rows, R = group_rows;
    double *src = malloc((size_t)(N * K) * sizeof(double)), *ug = malloc((size_t)(G * R * R) * sizeof(double));
    int64_t *order = malloc((size_t)N * sizeof(int64_t)), *rows = malloc((size_t)G * sizeof(int64_t));
    int rc = src && ug && order && rows ? 0 : -1;
    j.src = src;
    /* each group's factor: U_g^T of (G_g + λ I)^-1 in its row order (the columns' rules, on G_g) */
    for (int64_t gi = 0; rc == 0 && gi < G; gi++) {
        const double *gg = g + gi * R * R;
        int64_t *po = column_order(gg, R, o->actorder);
        int frc = po ? hinv_factor(gg, R, po, o->dampening_frac, ug + gi * R * R) : -1;
        if (po)
            memcpy(order + gi * R, po, (size_t)R * sizeof(int64_t));
        free(po);
        if (frc == 1) { /* G_g indefinite after dampening: its rows uncoupled (U_g diagonal) */
            memset(ug + gi * R * R, 0, (size_t)(R * R) * sizeof(double));
            for (int64_t a = 0; a < R; a++)
                ug[gi * R * R + a * R + a] = 1.0;
            frc = 0;
        }
        rc = frc;
    }
    if (rc == 0) {
        for (int64_t i = 0; i < N * K; i++)
            src[i] = (double)w[i];
        for (int64_t a = 0; rc == 0 && a < R; a++) { /* step a: each group's a-th row in its order */
            for (int64_t gi = 0; gi < G; gi++)
                rows[gi] = gi * R + order[gi * R + a];
            rc = round_rows(&j, rows, G);
#pragma omp parallel for schedule(static) if (G * (R - a) * K >= (1 << 16))
            for (int64_t gi = 0; gi < G; gi++) { /* row r's change spread over its group's later rows */
                const int64_t r = rows[gi];
                const double *u = ug + gi * R * R; /* U^T: U[a][b] = u[b * R + a] */
                const uint8_t *qr = wq + r * j.rb, *sr = fmt == HY_QF_FP8_TENSOR ? NULL : sq + r * j.nb;
                double *sr_row = src + r * K; /* becomes the change w_r - q_r */
                const float rs = row_scale_of(fmt, sr, fp8_scale);
                for (int64_t c = 0; c < K; c++)
                    sr_row[c] -= dequant_at(fmt, code_at(qr, fmt, c), rs, sr, c);
                for (int64_t b = a + 1; b < R; b++) {
                    const double coef = u[b * R + a] / u[a * R + a];
                    spread_error(src + (gi * R + order[gi * R + b]) * K, sr_row, coef, K);
                }
            }
        }
    }
    free(src);
    free(ug);
    free(order);
    free(rows);
    return job_finish(&j, h, obj, rc);
}
