/* dispatch.c - builds the kernel table once and routes the public kernels.h API through it. */
#include "kernels/kernel_table.h"

#include "base/env.h"

#include "kernels/amx.h"
#include "kernels/w8a8.h"
#include "kernels/avx512_bf16.h"

#include "base/err.h"
#include "base/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const struct hy_kernel_table ref_table = {
    .isa = HY_ISA_REF,
    .name = "ref",
    .matmul = hy_ref_matmul,
    .matmul_bf16x = hy_ref_matmul,
    .matmul_rows = hy_ref_matmul_rows,
    .matmul_rows_bf16x = hy_ref_matmul_rows,
    .dot_f32 = hy_ref_dot_f32,
    .rmsnorm = hy_ref_rmsnorm,
    .rope = hy_ref_rope,
    .silu_mul = hy_ref_silu_mul,
    .round_bf16 = hy_ref_round_bf16,
    .attend = hy_ref_attend,
    .attn_pv = hy_ref_attn_pv,
    .fp8_fit_pass = hy_ref_fp8_fit_pass,
    .fp8_encode = hy_ref_fp8_encode,
    .dot_f64 = hy_ref_dot_f64,
    .gemm_sub_f64 = hy_ref_gemm_sub_f64,
    .gemm_tn_acc_f64 = hy_ref_gemm_tn_acc_f64,
};

#if defined(__x86_64__)
static const struct hy_kernel_table avx2_table = {
    .isa = HY_ISA_AVX2,
    .name = "avx2",
    .matmul = hy_avx2_matmul,
    .matmul_bf16x = hy_avx2_matmul,
    .matmul_rows = hy_avx2_matmul_rows,
    .matmul_rows_bf16x = hy_avx2_matmul_rows,
    .dot_f32 = hy_avx2_dot_f32,
    .rmsnorm = hy_avx2_rmsnorm,
    .rope = hy_avx2_rope,
    .silu_mul = hy_avx2_silu_mul,
    .round_bf16 = hy_avx2_round_bf16,
    .attend = hy_avx2_attend,
    .attn_pv = hy_avx2_attn_pv,
    .fp8_fit_pass = hy_avx2_fp8_fit_pass,
    .fp8_encode = hy_avx2_fp8_encode,
    .dot_f64 = hy_avx2_dot_f64,
    .gemm_sub_f64 = hy_avx2_gemm_sub_f64,
    .gemm_tn_acc_f64 = hy_avx2_gemm_tn_acc_f64,
};

/* The AVX-512 levels: their own matmul / dot / RMSNorm chains (16 lanes); rope, silu, bf16 rounding,
 * attention, the FP8 scale fit / encoder and the f64 kernels are the avx2 ones (rope, rounding, the FP8
 * and the f64 ones are bitwise equal to ref at every level).
 * They differ in the bf16-mode matmul: the f32 chain, vdpbf16ps where the CPU has AVX512_BF16
 * (avx512_bf16.c), AMX-BF16 tiles (amx.c). */
#define AVX512_TABLE(ISA, NAME, BF16X, ROWS_BF16X)                                                                     \
    {                                                                                                                  \
        .isa = ISA, .name = NAME, .matmul = hy_avx512_matmul, .matmul_bf16x = BF16X,                                   \
        .matmul_rows = hy_avx512_matmul_rows, .matmul_rows_bf16x = ROWS_BF16X, .dot_f32 = hy_avx512_dot_f32,           \
        .rmsnorm = hy_avx512_rmsnorm, .rope = hy_avx2_rope, .silu_mul = hy_avx2_silu_mul,                              \
        .round_bf16 = hy_avx2_round_bf16, .attend = hy_avx2_attend, .attn_pv = hy_avx2_attn_pv,                        \
        .fp8_fit_pass = hy_avx2_fp8_fit_pass, .fp8_encode = hy_avx2_fp8_encode, .dot_f64 = hy_avx2_dot_f64,            \
        .gemm_sub_f64 = hy_avx2_gemm_sub_f64, .gemm_tn_acc_f64 = hy_avx2_gemm_tn_acc_f64,                              \
    }
static const struct hy_kernel_table avx512_table =
    AVX512_TABLE(HY_ISA_AVX512, "avx512", hy_avx512_matmul, hy_avx512_matmul_rows);
static const struct hy_kernel_table avx512bf16_table =
    AVX512_TABLE(HY_ISA_AVX512, "avx512", hy_avx512bf16_matmul_bf16x, hy_avx512bf16_matmul_rows_bf16x);
static const struct hy_kernel_table amx_table =
    AVX512_TABLE(HY_ISA_AMX, "amx", hy_amx_matmul_bf16x, hy_avx512bf16_matmul_rows_bf16x);
#endif

/* Levels that have kernels in this build. */
static const struct hy_kernel_table *table_of(enum hy_isa isa)
{
    switch (isa) {
    case HY_ISA_REF:
        return &ref_table;
#if defined(__x86_64__)
    case HY_ISA_AVX2:
        return &avx2_table;
    case HY_ISA_AVX512:
        return hy_cpu_caps()->avx512bf16 ? &avx512bf16_table : &avx512_table;
    case HY_ISA_AMX:
        return &amx_table;
#endif
    default:
        return NULL;
    }
}

int hy_kernels_table_for(enum hy_isa isa, struct hy_kernel_table *t)
{
    if ((unsigned)isa >= HY_ISA_COUNT)
        return hy_err_set("kernels: invalid ISA level %d", (int)isa);
    if (!hy_cpu_supports(isa))
        return hy_err_set("kernels: ISA level %s is not supported by this CPU/OS (usable: %s)", hy_isa_name(isa),
                          hy_cpu_caps_string());
    const struct hy_kernel_table *src = table_of(isa);
    if (!src)
        return hy_err_set("kernels: no %s kernels in this build", hy_isa_name(isa));
    *t = *src;
    return 0;
}

enum hy_isa hy_kernels_best_isa(void)
{
    for (int i = HY_ISA_COUNT - 1; i > HY_ISA_REF; i--)
        if (hy_cpu_supports((enum hy_isa)i) && table_of((enum hy_isa)i))
            return (enum hy_isa)i;
    return HY_ISA_REF;
}

static struct hy_kernel_table active;
static pthread_once_t active_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    enum hy_isa best = hy_kernels_best_isa(), isa = best;
    const int want = hy_env_params()->isa; /* HYINFER_ISA, -1 = best */
    if (want >= 0) {
        const char *name = hy_isa_name((enum hy_isa)want);
        if (!hy_cpu_supports((enum hy_isa)want)) /* (no hy_err_set: keep the caller's message) */
            hy_log_error("HYINFER_ISA=%s: not supported by this CPU/OS (usable: %s); using %s", name,
                         hy_cpu_caps_string(), hy_isa_name(best));
        else if (!table_of((enum hy_isa)want))
            hy_log_error("HYINFER_ISA=%s: no %s kernels in this build; using %s", name, name, hy_isa_name(best));
        else
            isa = (enum hy_isa)want;
    }
    active = *table_of(isa);
    hy_log_debug("kernels: ISA level %s (cpu: %s)", active.name, hy_cpu_caps_string());
}

const struct hy_kernel_table *hy_kernels_active(void)
{
    pthread_once(&active_once, choose);
    return &active;
}

/* W8A8 weights (Ascend int8) run the integer kernels of w8a8.h in both compute modes: their activations are
 * quantized to int8 whatever the mode. */
void hy_matmul(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    if (hy_tensor_is_w8a8(W))
        hy_w8a8_matmul(y, x, T, W);
    else
        hy_kernels_active()->matmul(y, x, T, W);
}

void hy_matmul_bf16x(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    if (hy_tensor_is_w8a8(W))
        hy_w8a8_matmul(y, x, T, W);
    else
        hy_kernels_active()->matmul_bf16x(y, x, T, W);
}

void hy_matmul_rows(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0, int64_t n1)
{
    if (hy_tensor_is_w8a8(W))
        hy_w8a8_matmul_rows(y, ldy, x, T, W, n0, n1);
    else
        hy_kernels_active()->matmul_rows(y, ldy, x, T, W, n0, n1);
}

void hy_matmul_rows_bf16x(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                          int64_t n1)
{
    if (hy_tensor_is_w8a8(W))
        hy_w8a8_matmul_rows(y, ldy, x, T, W, n0, n1);
    else
        hy_kernels_active()->matmul_rows_bf16x(y, ldy, x, T, W, n0, n1);
}

void hy_matmul_rows_by_view(void (*matmul)(float *, const float *, int64_t, const struct hy_tensor *), float *y,
                            int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0, int64_t n1)
{
    const int64_t nr = n1 - n0;
    if (nr <= 0 || T <= 0)
        return;
    struct hy_tensor v = *W;
    v.rows = nr;
    v.data = (const char *)W->data + n0 * hy_tensor_row_bytes(W);
    if (W->qscheme == HY_QS_MX32)
        v.mx_scales = W->mx_scales + n0 * ((W->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK);
    float one[64], *tmp = T * nr <= 64 ? one : malloc((size_t)(T * nr) * sizeof(float));
    if (!tmp) { /* out of memory: one output row at a time through the stack buffer */
        for (int64_t n = n0; n < n1; n++)
            for (int64_t t = 0; t < T; t++)
                hy_matmul_rows_by_view(matmul, y + t * ldy + (n - n0), 0, x + t * W->cols, 1, W, n, n + 1);
        return;
    }
    matmul(tmp, x, T, &v);
    for (int64_t t = 0; t < T; t++)
        memcpy(y + t * ldy, tmp + t * nr, (size_t)nr * sizeof(float));
    if (tmp != one)
        free(tmp);
}

float hy_dot_f32(const float *a, const float *b, int64_t n)
{
    return hy_kernels_active()->dot_f32(a, b, n);
}

void hy_rmsnorm(float *y, const float *x, const float *w, int64_t T, int64_t d, float eps)
{
    hy_kernels_active()->rmsnorm(y, x, w, T, d, eps);
}

void hy_rope(float *x, int64_t n_heads, int64_t head_dim, int32_t pos, const float *inv_freq, int interleaved)
{
    hy_kernels_active()->rope(x, n_heads, head_dim, pos, inv_freq, interleaved);
}

void hy_silu_mul(float *out, const float *gate, const float *up, int64_t n)
{
    hy_kernels_active()->silu_mul(out, gate, up, n);
}

void hy_round_bf16_inplace(float *x, int64_t n)
{
    hy_kernels_active()->round_bf16(x, n);
}
