/* test_attend_multi.c - hy_attend_multi (n_q consecutive query tokens in one call) must be
 * bitwise identical to n_q single-token hy_attend calls, for f32 / bf16 / fp8 caches, GQA
 * groups of 1..12 heads, contexts that start and end inside and on the 32-position tile grid. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "kernels/kernel_table.h"
#include "unit/kv_test_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float rnd_f(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

typedef void (*single_fn)(const struct hy_kv_view *, const float *, int32_t, const int32_t *, int32_t, float *,
                          float *);
typedef void (*multi_fn)(const struct hy_kv_view *, const float *, int32_t, int32_t, const int32_t *, int32_t, float *,
                         float *);

static void check(single_fn one, multi_fn many)
{
    static const int32_t cfg[][3] = {/* n_kv_heads, group, head_dim */
                                     {2, 8, 128},
                                     {1, 3, 64},
                                     {2, 12, 16},
                                     {1, 5, 8},
                                     {3, 1, 24}};
    static const int32_t ctx0s[] = {1, 2, 29, 31, 32, 33, 63, 70};
    static const int32_t nqs[] = {1, 2, 3, 4, 5, 9};
    static const enum hy_dtype dts[] = {HY_DTYPE_F32, HY_DTYPE_BF16, HY_DTYPE_F8_E4M3};
    for (size_t di = 0; di < 3; di++)
        for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
            const int32_t nkv = cfg[c][0], nh = nkv * cfg[c][1], D = cfg[c][2], bs = 16, max_ctx = 80;
            const int32_t nblk = max_ctx / bs + 1;
            struct hy_kv_cache kv;
            assert_int_equal(hy_kv_cache_init(&kv, 2, nkv, D, bs, nblk, dts[di]), 0);
            int32_t table[16];
            for (int32_t i = 0; i < nblk; i++)
                table[i] = nblk - 1 - i;
            float *k = malloc((size_t)nkv * D * 4), *v = malloc((size_t)nkv * D * 4);
            for (int32_t j = 0; j < max_ctx; j++) {
                for (int32_t i = 0; i < nkv * D; i++) {
                    k[i] = rnd_f() * 2.0f;
                    v[i] = rnd_f();
                }
                kv_write(&kv, 1, (int64_t)table[j / bs] * bs + j % bs, k, v);
            }
            const int64_t qs = (int64_t)nh * D;
            float *q = malloc((size_t)(10 * qs) * 4), *o1 = malloc((size_t)(10 * qs) * 4),
                  *o2 = malloc((size_t)(10 * qs) * 4), *sc = malloc((size_t)max_ctx * 4);
            for (int64_t i = 0; i < 10 * qs; i++)
                q[i] = rnd_f() * 3.0f;
            for (size_t a = 0; a < sizeof(ctx0s) / sizeof(ctx0s[0]); a++)
                for (size_t b = 0; b < sizeof(nqs) / sizeof(nqs[0]); b++) {
                    const int32_t c0 = ctx0s[a], nq = nqs[b];
                    if (c0 + nq - 1 > max_ctx)
                        continue;
                    for (int32_t i = 0; i < nq; i++)
                        one(KV_VIEW(&kv, 1), q + i * qs, nh, table, c0 + i, sc, o1 + i * qs);
                    memset(o2, 0xff, (size_t)(nq * qs) * 4);
                    many(KV_VIEW(&kv, 1), q, nq, nh, table, c0, sc, o2);
                    if (memcmp(o1, o2, (size_t)(nq * qs) * 4) != 0)
                        fail_msg("attend_multi differs: dtype %d kv=%d heads=%d D=%d n_ctx0=%d n_q=%d", (int)dts[di],
                                 nkv, nh, D, c0, nq);
                }
            free(k);
            free(v);
            free(q);
            free(o1);
            free(o2);
            free(sc);
            hy_kv_cache_free(&kv);
        }
}

/* the public entry point with the active kernel table */
static void test_active(void **state)
{
    (void)state;
    check(hy_attend, hy_attend_multi);
}

#if defined(__x86_64__)
/* the avx2 kernel directly (whatever level is active), when the CPU has it */
static void test_avx2(void **state)
{
    (void)state;
    struct hy_kernel_table t;
    if (hy_kernels_table_for(HY_ISA_AVX2, &t) != 0)
        skip();
    check(hy_avx2_attend, hy_avx2_attend_multi);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_active),
#if defined(__x86_64__)
        cmocka_unit_test(test_avx2),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
