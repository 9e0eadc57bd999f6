/* test_toolcall.c - the Hy3 tool-call parser over every chunking a stream can produce: whole,
 * 1 character, 8 characters, random 1-20 characters, token-aligned and groups of 2-4 tokens
 * (speculative decoding's deltas), with the real Hy3 vocabulary (suffixed) and a bare copy of it
 * (Hy3-preview spelling). Every chunking gives the same content and calls as the one-shot parse;
 * argument bytes only grow (a stream sends exactly the final string); no marker text reaches
 * content for well-formed output. Plus schema coercion (spec hy3_tool_calls.md T12) and the
 * salvage rules for malformed markup. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "text/reasoning.h"
#include "text/tokenizer.h"
#include "text/toolcall.h"

#define TOK_JSON "models/hy3-tiny/tokenizer.json"

static uint64_t rng = 777;
static unsigned rnd(unsigned n)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)((rng >> 33) % n);
}

static struct hy_tokenizer *g_tok[2]; /* suffixed, bare */
static struct hy_tool_markers g_mk[2];

static const char *k_tools_json =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},\"metric\":{\"type\":"
    "\"boolean\"},\"tags\":{\"type\":\"array\"}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"calc\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"x\":{\"type\":\"number\"},\"opts\":{\"type\":\"object\"},\"v\":{\"anyOf\":[{\"type\":\"string\"},"
    "{\"type\":\"array\"}]},\"n\":{\"type\":[\"integer\",\"null\"]}}}}}]";

/* Expands "{calls}" style placeholders: "<T>" -> "<tool_calls SUFFIX>" etc. */
static char *expand(const char *tmpl, const struct hy_tool_markers *mk)
{
    static const struct {
        const char *ph;
        int m;
    } map[] = {{"[CS]", HY_TM_CALLS_OPEN}, {"[/CS]", HY_TM_CALLS_CLOSE}, {"[C]", HY_TM_CALL_OPEN},
               {"[/C]", HY_TM_CALL_CLOSE}, {"[SEP]", HY_TM_SEP},         {"[K]", HY_TM_KEY_OPEN},
               {"[/K]", HY_TM_KEY_CLOSE},  {"[V]", HY_TM_VALUE_OPEN},    {"[/V]", HY_TM_VALUE_CLOSE},
               {"[TH]", HY_TM_THINK_OPEN}, {"[/TH]", HY_TM_THINK_CLOSE}};
    struct hy_sbuf o = {0};
    for (const char *p = tmpl; *p;) {
        int hit = 0;
        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
            size_t l = strlen(map[i].ph);
            if (!strncmp(p, map[i].ph, l)) {
                hy_sbuf_puts(&o, mk->text[map[i].m]);
                p += l;
                hit = 1;
                break;
            }
        }
        if (!hit)
            hy_sbuf_append(&o, p++, 1);
    }
    hy_sbuf_puts(&o, "");
    return o.p;
}

struct result {
    struct hy_sbuf content, reasoning;
    int n_calls, n_complete;
    char *calls[8]; /* "name\x01args" */
    int complete[8];
};

static void result_free(struct result *r)
{
    hy_sbuf_free(&r->content);
    hy_sbuf_free(&r->reasoning);
    for (int i = 0; i < r->n_calls; i++)
        free(r->calls[i]);
    memset(r, 0, sizeof(*r));
}

static size_t utf8_char_len(const char *s)
{
    unsigned char c = (unsigned char)*s;
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

/* Chunk boundaries of text for a chunking kind. Returns the count; cuts[] are end offsets. */
enum { CH_WHOLE, CH_1, CH_8, CH_RANDOM, CH_TOKEN, CH_TOKENS_2_4, CH_KINDS };

static size_t make_cuts(int kind, int vocab, const char *text, size_t *cuts, size_t max)
{
    size_t len = strlen(text), n = 0;
    if (kind == CH_WHOLE) {
        cuts[n++] = len;
        return n;
    }
    if (kind == CH_TOKEN || kind == CH_TOKENS_2_4) {
        int32_t *ids = NULL;
        size_t nid = 0;
        assert_int_equal(hy_tokenizer_encode(g_tok[vocab], text, len, 1, &ids, &nid), 0);
        size_t off = 0;
        for (size_t i = 0; i < nid;) {
            size_t group = kind == CH_TOKEN ? 1 : 2 + rnd(3);
            for (size_t g = 0; g < group && i < nid; g++, i++) {
                size_t bl = 0;
                hy_tokenizer_token_bytes(g_tok[vocab], ids[i], &bl);
                off += bl;
            }
            /* a token may end inside a UTF-8 character; the detokenizer releases whole characters */
            while (off < len && ((unsigned char)text[off] & 0xC0) == 0x80)
                off++;
            if (!n || cuts[n - 1] != off)
                cuts[n++] = off < len ? off : len;
            assert_true(n < max);
        }
        free(ids);
        assert_int_equal(cuts[n - 1], len);
        return n;
    }
    size_t off = 0;
    while (off < len) {
        size_t chars = kind == CH_1 ? 1 : kind == CH_8 ? 8 : 1 + rnd(20);
        for (size_t c = 0; c < chars && off < len; c++)
            off += utf8_char_len(text + off);
        cuts[n++] = off;
        assert_true(n < max);
    }
    return n;
}

/* Runs reasoning split + tool parser over the chunks. With check, asserts after every chunk that
 * each call's args extend what was seen before and (clean) that no marker text reached content. */
static void run(int vocab, const char *text, int start_in_reasoning, const json_t *tools, int kind, int clean,
                struct result *r)
{
    const struct hy_tool_markers *mk = &g_mk[vocab];
    struct hy_reasoning rs;
    hy_reasoning_init_markers(&rs, start_in_reasoning, mk->text[HY_TM_THINK_OPEN], mk->text[HY_TM_THINK_CLOSE]);
    struct hy_toolcall_parser p;
    hy_toolcall_init(&p, mk, tools);
    memset(r, 0, sizeof(*r));
    size_t cuts[4096], prev = 0;
    size_t n = make_cuts(kind, vocab, text, cuts, 4096);
    struct hy_sbuf content = {0};
    char *seen[8] = {0};
    for (size_t i = 0; i <= n; i++) {
        content.len = 0;
        if (i < n) {
            assert_int_equal(hy_reasoning_feed(&rs, text + prev, cuts[i] - prev, &content, &r->reasoning), 0);
            prev = cuts[i];
        } else {
            assert_int_equal(hy_reasoning_flush(&rs, &content, &r->reasoning), 0);
        }
        assert_int_equal(hy_toolcall_feed(&p, content.p ? content.p : "", content.len, &r->content), 0);
        if (i == n)
            assert_int_equal(hy_toolcall_finish(&p, &r->content), 0);
        for (int c = 0; c < p.n_calls && c < 8; c++) {
            const char *a = p.calls[c].args.p;
            if (seen[c])
                assert_memory_equal(seen[c], a, strlen(seen[c])); /* prefix-stable */
            free(seen[c]);
            seen[c] = strdup(a);
        }
        if (clean && r->content.len) {
            assert_null(strstr(r->content.p, "<tool"));
            assert_null(strstr(r->content.p, "</tool"));
            assert_null(strstr(r->content.p, "<arg_"));
            assert_null(strstr(r->content.p, "think"));
        }
    }
    for (int c = 0; c < 8; c++)
        free(seen[c]);
    r->n_calls = p.n_calls;
    r->n_complete = p.n_complete;
    for (int c = 0; c < p.n_calls && c < 8; c++) {
        size_t nl = strlen(p.calls[c].name), al = p.calls[c].args.len;
        r->calls[c] = malloc(nl + al + 2);
        memcpy(r->calls[c], p.calls[c].name, nl);
        r->calls[c][nl] = '\x01';
        memcpy(r->calls[c] + nl + 1, p.calls[c].args.p, al + 1);
        r->complete[c] = p.calls[c].complete;
    }
    hy_sbuf_free(&content);
    hy_toolcall_free(&p);
    hy_reasoning_free(&rs);
}

struct expect {
    const char *tmpl;
    int start_in_reasoning;
    int clean; /* well-formed: no marker text in content */
    const char *content, *reasoning;
    int n_calls, n_complete;
    const char *calls[4]; /* "name\x01args" */
};

static void check_case(const struct expect *x)
{
    json_t *tools = json_loads(k_tools_json, 0, NULL);
    assert_non_null(tools);
    for (int vocab = 0; vocab < 2; vocab++) {
        char *text = expand(x->tmpl, &g_mk[vocab]);
        char *want_content = expand(x->content, &g_mk[vocab]);
        for (int kind = 0; kind < CH_KINDS; kind++) {
            for (int rep = 0; rep < (kind == CH_RANDOM || kind == CH_TOKENS_2_4 ? 6 : 1); rep++) {
                struct result r;
                run(vocab, text, x->start_in_reasoning, tools, kind, x->clean, &r);
                if (strcmp(r.content.p ? r.content.p : "", want_content))
                    fail_msg("vocab %d kind %d: content [%s], want [%s] (text [%s])", vocab, kind,
                             r.content.p ? r.content.p : "", want_content, text);
                assert_string_equal(r.reasoning.p ? r.reasoning.p : "", x->reasoning ? x->reasoning : "");
                if (r.n_calls != x->n_calls)
                    fail_msg("vocab %d kind %d: %d calls, want %d (text [%s])", vocab, kind, r.n_calls, x->n_calls,
                             text);
                assert_int_equal(r.n_complete, x->n_complete);
                for (int c = 0; c < x->n_calls; c++) {
                    if (strcmp(r.calls[c], x->calls[c]))
                        fail_msg("vocab %d kind %d call %d: [%s] want [%s]", vocab, kind, c, r.calls[c], x->calls[c]);
                    if (r.complete[c]) { /* complete calls' arguments are valid JSON objects */
                        json_t *j = json_loads(strchr(r.calls[c], '\x01') + 1, 0, NULL);
                        assert_true(json_is_object(j));
                        json_decref(j);
                    }
                }
                result_free(&r);
            }
        }
        free(text);
        free(want_content);
    }
    json_decref(tools);
}

#define CALL_W "[C]get_weather[SEP]\n[K]city[/K]\n[V]Paris[/V]\n[K]days[/K]\n[V]3[/V]\n[/C]\n"
#define W_ARGS "get_weather\x01{\"city\": \"Paris\", \"days\": 3}"

static void test_single_call(void **st)
{
    (void)st;
    struct expect x = {"Let me check. [CS]\n" CALL_W "[/CS]", 0, 1, "Let me check. ", NULL, 1, 1, {W_ARGS}};
    check_case(&x);
    struct expect y = {"[CS]\n" CALL_W "[/CS]", 0, 1, "", NULL, 1, 1, {W_ARGS}};
    check_case(&y);
}

static void test_parallel_calls(void **st)
{
    (void)st;
    struct expect x = {"[CS]\n" CALL_W CALL_W "[C]calc[SEP]\n[K]x[/K]\n[V]2.50[/V]\n[/C]\n[/CS]",
                       0,
                       1,
                       "",
                       NULL,
                       3,
                       3,
                       {W_ARGS, W_ARGS, "calc\x01{\"x\": 2.5}"}};
    check_case(&x);
}

static void test_argless_then_args(void **st)
{
    (void)st;
    struct expect x = {
        "[CS]\n[C]get_time[SEP]\n[/C]\n" CALL_W "[/CS]", 0, 1, "", NULL, 2, 2, {"get_time\x01{}", W_ARGS}};
    check_case(&x);
    /* no newline after the separator, and no arguments at all */
    struct expect y = {"[CS][C]get_time[SEP][/C][/CS]", 0, 1, "", NULL, 1, 1, {"get_time\x01{}"}};
    check_case(&y);
}

static void test_string_escapes(void **st)
{
    (void)st;
    struct expect x = {"[CS]\n[C]get_weather[SEP]\n[K]city[/K]\n[V] say \"hi\" \\ back\b\f\x01/\t\nline"
                       "\xe2\x80\xa8 \xe4\xb8\x9c\xe4\xba\xac \xf0\x9f\x98\x80 [/V]\n[/C]\n[/CS]",
                       0,
                       1,
                       "",
                       NULL,
                       1,
                       1,
                       {"get_weather\x01{\"city\": \" say \\\"hi\\\" \\\\ back\\b\\f\\u0001/\\t\\nline\xe2\x80\xa8 "
                        "\xe4\xb8\x9c\xe4\xba\xac \xf0\x9f\x98\x80 \"}"}};
    check_case(&x);
}

static void test_text_after_and_reasoning(void **st)
{
    (void)st;
    /* markup inside the think block stays reasoning; text after </tool_calls> is content */
    struct expect x = {"plan: [CS][C]calc[SEP][/C][/CS] maybe[/TH]Sure.[CS]\n" CALL_W "[/CS]Done.",
                       1,
                       0,
                       "Sure.Done.",
                       NULL,
                       1,
                       1,
                       {W_ARGS}};
    /* the reasoning text contains marker text by construction: expand it per vocab below */
    json_t *tools = json_loads(k_tools_json, 0, NULL);
    for (int vocab = 0; vocab < 2; vocab++) {
        char *want_r = expand("plan: [CS][C]calc[SEP][/C][/CS] maybe", &g_mk[vocab]);
        char *text = expand(x.tmpl, &g_mk[vocab]);
        for (int kind = 0; kind < CH_KINDS; kind++) {
            struct result r;
            run(vocab, text, 1, tools, kind, 0, &r);
            assert_string_equal(r.reasoning.p, want_r);
            assert_string_equal(r.content.p, "Sure.Done.");
            assert_int_equal(r.n_calls, 1);
            assert_string_equal(r.calls[0], W_ARGS);
            result_free(&r);
        }
        free(want_r);
        free(text);
    }
    json_decref(tools);
}

static void test_coerced_values(void **st)
{
    (void)st;
    struct expect x = {"[CS]\n[C]get_weather[SEP]\n[K]metric[/K]\n[V]True[/V]\n[K]tags[/K]\n[V][\"a\", 1][/V]\n"
                       "[K]days[/K]\n[V] 007 [/V]\n[K]city[/K]\n[V]123[/V]\n[K]extra[/K]\n[V] 5 [/V]\n[/C]\n"
                       "[C]calc[SEP]\n[K]x[/K]\n[V]5[/V]\n[K]opts[/K]\n[V]{\"a\":{\"b\":[1,2]}}[/V]\n[K]v[/K]\n"
                       "[V][1][/V]\n[K]n[/K]\n[V]null[/V]\n[/C]\n[C]unknown_fn[SEP]\n[K]q[/K]\n[V]7[/V]\n[/C]\n[/CS]",
                       0,
                       1,
                       "",
                       NULL,
                       3,
                       3,
                       {"get_weather\x01{\"metric\": true, \"tags\": [\"a\", 1], \"days\": 7, \"city\": \"123\", "
                        "\"extra\": \" 5 \"}",
                        "calc\x01{\"x\": 5, \"opts\": {\"a\": {\"b\": [1, 2]}}, \"v\": [1], \"n\": null}",
                        "unknown_fn\x01{\"q\": \"7\"}"}};
    check_case(&x);
}

static void test_malformed(void **st)
{
    (void)st;
    /* S2: an empty block is text */
    struct expect a = {"hi [CS]\n[/CS]", 0, 0, "hi [CS]\n[/CS]", NULL, 0, 0, {NULL}};
    check_case(&a);
    /* S3: no separator */
    struct expect b = {"[CS]\n[C]get_time[/C]\n[/CS]", 0, 0, "[CS]\n[C]get_time[/C]\n[/CS]", NULL, 0, 0, {NULL}};
    check_case(&b);
    /* S3: </arg_value> in place of the separator (a quantized model's mistake) */
    struct expect c = {
        "[CS]\n[C]get_time[/V]\n[/C]\n[/CS]", 0, 0, "[CS]\n[C]get_time[/V]\n[/C]\n[/CS]", NULL, 0, 0, {NULL}};
    check_case(&c);
    /* S3 after a complete call: the complete call stays, the broken one is text */
    struct expect d = {
        "[CS]\n" CALL_W "[C]get_time[/C]\n[/CS]", 0, 0, "\n[C]get_time[/C]\n[/CS]", NULL, 1, 1, {W_ARGS}};
    check_case(&d);
    /* S4: text between argument pairs */
    struct expect e = {"[CS]\n[C]get_weather[SEP]\n[K]city[/K]\n[V]Oslo[/V]\noops[K]days[/K]\n[V]2[/V]\n[/C]\n[/CS]",
                       0,
                       0,
                       "oops[K]days[/K]\n[V]2[/V]\n[/C]\n[/CS]",
                       NULL,
                       1,
                       0,
                       {"get_weather\x01{\"city\": \"Oslo\""}};
    check_case(&e);
    /* S5: cut inside a value (max_tokens): no closing quote or brace is invented */
    struct expect f = {
        "[CS]\n[C]get_weather[SEP]\n[K]city[/K]\n[V]Par", 0, 1, "", NULL, 1, 0, {"get_weather\x01{\"city\": \"Par"}};
    check_case(&f);
    /* S5: cut inside a buffered (integer) value writes nothing for it */
    struct expect g = {
        "[CS]\n" CALL_W "[C]get_weather[SEP]\n[K]days[/K]\n[V]1", 0, 1, "", NULL, 2, 1, {W_ARGS, "get_weather\x01{"}};
    check_case(&g);
    /* cut inside the opening marker: held text is content at the end */
    struct expect h = {"Hello <tool_ca", 0, 0, "Hello <tool_ca", NULL, 0, 0, {NULL}};
    check_case(&h);
    /* cut inside a name: the raw block is content */
    struct expect i = {"[CS]\n[C]get_w", 0, 0, "[CS]\n[C]get_w", NULL, 0, 0, {NULL}};
    check_case(&i);
}

/* A Hy3 call whose body after <tool_sep> is a JSON object (some fine-tunes): the object is the
 * arguments, written as Python's json.dumps writes it (vLLM's hy_v3 parser json.loads the body). */
static void test_json_body(void **st)
{
    (void)st;
    struct expect a = {
        "[CS]\n[C]get_weather[SEP]\n{\"city\": \"Paris\", \"days\": 3}\n[/C]\n[/CS]", 0, 1, "", NULL, 1, 1, {W_ARGS}};
    check_case(&a);
    /* compact JSON, nested values, floats as repr() writes them, UTF-8 raw; then a tagged call */
    struct expect b = {"Ok.[CS][C]calc[SEP]{\"x\":0.1,\"opts\":{\"a\":[1,2.50,\"\xc3\xa9\"]},\"n\":null}[/C]\n" CALL_W
                       "[/CS]",
                       0,
                       1,
                       "Ok.",
                       NULL,
                       2,
                       2,
                       {"calc\x01{\"x\": 0.1, \"opts\": {\"a\": [1, 2.5, \"\xc3\xa9\"]}, \"n\": null}", W_ARGS}};
    check_case(&b);
    /* S4: a body that is not one JSON object: the call stays incomplete, the body is text */
    struct expect c = {"[CS]\n[C]get_weather[SEP]\n{\"city\": [/C]\n[/CS]",
                       0,
                       0,
                       "{\"city\": [/C]\n[/CS]",
                       NULL,
                       1,
                       0,
                       {"get_weather\x01{"}};
    check_case(&c);
    struct expect d = {"[CS][C]get_weather[SEP]{\"city\": \"Oslo\"} extra[/C][/CS]",
                       0,
                       0,
                       "{\"city\": \"Oslo\"} extra[/C][/CS]",
                       NULL,
                       1,
                       0,
                       {"get_weather\x01{"}};
    check_case(&d);
    /* S5: cut inside the body writes nothing for it */
    struct expect e = {"[CS][C]get_weather[SEP]{\"city\": \"Pa", 0, 1, "", NULL, 1, 0, {"get_weather\x01{"}};
    check_case(&e);
}

static void coerce(const char *schema, const char *v, const char *want)
{
    json_t *s = schema ? json_loads(schema, 0, NULL) : NULL;
    struct hy_sbuf o = {0};
    assert_int_equal(hy_tool_coerce_value(s, v, strlen(v), &o), 0);
    if (strcmp(o.p, want))
        fail_msg("schema %s value [%s]: [%s], want [%s]", schema ? schema : "none", v, o.p, want);
    hy_sbuf_free(&o);
    json_decref(s);
}

static void test_coercion_table(void **st)
{
    (void)st;
    coerce("{\"type\":\"integer\"}", "5", "5");
    coerce("{\"type\":\"integer\"}", "abc", "\"abc\"");
    coerce("{\"type\":\"integer\"}", "[1, 2]", "[1, 2]");
    coerce("{\"type\":\"number\"}", "5", "5");
    coerce("{\"type\":\"number\"}", "5.0", "5.0");
    coerce("{\"type\":\"number\"}", "0.1", "0.1");
    coerce("{\"type\":\"number\"}", "1e20", "1e+20");
    coerce("{\"type\":\"number\"}", "100", "100");
    coerce("{\"type\":\"number\"}", "1e-05", "1e-05");
    coerce("{\"type\":\"number\"}", "0.0001", "0.0001");
    coerce("{\"type\":\"double\"}", "-2.5", "-2.5");
    coerce("{\"type\":\"boolean\"}", "True", "true");
    coerce("{\"type\":\"bool\"}", "FALSE", "false");
    coerce("{\"type\":\"array\"}", "[1,\"x\"]", "[1, \"x\"]");
    coerce("{\"type\":\"object\"}", "{\"k\":1}", "{\"k\": 1}");
    coerce("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\"}]}", "[1]", "[1]");
    coerce("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\"}]}", "plain", "\"plain\"");
    coerce("{\"type\":[\"string\",\"null\"]}", "null", "null");
    coerce("{\"type\":[\"string\",\"null\"]}", "x\n", "\"x\\n\"");
    coerce("{\"type\":\"string\"}", "123", "\"123\"");
    coerce("{\"type\":\"string\"}", "  keep  ", "\"  keep  \"");
    coerce(NULL, "42", "\"42\"");
    coerce("{\"description\":\"no type\"}", "42", "\"42\"");
    coerce("{\"type\":\"int64\"}", " -12 ", "-12");
}

static void test_marker_discovery(void **st)
{
    (void)st;
    assert_string_equal(g_mk[0].suffix, ":opensource");
    assert_string_equal(g_mk[1].suffix, "");
    for (int v = 0; v < 2; v++)
        for (int m = 0; m < HY_TM_COUNT; m++)
            if (g_mk[v].id[m] < 0)
                fail_msg("vocab %d: marker %s has no token", v, g_mk[v].text[m]);
    assert_string_equal(g_mk[1].text[HY_TM_CALLS_OPEN], "<tool_calls>");
    assert_int_equal(g_mk[0].id[HY_TM_CALLS_OPEN], hy_tokenizer_token_to_id(g_tok[0], "<tool_calls:opensource>"));
}

/* Loads the Hy3 vocabulary and a copy with every ":opensource>" tag made bare (Hy3-preview). */
static int setup(void **st)
{
    (void)st;
    char *data = NULL;
    size_t len = 0;
    if (hy_file_read_all(TOK_JSON, &data, &len))
        return -1;
    if (hy_tokenizer_load_json_mem(data, len, TOK_JSON, &g_tok[0]))
        return -1;
    struct hy_sbuf bare = {0};
    const char *suf = ":opensource>";
    for (size_t i = 0; i < len;) {
        if (i + strlen(suf) <= len && !memcmp(data + i, suf, strlen(suf))) {
            hy_sbuf_puts(&bare, ">");
            i += strlen(suf);
        } else {
            hy_sbuf_append(&bare, data + i, 1);
            i++;
        }
    }
    free(data);
    int rc = hy_tokenizer_load_json_mem(bare.p, bare.len, "bare", &g_tok[1]);
    hy_sbuf_free(&bare);
    if (rc)
        return -1;
    for (int v = 0; v < 2; v++)
        if (hy_tool_markers_from_vocab(g_tok[v], &g_mk[v]))
            return -1;
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    hy_tokenizer_free(g_tok[0]);
    hy_tokenizer_free(g_tok[1]);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_marker_discovery), cmocka_unit_test(test_single_call),
        cmocka_unit_test(test_parallel_calls),   cmocka_unit_test(test_argless_then_args),
        cmocka_unit_test(test_string_escapes),   cmocka_unit_test(test_text_after_and_reasoning),
        cmocka_unit_test(test_coerced_values),   cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_coercion_table),   cmocka_unit_test(test_json_body),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
