/* ref.c - scalar reference kernels: the oracle the SIMD variants are tested against, and the
 * HYINFER_ISA=ref level. */
#include "kernels/kernel_table.h"
#include "kernels/scratch.h"
#include "kernels/w4a8.h"
#include "quant/formats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

float hy_ref_dot_f32(const float *a, const float *b, int64_t n)
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[k + j] * b[k + j];
    for (int j = 0; k < n; k++, j++)
        acc[j] += a[k] * b[k];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

double hy_ref_dot_f64(const double *a, const double *b, int64_t n)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t k = 0; k < n; k++)
        acc[k & 7] += a[k] * b[k];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

void hy_ref_gemm_sub_f64(double *x, int64_t ldx, int64_t nr, const double *e, int64_t lde, const double *v, int64_t ldv,
                         int64_t nb, int64_t n)
{
    for (int64_t t = 0; t < nr; t++)
        for (int64_t j = 0; j < n; j++)
            x[t * ldx + j] -= hy_ref_dot_f64(e + t * lde, v + j * ldv, nb);
}

void hy_ref_gemm_tn_acc_f64(double *g, int64_t ldg, const double *a, int64_t lda, const double *b, int64_t ldb,
                            int64_t nt, int64_t ni, int64_t nj)
{
    for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++) {
            double acc = g[i * ldg + j];
            for (int64_t t = 0; t < nt; t++)
                acc += a[t * lda + i] * b[t * ldb + j];
            g[i * ldg + j] = acc;
        }
}

void hy_ref_fp8_fit_pass(const float *x, int64_t n, float s, float out[3])
{
    float e[8] = {0}, xc[8] = {0}, cc[8] = {0};
    for (int64_t i = 0; i < n; i++) {
        const int j = (int)(i & 7);
        const float r = hy_e4m3_round(x[i] / s), d = r * s - x[i];
        e[j] += d * d;
        xc[j] += x[i] * r;
        cc[j] += r * r;
    }
    const float *acc[3] = {e, xc, cc};
    for (int k = 0; k < 3; k++) {
        const float *a = acc[k];
        out[k] = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    }
}

void hy_ref_fp8_encode(const float *x, int64_t n, float s, uint8_t *q)
{
    for (int64_t i = 0; i < n; i++)
        q[i] = hy_f32_to_e4m3(x[i] / s);
}

/* The calling thread's row buffer for weight_row: kept between calls (no allocation per call). */
static _Thread_local struct hy_scratch row_buf;

/* K floats of row buffer, or NULL when W needs none (plain F32) or on out of memory (*oom = 1). */
static float *row_buffer(const struct hy_tensor *W, int *oom)
{
    *oom = 0;
    if (W->dtype == HY_DTYPE_F32 && W->qscheme == HY_QS_NONE)
        return NULL;
    float *b = hy_scratch_get(&row_buf, (size_t)W->cols * sizeof(float));
    *oom = !b;
    return b;
}

/* Widens one weight row to f32 (returns the row itself for F32 weights). */
static const float *weight_row(const struct hy_tensor *W, int64_t n, float *buf)
{
    const int64_t K = W->cols;
    if (W->dtype == HY_DTYPE_F32 && W->qscheme == HY_QS_NONE)
        return (const float *)W->data + n * K;
    if (W->dtype == HY_DTYPE_BF16 && W->qscheme == HY_QS_NONE) {
        const uint16_t *r = (const uint16_t *)W->data + n * K;
        for (int64_t k = 0; k < K; k++)
            buf[k] = hy_bf16_to_f32(r[k]);
        return buf;
    }
    for (int64_t k = 0; k < K; k++) /* F16 and the quantized formats: the exact dequantized value */
        buf[k] = hy_tensor_get(W, n, k);
    return buf;
}

void hy_ref_matmul(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    if (hy_w4a8_on(W)) { /* opt-in W4A8 (w4a8.h) */
        hy_ref_matmul_w4a8(y, x, T, W);
        return;
    }
    const int64_t N = W->rows, K = W->cols;
    const int par = (double)N * (double)K * (double)T > 65536.0;
#pragma omp parallel if (par)
    {
        int oom;
        float *buf = row_buffer(W, &oom);
#pragma omp for schedule(static)
        for (int64_t n = 0; n < N; n++) {
            const float *w = oom ? NULL : weight_row(W, n, buf);
            for (int64_t t = 0; t < T; t++) /* out of memory: NaN rows, never a crash */
                y[t * N + n] = w ? hy_ref_dot_f32(x + t * K, w, K) : NAN;
        }
    }
}

void hy_ref_matmul_rows(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                        int64_t n1)
{
    if (hy_w4a8_on(W)) { /* as hy_ref_matmul */
        hy_matmul_rows_by_view(hy_ref_matmul_w4a8, y, ldy, x, T, W, n0, n1);
        return;
    }
    const int64_t K = W->cols;
    int oom;
    float *buf = row_buffer(W, &oom);
    if (oom) { /* out of memory: NaN outputs, never a crash */
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = n0; n < n1; n++)
                y[t * ldy + (n - n0)] = NAN;
        return;
    }
    for (int64_t n = n0; n < n1; n++) {
        const float *w = weight_row(W, n, buf);
        for (int64_t t = 0; t < T; t++)
            y[t * ldy + (n - n0)] = hy_ref_dot_f32(x + t * K, w, K);
    }
}

void hy_ref_rmsnorm(float *y, const float *x, const float *w, int64_t T, int64_t d, float eps)
{
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * d;
        float *yr = y + t * d;
        float ss = hy_ref_dot_f32(xr, xr, d);
        float inv = 1.0f / sqrtf(ss / (float)d + eps);
        for (int64_t i = 0; i < d; i++)
            yr[i] = w[i] * (xr[i] * inv);
    }
}

void hy_ref_rope(float *x, int64_t n_heads, int64_t head_dim, int32_t pos, const float *inv_freq, int interleaved)
{
    const int64_t half = head_dim / 2;
    for (int64_t i = 0; i < half; i++) {
        float ang = (float)pos * inv_freq[i];
        float c = cosf(ang), s = sinf(ang);
        for (int64_t h = 0; h < n_heads; h++) {
            float *v = x + h * head_dim;
            int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x1 * c + x0 * s;
        }
    }
}

void hy_ref_silu_mul(float *out, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void hy_ref_round_bf16(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = hy_round_bf16(x[i]);
}
