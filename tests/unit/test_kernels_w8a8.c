/* test_kernels_w8a8.c - the Ascend W8A8 int8 matmuls (kernels/w8a8.h).
 *
 * - Quantizers against a spec implementation written here in double precision (the CANN golden's rule:
 *   s = amax / 127, q = round-half-even(x / s) clamped; static: saturate(round-half-even(x / s_in + o))):
 *   random rows, rows whose amax element must map to +-127 exactly, exact .5 ties, an all-zero row
 *   (s = 1, q = 0), a row with NaN / inf (s NaN, q = 0), static values that saturate at -128 / 127.
 * - Integer dots: avx2, AVX512-VNNI (real where the CPU has it, SIMDe-emulated where not) against the scalar
 *   reference, bitwise, on
 *   K = 1, 31, 32, 33, 100, 4096 + 7, T = 1..9 (the 4-token groups and the remainder) and 130, 261 (across
 *   the VNNI prefill's 128-token blocks), N = 7 (a 4-row tile and a remainder), activations
 *   at -128 / 127 and weights at -127 / 127 (the sign trick's extremes), against an int64 sum too.
 * - Matmul epilogues: dynamic y = (acc * s_w) * s_x and static y = (acc + quant_bias) * deq_scale, each
 *   output equal to the formula computed here from the int64 sum; the public hy_matmul / hy_matmul_rows
 *   route W8A8 tensors here; T-, range- and thread-invariance (bitwise).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/cpu.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "kernels/w8a8.h"
#include "unit/avx512_emu.h"
#include "kernel_test_util.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* round half to even of a double, independently of the C library's rint */
static double rne(double v)
{
    const double f = floor(v), d = v - f;
    if (d > 0.5)
        return f + 1.0;
    if (d < 0.5)
        return f;
    return fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}

static int8_t clamp8(double v)
{
    return (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
}

static void spec_dynamic(const float *x, int64_t K, int8_t *q, float *s)
{
    double a = 0;
    int bad = 0;
    for (int64_t k = 0; k < K; k++) {
        bad |= !isfinite(x[k]);
        a = fabs(x[k]) > a ? fabs(x[k]) : a;
    }
    if (bad) {
        *s = NAN;
        memset(q, 0, (size_t)K);
        return;
    }
    *s = a > 0 ? (float)a / 127.0f : 1.0f; /* the scale itself is the f32 division */
    for (int64_t k = 0; k < K; k++)
        q[k] = clamp8(rne((double)(x[k] / *s))); /* x / s rounded to f32 first, as the kernel divides in f32 */
}

static void test_quantizers(void **state)
{
    (void)state;
    const int64_t K = 300;
    float x[300], s0, s1;
    int8_t q0[300], q1[300];
    for (int rep = 0; rep < 200; rep++) {
        const float mag = ldexpf(1.0f, (int)(kt_rnd_u32() % 40) - 20);
        for (int64_t k = 0; k < K; k++)
            x[k] = kt_rnd_f() * mag;
        if (rep % 3 == 0)
            x[rep % K] = (rep % 2 ? -1.0f : 1.0f) * mag * 1.5f; /* a clear amax element */
        spec_dynamic(x, K, q0, &s0);
        s1 = hy_w8a8_quant_dynamic(x, K, q1);
        assert_memory_equal(&s0, &s1, sizeof(float));
        assert_memory_equal(q0, q1, (size_t)K);
        if (rep % 3 == 0)
            assert_int_equal(abs(q1[rep % K]), 127);
    }
    /* exact ties: amax 127 makes s = 1, so x = k + 0.5 must round to even */
    for (int64_t k = 0; k < K; k++)
        x[k] = (float)((int)(k % 250) - 125) + 0.5f;
    x[0] = 127.0f;
    s1 = hy_w8a8_quant_dynamic(x, K, q1);
    assert_true(s1 == 1.0f);
    for (int64_t k = 1; k < K; k++)
        assert_int_equal(q1[k], (int8_t)rne((double)x[k]));
    /* zero row: s = 1, q = 0; NaN / inf: s NaN, q = 0 */
    memset(x, 0, sizeof(x));
    assert_true(hy_w8a8_quant_dynamic(x, K, q1) == 1.0f);
    for (int64_t k = 0; k < K; k++)
        assert_int_equal(q1[k], 0);
    x[7] = INFINITY;
    assert_true(isnan(hy_w8a8_quant_dynamic(x, K, q1)));
    x[7] = NAN;
    assert_true(isnan(hy_w8a8_quant_dynamic(x, K, q1)));
    /* static: scale 0.05, offset -3; saturation both ways, ties (x / s + o = .5) to even */
    const float s_in = 0.05f, o = -3.0f;
    for (int64_t k = 0; k < K; k++)
        x[k] = kt_rnd_f() * 10.0f;
    x[0] = 100.0f;
    x[1] = -100.0f;
    x[2] = (0.5f + 3.0f) * s_in; /* x * (1/s) + o close to 0.5: compare with the spec's own f32 steps */
    hy_w8a8_quant_static(x, K, s_in, o, q1);
    const float r = 1.0f / s_in;
    for (int64_t k = 0; k < K; k++)
        assert_int_equal(q1[k], clamp8(rne((double)(x[k] * r + o))));
    assert_int_equal(q1[0], 127);
    assert_int_equal(q1[1], -128);
}

/* the AVX2 quantizers equal the scalar ones bit for bit (lengths with and without an 8-wide tail, specials) */
static void test_quantizers_avx2(void **state)
{
    (void)state;
#if defined(__x86_64__)
    if (!hy_cpu_supports(HY_ISA_AVX2))
        skip();
    float x[203];
    int8_t q0[203], q1[203];
    const int64_t Ks[] = {1, 7, 8, 9, 64, 203};
    for (size_t a = 0; a < sizeof(Ks) / sizeof(Ks[0]); a++)
        for (int rep = 0; rep < 60; rep++) {
            const int64_t K = Ks[a];
            for (int64_t k = 0; k < K; k++)
                x[k] = kt_rnd_f() * ldexpf(1.0f, (int)(kt_rnd_u32() % 20) - 10);
            if (rep == 1)
                memset(x, 0, sizeof(x));
            if (rep == 2)
                x[K - 1] = NAN;
            if (rep == 3)
                x[0] = -INFINITY;
            if (rep == 4)
                x[K / 2] = 127.0f, x[0] = 63.5f; /* amax 127: s = 1, ties to even */
            const float s0 = hy_w8a8_quant_dynamic(x, K, q0), s1 = hy_avx2_w8a8_quant_dynamic(x, K, q1);
            assert_memory_equal(&s0, &s1, sizeof(float));
            assert_memory_equal(q0, q1, (size_t)K);
            const float s_in = 0.01f + (float)(rep % 7) * 0.013f, o = (float)(rep % 5) - 2.0f;
            hy_w8a8_quant_static(x, K, s_in, o, q0);
            hy_avx2_w8a8_quant_static(x, K, s_in, o, q1);
            assert_memory_equal(q0, q1, (size_t)K);
        }
#else
    skip();
#endif
}

static struct hy_tensor make_i8(int64_t N, int64_t K, int extremes)
{
    int8_t *w = malloc((size_t)(N * K) + 1);
    for (int64_t i = 0; i < N * K; i++)
        w[i] = (int8_t)((int)(kt_rnd_u32() % 255) - 127);
    if (extremes)
        for (int64_t i = 0; i < N * K; i += 3)
            w[i] = (i / 3) % 2 ? 127 : -127;
    struct hy_tensor W = {.dtype = HY_DTYPE_I8, .rows = N, .cols = K, .data = w, .qscheme = HY_QS_W8A8_DYN};
    return W;
}

static void test_dots(void **state)
{
    (void)state;
    const int64_t Ks[] = {1, 31, 32, 33, 63, 64, 65, 100, 4103};
    for (size_t a = 0; a < sizeof(Ks) / sizeof(Ks[0]); a++) {
        const int64_t K = Ks[a], N = 7;
        /* 1..9: the 4-token groups and the remainders; 130, 261: across the prefill's 128-token blocks */
        static const int64_t Ts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 130, 261};
        for (size_t ti = 0; ti < sizeof(Ts) / sizeof(Ts[0]); ti++) {
            const int64_t T = Ts[ti];
            struct hy_tensor W = make_i8(N, K, (int)(T % 2));
            int8_t *q = malloc((size_t)(T * K));
            for (int64_t i = 0; i < T * K; i++)
                q[i] = T % 3 == 0 ? (int8_t)(i % 2 ? 127 : -128) : (int8_t)((int)(kt_rnd_u32() % 256) - 128);
            int32_t *r = malloc((size_t)(T * N) * 4), *v = malloc((size_t)(T * N) * 4);
            hy_ref_w8a8_dots(r, N, q, T, &W, 0, N);
            for (int64_t t = 0; t < T; t++)
                for (int64_t n = 0; n < N; n++) {
                    int64_t e = 0;
                    for (int64_t k = 0; k < K; k++)
                        e += (int64_t)q[t * K + k] * ((const int8_t *)W.data)[n * K + k];
                    assert_true(e == r[t * N + n]);
                }
#if defined(__x86_64__)
            /* avx2; AVX512-VNNI where the CPU has it; its SIMDe emulation where it does not (or when asked) */
            hy_w8a8_dots_fn fns[3];
            int nf = 0;
            if (hy_cpu_supports(HY_ISA_AVX2))
                fns[nf++] = hy_avx2_w8a8_dots;
            if (hy_w8a8_vnni_usable())
                fns[nf++] = hy_avx512_w8a8_dots;
            if ((!hy_w8a8_vnni_usable() || hy_test_avx512_emu_wanted()) && hy_cpu_supports(HY_ISA_AVX2))
                fns[nf++] = emu512_w8a8_dots;
            for (int f = 0; f < nf; f++) {
                memset(v, 0x5a, (size_t)(T * N) * 4);
                fns[f](v, N, q, T, &W, 0, N);
                assert_memory_equal(r, v, (size_t)(T * N) * 4);
                fns[f](v, N, q, T, &W, 2, 7); /* a row range: one group of 4 and a remainder */
                for (int64_t t = 0; t < T; t++)
                    for (int64_t n = 2; n < 7; n++)
                        assert_int_equal(v[t * N + (n - 2)], r[t * N + n]);
            }
#endif
            free(q);
            free(r);
            free(v);
            free((void *)W.data);
        }
    }
}

static void test_matmul(void **state)
{
    (void)state;
    const int64_t N = 70, K = 257, T = 6;
    struct hy_tensor W = make_i8(N, K, 0);
    float *rs = malloc((size_t)N * 4), *x = malloc((size_t)(T * K) * 4);
    int32_t *qb = malloc((size_t)N * 4);
    for (int64_t n = 0; n < N; n++) {
        rs[n] = (0.5f + (float)(kt_rnd_u32() % 1000) / 1000.0f) * 1e-3f;
        qb[n] = (int32_t)(kt_rnd_u32() % 20001) - 10000;
    }
    for (int64_t i = 0; i < T * K; i++)
        x[i] = kt_rnd_f() * (i % 11 == 0 ? 8.0f : 1.0f);
    W.row_scale = rs;
    float *y = malloc((size_t)(T * N) * 4), *y1 = malloc((size_t)(T * N) * 4), *yr = malloc((size_t)(T * N) * 4);
    int8_t *q = malloc((size_t)K);
    for (int scheme = 0; scheme < 2; scheme++) {
        W.qscheme = scheme ? HY_QS_W8A8_STATIC : HY_QS_W8A8_DYN;
        W.row_bias = scheme ? qb : NULL;
        W.in_scale = 0.02f;
        W.in_offset = 5.0f;
        hy_matmul(y, x, T, &W); /* the public entry routes here */
        for (int64_t t = 0; t < T; t++) {
            float sx = 0.0f;
            if (scheme)
                hy_w8a8_quant_static(x + t * K, K, W.in_scale, W.in_offset, q);
            else
                sx = hy_w8a8_quant_dynamic(x + t * K, K, q);
            for (int64_t n = 0; n < N; n++) {
                int64_t acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += (int64_t)q[k] * ((const int8_t *)W.data)[n * K + k];
                const float want = scheme ? (float)(acc + qb[n]) * rs[n] : ((float)(int32_t)acc * rs[n]) * sx;
                assert_memory_equal(&want, &y[t * N + n], sizeof(float));
            }
        }
        /* T-invariance (each row alone), ranges, the ref dots and the thread count give the same bits */
        for (int64_t t = 0; t < T; t++) {
            hy_matmul(y1 + t * N, x + t * K, 1, &W);
            assert_memory_equal(y1 + t * N, y + t * N, (size_t)N * 4);
        }
        hy_matmul_rows(y1, N, x, T, &W, 0, 33);
        hy_matmul_rows(y1 + 33, N, x, T, &W, 33, N);
        assert_memory_equal(y1, y, (size_t)(T * N) * 4);
        hy_w8a8_matmul_rows_with(hy_ref_w8a8_dots, yr, N, x, T, &W, 0, N);
        assert_memory_equal(yr, y, (size_t)(T * N) * 4);
        /* the per-thread memo of quantized rows: the same buffer rewritten between calls is re-quantized */
        const float keep = x[5];
        x[5] = keep * 3.0f + 1.0f;
        hy_matmul_rows(y1, N, x, T, &W, 0, N);
        hy_w8a8_matmul_rows_with(hy_ref_w8a8_dots, yr, N, x, T, &W, 0, N);
        assert_memory_equal(y1, yr, (size_t)(T * N) * 4);
        x[5] = keep;
        hy_matmul_rows(y1, N, x, T, &W, 0, N);
        assert_memory_equal(y1, y, (size_t)(T * N) * 4);
        for (int th = 1; th <= 2; th++) {
            omp_set_num_threads(th);
            hy_w8a8_matmul(y1, x, T, &W);
            assert_memory_equal(y1, y, (size_t)(T * N) * 4);
        }
    }
    free(rs);
    free(qb);
    free(x);
    free(y);
    free(y1);
    free(yr);
    free(q);
    free((void *)W.data);
}

int main(void)
{
    kt_rng = 0x2545f4914f6cdd1dull; /* this file's own data */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantizers),
        cmocka_unit_test(test_quantizers_avx2),
        cmocka_unit_test(test_dots),
        cmocka_unit_test(test_matmul),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
