/* test_quant_config.c - quantization_config parsing / target matching (config/quant_config.h) and
 * the linear binder (model/load_quant.h) on hand-built in-memory checkpoints: plain, fp8 per-tensor,
 * MXFP8, MXFP4, fused stacks (incl. fp8 per-expert scales) and their error messages; an Ascend
 * quant_model_description.json whose entry has the wrong JSON type is refused naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "config/quant_config.h"
#include "model/load_quant.h"
#include "quant/formats.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int lookup(const struct hy_quant_config *qc, const char *m)
{
    int g;
    return hy_quant_config_lookup(qc, m, &g);
}

static void test_fp8_config(void **state)
{
    (void)state;
    struct hy_quant_config qc;
    assert_int_equal(hy_quant_config_parse_text("{\"quant_method\":\"fp8\",\"activation_scheme\":\"static\","
                                                "\"ignored_layers\":[\"lm_head\",\"model.layers.80\","
                                                "\"model.layers.0.mlp.down_proj\"]}",
                                                &qc),
                     0);
    assert_int_equal(qc.method, HY_QM_FP8);
    assert_string_equal(qc.activation_scheme, "static");
    assert_int_equal(lookup(&qc, "model.layers.1.self_attn.q_proj"), HY_QF_FP8_TENSOR);
    assert_int_equal(lookup(&qc, "model.layers.0.mlp.down_proj"), HY_QF_NONE);
    assert_int_equal(lookup(&qc, "model.layers.80.eh_proj"), HY_QF_NONE);        /* dotted prefix */
    assert_int_equal(lookup(&qc, "model.layers.800.eh_proj"), HY_QF_FP8_TENSOR); /* not a prefix at a dot */
    hy_quant_config_free(&qc);
    assert_int_equal(hy_quant_config_parse_text("{\"quant_method\":\"fp8\",\"weight_block_size\":[128,128]}", &qc), -1);
    assert_non_null(strstr(hy_err_msg(), "weight_block_size [128, 128]"));
    hy_quant_config_free(&qc);
}

static void test_ct_config(void **state)
{
    (void)state;
    struct hy_quant_config qc;
    const char *j = "{\"quant_method\":\"compressed-tensors\",\"config_groups\":{"
                    "\"w4\":{\"targets\":[\"re:.*experts\\\\.\\\\d+\\\\.\"],\"weights\":{\"type\":\"float\","
                    "\"num_bits\":4,\"block_structure\":[1,32]}},"
                    "\"w8\":{\"targets\":[\"Linear\"],\"weights\":{\"type\":\"float\",\"num_bits\":8,"
                    "\"strategy\":\"group\",\"group_size\":32},\"input_activations\":{\"type\":\"float\","
                    "\"num_bits\":8,\"dynamic\":true}},"
                    "\"exact\":{\"targets\":[\"model.layers.2.self_attn.o_proj\"],\"weights\":{\"type\":\"float\","
                    "\"num_bits\":8,\"strategy\":\"tensor\"}}},"
                    "\"ignore\":[\"lm_head\",\"re:.*shared_mlp\"]}";
    assert_int_equal(hy_quant_config_parse_text(j, &qc), 0);
    assert_int_equal(qc.n_groups, 3);
    assert_int_equal(lookup(&qc, "model.layers.1.mlp.experts.3.gate_proj"), HY_QF_MXFP4); /* regex beats class */
    assert_int_equal(lookup(&qc, "model.layers.1.self_attn.q_proj"), HY_QF_MXFP8);
    assert_int_equal(lookup(&qc, "model.layers.2.self_attn.o_proj"), HY_QF_FP8_TENSOR); /* exact beats class */
    assert_int_equal(lookup(&qc, "model.layers.1.mlp.shared_mlp.up_proj"), HY_QF_NONE); /* ignored (regex) */
    assert_int_equal(lookup(&qc, "lm_head"), HY_QF_NONE);
    hy_quant_config_free(&qc);
    /* re: matches from the start of the name only (Python re.match) */
    assert_int_equal(hy_quant_config_parse_text("{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"g\":"
                                                "{\"targets\":[\"re:self_attn\"],\"weights\":{\"type\":\"float\","
                                                "\"num_bits\":8,\"weight_block_size\":[1,32]}}}}",
                                                &qc),
                     0);
    assert_int_equal(lookup(&qc, "model.layers.1.self_attn.q_proj"), HY_QF_NONE);
    hy_quant_config_free(&qc);
    /* two groups at the same priority -> error naming both */
    assert_int_equal(hy_quant_config_parse_text("{\"quant_method\":\"compressed-tensors\",\"config_groups\":{"
                                                "\"a\":{\"targets\":[\"Linear\"],\"weights\":{\"type\":\"float\","
                                                "\"num_bits\":8,\"weight_block_size\":[1,32]}},"
                                                "\"b\":{\"targets\":[\"Linear\"],\"weights\":{\"type\":\"float\","
                                                "\"num_bits\":4,\"weight_block_size\":[1,32]}}}}",
                                                &qc),
                     0);
    assert_int_equal(lookup(&qc, "model.layers.1.self_attn.q_proj"), -1);
    assert_non_null(strstr(hy_err_msg(), "both config_groups \"a\" and \"b\""));
    hy_quant_config_free(&qc);
    const char *bad[] = {
        "{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"g\":{\"targets\":[\"Linear\"],"
        "\"weights\":{\"type\":\"float\",\"num_bits\":4,\"strategy\":\"group\",\"group_size\":16}}}}",
        "{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"g\":{\"targets\":[\"Linear\"],"
        "\"weights\":{\"type\":\"int\",\"num_bits\":4,\"strategy\":\"group\",\"group_size\":32}}}}",
        "{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"g\":{\"targets\":[\"re:(\"],"
        "\"weights\":{\"type\":\"float\",\"num_bits\":8,\"strategy\":\"tensor\"}}}}",
        "{\"quant_method\":\"gptq\"}",
    };
    const char *msg[] = {"[1, 16] is NVFP4", "type \"int\" is not supported", "bad regex", "\"gptq\" is not supported"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(hy_quant_config_parse_text(bad[i], &qc), -1);
        assert_non_null(strstr(hy_err_msg(), msg[i]));
        hy_quant_config_free(&qc);
    }
}

/* ---- a hand-built checkpoint ------------------------------------------------------------------ */

#define MAXT 8
struct fake {
    struct hy_st_tensor t[MAXT];
    struct hy_st_tensor *idx[MAXT];
    struct hy_checkpoint ck;
    int n;
};

static void add(struct fake *f, const char *name, enum hy_dtype dt, int nd, const int64_t *shape, const void *data)
{
    struct hy_st_tensor *t = &f->t[f->n++];
    memset(t, 0, sizeof(*t));
    t->name = (char *)name;
    t->dtype = dt;
    snprintf(t->dtype_name, sizeof(t->dtype_name), "%s", hy_dtype_name(dt));
    t->ndim = nd;
    for (int i = 0; i < nd; i++)
        t->shape[i] = shape[i];
    t->data = data;
}

static int cmp_t(const void *a, const void *b)
{
    return strcmp((*(struct hy_st_tensor *const *)a)->name, (*(struct hy_st_tensor *const *)b)->name);
}

static void finish(struct fake *f)
{
    for (int i = 0; i < f->n; i++)
        f->idx[i] = &f->t[i];
    qsort(f->idx, (size_t)f->n, sizeof(f->idx[0]), cmp_t);
    memset(&f->ck, 0, sizeof(f->ck));
    f->ck.index = f->idx;
    f->ck.n_index = (size_t)f->n;
}

static void test_bind_mx_and_fp8(void **state)
{
    (void)state;
    struct hy_quant_config qc;
    assert_int_equal(hy_quant_config_parse_text("{\"quant_method\":\"compressed-tensors\",\"config_groups\":{"
                                                "\"g4\":{\"targets\":[\"m4\"],\"weights\":{\"type\":\"float\","
                                                "\"num_bits\":4,\"weight_block_size\":[1,32]}},"
                                                "\"g8\":{\"targets\":[\"m8\"],\"weights\":{\"type\":\"float\","
                                                "\"num_bits\":8,\"weight_block_size\":[1,32]}}}}",
                                                &qc),
                     0);
    /* m4: [2, 40] mxfp4 -> data [2, 20], scales [2, 2]; m8: [2, 40] mxfp8 */
    static uint8_t w4[40], w8[80], s[4] = {127, 128, 126, 127};
    for (int i = 0; i < 40; i++)
        w4[i] = (uint8_t)(0x21 + i % 3); /* low nibble 1..3, high nibble 2 */
    for (int i = 0; i < 80; i++)
        w8[i] = 0x38; /* 1.0 */
    struct fake f = {0};
    const int64_t s4[2] = {2, 20}, s8[2] = {2, 40}, ss[2] = {2, 2};
    add(&f, "m4.weight", HY_DTYPE_U8, 2, s4, w4);
    add(&f, "m4.weight_scale", HY_DTYPE_U8, 2, ss, s);
    add(&f, "m8.weight", HY_DTYPE_F8_E4M3, 2, s8, w8);
    add(&f, "m8.weight_scale", HY_DTYPE_F8_E8M0, 2, ss, s);
    finish(&f);
    struct hy_tensor t;
    assert_int_equal(hy_qload_linear(&qc, &f.ck, "m4", 2, 40, 0, &t), 0);
    assert_int_equal(t.dtype, HY_DTYPE_F4_E2M1);
    assert_int_equal(t.qscheme, HY_QS_MX32);
    assert_true(hy_tensor_get(&t, 0, 0) == 0.5f);        /* nibble 1 * 2^0 */
    assert_true(hy_tensor_get(&t, 0, 1) == 1.0f);        /* high nibble 2 */
    assert_true(hy_tensor_get(&t, 0, 33) == 2.0f);       /* block 1: scale 2^1 */
    assert_true(hy_tensor_get(&t, 1, 0) == 1.5f * 0.5f); /* row 1: byte 20 = 0x23 (low 3: 1.5), scale 2^-1 */
    assert_int_equal(hy_tensor_bytes(&t), 2 * 20 + 2 * 2);
    struct hy_tensor r1 = hy_tensor_rows(&t, 1, 1);
    assert_true(hy_tensor_get(&r1, 0, 0) == hy_tensor_get(&t, 1, 0));
    assert_true(hy_tensor_get(&r1, 0, 39) == hy_tensor_get(&t, 1, 39));
    assert_int_equal(hy_qload_linear(&qc, &f.ck, "m8", 2, 40, 0, &t), 0);
    assert_true(hy_tensor_get(&t, 0, 35) == 2.0f);
    assert_int_equal(qc.groups[0].n_tensors, 1);
    assert_int_equal(qc.groups[1].n_tensors, 1);
    /* wrong K for the shapes, odd K */
    assert_int_equal(hy_qload_linear(&qc, &f.ck, "m4", 2, 41, 0, &t), -1);
    assert_non_null(strstr(hy_err_msg(), "K = 41 is odd"));
    assert_int_equal(hy_qload_linear(&qc, &f.ck, "m8", 2, 64, 0, &t), -1);
    assert_non_null(strstr(hy_err_msg(), "has shape [2, 40]"));
    /* a module the config does not quantize but stored as fp8 */
    hy_quant_config_free(&qc);
    assert_int_equal(hy_quant_config_parse_text("{\"quant_method\":\"fp8\",\"ignored_layers\":[\"m8\"]}", &qc), 0);
    assert_int_equal(hy_qload_linear(&qc, &f.ck, "m8", 2, 40, 0, &t), -1);
    assert_non_null(strstr(hy_err_msg(), "leaves module \"m8\" unquantized"));
    hy_quant_config_free(&qc);
}

static void test_bind_fused_fp8_stack(void **state)
{
    (void)state;
    struct hy_quant_config qc;
    assert_int_equal(hy_quant_config_parse_text("{\"quant_method\":\"fp8\"}", &qc), 0);
    /* E = 2 experts, [4, 3] each: byte 0x38 = 1.0; scales 0.5 and 3 (F32 [2]) */
    static uint8_t w[24];
    for (int i = 0; i < 24; i++)
        w[i] = 0x38;
    static float sc[2] = {0.5f, 3.0f}, bad[2] = {0.5f, -1.0f};
    static uint16_t bf[1] = {0x3f80};
    struct fake f = {0};
    const int64_t sw[3] = {2, 4, 3}, ssc[1] = {2}, s1[1] = {1};
    add(&f, "x.gate_up_proj", HY_DTYPE_F8_E4M3, 3, sw, w);
    add(&f, "x.gate_up_proj_scale", HY_DTYPE_F32, 1, ssc, sc);
    add(&f, "y.gate_up_proj", HY_DTYPE_F8_E4M3, 3, sw, w);
    add(&f, "y.gate_up_proj_scale", HY_DTYPE_F32, 1, ssc, bad);
    add(&f, "z.gate_up_proj", HY_DTYPE_F8_E4M3, 3, sw, w);
    add(&f, "z.gate_up_proj_scale", HY_DTYPE_BF16, 1, s1, bf);
    finish(&f);
    struct hy_tensor t[2];
    assert_int_equal(hy_qload_stack(&qc, &f.ck, "x.gate_up_proj", 2, 4, 3, 0, t), 0);
    assert_true(hy_tensor_get(&t[0], 3, 2) == 0.5f);
    assert_true(hy_tensor_get(&t[1], 0, 0) == 3.0f);
    struct hy_tensor up = hy_tensor_rows(&t[1], 2, 2);
    assert_true(up.data == (const uint8_t *)w + 12 + 6);
    assert_int_equal(hy_qload_stack(&qc, &f.ck, "y.gate_up_proj", 2, 4, 3, 0, t), -1);
    assert_non_null(strstr(hy_err_msg(), "must be finite and >= 0"));
    assert_int_equal(hy_qload_stack(&qc, &f.ck, "z.gate_up_proj", 2, 4, 3, 0, t), -1);
    assert_non_null(strstr(hy_err_msg(), "one per expert"));
    assert_int_equal(hy_qload_linear(&qc, &f.ck, "missing", 4, 3, 0, t), -1);
    assert_non_null(strstr(hy_err_msg(), "\"missing.weight\" is missing"));
    hy_quant_config_free(&qc);
}

/* Writes desc_json as DIR/quant_model_description.json of a fresh temp directory; loads it. */
static int load_desc(const char *desc_json, struct hy_quant_config *qc)
{
    char dir[] = "/tmp/hy-qdesc-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/%s", dir, HY_ASCEND_DESCRIPTION);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(desc_json, f);
    fclose(f);
    memset(qc, 0, sizeof(*qc));
    const int rc = hy_quant_config_load(dir, qc);
    remove(path);
    rmdir(dir);
    return rc;
}

static void test_ascend_entry_types(void **state)
{
    (void)state;
    struct hy_quant_config qc;
    /* the valid form: type names as strings, non-string globals (group_size, metadata) accepted */
    assert_int_equal(load_desc("{\"model_quant_type\": \"W8A8_DYNAMIC\", \"group_size\": 0, \"metadata\": {}, "
                               "\"model.layers.0.mlp.down_proj.weight\": \"W8A8_DYNAMIC\", "
                               "\"model.norm.weight\": \"FLOAT\"}",
                               &qc),
                     0);
    int g;
    assert_int_equal(hy_quant_config_lookup(&qc, "model.layers.0.mlp.down_proj", &g), HY_QF_W8A8_DYN);
    hy_quant_config_free(&qc);
    /* a type name of the wrong JSON type is an error naming the entry, never a silent FLOAT */
    static const char *const bad[][2] = {
        {"{\"model_quant_type\": 5}", "\"model_quant_type\": an integer where a type name belongs"},
        {"{\"model.layers.0.mlp.down_proj.weight\": 8}",
         "\"model.layers.0.mlp.down_proj.weight\": an integer where a type name belongs"},
        {"{\"model.norm.weight\": [\"FLOAT\"]}", "\"model.norm.weight\": an array where a type name belongs"},
        {"{\"kv_cache_type\": null}", "\"kv_cache_type\": null where a type name belongs"},
        {"{\"lm_head.weight\": true}", "\"lm_head.weight\": a boolean where a type name belongs"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(load_desc(bad[i][0], &qc), -1);
        if (!strstr(hy_err_msg(), bad[i][1]))
            fail_msg("%s: got \"%s\"", bad[i][0], hy_err_msg());
        hy_quant_config_free(&qc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp8_config),         cmocka_unit_test(test_ct_config),
        cmocka_unit_test(test_bind_mx_and_fp8),    cmocka_unit_test(test_bind_fused_fp8_stack),
        cmocka_unit_test(test_ascend_entry_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
