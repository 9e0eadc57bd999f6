/* test_quant_formats.c - FP8 E4M3FN, FP4 E2M1, E8M0 scalar formats and the OCP MX row quantizer
 * (src/quant/formats.h) against the definitions of spec hy3_architecture.md §5.1, computed here
 * independently (ldexp arithmetic, brute-force nearest-value search). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "quant/formats.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Spec value of an E4M3FN byte (NaN for S.1111.111). */
static double spec_e4m3(int b)
{
    int s = (b >> 7) & 1, e = (b >> 3) & 15, m = b & 7;
    if ((b & 0x7f) == 0x7f)
        return NAN;
    double v = e == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, e - 7);
    return s ? -v : v;
}

static void test_e4m3_decode_all(void **state)
{
    (void)state;
    for (int b = 0; b < 256; b++) {
        float got = hy_e4m3_to_f32((uint8_t)b);
        double want = spec_e4m3(b);
        if (isnan(want)) {
            assert_true(isnan(got));
            continue;
        }
        assert_true((double)got == want);
        assert_int_equal(signbit(got) != 0, (b & 0x80) != 0);
    }
    assert_true(hy_e4m3_to_f32(0x7e) == 448.0f);
    assert_true(hy_e4m3_to_f32(0x08) == 0x1p-6f); /* min normal */
    assert_true(hy_e4m3_to_f32(0x01) == 0x1p-9f); /* min subnormal */
}

static void test_e4m3_roundtrip(void **state)
{
    (void)state;
    for (int b = 0; b < 256; b++) {
        if ((b & 0x7f) == 0x7f)
            continue;
        assert_int_equal(hy_f32_to_e4m3(hy_e4m3_to_f32((uint8_t)b)), b);
    }
}

/* Ties between adjacent codes go to the even code; just off the midpoint goes to the nearer one. */
static void test_e4m3_ties(void **state)
{
    (void)state;
    for (int c = 0; c < 126; c++) {
        for (int sign = 0; sign < 2; sign++) {
            double lo = spec_e4m3(c), hi = spec_e4m3(c + 1), mid = (lo + hi) / 2;
            float fm = (float)(sign ? -mid : mid);
            assert_true((double)fabsf(fm) == mid); /* exact in f32 */
            int even = (c % 2 == 0) ? c : c + 1;
            assert_int_equal(hy_f32_to_e4m3(fm), even | (sign << 7));
            float below = nextafterf(fabsf(fm), 0.0f), above = nextafterf(fabsf(fm), INFINITY);
            assert_int_equal(hy_f32_to_e4m3(sign ? -below : below), c | (sign << 7));
            assert_int_equal(hy_f32_to_e4m3(sign ? -above : above), (c + 1) | (sign << 7));
        }
    }
}

static void test_e4m3_saturation_special(void **state)
{
    (void)state;
    const float big[] = {448.0f, 449.0f, 464.0f, 480.0f, 1e9f, INFINITY, FLT_MAX};
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        assert_int_equal(hy_f32_to_e4m3(big[i]), 0x7e);
        assert_int_equal(hy_f32_to_e4m3(-big[i]), 0xfe);
    }
    assert_int_equal(hy_f32_to_e4m3(NAN) & 0x7f, 0x7f);
    assert_int_equal(hy_f32_to_e4m3(0.0f), 0x00);
    assert_int_equal(hy_f32_to_e4m3(-0.0f), 0x80);
    /* subnormals and underflow */
    assert_int_equal(hy_f32_to_e4m3(0x1p-9f), 0x01);
    assert_int_equal(hy_f32_to_e4m3(0x1p-10f), 0x00);  /* tie 0 / 2^-9 -> even 0 */
    assert_int_equal(hy_f32_to_e4m3(0x1.8p-9f), 0x02); /* tie 1 / 2 -> 2 */
    assert_int_equal(hy_f32_to_e4m3(0x1p-12f), 0x00);
    assert_int_equal(hy_f32_to_e4m3(7.5f * 0x1p-9f), 0x08); /* tie 7 / 8 (min normal) -> 8 */
    assert_int_equal(hy_f32_to_e4m3(-3.0f * 0x1p-9f), 0x83);
}

/* hy_e4m3_has_nan: every code alone, and one NaN code at every position of buffers of length 1..40
 * (the 8-byte word loop and the byte tail) among the largest non-NaN codes 0x7e / 0xfe. */
static void test_e4m3_has_nan(void **state)
{
    (void)state;
    for (int b = 0; b < 256; b++) {
        const uint8_t v = (uint8_t)b;
        assert_int_equal(hy_e4m3_has_nan(&v, 1), (b & 0x7f) == 0x7f);
    }
    uint8_t buf[40];
    for (size_t n = 1; n <= sizeof(buf); n++) {
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)(i & 1 ? 0xfe : 0x7e);
        assert_int_equal(hy_e4m3_has_nan(buf, n), 0);
        for (size_t i = 0; i < n; i++) {
            const uint8_t keep = buf[i];
            buf[i] = (uint8_t)(i & 2 ? 0xff : 0x7f);
            assert_int_equal(hy_e4m3_has_nan(buf, n), 1);
            buf[i] = keep;
        }
    }
    assert_int_equal(hy_e4m3_has_nan(buf, 0), 0);
}

static void test_e2m1(void **state)
{
    (void)state;
    const float table[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int n = 0; n < 16; n++) {
        assert_true(hy_e2m1_to_f32((uint8_t)n) == table[n]);
        assert_int_equal(signbit(hy_e2m1_to_f32((uint8_t)n)) != 0, n >= 8);
        assert_int_equal(hy_f32_to_e2m1(table[n]), n);
        assert_true(hy_e2m1_to_f32((uint8_t)(0xf0 | n)) == table[n]); /* only the low nibble counts */
    }
    /* ties to the even code: 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4 */
    const float tie[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    const int want[] = {0, 2, 2, 4, 4, 6, 6};
    for (int i = 0; i < 7; i++) {
        assert_int_equal(hy_f32_to_e2m1(tie[i]), want[i]);
        assert_int_equal(hy_f32_to_e2m1(-tie[i]), want[i] | 8);
    }
    assert_int_equal(hy_f32_to_e2m1(0.26f), 1);
    assert_int_equal(hy_f32_to_e2m1(5.01f), 7);
    assert_int_equal(hy_f32_to_e2m1(100.0f), 7);
    assert_int_equal(hy_f32_to_e2m1(-INFINITY), 15);
    assert_int_equal(hy_f32_to_e2m1(NAN), 0);
}

static void test_e8m0(void **state)
{
    (void)state;
    for (int s = 0; s < 255; s++)
        assert_true((double)hy_e8m0_to_f32((uint8_t)s) == ldexp(1.0, s - 127));
    assert_true(isnan(hy_e8m0_to_f32(255)));
}

/* Dequantized MX element (row-local). */
static double mx_value(const uint8_t *q, const uint8_t *sc, int64_t k, enum hy_mx_elem el)
{
    double s = ldexp(1.0, sc[k / 32] - 127);
    if (el == HY_MX_E4M3)
        return spec_e4m3(q[k]) * s;
    return (double)hy_e2m1_to_f32((uint8_t)(q[k / 2] >> ((k & 1) * 4))) * s;
}

/* Distance from x to the nearest value of the grid elem * s (brute force over all codes). */
static double nearest_err(double x, double s, enum hy_mx_elem el)
{
    double best = INFINITY;
    for (int c = 0; c < (el == HY_MX_E4M3 ? 256 : 16); c++) {
        const double v = (el == HY_MX_E4M3 ? spec_e4m3(c) : (double)hy_e2m1_to_f32((uint8_t)c)) * s;
        if (!isnan(v))
            best = fmin(best, fabs(v - x));
    }
    return best;
}

static void test_mx_known_rows(void **state)
{
    (void)state;
    float x[40];
    uint8_t q[40], sc[2];
    for (int k = 0; k < 40; k++)
        x[k] = 0.0f;
    x[0] = 3.0f; /* block 0 amax 3 -> floor(log2 3) = 1 */
    x[1] = -0.75f;
    x[33] = 0.01f; /* block 1 (8 elements) amax 0.01 -> floor(log2) = -7 */
    hy_mx_quantize_row(x, 40, HY_MX_E4M3, q, sc);
    assert_int_equal(sc[0], 1 - 8 + 127);
    assert_int_equal(sc[1], -7 - 8 + 127);
    assert_true(mx_value(q, sc, 0, HY_MX_E4M3) == 3.0);
    assert_true(mx_value(q, sc, 1, HY_MX_E4M3) == -0.75);
    assert_int_equal(q[2], 0);
    hy_mx_quantize_row(x, 40, HY_MX_E2M1, q, sc);
    assert_int_equal(sc[0], 1 - 2 + 127);
    assert_int_equal(sc[1], -7 - 2 + 127);
    assert_true(mx_value(q, sc, 0, HY_MX_E2M1) == 3.0);   /* 3 / 2^-1 = 6: E2M1 max */
    assert_true(mx_value(q, sc, 1, HY_MX_E2M1) == -0.75); /* -0.75 / 2^-1 = -1.5: exact */
    /* zero block -> scale byte 0, zero elements; odd K leaves the last high nibble 0 */
    float z[5] = {0, 0, 0, 0, 0};
    uint8_t qz[3] = {0xaa, 0xaa, 0xaa}, sz[1] = {9};
    hy_mx_quantize_row(z, 5, HY_MX_E2M1, qz, sz);
    assert_int_equal(sz[0], 0);
    assert_int_equal(qz[0], 0);
    assert_int_equal(qz[2], 0);
}

/* Random rows: every element is the nearest value (brute force over all codes) on its block's grid,
 * and each scale byte is floor(log2(block amax)) - emax + 127. */
static void test_mx_random_nearest(void **state)
{
    (void)state;
    enum { K = 77 };
    float x[K];
    uint8_t q[K], sc[3];
    srand(7);
    for (int trial = 0; trial < 200; trial++) {
        const int p = (rand() % 30) - 15;
        for (int k = 0; k < K; k++)
            x[k] = (float)ldexp((double)rand() / RAND_MAX - 0.5, p + (rand() % 7) - 3);
        for (int el = 0; el < 2; el++) {
            hy_mx_quantize_row(x, K, (enum hy_mx_elem)el, q, sc);
            const int emax = el == HY_MX_E4M3 ? 8 : 2;
            for (int b = 0; b < 3; b++) {
                double amax = 0;
                for (int k = b * 32; k < K && k < b * 32 + 32; k++)
                    amax = fmax(amax, fabs(x[k]));
                int e;
                frexp(amax, &e);
                assert_int_equal(sc[b], amax > 0 ? e - 1 - emax + 127 : 0);
            }
            for (int k = 0; k < K; k++) {
                const double s = ldexp(1.0, sc[k / 32] - 127), got = mx_value(q, sc, k, (enum hy_mx_elem)el);
                assert_true(fabs(got - x[k]) == nearest_err(x[k], s, (enum hy_mx_elem)el));
            }
        }
    }
}

/* HY_MX_SCALE_MSE: each block's exponent is the OCP one or one above, whichever has the smaller sum
 * of squared errors of the nearest-value elements (computed here with the spec decoders; ties: OCP);
 * the elements are then nearest on that grid. K = 77: two full blocks and a partial one. */
static void test_mx_mse_rule(void **state)
{
    (void)state;
    enum { K = 77 };
    float x[K];
    uint8_t q[K], sc[3], q0[K], sc0[3];
    int ups = 0, blocks = 0;
    srand(11);
    for (int trial = 0; trial < 300; trial++) {
        const int p = (rand() % 30) - 15;
        for (int k = 0; k < K; k++)
            x[k] = (float)ldexp((double)rand() / RAND_MAX - 0.5, p + (rand() % 5) - 2);
        if (trial == 0)
            memset(x + 32, 0, 32 * sizeof(float)); /* an all-zero block stays at byte 0 */
        for (int el = 0; el < 2; el++) {
            hy_mx_quantize_row_rule(x, K, (enum hy_mx_elem)el, HY_MX_SCALE_MSE, q, sc);
            hy_mx_quantize_row(x, K, (enum hy_mx_elem)el, q0, sc0);
            for (int b = 0; b < 3; b++) {
                const int n = b * 32 + 32 <= K ? 32 : K - b * 32;
                double sse[2] = {0, 0};
                for (int u = 0; u < 2; u++) {
                    const double s = ldexp(1.0, sc0[b] - 127 + u);
                    for (int k = b * 32; k < b * 32 + n; k++) {
                        const double best = nearest_err(x[k], s, (enum hy_mx_elem)el);
                        sse[u] += best * best;
                    }
                }
                if (trial == 0 && b == 1) {
                    assert_int_equal(sc[b], 0);
                    continue;
                }
                const int want = sse[1] < sse[0] ? sc0[b] + 1 : sc0[b];
                if (fabs(sse[1] - sse[0]) > 1e-12 * sse[0]) /* away from exact ties */
                    assert_int_equal(sc[b], want);
                assert_true(sc[b] == sc0[b] || sc[b] == sc0[b] + 1);
                ups += sc[b] != sc0[b];
                blocks++;
                assert_int_equal(hy_mx_block_exponent(x + b * 32, n, (enum hy_mx_elem)el, HY_MX_SCALE_MSE),
                                 sc[b] - 127);
            }
            for (int k = 0; k < K; k++) { /* elements nearest on the chosen grid */
                const double s = ldexp(1.0, sc[k / 32] - 127), got = mx_value(q, sc, k, (enum hy_mx_elem)el);
                assert_true(fabs(got - x[k]) == nearest_err(x[k], s, (enum hy_mx_elem)el));
            }
        }
    }
    print_message("mse rule: %d of %d blocks one exponent above OCP\n", ups, blocks);
    assert_true(ups > blocks / 20 && ups < blocks); /* the rule does something, and not everywhere */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e4m3_decode_all),
        cmocka_unit_test(test_e4m3_roundtrip),
        cmocka_unit_test(test_e4m3_ties),
        cmocka_unit_test(test_e4m3_saturation_special),
        cmocka_unit_test(test_e4m3_has_nan),
        cmocka_unit_test(test_e2m1),
        cmocka_unit_test(test_e8m0),
        cmocka_unit_test(test_mx_known_rows),
        cmocka_unit_test(test_mx_mse_rule),
        cmocka_unit_test(test_mx_random_nearest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
