/* test_run_config.c - the cann-recipes-infer YAML loader: defaults, every error class, warnings,
 * path resolution, the repo's configs and the shared example config. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/fileio.h"
#include "base/log.h"
#include "config/run_config.h"
#include "sample/sampler.h"

static char tmpdir[256];

static int setup_dir(void **state)
{
    (void)state;
    const char *base = access("build", W_OK) == 0 ? "build" : "/tmp";
    snprintf(tmpdir, sizeof(tmpdir), "%s/test_run_config_XXXXXX", base);
    if (!mkdtemp(tmpdir))
        return -1;
    return 0;
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Writes text to tmpdir/name; returns the path (static buffer). */
static const char *write_file(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Loads YAML text with stderr captured. Returns the loader's rc; *err_out = captured stderr
 * (malloc'd, caller frees) when err_out is non-NULL. */
static int load_path(const char *path, struct hy_run_config *cfg, char **err_out)
{
    char cap[512];
    snprintf(cap, sizeof(cap), "%s/stderr.txt", tmpdir);
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(cap, "wb");
    assert_non_null(f);
    dup2(fileno(f), 2);
    int rc = hy_run_config_load(path, cfg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(hy_file_read_all(cap, &data, &len), 0);
    if (err_out)
        *err_out = data;
    else
        free(data);
    return rc;
}

static int load_text(const char *text, struct hy_run_config *cfg, char **err_out)
{
    return load_path(write_file("cfg.yaml", text), cfg, err_out);
}

/* Expects the load to fail with a message containing every given fragment (NULL-terminated). */
static void expect_error(const char *text, ...)
{
    struct hy_run_config cfg;
    int rc = load_text(text, &cfg, NULL);
    if (rc == 0)
        fail_msg("expected an error for:\n%s", text);
    const char *msg = hy_err_msg();
    va_list ap;
    va_start(ap, text);
    for (const char *frag; (frag = va_arg(ap, const char *)) != NULL;)
        if (!strstr(msg, frag))
            fail_msg("error message \"%s\" lacks \"%s\"", msg, frag);
    va_end(ap);
    assert_null(cfg.model_path); /* zeroed on error */
    hy_run_config_free(&cfg);
}

#define MODEL "model_config:\n  model_path: \"/models/x\"\n"

static void test_defaults(void **state)
{
    (void)state;
    struct hy_run_config cfg;
    char *err = NULL;
    assert_int_equal(load_text(MODEL, &cfg, &err), 0);
    assert_string_equal(err, ""); /* no warning */
    free(err);
    assert_string_equal(cfg.model_path, "/models/x");
    assert_string_equal(cfg.model_name, "hy3");
    assert_string_equal(cfg.dtype, "bfloat16");
    assert_string_equal(cfg.kv_cache_dtype, "auto");
    assert_string_equal(cfg.dataset, "default");
    assert_null(cfg.dataset_path);
    assert_null(cfg.output_path);
    assert_null(cfg.ignored_keys);
    assert_int_equal(cfg.with_ckpt, 1);
    assert_int_equal(cfg.next_n, 0);
    assert_int_equal(cfg.world_size, 1);
    assert_int_equal(cfg.shared_tp_size, 1);
    assert_int_equal(cfg.batch_size, 1);
    assert_int_equal(cfg.max_new_tokens, 128);
    assert_int_equal(cfg.block_size, 128);
    assert_int_equal(cfg.max_prefill_tokens, 0);
    assert_true(cfg.temperature < 0);
    assert_true(cfg.top_p < 0);
    assert_true(cfg.top_k < 0);
    assert_true(cfg.seed < 0);
    assert_string_equal(cfg.config_dir, tmpdir);
    hy_run_config_free(&cfg);
}

static void test_full_config(void **state)
{
    (void)state;
    struct hy_run_config cfg;
    char *err = NULL;
    const char *text = "model_config:\n"
                       "  model_name: 'hy3-tiny'\n"
                       "  model_path: /m\n"
                       "  dtype: float32\n"
                       "  kv_cache_dtype: fp8\n"
                       "  with_ckpt: true\n"
                       "  next_n: 3\n"
                       "  output_path: out/results.json\n"
                       "data_config:\n"
                       "  dataset: InfiniteBench\n"
                       "  dataset_path: /data/ib.jsonl\n"
                       "  input_truncated_len: 65536\n"
                       "  apply_chat_template: TRUE\n"
                       "parallel_config:\n"
                       "  world_size: 1\n  attn_tp_size: 1\n  dense_tp_size: 1\n  moe_tp_size: 1\n"
                       "  embed_tp_size: 1\n  lmhead_tp_size: 1\n  o_proj_tp_size: 1\n  cp_size: 1\n"
                       "  shared_tp_size: 1\n"
                       "scheduler_config:\n"
                       "  max_new_tokens: 112\n"
                       "  batch_size: 4\n"
                       "  max_prefill_tokens: 65536\n"
                       "  block_size: 16\n"
                       "  num_reserved_decode_tokens: 2\n"
                       "  sampling: {top_k: 20}\n"
                       "sampling:\n"
                       "  temperature: 0.7\n"
                       "  top_p: 0.8\n"
                       "  min_p: 0.05\n"
                       "  repetition_penalty: 1.05\n"
                       "  seed: 1234\n";
    assert_int_equal(load_text(text, &cfg, &err), 0);
    assert_string_equal(err, "");
    free(err);
    assert_string_equal(cfg.model_name, "hy3-tiny");
    assert_string_equal(cfg.model_path, "/m");
    assert_string_equal(cfg.dtype, "float32");
    assert_string_equal(cfg.kv_cache_dtype, "fp8");
    assert_int_equal(cfg.next_n, 3);
    assert_string_equal(cfg.output_path, "out/results.json");
    assert_string_equal(cfg.dataset, "InfiniteBench");
    assert_string_equal(cfg.dataset_path, "/data/ib.jsonl");
    assert_int_equal(cfg.input_truncated_len, 65536);
    assert_int_equal(cfg.apply_chat_template, 1);
    assert_int_equal(cfg.max_new_tokens, 112);
    assert_int_equal(cfg.batch_size, 4);
    assert_int_equal(cfg.max_prefill_tokens, 65536);
    assert_int_equal(cfg.block_size, 16);
    assert_int_equal(cfg.num_reserved_decode_tokens, 2);
    assert_int_equal(cfg.top_k, 20);
    assert_float_equal(cfg.temperature, 0.7, 1e-6);
    assert_float_equal(cfg.top_p, 0.8, 1e-6);
    assert_float_equal(cfg.min_p, 0.05, 1e-6);
    assert_float_equal(cfg.repetition_penalty, 1.05, 1e-6);
    assert_int_equal(cfg.seed, 1234);

    struct hy_sampling_params p;
    hy_sampling_params_init(&p);
    assert_int_equal(hy_sampling_params_from_run_config(&cfg, &p), 0);
    assert_float_equal(p.temperature, 0.7, 1e-6);
    assert_int_equal(p.top_k, 20);
    assert_true(p.has_seed);
    assert_int_equal(p.seed, 1234);
    assert_int_equal(p.max_new_tokens, 112);
    hy_run_config_free(&cfg);
}

static void test_booleans(void **state)
{
    (void)state;
    const char *vals[] = {"True", "true", "TRUE", "False", "false", "FALSE"};
    for (int i = 0; i < 6; i++) {
        char text[256];
        snprintf(text, sizeof(text), MODEL "data_config:\n  apply_chat_template: %s\n", vals[i]);
        struct hy_run_config cfg;
        assert_int_equal(load_text(text, &cfg, NULL), 0);
        assert_int_equal(cfg.apply_chat_template, i < 3);
        hy_run_config_free(&cfg);
    }
    expect_error(MODEL "data_config:\n  apply_chat_template: yes\n", "cfg.yaml:4:", "data_config.apply_chat_template",
                 "expected true or false", "\"yes\"", NULL);
    expect_error(MODEL "data_config:\n  apply_chat_template: \"true\"\n", "data_config.apply_chat_template", "quoted",
                 NULL);
    expect_error(MODEL "data_config:\n  apply_chat_template: 1\n", "data_config.apply_chat_template", "\"1\"", NULL);
}

static void test_unknown_keys(void **state)
{
    (void)state;
    expect_error(MODEL "scheduler_config:\n  batch_sise: 4\n",
                 "cfg.yaml:4:", "scheduler_config.batch_sise: unknown key", "did you mean batch_size", NULL);
    expect_error(MODEL "model_config2:\n  x: 1\n", "cfg.yaml:3:", "model_config2: unknown key", NULL);
    expect_error("model_config:\n  model_path: /m\n  quantization: fp8\n", "model_config.quantization: unknown key",
                 NULL);
    expect_error(MODEL "  custom_params:\n    enable_sp: False\n    enable_foo: True\n",
                 "cfg.yaml:5:", "model_config.custom_params.enable_foo: unknown key", NULL);
    expect_error(MODEL "sampling:\n  top_n: 3\n", "sampling.top_n: unknown key", NULL);
    expect_error(MODEL "scheduler_config:\n  sampling:\n    temprature: 1\n",
                 "scheduler_config.sampling.temprature: unknown key", "did you mean temperature", NULL);
    /* a section name used as a leaf in the wrong place is unknown there */
    expect_error(MODEL "data_config:\n  parallel_config: 1\n", "data_config.parallel_config: unknown key", NULL);
}

static void test_type_errors(void **state)
{
    (void)state;
    expect_error(MODEL "scheduler_config:\n  batch_size: \"four\"\n", "cfg.yaml:4:", "scheduler_config.batch_size",
                 "\"four\"", NULL);
    expect_error(MODEL "scheduler_config:\n  batch_size: four\n", "cfg.yaml:4:", "scheduler_config.batch_size",
                 "expected an integer >= 1", "\"four\"", NULL);
    expect_error(MODEL "scheduler_config:\n  batch_size: \"4\"\n", "scheduler_config.batch_size", "quoted", NULL);
    expect_error(MODEL "scheduler_config:\n  batch_size: -3\n", "cfg.yaml:4:", "scheduler_config.batch_size", "\"-3\"",
                 NULL);
    expect_error(MODEL "scheduler_config:\n  batch_size: 0\n", "scheduler_config.batch_size", "\"0\"", NULL);
    expect_error(MODEL "scheduler_config:\n  batch_size: 4.5\n", "scheduler_config.batch_size", "\"4.5\"", NULL);
    expect_error(MODEL "scheduler_config:\n  max_new_tokens: 99999999999\n", "scheduler_config.max_new_tokens",
                 "99999999999", NULL);
    expect_error(MODEL "scheduler_config:\n  num_reserved_decode_tokens: -1\n",
                 "scheduler_config.num_reserved_decode_tokens", "\"-1\"", NULL);
    expect_error(MODEL "data_config:\n  input_truncated_len: -400\n", "cfg.yaml:4:", "data_config.input_truncated_len",
                 "\"-400\"", NULL);
    expect_error(MODEL "  dtype: float16\n", "cfg.yaml:3:", "model_config.dtype", "bfloat16, float32", "\"float16\"",
                 NULL);
    expect_error(MODEL "  kv_cache_dtype: fp8_e5m2\n", "cfg.yaml:3:", "model_config.kv_cache_dtype",
                 "auto, bf16, bfloat16, fp8, fp8_e4m3, fp32, float32", "\"fp8_e5m2\"", NULL);
    expect_error(MODEL "  next_n: 1.5\n", "model_config.next_n", "\"1.5\"", NULL);
    expect_error(MODEL "  next_n: 99\n", "model_config.next_n", "[0, 16]", NULL);
    expect_error(MODEL "data_config:\n  dataset: \"MMLU\"\n", "cfg.yaml:4:", "data_config.dataset",
                 "default, LongBench, InfiniteBench", "\"MMLU\"", NULL);
    expect_error(MODEL "sampling:\n  temperature: -1\n", "sampling.temperature", "\"-1\"", NULL);
    expect_error(MODEL "sampling:\n  top_p: 1.5\n", "sampling.top_p", "(0, 1]", "\"1.5\"", NULL);
    expect_error(MODEL "sampling:\n  top_p: 0\n", "sampling.top_p", "\"0\"", NULL);
    expect_error(MODEL "sampling:\n  temperature: .nan\n", "sampling.temperature", NULL);
    expect_error(MODEL "sampling:\n  seed: -5\n", "sampling.seed", "\"-5\"", NULL);
    expect_error(MODEL "scheduler_config:\n  mem_fraction_static: 2\n", "scheduler_config.mem_fraction_static", "\"2\"",
                 NULL);
    /* structure */
    expect_error(MODEL "scheduler_config:\n  batch_size: [1, 2]\n", "cfg.yaml:4:", "scheduler_config.batch_size",
                 "a sequence", NULL);
    expect_error("model_config: 3\n", "cfg.yaml:1:", "model_config", "expected a mapping", NULL);
    expect_error("- model_config\n", "top level", "a sequence", NULL);
    expect_error(MODEL "  model_path: /other\n", "cfg.yaml:3:", "model_config.model_path", "duplicate key", NULL);
    expect_error(MODEL "scheduler_config:\n  batch_size: 4\n  batch_size: 8\n", "scheduler_config.batch_size",
                 "duplicate key", "line 4", NULL);
}

static void test_semantic_errors(void **state)
{
    (void)state;
    expect_error("data_config:\n  dataset: default\n", "cfg.yaml", "model_config.model_path: required key missing",
                 NULL);
    expect_error("model_config:\n  model_path: \"\"\n", "model_config.model_path", "required", NULL);
    expect_error(MODEL "  with_ckpt: False\n", "cfg.yaml:3:", "model_config.with_ckpt=False",
                 "random weights are not supported", NULL);
    expect_error(MODEL "data_config:\n  dataset: LongBench\n", "cfg.yaml:4:", "data_config.dataset=LongBench",
                 "dataset_path", NULL);
    expect_error(MODEL "data_config:\n  dataset: InfiniteBench\n  dataset_path: \"\"\n",
                 "data_config.dataset=InfiniteBench", "dataset_path", NULL);
    expect_error(MODEL "parallel_config:\n  world_size: 4\n  attn_tp_size: 3\n",
                 "cfg.yaml:5:", "parallel_config.attn_tp_size=3 does not divide world_size 4", NULL);
    expect_error(MODEL "parallel_config:\n  world_size: 1\n  moe_tp_size: 2\n",
                 "cfg.yaml:5:", "parallel_config.moe_tp_size=2 does not divide world_size 1", NULL);
    expect_error(MODEL "parallel_config:\n  cp_size: 2\n", "parallel_config.cp_size=2: context parallelism", NULL);
    expect_error(MODEL "parallel_config:\n  world_size: 4\n  dense_tp_size: 2\n  shared_tp_size: 4\n",
                 "parallel_config.shared_tp_size=4", "dense_tp_size 2", NULL);
    expect_error(MODEL "parallel_config:\n  world_size: 0\n", "parallel_config.world_size", "\"0\"", NULL);
}

static void test_syntax_and_files(void **state)
{
    (void)state;
    expect_error(MODEL "scheduler_config:\n  batch_size: 4\n    block_size: 2\n", "cfg.yaml:5:", "YAML syntax error",
                 NULL);
    expect_error(MODEL "data_config: [unclosed\n", "cfg.yaml", "YAML syntax error", NULL);
    expect_error("", "cfg.yaml", "empty config", NULL);
    expect_error("# only a comment\n", "cfg.yaml", "empty config", NULL);
    expect_error(MODEL "---\nmodel_config: {}\n", "cfg.yaml:4:", "second YAML document", NULL);
    struct hy_run_config cfg;
    assert_int_equal(hy_run_config_load("/nonexistent/dir/x.yaml", &cfg), -1);
    assert_non_null(strstr(hy_err_msg(), "/nonexistent/dir/x.yaml"));
    hy_run_config_free(&cfg);
}

static void test_null_and_empty_values(void **state)
{
    (void)state;
    struct hy_run_config cfg;
    const char *text = MODEL "  output_path: ~\n  custom_params:\n"
                             "data_config:\n  dataset_path: \"\"\n  input_truncated_len: null\n"
                             "scheduler_config:\n";
    assert_int_equal(load_text(text, &cfg, NULL), 0);
    assert_null(cfg.output_path);
    assert_null(cfg.dataset_path);
    assert_int_equal(cfg.input_truncated_len, 0);
    hy_run_config_free(&cfg);
}

static void test_ascend_warning(void **state)
{
    (void)state;
    struct hy_run_config cfg;
    char *err = NULL;
    const char *text = "model_config:\n"
                       "  model_path: /m\n"
                       "  platform_version: \"A3\"\n"
                       "  exe_mode: \"ge_graph\"\n"
                       "  enable_profiler: False\n"
                       "  enable_cache_compile: True\n"
                       "  enable_static_kernel: False\n"
                       "  force_eplb: False\n"
                       "  enable_weight_nz: True\n"
                       "  custom_params:\n"
                       "    enable_online_split_weight: True\n"
                       "    enable_multi_streams: False\n"
                       "    enable_sp: False\n"
                       "scheduler_config:\n"
                       "  mem_fraction_static: 0.45\n";
    assert_int_equal(load_text(text, &cfg, &err), 0);
    const char *names[] = {"model_config.platform_version",
                           "model_config.exe_mode",
                           "model_config.enable_profiler",
                           "model_config.enable_cache_compile",
                           "model_config.enable_static_kernel",
                           "model_config.force_eplb",
                           "model_config.enable_weight_nz",
                           "model_config.custom_params.enable_online_split_weight",
                           "model_config.custom_params.enable_multi_streams",
                           "scheduler_config.mem_fraction_static"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        assert_non_null(strstr(err, names[i]));
        assert_non_null(strstr(cfg.ignored_keys, names[i]));
    }
    assert_non_null(strstr(err, "warning"));
    /* exactly one line */
    size_t len = strlen(err);
    assert_true(len > 0 && err[len - 1] == '\n');
    assert_ptr_equal(strchr(err, '\n'), err + len - 1);
    free(err);
    hy_run_config_free(&cfg);
    /* Ascend-only keys are still type-checked */
    expect_error(MODEL "  enable_profiler: maybe\n", "model_config.enable_profiler", "\"maybe\"", NULL);
}

static void test_path_resolution(void **state)
{
    (void)state;
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/models", tmpdir);
    mkdir(dir, 0755);
    snprintf(dir, sizeof(dir), "%s/models/m", tmpdir);
    assert_int_equal(mkdir(dir, 0755), 0);
    write_file("prompts.json", "[\"a\"]");
    struct hy_run_config cfg;
    assert_int_equal(load_text("model_config:\n  model_path: models/m\n"
                               "data_config:\n  dataset_path: prompts.json\n",
                               &cfg, NULL),
                     0);
    char want[512];
    snprintf(want, sizeof(want), "%s/models/m", tmpdir);
    assert_string_equal(cfg.model_path, want);
    snprintf(want, sizeof(want), "%s/prompts.json", tmpdir);
    assert_string_equal(cfg.dataset_path, want);
    hy_run_config_free(&cfg);
    /* not present next to the YAML: kept as given (relative to the current directory) */
    assert_int_equal(load_text("model_config:\n  model_path: no/such/dir\n", &cfg, NULL), 0);
    assert_string_equal(cfg.model_path, "no/such/dir");
    hy_run_config_free(&cfg);
    assert_int_equal(load_text("model_config:\n  model_path: /abs/path\n", &cfg, NULL), 0);
    assert_string_equal(cfg.model_path, "/abs/path");
    hy_run_config_free(&cfg);
}

static const char *repo_root(void)
{
    const char *r = getenv("HYINFER_ROOT");
    return r && *r ? r : ".";
}

static void test_repo_default_yaml(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof(path), "%s/configs/default.yaml", repo_root());
    if (!hy_file_exists(path))
        fail_msg("%s missing (run from the repo root or set HYINFER_ROOT)", path);
    struct hy_run_config cfg;
    char *err = NULL;
    int rc = load_path(path, &cfg, &err);
    if (rc != 0)
        fail_msg("%s", hy_err_msg());
    assert_string_equal(err, ""); /* a clean config: no warning */
    free(err);
    assert_int_equal(cfg.batch_size, 8);
    assert_string_equal(cfg.dataset, "default");
    assert_string_equal(cfg.dtype, "bfloat16");
    assert_int_equal(cfg.next_n, 0);
    assert_int_equal(cfg.world_size, 1);
    assert_true(cfg.max_new_tokens >= 16);
    assert_non_null(strstr(cfg.model_path, "models/hy3-tiny"));
    hy_run_config_free(&cfg);

    snprintf(path, sizeof(path), "%s/configs/hy3_ascend_style.yaml", repo_root());
    rc = load_path(path, &cfg, &err);
    if (rc != 0)
        fail_msg("%s", hy_err_msg());
    assert_non_null(strstr(err, "model_config.exe_mode"));
    assert_non_null(strstr(err, "scheduler_config.mem_fraction_static"));
    assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);
    free(err);
    hy_run_config_free(&cfg);
}

static void test_shared_example(void **state)
{
    (void)state;
    const char *root = getenv("HYINFER_ROOT"); /* unset: run from the repository root */
    char path[512];
    snprintf(path, sizeof(path), "%s/tests/data/hy3/cann_recipes_hy3_example.yaml", root && *root ? root : ".");
    if (!hy_file_exists(path))
        fail_msg("%s not found (run from the repository root or set HYINFER_ROOT)", path);
    char *text = NULL;
    size_t len;
    assert_int_equal(hy_file_read_all(path, &text, &len), 0);
    struct hy_run_config cfg;
    char *err = NULL;
    int rc = load_path(path, &cfg, &err);
    if (rc != 0)
        fail_msg("%s", hy_err_msg());
    assert_int_equal(cfg.world_size, 16); /* the recipe's 16-die layout loads; mpirun -np 16 runs it */
    assert_int_equal(cfg.attn_tp_size, 4);
    assert_int_equal(cfg.moe_tp_size, 1);
    assert_int_equal(cfg.enable_sp, 0);
    hy_run_config_free(&cfg);
    /* the warning names every Ascend-only key, as one line */
    const char *names[] = {"model_config.platform_version",
                           "model_config.exe_mode",
                           "model_config.enable_profiler",
                           "model_config.enable_cache_compile",
                           "model_config.custom_params.enable_online_split_weight",
                           "model_config.custom_params.enable_multi_streams",
                           "scheduler_config.mem_fraction_static"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strstr(err, names[i]))
            fail_msg("warning \"%s\" lacks %s", err, names[i]);
    assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);
    free(err);

    /* the same file cut down to one rank loads */
    const char *p = strstr(text, "parallel_config:");
    const char *q = strstr(text, "scheduler_config:");
    assert_non_null(p);
    assert_non_null(q);
    char *one = malloc(len + 64);
    size_t a = (size_t)(p - text);
    memcpy(one, text, a);
    strcpy(one + a, "parallel_config:\n  world_size: 1\n\n");
    strcat(one, q);
    free(text);
    rc = load_text(one, &cfg, NULL);
    free(one);
    if (rc != 0)
        fail_msg("%s", hy_err_msg());
    assert_string_equal(cfg.model_path, "/data/models/Hy3-BF16");
    assert_int_equal(cfg.next_n, 1);
    assert_int_equal(cfg.input_truncated_len, 400);
    assert_int_equal(cfg.max_new_tokens, 112);
    assert_int_equal(cfg.batch_size, 4);
    hy_run_config_free(&cfg);
}

int main(void)
{
    hy_log_set_level(HY_LOG_INFO); /* the warning tests need warnings, whatever HYINFER_LOG says */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),          cmocka_unit_test(test_full_config),
        cmocka_unit_test(test_booleans),          cmocka_unit_test(test_unknown_keys),
        cmocka_unit_test(test_type_errors),       cmocka_unit_test(test_semantic_errors),
        cmocka_unit_test(test_syntax_and_files),  cmocka_unit_test(test_null_and_empty_values),
        cmocka_unit_test(test_ascend_warning),    cmocka_unit_test(test_path_resolution),
        cmocka_unit_test(test_repo_default_yaml), cmocka_unit_test(test_shared_example),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
