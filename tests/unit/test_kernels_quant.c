/* test_kernels_quant.c - the matmul kernels on quantized weights (FP8 per-tensor, MXFP8, MXFP4;
 * quant/tensor.h) at every ISA level this CPU + OS supports, against the scalar ref table.
 *
 * - Exact decoding: the AVX2 widening (panel path hy_avx2q_widen_rows, and the decode GEMV seen
 *   through one-hot activations, where y[t,n] = w[n,k] exactly) gives hy_tensor_get's value
 *   bitwise, for every element code (E4M3 NaN codes and subnormals included) and extreme scales
 *   (E8M0 0, 134, 135 .. 255; per-tensor scales whose * 2^120 overflows, f32 subnormals, NaN), and
 *   E4M3 NaN codes make exactly the outputs of their rows NaN on both paths.
 * - Against ref: nmse = sum((a-b)^2) / sum(b^2) <= 1e-10 (b = ref). Both sides feed the same exact
 *   f32 weight values into fp32 dot products and differ only in rounding (FMA chain vs ref's
 *   separate multiply + add), relative error O(sqrt(K) * 2^-24) per output on this non-cancelling
 *   random data (K <= 1100: ~1e-13 in nmse); any decoding, scale, tail or indexing error gives
 *   nmse >= 1e-6 (one E2M1/E4M3 step is >= 2^-4 relative).
 * - Contract (kernel_table.h): row t of a T-row call is bitwise the same for T in {1,2,3,5,17}
 *   (decode path T <= 2, prefill panel path T >= 3) and with 1 or 2 OpenMP threads.
 * - matmul_rows in bands of rows (the MoE pass) equals matmul bitwise, on every level.
 * AVX-512 (widening with pad 16, the decode tiles against the panels) is checked on the real kernels
 * where the CPU has it, else on the same sources over SIMDe's emulated intrinsics (avx512_emu.h).
 * Shapes are ragged: N not a multiple of 4 or 16, K % 32 != 0 (MX8 and FP8 also odd K; FP4 K even).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/cpu.h"
#include "base/err.h"
#include "kernels/avx2_quant.h"
#include "kernels/avx512_quant.h"
#include "kernels/kernel_table.h"
#include "unit/avx512_emu.h"
#include "unit/kernel_test_util.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMSE_MAX 1e-10

static struct hy_kernel_table ref;
static struct hy_kernel_table levels[HY_ISA_COUNT];
static int n_levels;

static const char *const qname[KT_QCOUNT] = {"fp8", "mxfp8", "mxfp4"};

static int setup(void **state)
{
    (void)state;
    if (hy_kernels_table_for(HY_ISA_REF, &ref))
        return -1;
    for (int i = HY_ISA_REF + 1; i < HY_ISA_COUNT; i++) {
        if (hy_kernels_table_for((enum hy_isa)i, &levels[n_levels]) == 0)
            n_levels++;
        else
            fprintf(stderr, "level %s not tested: %s\n", hy_isa_name((enum hy_isa)i), hy_err_msg());
    }
    /* no AVX-512 here (or HY_TEST_AVX512_EMU=1): its kernels on SIMDe's emulated intrinsics (avx512_emu.h) */
    if (hy_test_avx512_emu_wanted() && hy_test_avx512_emu_table(&levels[n_levels]) == 0)
        n_levels++;
    fprintf(stderr, "cpu: %s; testing ref +%d level(s)\n", hy_cpu_caps_string(), n_levels);
    return 0;
}

static int same_value(float a, float b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* Random bytes: all 256 E4M3 codes / all nibbles; scale bytes drawn from a set with the extremes.
 * small = 1: element magnitudes < 1 and scale bytes <= 252, so every weight is finite. */
static struct hy_tensor make_raw(int fp4, int mx, float scale, int64_t N, int64_t K, int small)
{
    static const uint8_t sx[] = {0, 1, 2, 60, 100, 119, 127, 134, 135, 200, 246, 247, 250, 252, 254, 255};
    const int64_t nsb = (K + 31) / 32;
    struct hy_tensor W = {.dtype = fp4 ? HY_DTYPE_F4_E2M1 : HY_DTYPE_F8_E4M3,
                          .rows = N,
                          .cols = K,
                          .qscheme = mx ? HY_QS_MX32 : HY_QS_PER_TENSOR,
                          .scale = scale};
    const int64_t rb = hy_tensor_row_bytes(&W);
    uint8_t *d = malloc((size_t)(N * rb)), *s = mx ? malloc((size_t)(N * nsb)) : NULL;
    for (int64_t i = 0; i < N * rb; i++) {
        uint8_t b = (uint8_t)kt_rnd_u32();
        if (small)
            b = fp4 ? (uint8_t)(b & 0x99) /* |e| in {0, 0.5} */ : (uint8_t)(b & 0xb7); /* exponent <= 6 */
        d[i] = b;
    }
    for (int64_t i = 0; mx && i < N * nsb; i++)
        s[i] = sx[kt_rnd_u32() % (small ? 14 : 16)];
    W.data = d;
    W.mx_scales = s;
    return W;
}

/* Widened values == hy_tensor_get, bitwise (NaN == NaN), zero-padded to round_up(K, pad): the AVX2
 * panels (pad 8) and, where the CPU has AVX-512, the AVX-512 panels (pad 16). */
static void check_widen_one(const struct hy_tensor *W, int pad)
{
    const int64_t N = W->rows, K = W->cols, Kp = (K + pad - 1) / pad * pad, ldw = Kp + 8;
    float *p = malloc((size_t)(N * ldw) * 4);
    memset(p, 0xff, (size_t)(N * ldw) * 4);
    if (pad == 8)
        hy_avx2q_widen_rows(W, 0, N, ldw, p);
    else if (hy_cpu_supports(HY_ISA_AVX512))
        hy_avx512q_widen_rows(W, 0, N, ldw, p);
    else /* the same source on SIMDe's emulated intrinsics */
        emu512_q_widen_rows(W, 0, N, ldw, p);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++) {
            const float a = p[n * ldw + k], b = hy_tensor_get(W, n, k);
            uint32_t ua, ub;
            memcpy(&ua, &a, 4);
            memcpy(&ub, &b, 4);
            if (!(isnan(a) && isnan(b)) && ua != ub) {
                print_error("widen/%d %s qs=%d [%lld,%lld]: %a != %a\n", pad, hy_dtype_name(W->dtype), (int)W->qscheme,
                            (long long)n, (long long)k, a, b);
                fail();
            }
        }
        for (int64_t k = K; k < Kp; k++)
            assert_true(p[n * ldw + k] == 0.0f);
    }
    free(p);
}

static void check_widen(const struct hy_tensor *W)
{
    check_widen_one(W, 8);
    check_widen_one(W, 16);
}

/* One-hot activations: y[t, n] = w[n, k_t] exactly, through the decode path (T = 1, 2) and the
 * prefill path (T = K). Weights must be finite (0 * inf would poison the other lanes). */
static void check_onehot(const struct hy_kernel_table *kt, const struct hy_tensor *W)
{
    const int64_t N = W->rows, K = W->cols;
    float *x = calloc((size_t)(K * K), 4), *y = malloc((size_t)(K * N) * 4);
    for (int64_t k = 0; k < K; k++)
        x[k * K + k] = 1.0f;
    for (int pass = 0; pass < 3; pass++) {
        const int64_t T = pass == 0 ? 1 : pass == 1 ? 2 : K;
        for (int64_t t0 = 0; t0 + T <= K; t0 += T) {
            kt->matmul(y, x + t0 * K, T, W);
            for (int64_t t = 0; t < T; t++)
                for (int64_t n = 0; n < N; n++)
                    if (!same_value(y[t * N + n], hy_tensor_get(W, n, t0 + t))) {
                        print_error("[%s] one-hot %s qs=%d T=%lld: y[%lld,%lld] = %a, w = %a\n", kt->name,
                                    hy_dtype_name(W->dtype), (int)W->qscheme, (long long)T, (long long)(t0 + t),
                                    (long long)n, y[t * N + n], hy_tensor_get(W, n, t0 + t));
                        fail();
                    }
        }
    }
    free(x);
    free(y);
}

static void test_decode_exact(void **state)
{
    (void)state;
    if (!hy_cpu_supports(HY_ISA_AVX2)) {
        fprintf(stderr, "no AVX2: widening not tested\n");
        return;
    }
    static const int64_t Ks[] = {32, 64, 70, 96, 33, 130, 320}; /* 320: 4 rows of scales >= 32 bytes */
    for (size_t ki = 0; ki < sizeof(Ks) / sizeof(Ks[0]); ki++)
        for (int fp4 = 0; fp4 < 2; fp4++)
            for (int mx = 0; mx < 2; mx++)
                for (int si = 0; si < 4; si++) {
                    const int64_t K = Ks[ki];
                    if (fp4 && (K & 1))
                        continue;
                    if (mx && si > 0)
                        break;
                    /* per-tensor scales: ordinary, 2^125 (* 2^120 overflows: scalar route), an f32
                     * subnormal, NaN */
                    const float sc[4] = {0.00731f, 0x1p125f, 0x1.8p-140f, NAN};
                    struct hy_tensor W = make_raw(fp4, mx, sc[si], 7, K, 0);
                    check_widen(&W);
                    kt_free_q(&W);
                    if (si == 3)
                        continue;
                    W = make_raw(fp4, mx, sc[si], 7, K, 1);
                    check_widen(&W);
                    for (int l = 0; l < n_levels; l++)
                        check_onehot(&levels[l], &W);
                    if (mx) { /* every scale of the tensor on one boundary value */
                        static const uint8_t fixed[] = {0, 1, 134, 135, 252};
                        const int64_t nsb = (K + 31) / 32;
                        for (size_t fi = 0; fi < sizeof(fixed) / sizeof(fixed[0]) + 2; fi++) {
                            if (fi < sizeof(fixed) / sizeof(fixed[0]))
                                memset((void *)W.mx_scales, fixed[fi], (size_t)(7 * nsb));
                            else { /* one 135 among 127s, first or last byte of the tensor's scales */
                                memset((void *)W.mx_scales, 127, (size_t)(7 * nsb));
                                ((uint8_t *)W.mx_scales)[fi == sizeof(fixed) ? 0 : 7 * nsb - 1] = 135;
                            }
                            check_widen(&W);
                            for (int l = 0; l < n_levels; l++)
                                check_onehot(&levels[l], &W);
                        }
                    }
                    kt_free_q(&W);
                }
}

/* E4M3 NaN codes (0x7f / 0xff) in two rows: exactly those rows' outputs are NaN, through the
 * decode tiles (recomputed by the scalar route) and the prefill panels; the rest match ref. */
static void test_e4m3_nan(void **state)
{
    (void)state;
    for (int mx = 0; mx < 2; mx++)
        for (int kk = 0; kk < 2; kk++) {
            const int64_t N = 11, K = kk ? 100 : 64;
            struct hy_tensor W = kt_make_q(mx ? KT_MXFP8 : KT_FP8, N, K);
            uint8_t *d = (uint8_t *)W.data;
            d[2 * K + 5] = 0x7f;
            d[9 * K + K - 1] = 0xff;
            float *x = malloc((size_t)(5 * K) * 4), *y0 = malloc((size_t)(5 * N) * 4),
                  *y1 = malloc((size_t)(5 * N) * 4);
            kt_fill(x, 5 * K);
            for (int64_t T = 1; T <= 5; T += 4) {
                ref.matmul(y0, x, T, &W);
                for (int l = 0; l < n_levels; l++) {
                    levels[l].matmul(y1, x, T, &W);
                    for (int64_t t = 0; t < T; t++)
                        for (int64_t n = 0; n < N; n++) {
                            const int want_nan = n == 2 || n == 9;
                            assert_int_equal(isnan(y0[t * N + n]) != 0, want_nan);
                            if ((isnan(y1[t * N + n]) != 0) != want_nan) {
                                print_error("[%s] %s K=%lld T=%lld: y[%lld,%lld] = %g\n", levels[l].name,
                                            mx ? "mxfp8" : "fp8", (long long)K, (long long)T, (long long)t,
                                            (long long)n, y1[t * N + n]);
                                fail();
                            }
                            if (!want_nan)
                                assert_true(fabsf(y1[t * N + n] - y0[t * N + n]) <=
                                            1e-5f * (1.0f + fabsf(y0[t * N + n])));
                        }
                }
            }
            free(x);
            free(y0);
            free(y1);
            kt_free_q(&W);
        }
}

static void test_quant_matmul_vs_ref(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {/* T, N, K */
                                        {1, 1, 32},   {1, 7, 64},   {2, 13, 96},   {3, 17, 160}, {1, 5, 2},
                                        {2, 9, 30},   {4, 9, 48},   {17, 11, 100}, {5, 33, 258}, {1, 64, 512},
                                        {2, 3, 1100}, {20, 19, 64}, {6, 40, 130},  {50, 7, 704}, {97, 18, 288},
                                        {1, 3, 33},   {3, 6, 77},   {2, 21, 1031}, {9, 5, 1}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int f = 0; f < KT_QCOUNT; f++) {
            const int64_t T = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            if (f == KT_MXFP4 && (K & 1))
                continue;
            struct hy_tensor W = kt_make_q((enum kt_qfmt)f, N, K);
            float *x = malloc((size_t)(T * K) * 4), *y0 = malloc((size_t)(T * N) * 4),
                  *y1 = malloc((size_t)(T * N) * 4);
            kt_fill(x, T * K);
            ref.matmul(y0, x, T, &W);
            for (int l = 0; l < n_levels; l++) {
                memset(y1, 0xff, (size_t)(T * N) * 4);
                levels[l].matmul(y1, x, T, &W);
                const double e = kt_nmse(y1, y0, T * N);
                if (!(e <= NMSE_MAX)) {
                    print_error("[%s] matmul %s T=%lld N=%lld K=%lld: nmse %.3g > %.3g\n", levels[l].name, qname[f],
                                (long long)T, (long long)N, (long long)K, e, NMSE_MAX);
                    fail();
                }
            }
            /* matmul_bf16x on bf16 inputs (the amx level's AMX tiles, vdpbf16ps on AVX512_BF16 CPUs; = matmul
             * elsewhere), same bound */
            for (int64_t i = 0; i < T * K; i++)
                x[i] = hy_round_bf16(x[i]);
            ref.matmul(y0, x, T, &W);
            for (int l = 0; l < n_levels; l++) {
                memset(y1, 0xff, (size_t)(T * N) * 4);
                levels[l].matmul_bf16x(y1, x, T, &W);
                const double e = kt_nmse(y1, y0, T * N);
                if (!(e <= NMSE_MAX)) {
                    print_error("[%s] matmul_bf16x %s T=%lld N=%lld K=%lld: nmse %.3g > %.3g\n", levels[l].name,
                                qname[f], (long long)T, (long long)N, (long long)K, e, NMSE_MAX);
                    fail();
                }
            }
            free(x);
            free(y0);
            free(y1);
            kt_free_q(&W);
        }
}

/* Rows of a T = 40 call == the same rows computed in calls of T = 1, 2, 3, 5, 33 at every offset
 * (avx2: T <= 2 decode tiles, larger T panels; avx512: T <= 32 decode tiles, 33 and 40 panels). */
static void check_t_invariance(const struct hy_kernel_table *kt)
{
    static const int64_t Ks[] = {96, 78, 608, 600};
    const int64_t TT = 40, N = 37;
    for (size_t ki = 0; ki < sizeof(Ks) / sizeof(Ks[0]); ki++)
        for (int f = 0; f < KT_QCOUNT; f++) {
            const int64_t K = Ks[ki];
            struct hy_tensor W = kt_make_q((enum kt_qfmt)f, N, K);
            float *x = malloc((size_t)(TT * K) * 4), *y = malloc((size_t)(TT * N) * 4),
                  *ys = malloc((size_t)(TT * N) * 4);
            kt_fill(x, TT * K);
            kt->matmul(y, x, TT, &W);
            static const int64_t sub[] = {1, 2, 3, 5, 33};
            for (size_t si = 0; si < 5; si++)
                for (int64_t t0 = 0; t0 + sub[si] <= TT; t0 += sub[si]) {
                    kt->matmul(ys, x + t0 * K, sub[si], &W);
                    if (memcmp(ys, y + t0 * N, (size_t)(sub[si] * N) * 4)) {
                        print_error("[%s] %s K=%lld: rows %lld..+%lld of a T=%lld call differ from T=40\n", kt->name,
                                    qname[f], (long long)K, (long long)t0, (long long)sub[si], (long long)sub[si]);
                        fail();
                    }
                }
            if (kt->isa == HY_ISA_AVX2) { /* the streaming kernel the prefill path falls back to */
                memset(ys, 0xff, (size_t)(TT * N) * 4);
                hy_avx2q_rows(ys, N, x, K, TT, &W, 0, N);
                if (memcmp(ys, y, (size_t)(TT * N) * 4)) {
                    print_error("[avx2] %s K=%lld: hy_avx2q_rows differs from the T=40 matmul\n", qname[f],
                                (long long)K);
                    fail();
                }
            }
            if (kt->isa >= HY_ISA_AVX512) { /* the decode tiles against the T = 40 panel path */
                memset(ys, 0xff, (size_t)(TT * N) * 4);
                (strcmp(kt->name, "avx512-emu") ? hy_avx512q_rows : emu512_q_rows)(ys, N, x, K, TT, &W, 0, N);
                if (memcmp(ys, y, (size_t)(TT * N) * 4)) {
                    print_error("[%s] %s K=%lld: hy_avx512q_rows differs from the T=40 matmul\n", kt->name, qname[f],
                                (long long)K);
                    fail();
                }
            }
            free(x);
            free(y);
            free(ys);
            kt_free_q(&W);
        }
}

static void test_quant_t_invariance(void **state)
{
    (void)state;
    check_t_invariance(&ref);
    for (int l = 0; l < n_levels; l++)
        check_t_invariance(&levels[l]);
}

static void check_threads(const struct hy_kernel_table *kt)
{
    static const int64_t Ts[] = {1, 2, 9};
    static const int64_t Ks[] = {512, 520};
    const int64_t N = 203; /* N*K*T > 65536: the threaded paths */
    for (int f = 0; f < KT_QCOUNT; f++)
        for (size_t ki = 0; ki < 2; ki++)
            for (size_t ti = 0; ti < 3; ti++) {
                const int64_t T = Ts[ti], K = Ks[ki];
                struct hy_tensor W = kt_make_q((enum kt_qfmt)f, N, K);
                float *x = malloc((size_t)(T * K) * 4), *y1 = malloc((size_t)(T * N) * 4),
                      *y2 = malloc((size_t)(T * N) * 4);
                kt_fill(x, T * K);
                omp_set_num_threads(1);
                kt->matmul(y1, x, T, &W);
                omp_set_num_threads(2);
                kt->matmul(y2, x, T, &W);
                if (memcmp(y1, y2, (size_t)(T * N) * 4)) {
                    print_error("[%s] matmul %s T=%lld K=%lld: 1 vs 2 threads differ\n", kt->name, qname[f],
                                (long long)T, (long long)K);
                    fail();
                }
                free(x);
                free(y1);
                free(y2);
                kt_free_q(&W);
            }
}

static void test_quant_threads(void **state)
{
    (void)state;
    check_threads(&ref);
    for (int l = 0; l < n_levels; l++)
        check_threads(&levels[l]);
}

/* Per-tensor FP8 takes the raw scheme (avx2_quant.h: x scaled by scale * 2^120 per call): a token
 * whose scaled row overflows takes the exact values instead, decided by its own row only, so its
 * result and every other row's stay the same whatever batch they are in (T = 1, 2 decode tiles;
 * T = 5, 40 panels); all close to ref. nan_free = 1 (set by the loader for NaN-free E4M3) must not
 * change a bit. */
static void test_fold_and_nan_free(void **state)
{
    (void)state;
    const int64_t N = 13, K = 100, TT = 40;
    struct hy_tensor W = kt_make_q(KT_FP8, N, K);
    W.scale = 0x1p-7f; /* c = 2^113: an activation of 2^15 overflows x * c */
    float *x = malloc((size_t)(TT * K) * 4), *y = malloc((size_t)(TT * N) * 4), *ys = malloc((size_t)(TT * N) * 4),
          *y0 = malloc((size_t)(TT * N) * 4);
    kt_fill(x, TT * K);
    x[1 * K + 7] = 0x1p15f;   /* token 1: scaled row not finite */
    x[22 * K + 99] = 0x1p16f; /* token 22 too, in the last element */
    ref.matmul(y0, x, TT, &W);
    for (int l = 0; l < n_levels; l++) {
        const struct hy_kernel_table *kt = &levels[l];
        for (int nf = 0; nf < 2; nf++) {
            W.nan_free = (uint8_t)nf;
            kt->matmul(y, x, TT, &W);
            const double e = kt_nmse(y, y0, TT * N);
            if (!(e <= NMSE_MAX)) {
                print_error("[%s] fp8 fold nan_free=%d: nmse %.3g\n", kt->name, nf, e);
                fail();
            }
            static const int64_t sub[] = {1, 2, 5};
            for (size_t si = 0; si < 3; si++)
                for (int64_t t0 = 0; t0 + sub[si] <= TT; t0 += sub[si]) {
                    kt->matmul(ys, x + t0 * K, sub[si], &W);
                    if (memcmp(ys, y + t0 * N, (size_t)(sub[si] * N) * 4)) {
                        print_error("[%s] fp8 fold nan_free=%d: rows %lld..+%lld differ from the T=40 call\n", kt->name,
                                    nf, (long long)t0, (long long)sub[si]);
                        fail();
                    }
                }
            if (nf == 1) { /* the NaN-free tiles give the checked tiles' bits */
                W.nan_free = 0;
                kt->matmul(ys, x, TT, &W);
                assert_memory_equal(ys, y, (size_t)(TT * N) * 4);
            }
        }
    }
    free(x);
    free(y);
    free(ys);
    free(y0);
    kt_free_q(&W);
}

/* matmul_rows (what the MoE pass calls, per band of rows) equals matmul bitwise on every level:
 * bands of 1, 3, 4, 7 and 64 rows, T in {1, 2, 3, 5} (decode tiles and, for T >= 3, the row view),
 * ragged shapes, and per-tensor FP8 with a token whose scaled row overflows (raw scheme fallback). */
static void check_rows(const struct hy_kernel_table *kt)
{
    static const int64_t shapes[][2] = {{13, 100}, {70, 64}, {9, 1031}, {5, 2}};
    static const int64_t Ts[] = {1, 2, 3, 5}, bands[] = {1, 3, 4, 7, 64};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int f = 0; f < KT_QCOUNT; f++) {
            const int64_t N = shapes[s][0], K = shapes[s][1];
            if (f == KT_MXFP4 && (K & 1))
                continue;
            struct hy_tensor W = kt_make_q((enum kt_qfmt)f, N, K);
            if (f == KT_FP8)
                W.scale = 0x1p-7f; /* c = 2^113 */
            float *x = malloc((size_t)(5 * K) * 4), *y0 = malloc((size_t)(5 * N) * 4),
                  *y1 = malloc((size_t)(5 * N) * 4);
            kt_fill(x, 5 * K);
            x[1 * K + K / 2] = 0x1p15f; /* token 1: the FP8 scaled row overflows */
            for (size_t ti = 0; ti < 4; ti++) {
                const int64_t T = Ts[ti];
                kt->matmul(y0, x, T, &W);
                for (size_t bi = 0; bi < sizeof(bands) / sizeof(bands[0]); bi++) {
                    memset(y1, 0xff, (size_t)(T * N) * 4);
                    for (int64_t n0 = 0; n0 < N; n0 += bands[bi])
                        kt->matmul_rows(y1 + n0, N, x, T, &W, n0, n0 + bands[bi] < N ? n0 + bands[bi] : N);
                    if (memcmp(y0, y1, (size_t)(T * N) * 4)) {
                        print_error("[%s] %s N=%lld K=%lld T=%lld: matmul_rows in bands of %lld != matmul\n", kt->name,
                                    qname[f], (long long)N, (long long)K, (long long)T, (long long)bands[bi]);
                        fail();
                    }
                }
            }
            free(x);
            free(y0);
            free(y1);
            kt_free_q(&W);
        }
}

static void test_quant_rows(void **state)
{
    (void)state;
    check_rows(&ref);
    for (int l = 0; l < n_levels; l++)
        check_rows(&levels[l]);
}

int main(void)
{
    kt_rng = 0x2545f4914f6cdd1dull; /* this file's data since it was written */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_exact),        cmocka_unit_test(test_e4m3_nan),
        cmocka_unit_test(test_quant_matmul_vs_ref), cmocka_unit_test(test_quant_t_invariance),
        cmocka_unit_test(test_quant_threads),       cmocka_unit_test(test_fold_and_nan_free),
        cmocka_unit_test(test_quant_rows),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
