/* test_kernels_bf16x.c - the bf16-mode matmuls (hy_matmul_bf16x's table entries matmul_bf16x and
 * matmul_rows_bf16x) at every level this CPU + OS runs, and, without AVX-512, the AVX512-BF16 path on
 * SIMDe's emulated intrinsics (avx512_emu.h). On CPUs with AVX512_BF16 (and in the emulation) these
 * are kernels/avx512_bf16.c: weights decoded to bf16 in registers for decode-sized calls, bf16 panels
 * for T >= HY_BF16X_MIN_T, one vdpbf16ps chain per output either way. Elsewhere they are the level's
 * f32 chain, and the same checks hold; at the amx level, calls of 32 or more tokens run on AMX tiles
 * (another summation order), so there the path comparisons use smaller calls. Checks (bitwise, NaN
 * bits included on the vdpbf16ps path):
 * - every weight code at every scale: all 256 E4M3 codes (NaN codes and subnormals included) as
 *   per-tensor FP8, unscaled FP8 and MXFP8 under each of the 256 E8M0 bytes (the decode tiles' range
 *   [7, 246] and the panel route outside it), all 16 E2M1 codes under each E8M0 byte, seen through
 *   one-hot activations: the T = 1 (decode) results equal the T = K (panel) results, and in rows whose
 *   elements are all finite, where the element's value is a normal bf16 number, y equals it times the
 *   per-tensor scale (the product and the sum of zeros are exact); the NaN-free rows once more marked
 *   nan_free (the AVX512_VBMI byte-table decoder where the level has it);
 * - the byte tables and the exponent rebase give the same bits (random FP8 and MXFP8 codes, scale bytes
 *   at the tables' range ends, T = 1..5, 31, row bands, K with odd chunk counts and K % 32 tails); every
 *   finite code under MX scale bytes 10, 11 and 244..246, the ends of the tables' range;
 * - x's rounding to bf16 (shared by both paths): through an identity weight, y = bf16(x) for ties,
 *   NaN, infinities and the largest finite values, T = 1 and T = 40;
 * - T-invariance: rows of a T = 40 call equal the same rows in calls of T = 1, 2, 3, 5, 33 at every
 *   offset (BF16, FP8, MXFP8, MXFP4; K % 32 != 0 and K < 32 included);
 * - the prefill tiles' token, row and K blocks (T = 130, N = 37, chains over several K blocks) give the
 *   rows of T = 1, 7 and 65 calls;
 * - matmul_rows_bf16x over bands of 1, 3, 4, 5 and 64 rows equals matmul_bf16x, for T = 1, 3, 40;
 * - 1 and 2 OpenMP threads give the same bits;
 * - E4M3 NaN codes in a tensor not marked nan_free make exactly the outputs of their rows NaN, on both
 *   paths; marking a NaN-free tensor nan_free changes no bit;
 * - the route: decode-sized calls on NaN-free weights with in-range scales never fall back to a panel;
 *   one out-of-range MXFP8 scale byte or one NaN code sends exactly its 4-row group there;
 * - the E2M1 order (MXFP4 / FP4: x and panels even elements first per 64, two nibble vectors per 64 codes)
 *   and the natural order are each T- and band-invariant and differ by rounding order only.
 * - the prefill panels of FP8 / MXFP8 / MXFP4 weights (in-register decoders) equal the scalar widening
 *   word for word, for every code and scale above and K % 32 tails;
 * Accuracy against ref is checked in test_kernels.c / test_kernels_quant.c (matmul_bf16x vs ref).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/cpu.h"
#include "base/err.h"
#include "kernels/avx512_bf16.h"
#include "kernels/bf16_panel.h"
#include "kernels/kernel_table.h"
#include "unit/avx512_emu.h"
#include "unit/kernel_test_util.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct hy_kernel_table levels[HY_ISA_COUNT + 1];
static int n_levels;

static int setup(void **state)
{
    (void)state;
    for (int i = HY_ISA_REF; i < HY_ISA_COUNT; i++)
        if (hy_kernels_table_for((enum hy_isa)i, &levels[n_levels]) == 0)
            n_levels++;
    if (hy_test_avx512_emu_wanted() && hy_test_avx512_emu_table(&levels[n_levels]) == 0)
        n_levels++;
    fprintf(stderr, "cpu: %s; testing %d level(s)\n", hy_cpu_caps_string(), n_levels);
    return 0;
}

/* Bitwise, NaN bits included where the level's bf16-mode matmul is the vdpbf16ps path (both paths run the
 * same instructions on the same operands); the f32 chains' decode and panel paths order their FMA
 * operands differently, so there any NaN equals any NaN (as in test_kernels_quant.c). */
static int same_bits(const float *a, const float *b, int64_t n, int nan_bits, int64_t *at)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t ua, ub;
        memcpy(&ua, &a[i], 4);
        memcpy(&ub, &b[i], 4);
        if (ua != ub && (nan_bits || !(isnan(a[i]) && isnan(b[i])))) {
            *at = i;
            return 0;
        }
    }
    return 1;
}

static void expect_same_level(const float *a, const float *b, int64_t n, const char *what,
                              const struct hy_kernel_table *kt)
{
    int64_t at = 0;
    const char *level = kt->name;
    if (!same_bits(a, b, n, kt->matmul_bf16x != kt->matmul, &at)) {
        print_error("[%s] %s: element %lld: %a != %a\n", level, what, (long long)at, a[at], b[at]);
        fail();
    }
}

/* x[T, K] of bf16 values. */
static void bf16_fill(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = hy_round_bf16(kt_rnd_f());
}

static struct hy_tensor make_bf16(int64_t N, int64_t K)
{
    uint16_t *d = malloc((size_t)(N * K) * 2);
    for (int64_t i = 0; i < N * K; i++)
        d[i] = hy_f32_to_bf16(kt_rnd_f() * 0.25f);
    return (struct hy_tensor){.dtype = HY_DTYPE_BF16, .rows = N, .cols = K, .data = d};
}

static void free_w(struct hy_tensor *W)
{
    free((void *)W->data);
    free((void *)W->mx_scales);
}

/* The prefill panels (hy_avx512bf16_panel: in-register decoders, widening for rows outside their range)
 * equal hy_bf16_panel's scalar widening (hy_tensor_get, then hy_f32_to_bf16) word for word, NaN bits
 * included, on the AVX512-BF16 path (the real one and the emulated one, where present). */
static void check_panel(const struct hy_tensor *W, const char *what)
{
    const int64_t N = W->rows, Kp = (W->cols + 31) / 32 * 32;
    uint16_t *p = malloc((size_t)(N * Kp) * 2), *want = malloc((size_t)(N * Kp) * 2);
    float *wrow = malloc((size_t)(Kp + 16) * 4);
    hy_bf16_panel(W, 0, N, N, Kp, want, wrow, NULL);
    void (*fns[2])(const struct hy_tensor *, int64_t, int64_t, uint16_t *) = {NULL, NULL};
    if (hy_cpu_caps()->avx512bf16)
        fns[0] = hy_avx512bf16_panel;
    for (int l = 0; l < n_levels; l++)
        if (!strcmp(levels[l].name, "avx512-emu"))
            fns[1] = emu512_bf16x_panel;
    for (int f = 0; f < 2; f++) {
        if (!fns[f])
            continue;
        memset(p, 0xa5, (size_t)(N * Kp) * 2);
        for (int64_t n0 = 0; n0 < N; n0 += 16) /* in blocks of 16 rows, as the prefill calls it */
            fns[f](W, n0, N - n0 < 16 ? N - n0 : 16, p + n0 * Kp);
        for (int64_t i = 0; i < N * Kp; i++)
            if (p[i] != want[i]) {
                print_error("[%s] %s: panel row %lld, k %lld: 0x%04x, expected 0x%04x\n", f ? "avx512-emu" : "avx512",
                            what, (long long)(i / Kp), (long long)(i % Kp), p[i], want[i]);
                fail();
            }
    }
    free(p);
    free(want);
    free(wrow);
}

/* One-hot activations x[t, k] = (k == t) over T = K tokens: y[t, n] is element (n, t) through the
 * chain. Decode (T = 1 calls) == panel (one T = K call); value check where the element is a normal
 * bf16 number (others: bf16 rounding or the dot product's denormal flush decide, alike on both paths). */
static void check_one_hot(const struct hy_tensor *W, const char *what)
{
    const int64_t N = W->rows, K = W->cols;
    float *x = calloc((size_t)(K * K), 4), *yp = malloc((size_t)(K * N) * 4), *yd = malloc((size_t)(K * N) * 4);
    for (int64_t t = 0; t < K; t++)
        x[t * K + t] = 1.0f;
    const float oscale = W->qscheme == HY_QS_PER_TENSOR ? W->scale : 1.0f;
    struct hy_tensor bare = *W;
    if (bare.qscheme == HY_QS_PER_TENSOR) {
        bare.qscheme = HY_QS_NONE;
        bare.scale = 1.0f;
    }
    check_panel(W, what);
    for (int l = 0; l < n_levels; l++) {
        levels[l].matmul_bf16x(yp, x, K, W);
        for (int64_t t = 0; t < K; t++)
            levels[l].matmul_bf16x(yd + t * N, x + t * K, 1, W);
        expect_same_level(yd, yp, K * N, what, &levels[l]);
        for (int64_t n = 0; n < N; n++) {
            int finite = 1; /* a NaN or infinite element poisons its row's sums (0 * inf) */
            for (int64_t k = 0; k < K; k++)
                finite &= isfinite(hy_tensor_get(&bare, n, k)) != 0;
            for (int64_t t = 0; finite && t < K; t++) {
                const float v = hy_tensor_get(&bare, n, t);
                if (fabsf(v) < 0x1p-126f || hy_round_bf16(v) != v)
                    continue;
                const float want = v * oscale, got = yp[t * N + n];
                if (!(got == want || (isnan(got) && isnan(want)))) {
                    print_error("[%s] %s: row %lld, k %lld: %a, expected %a\n", levels[l].name, what, (long long)n,
                                (long long)t, got, want);
                    fail();
                }
            }
        }
    }
    free(x);
    free(yp);
    free(yd);
}

static void test_every_code_and_scale(void **state)
{
    (void)state;
    /* E4M3: rows 0..255 hold the codes (rotated by r) under MX scale byte r, NaN codes replaced by +-448
     * and codes whose value times 2^(r-127) overflows moved down to a finite binade, so only scale 255
     * poisons its row; rows 256..258 hold all 256 codes, NaNs included, under scale bytes 5, 127
     * and 250 (the panel route below and above the decode tiles' range, and the tiles' NaN test) */
    const int64_t K8 = 256, N8 = 259;
    uint8_t *d8 = malloc((size_t)(N8 * K8)), *s8 = malloc((size_t)(N8 * K8 / 32));
    for (int64_t r = 0; r < N8; r++) {
        for (int64_t k = 0; k < K8; k++) {
            uint8_t c = (uint8_t)(k + r);
            if (r < 256) {
                if ((c & 0x7f) == 0x7f)
                    c--;
                while (!isfinite(hy_e4m3_to_f32(c) * hy_e8m0_to_f32((uint8_t)r)) && (c & 0x78))
                    c = (uint8_t)(c - 8); /* one binade lower until finite (scale 255 is NaN whatever c) */
            }
            d8[r * K8 + k] = c;
        }
        memset(s8 + r * (K8 / 32), r < 256 ? (int)r : r == 256 ? 5 : r == 257 ? 127 : 250, K8 / 32);
    }
    struct hy_tensor mx8 = {
        .dtype = HY_DTYPE_F8_E4M3, .rows = N8, .cols = K8, .data = d8, .qscheme = HY_QS_MX32, .mx_scales = s8};
    check_one_hot(&mx8, "mxfp8 every code x every scale byte");
    mx8.rows = 256; /* no NaN code: marked nan_free, the byte tables (scale bytes 10..246), the rebase
                     * (7..9) and the panel route (the others) where the level has AVX512_VBMI */
    mx8.nan_free = 1;
    check_one_hot(&mx8, "mxfp8 every finite code x every scale byte, nan_free");
    /* the largest binades at the largest scale bytes, one per row among small codes, so a row's one
     * overflowing element (inf on the panel route) is not hidden by another's 0 * inf */
    const int64_t NO = 16 * 64;
    uint8_t *dov = malloc((size_t)(NO * 32)), *sov = malloc((size_t)NO);
    for (int64_t r = 0; r < NO; r++) {
        const uint8_t c = (uint8_t)(0x60 + (r % 32) + (r % 64 >= 32 ? 0x80 : 0)); /* exponent 12..15, both signs */
        memset(dov + r * 32, 0x38, 32);                                           /* 1.0 */
        dov[r * 32 + r % 32] = (c & 0x7f) == 0x7f ? 0x38 : c;
        sov[r] = (uint8_t)(239 + r / 64);
    }
    struct hy_tensor ov = {
        .dtype = HY_DTYPE_F8_E4M3, .rows = NO, .cols = 32, .data = dov, .qscheme = HY_QS_MX32, .mx_scales = sov};
    check_one_hot(&ov, "mxfp8 large codes x scale bytes 239..254");
    free(dov);
    free(sov);
    /* the byte tables' MX range ends: 4-row groups (a group takes one decoder) of every finite code under
     * scale bytes 10, 11, 244, 245, 246, K = 256 (64-code steps); nan_free */
    static const uint8_t edge_s[] = {10, 11, 244, 245, 246};
    const int64_t NE = 4 * 5;
    uint8_t *de = malloc((size_t)(NE * K8)), *se = malloc((size_t)(NE * K8 / 32));
    for (int64_t r = 0; r < NE; r++) {
        for (int64_t k = 0; k < K8; k++) {
            const uint8_t c = (uint8_t)(k + 37 * r);
            de[r * K8 + k] = (c & 0x7f) == 0x7f ? (uint8_t)(c - 1) : c;
        }
        memset(se + r * (K8 / 32), edge_s[r / 4], K8 / 32);
    }
    struct hy_tensor edge = {.dtype = HY_DTYPE_F8_E4M3,
                             .rows = NE,
                             .cols = K8,
                             .data = de,
                             .qscheme = HY_QS_MX32,
                             .mx_scales = se,
                             .nan_free = 1};
    check_one_hot(&edge, "mxfp8 every finite code x scale bytes 10, 11, 244..246, nan_free");
    free(de);
    free(se);
    struct hy_tensor fp8 = {
        .dtype = HY_DTYPE_F8_E4M3, .rows = N8, .cols = K8, .data = d8, .qscheme = HY_QS_PER_TENSOR, .scale = 0.3712f};
    check_one_hot(&fp8, "fp8 per-tensor every code");
    fp8.qscheme = HY_QS_NONE;
    fp8.scale = 1.0f;
    check_one_hot(&fp8, "fp8 unscaled every code");
    /* rows 0..255 hold no NaN code: marked nan_free they take the AVX512_VBMI byte tables where the
     * level has them (the emulation does) */
    struct hy_tensor fp8nf = {.dtype = HY_DTYPE_F8_E4M3,
                              .rows = 256,
                              .cols = K8,
                              .data = d8,
                              .qscheme = HY_QS_PER_TENSOR,
                              .scale = 0.3712f,
                              .nan_free = 1};
    check_one_hot(&fp8nf, "fp8 per-tensor every finite code, nan_free");
    fp8nf.qscheme = HY_QS_NONE;
    fp8nf.scale = 1.0f;
    check_one_hot(&fp8nf, "fp8 unscaled every finite code, nan_free");
    /* E2M1: row r holds the 16 codes twice per 32 elements (rotated by r), scale byte r; K = 64 */
    const int64_t K4 = 64, N4 = 256;
    uint8_t *d4 = malloc((size_t)(N4 * K4 / 2)), *s4 = malloc((size_t)(N4 * K4 / 32));
    for (int64_t r = 0; r < N4; r++) {
        for (int64_t j = 0; j < K4 / 2; j++)
            d4[r * K4 / 2 + j] = (uint8_t)(((2 * j + r) & 15) | (((2 * j + 1 + 3 * r) & 15) << 4));
        memset(s4 + r * (K4 / 32), (int)r, K4 / 32);
    }
    struct hy_tensor mx4 = {
        .dtype = HY_DTYPE_F4_E2M1, .rows = N4, .cols = K4, .data = d4, .qscheme = HY_QS_MX32, .mx_scales = s4};
    check_one_hot(&mx4, "mxfp4 every code x every scale byte");
    struct hy_tensor fp4 = {
        .dtype = HY_DTYPE_F4_E2M1, .rows = 16, .cols = K4, .data = d4, .qscheme = HY_QS_PER_TENSOR, .scale = 1.75f};
    check_one_hot(&fp4, "fp4 per-tensor every code");
    free(d8);
    free(s8);
    free(d4);
    free(s4);
}

/* x as bf16 (the conversion both paths share), through an identity weight: y[t, n] = bf16(x[t, n])
 * for every x the rounding keeps normal or infinite (round to nearest even, ties included), NaN for
 * NaN; T = 1 (decode) and T = 40 (panel). Levels whose matmul_bf16x is their f32 matmul take x as it
 * is (only the T = 1 vs T = 40 equality applies there). */
static void test_x_rounding(void **state)
{
    (void)state;
    const int64_t K = 84, TT = 40; /* K % 16 != 0: the vector conversion's scalar tail too */
    uint16_t *d = calloc((size_t)(K * K), 2);
    for (int64_t n = 0; n < K; n++)
        d[n * K + n] = 0x3f80; /* 1.0 */
    const struct hy_tensor W = {.dtype = HY_DTYPE_BF16, .rows = K, .cols = K, .data = d};
    float *x = malloc((size_t)(TT * K) * 4), *y = malloc((size_t)(TT * K) * 4), *y1 = malloc((size_t)(TT * K) * 4);
    static const uint32_t special[] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7f800000u, 0xff800000u,
                                       0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0xff7f8000u,
                                       0x00800000u, 0x80000000u, 0x00000001u, 0x3f7fffffu};
    for (int64_t i = 0; i < TT * K; i++) {
        uint32_t u = kt_rnd_u32();
        if (i < (int64_t)(sizeof(special) / sizeof(special[0])))
            u = special[i];
        else if (i % 5 == 0)
            u = (u & 0xffff0000u) | 0x8000u; /* exactly halfway between two bf16 values */
        memcpy(&x[i], &u, 4);
    }
    for (int l = 0; l < n_levels; l++) {
        levels[l].matmul_bf16x(y, x, TT, &W);
        for (int64_t t = 0; t < TT; t++)
            levels[l].matmul_bf16x(y1 + t * K, x + t * K, 1, &W);
        expect_same_level(y1, y, TT * K, "identity weight: T = 1 vs T = 40", &levels[l]);
        if (levels[l].matmul_bf16x == levels[l].matmul)
            continue; /* the f32 chain: x enters unrounded */
        for (int64_t i = 0; i < TT * K; i++) {
            const float want = hy_round_bf16(x[i]);
            if (!isnan(want) && fabsf(want) < 0x1p-126f)
                continue;      /* zero or subnormal after rounding: the dot product's flush decides */
            int other_nan = 0; /* a NaN or infinity elsewhere in the row poisons the sum (0 * inf) */
            for (int64_t k = 0; k < K; k++)
                other_nan |= k != i % K && !isfinite(x[i - i % K + k]);
            if (!other_nan && !(y[i] == want || (isnan(y[i]) && isnan(want)))) {
                print_error("[%s] x = %a: %a, expected %a\n", levels[l].name, x[i], y[i], want);
                fail();
            }
        }
    }
    free(d);
    free(x);
    free(y);
    free(y1);
}

/* fp8-nf: per-tensor FP8 marked nan_free (as the loader marks NaN-free E4M3 tensors): the byte-table
 * decoder on levels with AVX512_VBMI; fp8: not marked, the decoder that tests for NaN codes */
enum { W_BF16 = KT_QCOUNT, W_FP8NF, W_COUNT };
static const char *const wname[W_COUNT] = {"fp8", "mxfp8", "mxfp4", "bf16", "fp8-nf"};

static struct hy_tensor make_w(int f, int64_t N, int64_t K)
{
    if (f == W_FP8NF) {
        struct hy_tensor W = kt_make_q(KT_FP8, N, K);
        W.nan_free = 1;
        return W;
    }
    return f == W_BF16 ? make_bf16(N, K) : kt_make_q((enum kt_qfmt)f, N, K);
}

/* The vdpbf16ps levels' decode of nan_free per-tensor FP8 and MXFP8: the AVX512_VBMI byte tables and the
 * exponent rebase give the same bits (K with odd chunk counts and K % 32 tails, T = 1..5, 31, row bands;
 * MXFP8 scale bytes at the tables' range ends 10 and 246 and below it, 7..9). Runs on the real avx512
 * level where the CPU has AVX512_BF16 and AVX512_VBMI, and on the emulated one. */
static void test_vbmi_same_bits(void **state)
{
    (void)state;
    int ran = 0;
    for (int l = 0; l < n_levels; l++) {
        const struct hy_kernel_table *kt = &levels[l];
        int (*set)(int) = NULL;
        if (!strcmp(kt->name, "avx512-emu"))
            set = emu512_bf16x_set_vbmi;
        else if (kt->isa == HY_ISA_AVX512 && hy_cpu_caps()->avx512bf16 && hy_cpu_caps()->avx512vbmi)
            set = hy_avx512bf16_set_vbmi;
        if (!set)
            continue;
        ran = 1;
        static const int64_t Ks[] = {32, 64, 96, 200, 20, 1056, 100, 40}; /* 100: steps + odd chunk + tail */
        static const int64_t Ts[] = {1, 2, 3, 4, 5, 31};
        const int64_t N = 23;
        const size_t nk = sizeof(Ks) / sizeof(Ks[0]);
        for (size_t ki = 0; ki < 2 * nk; ki++) {
            const int64_t K = Ks[ki % nk];
            const int mx = ki >= nk;
            struct hy_tensor W = make_w(mx ? KT_MXFP8 : W_FP8NF, N, K);
            if (mx) {
                static const uint8_t edge[] = {7, 8, 9, 10, 246};
                for (int e = 0; e < 5; e++) /* rows 2, 7, 12, 17, 22: one chunk each */
                    ((uint8_t *)W.mx_scales)[(2 + 5 * e) * ((K + 31) / 32) + (e % ((K + 31) / 32))] = edge[e];
                W.nan_free = 1;
            }
            float *x = malloc((size_t)(31 * K) * 4), *yv = malloc((size_t)(31 * N) * 4),
                  *yr = malloc((size_t)(31 * N) * 4);
            bf16_fill(x, 31 * K);
            char what[96];
            for (size_t ti = 0; ti < sizeof(Ts) / sizeof(Ts[0]); ti++) {
                const int64_t T = Ts[ti];
                assert_int_equal(set(1), 1); /* on by default */
                kt->matmul_bf16x(yv, x, T, &W);
                set(0);
                kt->matmul_bf16x(yr, x, T, &W);
                snprintf(what, sizeof(what), "%s K=%lld T=%lld: byte tables vs exponent rebase",
                         mx ? "mxfp8-nf" : "fp8-nf", (long long)K, (long long)T);
                expect_same_level(yv, yr, T * N, what, kt);
                for (int64_t n0 = 0; n0 < N; n0 += 5)
                    kt->matmul_rows_bf16x(yr + n0, N, x, T, &W, n0, n0 + 5 < N ? n0 + 5 : N);
                set(1);
                snprintf(what, sizeof(what), "%s K=%lld T=%lld: rows_bf16x (rebase) vs matmul_bf16x",
                         mx ? "mxfp8-nf" : "fp8-nf", (long long)K, (long long)T);
                expect_same_level(yr, yv, T * N, what, kt);
            }
            free(x);
            free(yv);
            free(yr);
            free_w(&W);
        }
    }
    if (!ran)
        skip();
}

static void test_t_invariance_and_rows(void **state)
{
    (void)state;
    static const int64_t Ks[] = {96, 78, 608, 600, 20, 4096};
    const int64_t TT = 40, N = 37;
    for (size_t ki = 0; ki < sizeof(Ks) / sizeof(Ks[0]); ki++)
        for (int f = 0; f < W_COUNT; f++) {
            const int64_t K = Ks[ki];
            struct hy_tensor W = make_w(f, N, K);
            float *x = malloc((size_t)(TT * K) * 4), *y = malloc((size_t)(TT * N) * 4),
                  *ys = malloc((size_t)(TT * N) * 4);
            bf16_fill(x, TT * K);
            char what[96];
            snprintf(what, sizeof(what), "%s K=%lld", wname[f], (long long)K);
            check_panel(&W, what);
            for (int l = 0; l < n_levels; l++) {
                const struct hy_kernel_table *kt = &levels[l];
                const int amx = kt->isa == HY_ISA_AMX; /* AMX tiles from 32 tokens: the reference in 8-token calls */
                if (amx)
                    for (int64_t t0 = 0; t0 < TT; t0 += 8)
                        kt->matmul_bf16x(y + t0 * N, x + t0 * K, 8, &W);
                else
                    kt->matmul_bf16x(y, x, TT, &W);
                static const int64_t sub[] = {1, 2, 3, 5, 33};
                for (int si = 0; si < 5 - amx; si++)
                    for (int64_t t0 = 0; t0 + sub[si] <= TT; t0 += sub[si]) {
                        kt->matmul_bf16x(ys, x + t0 * K, sub[si], &W);
                        snprintf(what, sizeof(what), "%s K=%lld: rows %lld..+%lld (T=%lld) vs T=40", wname[f],
                                 (long long)K, (long long)t0, (long long)sub[si], (long long)sub[si]);
                        expect_same_level(ys, y + t0 * N, sub[si] * N, what, kt);
                    }
                static const int64_t bands[] = {1, 3, 4, 5, 64};
                static const int64_t Ts[] = {1, 3, 40};
                for (size_t bi = 0; bi < 5; bi++)
                    for (size_t ti = 0; ti < 3; ti++) {
                        const int64_t T = Ts[ti];
                        memset(ys, 0xff, (size_t)(T * N) * 4);
                        for (int64_t n0 = 0; n0 < N; n0 += bands[bi])
                            kt->matmul_rows_bf16x(ys + n0, N, x, T, &W, n0, n0 + bands[bi] < N ? n0 + bands[bi] : N);
                        snprintf(what, sizeof(what), "%s K=%lld T=%lld: rows_bf16x in bands of %lld vs matmul_bf16x",
                                 wname[f], (long long)K, (long long)T, (long long)bands[bi]);
                        expect_same_level(ys, y, T * N, what, kt);
                    }
            }
            free(x);
            free(y);
            free(ys);
            free_w(&W);
        }
}

/* The prefill tiles' blocking: T = 130 (token blocks of 63 with a short last one, token groups of 3
 * with remainders), N = 37 (weight blocks of 16 and a short one, row groups of 8 with remainders) and
 * K whose chains span several 64-chunk K blocks, so accumulators are stored and reloaded between blocks
 * (K = 4200: BF16's two chains of 65 and 67 chunks; the quantized formats' one chain of 132): rows
 * equal the decode path's (T = 1 calls) and those of calls of 65 and 7 tokens, bitwise. */
static void test_prefill_blocks(void **state)
{
    (void)state;
    static const int64_t Ks[] = {4200, 2080};
    const int64_t TT = 130, N = 37;
    for (size_t ki = 0; ki < sizeof(Ks) / sizeof(Ks[0]); ki++)
        for (int f = 0; f < W_COUNT; f++) {
            const int64_t K = Ks[ki];
            struct hy_tensor W = make_w(f, N, K);
            float *x = malloc((size_t)(TT * K) * 4), *y = malloc((size_t)(TT * N) * 4),
                  *ys = malloc((size_t)(TT * N) * 4);
            bf16_fill(x, TT * K);
            char what[96];
            for (int l = 0; l < n_levels; l++) {
                const struct hy_kernel_table *kt = &levels[l];
                if (kt->isa == HY_ISA_AMX) /* AMX tiles from 32 tokens: another order, checked in test_kernels_amx */
                    continue;
                kt->matmul_bf16x(y, x, TT, &W);
                static const int64_t sub[] = {1, 7, 65};
                for (int si = 0; si < 3; si++)
                    for (int64_t t0 = 0; t0 + sub[si] <= TT; t0 += sub[si]) {
                        kt->matmul_bf16x(ys, x + t0 * K, sub[si], &W);
                        snprintf(what, sizeof(what), "%s K=%lld: rows %lld..+%lld (T=%lld) vs T=130", wname[f],
                                 (long long)K, (long long)t0, (long long)sub[si], (long long)sub[si]);
                        expect_same_level(ys, y + t0 * N, sub[si] * N, what, kt);
                    }
            }
            free(x);
            free(y);
            free(ys);
            free_w(&W);
        }
}

static void test_threads(void **state)
{
    (void)state;
    const int64_t N = 300, K = 1056;
    for (int f = 0; f < W_COUNT; f++) {
        struct hy_tensor W = make_w(f, N, K);
        float *x = malloc((size_t)(40 * K) * 4), *y1 = malloc((size_t)(40 * N) * 4), *y2 = malloc((size_t)(40 * N) * 4);
        bf16_fill(x, 40 * K);
        static const int64_t Ts[] = {1, 4, 40};
        for (int l = 0; l < n_levels; l++)
            for (int ti = 0; ti < 3; ti++) {
                omp_set_num_threads(1);
                levels[l].matmul_bf16x(y1, x, Ts[ti], &W);
                omp_set_num_threads(2);
                levels[l].matmul_bf16x(y2, x, Ts[ti], &W);
                expect_same_level(y2, y1, Ts[ti] * N, wname[f], &levels[l]);
            }
        free(x);
        free(y1);
        free(y2);
        free_w(&W);
    }
}

static void test_nan_codes(void **state)
{
    (void)state;
    const int64_t N = 9, K = 160;
    for (int mx = 0; mx < 2; mx++) {
        struct hy_tensor W = kt_make_q(mx ? KT_MXFP8 : KT_FP8, N, K);
        uint8_t *d = (uint8_t *)W.data;
        for (int64_t i = 0; i < N * K; i++) /* no NaN codes yet (the quantizer saturates) */
            assert_true((d[i] & 0x7f) != 0x7f);
        float *x = malloc((size_t)(40 * K) * 4), *y0 = malloc((size_t)(40 * N) * 4), *y1 = malloc((size_t)(40 * N) * 4);
        bf16_fill(x, 40 * K);
        for (int l = 0; l < n_levels; l++) {
            W.nan_free = 0;
            levels[l].matmul_bf16x(y0, x, 1, &W);
            W.nan_free = 1;
            levels[l].matmul_bf16x(y1, x, 1, &W);
            expect_same_level(y1, y0, N, "nan_free marking", &levels[l]);
        }
        W.nan_free = 0;
        d[2 * K + 77] = 0xff; /* row 2 */
        d[6 * K + 3] = 0x7f;  /* row 6 */
        for (int l = 0; l < n_levels; l++)
            for (int64_t T = 1; T <= 40; T += 39) {
                levels[l].matmul_bf16x(y0, x, T, &W);
                for (int64_t t = 0; t < T; t++)
                    for (int64_t n = 0; n < N; n++)
                        if ((n == 2 || n == 6) != (isnan(y0[t * N + n]) != 0)) {
                            print_error("[%s] %s NaN codes T=%lld: row %lld token %lld gives %a\n", levels[l].name,
                                        mx ? "mxfp8" : "fp8", (long long)T, (long long)n, (long long)t, y0[t * N + n]);
                            fail();
                        }
            }
        free(x);
        free(y0);
        free(y1);
        kt_free_q(&W);
    }
}

/* Which route ran: NaN-free tensors whose MXFP8 scale bytes lie in the decode tiles' range never take
 * the panel route in decode-sized calls; an out-of-range scale byte or a NaN code does (levels with the
 * AVX512-BF16 path only: the real one, or the emulated one without AVX-512). */
static void test_routes(void **state)
{
    (void)state;
    unsigned long (*routes)(void) = NULL;
    const struct hy_kernel_table *kt = NULL;
    for (int l = 0; l < n_levels; l++) {
        if (!strcmp(levels[l].name, "avx512-emu")) {
            routes = emu512_bf16x_panel_routes;
            kt = &levels[l];
        } else if (levels[l].isa == HY_ISA_AVX512 && hy_cpu_caps()->avx512bf16) {
            routes = hy_avx512bf16_panel_routes;
            kt = &levels[l];
        }
    }
    if (!routes) {
        skip();
        return;
    }
    const int64_t N = 21, K = 200;
    float *x = malloc((size_t)(3 * K) * 4), *y = malloc((size_t)(3 * N) * 4);
    bf16_fill(x, 3 * K);
    for (int f = 0; f < W_COUNT; f++) {
        struct hy_tensor W = make_w(f, N, K);
        if (f == KT_FP8 || f == KT_MXFP8)
            W.nan_free = 1;
        const unsigned long r0 = routes();
        for (int64_t T = 1; T <= 3; T++)
            kt->matmul_bf16x(y, x, T, &W);
        kt->matmul_rows_bf16x(y, N, x, 3, &W, 2, 19);
        if (routes() != r0) {
            print_error("[%s] %s: %lu panel routes for in-range, NaN-free weights\n", kt->name, wname[f],
                        routes() - r0);
            fail();
        }
        if (f == KT_MXFP8) { /* one out-of-range scale byte (row 9): its group, and only it, by the panel */
            ((uint8_t *)W.mx_scales)[9 * ((K + 31) / 32) + 2] = 250;
            const unsigned long r1 = routes();
            kt->matmul_bf16x(y, x, 1, &W);
            assert_int_equal(routes() - r1, 1);
        }
        if (f == KT_FP8) { /* a NaN code in a tensor not marked NaN-free */
            W.nan_free = 0;
            ((uint8_t *)W.data)[5 * K + 7] = 0x7f;
            const unsigned long r1 = routes();
            kt->matmul_bf16x(y, x, 1, &W);
            assert_int_equal(routes() - r1, 1);
        }
        free_w(&W);
    }
    free(x);
    free(y);
}

/* The E2M1 order (hy_avx512bf16_set_e2m1_order) on and off, MXFP4 and unscaled FP4 weights, K with
 * full 64-element groups, an odd last chunk, K % 32 tails and K < 32: each setting is T-invariant (T = 1
 * calls vs one T = 40 call through the panels) and band-invariant (rows_bf16x in bands of 5 vs
 * matmul_bf16x); the two settings differ by rounding order only (|a - b| <= 2^-12 sum |x w|: a wrong
 * permutation of x, weights or panels is off by whole terms). */
static void test_e2m1_orders(void **state)
{
    (void)state;
    int ran = 0;
    for (int l = 0; l < n_levels; l++) {
        const struct hy_kernel_table *kt = &levels[l];
        int (*set)(int) = NULL;
        if (!strcmp(kt->name, "avx512-emu"))
            set = emu512_bf16x_set_e2m1_order;
        else if (kt->isa == HY_ISA_AVX512 && hy_cpu_caps()->avx512bf16)
            set = hy_avx512bf16_set_e2m1_order;
        if (!set)
            continue;
        ran = 1;
        static const int64_t Ks[] = {64, 96, 100, 1056, 20, 200, 4096};
        const int64_t N = 13, TT = 40;
        for (size_t ki = 0; ki < sizeof(Ks) / sizeof(Ks[0]); ki++)
            for (int unscaled = 0; unscaled < 2; unscaled++) {
                const int64_t K = Ks[ki];
                struct hy_tensor W = make_w(KT_MXFP4, N, K), V = W;
                if (unscaled) { /* the same codes as FP4 without scales */
                    V.qscheme = HY_QS_NONE;
                    V.mx_scales = NULL;
                }
                float *x = malloc((size_t)(TT * K) * 4), *y[2], *ys = malloc((size_t)(TT * N) * 4);
                y[0] = malloc((size_t)(TT * N) * 4);
                y[1] = malloc((size_t)(TT * N) * 4);
                bf16_fill(x, TT * K);
                char what[96];
                for (int on = 0; on < 2; on++) {
                    set(on);
                    kt->matmul_bf16x(y[on], x, TT, &V);
                    for (int64_t t = 0; t < TT; t++)
                        kt->matmul_bf16x(ys + t * N, x + t * K, 1, &V);
                    snprintf(what, sizeof(what), "%s K=%lld order %d: T = 1 vs T = 40", unscaled ? "fp4" : "mxfp4",
                             (long long)K, on);
                    expect_same_level(ys, y[on], TT * N, what, kt);
                    for (int64_t n0 = 0; n0 < N; n0 += 5)
                        kt->matmul_rows_bf16x(ys + n0, N, x, 3, &V, n0, n0 + 5 < N ? n0 + 5 : N);
                    snprintf(what, sizeof(what), "%s K=%lld order %d: bands vs matmul_bf16x, T = 3",
                             unscaled ? "fp4" : "mxfp4", (long long)K, on);
                    expect_same_level(ys, y[on], 3 * N, what, kt);
                }
                assert_int_equal(set(1), 1);
                for (int64_t t = 0; t < TT; t++)
                    for (int64_t n = 0; n < N; n++) {
                        double mag = 0;
                        for (int64_t k = 0; k < K; k++)
                            mag += fabs((double)x[t * K + k] * hy_tensor_get(&V, n, k));
                        const double d = fabs((double)y[0][t * N + n] - y[1][t * N + n]);
                        if (!(d <= 0x1p-12 * mag)) {
                            print_error("[%s] %s K=%lld: token %lld row %lld: orders give %a and %a (sum |x w| %g)\n",
                                        kt->name, unscaled ? "fp4" : "mxfp4", (long long)K, (long long)t, (long long)n,
                                        y[0][t * N + n], y[1][t * N + n], mag);
                            fail();
                        }
                    }
                free(x);
                free(ys);
                free(y[0]);
                free(y[1]);
                free_w(&W);
            }
    }
    if (!ran)
        skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_code_and_scale),
        cmocka_unit_test(test_x_rounding),
        cmocka_unit_test(test_t_invariance_and_rows),
        cmocka_unit_test(test_prefill_blocks),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_nan_codes),
        cmocka_unit_test(test_routes),
        cmocka_unit_test(test_vbmi_same_bits),
        cmocka_unit_test(test_e2m1_orders),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
