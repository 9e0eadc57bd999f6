/* test_place.c - weight placement and the grouped MoE pass change where bytes live and how work is
 * split, never a result:
 *  - matmul_rows of every ISA level equals the level's matmul bit for bit on the requested rows
 *    (F32/BF16/F16 and the quantized MXFP8 / MXFP4 / per-tensor FP8 layouts, ragged K, any T);
 *  - a model loaded with --load-format copy lives in its arena (checkpoint unmapped, every weight
 *    pointer inside the arena) and gives bitwise the same logits as the mmapped one;
 *  - the grouped MoE/MLP pass gives bitwise the same logits as the per-expert path, fp32 and bf16,
 *    decode (T = 1) and small prefills, on hy3-golden-b from tests/data (MoE + dense + shared expert).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "kernels/kernel_table.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t rnd_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float rnd_f(void)
{
    return (float)((double)rnd_u32() / 4294967296.0 * 2.0 - 1.0);
}

static const char *golden_dir(void)
{
    static char path[1024];
    const char *root = getenv("HYINFER_ROOT"); /* unset: run from the repository root */
    snprintf(path, sizeof(path), "%s/tests/data/hy3-golden-llamacpp/hy3-golden-b", root && *root ? root : ".");
    return path;
}

/* A random weight matrix of the given layout; data/scales malloc'd into *buf / *sbuf. */
static struct hy_tensor rand_tensor(int kind, int64_t N, int64_t K, void **buf, uint8_t **sbuf)
{
    struct hy_tensor t = {.rows = N, .cols = K};
    *sbuf = NULL;
    switch (kind) {
    case 0: { /* F32 */
        float *d = malloc((size_t)(N * K) * sizeof(float));
        for (int64_t i = 0; i < N * K; i++)
            d[i] = rnd_f();
        t.dtype = HY_DTYPE_F32;
        *buf = d;
        break;
    }
    case 1:
    case 2: { /* BF16 / F16: random finite values */
        uint16_t *d = malloc((size_t)(N * K) * sizeof(uint16_t));
        for (int64_t i = 0; i < N * K; i++)
            d[i] = kind == 1 ? hy_f32_to_bf16(rnd_f()) : (uint16_t)((rnd_u32() & 0x83ff) | 0x3800);
        t.dtype = kind == 1 ? HY_DTYPE_BF16 : HY_DTYPE_F16;
        *buf = d;
        break;
    }
    default: { /* 3: MXFP8, 4: MXFP4, 5: per-tensor FP8 */
        const int fp4 = kind == 4;
        const int64_t rb = fp4 ? (K + 1) / 2 : K, nb = (K + HY_MX_BLOCK - 1) / HY_MX_BLOCK;
        uint8_t *d = malloc((size_t)(N * rb));
        for (int64_t i = 0; i < N * rb; i++) {
            uint8_t b = (uint8_t)rnd_u32();
            if (!fp4 && (b & 0x7f) == 0x7f) /* E4M3 NaN */
                b ^= 1;
            d[i] = b;
        }
        t.dtype = fp4 ? HY_DTYPE_F4_E2M1 : HY_DTYPE_F8_E4M3;
        *buf = d;
        if (kind == 5) {
            t.qscheme = HY_QS_PER_TENSOR;
            t.scale = 0.01f;
        } else {
            t.qscheme = HY_QS_MX32;
            *sbuf = malloc((size_t)(N * nb));
            for (int64_t i = 0; i < N * nb; i++)
                (*sbuf)[i] = (uint8_t)(120 + rnd_u32() % 10);
            t.mx_scales = *sbuf;
        }
        break;
    }
    }
    t.data = *buf;
    return t;
}

static void test_matmul_rows_equals_matmul(void **state)
{
    (void)state;
    static const int64_t Ns[] = {1, 5, 37}, Ks[] = {8, 13, 64, 100}, Ts[] = {1, 2, 3, 4, 7};
    int checked = 0;
    for (int isa = 0; isa < HY_ISA_COUNT; isa++) {
        struct hy_kernel_table kt;
        if (hy_kernels_table_for((enum hy_isa)isa, &kt))
            continue;
        assert_non_null(kt.matmul_rows);
        for (int kind = 0; kind < 6; kind++)
            for (size_t a = 0; a < 3; a++)
                for (size_t b = 0; b < 4; b++) {
                    const int64_t N = Ns[a], K = Ks[b];
                    if (kind == 4 && K % 2)
                        continue; /* MXFP4 rows hold whole bytes */
                    void *buf;
                    uint8_t *sbuf;
                    struct hy_tensor W = rand_tensor(kind, N, K, &buf, &sbuf);
                    for (size_t c = 0; c < 5; c++) {
                        const int64_t T = Ts[c];
                        float *x = malloc((size_t)(T * K) * sizeof(float)),
                              *full = malloc((size_t)(T * N) * sizeof(float));
                        for (int64_t i = 0; i < T * K; i++)
                            x[i] = rnd_f();
                        kt.matmul(full, x, T, &W);
                        for (int r = 0; r < 4; r++) {
                            int64_t n0 = (int64_t)(rnd_u32() % (uint32_t)N),
                                    n1 = n0 + 1 + (int64_t)(rnd_u32() % (uint32_t)(N - n0));
                            if (r == 0) {
                                n0 = 0;
                                n1 = N;
                            }
                            const int64_t ldy = n1 - n0 + 3;
                            float *y = malloc((size_t)(T * ldy) * sizeof(float));
                            for (int64_t i = 0; i < T * ldy; i++)
                                y[i] = -12345.0f;
                            kt.matmul_rows(y, ldy, x, T, &W, n0, n1);
                            for (int64_t t = 0; t < T; t++) {
                                for (int64_t n = n0; n < n1; n++)
                                    if (memcmp(&y[t * ldy + n - n0], &full[t * N + n], sizeof(float))) {
                                        fail_msg("%s kind %d N %lld K %lld T %lld rows [%lld,%lld): y[%lld,%lld] %.9g "
                                                 "!= %.9g",
                                                 kt.name, kind, (long long)N, (long long)K, (long long)T, (long long)n0,
                                                 (long long)n1, (long long)t, (long long)n, (double)y[t * ldy + n - n0],
                                                 (double)full[t * N + n]);
                                    }
                                for (int64_t i = n1 - n0; i < ldy; i++) /* nothing outside the range written */
                                    assert_true(y[t * ldy + i] == -12345.0f);
                            }
                            free(y);
                            checked++;
                        }
                        free(x);
                        free(full);
                    }
                    free(buf);
                    free(sbuf);
                }
    }
    assert_true(checked > 500);
}

/* Logits of every position of `ids` run as chunks of `chunk` tokens, fresh KV cache. */
static void run_logits(struct hy_model *m, const int32_t *ids, int32_t n, int32_t chunk, float *out)
{
    struct hy_kv_cache kv;
    assert_int_equal(hy_model_kv_cache_init(m, &kv, 16, 8), 0);
    int32_t table[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const int32_t *tables[1] = {table};
    for (int32_t p0 = 0; p0 < n; p0 += chunk) {
        const int32_t c = n - p0 < chunk ? n - p0 : chunk;
        int32_t pos[64], sid[64], rows[64];
        int64_t slot[64];
        for (int32_t j = 0; j < c; j++) {
            pos[j] = p0 + j;
            sid[j] = 0;
            rows[j] = j;
            slot[j] = p0 + j;
        }
        struct hy_batch b = {.n_tokens = c,
                             .token_ids = ids + p0,
                             .positions = pos,
                             .slot_mapping = slot,
                             .seq_ids = sid,
                             .block_tables = tables,
                             .n_logits = c,
                             .logits_rows = rows};
        assert_int_equal(hy_model_forward(m, &kv, &b, out + (int64_t)p0 * m->cfg.vocab_size, NULL), 0);
    }
    hy_kv_cache_free(&kv);
}

#define NTOK 40

static void fill_ids(int32_t *ids, int32_t V)
{
    for (int i = 0; i < NTOK; i++)
        ids[i] = (int32_t)(rnd_u32() % (uint32_t)V);
}

static int in_arena(const struct hy_model *m, const void *p)
{
    const char *a = m->arena;
    return (const char *)p >= a && (const char *)p < a + m->arena_size;
}

static void test_copy_equals_mmap(void **state)
{
    (void)state;
    struct hy_model *mm = NULL, *mc = NULL;
    struct hy_load_params lp;
    hy_load_params_default(&lp, HY_COMPUTE_F32);
    lp.format = HY_LOAD_MMAP;
    assert_int_equal(hy_model_load_ex(golden_dir(), &lp, &mm), 0);
    lp.format = HY_LOAD_COPY;
    assert_int_equal(hy_model_load_ex(golden_dir(), &lp, &mc), 0);
    assert_null(mm->arena);
    assert_int_equal(mm->place.format, HY_LOAD_MMAP);
    assert_non_null(mc->arena);
    assert_int_equal(mc->place.format, HY_LOAD_COPY);
    assert_true(mc->place.bytes > 0 && (uint64_t)mc->place.bytes <= mc->ck.total_bytes);
    for (size_t f = 0; f < mc->ck.n_files; f++)
        assert_null(mc->ck.files[f].map.data);
    assert_true(in_arena(mc, mc->embed.data) && in_arena(mc, mc->lm_head.data));
    for (int L = 0; L < mc->cfg.num_hidden_layers; L++) {
        const struct hy_layer *ly = &mc->layers[L];
        assert_true(in_arena(mc, ly->wq.data) && in_arena(mc, ly->wo.data));
        if (ly->is_moe) {
            for (int e = 0; e < mc->cfg.num_experts; e++)
                assert_true(in_arena(mc, ly->experts[e].gate.data) && in_arena(mc, ly->experts[e].down.data));
            assert_true(in_arena(mc, ly->shared.up.data));
            /* same bytes as the file */
            assert_memory_equal(ly->experts[1].up.data, mm->layers[L].experts[1].up.data,
                                (size_t)(ly->experts[1].up.rows * hy_tensor_row_bytes(&ly->experts[1].up)));
        } else {
            assert_true(in_arena(mc, ly->mlp.gate.data));
        }
    }
    const void *before = mc->embed.data;
    assert_int_equal(hy_model_place(mc, HY_LOAD_COPY), 0); /* second call: nothing moves */
    assert_ptr_equal(before, mc->embed.data);
    const int32_t V = mm->cfg.vocab_size;
    int32_t ids[NTOK];
    fill_ids(ids, V);
    float *a = malloc((size_t)NTOK * (size_t)V * sizeof(float)), *b = malloc((size_t)NTOK * (size_t)V * sizeof(float));
    run_logits(mm, ids, NTOK, 7, a);
    run_logits(mc, ids, NTOK, 7, b);
    assert_memory_equal(a, b, (size_t)NTOK * (size_t)V * sizeof(float));
    free(a);
    free(b);
    hy_model_free(mm);
    hy_model_free(mc);
}

static void grouped_vs_per_expert(enum hy_compute_dtype cd)
{
    struct hy_model *m = NULL;
    assert_int_equal(hy_model_load(golden_dir(), cd, &m), 0);
    const int32_t V = m->cfg.vocab_size;
    int32_t ids[NTOK];
    fill_ids(ids, V);
    float *a = malloc((size_t)NTOK * (size_t)V * sizeof(float)), *b = malloc((size_t)NTOK * (size_t)V * sizeof(float));
    static const int32_t chunks[] = {1, 3, 16, 40}; /* 40 > 32: the per-expert path in both runs */
    for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
        m->moe_per_expert = 0;
        run_logits(m, ids, NTOK, chunks[i], a);
        m->moe_per_expert = 1;
        run_logits(m, ids, NTOK, chunks[i], b);
        assert_memory_equal(a, b, (size_t)NTOK * (size_t)V * sizeof(float));
    }
    /* and across chunkings (fp32 batch invariance through both paths) */
    if (cd == HY_COMPUTE_F32) {
        m->moe_per_expert = 0;
        run_logits(m, ids, NTOK, 1, a);
        run_logits(m, ids, NTOK, 40, b);
        assert_memory_equal(a, b, (size_t)NTOK * (size_t)V * sizeof(float));
    }
    free(a);
    free(b);
    hy_model_free(m);
}

static void test_grouped_f32(void **state)
{
    (void)state;
    grouped_vs_per_expert(HY_COMPUTE_F32);
}

static void test_grouped_bf16(void **state)
{
    (void)state;
    grouped_vs_per_expert(HY_COMPUTE_BF16);
}

static void test_load_format_parse(void **state)
{
    (void)state;
    enum hy_load_format f;
    assert_int_equal(hy_load_format_parse("copy", &f), 0);
    assert_int_equal(f, HY_LOAD_COPY);
    assert_int_equal(hy_load_format_parse("mmap", &f), 0);
    assert_int_equal(f, HY_LOAD_MMAP);
    assert_int_equal(hy_load_format_parse("auto", &f), -1);
    assert_non_null(strstr(hy_err_msg(), "mmap or copy"));
    assert_int_equal(hy_load_format_parse(NULL, &f), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_format_parse), cmocka_unit_test(test_matmul_rows_equals_matmul),
        cmocka_unit_test(test_copy_equals_mmap),  cmocka_unit_test(test_grouped_f32),
        cmocka_unit_test(test_grouped_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
