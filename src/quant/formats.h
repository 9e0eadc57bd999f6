/* formats.h - FP8 E4M3FN, FP4 E2M1 and E8M0 element formats, and OCP MX block scaling.
 *
 * Definitions: spec hy3_architecture.md §5.1 (OCP MX v1.0 / torch.float8_e4m3fn).
 * - E4M3FN: bit 7 sign, bits 6..3 exponent (bias 7), bits 2..0 mantissa; e = 0 subnormal
 *   (m/8 * 2^-6); 0x7f / 0xff = NaN; no infinities; max finite 448.
 * - E2M1 (4-bit nibble): bit 3 sign, bits 2..1 exponent (bias 1), bit 0 mantissa; values
 *   0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives. Packed two per byte, element 2j in the LOW nibble.
 * - E8M0: unsigned byte s -> 2^(s-127); s = 255 is NaN.
 * - MX block: HY_MX_BLOCK = 32 consecutive elements along K share one E8M0 scale;
 *   w[n,k] = elem[n,k] * 2^(scale[n, k/32] - 127). A row of K elements has ceil(K/32) scales.
 * Encoding rounds to nearest, ties to even, and saturates to the largest finite value (448 / 6).
 */
#ifndef HY_QUANT_FORMATS_H
#define HY_QUANT_FORMATS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HY_MX_BLOCK 32
_Static_assert(HY_MX_BLOCK == 32, "OCP MX: 32 elements share one E8M0 scale byte (checkpoints store it so)");
_Static_assert(HY_MX_BLOCK % 2 == 0, "MXFP4: two E2M1 codes per byte, so a block fills whole bytes");
_Static_assert(sizeof(float) == 4 && sizeof(uint16_t) == 2, "f32 / bf16 / f16 bit layouts of the checkpoint formats");

/* Exact value of an E4M3FN byte (NaN for 0x7f / 0xff). */
static inline float hy_e4m3_to_f32(uint8_t b)
{
    const uint32_t e = (b >> 3) & 0xf, m = b & 7;
    float v;
    if ((b & 0x7f) == 0x7f)
        return NAN;
    if (e == 0)
        v = (float)m * 0x1p-9f;
    else {
        uint32_t u = ((e + 120u) << 23) | (m << 20);
        memcpy(&v, &u, 4);
    }
    return (b & 0x80) ? -v : v;
}

/* Exact value of an E2M1 nibble (low 4 bits of n). */
static inline float hy_e2m1_to_f32(uint8_t n)
{
    static const float lut[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    return lut[n & 0xf];
}

/* 2^(s-127) (s = 0 gives the subnormal 2^-127); NaN for s = 255. */
static inline float hy_e8m0_to_f32(uint8_t s)
{
    if (s == 255)
        return NAN;
    if (s == 0)
        return 0x1p-127f;
    uint32_t u = (uint32_t)s << 23;
    float v;
    memcpy(&v, &u, 4);
    return v;
}

/* f32 -> E4M3FN, round to nearest even, |x| > 448 saturates to +-448, NaN -> 0x7f (sign kept). */
uint8_t hy_f32_to_e4m3(float x);

/* The E4M3FN value nearest to x, as f32: hy_e4m3_to_f32(hy_f32_to_e4m3(x)) for every x that is not
 * NaN (round to nearest even, |x| >= 448 saturates to +-448, the sign of zero kept); NaN -> NaN.
 * Bit arithmetic only: normals round the f32 mantissa to 3 bits (the carry moves into the exponent),
 * |x| < 2^-6 rounds on the subnormal grid 2^-9 by adding and subtracting 2^14 (whose ulp is 2^-9). */
static inline float hy_e4m3_round(float x)
{
    uint32_t u, a;
    memcpy(&u, &x, 4);
    a = u & 0x7fffffffu;
    float ax, r;
    memcpy(&ax, &a, 4);
    const uint32_t n = (a + 0x7ffffu + ((a >> 20) & 1u)) & ~0xfffffu;
    memcpy(&r, &n, 4);
    if (ax < 0x1p-6f)
        r = (ax + 0x1p14f) - 0x1p14f;
    if (ax >= 448.0f)
        r = 448.0f;
    if (ax != ax)
        return x;
    uint32_t ru;
    memcpy(&ru, &r, 4);
    ru |= u & 0x80000000u;
    memcpy(&r, &ru, 4);
    return r;
}

/* 1 if one of the n E4M3 bytes at p is a NaN code (0x7f or 0xff), else 0. */
int hy_e4m3_has_nan(const uint8_t *p, size_t n);

/* f32 -> E2M1 nibble (0..15), round to nearest even, |x| > 6 saturates to +-6, NaN -> 0. */
uint8_t hy_f32_to_e2m1(float x);

/* Element kinds of an MX block. */
enum hy_mx_elem { HY_MX_E4M3 = 0, HY_MX_E2M1 = 1 };

/* OCP MX quantization of one row x[K] (fp32): for each block of 32 (the last one may be short),
 * shared exponent X = floor(log2(amax)) - emax (emax 8 for E4M3, 2 for E2M1), clamped to
 * [-127, 127] (amax = 0 or non-finite amax handled: zero block -> X = -127), scale byte X + 127,
 * elements = round-to-nearest-even of x / 2^X, saturating.
 * Output: E4M3 -> q[K] bytes; E2M1 -> q[ceil(K/2)] bytes (element 2j low nibble, a missing odd
 * tail nibble is 0); scales[ceil(K/32)] E8M0 bytes. */
void hy_mx_quantize_row(const float *x, int64_t K, enum hy_mx_elem elem, uint8_t *q, uint8_t *scales);

/* Block-scale rules: HY_MX_SCALE_OCP as above; HY_MX_SCALE_MSE takes X + 1 instead of the OCP X when
 * that gives a smaller sum of squared errors over the block (ties: X). The OCP X clips every element
 * above 448 (E4M3) / 6 (E2M1) times 2^X, i.e. the block maximum in about 19% (E4M3) / 42% (E2M1) of
 * blocks; one exponent up keeps it at the cost of one mantissa step. Same format either way. */
enum hy_mx_scale_rule { HY_MX_SCALE_OCP = 0, HY_MX_SCALE_MSE = 1 };

/* Shared exponent X (in [-127, 127]) of the block x[0..n) under rule. */
int hy_mx_block_exponent(const float *x, int64_t n, enum hy_mx_elem elem, enum hy_mx_scale_rule rule);

/* hy_mx_quantize_row with a block-scale rule (hy_mx_quantize_row = HY_MX_SCALE_OCP). */
void hy_mx_quantize_row_rule(const float *x, int64_t K, enum hy_mx_elem elem, enum hy_mx_scale_rule rule, uint8_t *q,
                             uint8_t *scales);

#endif
