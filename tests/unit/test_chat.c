/* test_chat.c - chat templates: where they come from (--chat-template, chat_template.jinja,
 * tokenizer_config.json), the official Hy3 template rendered by the Jinja interpreter against fixed
 * expectations (rendered once by jinja2 with tools/ref/render_chat_template.py), error texts, the
 * tool-argument rewrite, and the Python json.dumps / str() forms rendering relies on. The exhaustive
 * byte-for-byte comparisons against live jinja2 are tests/golden/test_chat_template.py and
 * test_jinja_templates.py. */
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
#include "text/chat.h"
#include "text/pyjson.h"

static struct hy_chat hy3; /* tests/data/hy3/tencent-Hy3.jinja */

static const char *root(void)
{
    const char *r = getenv("HYINFER_ROOT");
    return r && *r ? r : ".";
}

static int setup(void **state)
{
    (void)state;
    char p[1024];
    snprintf(p, sizeof(p), "%s/tests/data/hy3/tencent-Hy3.jinja", root());
    if (hy_chat_load(&hy3, "/nonexistent-model-dir", p)) {
        fprintf(stderr, "loading %s: %s\n", p, hy_err_msg());
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hy_chat_free(&hy3);
    return 0;
}

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
    if (!j)
        fail_msg("bad test JSON: %s", e.text);
    return j;
}

/* Renders with the template kwargs kw_text (NULL: none) and compares with want (NULL: must fail
 * with an error containing want_err). */
static void check(const char *msgs_text, const char *tools_text, const char *kw_text, const char *want,
                  const char *want_err)
{
    json_t *msgs = parse(msgs_text);
    json_t *tools = tools_text ? parse(tools_text) : NULL;
    json_t *kw = kw_text ? parse(kw_text) : NULL;
    char *got = hy_chat_apply(&hy3, msgs, tools, kw);
    if (want) {
        if (!got)
            fail_msg("render failed: %s", hy_err_msg());
        assert_string_equal(got, want);
    } else {
        assert_null(got);
        assert_non_null(strstr(hy_err_msg(), want_err));
    }
    free(got);
    json_decref(msgs);
    json_decref(tools);
    json_decref(kw);
}

#define BOS "<｜hy_begin_of_sentence:opensource｜>"

static void test_plain_turns(void **state)
{
    (void)state;
    check("[{\"role\":\"user\",\"content\":\"Hello\"},"
          " {\"role\":\"assistant\",\"content\":\"Hi.\",\"reasoning_content\":\"old\"},"
          " {\"role\":\"user\",\"content\":\"Bye\"}]",
          NULL, "{\"add_generation_prompt\": true}",
          BOS "<｜reasoning_mode:opensource｜>reasoning_effort:no_think<｜hy_User:opensource｜>Hello"
              "<｜hy_Assistant:opensource｜><think:opensource></think:opensource>Hi.<｜hy_eos:opensource｜>"
              "<｜hy_User:opensource｜>Bye<｜hy_Assistant:opensource｜><think:opensource></think:opensource>",
          NULL);
    /* no kwargs: add_generation_prompt is false */
    json_t *m = parse("[{\"role\":\"user\",\"content\":\"x\"}]");
    char *s = hy_chat_apply(&hy3, m, NULL, NULL);
    assert_non_null(s);
    assert_null(strstr(s, "<｜hy_Assistant:opensource｜>"));
    free(s);
    json_decref(m);
}

static void test_system_high(void **state)
{
    (void)state;
    check("[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"你好 🙂\"}]", NULL,
          "{\"add_generation_prompt\": true, \"reasoning_effort\": \"high\"}",
          BOS "Be brief.<｜reasoning_mode:opensource｜>reasoning_effort:high<｜hy_User:opensource｜>你好 🙂"
              "<｜hy_Assistant:opensource｜><think:opensource>",
          NULL);
}

static void test_tools(void **state)
{
    (void)state;
    check(
        "[{\"role\":\"user\",\"content\":\"w?\"},"
        " {\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\",\"function\":"
        "   {\"name\":\"get_weather\",\"arguments\":{\"city\":\"Zürich\",\"days\":2,\"metric\":true,"
        "    \"opt\":{\"a\":[1.5,null]}}}}]},"
        " {\"role\":\"tool\",\"content\":\"rain\"},{\"role\":\"tool\",\"content\":\"12C\"},"
        " {\"role\":\"assistant\",\"content\":\"Rain.\",\"reasoning_content\":\"r\"}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}}]",
        "{\"reasoning_effort\": \"low\"}",
        "<｜hy_begin_of_sentence:opensource｜># Tools\n"
        "\n"
        "You may call one or more functions to assist with the user query.\n"
        "\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        "<tools>\n"
        "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\"}}}\n"
        "</tools>\n"
        "\n"
        "For function call returns, you should first print <tool_calls:opensource>\n"
        "For each function call, you should return object like:\n"
        "<tool_call:opensource>{function-name}<tool_sep:opensource>\n"
        "<arg_key:opensource>{arg-key-1}</arg_key:opensource>\n"
        "<arg_value:opensource>{arg-value-1}</arg_value:opensource>\n"
        "<arg_key:opensource>{arg-key-2}</arg_key:opensource>\n"
        "<arg_value:opensource>{arg-value-2}</arg_value:opensource>\n"
        "...\n"
        "</tool_call:opensource>\n"
        "At the end of function call returns, you should print "
        "</"
        "tool_calls:opensource><｜reasoning_mode:opensource｜>reasoning_effort:low<｜hy_User:opensource｜>w?<｜hy_"
        "Assistant:opensource｜><think:opensource></think:opensource><tool_calls:opensource>\n"
        "<tool_call:opensource>get_weather<tool_sep:opensource>\n"
        "<arg_key:opensource>city</arg_key:opensource>\n"
        "<arg_value:opensource>Zürich</arg_value:opensource>\n"
        "<arg_key:opensource>days</arg_key:opensource>\n"
        "<arg_value:opensource>2</arg_value:opensource>\n"
        "<arg_key:opensource>metric</arg_key:opensource>\n"
        "<arg_value:opensource>true</arg_value:opensource>\n"
        "<arg_key:opensource>opt</arg_key:opensource>\n"
        "<arg_value:opensource>{\"a\": [1.5, null]}</arg_value:opensource>\n"
        "</tool_call:opensource>\n"
        "</tool_calls:opensource><｜hy_eos:opensource｜><tool_responses:opensource>\n"
        "<tool_response:opensource>\n"
        "rain\n"
        "</tool_response:opensource>\n"
        "<tool_response:opensource>\n"
        "12C\n"
        "</tool_response:opensource>\n"
        "</tool_responses:opensource><｜hy_Assistant:opensource｜><think:opensource>r</think:opensource>Rain.",
        NULL);
}

static void test_errors(void **state)
{
    (void)state;
    const char *m = "[{\"role\":\"user\",\"content\":\"q\"}]";
    check(m, NULL, "{\"reasoning_effort\": \"medium\"}", NULL,
          "reasoning_effort error : medium, should be no_think/low/high");
    check(m, NULL, "{\"reasoning_effort\": null}", NULL, "reasoning_effort error : None, should be no_think/low/high");
    check(m, NULL, "{\"reasoning_effort\": 3}", NULL, "can only concatenate str (not \"int\") to str");
    check("[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":"
          "{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1}\"}}]}]",
          NULL, "{}", NULL, "'str object' has no attribute 'items'");
    check("[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":null}]}]", NULL, "{}", NULL,
          "'None' has no attribute 'name'");
    check(m, "7", "{}", NULL, "'int' object is not iterable");
    check("null", NULL, "{}", NULL, "'NoneType' object is not iterable");
}

static void test_kwargs_defaults(void **state)
{
    (void)state;
    /* fallback_strategy forces high effort and no generation prompt; an empty tools list counts as
     * no tools (reasoning mode in the system prompt, reasoning before the last user turn dropped). */
    check("[{\"role\":\"user\",\"content\":\"a\"},"
          " {\"role\":\"assistant\",\"content\":\"b\",\"reasoning_content\":\"r\"},"
          " {\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"c\"},\"d\",{\"type\":\"image\"}]}]",
          "[]", "{\"add_generation_prompt\": true, \"fallback_strategy\": \"reasoning_toolcall_retry\"}",
          BOS "<｜reasoning_mode:opensource｜>reasoning_effort:high<｜hy_User:opensource｜>a"
              "<｜hy_Assistant:opensource｜><think:opensource></think:opensource>b<｜hy_eos:opensource｜>"
              "<｜hy_User:opensource｜>cd",
          NULL);
    check("[{\"role\":\"user\",\"content\":\"a\"},"
          " {\"role\":\"assistant\",\"content\":\"b\",\"reasoning_content\":\"r\"}]",
          NULL, "{\"preserved_thinking\": 1, \"raw_last_assistant\": true}",
          BOS "<｜reasoning_mode:opensource｜>reasoning_effort:no_think<｜hy_User:opensource｜>a"
              "<｜hy_Assistant:opensource｜>b",
          NULL);
}

static void dumps_is(const char *json_text, const char *want, int as_str)
{
    json_t *j = json_loads(json_text, JSON_DECODE_ANY, NULL);
    assert_non_null(j);
    struct hy_pyjson_buf b;
    hy_pyjson_buf_init(&b);
    if (as_str)
        hy_pyjson_str(&b, j);
    else
        hy_pyjson_dumps(&b, j);
    char *s = hy_pyjson_buf_take(&b);
    assert_string_equal(s, want);
    free(s);
    json_decref(j);
}

static void test_pyjson(void **state)
{
    (void)state;
    dumps_is("{\"a\": [1, 2.0, true, null, \"x\\\"\\\\\\n\\u0001\\u007f\"], \"b\": {}, \"c\": []}",
             "{\"a\": [1, 2.0, true, null, \"x\\\"\\\\\\n\\u0001\x7f\"], \"b\": {}, \"c\": []}", 0);
    dumps_is("\"°C 中\"", "\"°C 中\"", 0);
    dumps_is("{\"k\": \"it's \\u3000\\u00a0\\u200b!\", \"v\": [1e22, null, \"\\\"q\\\"\", false]}",
             "{'k': \"it's \\u3000\\xa0\\u200b!\", 'v': [1e+22, None, '\"q\"', False]}", 1);
    dumps_is("\"plain ✓\"", "plain ✓", 1);
    dumps_is("[\"both ' and \\\"\", \"tab\\t\"]", "['both \\' and \"', 'tab\\t']", 1);

    static const struct {
        double x;
        const char *want;
    } f[] = {
        {0.0, "0.0"},
        {-0.0, "-0.0"},
        {1.0, "1.0"},
        {0.1, "0.1"},
        {1e16, "1e+16"},
        {1e15, "1000000000000000.0"},
        {1e-4, "0.0001"},
        {1e-5, "1e-05"},
        {1.5e-5, "1.5e-05"},
        {123456.789, "123456.789"},
        {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {0.30000000000000004, "0.30000000000000004"},
        {9007199254740992.0, "9007199254740992.0"},
        {-2.5e-7, "-2.5e-07"},
        {7.291122019556398e-304, "7.291122019556398e-304"},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        char out[40];
        hy_pyjson_float_repr(f[i].x, out);
        assert_string_equal(out, f[i].want);
    }
    json_t *v = json_loads("[0, 0.0, \"\", [], {}, null, false]", 0, NULL);
    for (size_t i = 0; i < json_array_size(v); i++)
        assert_false(hy_pyjson_truthy(json_array_get(v, i)));
    json_decref(v);
    v = json_loads("[1, -0.5, \"0\", [0], {\"a\": 0}, true]", 0, NULL);
    for (size_t i = 0; i < json_array_size(v); i++)
        assert_true(hy_pyjson_truthy(json_array_get(v, i)));
    json_decref(v);
    assert_string_equal(hy_pyjson_type_name(NULL), "NoneType");
}

static void test_parse_tool_arguments(void **state)
{
    (void)state;
    json_t *m = parse("[{\"role\":\"user\",\"content\":\"x\"},"
                      " {\"role\":\"assistant\",\"tool_calls\":["
                      "   {\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"q\\\": 1.0, \\\"s\\\": \\\"a\\\"}\"}},"
                      "   {\"function\":{\"name\":\"g\",\"arguments\":\"\"}},"
                      "   {\"function\":{\"name\":\"h\"}}]}]");
    assert_int_equal(hy_chat_parse_tool_arguments(m), 0);
    char *s = hy_chat_apply(&hy3, m, NULL, NULL);
    assert_non_null(s);
    assert_non_null(
        strstr(s, "<tool_call:opensource>f<tool_sep:opensource>\n"
                  "<arg_key:opensource>q</arg_key:opensource>\n<arg_value:opensource>1.0</arg_value:opensource>\n"
                  "<arg_key:opensource>s</arg_key:opensource>\n<arg_value:opensource>a</arg_value:opensource>\n"
                  "</tool_call:opensource>\n<tool_call:opensource>g<tool_sep:opensource>\n</tool_call:opensource>\n"
                  "<tool_call:opensource>h<tool_sep:opensource>\n</tool_call:opensource>\n"));
    free(s);
    json_decref(m);

    m = parse("[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]}]");
    assert_int_equal(hy_chat_parse_tool_arguments(m), -1);
    assert_non_null(strstr(hy_err_msg(), "messages[0].tool_calls[0].function.arguments"));
    json_decref(m);
    m = parse("[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"{bad\"}}]}]");
    assert_int_equal(hy_chat_parse_tool_arguments(m), -1);
    json_decref(m);
}

/* A long conversation renders (linear time; no quadratic copying) and has every turn. */
static void test_long_conversation(void **state)
{
    (void)state;
    json_t *msgs = json_array();
    for (int i = 0; i < 4000; i++) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string(i % 2 ? "assistant" : "user"));
        json_object_set_new(m, "content", json_string("some words of content"));
        json_array_append_new(msgs, m);
    }
    char *s = hy_chat_apply(&hy3, msgs, NULL, NULL);
    assert_non_null(s);
    size_t users = 0;
    for (const char *p = s; (p = strstr(p, "<｜hy_User:opensource｜>")); p++)
        users++;
    assert_int_equal(users, 2000);
    free(s);
    json_decref(msgs);
}

/* A scratch model directory under /tmp; files written by put(). */
static char dir_path[256];

static void put(const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir_path, name);
    if (!text) {
        unlink(p);
        return;
    }
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Loads dir_path with flag, renders [{"role":"user","content":"hi"}] (+ tools when with_tools), compares. */
static void renders(const char *flag, int with_tools, const char *want, const char *source_part)
{
    struct hy_chat c;
    if (hy_chat_load(&c, dir_path, flag))
        fail_msg("load: %s", hy_err_msg());
    json_t *m = parse("[{\"role\":\"user\",\"content\":\"hi\"}]");
    json_t *t = with_tools ? parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]") : NULL;
    char *got = hy_chat_apply(&c, m, t, NULL);
    if (!got)
        fail_msg("render: %s", hy_err_msg());
    assert_string_equal(got, want);
    assert_non_null(strstr(c.source, source_part));
    free(got);
    json_decref(m);
    json_decref(t);
    hy_chat_free(&c);
}

/* vLLM's order: --chat-template (file or text), chat_template.jinja, tokenizer_config.json's chat_template
 * (a string or named templates: "tool_use" when a request has tools); special tokens as variables. */
static void test_sources(void **state)
{
    (void)state;
    snprintf(dir_path, sizeof(dir_path), "/tmp/hy_test_chat_%d", (int)getpid());
    mkdir(dir_path, 0700);
    put("tokenizer_config.json", "{\"bos_token\": \"<B>\", \"eos_token\": {\"content\": \"<E>\"}, \"chat_template\": "
                                 "\"CFG {{ bos_token }}{{ eos_token }}{{ messages|length }}{{ tools is none }}\"}");
    renders(NULL, 0, "CFG <B><E>1True", "tokenizer_config.json");
    put("chat_template.jinja", "JINJA {{ messages[0]['content'] }}{% if add_generation_prompt %}!{% endif %}");
    renders(NULL, 0, "JINJA hi", "chat_template.jinja");
    renders("{{ 'FLAG' }}", 0, "FLAG", "--chat-template");
    char p[512];
    snprintf(p, sizeof(p), "%s/other.jinja", dir_path);
    put("other.jinja", "FILE {{ bos_token }}\n");
    renders(p, 0, "FILE <B>", "other.jinja"); /* jinja2 drops one trailing newline (keep_trailing_newline) */
    put("chat_template.jinja", NULL);
    put("tokenizer_config.json", "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T{{ tools|length }}\"},"
                                 " {\"name\": \"default\", \"template\": \"D\"}]}");
    renders(NULL, 0, "D", "tokenizer_config.json");
    renders(NULL, 1, "T1", "tokenizer_config.json");

    /* no template at all: loading works, a chat request fails naming --chat-template */
    put("tokenizer_config.json", "{}");
    struct hy_chat c;
    assert_int_equal(hy_chat_load(&c, dir_path, NULL), 0);
    assert_false(hy_chat_available(&c));
    json_t *m = parse("[{\"role\":\"user\",\"content\":\"hi\"}]");
    assert_null(hy_chat_apply(&c, m, NULL, NULL));
    assert_non_null(strstr(hy_err_msg(), "--chat-template"));
    hy_chat_free(&c);

    /* request kwargs become variables; they may not replace messages / tools */
    assert_int_equal(hy_chat_load(&c, dir_path, "{{ x }}|{{ y is defined }}|{{ z is none }}"), 0);
    json_t *kw = parse("{\"x\": [1, \"a\"], \"z\": null}");
    char *got = hy_chat_apply(&c, m, NULL, kw);
    assert_non_null(got);
    assert_string_equal(got, "[1, 'a']|False|True");
    free(got);
    json_decref(kw);
    kw = parse("{\"messages\": []}");
    assert_null(hy_chat_apply(&c, m, NULL, kw));
    assert_non_null(strstr(hy_err_msg(), "messages"));
    json_decref(kw);
    hy_chat_free(&c);
    json_decref(m);
    put("tokenizer_config.json", NULL);
    put("other.jinja", NULL);
    rmdir(dir_path);
}

static void load_fails(const char *flag, const char *cfg, const char *want1, const char *want2)
{
    put("tokenizer_config.json", cfg);
    struct hy_chat c;
    assert_int_equal(hy_chat_load(&c, dir_path, flag), -1);
    if (!strstr(hy_err_msg(), want1) || (want2 && !strstr(hy_err_msg(), want2)))
        fail_msg("error '%s' lacks '%s' / '%s'", hy_err_msg(), want1, want2 ? want2 : "");
}

/* Templates that cannot be used are refused at load, naming the source, the line and the construct. */
static void test_bad_sources(void **state)
{
    (void)state;
    snprintf(dir_path, sizeof(dir_path), "/tmp/hy_test_chat_bad_%d", (int)getpid());
    mkdir(dir_path, 0700);
    load_fails("no-such-template", NULL, "no-such-template", "no such file");
    load_fails("a\n{% if x %}b", NULL, "line", "endif");
    load_fails("ok\n\n{% include 'x.jinja' %}", NULL, "line 3", "include");
    load_fails(NULL, "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}]}", "default", NULL);
    load_fails(NULL, "{\"chat_template\": 5}", "chat_template", NULL);
    load_fails(NULL, "[1]", "tokenizer_config.json", "object");
    load_fails(NULL, "{\"chat_template\": \"{{ x | no_such_filter }}\"}", "tokenizer_config.json", "no_such_filter");
    put("tokenizer_config.json", NULL);
    rmdir(dir_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_turns),
        cmocka_unit_test(test_system_high),
        cmocka_unit_test(test_tools),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_kwargs_defaults),
        cmocka_unit_test(test_pyjson),
        cmocka_unit_test(test_parse_tool_arguments),
        cmocka_unit_test(test_long_conversation),
        cmocka_unit_test(test_sources),
        cmocka_unit_test(test_bad_sources),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
