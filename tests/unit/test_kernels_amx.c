/* test_kernels_amx.c - the AMX-BF16 matmul (src/kernels/amx.c) run on the software tile model of
 * amx_emu.h, so its configuration, packing, panels, tails and output transposition are checked on
 * every machine, AMX or not (the file is compiled into this test with HY_AMX_EMU; the real build
 * is checked by test_kernels / test_kernels_quant at the amx level where the CPU has it).
 *
 * Inputs x are bf16 values (the contract of hy_matmul_bf16x). Checks:
 * - against the ref matmul, nmse <= 1e-10 for BF16, FP8 per-tensor, MXFP8, MXFP4 weights on ragged
 *   shapes (N and K not multiples of 16/32, T not a multiple of 16/32, one and several 32-token
 *   blocks): both sides sum exact products in fp32 in different orders (per-tensor FP8: the scale
 *   applied once to the sum instead of per element), O(sqrt(K) * 2^-24) relative per output;
 * - one-hot activations: y[t, n] == hy_tensor_get(W, n, t) bitwise (indexing of rows, tokens,
 *   k-pairs and the C-tile transposition; a single swap gives a wrong value);
 * - E4M3 NaN codes make exactly their rows' outputs NaN; NaN scales likewise;
 * - T < HY_AMX_MIN_T and F32 / F16 weights take the fallback (here: ref) bitwise;
 * - 1 vs 2 threads bitwise equal;
 * - the emulator itself: a malformed tile configuration is refused (death test in a child).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "unit/amx_emu.h" /* the software tile model: defines the tile operations amx.c calls */
#define HY_AMX_EMU 1
#include "kernels/amx.c" /* the kernel under test, on emulated tiles: emu_hy_amx_matmul_bf16x */

#include "kernel_test_util.h"

#include <omp.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#define NMSE_MAX 1e-10

static void bf16_fill(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = hy_round_bf16(kt_rnd_f());
}

enum { F_BF16 = 0, F_FP8, F_MXFP8, F_MXFP4, F_COUNT };
static const char *const fname[F_COUNT] = {"bf16", "fp8", "mxfp8", "mxfp4"};

static struct hy_tensor make_w(int f, int64_t N, int64_t K)
{
    if (f == F_BF16)
        return kt_make_plain(HY_DTYPE_BF16, N, K);
    return kt_make_q(f == F_FP8 ? KT_FP8 : f == F_MXFP8 ? KT_MXFP8 : KT_MXFP4, N, K);
}

static int same_value(float a, float b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

static void test_vs_ref(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {/* T, N, K */
                                        {32, 32, 32}, {33, 17, 40},  {64, 48, 96},  {40, 33, 100}, {100, 70, 64},
                                        {47, 1, 2},   {32, 64, 544}, {65, 31, 130}, {70, 40, 600}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int f = 0; f < F_COUNT; f++) {
            const int64_t T = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            struct hy_tensor W = make_w(f, N, K);
            float *x = malloc((size_t)(T * K) * 4), *y0 = malloc((size_t)(T * N) * 4),
                  *y1 = malloc((size_t)(T * N) * 4);
            bf16_fill(x, T * K);
            hy_ref_matmul(y0, x, T, &W);
            memset(y1, 0xff, (size_t)(T * N) * 4);
            emu_hy_amx_matmul_bf16x(y1, x, T, &W);
            const double e = kt_nmse(y1, y0, T * N);
            if (!(e <= NMSE_MAX)) {
                print_error("amx %s T=%lld N=%lld K=%lld: nmse %.3g > %.3g\n", fname[f], (long long)T, (long long)N,
                            (long long)K, e, NMSE_MAX);
                fail();
            }
            free(x);
            free(y0);
            free(y1);
            kt_free_q(&W);
        }
}

/* x = rows of the identity (T = K tokens): y[t, n] = w[n, t] exactly. */
static void test_onehot(void **state)
{
    (void)state;
    static const int64_t shapes[][2] = {{35, 64}, {16, 33}, {50, 96}}; /* N, K (= T) */
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int f = 0; f < F_COUNT; f++) {
            const int64_t N = shapes[s][0], K = shapes[s][1], T = K;
            if (f == F_MXFP4 && (K & 1))
                continue;
            struct hy_tensor W = make_w(f, N, K);
            float *x = calloc((size_t)(T * K), 4), *y = malloc((size_t)(T * N) * 4);
            for (int64_t k = 0; k < K; k++)
                x[k * K + k] = 1.0f;
            emu_hy_amx_matmul_bf16x(y, x, T, &W);
            for (int64_t t = 0; t < T; t++)
                for (int64_t n = 0; n < N; n++)
                    if (!same_value(y[t * N + n], hy_tensor_get(&W, n, t))) {
                        print_error("amx one-hot %s N=%lld K=%lld: y[%lld,%lld] = %a, w = %a\n", fname[f], (long long)N,
                                    (long long)K, (long long)t, (long long)n, y[t * N + n], hy_tensor_get(&W, n, t));
                        fail();
                    }
            free(x);
            free(y);
            kt_free_q(&W);
        }
}

static void test_nan(void **state)
{
    (void)state;
    const int64_t T = 40, N = 37, K = 64;
    for (int mx = 0; mx < 2; mx++) {
        struct hy_tensor W = kt_make_q(mx ? KT_MXFP8 : KT_FP8, N, K);
        ((uint8_t *)W.data)[3 * K + 7] = 0x7f;
        ((uint8_t *)W.data)[36 * K + K - 1] = 0xff;
        if (mx)
            ((uint8_t *)W.mx_scales)[20 * 2 + 1] = 255; /* E8M0 NaN: row 20, second block */
        float *x = malloc((size_t)(T * K) * 4), *y = malloc((size_t)(T * N) * 4);
        bf16_fill(x, T * K);
        emu_hy_amx_matmul_bf16x(y, x, T, &W);
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < N; n++) {
                const int want_nan = n == 3 || n == 36 || (mx && n == 20);
                if ((isnan(y[t * N + n]) != 0) != want_nan) {
                    print_error("amx nan %s: y[%lld,%lld] = %g\n", mx ? "mxfp8" : "fp8", (long long)t, (long long)n,
                                y[t * N + n]);
                    fail();
                }
            }
        free(x);
        free(y);
        kt_free_q(&W);
    }
}

/* Shapes and dtypes the tiles do not take: the fallback's result bitwise. */
static void test_fallback(void **state)
{
    (void)state;
    static const struct {
        enum hy_dtype dt;
        int64_t T;
    } cases[] = {{HY_DTYPE_BF16, 31}, {HY_DTYPE_BF16, 1}, {HY_DTYPE_F32, 64}, {HY_DTYPE_F16, 40}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const int64_t T = cases[c].T, N = 19, K = 70;
        struct hy_tensor W = kt_make_plain(cases[c].dt, N, K);
        float *x = malloc((size_t)(T * K) * 4), *y0 = malloc((size_t)(T * N) * 4), *y1 = malloc((size_t)(T * N) * 4);
        bf16_fill(x, T * K);
        hy_ref_matmul(y0, x, T, &W);
        emu_hy_amx_matmul_bf16x(y1, x, T, &W);
        assert_memory_equal(y0, y1, (size_t)(T * N) * 4);
        free(x);
        free(y0);
        free(y1);
        free((void *)W.data);
    }
}

static void test_threads(void **state)
{
    (void)state;
    const int64_t T = 70, N = 200, K = 96; /* several 32-row blocks, three 32-token blocks */
    for (int f = 0; f < F_COUNT; f++) {
        struct hy_tensor W = make_w(f, N, K);
        float *x = malloc((size_t)(T * K) * 4), *y1 = malloc((size_t)(T * N) * 4), *y2 = malloc((size_t)(T * N) * 4);
        bf16_fill(x, T * K);
        omp_set_num_threads(1);
        emu_hy_amx_matmul_bf16x(y1, x, T, &W);
        omp_set_num_threads(2);
        emu_hy_amx_matmul_bf16x(y2, x, T, &W);
        assert_memory_equal(y1, y2, (size_t)(T * N) * 4);
        free(x);
        free(y1);
        free(y2);
        kt_free_q(&W);
    }
}

/* The model refuses what the hardware would fault on (checked in a child process). */
static void test_emulator_rules(void **state)
{
    (void)state;
    for (int c = 0; c < 3; c++) {
        fflush(stderr);
        const pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            freopen("/dev/null", "w", stderr);
            uint8_t cfg[64] = {1};
            if (c == 0) { /* tile op without configuration */
                _tile_zero(0);
            } else if (c == 1) { /* palette 0 */
                cfg[0] = 0;
                _tile_loadconfig(cfg);
            } else { /* dpbf16ps with disagreeing shapes: A 16 rows x 64 B, B 8 rows */
                for (int t = 0; t < 3; t++) {
                    cfg[16 + 2 * t] = 64;
                    cfg[48 + t] = t == 2 ? 8 : 16;
                }
                _tile_loadconfig(cfg);
                _tile_dpbf16ps(0, 1, 2);
            }
            _exit(0); /* not refused: the parent fails */
        }
        int st = 0;
        waitpid(pid, &st, 0);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    }
}

int main(void)
{
    kt_rng = 0x5eed0a3c12345677ull;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vs_ref),   cmocka_unit_test(test_onehot),  cmocka_unit_test(test_nan),
        cmocka_unit_test(test_fallback), cmocka_unit_test(test_threads), cmocka_unit_test(test_emulator_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
