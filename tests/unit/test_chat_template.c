/* test_chat_template.c - C chat-template renderer: fixed expectations (rendered once by jinja2 with
 * tools/ref/render_chat_template.py), error texts, and the Python json.dumps / str() forms it relies
 * on. The exhaustive byte-for-byte comparison against live jinja2 is tests/golden/test_chat_template.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "text/chat_template.h"
#include "text/pyjson.h"
#include "text/tokenizer.h"

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
    if (!j)
        fail_msg("bad test JSON: %s", e.text);
    return j;
}

/* Renders with opts (or kwargs when kw_text is non-NULL) and compares with want (NULL: must fail
 * with an error containing want_err). */
static void check(const char *msgs_text, const char *tools_text, const struct hy_chat_template_opts *o,
                  const char *kw_text, const char *want, const char *want_err)
{
    json_t *msgs = parse(msgs_text);
    json_t *tools = tools_text ? parse(tools_text) : NULL;
    json_t *kw = kw_text ? parse(kw_text) : NULL;
    char *got = kw_text ? hy_chat_template_render_kwargs(msgs, tools, kw) : hy_chat_template_render(msgs, tools, o);
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
    struct hy_chat_template_opts o;
    hy_chat_template_opts_init(&o); /* add_generation_prompt = 1, effort undefined (no_think) */
    check("[{\"role\":\"user\",\"content\":\"Hello\"},"
          " {\"role\":\"assistant\",\"content\":\"Hi.\",\"reasoning_content\":\"old\"},"
          " {\"role\":\"user\",\"content\":\"Bye\"}]",
          NULL, &o, NULL,
          BOS "<｜reasoning_mode:opensource｜>reasoning_effort:no_think<｜hy_User:opensource｜>Hello"
              "<｜hy_Assistant:opensource｜><think:opensource></think:opensource>Hi.<｜hy_eos:opensource｜>"
              "<｜hy_User:opensource｜>Bye<｜hy_Assistant:opensource｜><think:opensource></think:opensource>",
          NULL);
    /* NULL opts = defaults */
    json_t *m = parse("[{\"role\":\"user\",\"content\":\"x\"}]");
    char *s = hy_chat_template_render(m, NULL, NULL);
    assert_non_null(s);
    assert_non_null(strstr(s, "<｜hy_Assistant:opensource｜><think:opensource></think:opensource>"));
    free(s);
    json_decref(m);
}

static void test_system_high(void **state)
{
    (void)state;
    struct hy_chat_template_opts o;
    hy_chat_template_opts_init(&o);
    o.reasoning_effort = "high";
    check("[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"你好 🙂\"}]", NULL, &o,
          NULL,
          BOS "Be brief.<｜reasoning_mode:opensource｜>reasoning_effort:high<｜hy_User:opensource｜>你好 🙂"
              "<｜hy_Assistant:opensource｜><think:opensource>",
          NULL);
}

static void test_tools(void **state)
{
    (void)state;
    struct hy_chat_template_opts o;
    hy_chat_template_opts_init(&o);
    o.add_generation_prompt = 0;
    o.reasoning_effort = "low";
    check(
        "[{\"role\":\"user\",\"content\":\"w?\"},"
        " {\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\",\"function\":"
        "   {\"name\":\"get_weather\",\"arguments\":{\"city\":\"Zürich\",\"days\":2,\"metric\":true,"
        "    \"opt\":{\"a\":[1.5,null]}}}}]},"
        " {\"role\":\"tool\",\"content\":\"rain\"},{\"role\":\"tool\",\"content\":\"12C\"},"
        " {\"role\":\"assistant\",\"content\":\"Rain.\",\"reasoning_content\":\"r\"}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}}]", &o,
        NULL,
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
    struct hy_chat_template_opts o;
    hy_chat_template_opts_init(&o);
    o.reasoning_effort = "medium";
    check(m, NULL, &o, NULL, NULL, "reasoning_effort error : medium, should be no_think/low/high");
    check(m, NULL, NULL, "{\"reasoning_effort\": null}", NULL,
          "reasoning_effort error : None, should be no_think/low/high");
    check(m, NULL, NULL, "{\"reasoning_effort\": 3}", NULL, "can only concatenate str (not \"int\") to str");
    check("[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":"
          "{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1}\"}}]}]",
          NULL, NULL, "{}", NULL, "'str object' has no attribute 'items'");
    check("[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":null}]}]", NULL, NULL, "{}", NULL,
          "'None' has no attribute 'name'");
    check(m, "7", NULL, "{}", NULL, "'int' object is not iterable");
    check("null", NULL, NULL, "{}", NULL, "'NoneType' object is not iterable");
}

static void test_kwargs_defaults(void **state)
{
    (void)state;
    /* fallback_strategy forces high effort and no generation prompt; an empty tools list counts as
     * no tools (reasoning mode in the system prompt, reasoning before the last user turn dropped). */
    check("[{\"role\":\"user\",\"content\":\"a\"},"
          " {\"role\":\"assistant\",\"content\":\"b\",\"reasoning_content\":\"r\"},"
          " {\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"c\"},\"d\",{\"type\":\"image\"}]}]",
          "[]", NULL, "{\"add_generation_prompt\": true, \"fallback_strategy\": \"reasoning_toolcall_retry\"}",
          BOS "<｜reasoning_mode:opensource｜>reasoning_effort:high<｜hy_User:opensource｜>a"
              "<｜hy_Assistant:opensource｜><think:opensource></think:opensource>b<｜hy_eos:opensource｜>"
              "<｜hy_User:opensource｜>cd",
          NULL);
    check("[{\"role\":\"user\",\"content\":\"a\"},"
          " {\"role\":\"assistant\",\"content\":\"b\",\"reasoning_content\":\"r\"}]",
          NULL, NULL, "{\"preserved_thinking\": 1, \"raw_last_assistant\": true}",
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
    assert_int_equal(hy_chat_template_parse_tool_arguments(m), 0);
    char *s = hy_chat_template_render_kwargs(m, NULL, NULL);
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
    assert_int_equal(hy_chat_template_parse_tool_arguments(m), -1);
    assert_non_null(strstr(hy_err_msg(), "messages[0].tool_calls[0].function.arguments"));
    json_decref(m);
    m = parse("[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"{bad\"}}]}]");
    assert_int_equal(hy_chat_template_parse_tool_arguments(m), -1);
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
    char *s = hy_chat_template_render(msgs, NULL, NULL);
    assert_non_null(s);
    size_t users = 0;
    for (const char *p = s; (p = strstr(p, "<｜hy_User:opensource｜>")); p++)
        users++;
    assert_int_equal(users, 2000);
    free(s);
    json_decref(msgs);
}

/* The Hy4-preview turn format (chat_template_hy4.c): turns, generation prompt, refusals, format detection. */
static void test_hy4_format(void **state)
{
    (void)state;
    json_t *msgs = json_loads("[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                              "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hark!\"}]},"
                              "{\"role\":\"assistant\",\"content\":null}]",
                              0, NULL);
    json_t *kw = json_pack("{s:b}", "add_generation_prompt", 1);
    char *out = hy_chat_render(HY_CHAT_HY4, msgs, NULL, kw);
    assert_non_null(out);
    assert_string_equal(out, "<｜hy_start:opensource｜>system<｜hy_middle:opensource｜>Be brief.<｜hy_end:opensource｜>"
                             "<｜hy_start:opensource｜>user<｜hy_middle:opensource｜>Hark!<｜hy_end:opensource｜>"
                             "<｜hy_start:opensource｜>assistant<｜hy_middle:opensource｜><｜hy_end:opensource｜>"
                             "<｜hy_start:opensource｜>assistant<｜hy_middle:opensource｜>");
    free(out);
    json_object_set_new(kw, "reasoning_effort", json_string("high"));
    assert_null(hy_chat_render(HY_CHAT_HY4, msgs, NULL, kw));
    assert_non_null(strstr(hy_err_msg(), "reasoning_effort"));
    json_object_del(kw, "reasoning_effort");
    json_t *tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", 0, NULL);
    assert_null(hy_chat_render(HY_CHAT_HY4, msgs, tools, kw));
    assert_non_null(strstr(hy_err_msg(), "tools"));
    json_t *bad = json_loads("[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]", 0, NULL);
    assert_null(hy_chat_render(HY_CHAT_HY4, bad, NULL, kw));
    assert_non_null(strstr(hy_err_msg(), "messages[0].content[0]"));
    json_decref(bad);
    json_decref(tools);
    json_decref(msgs);
    json_decref(kw);
    /* detection: the hy4 golden's vocabulary has <｜hy_middle:opensource｜>, the Hy3 golden's has not */
    const char *root = getenv("HYINFER_ROOT");
    char p[1024];
    struct hy_tokenizer *tok = NULL;
    snprintf(p, sizeof(p), "%s/tests/data/hy4-golden-llamacpp/hy4-golden-b", root && *root ? root : ".");
    assert_int_equal(hy_tokenizer_load_dir(p, &tok), 0);
    assert_int_equal(hy_chat_format_of(tok), HY_CHAT_HY4);
    hy_tokenizer_free(tok);
    snprintf(p, sizeof(p), "%s/tests/data/hy3-golden-llamacpp/hy3-golden-b", root && *root ? root : ".");
    assert_int_equal(hy_tokenizer_load_dir(p, &tok), 0);
    assert_int_equal(hy_chat_format_of(tok), HY_CHAT_HY3);
    hy_tokenizer_free(tok);
    assert_int_equal(hy_chat_format_of(NULL), HY_CHAT_HY3);
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
        cmocka_unit_test(test_hy4_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
