/* test_dataset.c - prompts of offline runs: the bundled default list, dataset_path overrides,
 * LongBench / InfiniteBench jsonl, and the errors for bad files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/fileio.h"
#include "cli/dataset.h"
#include "config/run_config.h"

static char tmpdir[256];

static int setup_dir(void **state)
{
    (void)state;
    const char *base = access("build", W_OK) == 0 ? "build" : "/tmp";
    snprintf(tmpdir, sizeof(tmpdir), "%s/test_dataset_XXXXXX", base);
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

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

static const char *repo_root(void)
{
    const char *r = getenv("HYINFER_ROOT");
    return r && *r ? r : ".";
}

/* A config as the YAML loader would leave it, without a YAML file. */
static void make_cfg(struct hy_run_config *cfg, const char *dataset, const char *path)
{
    assert_int_equal(hy_run_config_init(cfg), 0);
    free(cfg->dataset);
    cfg->dataset = strdup(dataset);
    cfg->dataset_path = path ? strdup(path) : NULL;
}

static void test_default_prompts(void **state)
{
    (void)state;
    struct hy_run_config cfg;
    make_cfg(&cfg, "default", NULL);
    struct hy_dataset ds;
    if (hy_dataset_load(&cfg, repo_root(), &ds) != 0)
        fail_msg("%s", hy_err_msg());
    assert_true(ds.n >= 8);
    assert_non_null(strstr(ds.source, "data/prompts_default.json"));
    int romeo = 0;
    for (size_t i = 0; i < ds.n; i++) {
        assert_true(strlen(ds.prompts[i]) > 0);
        assert_null(ds.references[i]);
        romeo |= !strcmp(ds.prompts[i], "ROMEO:\n");
    }
    assert_true(romeo);
    hy_dataset_free(&ds);
    /* found from the YAML's directory alone (configs/ -> ../data): no root, no HYINFER_ROOT,
     * another current directory */
    char abs[PATH_MAX], dir[PATH_MAX + 16], cwd[PATH_MAX];
    assert_non_null(realpath(repo_root(), abs));
    snprintf(dir, sizeof(dir), "%s/configs", abs);
    cfg.config_dir = strdup(dir);
    char *saved = getenv("HYINFER_ROOT") ? strdup(getenv("HYINFER_ROOT")) : NULL;
    unsetenv("HYINFER_ROOT");
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(tmpdir), 0);
    int rc = hy_dataset_load(&cfg, NULL, &ds);
    assert_int_equal(chdir(cwd), 0);
    if (saved) {
        setenv("HYINFER_ROOT", saved, 1);
        free(saved);
    }
    if (rc != 0)
        fail_msg("%s", hy_err_msg());
    assert_true(ds.n >= 8);
    assert_non_null(strstr(ds.source, "configs/../data/prompts_default.json"));
    hy_dataset_free(&ds);
    hy_run_config_free(&cfg);
}

static void test_default_not_found(void **state)
{
    (void)state;
    struct hy_run_config cfg;
    make_cfg(&cfg, "default", NULL);
    char *saved = getenv("HYINFER_ROOT") ? strdup(getenv("HYINFER_ROOT")) : NULL;
    unsetenv("HYINFER_ROOT");
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(tmpdir), 0);
    struct hy_dataset ds;
    int rc = hy_dataset_load(&cfg, "/nonexistent", &ds);
    assert_int_equal(chdir(cwd), 0);
    if (saved) {
        setenv("HYINFER_ROOT", saved, 1);
        free(saved);
    }
    assert_int_equal(rc, -1);
    assert_non_null(strstr(hy_err_msg(), "data/prompts_default.json"));
    assert_non_null(strstr(hy_err_msg(), "dataset_path"));
    assert_int_equal(ds.n, 0);
    hy_run_config_free(&cfg);
}

static void test_default_override(void **state)
{
    (void)state;
    const char *p = write_file("mine.json", "[\"KING LEAR:\\n\", \"Caf\\u00e9 \\u2014 ok\"]");
    struct hy_run_config cfg;
    make_cfg(&cfg, "default", p);
    struct hy_dataset ds;
    if (hy_dataset_load(&cfg, repo_root(), &ds) != 0)
        fail_msg("%s", hy_err_msg());
    assert_int_equal(ds.n, 2);
    assert_string_equal(ds.prompts[0], "KING LEAR:\n");
    assert_string_equal(ds.prompts[1], "Caf\xc3\xa9 \xe2\x80\x94 ok");
    hy_dataset_free(&ds);
    hy_run_config_free(&cfg);
}

static void expect_array_error(const char *text, const char *frag)
{
    const char *p = write_file("bad.json", text);
    struct hy_dataset ds;
    assert_int_equal(hy_dataset_load_prompt_array(p, &ds), -1);
    const char *msg = hy_err_msg();
    if (!strstr(msg, "bad.json") || !strstr(msg, frag))
        fail_msg("message \"%s\" lacks the file name or \"%s\"", msg, frag);
    assert_int_equal(ds.n, 0);
    assert_null(ds.prompts);
}

static void test_prompt_array_errors(void **state)
{
    (void)state;
    expect_array_error("[\"a\",\n \"b\",\n oops]", "bad.json:3:");
    expect_array_error("{\"prompts\": []}", "expected a JSON array");
    expect_array_error("[\"a\", 3]", "element 1: expected a non-empty string");
    expect_array_error("[\"a\", \"\"]", "element 1");
    expect_array_error("[]", "no prompts");
    expect_array_error("", "invalid JSON");
    struct hy_dataset ds;
    assert_int_equal(hy_dataset_load_prompt_array("/nonexistent/p.json", &ds), -1);
    assert_non_null(strstr(hy_err_msg(), "/nonexistent/p.json"));
}

static void test_longbench(void **state)
{
    (void)state;
    const char *p = write_file(
        "lb.jsonl", "{\"input\": \"Who wrote it?\", \"context\": \"A play by Will.\", \"answers\": [\"Will\", "
                    "\"Shakespeare\"], \"length\": 4, \"dataset\": \"narrativeqa\", \"_id\": \"x1\"}\n"
                    "\n"
                    "{\"context\": \"Line one.\\nLine two.\", \"input\": \"Summarize.\", \"answers\": []}\r\n"
                    "{\"context\": \"C\", \"input\": \"I\"}");
    struct hy_run_config cfg;
    make_cfg(&cfg, "LongBench", p);
    struct hy_dataset ds;
    if (hy_dataset_load(&cfg, NULL, &ds) != 0)
        fail_msg("%s", hy_err_msg());
    assert_int_equal(ds.n, 3);
    assert_string_equal(ds.prompts[0], "A play by Will.\n\nNow, answer the question based on the "
                                       "text above.\nQuestion: Who wrote it?\nAnswer:");
    char want[256];
    snprintf(want, sizeof(want), HY_DATASET_QA_TEMPLATE, "Line one.\nLine two.", "Summarize.");
    assert_string_equal(ds.prompts[1], want);
    assert_string_equal(ds.references[0], "Will");
    assert_null(ds.references[1]);
    assert_null(ds.references[2]);
    hy_dataset_free(&ds);
    hy_run_config_free(&cfg);
}

static void test_infinitebench(void **state)
{
    (void)state;
    const char *p =
        write_file("ib.jsonl", "{\"id\": 0, \"context\": \"Long book.\", \"input\": \"Q1\", \"answer\": [\"A1\"], "
                               "\"options\": []}\n"
                               "{\"id\": 1, \"context\": \"Other.\", \"input\": \"Q2\", \"answer\": \"A2\", "
                               "\"answers\": [\"ignored\"]}\n");
    struct hy_run_config cfg;
    make_cfg(&cfg, "InfiniteBench", p);
    struct hy_dataset ds;
    if (hy_dataset_load(&cfg, NULL, &ds) != 0)
        fail_msg("%s", hy_err_msg());
    assert_int_equal(ds.n, 2);
    char want[256];
    snprintf(want, sizeof(want), HY_DATASET_QA_TEMPLATE, "Long book.", "Q1");
    assert_string_equal(ds.prompts[0], want);
    assert_string_equal(ds.references[0], "A1");
    assert_string_equal(ds.references[1], "A2");
    hy_dataset_free(&ds);
    hy_run_config_free(&cfg);
}

static void expect_jsonl_error(const char *dataset, const char *text, const char *frag)
{
    const char *p = write_file("bad.jsonl", text);
    struct hy_run_config cfg;
    make_cfg(&cfg, dataset, p);
    struct hy_dataset ds;
    assert_int_equal(hy_dataset_load(&cfg, NULL, &ds), -1);
    const char *msg = hy_err_msg();
    if (!strstr(msg, "bad.jsonl") || !strstr(msg, frag))
        fail_msg("message \"%s\" lacks the file name or \"%s\"", msg, frag);
    assert_int_equal(ds.n, 0);
    hy_run_config_free(&cfg);
}

static void test_jsonl_errors(void **state)
{
    (void)state;
    const char *ok = "{\"context\": \"c\", \"input\": \"i\", \"answers\": [\"a\"]}\n";
    char text[512];
    snprintf(text, sizeof(text), "%s%s{\"context\": \"c\", \"input\": }\n", ok, ok);
    expect_jsonl_error("LongBench", text, "bad.jsonl:3: invalid JSON");
    snprintf(text, sizeof(text), "%s\n{\"input\": \"i\"}\n", ok);
    expect_jsonl_error("LongBench", text, "bad.jsonl:3: missing field \"context\"");
    snprintf(text, sizeof(text), "%s{\"context\": \"c\"}\n", ok);
    expect_jsonl_error("LongBench", text, "bad.jsonl:2: missing field \"input\"");
    expect_jsonl_error("LongBench", "{\"context\": 5, \"input\": \"i\"}\n",
                       "bad.jsonl:1: field \"context\": expected a string");
    expect_jsonl_error("LongBench", "{\"context\": \"c\", \"input\": \"i\", \"answers\": [1]}\n",
                       "bad.jsonl:1: field \"answers\"[0]: expected a string");
    expect_jsonl_error("InfiniteBench", "{\"context\": \"c\", \"input\": \"i\", \"answer\": 7}\n",
                       "bad.jsonl:1: field \"answer\": expected a string or an array");
    expect_jsonl_error("InfiniteBench", "[\"not\", \"an object\"]\n", "bad.jsonl:1: expected a JSON object");
    expect_jsonl_error("LongBench", "\n  \n", "no records");
    /* a whole JSON array instead of JSON Lines */
    expect_jsonl_error("LongBench", "[\n{\"context\": \"c\", \"input\": \"i\"}\n]\n", "bad.jsonl:1: invalid JSON");

    struct hy_run_config cfg;
    make_cfg(&cfg, "LongBench", "/nonexistent/lb.jsonl");
    struct hy_dataset ds;
    assert_int_equal(hy_dataset_load(&cfg, NULL, &ds), -1);
    assert_non_null(strstr(hy_err_msg(), "/nonexistent/lb.jsonl"));
    hy_run_config_free(&cfg);
    make_cfg(&cfg, "LongBench", NULL);
    assert_int_equal(hy_dataset_load(&cfg, NULL, &ds), -1);
    assert_non_null(strstr(hy_err_msg(), "dataset_path"));
    hy_run_config_free(&cfg);
}

/* The whole chain: a YAML file next to its dataset, relative dataset_path. */
static void test_from_yaml(void **state)
{
    (void)state;
    write_file("q.jsonl", "{\"context\": \"ctx\", \"input\": \"in\", \"answers\": [\"a\"]}\n");
    const char *y = write_file("run.yaml", "model_config:\n  model_path: /m\n"
                                           "data_config:\n  dataset: LongBench\n"
                                           "  dataset_path: q.jsonl\n");
    struct hy_run_config cfg;
    if (hy_run_config_load(y, &cfg) != 0)
        fail_msg("%s", hy_err_msg());
    struct hy_dataset ds;
    if (hy_dataset_load(&cfg, NULL, &ds) != 0)
        fail_msg("%s", hy_err_msg());
    assert_int_equal(ds.n, 1);
    char want[128];
    snprintf(want, sizeof(want), HY_DATASET_QA_TEMPLATE, "ctx", "in");
    assert_string_equal(ds.prompts[0], want);
    hy_dataset_free(&ds);
    hy_run_config_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_prompts),  cmocka_unit_test(test_default_not_found),
        cmocka_unit_test(test_default_override), cmocka_unit_test(test_prompt_array_errors),
        cmocka_unit_test(test_longbench),        cmocka_unit_test(test_infinitebench),
        cmocka_unit_test(test_jsonl_errors),     cmocka_unit_test(test_from_yaml),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
