/* formats.c - FP8 E4M3FN / FP4 E2M1 encoders and the OCP MX row quantizer (formats.h). */
#include "quant/formats.h"

#include <math.h>
#include <string.h>

int hy_e4m3_has_nan(const uint8_t *p, size_t n)
{
    /* 8 bytes per step: a byte whose low 7 bits are all set becomes >= 0x80 after + 1 (no carry leaves
     * a byte: the masked bytes are <= 0x7f) */
    const uint64_t lo7 = 0x7f7f7f7f7f7f7f7full, one = 0x0101010101010101ull, hi = 0x8080808080808080ull;
    uint64_t acc = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        acc |= ((v & lo7) + one) & hi;
    }
    for (; i < n; i++)
        acc |= (p[i] & 0x7f) == 0x7f;
    return acc != 0;
}

uint8_t hy_f32_to_e4m3(float x)
{
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x))
        return sign | 0x7f;
    float a = fabsf(x);
    if (a >= 448.0f)
        return sign | 0x7e;
    if (a < 0x1p-6f) { /* subnormal grid step 2^-9; 8 steps round up into the min normal 0x08 */
        int q = (int)nearbyintf(a * 0x1p9f);
        return sign | (uint8_t)q;
    }
    int ex;
    float fr = frexpf(a, &ex); /* a = fr * 2^ex, fr in [0.5, 1) */
    int E = ex - 1;            /* a = (2 fr) * 2^E, 2 fr in [1, 2) */
    int q = (int)nearbyintf((2.0f * fr - 1.0f) * 8.0f);
    if (q == 8) {
        q = 0;
        E++;
    }
    int biased = E + 7;
    if (biased > 15 || (biased == 15 && q == 7))
        return sign | 0x7e;
    return sign | (uint8_t)(biased << 3) | (uint8_t)q;
}

uint8_t hy_f32_to_e2m1(float x)
{
    if (isnan(x))
        return 0;
    const uint8_t sign = signbit(x) ? 8 : 0;
    float a = fabsf(x);
    uint8_t c;
    /* midpoints between 0, .5, 1, 1.5, 2, 3, 4, 6; a tie goes to the even code */
    if (a <= 0.25f)
        c = 0;
    else if (a < 0.75f)
        c = 1;
    else if (a <= 1.25f)
        c = 2;
    else if (a < 1.75f)
        c = 3;
    else if (a <= 2.5f)
        c = 4;
    else if (a < 3.5f)
        c = 5;
    else if (a <= 5.0f)
        c = 6;
    else
        c = 7;
    return sign | c;
}

/* Shared exponent of the OCP rule for a block with this amax (NaN never wins; zero -> -127). */
static int ocp_exponent(float amax, int emax)
{
    int X = -127;
    if (amax > 0.0f && isfinite(amax)) {
        int ex;
        frexpf(amax, &ex);   /* amax in [2^(ex-1), 2^ex) */
        X = (ex - 1) - emax; /* floor(log2(amax)) - emax */
    } else if (isinf(amax)) {
        X = 127;
    }
    return X < -127 ? -127 : X > 127 ? 127 : X;
}

static uint8_t encode_elem(enum hy_mx_elem elem, float v)
{
    return elem == HY_MX_E4M3 ? hy_f32_to_e4m3(v) : hy_f32_to_e2m1(v);
}

static float decode_elem(enum hy_mx_elem elem, uint8_t c)
{
    return elem == HY_MX_E4M3 ? hy_e4m3_to_f32(c) : hy_e2m1_to_f32(c);
}

/* Sum of squared errors of x[0..n) quantized with shared exponent X (f64). */
static double block_sse(const float *x, int64_t n, enum hy_mx_elem elem, int X)
{
    const float inv = ldexpf(1.0f, -X);
    double e = 0.0;
    for (int64_t k = 0; k < n; k++) {
        const double d = (double)x[k] - ldexp((double)decode_elem(elem, encode_elem(elem, x[k] * inv)), X);
        e += d * d;
    }
    return e;
}

int hy_mx_block_exponent(const float *x, int64_t n, enum hy_mx_elem elem, enum hy_mx_scale_rule rule)
{
    const int emax = elem == HY_MX_E4M3 ? 8 : 2;
    float amax = 0.0f;
    for (int64_t k = 0; k < n; k++) {
        const float a = fabsf(x[k]);
        if (a > amax) /* NaN never wins */
            amax = a;
    }
    const int X = ocp_exponent(amax, emax);
    if (rule != HY_MX_SCALE_MSE || X >= 127 || !(amax > 0.0f) || !isfinite(amax))
        return X;
    return block_sse(x, n, elem, X + 1) < block_sse(x, n, elem, X) ? X + 1 : X;
}

void hy_mx_quantize_row_rule(const float *x, int64_t K, enum hy_mx_elem elem, enum hy_mx_scale_rule rule, uint8_t *q,
                             uint8_t *scales)
{
    if (elem == HY_MX_E2M1)
        memset(q, 0, (size_t)((K + 1) / 2));
    for (int64_t b0 = 0, bi = 0; b0 < K; b0 += HY_MX_BLOCK, bi++) {
        const int64_t b1 = b0 + HY_MX_BLOCK < K ? b0 + HY_MX_BLOCK : K;
        const int X = hy_mx_block_exponent(x + b0, b1 - b0, elem, rule);
        scales[bi] = (uint8_t)(X + 127);
        const float inv = ldexpf(1.0f, -X); /* exact power of two (2^127 at most) */
        for (int64_t k = b0; k < b1; k++) {
            const float v = x[k] * inv;
            if (elem == HY_MX_E4M3)
                q[k] = hy_f32_to_e4m3(v);
            else
                q[k / 2] |= (uint8_t)(hy_f32_to_e2m1(v) << ((k & 1) * 4));
        }
    }
}

void hy_mx_quantize_row(const float *x, int64_t K, enum hy_mx_elem elem, uint8_t *q, uint8_t *scales)
{
    hy_mx_quantize_row_rule(x, K, elem, HY_MX_SCALE_OCP, q, scales);
}
