/* test_fp8_scale.c - the FP8 E4M3 rounding and the least-squares scale fit behind the FP8 KV cache:
 *  - hy_e4m3_round (quant/formats.h) equals hy_e4m3_to_f32(hy_f32_to_e4m3(x)) on every E4M3 value,
 *    every midpoint between neighbours and one f32 ulp either side of both, a stride over all 2^32
 *    bit patterns, zeros, infinities (saturate to +-448) and NaN (stays NaN);
 *  - every level's fp8_fit_pass (kernel_table.h) is bitwise the ref's, for n = 1..70 and 128
 *    (tails), scales from 2^-40 to 2^40, rows with NaN elements; every level's fp8_encode is
 *    bitwise hy_f32_to_e4m3(x / s) over a stride of all f32 bit patterns, codes and midpoints;
 *  - hy_fp8_scale_fit_with (kernels/fp8_scale.h): never a larger error than amax / 448 (every row),
 *    a smaller mean error than it by a measured margin, within a measured factor of a brute-force
 *    search over 4096 scales, amax / 448 itself for degenerate rows, bitwise the same through
 *    every level and through hy_fp8_scale_fit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/fp8_scale.h"
#include "kernels/kernel_table.h"
#include "quant/formats.h"
#include "unit/avx512_emu.h"
#include "unit/kernel_test_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static struct hy_kernel_table ref;
static struct hy_kernel_table levels[HY_ISA_COUNT + 1];
static int n_levels;

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* hy_e4m3_round(x) against the byte round trip; NaN only matches NaN. Returns 1 when equal. */
static int round_ok(float x)
{
    const float want = hy_e4m3_to_f32(hy_f32_to_e4m3(x)), got = hy_e4m3_round(x);
    if (isnan(x))
        return isnan(got);
    return to_bits(got) == to_bits(want);
}

static void test_e4m3_round(void **state)
{
    (void)state;
    long bad = 0, n = 0;
    for (int b = 0; b < 256; b++) {
        if ((b & 0x7f) == 0x7f)
            continue;
        const float v = hy_e4m3_to_f32((uint8_t)b);
        float around[6] = {v, nextafterf(v, INFINITY), nextafterf(v, -INFINITY), 0, 0, 0};
        const int nxt = (b & 0x7f) == 0x7e ? -1 : b + 1; /* the neighbour away from zero, same sign */
        if (nxt >= 0) {
            const float mid = 0.5f * (v + hy_e4m3_to_f32((uint8_t)nxt)); /* exact: 4 significant bits */
            around[3] = mid;
            around[4] = nextafterf(mid, INFINITY);
            around[5] = nextafterf(mid, -INFINITY);
        }
        for (int i = 0; i < 6; i++, n++)
            bad += !round_ok(around[i]);
    }
    const float special[] = {0.0f,   -0.0f,   INFINITY, -INFINITY, NAN,      -NAN,       448.0f, 464.0f, 1e30f,
                             -1e30f, 0x1p-6f, 0x1p-7f,  0x1p-10f,  0x1p-11f, 0x1.8p-10f, 1e-45f, -1e-45f};
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++, n++)
        bad += !round_ok(special[i]);
    for (uint64_t u = 0; u < 0x100000000ull; u += 4093, n++)
        bad += !round_ok(from_bits((uint32_t)u));
    fprintf(stderr, "hy_e4m3_round: %ld of %ld values differ from the byte round trip\n", bad, n);
    assert_int_equal(bad, 0);
    assert_true(signbit(hy_e4m3_round(-0.0f)) && signbit(hy_e4m3_round(-1e-45f)));
    assert_true(hy_e4m3_round(INFINITY) == 448.0f && hy_e4m3_round(-INFINITY) == -448.0f);
}

static int setup(void **state)
{
    (void)state;
    if (hy_kernels_table_for(HY_ISA_REF, &ref))
        return -1;
    for (int i = HY_ISA_REF + 1; i < HY_ISA_COUNT; i++)
        if (hy_kernels_table_for((enum hy_isa)i, &levels[n_levels]) == 0)
            n_levels++;
    if (hy_test_avx512_emu_wanted() && hy_test_avx512_emu_table(&levels[n_levels]) == 0)
        n_levels++;
    fprintf(stderr, "testing ref +%d level(s)\n", n_levels);
    return 0;
}

/* A row of n values: a magnitude 2^-12..2^12, a few tiny elements (E4M3 subnormals after scaling),
 * and in some rows one outlier 20x the rest. */
static void fill_row(float *x, int n)
{
    const float mag = ldexpf(1.0f, (int)(kt_rnd_u32() % 25) - 12);
    for (int i = 0; i < n; i++) {
        x[i] = kt_rnd_f() * mag;
        if (kt_rnd_u32() % 11 == 0)
            x[i] *= 1e-4f;
    }
    if (kt_rnd_u32() % 4 == 0)
        x[kt_rnd_u32() % (uint32_t)n] = 20.0f * mag;
}

static int sums_equal(const float a[3], const float b[3])
{
    for (int k = 0; k < 3; k++)
        if (!(isnan(a[k]) && isnan(b[k])) && to_bits(a[k]) != to_bits(b[k]))
            return 0;
    return 1;
}

static void test_pass_levels(void **state)
{
    (void)state;
    float x[128], want[3], got[3];
    long cases = 0;
    for (int n = 1; n <= 128; n = n < 70 ? n + 1 : 128) {
        for (int rep = 0; rep < 6; rep++) {
            fill_row(x, n);
            if (rep == 5)
                x[kt_rnd_u32() % (uint32_t)n] = NAN;
            const float s = ldexpf(1.0f + kt_rnd_f() * 0.5f, (int)(kt_rnd_u32() % 81) - 40);
            ref.fp8_fit_pass(x, n, s, want);
            for (int l = 0; l < n_levels; l++, cases++) {
                memset(got, 0xff, sizeof(got));
                levels[l].fp8_fit_pass(x, n, s, got);
                if (!sums_equal(want, got))
                    fail_msg("%s: n %d rep %d s %g: {%a %a %a} != ref {%a %a %a}", levels[l].name, n, rep, s, got[0],
                             got[1], got[2], want[0], want[1], want[2]);
            }
        }
        if (n == 128)
            break;
    }
    /* the pass's sums against a direct double computation (the pass's own definitions) */
    fill_row(x, 64);
    const float s = 0.01f;
    double e = 0, xc = 0, cc = 0;
    for (int i = 0; i < 64; i++) {
        const double r = hy_e4m3_to_f32(hy_f32_to_e4m3(x[i] / s)), d = r * s - x[i];
        e += d * d;
        xc += x[i] * r;
        cc += r * r;
    }
    ref.fp8_fit_pass(x, 64, s, want);
    assert_true(fabs(want[0] - e) <= 1e-4 * e && fabs(want[1] - xc) <= 1e-5 * fabs(xc) &&
                fabs(want[2] - cc) <= 1e-5 * cc);
    fprintf(stderr, "fp8_fit_pass: %ld level cases bitwise equal to ref\n", cases);
}

/* Each level's fp8_encode against ref (= hy_f32_to_e4m3(x / s)): a stride over all 2^32 bit patterns
 * with s = 1 in rows of 61 (tails), the E4M3 values and midpoints with their f32 neighbours, random
 * rows at random scales, every n up to 70. */
static void test_encode_levels(void **state)
{
    (void)state;
    enum { R = 61 };
    float x[R + 128];
    uint8_t want[R + 128], got[R + 128];
    long cases = 0;
    int m = 0;
    for (uint64_t u = 0; u < 0x100000000ull; u += 4093) {
        x[m++] = from_bits((uint32_t)u);
        if (m == R || u + 4093 >= 0x100000000ull) {
            ref.fp8_encode(x, m, 1.0f, want);
            for (int l = 0; l < n_levels; l++, cases++) {
                levels[l].fp8_encode(x, m, 1.0f, got);
                assert_memory_equal(got, want, (size_t)m);
            }
            m = 0;
        }
    }
    for (int b = 0; b < 256; b++) { /* codes, midpoints to the next code, neighbours */
        const float v = hy_e4m3_to_f32((uint8_t)b), w = hy_e4m3_to_f32((uint8_t)((b & 0x80) | ((b & 0x7f) + 1)));
        x[m++] = v;
        x[m++] = nextafterf(v, 0.0f);
        x[m++] = 0.5f * (v + w);
        x[m++] = nextafterf(0.5f * (v + w), INFINITY);
        x[m++] = nextafterf(0.5f * (v + w), -INFINITY);
        if (m + 5 > R || b == 255) {
            ref.fp8_encode(x, m, 1.0f, want);
            for (int l = 0; l < n_levels; l++, cases++) {
                levels[l].fp8_encode(x, m, 1.0f, got);
                assert_memory_equal(got, want, (size_t)m);
            }
            m = 0;
        }
    }
    for (int n = 1; n <= 70; n++) {
        fill_row(x, n);
        x[kt_rnd_u32() % (uint32_t)n] = (kt_rnd_u32() & 1) ? -0.0f : NAN;
        const float s = ldexpf(1.0f + kt_rnd_f() * 0.5f, (int)(kt_rnd_u32() % 41) - 20);
        ref.fp8_encode(x, n, s, want);
        for (int i = 0; i < n; i++)
            assert_int_equal(want[i], hy_f32_to_e4m3(x[i] / s));
        for (int l = 0; l < n_levels; l++, cases++) {
            levels[l].fp8_encode(x, n, s, got);
            assert_memory_equal(got, want, (size_t)n);
        }
    }
    fprintf(stderr, "fp8_encode: %ld level cases bitwise equal to ref\n", cases);
}

/* sum (s * e4m3(x / s) - x)^2 in double. */
static double row_err(const float *x, int n, float s)
{
    double e = 0;
    for (int i = 0; i < n; i++) {
        const double d = (double)hy_e4m3_to_f32(hy_f32_to_e4m3(x[i] / s)) * s - x[i];
        e += d * d;
    }
    return e;
}

static float amax_scale(const float *x, int n)
{
    float a = 0.0f;
    for (int i = 0; i < n; i++)
        a = fmaxf(a, fabsf(x[i]));
    return a / 448.0f;
}

static void test_fit(void **state)
{
    (void)state;
    enum { ROWS = 600 };
    const int sizes[] = {32, 128, 40, 7};
    float x[128], pass_amax[3], pass_fit[3];
    double sum_amax = 0, sum_fit = 0, sum_brute = 0;
    for (int r = 0; r < ROWS; r++) {
        const int n = sizes[r % 4];
        fill_row(x, n);
        const float s0 = amax_scale(x, n), s = hy_fp8_scale_fit_with(ref.fp8_fit_pass, x, n);
        assert_true(s > 0.0f && isfinite(s));
        for (int l = 0; l < n_levels; l++)
            assert_true(to_bits(hy_fp8_scale_fit_with(levels[l].fp8_fit_pass, x, n)) == to_bits(s));
        assert_true(to_bits(hy_fp8_scale_fit(x, n)) == to_bits(s));
        /* never worse than the amax rule, by the search's own measure */
        ref.fp8_fit_pass(x, n, s0, pass_amax);
        ref.fp8_fit_pass(x, n, s, pass_fit);
        assert_true(pass_fit[0] <= pass_amax[0]);
        /* brute force: 4096 scales over [s0 / 2, 2 s0] */
        double best = INFINITY;
        for (int j = 0; j < 4096; j++) {
            const float sj = s0 * exp2f((float)j / 2048.0f - 1.0f);
            const double e = row_err(x, n, sj);
            if (e < best)
                best = e;
        }
        const double ea = row_err(x, n, s0), ef = row_err(x, n, s);
        sum_amax += ea / ea;
        sum_fit += ef / ea;
        sum_brute += best / ea;
    }
    fprintf(stderr, "fit: mean squared error relative to amax/448: fit %.3f, brute-force 4096 scales %.3f (%d rows)\n",
            sum_fit / ROWS, sum_brute / ROWS, ROWS);
    /* measured: fit 0.607, brute force 0.600 */
    assert_true(sum_fit / ROWS < 0.70);
    assert_true(sum_fit / ROWS < 1.05 * sum_brute / ROWS);
}

static void test_degenerate(void **state)
{
    (void)state;
    float x[16] = {0};
    assert_true(hy_fp8_scale_fit_with(ref.fp8_fit_pass, x, 16) == 0.0f); /* all zero */
    for (int i = 0; i < 16; i++)
        x[i] = i % 2 ? 1e-44f : -1e-45f; /* amax / 448 underflows */
    assert_true(hy_fp8_scale_fit_with(ref.fp8_fit_pass, x, 16) == 0.0f);
    x[3] = INFINITY;
    assert_true(isinf(hy_fp8_scale_fit_with(ref.fp8_fit_pass, x, 16)));
    for (int i = 0; i < 16; i++)
        x[i] = NAN;
    assert_true(hy_fp8_scale_fit_with(ref.fp8_fit_pass, x, 16) == 0.0f); /* NaN never wins the amax */
    for (int i = 0; i < 16; i++)
        x[i] = 448.0f; /* a constant row: amax / 448 = 1 has error 0, nothing beats it */
    assert_true(hy_fp8_scale_fit_with(ref.fp8_fit_pass, x, 16) == 1.0f);
    x[5] = NAN; /* NaN elements: every sum is NaN, no candidate beats the first, amax / 448 stays */
    assert_true(hy_fp8_scale_fit_with(ref.fp8_fit_pass, x, 16) == 1.0f);
    x[5] = 448.0f;
    x[0] = 3.0e38f; /* s0 near FLT_MAX / 448: refits that overflow stop, the result stays finite */
    assert_true(isfinite(hy_fp8_scale_fit_with(ref.fp8_fit_pass, x, 16)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e4m3_round), cmocka_unit_test(test_pass_levels), cmocka_unit_test(test_encode_levels),
        cmocka_unit_test(test_fit),        cmocka_unit_test(test_degenerate),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
