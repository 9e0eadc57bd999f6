/* test_model_config.c - config.json (+ generation_config.json) validation (issue #2 item 11):
 * each bad variant is rejected with one message naming the file and the field; good variants give
 * the expected struct. Files are written to a temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "base/fileio.h"
#include "config/model_config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];      /* the model directory under test */
static char cfg_path[300]; /* dir/config.json */

/* A valid hy_v3 config shaped like hy3-golden-b. */
static const char *BASE =
    "{\"architectures\":[\"HYV3ForCausalLM\"],\"model_type\":\"hy_v3\",\"vocab_size\":480,\"hidden_size\":96,"
    "\"intermediate_size\":160,\"num_hidden_layers\":4,\"num_attention_heads\":6,\"num_key_value_heads\":2,"
    "\"head_dim\":16,\"hidden_act\":\"silu\",\"max_position_embeddings\":262144,\"rms_norm_eps\":1e-05,"
    "\"rope_parameters\":{\"rope_theta\":11158840.0,\"rope_type\":\"default\"},\"tie_word_embeddings\":false,"
    "\"first_k_dense_replace\":1,\"num_experts\":12,\"num_experts_per_tok\":4,\"num_shared_experts\":1,"
    "\"moe_intermediate_size\":16,\"expert_hidden_dim\":16,\"router_scaling_factor\":1.0,\"route_norm\":false,"
    "\"qk_norm\":true,\"num_nextn_predict_layers\":1,\"bos_token_id\":471,\"eos_token_id\":475,"
    "\"pad_token_id\":472,\"sep_token_id\":474,\"eod_token_id\":476}";

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/hy_test_cfg_XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(cfg_path, sizeof(cfg_path), "%s/config.json", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Before each test: no config.json, no generation_config.json. */
static int clean(void **state)
{
    (void)state;
    char p[300];
    unlink(cfg_path);
    snprintf(p, sizeof(p), "%s/generation_config.json", dir);
    unlink(p);
    return 0;
}

static void write_text(const char *name, const char *text)
{
    char p[300];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static json_t *base(void)
{
    json_error_t je;
    json_t *o = json_loads(BASE, 0, &je);
    assert_non_null(o);
    return o;
}

/* Writes cfg as config.json and consumes the reference. */
static void write_cfg(json_t *cfg)
{
    char *s = json_dumps(cfg, JSON_INDENT(2));
    json_decref(cfg);
    assert_non_null(s);
    write_text("config.json", s);
    free(s);
}

static void expect_ok(struct hy_model_config *c)
{
    hy_err_clear();
    if (hy_model_config_load(dir, c))
        fail_msg("rejected a good config: %s", hy_err_msg());
}

/* Loading must fail; the message names the file and contains want1 (and want2). */
static void expect_fail_file(const char *file, const char *want1, const char *want2)
{
    struct hy_model_config c;
    hy_err_clear();
    assert_int_equal(hy_model_config_load(dir, &c), -1);
    const char *msg = hy_err_msg();
    char path[300];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (strncmp(msg, path, strlen(path)) != 0)
        fail_msg("message does not start with the file name %s: \"%s\"", path, msg);
    if (strchr(msg, '\n'))
        fail_msg("message spans several lines: \"%s\"", msg);
    if (!strstr(msg, want1) || (want2 && !strstr(msg, want2)))
        fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", msg, want1, want2 ? want2 : "");
}

static void expect_fail(json_t *cfg, const char *want1, const char *want2)
{
    write_cfg(cfg);
    expect_fail_file("config.json", want1, want2);
}

static void test_base_ok(void **state)
{
    (void)state;
    write_cfg(base());
    struct hy_model_config c;
    expect_ok(&c);
    assert_int_equal(c.arch, HY_ARCH_HY_V3);
    assert_int_equal(c.vocab_size, 480);
    assert_int_equal(c.head_dim, 16);
    assert_int_equal(c.num_experts, 12);
    assert_int_equal(c.moe_intermediate_size, 16);
    assert_int_equal(c.layer_is_moe[0], 0);
    assert_int_equal(c.layer_is_moe[1], 1);
    assert_int_equal(c.layer_is_moe[4], 1); /* MTP */
    assert_int_equal(c.n_eos, 1);
    assert_int_equal(c.eos_token_ids[0], 475);
    assert_true(c.rope_theta == 11158840.0);
}

static void test_missing_file(void **state)
{
    (void)state;
    struct hy_model_config c;
    assert_int_equal(hy_model_config_load(dir, &c), -1);
    assert_non_null(strstr(hy_err_msg(), cfg_path));
    assert_non_null(strstr(hy_err_msg(), "not found"));
    assert_int_equal(hy_model_config_load("/nonexistent/model/dir", &c), -1);
    assert_non_null(strstr(hy_err_msg(), "/nonexistent/model/dir/config.json: not found"));
}

static void test_invalid_json(void **state)
{
    (void)state;
    write_text("config.json", "{\n  \"model_type\": \"hy_v3\",\n  \"hidden_size\": 96,,\n  \"x\": 1\n}\n");
    expect_fail_file("config.json", "invalid JSON", "line 3");
    write_text("config.json", "");
    expect_fail_file("config.json", "invalid JSON", NULL);
    write_text("config.json", "[1, 2]");
    expect_fail_file("config.json", "JSON object", NULL);
    /* the same key twice is ambiguous */
    write_text("config.json", "{\"model_type\": \"hy_v3\", \"hidden_size\": 96, \"hidden_size\": 64}");
    expect_fail_file("config.json", "duplicate", "hidden_size");
}

static void test_architecture(void **state)
{
    (void)state;
    json_t *o = base();
    json_object_set_new(o, "model_type", json_string("qwen3_moe"));
    expect_fail(o, "unknown architecture", "qwen3_moe");
    o = base();
    json_object_del(o, "model_type");
    expect_fail(o, "model_type", "missing");
    o = base();
    json_object_set_new(o, "model_type", json_integer(3));
    expect_fail(o, "model_type", NULL);
    o = base();
    json_object_set_new(o, "hidden_act", json_string("gelu"));
    expect_fail(o, "hidden_act \"gelu\"", "not supported");
    o = base();
    json_object_set_new(o, "attention_bias", json_true());
    expect_fail(o, "attention_bias", NULL);
}

static void test_missing_required(void **state)
{
    (void)state;
    const char *req[] = {"hidden_size", "vocab_size", "num_hidden_layers", "num_attention_heads"};
    for (int i = 0; i < 4; i++) {
        json_t *o = base();
        json_object_del(o, req[i]);
        char want[64];
        snprintf(want, sizeof(want), "\"%s\" is required", req[i]);
        expect_fail(o, want, NULL);
    }
    json_t *o = base();
    json_object_del(o, "num_experts");
    expect_fail(o, "num_experts", "required");
    o = base();
    json_object_del(o, "moe_intermediate_size");
    json_object_del(o, "expert_hidden_dim");
    expect_fail(o, "moe_intermediate_size", "required");
    o = base();
    json_object_del(o, "intermediate_size");
    expect_fail(o, "intermediate_size", "dense layers");
}

static void test_wrong_types(void **state)
{
    (void)state;
    json_t *o = base();
    json_object_set_new(o, "hidden_size", json_string("96"));
    expect_fail(o, "\"hidden_size\" must be an integer", NULL);
    o = base();
    json_object_set_new(o, "num_experts", json_real(12.5));
    expect_fail(o, "\"num_experts\" must be an integer", NULL);
    o = base();
    json_object_set_new(o, "rms_norm_eps", json_string("1e-5"));
    expect_fail(o, "\"rms_norm_eps\" must be a number", NULL);
    o = base();
    json_object_set_new(o, "qk_norm", json_string("yes"));
    expect_fail(o, "\"qk_norm\" must be true or false", NULL);
    o = base();
    json_object_set_new(o, "rope_parameters", json_string("default"));
    expect_fail(o, "\"rope_parameters\" must be an object", NULL);
    o = base();
    json_object_set_new(o, "eos_token_id", json_string("475"));
    expect_fail(o, "eos_token_id", NULL);
    o = base();
    json_object_set_new(o, "eos_token_id", json_pack("[is]", 475, "x"));
    expect_fail(o, "eos_token_id", NULL);
    o = base();
    json_object_set_new(o, "hidden_size", json_integer(-96));
    expect_fail(o, "\"hidden_size\" = -96", "out of range");
    o = base();
    json_object_set_new(o, "num_hidden_layers", json_integer(100000));
    expect_fail(o, "num_hidden_layers", "out of range");
    o = base();
    json_object_set_new(o, "rms_norm_eps", json_real(0.0));
    expect_fail(o, "rms_norm_eps", NULL);
    /* a whole-number real is an integer */
    o = base();
    json_object_set_new(o, "hidden_size", json_real(96.0));
    write_cfg(o);
    struct hy_model_config c;
    expect_ok(&c);
    assert_int_equal(c.hidden_size, 96);
}

static void test_heads(void **state)
{
    (void)state;
    json_t *o = base();
    json_object_set_new(o, "num_key_value_heads", json_integer(4));
    expect_fail(o, "num_attention_heads (6)", "not a multiple of num_key_value_heads (4)");
    o = base();
    json_object_set_new(o, "num_key_value_heads", json_integer(12));
    expect_fail(o, "not a multiple", NULL);
    o = base();
    json_object_set_new(o, "head_dim", json_integer(15));
    expect_fail(o, "head_dim (15)", "even");
    /* no head_dim and more heads than hidden units: the default would be 0 */
    o = base();
    json_object_del(o, "head_dim");
    json_object_set_new(o, "hidden_size", json_integer(4));
    json_object_set_new(o, "num_attention_heads", json_integer(8));
    json_object_set_new(o, "num_key_value_heads", json_integer(8));
    expect_fail(o, "head_dim", NULL);
    /* default head_dim = hidden / heads; default kv heads = heads */
    o = base();
    json_object_del(o, "head_dim");
    json_object_del(o, "num_key_value_heads");
    write_cfg(o);
    struct hy_model_config c;
    expect_ok(&c);
    assert_int_equal(c.head_dim, 16);
    assert_int_equal(c.num_key_value_heads, 6);
}

static void test_moe(void **state)
{
    (void)state;
    json_t *o = base();
    json_object_set_new(o, "num_experts_per_tok", json_integer(13));
    expect_fail(o, "num_experts_per_tok (13)", "num_experts=12");
    o = base();
    json_object_set_new(o, "num_experts_per_tok", json_integer(0));
    expect_fail(o, "num_experts_per_tok (0)", NULL);
    o = base();
    json_object_set_new(o, "expert_hidden_dim", json_integer(32));
    expect_fail(o, "moe_intermediate_size (16) and expert_hidden_dim (32) disagree", NULL);
    /* either name alone is enough; num_local_experts is an alias of num_experts */
    o = base();
    json_object_del(o, "moe_intermediate_size");
    json_object_del(o, "num_experts");
    json_object_set_new(o, "num_local_experts", json_integer(12));
    write_cfg(o);
    struct hy_model_config c;
    expect_ok(&c);
    assert_int_equal(c.moe_intermediate_size, 16);
    assert_int_equal(c.num_experts, 12);
}

static void test_rope(void **state)
{
    (void)state;
    json_t *o = base();
    json_object_set_new(o, "rope_parameters",
                        json_pack("{s:f, s:s, s:f}", "rope_theta", 10000.0, "rope_type", "yarn", "factor", 4.0));
    expect_fail(o, "rope_type \"yarn\"", "not supported");
    o = base();
    json_object_del(o, "rope_parameters");
    json_object_set_new(o, "rope_scaling", json_pack("{s:s, s:f}", "type", "yarn", "factor", 4.0));
    expect_fail(o, "rope_scaling", "\"yarn\"");
    o = base();
    json_object_set_new(o, "rope_parameters", json_pack("{s:f}", "rope_theta", -1.0));
    expect_fail(o, "rope_theta", "> 0");
    /* rope_theta at the top level when rope_parameters is absent */
    o = base();
    json_object_del(o, "rope_parameters");
    json_object_set_new(o, "rope_theta", json_real(500000.0));
    write_cfg(o);
    struct hy_model_config c;
    expect_ok(&c);
    assert_true(c.rope_theta == 500000.0);
}

static void test_eos(void **state)
{
    (void)state;
    struct hy_model_config c;
    json_t *o = base();
    json_object_set_new(o, "eos_token_id", json_pack("[ii]", 475, 476));
    write_cfg(o);
    expect_ok(&c);
    assert_int_equal(c.n_eos, 2);
    assert_true(hy_model_config_is_eos(&c, 475));
    assert_true(hy_model_config_is_eos(&c, 476));
    assert_false(hy_model_config_is_eos(&c, 474));

    /* generation_config.json adds its ids (deduplicated) */
    write_text("generation_config.json", "{\"bos_token_id\": 471, \"eos_token_id\": [476, 470, 475]}");
    expect_ok(&c);
    assert_int_equal(c.n_eos, 3);
    assert_int_equal(c.eos_token_ids[0], 475);
    assert_int_equal(c.eos_token_ids[1], 476);
    assert_int_equal(c.eos_token_ids[2], 470);

    /* int in config.json, int in generation_config.json */
    o = base();
    write_cfg(o);
    write_text("generation_config.json", "{\"eos_token_id\": 470}");
    expect_ok(&c);
    assert_int_equal(c.n_eos, 2);
    assert_true(hy_model_config_is_eos(&c, 470));
    assert_true(hy_model_config_is_eos(&c, 475));

    /* no eos anywhere: none */
    o = base();
    json_object_del(o, "eos_token_id");
    write_cfg(o);
    write_text("generation_config.json", "{}");
    expect_ok(&c);
    assert_int_equal(c.n_eos, 0);

    /* a broken generation_config.json is named */
    write_cfg(base());
    write_text("generation_config.json", "{\"eos_token_id\": [1,\n 2,,]}");
    expect_fail_file("generation_config.json", "invalid JSON", "line 2");
    write_text("generation_config.json", "{\"eos_token_id\": -3}");
    expect_fail_file("generation_config.json", "eos_token_id", NULL);
    write_text("generation_config.json", "[475]");
    expect_fail_file("generation_config.json", "JSON object", NULL);
}

static void test_layer_types(void **state)
{
    (void)state;
    struct hy_model_config c;
    /* agrees with first_k_dense_replace = 1 */
    json_t *o = base();
    json_object_set_new(o, "mlp_layer_types", json_pack("[ssss]", "dense", "sparse", "sparse", "sparse"));
    write_cfg(o);
    expect_ok(&c);
    assert_int_equal(c.layer_is_moe[0], 0);
    assert_int_equal(c.layer_is_moe[3], 1);
    assert_int_equal(c.first_k_dense_replace, 1);

    /* disagrees: two readers would build different models */
    o = base();
    json_object_set_new(o, "mlp_layer_types", json_pack("[ssss]", "dense", "dense", "sparse", "sparse"));
    expect_fail(o, "mlp_layer_types[1]", "first_k_dense_replace (1)");
    o = base();
    json_object_set_new(o, "mlp_layer_types", json_pack("[ssss]", "dense", "sparse", "dense", "sparse"));
    expect_fail(o, "mlp_layer_types[2]", "first_k_dense_replace");

    /* mlp_layer_types alone decides, any pattern */
    o = base();
    json_object_del(o, "first_k_dense_replace");
    json_object_set_new(o, "mlp_layer_types", json_pack("[ssss]", "dense", "sparse", "dense", "sparse"));
    write_cfg(o);
    expect_ok(&c);
    assert_int_equal(c.layer_is_moe[1], 1);
    assert_int_equal(c.layer_is_moe[2], 0);
    assert_int_equal(c.layer_is_moe[4], 1);

    /* first_k_dense_replace alone */
    o = base();
    json_object_set_new(o, "first_k_dense_replace", json_integer(3));
    write_cfg(o);
    expect_ok(&c);
    assert_int_equal(c.layer_is_moe[2], 0);
    assert_int_equal(c.layer_is_moe[3], 1);
    o = base();
    json_object_set_new(o, "first_k_dense_replace", json_integer(5));
    expect_fail(o, "first_k_dense_replace", "out of range");

    /* malformed lists */
    o = base();
    json_object_set_new(o, "mlp_layer_types", json_pack("[ss]", "dense", "sparse"));
    expect_fail(o, "mlp_layer_types", "at least num_hidden_layers (4)");
    o = base();
    json_object_del(o, "first_k_dense_replace");
    json_object_set_new(o, "mlp_layer_types", json_pack("[sssi]", "dense", "sparse", "sparse", 1));
    expect_fail(o, "mlp_layer_types[3]", NULL);
    o = base();
    json_object_set_new(o, "mlp_layer_types", json_string("dense"));
    expect_fail(o, "mlp_layer_types", NULL);
}

static void test_llama(void **state)
{
    (void)state;
    write_text("config.json",
               "{\"model_type\":\"llama\",\"vocab_size\":512,\"hidden_size\":64,\"intermediate_size\":172,"
               "\"num_hidden_layers\":5,\"num_attention_heads\":8,\"num_key_value_heads\":4,"
               "\"max_position_embeddings\":512,\"rms_norm_eps\":1e-5,\"bos_token_id\":1,\"eos_token_id\":2}");
    struct hy_model_config c;
    expect_ok(&c);
    assert_int_equal(c.arch, HY_ARCH_LLAMA);
    assert_int_equal(c.head_dim, 8);
    assert_int_equal(c.qk_norm, 0);
    assert_int_equal(c.layer_is_moe[0], 0);
    assert_int_equal(c.num_nextn_predict_layers, 0);
}

/* The shipped golden config loads (guards against the BASE copy drifting from reality). */
static void test_shared_golden(void **state)
{
    (void)state;
    char p[1024];
    const char *root = getenv("HYINFER_ROOT"); /* unset: run from the repository root */
    snprintf(p, sizeof(p), "%s/tests/data/hy3-golden-llamacpp/hy3-golden-b", root && *root ? root : ".");
    char cfg[1100];
    snprintf(cfg, sizeof(cfg), "%s/config.json", p);
    if (!hy_file_exists(cfg))
        fail_msg("%s not found (run from the repository root or set HYINFER_ROOT)", cfg);
    struct hy_model_config c;
    if (hy_model_config_load(p, &c))
        fail_msg("%s", hy_err_msg());
    assert_int_equal(c.num_hidden_layers, 4);
    assert_int_equal(c.num_experts_per_tok, 4);
}

/* hy_v4: tests/data/hy4-golden-llamacpp/hy4-golden-b/config.json as published-shaped input, then variants */
static json_t *hy4_base(void)
{
    char p[1024];
    const char *root = getenv("HYINFER_ROOT");
    snprintf(p, sizeof(p), "%s/tests/data/hy4-golden-llamacpp/hy4-golden-b/config.json", root && *root ? root : ".");
    json_error_t je;
    json_t *o = json_load_file(p, 0, &je);
    if (!o)
        fail_msg("%s: %s", p, je.text);
    return o;
}

static void test_hy_v4(void **state)
{
    (void)state;
    write_cfg(hy4_base());
    struct hy_model_config c;
    expect_ok(&c);
    assert_int_equal(c.arch, HY_ARCH_HY_V4);
    assert_int_equal(c.num_experts, 12); /* n_routed_experts */
    assert_int_equal(c.num_shared_experts, 1);
    assert_true(c.router_scaling_factor == 2.0f); /* routed_scaling_factor */
    assert_int_equal(c.route_norm, 1);            /* norm_topk_prob */
    assert_int_equal(c.num_key_value_heads, 4);   /* ignored: = num_attention_heads */
    assert_int_equal(c.head_dim, 16);             /* = qk_rope_head_dim */
    assert_int_equal(c.rope_interleaved, 1);
    assert_int_equal(c.v4.q_lora_rank, 40);
    assert_int_equal(c.v4.kv_lora_rank, 24);
    assert_int_equal(c.v4.v_head_dim, 24);
    assert_int_equal(c.v4.index_topk, 6);
    assert_int_equal(c.v4.index_head_dim, 24);
    assert_int_equal(c.v4.hc_mult, 4);
    assert_true(c.v4.swiglu_limit == 1.25f);
    assert_int_equal(c.v4.indexer_full[0], 1);
    assert_int_equal(c.v4.indexer_full[1], 0);
    assert_int_equal(c.v4.indexer_full[2], 1);
    assert_int_equal(c.v4.indexer_full[4], 1); /* MTP: own indexer */
    json_t *o = hy4_base();
    json_object_set_new(o, "indexer_types", json_pack("[ssss]", "shared", "full", "full", "shared"));
    expect_fail(o, "indexer_types[0]", "full");
    o = hy4_base();
    json_object_set_new(o, "indexer_types", json_pack("[sss]", "full", "full", "full"));
    expect_fail(o, "indexer_types", "num_hidden_layers");
    o = hy4_base();
    json_object_set_new(o, "n_group", json_integer(8));
    expect_fail(o, "n_group", "not supported");
    o = hy4_base();
    json_object_set_new(o, "gating_type", json_string("headwise"));
    expect_fail(o, "gating_type", "headwise");
    o = hy4_base();
    json_object_del(o, "kv_lora_rank");
    expect_fail(o, "kv_lora_rank", "required");
    o = hy4_base();
    json_object_set_new(o, "index_head_dim", json_integer(16));
    expect_fail(o, "index_head_dim", "qk_rope_head_dim");
    /* absent indexer_types: transformers' rule, full at 0 and 1, 5, 9, ... */
    o = hy4_base();
    json_object_del(o, "indexer_types");
    write_cfg(o);
    expect_ok(&c);
    assert_int_equal(c.v4.indexer_full[1], 1);
    assert_int_equal(c.v4.indexer_full[2], 0);
    assert_int_equal(c.v4.indexer_full[3], 0);
}

#define T(f) cmocka_unit_test_setup(f, clean)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_base_ok),
        T(test_missing_file),
        T(test_invalid_json),
        T(test_architecture),
        T(test_missing_required),
        T(test_wrong_types),
        T(test_heads),
        T(test_moe),
        T(test_rope),
        T(test_eos),
        T(test_layer_types),
        T(test_llama),
        T(test_shared_golden),
        T(test_hy_v4),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
