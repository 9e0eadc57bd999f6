/* w4a8.c - W4A8 (MXFP4 weights x MXINT8 activations): the mode switch, the MXINT8 activation
 * quantizer and the scalar reference matmul (rules in w4a8.h). */
#include "kernels/w4a8.h"

#include "base/env.h"

#include "base/log.h"
#include "kernels/kernel_table.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static enum hy_mxfp4_act act_mode = HY_MXFP4_ACT_F32;
static pthread_once_t act_once = PTHREAD_ONCE_INIT;

static void act_read(void)
{
    act_mode = hy_env_params()->mxfp4_act_mxint8 ? HY_MXFP4_ACT_MXINT8 : HY_MXFP4_ACT_F32; /* HYINFER_MXFP4_ACT */
    if (act_mode == HY_MXFP4_ACT_MXINT8)
        hy_log_debug("kernels: MXFP4 matmuls use W4A8 (MXINT8 activations)");
}

enum hy_mxfp4_act hy_mxfp4_act_mode(void)
{
    pthread_once(&act_once, act_read);
    return act_mode;
}

int hy_w4a8_applies(const struct hy_tensor *W)
{
    return W->dtype == HY_DTYPE_F4_E2M1 && W->qscheme == HY_QS_MX32 && W->mx_scales && W->cols % 2 == 0 && W->cols > 0;
}

int hy_w4a8_on(const struct hy_tensor *W)
{
    return hy_w4a8_applies(W) && hy_mxfp4_act_mode() == HY_MXFP4_ACT_MXINT8;
}

void hy_mxint8_quantize_row(const float *x, int64_t K, int8_t *q, int32_t *X)
{
    for (int64_t k0 = 0, b = 0; k0 < K; k0 += 32, b++) {
        const int64_t n = K - k0 < 32 ? K - k0 : 32;
        float a = 0.0f;
        int finite = 1;
        for (int64_t i = 0; i < n; i++) {
            const float v = fabsf(x[k0 + i]);
            finite &= isfinite(v) != 0;
            if (v > a)
                a = v;
        }
        if (!finite || a == 0.0f) {
            X[b] = finite ? -148 : HY_W4A8_XNAN;
            memset(q + k0, 0, (size_t)n);
            continue;
        }
        int e;
        const float m = frexpf(a, &e);
        int xb = m <= 127.0f / 128.0f ? e - 7 : e - 6;
        xb = xb < -148 ? -148 : xb;
        X[b] = xb;
        const double inv = ldexp(1.0, -xb); /* x * 2^-X is exact in double */
        for (int64_t i = 0; i < n; i++) {
            double r = rint((double)x[k0 + i] * inv); /* round half to even (default mode) */
            r = r > 127.0 ? 127.0 : r < -127.0 ? -127.0 : r;
            q[k0 + i] = (int8_t)r;
        }
    }
}

float hy_w4a8_factor(int32_t X, uint8_t sw)
{
    if (sw == 255 || X == HY_W4A8_XNAN)
        return NAN;
    return ldexpf(1.0f, (int)X + (int)sw - 128);
}

/* 2 * e2m1(code): integers -12..12 */
static const int8_t e2m1_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void hy_ref_matmul_w4a8(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    const int64_t N = W->rows, K = W->cols, nb = (K + 31) / 32, rb = K / 2;
    int8_t *q = malloc((size_t)(T * K) + 1);
    int32_t *X = malloc((size_t)(T * nb) * sizeof(int32_t) + 1);
    if (!q || !X) { /* out of memory: nothing sensible to compute */
        free(q);
        free(X);
        for (int64_t i = 0; i < T * N; i++)
            y[i] = NAN;
        return;
    }
    for (int64_t t = 0; t < T; t++)
        hy_mxint8_quantize_row(x + t * K, K, q + t * K, X + t * nb);
    const uint8_t *wd = W->data;
    const int par = (double)N * (double)K * (double)T > 65536.0;
    (void)par;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *row = wd + n * rb, *sw = W->mx_scales + n * nb;
        for (int64_t t = 0; t < T; t++) {
            const int8_t *qt = q + t * K;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t b = 0; b < nb; b++) {
                int32_t s = 0;
                for (int64_t k = 32 * b; k < K && k < 32 * b + 32; k++)
                    s += (int32_t)qt[k] * e2m1_x2[(row[k / 2] >> ((k & 1) * 4)) & 15];
                acc[b & 7] = fmaf((float)s, hy_w4a8_factor(X[t * nb + b], sw[b]), acc[b & 7]);
            }
            y[t * N + n] = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
        }
    }
    free(q);
    free(X);
}
