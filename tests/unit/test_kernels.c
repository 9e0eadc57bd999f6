/* test_kernels.c - every kernel of every ISA level this CPU + OS supports, against the scalar ref
 * table (ggml test-backend-ops style), on random shapes including ragged ones; plus the reduction
 * order contract of kernel_table.h: bitwise T-invariance (a row computed alone equals the same row
 * inside a bigger batch, GEMV vs GEMM path) and bitwise thread-count invariance (1 vs 2 threads).
 *
 * Without AVX-512 the avx512 level is tested on SIMDe's emulated intrinsics (avx512_emu.h, "avx512-emu").
 *
 * Error bounds (normalized MSE, nmse = sum((a-b)^2) / sum(b^2), b = ref):
 *  - matmul / dot / rmsnorm / attention: 1e-10. Both sides compute in fp32 from identical (exactly
 *    widened) inputs and differ only in rounding (FMA vs separate multiply+add, exp polynomial vs
 *    expf, online vs three-pass softmax); each output's relative error is O(sqrt(K) * 2^-24) for the
 *    random, non-cancelling data used here (K <= 1100 -> about 1e-12 in nmse), so 1e-10 leaves two
 *    orders of margin while any indexing/tail/accumulation bug gives nmse >= 1e-6.
 *  - silu_mul: 1e-10 (vector exp ~2 ulp vs expf).
 *  - rope and bf16 rounding: the same float operations in the same order as ref -> bitwise equal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/cpu.h"
#include "base/err.h"
#include "kernels/kernel_table.h"
#include "unit/kv_test_util.h"
#include "unit/avx512_emu.h"
#include "kernel_test_util.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMSE_MAX 1e-10

static struct hy_kernel_table ref;
static struct hy_kernel_table levels[HY_ISA_COUNT]; /* the supported non-ref levels */
static int n_levels;

#define ASSERT_NMSE(a, b, n, what, lvl)                                                                                \
    do {                                                                                                               \
        double e_ = kt_nmse(a, b, n);                                                                                  \
        if (!(e_ <= NMSE_MAX)) {                                                                                       \
            print_error("%s [%s]: nmse %.3g > %.3g\n", what, (lvl)->name, e_, NMSE_MAX);                               \
            fail();                                                                                                    \
        }                                                                                                              \
    } while (0)

/* A random weight matrix N x K of dtype dt (values of magnitude ~[2^-6, 2), some f16 subnormals). */
static struct hy_tensor make_weight(enum hy_dtype dt, int64_t N, int64_t K)
{
    struct hy_tensor W = {.dtype = dt, .rows = N, .cols = K};
    void *d = malloc((size_t)(N * K) * (dt == HY_DTYPE_F32 ? 4 : 2) + 1);
    for (int64_t i = 0; i < N * K; i++) {
        if (dt == HY_DTYPE_F32)
            ((float *)d)[i] = kt_rnd_f();
        else if (dt == HY_DTYPE_BF16)
            ((uint16_t *)d)[i] = hy_f32_to_bf16(kt_rnd_f());
        else {
            uint32_t r = kt_rnd_u32();
            uint16_t e = (r % 17 == 0) ? 0 : (uint16_t)(9 + r % 7); /* exponent 0: subnormal */
            ((uint16_t *)d)[i] = (uint16_t)(((r >> 8) & 1) << 15 | e << 10 | ((r >> 12) & 0x3ff));
        }
    }
    W.data = d;
    return W;
}

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

static void test_isa_names(void **state)
{
    (void)state;
    for (int i = 0; i < HY_ISA_COUNT; i++)
        assert_int_equal(hy_isa_parse(hy_isa_name((enum hy_isa)i)), i);
    assert_int_equal(hy_isa_parse("sse9"), -1);
    assert_true(hy_cpu_supports(HY_ISA_REF));
    /* levels are ordered: a supported level implies the lower ones */
    for (int i = HY_ISA_AVX2; i < HY_ISA_COUNT; i++)
        if (hy_cpu_supports((enum hy_isa)i))
            assert_true(hy_cpu_supports((enum hy_isa)(i - 1)));
    assert_true(hy_cpu_supports(hy_kernels_best_isa()));
    struct hy_kernel_table t;
    assert_int_equal(hy_kernels_table_for((enum hy_isa)HY_ISA_COUNT, &t), -1);
}

static const enum hy_dtype dtypes[3] = {HY_DTYPE_F32, HY_DTYPE_BF16, HY_DTYPE_F16};

static void test_matmul_vs_ref(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {
        /* T, N, K */
        {1, 1, 1},    {1, 7, 5},     {2, 13, 31},  {3, 17, 33},   {1, 5, 8},
        {4, 9, 16},   {17, 11, 100}, {5, 33, 257}, {1, 64, 512},  {2, 3, 1100},
        {20, 19, 64}, {6, 40, 129},  {50, 7, 700}, {97, 18, 300}, /* > 1 token block, k slice */
        {33, 35, 64}, {64, 32, 96},  {40, 70, 33}};               /* AMX: 32-row/token blocks */
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int d = 0; d < 3; d++) {
            const int64_t T = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            struct hy_tensor W = make_weight(dtypes[d], N, K);
            float *x = malloc((size_t)(T * K) * 4), *y0 = malloc((size_t)(T * N) * 4),
                  *y1 = malloc((size_t)(T * N) * 4);
            kt_fill(x, T * K);
            ref.matmul(y0, x, T, &W);
            for (int l = 0; l < n_levels; l++) {
                memset(y1, 0xff, (size_t)(T * N) * 4);
                levels[l].matmul(y1, x, T, &W);
                char what[96];
                snprintf(what, sizeof(what), "matmul %s T=%lld N=%lld K=%lld", hy_dtype_name(dtypes[d]), (long long)T,
                         (long long)N, (long long)K);
                ASSERT_NMSE(y1, y0, T * N, what, &levels[l]);
            }
            /* matmul_bf16x on bf16 inputs (AMX tiles at the amx level, vdpbf16ps on AVX512_BF16 CPUs; = matmul
             * elsewhere): same bound */
            for (int64_t i = 0; i < T * K; i++)
                x[i] = hy_round_bf16(x[i]);
            ref.matmul(y0, x, T, &W);
            for (int l = 0; l < n_levels; l++) {
                memset(y1, 0xff, (size_t)(T * N) * 4);
                levels[l].matmul_bf16x(y1, x, T, &W);
                char what[96];
                snprintf(what, sizeof(what), "matmul_bf16x %s T=%lld N=%lld K=%lld", hy_dtype_name(dtypes[d]),
                         (long long)T, (long long)N, (long long)K);
                ASSERT_NMSE(y1, y0, T * N, what, &levels[l]);
            }
            free(x);
            free(y0);
            free(y1);
            free((void *)W.data);
        }
}

/* Row t of a T-row matmul == the same row computed alone (T = 1, 2: decode path) and inside other
 * batches (T >= 3: prefill path); T = 53 spans two token blocks, K = 600 three k slices. */
static void check_t_invariance(const struct hy_kernel_table *k)
{
    const int64_t T = 53, N = 21;
    for (int kk = 0; kk < 2; kk++)
        for (int d = 0; d < 3; d++) {
            const int64_t K = kk ? 600 : 77;
            struct hy_tensor W = make_weight(dtypes[d], N, K);
            float *x = malloc((size_t)(T * K) * 4), *y = malloc((size_t)(T * N) * 4), *ys = malloc((size_t)(T * N) * 4);
            kt_fill(x, T * K);
            k->matmul(y, x, T, &W);
            static const int64_t sub[] = {1, 2, 3, 4, 5, 7, 49};
            for (size_t si = 0; si < sizeof(sub) / sizeof(sub[0]); si++)
                for (int64_t t0 = 0; t0 + sub[si] <= T; t0 += sub[si] + 1) {
                    k->matmul(ys, x + t0 * K, sub[si], &W);
                    if (memcmp(ys, y + t0 * N, (size_t)(sub[si] * N) * 4)) {
                        print_error("[%s] %s: rows %lld..+%lld differ from the T=%lld result\n", k->name,
                                    hy_dtype_name(dtypes[d]), (long long)t0, (long long)sub[si], (long long)T);
                        fail();
                    }
                }
            /* dot_f32 is the same chain as an F32 matmul row */
            if (dtypes[d] == HY_DTYPE_F32)
                for (int64_t n = 0; n < N; n++) {
                    float v = k->dot_f32(x + 2 * K, (const float *)W.data + n * K, K);
                    assert_memory_equal(&v, &y[2 * N + n], 4);
                }
            free(x);
            free(y);
            free(ys);
            free((void *)W.data);
        }
}

static void test_matmul_t_invariance(void **state)
{
    (void)state;
    check_t_invariance(&ref);
    for (int l = 0; l < n_levels; l++)
        check_t_invariance(&levels[l]);
}

static void check_threads(const struct hy_kernel_table *k)
{
    static const int64_t Ts[] = {1, 2, 9};
    const int64_t N = 203, K = 515; /* N*K*T > 65536: the threaded path */
    for (int d = 0; d < 3; d++)
        for (size_t ti = 0; ti < 3; ti++) {
            const int64_t T = Ts[ti];
            struct hy_tensor W = make_weight(dtypes[d], N, K);
            float *x = malloc((size_t)(T * K) * 4), *y1 = malloc((size_t)(T * N) * 4),
                  *y2 = malloc((size_t)(T * N) * 4);
            kt_fill(x, T * K);
            omp_set_num_threads(1);
            k->matmul(y1, x, T, &W);
            omp_set_num_threads(2);
            k->matmul(y2, x, T, &W);
            if (memcmp(y1, y2, (size_t)(T * N) * 4)) {
                print_error("[%s] matmul %s T=%lld: 1 vs 2 threads differ\n", k->name, hy_dtype_name(dtypes[d]),
                            (long long)T);
                fail();
            }
            free(x);
            free(y1);
            free(y2);
            free((void *)W.data);
        }
}

static void test_matmul_threads(void **state)
{
    (void)state;
    check_threads(&ref);
    for (int l = 0; l < n_levels; l++)
        check_threads(&levels[l]);
}

static void test_dot_rmsnorm(void **state)
{
    (void)state;
    static const int64_t ns[] = {1, 3, 8, 15, 16, 17, 64, 100, 1029};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        const int64_t n = ns[i], T = 3;
        float *a = malloc((size_t)(T * n) * 4), *b = malloc((size_t)n * 4), *w = malloc((size_t)n * 4),
              *y0 = malloc((size_t)(T * n) * 4), *y1 = malloc((size_t)(T * n) * 4);
        kt_fill(a, T * n);
        kt_fill(b, n);
        kt_fill(w, n);
        const float d0 = ref.dot_f32(a, b, n);
        ref.rmsnorm(y0, a, w, T, n, 1e-6f);
        for (int l = 0; l < n_levels; l++) {
            const float d1 = levels[l].dot_f32(a, b, n);
            ASSERT_NMSE(&d1, &d0, 1, "dot_f32", &levels[l]);
            levels[l].rmsnorm(y1, a, w, T, n, 1e-6f);
            ASSERT_NMSE(y1, y0, T * n, "rmsnorm", &levels[l]);
            memcpy(y1, a, (size_t)(T * n) * 4); /* in place (y aliases x) */
            levels[l].rmsnorm(y1, y1, w, T, n, 1e-6f);
            ASSERT_NMSE(y1, y0, T * n, "rmsnorm in place", &levels[l]);
        }
        free(a);
        free(b);
        free(w);
        free(y0);
        free(y1);
    }
}

static void test_rope(void **state)
{
    (void)state;
    static const int64_t dims[] = {2, 6, 16, 20, 64, 128};
    static const int32_t poss[] = {0, 1, 17, 4095, 131071};
    for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
        for (size_t pi = 0; pi < sizeof(poss) / sizeof(poss[0]); pi++)
            for (int il = 0; il < 2; il++) {
                const int64_t D = dims[di], H = 3;
                float inv[64], *x0 = malloc((size_t)(H * D) * 4), *x1 = malloc((size_t)(H * D) * 4),
                               *xr = malloc((size_t)(H * D) * 4);
                for (int64_t i = 0; i < D / 2; i++)
                    inv[i] = powf(11158840.0f, -2.0f * (float)i / (float)D);
                kt_fill(x0, H * D);
                memcpy(xr, x0, (size_t)(H * D) * 4);
                ref.rope(xr, H, D, poss[pi], inv, il);
                for (int l = 0; l < n_levels; l++) { /* every level starts from the same input x0 */
                    memcpy(x1, x0, (size_t)(H * D) * 4);
                    levels[l].rope(x1, H, D, poss[pi], inv, il);
                    if (memcmp(x1, xr, (size_t)(H * D) * 4)) {
                        print_error("[%s] rope D=%lld pos=%d interleaved=%d differs from ref\n", levels[l].name,
                                    (long long)D, poss[pi], il);
                        fail();
                    }
                }
                free(x0);
                free(x1);
                free(xr);
            }
}

static void test_silu_round(void **state)
{
    (void)state;
    static const int64_t ns[] = {1, 7, 8, 9, 33, 1000};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        const int64_t n = ns[i];
        float *g = malloc((size_t)n * 4), *u = malloc((size_t)n * 4), *o0 = malloc((size_t)n * 4),
              *o1 = malloc((size_t)n * 4);
        for (int64_t j = 0; j < n; j++)
            g[j] = kt_rnd_f() * (j % 5 == 0 ? 30.0f : 4.0f);
        kt_fill(u, n);
        ref.silu_mul(o0, g, u, n);
        for (int l = 0; l < n_levels; l++) {
            levels[l].silu_mul(o1, g, u, n);
            ASSERT_NMSE(o1, o0, n, "silu_mul", &levels[l]);
            memcpy(o1, g, (size_t)n * 4);
            levels[l].silu_mul(o1, o1, u, n); /* out aliases gate */
            ASSERT_NMSE(o1, o0, n, "silu_mul in place", &levels[l]);
        }
        /* bf16 rounding: bitwise, incl. ties, NaN, inf, subnormals */
        for (int64_t j = 0; j < n; j++) {
            uint32_t b = kt_rnd_u32() << 8 | (kt_rnd_u32() & 0xff);
            if (j % 7 == 1)
                b = (b & 0xffff0000u) | 0x8000u; /* exact tie */
            if (j % 11 == 2)
                b = 0x7f800000u | (b & 0x807fffffu); /* inf / NaN */
            memcpy(&o0[j], &b, 4);
        }
        memcpy(o1, o0, (size_t)n * 4);
        ref.round_bf16(o0, n);
        for (int l = 0; l < n_levels; l++) {
            float *o2 = malloc((size_t)n * 4);
            memcpy(o2, o1, (size_t)n * 4);
            levels[l].round_bf16(o2, n);
            assert_memory_equal(o2, o0, (size_t)n * 4);
            free(o2);
        }
        free(g);
        free(u);
        free(o0);
        free(o1);
    }
}

/* A cache with random K/V in a shuffled block table. */
static void make_cache(struct hy_kv_cache *kv, enum hy_dtype dt, int32_t nkv, int32_t D, int32_t n_ctx, int32_t *table)
{
    const int32_t bs = 4, nblk = (n_ctx + bs - 1) / bs + 2;
    assert_int_equal(hy_kv_cache_init(kv, 2, nkv, D, bs, nblk, dt), 0);
    for (int32_t i = 0; i < nblk; i++)
        table[i] = nblk - 1 - i; /* reversed: blocks are not contiguous in order */
    float *k = malloc((size_t)nkv * D * 4), *v = malloc((size_t)nkv * D * 4);
    for (int32_t j = 0; j < n_ctx; j++) {
        for (int32_t i = 0; i < nkv * D; i++) {
            k[i] = kt_rnd_f() * 2.0f;
            v[i] = kt_rnd_f();
        }
        kv_write(kv, 1, (int64_t)table[j / bs] * bs + j % bs, k, v);
    }
    free(k);
    free(v);
}

static void test_attention(void **state)
{
    (void)state;
    static const int32_t cfg[][3] = {/* n_kv_heads, group, head_dim */
                                     {2, 1, 8}, {2, 3, 64}, {1, 8, 128}, {2, 12, 16}, {3, 2, 12}, {1, 5, 256}};
    static const int32_t ctxs[] = {1, 5, 31, 32, 33, 100};
    for (int d = 0; d < 2; d++)
        for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++)
            for (size_t ci = 0; ci < sizeof(ctxs) / sizeof(ctxs[0]); ci++) {
                const enum hy_dtype dt = d ? HY_DTYPE_BF16 : HY_DTYPE_F32;
                const int32_t nkv = cfg[c][0], nh = nkv * cfg[c][1], D = cfg[c][2], n_ctx = ctxs[ci];
                struct hy_kv_cache kv;
                int32_t table[64];
                make_cache(&kv, dt, nkv, D, n_ctx, table);
                float *q = malloc((size_t)nh * D * 4), *o0 = malloc((size_t)nh * D * 4),
                      *o1 = malloc((size_t)nh * D * 4), *sc = malloc((size_t)n_ctx * 4);
                for (int32_t i = 0; i < nh * D; i++)
                    q[i] = kt_rnd_f() * 3.0f;
                ref.attend(KV_VIEW(&kv, 1), q, nh, table, n_ctx, sc, o0);
                for (int l = 0; l < n_levels; l++) {
                    levels[l].attend(KV_VIEW(&kv, 1), q, nh, table, n_ctx, sc, o1);
                    char what[96];
                    snprintf(what, sizeof(what), "attend %s kv=%d heads=%d D=%d n_ctx=%d", hy_dtype_name(dt), nkv, nh,
                             D, n_ctx);
                    ASSERT_NMSE(o1, o0, (int64_t)nh * D, what, &levels[l]);
                }
                free(q);
                free(o0);
                free(o1);
                free(sc);
                hy_kv_cache_free(&kv);
            }
}

static void test_attention_threads(void **state)
{
    (void)state;
    const int32_t nkv = 4, nh = 16, D = 64, n_ctx = 90; /* n_ctx*nh*D > 65536: threaded */
    struct hy_kv_cache kv;
    int32_t table[64];
    make_cache(&kv, HY_DTYPE_BF16, nkv, D, n_ctx, table);
    float *q = malloc((size_t)nh * D * 4), *o1 = malloc((size_t)nh * D * 4), *o2 = malloc((size_t)nh * D * 4),
          *sc = malloc((size_t)n_ctx * 4);
    kt_fill(q, nh * D);
    for (int l = -1; l < n_levels; l++) {
        const struct hy_kernel_table *k = l < 0 ? &ref : &levels[l];
        omp_set_num_threads(1);
        k->attend(KV_VIEW(&kv, 1), q, nh, table, n_ctx, sc, o1);
        omp_set_num_threads(2);
        k->attend(KV_VIEW(&kv, 1), q, nh, table, n_ctx, sc, o2);
        assert_memory_equal(o1, o2, (size_t)nh * D * 4);
    }
    free(q);
    free(o1);
    free(o2);
    free(sc);
    hy_kv_cache_free(&kv);
}

/* attn_pv (MLA's P.V over gathered latent rows) vs ref: row blocks with and without a remainder, widths
 * with 16- and 8-wide tails and below 8, n = 0 (zeros), strided out / P / C; each output row must not
 * depend on m (the same row computed alone is bitwise equal). */
static void test_attn_pv(void **state)
{
    (void)state;
    const int64_t ms[] = {1, 3, 4, 5, 9}, ws[] = {5, 16, 24, 33, 512}, ns[] = {0, 1, 7, 128, 300};
    for (size_t a = 0; a < sizeof(ms) / sizeof(ms[0]); a++)
        for (size_t b = 0; b < sizeof(ws) / sizeof(ws[0]); b++)
            for (size_t c = 0; c < sizeof(ns) / sizeof(ns[0]); c++) {
                const int64_t m = ms[a], w = ws[b], n = ns[c], ldo = w + 3, ldp = n + 2, ldc = w + 64;
                float *P = malloc((size_t)(m * ldp + 1) * 4), *C = malloc((size_t)(n * ldc + 1) * 4);
                float *o0 = malloc((size_t)(m * ldo) * 4), *o1 = malloc((size_t)(m * ldo) * 4);
                float *one = malloc((size_t)w * 4);
                kt_fill(P, m * ldp);
                kt_fill(C, n * ldc);
                for (int64_t i = 0; i < m * ldp; i++)
                    P[i] = fabsf(P[i]); /* softmax weights: non-negative, no cancellation */
                memset(o0, 0, (size_t)(m * ldo) * 4);
                memset(o1, 0, (size_t)(m * ldo) * 4);
                ref.attn_pv(o0, ldo, P, ldp, m, C, ldc, n, w);
                for (int64_t j = 0; j < m; j++)
                    for (int64_t d = 0; d < w; d++) {
                        double e = 0.0;
                        for (int64_t i = 0; i < n; i++)
                            e += (double)P[j * ldp + i] * (double)C[i * ldc + d];
                        assert_true(fabs(e - (double)o0[j * ldo + d]) <= 1e-5 * (1.0 + fabs(e)));
                    }
                for (int l = 0; l < n_levels; l++) {
                    levels[l].attn_pv(o1, ldo, P, ldp, m, C, ldc, n, w);
                    ASSERT_NMSE(o1, o0, m * ldo, "attn_pv", &levels[l]);
                    for (int64_t j = 0; j < m; j++) {
                        levels[l].attn_pv(one, w, P + j * ldp, ldp, 1, C, ldc, n, w);
                        assert_memory_equal(one, o1 + j * ldo, (size_t)w * 4);
                    }
                }
                free(P);
                free(C);
                free(o0);
                free(o1);
                free(one);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_names),           cmocka_unit_test(test_matmul_vs_ref),
        cmocka_unit_test(test_matmul_t_invariance), cmocka_unit_test(test_matmul_threads),
        cmocka_unit_test(test_dot_rmsnorm),         cmocka_unit_test(test_rope),
        cmocka_unit_test(test_silu_round),          cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_threads),   cmocka_unit_test(test_attn_pv),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
