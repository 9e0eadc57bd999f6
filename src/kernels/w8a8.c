/* w8a8.c - Ascend W8A8 int8 matmuls: activation quantizers, the scalar dots, the shared epilogue and the
 * threaded driver (rules in w8a8.h). */
#include "kernels/w8a8.h"

#include "kernels/task_rows.h"

#include "base/cpu.h"
#include "kernels/kernel_table.h"
#include "kernels/scratch.h"

#include <math.h>
#include <string.h>

#define W8A8_NB 32 /* output rows per epilogue block */

static int8_t sat_i8(float r)
{
    return (int8_t)(r > 127.0f ? 127 : r < -128.0f ? -128 : (int)r);
}

float hy_w8a8_quant_dynamic(const float *x, int64_t K, int8_t *q)
{
    float a = 0.0f;
    int finite = 1;
    for (int64_t k = 0; k < K; k++) {
        const float v = fabsf(x[k]);
        finite &= isfinite(v) != 0;
        a = v > a ? v : a;
    }
    if (!finite) {
        memset(q, 0, (size_t)K);
        return NAN;
    }
    const float s = a > 0.0f ? a / 127.0f : 1.0f;
    for (int64_t k = 0; k < K; k++)
        q[k] = sat_i8(rintf(x[k] / s)); /* rintf: round half to even (the default rounding mode) */
    return s;
}

void hy_w8a8_quant_static(const float *x, int64_t K, float s_in, float o, int8_t *q)
{
    const float r = 1.0f / s_in;
    for (int64_t k = 0; k < K; k++) {
        const float v = rintf(x[k] * r + o);
        q[k] = v == v ? sat_i8(v) : 0;
    }
}

void hy_ref_w8a8_dots(int32_t *acc, int64_t lda, const int8_t *q, int64_t T, const struct hy_tensor *W, int64_t n0,
                      int64_t n1)
{
    const int64_t K = W->cols;
    for (int64_t n = n0; n < n1; n++) {
        const int8_t *w = (const int8_t *)W->data + n * K;
        for (int64_t t = 0; t < T; t++) {
            const int8_t *a = q + t * K;
            int32_t s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (int32_t)a[k] * (int32_t)w[k];
            acc[t * lda + (n - n0)] = s;
        }
    }
}

int hy_w8a8_vnni_usable(void)
{
    return hy_cpu_supports(HY_ISA_AVX512) && hy_cpu_caps()->avx512vnni;
}

hy_w8a8_dots_fn hy_w8a8_dots_active(void)
{
#if defined(__x86_64__)
    const enum hy_isa isa = hy_kernels_active()->isa;
    if (isa >= HY_ISA_AVX512 && hy_w8a8_vnni_usable())
        return hy_avx512_w8a8_dots;
    if (isa != HY_ISA_REF)
        return hy_avx2_w8a8_dots;
#endif
    return hy_ref_w8a8_dots;
}

/* The last activation rows a thread quantized (kept when T * K <= MEMO_MAX): the row-range calls of the MoE
 * and grouped paths pass the same x to many matrices, which then share one quantization. */
#define MEMO_MAX (1 << 20)
struct memo {
    const float *xc; /* the copy of x it was made from (x_scratch's buffer then) */
    int64_t T, K;
    int scheme;
    float s_in, o;
    int valid;
};

static _Thread_local struct hy_scratch q_scratch, acc_scratch, x_scratch;
static _Thread_local struct memo memo;

/* One activation row quantized by the rule of W (AVX2 where the level has it: the same bits). */
static float quantize_row(const struct hy_tensor *W, const float *x, int64_t K, int8_t *q)
{
    const int dyn = W->qscheme == HY_QS_W8A8_DYN;
#if defined(__x86_64__)
    if (hy_kernels_active()->isa != HY_ISA_REF) {
        if (dyn)
            return hy_avx2_w8a8_quant_dynamic(x, K, q);
        hy_avx2_w8a8_quant_static(x, K, W->in_scale, W->in_offset, q);
        return 0.0f;
    }
#endif
    if (dyn)
        return hy_w8a8_quant_dynamic(x, K, q);
    hy_w8a8_quant_static(x, K, W->in_scale, W->in_offset, q);
    return 0.0f;
}

/* The calling thread's quantized activations of the call (q_scratch): q [T, K] then s_x [T] (dynamic only). */
static int8_t *quantize_rows(const float *x, int64_t T, const struct hy_tensor *W, float **sx)
{
    const int64_t K = W->cols, qb = (T * K + 63) / 64 * 64;
    const int dyn = W->qscheme == HY_QS_W8A8_DYN;
    const float s_in = dyn ? 0.0f : W->in_scale, o = dyn ? 0.0f : W->in_offset;
    float *xc = T * K <= MEMO_MAX ? hy_scratch_get(&x_scratch, (size_t)(T * K) * sizeof(float)) : NULL;
    if (xc && memo.valid && memo.xc == xc && memo.T == T && memo.K == K && memo.scheme == (int)W->qscheme &&
        memo.s_in == s_in && memo.o == o && q_scratch.p && memcmp(xc, x, (size_t)(T * K) * sizeof(float)) == 0) {
        *sx = (float *)((int8_t *)q_scratch.p + qb);
        return q_scratch.p;
    }
    memo.valid = 0;
    int8_t *q = hy_scratch_get(&q_scratch, (size_t)qb + (size_t)T * sizeof(float));
    if (!q)
        return NULL;
    *sx = (float *)(q + qb);
    for (int64_t t = 0; t < T; t++)
        (*sx)[t] = quantize_row(W, x + t * K, K, q + t * K);
    if (xc) {
        memcpy(xc, x, (size_t)(T * K) * sizeof(float));
        memo = (struct memo){.xc = xc, .T = T, .K = K, .scheme = (int)W->qscheme, .s_in = s_in, .o = o, .valid = 1};
    }
    return q;
}

/* Out of memory: NaN outputs [n0, n1) rather than a crash (the callers cannot fail). */
static void nan_out(float *y, int64_t ldy, int64_t T, int64_t n0, int64_t n1)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = n0; n < n1; n++)
            y[t * ldy + (n - n0)] = NAN;
}

/* Outputs [n0, n1) from quantized rows, in blocks of W8A8_NB rows through acc [T, W8A8_NB]. */
static void rows_out(hy_w8a8_dots_fn dots, float *y, int64_t ldy, const int8_t *q, const float *sx, int64_t T,
                     const struct hy_tensor *W, int64_t n0, int64_t n1, int32_t *acc)
{
    for (int64_t b0 = n0; b0 < n1; b0 += W8A8_NB) {
        const int64_t b1 = n1 - b0 < W8A8_NB ? n1 : b0 + W8A8_NB;
        dots(acc, W8A8_NB, q, T, W, b0, b1);
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = b0; n < b1; n++) {
                const int32_t a = acc[t * W8A8_NB + (n - b0)];
                y[t * ldy + (n - n0)] = W->qscheme == HY_QS_W8A8_DYN
                                            ? ((float)a * W->row_scale[n]) * sx[t]
                                            : (float)((int64_t)a + W->row_bias[n]) * W->row_scale[n];
            }
    }
}

void hy_w8a8_matmul_rows_with(hy_w8a8_dots_fn dots, float *y, int64_t ldy, const float *x, int64_t T,
                              const struct hy_tensor *W, int64_t n0, int64_t n1)
{
    if (n1 <= n0 || T <= 0)
        return;
    float *sx;
    const int8_t *q = quantize_rows(x, T, W, &sx);
    int32_t *acc = hy_scratch_get(&acc_scratch, (size_t)(T * W8A8_NB) * sizeof(int32_t));
    if (!q || !acc) {
        nan_out(y, ldy, T, n0, n1);
        return;
    }
    rows_out(dots, y, ldy, q, sx, T, W, n0, n1, acc);
}

void hy_w8a8_matmul_rows(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                         int64_t n1)
{
    hy_w8a8_matmul_rows_with(hy_w8a8_dots_active(), y, ldy, x, T, W, n0, n1);
}

void hy_w8a8_matmul(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    const int64_t N = W->rows;
    float *sx;
    const int8_t *q = quantize_rows(x, T, W, &sx);
    if (!q) {
        hy_w8a8_matmul_rows(y, N, x, T, W, 0, N);
        return;
    }
    const hy_w8a8_dots_fn dots = hy_w8a8_dots_active();
    /* decode: tasks of about HY_TASK_BYTES of weights (each task's first rows start cold, task_rows.h);
     * prefill: W8A8_NB rows per task, which the tokens reuse from L2 */
    const int64_t rows =
        T <= 4 ? (hy_task_rows(hy_task_row_bytes(W), hy_tensor_bytes(W), W8A8_NB) + W8A8_NB - 1) / W8A8_NB * W8A8_NB
               : W8A8_NB;
    const int64_t tasks = (N + rows - 1) / rows;
    const int par = (double)N * (double)W->cols * (double)T > 65536.0;
    (void)par;
#pragma omp parallel for schedule(dynamic, 1) if (par)
    for (int64_t g = 0; g < tasks; g++) {
        int32_t *acc = hy_scratch_get(&acc_scratch, (size_t)(T * W8A8_NB) * sizeof(int32_t));
        const int64_t n0 = g * rows, n1 = n0 + rows < N ? n0 + rows : N;
        if (!acc) {
            nan_out(y + n0, N, T, n0, n1);
            continue;
        }
        rows_out(dots, y + n0, N, q, sx, T, W, n0, n1, acc);
    }
}
