/* test_kernels_w4a8.c - the opt-in W4A8 matmul (MXFP4 weights x MXINT8 activations, w4a8.h).
 *
 * - Quantizer: hy_mxint8_quantize_row against an independent spec implementation written here
 *   (X found by searching upward for the first X with amax <= 127 * 2^X, floored at -148, rounding
 *   by floor and an explicit half-even tie rule) on random blocks of magnitudes 2^-140 .. 2^120, exact ties,
 *   amax exactly 127 * 2^X and just above, zeros, subnormals, FLT_MAX, NaN and inf, partial blocks.
 * - AVX2 vs ref: bitwise equal outputs (NaN compared as NaN) on ragged shapes (N odd, K multiple of
 *   32 with and without full groups of 8 blocks, K % 32 != 0, K < 32), T in {1, 2, 3, 17}, 1 and 2
 *   threads, extreme E8M0 bytes (0, 1, 254, 255) and activation blocks that are zero / tiny / huge /
 *   non-finite (these also exercise the AVX2 quantizer against the scalar one: any q or X
 *   difference changes the integer dot).
 * - T-invariance: row t of a T-row call equals the T = 1 call on that row, bitwise (both levels).
 * - Rows entry point: bands of hy_avx2_matmul_rows_w4a8 and of every table's matmul_rows equal ref,
 *   also after the same x buffer is rewritten between calls (the per-thread activation reuse).
 * - Error vs the exact product sum_k x_k * w_k (double): per output
 *   |y - exact| <= sum_b (amax_b / 127) * sum_{k in b} |w_k| + 1e-5 * sum_k |x_k w_k|
 *   (|x - q 2^X| <= 2^X / 2 and 2^X < amax / 63.5), and nmse <= 2e-4 on uniform random data.
 * - Dispatch: with HYINFER_MXFP4_ACT=mxint8 (set before the first kernel call) the ref and avx2
 *   tables' matmul on MXFP4 weights give the W4A8 result; MXFP8 weights keep the exact path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/cpu.h"
#include "kernels/kernel_table.h"
#include "kernels/w4a8.h"
#include "kernel_test_util.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int have_avx2;

/* ---- spec implementation of the activation rule ---- */
static void spec_quantize(const float *x, int64_t K, int8_t *q, int32_t *X)
{
    for (int64_t k0 = 0, b = 0; k0 < K; k0 += 32, b++) {
        const int64_t n = K - k0 < 32 ? K - k0 : 32;
        double a = 0;
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            if (isnan(x[k0 + i]) || isinf(x[k0 + i]))
                bad = 1;
            else if (fabs((double)x[k0 + i]) > a)
                a = fabs((double)x[k0 + i]);
        }
        if (bad || a == 0) {
            X[b] = bad ? HY_W4A8_XNAN : -148;
            for (int64_t i = 0; i < n; i++)
                q[k0 + i] = 0;
            continue;
        }
        int xe = -300;
        while (!(a <= 127.0 * ldexp(1.0, xe)))
            xe++;
        if (xe < -148)
            xe = -148;
        X[b] = xe;
        for (int64_t i = 0; i < n; i++) {
            const double r = (double)x[k0 + i] / ldexp(1.0, xe), f = floor(r);
            double v = r - f > 0.5 ? f + 1 : r - f < 0.5 ? f : (fmod(f, 2.0) == 0 ? f : f + 1);
            v = v > 127 ? 127 : v < -127 ? -127 : v;
            q[k0 + i] = (int8_t)v;
        }
    }
}

static struct hy_tensor make_w(int64_t N, int64_t K, int extreme);
static void free_w(struct hy_tensor *W);
static void assert_same(const float *a, const float *b, int64_t n, const char *what);

/* The AVX2 quantizer (internal to avx2_w4a8.c) seen through the matmul: x[K] zero-padded to 256
 * (8 full blocks: the vector path) against ref on 8 random rows; any q or X difference shows. */
static void check_quant_avx2(const float *x, int64_t K)
{
    if (!have_avx2)
        return;
    static struct hy_tensor W;
    if (!W.data)
        W = make_w(8, 256, 0);
    float xx[256] = {0}, ya[8], yr[8];
    memcpy(xx, x, (size_t)K * 4);
    hy_avx2_matmul_w4a8(ya, xx, 1, &W);
    hy_ref_matmul_w4a8(yr, xx, 1, &W);
    assert_same(ya, yr, 8, "avx2 quantizer");
}

static void check_quant(const float *x, int64_t K)
{
    check_quant_avx2(x, K);
    const int64_t nb = (K + 31) / 32;
    int8_t q[256], qs[256];
    int32_t X[8], Xs[8];
    hy_mxint8_quantize_row(x, K, q, X);
    spec_quantize(x, K, qs, Xs);
    for (int64_t b = 0; b < nb; b++)
        assert_int_equal(X[b], Xs[b]);
    for (int64_t k = 0; k < K; k++)
        if (q[k] != qs[k]) {
            fprintf(stderr, "k=%ld x=%a q=%d spec=%d\n", (long)k, (double)x[k], q[k], qs[k]);
            fail();
        }
}

static void test_quantizer(void **state)
{
    (void)state;
    float x[256];
    for (int it = 0; it < 2000; it++) { /* random magnitudes, partial blocks */
        const int64_t K = 1 + kt_rnd_u32() % 256;
        for (int64_t k = 0; k < K; k++)
            x[k] = kt_rnd_f() * ldexpf(1.0f, (int)(kt_rnd_u32() % 261) - 140);
        check_quant(x, K);
    }
    for (int xe = -150; xe <= 120; xe += 7) { /* ties, amax == 127 * 2^X, just above */
        for (int k = 0; k < 32; k++)
            x[k] = ldexpf((float)(k - 16) + 0.5f, xe); /* +-k.5 ties at X = xe */
        x[31] = ldexpf(127.0f, xe);
        check_quant(x, 32);
        int8_t q[32];
        int32_t X;
        hy_mxint8_quantize_row(x, 32, q, &X);
        if (xe >= -149 + 7) {
            assert_int_equal(X, xe);
            assert_int_equal(q[31], 127);
            assert_int_equal(q[0], -16); /* -15.5 -> -16 (even) */
            assert_int_equal(q[1], -14); /* -14.5 -> -14 */
        }
        x[31] = nextafterf(ldexpf(127.0f, xe), INFINITY); /* just above: X + 1 */
        check_quant(x, 32);
        hy_mxint8_quantize_row(x, 32, q, &X);
        if (xe >= -142)
            assert_int_equal(X, xe + 1);
    }
    memset(x, 0, sizeof(x)); /* zeros, -0, subnormals, FLT_MAX, NaN, inf */
    x[40] = -0.0f;
    check_quant(x, 64);
    x[3] = 0x1p-149f;
    x[5] = -0x1p-140f;
    x[33] = FLT_MAX;
    x[34] = 1.0f;
    check_quant(x, 64);
    x[70] = NAN;
    x[100] = -INFINITY;
    x[130] = INFINITY;
    check_quant(x, 160);
    int8_t q[160];
    int32_t X[5];
    hy_mxint8_quantize_row(x, 160, q, X);
    assert_int_equal(X[2], HY_W4A8_XNAN);
    assert_int_equal(X[3], HY_W4A8_XNAN);
    assert_int_equal(X[4], HY_W4A8_XNAN);
    assert_int_equal(q[100], 0);
    assert_true(isnan(hy_w4a8_factor(HY_W4A8_XNAN, 127)));
    assert_true(isnan(hy_w4a8_factor(0, 255)));
    assert_true(hy_w4a8_factor(122, 254) == INFINITY);
    assert_true(hy_w4a8_factor(-155, 0) == 0.0f);
    assert_true(hy_w4a8_factor(-148, 6) == 0.0f);        /* 2^-270 */
    assert_true(hy_w4a8_factor(-148, 127) == 0x1p-149f); /* smallest subnormal */
    assert_true(hy_w4a8_factor(-148, 126) == 0.0f);      /* 2^-150: tie to even */
}

/* ---- weights and activations ---- */
static struct hy_tensor make_w(int64_t N, int64_t K, int extreme)
{
    const int64_t nb = (K + 31) / 32, rb = K / 2;
    uint8_t *d = malloc((size_t)(N * rb) + 1), *s = malloc((size_t)(N * nb) + 1);
    for (int64_t i = 0; i < N * rb; i++)
        d[i] = (uint8_t)kt_rnd_u32();
    static const uint8_t ex[] = {0, 1, 2, 60, 200, 254, 255};
    for (int64_t i = 0; i < N * nb; i++)
        s[i] = extreme && kt_rnd_u32() % 5 == 0 ? ex[kt_rnd_u32() % 7] : (uint8_t)(118 + kt_rnd_u32() % 14);
    return (struct hy_tensor){
        .dtype = HY_DTYPE_F4_E2M1, .rows = N, .cols = K, .data = d, .qscheme = HY_QS_MX32, .mx_scales = s};
}

static void free_w(struct hy_tensor *W)
{
    free((void *)W->data);
    free((void *)W->mx_scales);
}

static void make_x(float *x, int64_t T, int64_t K, int extreme)
{
    for (int64_t i = 0; i < T * K; i++)
        x[i] = kt_rnd_f() * (extreme ? ldexpf(1.0f, (int)((i / 32) % 9) * 4 - 16) : 1.0f);
    if (extreme)
        for (int64_t t = 0; t < T; t++) {
            float *r = x + t * K;
            const int64_t nb = (K + 31) / 32;
            const int64_t b = (t * 7) % nb, k0 = 32 * b, n = K - k0 < 32 ? K - k0 : 32;
            switch (t % 6) {
            case 0:
                memset(r + k0, 0, (size_t)n * 4);
                break;
            case 1:
                for (int64_t i = 0; i < n; i++)
                    r[k0 + i] *= 0x1p-130f;
                break;
            case 2:
                for (int64_t i = 0; i < n; i++)
                    r[k0 + i] *= 0x1p100f;
                break;
            case 3:
                r[k0 + n - 1] = NAN;
                break;
            case 4:
                r[k0] = INFINITY;
                break;
            default:
                r[k0] = ldexpf(127.5f, -3);
                break;
            }
        }
}

static int same(float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    uint32_t ua, ub;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    return ua == ub;
}

static void assert_same(const float *a, const float *b, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (!same(a[i], b[i])) {
            fprintf(stderr, "%s: i=%ld %a vs %a\n", what, (long)i, (double)a[i], (double)b[i]);
            fail();
        }
}

static const int64_t shapes[][2] = {{37, 256}, {5, 64}, {9, 288}, {7, 100}, {3, 30}, {11, 544}, {6, 2}, {13, 1056}};
static const int64_t Ts[] = {1, 2, 3, 17};

static void test_avx2_vs_ref(void **state)
{
    (void)state;
    if (!have_avx2)
        skip();
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int extreme = 0; extreme < 2; extreme++) {
            const int64_t N = shapes[s][0], K = shapes[s][1];
            struct hy_tensor W = make_w(N, K, extreme);
            float *x = malloc((size_t)(17 * K) * 4), *yr = malloc((size_t)(17 * N) * 4),
                  *ya = malloc((size_t)(17 * N) * 4), *y1 = malloc((size_t)N * 4);
            make_x(x, 17, K, extreme);
            for (size_t ti = 0; ti < 4; ti++) {
                const int64_t T = Ts[ti];
                for (int th = 1; th <= 2; th++) {
                    omp_set_num_threads(th);
                    hy_ref_matmul_w4a8(yr, x, T, &W);
                    hy_avx2_matmul_w4a8(ya, x, T, &W);
                    assert_same(ya, yr, T * N, "avx2 vs ref");
                    for (int64_t t = 0; t < T; t++) { /* T-invariance */
                        hy_avx2_matmul_w4a8(y1, x + t * K, 1, &W);
                        assert_same(y1, ya + t * N, N, "avx2 T=1 vs T");
                        hy_ref_matmul_w4a8(y1, x + t * K, 1, &W);
                        assert_same(y1, yr + t * N, N, "ref T=1 vs T");
                    }
                }
            }
            omp_set_num_threads(2);
            free(x);
            free(yr);
            free(ya);
            free(y1);
            free_w(&W);
        }
}

/* hy_avx2_matmul_rows_w4a8 (and every table's matmul_rows) on bands of rows equals the whole
 * matmul bitwise, and its per-thread reuse of quantized activations follows the content of x: the
 * same buffer rewritten between calls (one value changed, or a new row) gives the new result. */
static void test_rows_and_memo(void **state)
{
    (void)state;
    if (!have_avx2)
        skip();
    const int64_t N = 37, K = 544, bands[] = {1, 4, 6, 64};
    struct hy_tensor W = make_w(N, K, 1);
    float *x = malloc((size_t)(3 * K) * 4), *yr = malloc((size_t)(3 * N) * 4), *yb = malloc((size_t)(3 * N) * 4);
    make_x(x, 3, K, 1);
    struct hy_kernel_table tab;
    for (int64_t T = 1; T <= 3; T++)
        for (int round = 0; round < 3; round++) { /* same T and K: only the content of x differs */
            if (round == 1)
                x[(T - 1) * K + 77] = x[(T - 1) * K + 77] * 3.0f + 1.0f; /* the last token changes in place */
            if (round == 2)
                x[5] = -x[5] - 0.25f;
            hy_ref_matmul_w4a8(yr, x, T, &W);
            for (size_t bi = 0; bi < sizeof(bands) / sizeof(bands[0]); bi++) {
                memset(yb, 0, (size_t)(T * N) * 4);
                for (int64_t n0 = 0; n0 < N; n0 += bands[bi])
                    hy_avx2_matmul_rows_w4a8(yb + n0, N, x, T, &W, n0, n0 + bands[bi] < N ? n0 + bands[bi] : N);
                assert_same(yb, yr, T * N, "avx2 rows bands vs ref");
            }
            for (int isa = HY_ISA_REF; isa < HY_ISA_COUNT; isa++) {
                if (hy_kernels_table_for((enum hy_isa)isa, &tab))
                    continue;
                memset(yb, 0, (size_t)(T * N) * 4);
                for (int64_t n0 = 0; n0 < N; n0 += 6)
                    tab.matmul_rows(yb + n0, N, x, T, &W, n0, n0 + 6 < N ? n0 + 6 : N);
                assert_same(yb, yr, T * N, tab.name);
            }
        }
    free(x);
    free(yr);
    free(yb);
    free_w(&W);
}

static void test_error_bound(void **state)
{
    (void)state;
    double num = 0, den = 0;
    const int64_t N = 29, K = 1056, T = 3;
    struct hy_tensor W = make_w(N, K, 0);
    float *x = malloc((size_t)(T * K) * 4), *y = malloc((size_t)(T * N) * 4);
    make_x(x, T, K, 0);
    for (int64_t i = 0; i < T * K; i += 97) /* uneven block magnitudes */
        x[i] *= 8.0f;
    hy_ref_matmul_w4a8(y, x, T, &W);
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double ex = 0, bound = 0, mag = 0;
            for (int64_t b = 0; b * 32 < K; b++) {
                double amax = 0, wabs = 0;
                for (int64_t k = 32 * b; k < K && k < 32 * b + 32; k++) {
                    const double w = hy_tensor_get(&W, n, k), xv = x[t * K + k];
                    ex += xv * w;
                    mag += fabs(xv * w);
                    amax = fmax(amax, fabs(xv));
                    wabs += fabs(w);
                }
                bound += amax / 127.0 * wabs;
            }
            const double err = fabs((double)y[t * N + n] - ex);
            assert_true(err <= bound + 1e-5 * mag);
            num += err * err;
            den += ex * ex;
        }
    fprintf(stderr, "w4a8 vs exact f32 activations: nmse %.3g\n", num / den);
    assert_true(num / den <= 2e-4);
    free(x);
    free(y);
    free_w(&W);
}

static void test_dispatch(void **state)
{
    (void)state;
    assert_int_equal(hy_mxfp4_act_mode(), HY_MXFP4_ACT_MXINT8);
    const int64_t N = 21, K = 544;
    struct hy_tensor W = make_w(N, K, 0);
    float *x = malloc((size_t)(3 * K) * 4), *y0 = malloc((size_t)(3 * N) * 4), *y1 = malloc((size_t)(3 * N) * 4);
    make_x(x, 3, K, 0);
    hy_ref_matmul_w4a8(y0, x, 3, &W);
    struct hy_kernel_table t;
    for (int isa = HY_ISA_REF; isa < HY_ISA_COUNT; isa++) {
        if (hy_kernels_table_for((enum hy_isa)isa, &t))
            continue;
        for (int64_t T = 1; T <= 3; T++) {
            t.matmul(y1, x, T, &W);
            assert_same(y1, y0, T * N, t.name);
            /* the bf16-mode entries too (vdpbf16ps levels included): W4A8 for every T */
            t.matmul_bf16x(y1, x, T, &W);
            assert_same(y1, y0, T * N, t.name);
            memset(y1, 0xff, (size_t)(T * N) * 4);
            for (int64_t n0 = 0; n0 < N; n0 += 5)
                t.matmul_rows_bf16x(y1 + n0, N, x, T, &W, n0, n0 + 5 < N ? n0 + 5 : N);
            assert_same(y1, y0, T * N, t.name);
        }
    }
    { /* a prefill-sized bf16-mode call (T >= 32: the panel paths) is W4A8 as well */
        const int64_t TT = 40;
        float *xl = malloc((size_t)(TT * K) * 4), *yl0 = malloc((size_t)(TT * N) * 4),
              *yl1 = malloc((size_t)(TT * N) * 4);
        make_x(xl, TT, K, 0);
        hy_ref_matmul_w4a8(yl0, xl, TT, &W);
        for (int isa = HY_ISA_REF; isa < HY_ISA_COUNT; isa++) {
            if (hy_kernels_table_for((enum hy_isa)isa, &t))
                continue;
            t.matmul_bf16x(yl1, xl, TT, &W);
            assert_same(yl1, yl0, TT * N, t.name);
        }
        free(xl);
        free(yl0);
        free(yl1);
    }
    free_w(&W);
    /* MXFP8 weights: still the exact path (y = dot of dequantized values) */
    uint8_t d[4 * 64], s[4 * 2];
    for (int i = 0; i < 4 * 64; i++)
        d[i] = (uint8_t)(kt_rnd_u32() % 0x7e);
    memset(s, 127, sizeof(s));
    struct hy_tensor W8 = {
        .dtype = HY_DTYPE_F8_E4M3, .rows = 4, .cols = 64, .data = d, .qscheme = HY_QS_MX32, .mx_scales = s};
    hy_ref_matmul(y1, x, 1, &W8);
    for (int n = 0; n < 4; n++) {
        float w[64];
        for (int k = 0; k < 64; k++)
            w[k] = hy_tensor_get(&W8, n, k);
        assert_true(same(y1[n], hy_ref_dot_f32(x, w, 64)));
    }
    free(x);
    free(y0);
    free(y1);
}

int main(void)
{
    setenv("HYINFER_MXFP4_ACT", "mxint8", 1); /* before the first kernel call (read once) */
    have_avx2 = hy_cpu_supports(HY_ISA_AVX2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantizer),   cmocka_unit_test(test_avx2_vs_ref), cmocka_unit_test(test_rows_and_memo),
        cmocka_unit_test(test_error_bound), cmocka_unit_test(test_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
