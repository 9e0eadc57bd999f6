/* kernel_test_util.h - shared helpers of the kernel tests: a seeded xorshift generator, random fills,
 * normalized MSE, and random quantized weights built the way checkpoints are. Header-only (static
 * functions); each test binary seeds kt_rng itself so its data stays the same. */
#ifndef HY_TESTS_KERNEL_TEST_UTIL_H
#define HY_TESTS_KERNEL_TEST_UTIL_H

#include "quant/tensor.h"
#include "quant/dtype.h"
#include "quant/formats.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static uint64_t kt_rng = 0x9e3779b97f4a7c15ull;

static inline uint32_t kt_rnd_u32(void)
{
    kt_rng ^= kt_rng << 13;
    kt_rng ^= kt_rng >> 7;
    kt_rng ^= kt_rng << 17;
    return (uint32_t)(kt_rng >> 16);
}

/* Uniform in [-1, 1). */
static inline float kt_rnd_f(void)
{
    return (float)((double)kt_rnd_u32() / 4294967296.0 * 2.0 - 1.0);
}

static inline void kt_fill(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = kt_rnd_f();
}

/* sum((a-b)^2) / sum(b^2) in double (b = the reference); the plain sum when b is all zero. */
static inline double kt_nmse(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? num / den : num;
}

enum kt_qfmt { KT_FP8 = 0, KT_MXFP8, KT_MXFP4, KT_QCOUNT };

/* A random quantized N x K weight: f32 rows of magnitudes 2^-9 .. 2^3 (row-dependent, so E8M0
 * scales vary and a per-tensor FP8 tensor reaches E4M3 subnormals), ~3% exact zeros, quantized with
 * hy_f32_to_e4m3 (scale amax / 448) or hy_mx_quantize_row. Free with kt_free_q. */
static inline struct hy_tensor kt_make_q(enum kt_qfmt f, int64_t N, int64_t K)
{
    float *w = malloc((size_t)(N * K) * 4);
    float amax = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            const float v = (kt_rnd_u32() % 29 == 0) ? 0.0f : kt_rnd_f() * ldexpf(1.0f, (int)(n % 13) - 9);
            w[n * K + k] = v;
            amax = fmaxf(amax, fabsf(v));
        }
    const int64_t nsb = (K + 31) / 32;
    struct hy_tensor W = {.dtype = f == KT_MXFP4 ? HY_DTYPE_F4_E2M1 : HY_DTYPE_F8_E4M3,
                          .rows = N,
                          .cols = K,
                          .qscheme = f == KT_FP8 ? HY_QS_PER_TENSOR : HY_QS_MX32};
    const int64_t rb = hy_tensor_row_bytes(&W);
    uint8_t *d = malloc((size_t)(N * rb) + 1), *s = f == KT_FP8 ? NULL : malloc((size_t)(N * nsb));
    if (f == KT_FP8) {
        W.scale = amax / 448.0f;
        for (int64_t i = 0; i < N * K; i++)
            d[i] = hy_f32_to_e4m3(w[i] / W.scale);
    } else
        for (int64_t n = 0; n < N; n++)
            hy_mx_quantize_row(w + n * K, K, f == KT_MXFP4 ? HY_MX_E2M1 : HY_MX_E4M3, d + n * rb, s + n * nsb);
    W.data = d;
    W.mx_scales = s;
    free(w);
    return W;
}

/* A random plain N x K weight of dtype F32 / BF16 / F16, values in [-1, 1). Free W.data. */
static inline struct hy_tensor kt_make_plain(enum hy_dtype dt, int64_t N, int64_t K)
{
    struct hy_tensor W = {.dtype = dt, .rows = N, .cols = K};
    void *d = malloc((size_t)(N * K) * (dt == HY_DTYPE_F32 ? 4 : 2) + 1);
    for (int64_t i = 0; i < N * K; i++) {
        const float v = kt_rnd_f();
        if (dt == HY_DTYPE_F32)
            ((float *)d)[i] = v;
        else if (dt == HY_DTYPE_BF16)
            ((uint16_t *)d)[i] = hy_f32_to_bf16(v);
        else {
            const uint32_t r = kt_rnd_u32(); /* f16 of magnitude 2^-6 .. 2 */
            ((uint16_t *)d)[i] = (uint16_t)(((r >> 8) & 1) << 15 | (9 + r % 7) << 10 | ((r >> 12) & 0x3ff));
        }
    }
    W.data = d;
    return W;
}

static inline void kt_free_q(struct hy_tensor *W)
{
    free((void *)W->data);
    free((void *)W->mx_scales);
}

#endif
