/* test_toolcall_hy4.c - Hy4-preview tool calls and reasoning (spec hy_chat_formats.md §2-4, test
 * cases §6 copied here): the tag suffix and dialect read from small hand-made vocabularies, schema
 * typing, the Hy4 dialect (no <tool_sep>; the name ends at the nearer of <arg_key> and </tool_call>)
 * non-streamed and streamed - every case fed whole, 1 byte at a time, in seeded random chunks and in
 * token-aligned groups of 2-4 "tokens" (markers whole, text cut every few bytes, as MTP deltas
 * arrive) - with the suffixes ":opensource", ":6124c78e", "" and the hostile ":a+b(c": the same
 * calls every time, argument bytes only grow (the streamed concatenation is the final JSON), no
 * marker text in content or reasoning. Malformed markup follows the salvage rules S1-S5 of
 * toolcall.h where vLLM's strict extractor would return the whole raw text. Then the reasoning
 * split of Hy4's prompt shapes (<think SUF> at the end of the generation prompt). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/sbuf.h"
#include "text/reasoning.h"
#include "text/tokenizer.h"
#include "text/toolcall.h"

#define N_SUF 4
static const char *const k_suffixes[N_SUF] = {":opensource", ":6124c78e", "", ":a+b(c"};

static struct hy_tokenizer *g_tok[N_SUF];
static struct hy_tool_markers g_mk[N_SUF]; /* from g_tok: the Hy4 dialect */

static uint64_t rng = 20261207;
static unsigned rnd(unsigned n)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)((rng >> 33) % n);
}

#define BAR "\xef\xbd\x9c" /* U+FF5C */

/* ---------------------------------------------------------------- a tiny vocabulary */

/* A BPE tokenizer.json with the letters a-z as ordinary tokens, `extra_vocab` (NULL-terminated)
 * appended to the ordinary vocabulary, and `added` (NULL-terminated) as added tokens. */
static struct hy_tokenizer *fake_tok(const char *const *added, const char *const *extra_vocab)
{
    json_t *vocab = json_object();
    int id = 0;
    for (char c = 'a'; c <= 'z'; c++) {
        char s[2] = {c, 0};
        json_object_set_new(vocab, s, json_integer(id++));
    }
    for (int i = 0; extra_vocab && extra_vocab[i]; i++)
        json_object_set_new(vocab, extra_vocab[i], json_integer(id++));
    json_t *at = json_array();
    for (int i = 0; added && added[i]; i++)
        json_array_append_new(at, json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", id++, "content", added[i],
                                            "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special",
                                            strstr(added[i], BAR) != NULL));
    json_t *root =
        json_pack("{s:{s:s,s:o,s:[]},s:o}", "model", "type", "BPE", "vocab", vocab, "merges", "added_tokens", at);
    char *text = json_dumps(root, 0);
    json_decref(root);
    struct hy_tokenizer *t = NULL;
    int rc = hy_tokenizer_load_json_mem(text, strlen(text), "fake.json", &t);
    if (rc)
        fprintf(stderr, "fake tokenizer: %s\n", hy_err_msg());
    free(text);
    assert_int_equal(rc, 0);
    return t;
}

/* The full Hy4 vocabulary for a suffix: every tag, its closer, and the turn tokens. */
static struct hy_tokenizer *hy4_tok(const char *suf)
{
    static const char *const tags[] = {
        "<tool_calls",    "</tool_calls",          "<tool_call", "</tool_call", "<arg_key",         "</arg_key",
        "<arg_value",     "</arg_value",           "<think",     "</think",     "<" BAR "hy_start", "<" BAR "hy_middle",
        "<" BAR "hy_end", "<" BAR "reasoning_mode"};
    const size_t n = sizeof(tags) / sizeof(tags[0]);
    char buf[32][64];
    const char *added[33];
    for (size_t i = 0; i < n; i++) {
        snprintf(buf[i], sizeof(buf[i]), "%s%s%s", tags[i], suf, strstr(tags[i], BAR) ? BAR ">" : ">");
        added[i] = buf[i];
    }
    added[n] = NULL;
    return fake_tok(added, NULL);
}

/* ---------------------------------------------------------------- §6 cases 1-2: suffix, dialect */

static void expect_suffix(const char *const *added, const char *const *extra, int want_rc, const char *want)
{
    struct hy_tokenizer *t = fake_tok(added, extra);
    char suf[HY_TM_SUFFIX_MAX] = "junk";
    int rc = hy_tool_suffix_from_vocab(t, suf, sizeof(suf));
    if (rc != want_rc || strcmp(suf, want))
        fail_msg("first added [%s]: rc %d suffix [%s], want %d [%s] (%s)", added && added[0] ? added[0] : "", rc, suf,
                 want_rc, want, rc < 0 ? hy_err_msg() : "");
    hy_tokenizer_free(t);
}

static void test_suffix_detection(void **st)
{
    (void)st;
    /* case 1 */
    expect_suffix((const char *const[]){"<think:6124c78e>", NULL}, NULL, 1, ":6124c78e");
    expect_suffix((const char *const[]){"<think>", NULL}, NULL, 1, "");
    expect_suffix((const char *const[]){"<arg_value:x>", NULL}, NULL, 1, ":x");
    expect_suffix((const char *const[]){"<tool_calls:x>", NULL}, NULL, 1, ":x");
    expect_suffix((const char *const[]){"<tool_call:x>", NULL}, NULL, 1, ":x");
    expect_suffix((const char *const[]){"<arg_key:x>", NULL}, NULL, 1, ":x");
    expect_suffix((const char *const[]){"hello", NULL}, NULL, 0, "");
    expect_suffix(NULL, NULL, 0, "");
    /* closers never match; neither do near misses */
    expect_suffix((const char *const[]){"</think:zz>", "<think:>", "<think:a b>", "<tool_sep:q>", "<thinking>",
                                        "<tool_callsx>", "<tool_calls:a>b>", NULL},
                  NULL, 0, "");
    expect_suffix((const char *const[]){"<think:a+b(c>", "</think:a+b(c>", "<tool_calls:a+b(c>", NULL}, NULL, 1,
                  ":a+b(c");
    /* all matches must agree */
    expect_suffix((const char *const[]){"<think:opensource>", "<tool_calls>", NULL}, NULL, -1, "");
    assert_non_null(strstr(hy_err_msg(), "<tool_calls>"));
    assert_non_null(strstr(hy_err_msg(), "<think:opensource>"));
    expect_suffix((const char *const[]){"<think:opensource>", "<tool_calls:opensource>", "<arg_key:opensource>", NULL},
                  NULL, 1, ":opensource");
    /* a suffix too long for the markers */
    expect_suffix((const char *const[]){"<think::0123456789abcdef0123456789>", NULL}, NULL, -1, "");
    /* the ordinary vocabulary is read when no added token is a tag */
    expect_suffix(NULL, (const char *const[]){"<arg_key:v>", NULL}, 1, ":v");
    expect_suffix((const char *const[]){"<think:a>", NULL}, (const char *const[]){"<think:b>", NULL}, 1, ":a");

    size_t off = 0, len = 0;
    assert_true(hy_tool_tag_match("<tool_call:6124c78e>", 20, &off, &len));
    assert_int_equal(off, 10);
    assert_int_equal(len, 9);
    assert_true(hy_tool_tag_match("<think>", 7, &off, &len));
    assert_int_equal(len, 0);
    assert_false(hy_tool_tag_match("<think:x\t>", 10, &off, &len));
    assert_false(hy_tool_tag_match("<think", 6, &off, &len));
}

static void test_markers_from_vocab(void **st)
{
    (void)st;
    for (int s = 0; s < N_SUF; s++) {
        const struct hy_tool_markers *m = &g_mk[s];
        assert_string_equal(m->suffix, k_suffixes[s]);
        assert_int_equal(m->dialect, HY_TOOL_DIALECT_HY4);
        for (int k = 0; k < HY_TM_COUNT; k++)
            if (k != HY_TM_SEP && m->id[k] < 0)
                fail_msg("suffix %s: %s has no id", k_suffixes[s], m->text[k]);
        assert_int_equal(m->id[HY_TM_SEP], -1); /* Hy4 has no <tool_sep> */
        char want[64];
        snprintf(want, sizeof(want), "<" BAR "hy_middle%s" BAR ">", k_suffixes[s]);
        assert_string_equal(m->turn_text[HY_TT_MIDDLE], want);
        assert_int_equal(m->turn_id[HY_TT_MIDDLE], hy_tokenizer_token_to_id(g_tok[s], want));
        for (int k = 0; k < HY_TT_COUNT; k++)
            assert_true(m->turn_id[k] >= 0);
        snprintf(want, sizeof(want), "<think%s>", k_suffixes[s]);
        assert_string_equal(m->text[HY_TM_THINK_OPEN], want);
    }
    struct hy_tool_markers m;
    /* hosted suffix on the tags, turn tokens spelled ":opensource": still Hy4, the turn token found */
    struct hy_tokenizer *t =
        fake_tok((const char *const[]){"<tool_calls:6124c78e>", "<think:6124c78e>", "</think:6124c78e>",
                                       "<" BAR "hy_middle:opensource" BAR ">", "<" BAR "hy_end" BAR ">", NULL},
                 NULL);
    assert_int_equal(hy_tool_markers_from_vocab(t, &m), 0);
    assert_int_equal(m.dialect, HY_TOOL_DIALECT_HY4);
    assert_string_equal(m.turn_text[HY_TT_MIDDLE], "<" BAR "hy_middle:opensource" BAR ">");
    assert_string_equal(m.turn_text[HY_TT_END], "<" BAR "hy_end" BAR ">");
    assert_string_equal(m.turn_text[HY_TT_START], "");
    assert_int_equal(m.turn_id[HY_TT_START], -1);
    hy_tool_markers_set_dialect(&m, HY_TOOL_DIALECT_HY3); /* --tool-call-parser hy_v3 */
    assert_int_equal(m.dialect, HY_TOOL_DIALECT_HY3);
    assert_string_equal(m.text[HY_TM_CALLS_OPEN], "<tool_calls:6124c78e>");
    hy_tokenizer_free(t);
    /* Hy3 vocabulary: no hy_middle */
    t = fake_tok((const char *const[]){"<tool_calls:opensource>", "<tool_sep:opensource>",
                                       "<" BAR "hy_User:opensource" BAR ">", NULL},
                 NULL);
    assert_int_equal(hy_tool_markers_from_vocab(t, &m), 0);
    assert_int_equal(m.dialect, HY_TOOL_DIALECT_HY3);
    assert_true(m.id[HY_TM_SEP] >= 0);
    hy_tokenizer_free(t);
    /* case 2: an empty vocabulary: the tool parser cannot start; the think markers are bare */
    t = fake_tok(NULL, NULL);
    assert_int_equal(hy_tool_markers_from_vocab(t, &m), -1);
    assert_non_null(strstr(hy_err_msg(), "<tool_calls>"));
    assert_string_equal(m.text[HY_TM_THINK_OPEN], "<think>");
    assert_int_equal(m.id[HY_TM_THINK_OPEN], -1);
    assert_int_equal(m.dialect, HY_TOOL_DIALECT_HY3);
    hy_tokenizer_free(t);
    /* think tags only: the suffix still reaches the think markers */
    t = fake_tok((const char *const[]){"<think:6124c78e>", "</think:6124c78e>", NULL}, NULL);
    assert_int_equal(hy_tool_markers_from_vocab(t, &m), -1);
    assert_string_equal(m.text[HY_TM_THINK_CLOSE], "</think:6124c78e>");
    assert_true(m.id[HY_TM_THINK_CLOSE] >= 0);
    hy_tokenizer_free(t);
    /* disagreeing spellings */
    t = fake_tok((const char *const[]){"<tool_calls:opensource>", "<think>", NULL}, NULL);
    assert_int_equal(hy_tool_markers_from_vocab(t, &m), -2);
    assert_non_null(strstr(hy_err_msg(), "two suffixes"));
    hy_tokenizer_free(t);
    /* init_dialect */
    hy_tool_markers_init_dialect(&m, ":x", HY_TOOL_DIALECT_HY4);
    assert_int_equal(m.dialect, HY_TOOL_DIALECT_HY4);
    assert_string_equal(m.text[HY_TM_KEY_OPEN], "<arg_key:x>");
    hy_tool_markers_init(&m, ":x");
    assert_int_equal(m.dialect, HY_TOOL_DIALECT_HY3);
    hy_tool_markers_init_dialect(&m, "", 7);
    assert_int_equal(m.dialect, HY_TOOL_DIALECT_HY3);
}

/* ---------------------------------------------------------------- the streaming matrix */

/* "[CS]" -> "<tool_calls SUF>" etc. */
static const struct {
    const char *ph;
    int m;
} k_map[] = {{"[CS]", HY_TM_CALLS_OPEN}, {"[/CS]", HY_TM_CALLS_CLOSE}, {"[C]", HY_TM_CALL_OPEN},
             {"[/C]", HY_TM_CALL_CLOSE}, {"[SEP]", HY_TM_SEP},         {"[K]", HY_TM_KEY_OPEN},
             {"[/K]", HY_TM_KEY_CLOSE},  {"[V]", HY_TM_VALUE_OPEN},    {"[/V]", HY_TM_VALUE_CLOSE},
             {"[TH]", HY_TM_THINK_OPEN}, {"[/TH]", HY_TM_THINK_CLOSE}};
#define N_MAP (sizeof(k_map) / sizeof(k_map[0]))

static char *expand(const char *tmpl, const struct hy_tool_markers *mk)
{
    struct hy_sbuf o = {0};
    for (const char *p = tmpl; *p;) {
        int hit = 0;
        for (size_t i = 0; i < N_MAP && !hit; i++) {
            size_t l = strlen(k_map[i].ph);
            if (!strncmp(p, k_map[i].ph, l)) {
                hy_sbuf_puts(&o, mk->text[k_map[i].m]);
                p += l;
                hit = 1;
            }
        }
        if (!hit)
            hy_sbuf_append(&o, p++, 1);
    }
    hy_sbuf_puts(&o, "");
    return o.p;
}

enum { CH_WHOLE, CH_BYTE, CH_RANDOM, CH_TOKENS, CH_KINDS };
static const char *const k_kind_names[CH_KINDS] = {"whole", "1 byte", "random", "token groups"};

/* Chunk end offsets of text (n returned). CH_TOKENS: the text is cut into "tokens" - every marker
 * whole, other text in pieces of 1-4 bytes ending on UTF-8 boundaries - sent in groups of 2-4. */
static size_t make_cuts(int kind, const struct hy_tool_markers *mk, const char *text, size_t *cuts, size_t max)
{
    const size_t len = strlen(text);
    size_t n = 0, off = 0;
    if (kind == CH_WHOLE || !len) {
        cuts[n++] = len;
        return n;
    }
    while (off < len) {
        if (kind == CH_BYTE || kind == CH_RANDOM) {
            off += kind == CH_BYTE ? 1 : 1 + rnd(20);
        } else {
            const unsigned group = 2 + rnd(3);
            for (unsigned g = 0; g < group && off < len; g++) {
                size_t step = 0;
                for (int m = 0; m < HY_TM_COUNT && !step; m++)
                    if (!strncmp(text + off, mk->text[m], mk->len[m]))
                        step = mk->len[m];
                if (!step) {
                    step = 1 + rnd(4);
                    /* text stops before a marker and on a character boundary */
                    for (size_t k = 1; k < step && off + k < len; k++)
                        if (text[off + k] == '<') {
                            step = k;
                            break;
                        }
                    while (off + step < len && ((unsigned char)text[off + step] & 0xC0) == 0x80)
                        step++;
                }
                off += step;
            }
        }
        if (off > len)
            off = len;
        cuts[n++] = off;
        assert_true(n < max);
    }
    return n;
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
    for (int i = 0; i < r->n_calls && i < 8; i++)
        free(r->calls[i]);
    memset(r, 0, sizeof(*r));
}

static void assert_no_markup(const struct hy_sbuf *b, const char *what)
{
    if (!b->len)
        return;
    static const char *const bad[] = {"<tool", "</tool", "<arg_", "</arg_", "<think", "</think"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (strstr(b->p, bad[i]))
            fail_msg("%s holds marker text: [%s]", what, b->p);
}

/* Reasoning split + tool parser over explicit chunks (cuts). After every chunk: each call's args
 * extend what was sent before (a stream sends the new bytes; their concatenation is checked to be
 * the final string) and, for clean output, no marker text reached content or reasoning. */
static void run_cuts(const struct hy_tool_markers *mk, const char *text, const size_t *cuts, size_t n,
                     int start_in_reasoning, const json_t *tools, int clean, struct result *r)
{
    struct hy_reasoning rs;
    hy_reasoning_init_markers(&rs, start_in_reasoning, mk->text[HY_TM_THINK_OPEN], mk->text[HY_TM_THINK_CLOSE]);
    struct hy_toolcall_parser p;
    hy_toolcall_init(&p, mk, tools);
    memset(r, 0, sizeof(*r));
    struct hy_sbuf mid = {0}, streamed[8] = {{0}};
    size_t prev = 0;
    for (size_t i = 0; i <= n; i++) {
        mid.len = 0;
        if (i < n) {
            assert_int_equal(hy_reasoning_feed(&rs, text + prev, cuts[i] - prev, &mid, &r->reasoning), 0);
            prev = cuts[i];
        } else {
            assert_int_equal(hy_reasoning_flush(&rs, &mid, &r->reasoning), 0);
        }
        assert_int_equal(hy_toolcall_feed(&p, mid.p ? mid.p : "", mid.len, &r->content), 0);
        if (i == n)
            assert_int_equal(hy_toolcall_finish(&p, &r->content), 0);
        for (int c = 0; c < p.n_calls && c < 8; c++) {
            const struct hy_sbuf *a = &p.calls[c].args;
            assert_true(a->len >= streamed[c].len);
            assert_memory_equal(a->p, streamed[c].p ? streamed[c].p : "", streamed[c].len);
            hy_sbuf_append(&streamed[c], a->p + streamed[c].len, a->len - streamed[c].len); /* the delta */
        }
        hy_sbuf_puts(&r->content, "");
        hy_sbuf_puts(&r->reasoning, "");
        if (clean) {
            assert_no_markup(&r->content, "content");
            assert_no_markup(&r->reasoning, "reasoning");
        }
    }
    r->n_calls = p.n_calls;
    r->n_complete = p.n_complete;
    for (int c = 0; c < p.n_calls && c < 8; c++) {
        size_t nl = strlen(p.calls[c].name), al = p.calls[c].args.len;
        assert_int_equal(streamed[c].len, al);
        r->calls[c] = malloc(nl + al + 2);
        memcpy(r->calls[c], p.calls[c].name, nl);
        r->calls[c][nl] = '\x01';
        memcpy(r->calls[c] + nl + 1, p.calls[c].args.p ? p.calls[c].args.p : "", al);
        r->calls[c][nl + 1 + al] = 0;
        r->complete[c] = p.calls[c].complete;
    }
    for (int c = 0; c < 8; c++)
        hy_sbuf_free(&streamed[c]);
    hy_sbuf_free(&mid);
    hy_toolcall_free(&p);
    hy_reasoning_free(&rs);
}

static void run(const struct hy_tool_markers *mk, const char *text, int start_in_reasoning, const json_t *tools,
                int kind, int clean, struct result *r)
{
    static size_t cuts[8192];
    size_t n = make_cuts(kind, mk, text, cuts, 8192);
    run_cuts(mk, text, cuts, n, start_in_reasoning, tools, clean, r);
}

struct expect {
    const char *tmpl;
    int start_in_reasoning;
    int clean;             /* well-formed: no marker text in content or reasoning */
    const char *content;   /* template too (malformed markup comes back as text) */
    const char *reasoning; /* NULL: "" */
    int n_calls, n_complete;
    const char *calls[4]; /* "name\x01args" */
};

static const char *k_tools_json =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_current_date\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"typed\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"s\":{\"type\":\"string\"},\"i\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"},\"n\":{\"type\":"
    "\"number\"},\"arr\":{\"type\":\"array\"},\"obj\":{\"type\":\"object\"},\"t_int\":{\"type\":\"int\"},"
    "\"t_list\":{\"type\":\"list\"},\"t_u32\":{\"type\":\"uint32\"},\"so\":{\"type\":[\"string\",\"object\"]},"
    "\"sa\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\"}]},\"on\":{\"oneOf\":[{\"type\":\"number\"}]},"
    "\"u\":{\"description\":\"untyped\"}}}}}]";

static void check_with(const struct expect *x, const json_t *tools)
{
    for (int s = 0; s < N_SUF; s++) {
        const struct hy_tool_markers *mk = &g_mk[s];
        char *text = expand(x->tmpl, mk);
        char *want_c = expand(x->content, mk);
        char *want_r = expand(x->reasoning ? x->reasoning : "", mk);
        for (int kind = 0; kind < CH_KINDS; kind++) {
            for (int rep = 0; rep < (kind == CH_RANDOM || kind == CH_TOKENS ? 8 : 1); rep++) {
                struct result r;
                run(mk, text, x->start_in_reasoning, tools, kind, x->clean, &r);
                if (strcmp(r.content.p, want_c))
                    fail_msg("suffix [%s] %s: content [%s], want [%s] (text [%s])", k_suffixes[s], k_kind_names[kind],
                             r.content.p, want_c, text);
                if (strcmp(r.reasoning.p, want_r))
                    fail_msg("suffix [%s] %s: reasoning [%s], want [%s]", k_suffixes[s], k_kind_names[kind],
                             r.reasoning.p, want_r);
                if (r.n_calls != x->n_calls || r.n_complete != x->n_complete)
                    fail_msg("suffix [%s] %s: %d calls (%d complete), want %d (%d) (text [%s])", k_suffixes[s],
                             k_kind_names[kind], r.n_calls, r.n_complete, x->n_calls, x->n_complete, text);
                for (int c = 0; c < x->n_calls; c++) {
                    if (strcmp(r.calls[c], x->calls[c]))
                        fail_msg("suffix [%s] %s call %d: [%s], want [%s]", k_suffixes[s], k_kind_names[kind], c,
                                 r.calls[c], x->calls[c]);
                    if (r.complete[c]) { /* a complete call's arguments are one JSON object */
                        json_t *j = json_loads(strchr(r.calls[c], '\x01') + 1, 0, NULL);
                        assert_true(json_is_object(j));
                        json_decref(j);
                    }
                }
                result_free(&r);
            }
        }
        free(text);
        free(want_c);
        free(want_r);
    }
}

static void check_case(const struct expect *x)
{
    json_t *tools = json_loads(k_tools_json, 0, NULL);
    assert_non_null(tools);
    check_with(x, tools);
    json_decref(tools);
}

#define C_W "[C]get_weather[K]city[/K][V]Beijing[/V][K]days[/K][V]3[/V][/C]"
#define W_ARGS "get_weather\x01{\"city\": \"Beijing\", \"days\": 3}"
#define C_D "[C]get_current_date[/C]"
#define D_ARGS "get_current_date\x01{}"

/* case 3: the hostile suffix is in the matrix of every case; here the bare zero-arg call */
static void test_zero_arg_call(void **st)
{
    (void)st;
    struct expect x = {"[CS]" C_D "[/CS]", 0, 1, "", NULL, 1, 1, {D_ARGS}};
    check_case(&x);
}

/* cases 4-5: typing by the tool's schema, inside calls */
static void test_typed_arguments(void **st)
{
    (void)st;
    struct expect x = {
        "[CS][C]typed[K]s[/K][V]Beijing[/V][K]i[/K][V]3[/V][K]b[/K][V]true[/V][K]n[/K][V]5[/V][/C]"
        "[C]typed[K]s[/K][V][/V][K]i[/K][V]-7[/V][K]b[/K][V]True[/V][K]n[/K][V]5.5[/V][/C]"
        "[C]typed[K]b[/K][V]false[/V][K]n[/K][V]1e3[/V][K]arr[/K][V][\"a\", \"b\"][/V][K]obj[/K][V]{\"k\": 1}[/V]"
        "[K]t_int[/K][V]7[/V][K]t_list[/K][V][1][/V][K]t_u32[/K][V]42[/V][/C]"
        "[C]typed[K]so[/K][V]{\"a\": 1}[/V][K]sa[/K][V][\"x\"][/V][K]on[/K][V]2.5[/V][K]u[/K][V]v[/V][/C][/CS]",
        0,
        1,
        "",
        NULL,
        4,
        4,
        {"typed\x01{\"s\": \"Beijing\", \"i\": 3, \"b\": true, \"n\": 5}",
         "typed\x01{\"s\": \"\", \"i\": -7, \"b\": true, \"n\": 5.5}",
         "typed\x01{\"b\": false, \"n\": 1000.0, \"arr\": [\"a\", \"b\"], \"obj\": {\"k\": 1}, \"t_int\": 7, "
         "\"t_list\": "
         "[1], \"t_u32\": 42}",
         "typed\x01{\"so\": {\"a\": 1}, \"sa\": [\"x\"], \"on\": 2.5, \"u\": \"v\"}"}};
    /* case 5: what does not parse stays text; an unknown key or tool gives strings */
    struct expect y = {"[CS][C]typed[K]so[/K][V]plain[/V][K]sa[/K][V]plain[/V][/C]"
                       "[C]typed[K]i[/K][V]notanint[/V][K]b[/K][V]yes[/V][K]arr[/K][V]notjson[/V][K]nope[/K][V]v[/V]"
                       "[/C][C]mystery[K]x[/K][V]1[/V][/C][/CS]",
                       0,
                       1,
                       "",
                       NULL,
                       3,
                       3,
                       {"typed\x01{\"so\": \"plain\", \"sa\": \"plain\"}",
                        "typed\x01{\"i\": \"notanint\", \"b\": \"yes\", \"arr\": \"notjson\", \"nope\": \"v\"}",
                        "mystery\x01{\"x\": \"1\"}"}};
    check_case(&x);
    check_case(&y);
    /* no tools declared: every value is a string */
    struct expect z = {"[CS][C]f[K]a[/K][V]1[/V][/C][/CS]", 0, 1, "", NULL, 1, 1, {"f\x01{\"a\": \"1\"}"}};
    check_with(&z, NULL);
}

/* cases 6-8, 11-13 */
static void test_well_formed(void **st)
{
    (void)st;
    /* 6, 17: no call */
    struct expect a = {"A plain response.", 0, 1, "A plain response.", NULL, 0, 0, {NULL}};
    check_case(&a);
    /* 7, 11, 13 */
    struct expect b = {"sure![CS]" C_W "[/CS]", 0, 1, "sure!", NULL, 1, 1, {W_ARGS}};
    check_case(&b);
    /* 8: block at the start (content null), zero-arg call, order kept, CJK unescaped */
    struct expect c = {"[CS]" C_D "[C]get_weather[K]city[/K][V]北京[/V][/C][/CS]",
                       0,
                       1,
                       "",
                       NULL,
                       2,
                       2,
                       {D_ARGS, "get_weather\x01{\"city\": \"北京\"}"}};
    check_case(&c);
    /* 12: two calls */
    struct expect d = {"[CS][C]get_weather[K]city[/K][V]Beijing[/V][/C]" C_D "[/CS]",
                       0,
                       1,
                       "",
                       NULL,
                       2,
                       2,
                       {"get_weather\x01{\"city\": \"Beijing\"}", D_ARGS}};
    check_case(&d);
    /* PR #55550: a zero-arg call followed by a call with arguments keeps both names */
    struct expect e = {"[CS]" C_D C_W C_D "[/CS]", 0, 1, "", NULL, 3, 3, {D_ARGS, W_ARGS, D_ARGS}};
    check_case(&e);
    /* PR #55788: newline-separated calls in one delta all parse; whitespace between tags is fine */
    struct expect f = {"[CS]\n" C_W "\n" C_D "\n\n  " C_W "\n[/CS]", 0, 1, "", NULL, 3, 3, {W_ARGS, D_ARGS, W_ARGS}};
    check_case(&f);
    struct expect g = {"[CS]\n[C] get_weather \n[K] city [/K]\n[V] Beijing \n[/V]\n[/C]\n[/CS]",
                       0,
                       1,
                       "",
                       NULL,
                       1,
                       1,
                       {"get_weather\x01{\"city\": \" Beijing \\n\"}"}};
    check_case(&g);
    /* values are raw: escapes written as the final serialiser does, no unquoting */
    struct expect h = {"[CS][C]get_weather[K]city[/K][V]\"a\\b\"\n\t</x>[/V][/C][/CS]", 0, 1, "", NULL, 1, 1,
                       {"get_weather\x01{\"city\": \"\\\"a\\\\b\\\"\\n\\t</x>\"}"}};
    check_case(&h);
    /* reasoning first (Hy4's prompt ends with <think SUF>), then content and calls; text after
     * </tool_calls> is content (S1) */
    struct expect i = {
        "I should call it.[/TH]sure![CS]" C_W "[/CS] done", 1, 1, "sure! done", "I should call it.", 1, 1, {W_ARGS}};
    check_case(&i);
    /* markup inside the think block is reasoning */
    struct expect j = {"[TH]plan " C_D "[/TH][CS]" C_D "[/CS]", 1, 0, "", "plan " C_D, 1, 1, {D_ARGS}};
    check_case(&j);
    /* duplicate keys are written as they come */
    struct expect k = {"[CS][C]get_weather[K]city[/K][V]A[/V][K]city[/K][V]B[/V][/C][/CS]",
                       0,
                       1,
                       "",
                       NULL,
                       1,
                       1,
                       {"get_weather\x01{\"city\": \"A\", \"city\": \"B\"}"}};
    check_case(&k);
}

/* cases 9-10 under S1-S5 (vLLM's strict mode would return the whole text and no call) */
static void test_malformed(void **st)
{
    (void)st;
    /* missing </tool_calls>: the complete call stands */
    struct expect a = {"x[CS]" C_W, 0, 1, "x", NULL, 1, 1, {W_ARGS}};
    check_case(&a);
    /* unclosed <tool_call> (S4): the announced call keeps its bytes, is incomplete; the rest is text */
    struct expect b = {"[CS][C]get_weather[K]city[/K][V]Beijing[/V][/CS]", 0, 0, "[/CS]", NULL, 1, 0,
                       {"get_weather\x01{\"city\": \"Beijing\""}};
    check_case(&b);
    /* empty name (S3): never announced, the raw text is content */
    struct expect c = {"[CS][C][K]city[/K][V]Beijing[/V][/C][/CS]",
                       0,
                       0,
                       "[CS][C][K]city[/K][V]Beijing[/V][/C][/CS]",
                       NULL,
                       0,
                       0,
                       {NULL}};
    check_case(&c);
    struct expect c2 = {"[CS][C] \n[/C][/CS]", 0, 0, "[CS][C] \n[/C][/CS]", NULL, 0, 0, {NULL}};
    check_case(&c2);
    /* junk after a pair inside a call (S4) */
    struct expect d = {"[CS][C]get_weather[K]city[/K][V]Beijing[/V]junk[/C][/CS]",
                       0,
                       0,
                       "junk[/C][/CS]",
                       NULL,
                       1,
                       0,
                       {"get_weather\x01{\"city\": \"Beijing\""}};
    check_case(&d);
    /* key without value (S4) */
    struct expect e = {"[CS][C]get_weather[K]city[/K][/C][/CS]", 0, 0, "[/C][/CS]", NULL, 1, 0, {"get_weather\x01{"}};
    check_case(&e);
    /* closer before opener: the closer is text, the empty block is text (S2) */
    struct expect f = {"[/CS]x[CS]", 0, 0, "[/CS]x[CS]", NULL, 0, 0, {NULL}};
    check_case(&f);
    /* 10: junk in the block (S2/S3): raw text */
    struct expect g = {"[CS]junk[/CS]", 0, 0, "[CS]junk[/CS]", NULL, 0, 0, {NULL}};
    check_case(&g);
    /* 10: two calls are two entries */
    struct expect h = {"[CS]" C_W C_W "[/CS]", 0, 1, "", NULL, 2, 2, {W_ARGS, W_ARGS}};
    check_case(&h);
    /* S3 after a complete call: it stays; the broken one is text */
    struct expect i = {
        "[CS]" C_D "[C]get_weather[/K]x[/C][/CS]", 0, 0, "[C]get_weather[/K]x[/C][/CS]", NULL, 1, 1, {D_ARGS}};
    check_case(&i);
    /* Hy3 markup in the Hy4 dialect: <tool_sep> inside a name breaks it (S3) */
    struct expect j = {
        "[CS][C]get_current_date[SEP][/C][/CS]", 0, 0, "[CS][C]get_current_date[SEP][/C][/CS]", NULL, 0, 0, {NULL}};
    check_case(&j);
    /* S5: cut inside a string value, inside a buffered value, inside a name, inside a marker */
    struct expect k = {"[CS][C]get_weather[K]city[/K][V]Bei", 0, 1, "", NULL, 1, 0,
                       {"get_weather\x01{\"city\": \"Bei"}};
    check_case(&k);
    struct expect l = {"[CS]" C_D "[C]get_weather[K]days[/K][V]1", 0, 1, "", NULL, 2, 1, {D_ARGS, "get_weather\x01{"}};
    check_case(&l);
    struct expect m = {"[CS][C]get_wea", 0, 0, "[CS][C]get_wea", NULL, 0, 0, {NULL}};
    check_case(&m);
    struct expect n = {"Hello <tool_ca", 0, 0, "Hello <tool_ca", NULL, 0, 0, {NULL}};
    check_case(&n);
    /* S2: an empty block */
    struct expect o = {"hi [CS]\n[/CS]", 0, 0, "hi [CS]\n[/CS]", NULL, 0, 0, {NULL}};
    check_case(&o);
}

/* ---------------------------------------------------------------- explicit deltas, cases 14-18 */

/* Feeds deltas (NULL-terminated, templates) through the tool parser only; returns the parser for
 * inspection (caller frees) and appends content. */
static void feed_deltas(const struct hy_tool_markers *mk, const json_t *tools, const char *const *deltas,
                        struct hy_toolcall_parser *p, struct hy_sbuf *content)
{
    hy_toolcall_init(p, mk, tools);
    for (int i = 0; deltas[i]; i++) {
        char *d = expand(deltas[i], mk);
        assert_int_equal(hy_toolcall_feed(p, d, strlen(d), content), 0);
        free(d);
    }
    assert_int_equal(hy_toolcall_finish(p, content), 0);
    hy_sbuf_puts(content, "");
}

static void test_split_markers(void **st)
{
    (void)st;
    json_t *tools = json_loads(k_tools_json, 0, NULL);
    for (int s = 0; s < N_SUF; s++) {
        const struct hy_tool_markers *mk = &g_mk[s];
        /* 15: markers split across deltas, whitespace between the wrapper and the call */
        char d1[64], d2[64];
        snprintf(d1, sizeof(d1), "s%s>", mk->suffix);
        snprintf(d2, sizeof(d2), "call%s>", mk->suffix);
        const char *const deltas[] = {"hi",
                                      "<tool_call",
                                      d1,
                                      "\n ",
                                      " <tool_",
                                      d2,
                                      "get_weather[K]city[/K]"
                                      "[V]Beijing[/V][/C][/CS]",
                                      NULL};
        struct hy_toolcall_parser p;
        struct hy_sbuf content = {0};
        feed_deltas(mk, tools, deltas, &p, &content);
        assert_string_equal(content.p, "hi");
        assert_int_equal(p.n_complete, 1);
        assert_string_equal(p.calls[0].name, "get_weather");
        assert_string_equal(p.calls[0].args.p, "{\"city\": \"Beijing\"}");
        hy_toolcall_free(&p);
        hy_sbuf_free(&content);
        /* 16: </arg_value> split as "</arg_" + "value SUF>" */
        char d3[64];
        snprintf(d3, sizeof(d3), "value%s>", mk->suffix);
        const char *const deltas2[] = {"[CS][C]get_weather[K]city[/K][V]Beijing</arg_", d3, "[/C][/CS]", NULL};
        memset(&content, 0, sizeof(content));
        feed_deltas(mk, tools, deltas2, &p, &content);
        assert_string_equal(content.p, "");
        assert_int_equal(p.n_complete, 1);
        assert_string_equal(p.calls[0].args.p, "{\"city\": \"Beijing\"}");
        hy_toolcall_free(&p);
        hy_sbuf_free(&content);
    }
    json_decref(tools);
}

/* 14: a buffered (integer) value never appears partially */
static void test_integer_never_partial(void **st)
{
    (void)st;
    json_t *tools = json_loads(k_tools_json, 0, NULL);
    for (int s = 0; s < N_SUF; s++) {
        char *text = expand("[CS][C]get_weather[K]city[/K][V]A[/V][K]days[/K][V]17[/V][/C][/CS]", &g_mk[s]);
        struct hy_toolcall_parser p;
        hy_toolcall_init(&p, &g_mk[s], tools);
        struct hy_sbuf content = {0};
        for (size_t i = 0; text[i]; i++) {
            assert_int_equal(hy_toolcall_feed(&p, text + i, 1, &content), 0);
            if (p.n_calls) {
                const char *a = p.calls[0].args.p;
                const char *d = strstr(a, "\"days\": ");
                if (d && strncmp(d, "\"days\": 17", 10))
                    fail_msg("partial integer: [%s]", a);
            }
        }
        assert_int_equal(hy_toolcall_finish(&p, &content), 0);
        json_t *j = json_loads(p.calls[0].args.p, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(j, "city")), "A");
        assert_int_equal(json_integer_value(json_object_get(j, "days")), 7 + 10);
        json_decref(j);
        assert_int_equal(content.len, 0);
        hy_toolcall_free(&p);
        hy_sbuf_free(&content);
        free(text);
    }
    json_decref(tools);
}

/* 17-18: content is not buffered; a name is announced exactly when <arg_key> or </tool_call> ends
 * it, once; the recorded calls and the streamed argument bytes */
static void test_announce_points(void **st)
{
    (void)st;
    json_t *tools = json_loads(k_tools_json, 0, NULL);
    for (int s = 0; s < N_SUF; s++) {
        const struct hy_tool_markers *mk = &g_mk[s];
        struct hy_toolcall_parser p;
        hy_toolcall_init(&p, mk, tools);
        struct hy_sbuf content = {0};
        /* 17: plain text goes out as it comes; an empty delta adds nothing */
        assert_int_equal(hy_toolcall_feed(&p, "Plain ", 6, &content), 0);
        assert_string_equal(content.p, "Plain ");
        assert_int_equal(hy_toolcall_feed(&p, "", 0, &content), 0);
        assert_int_equal(content.len, 6);
        assert_int_equal(hy_toolcall_feed(&p, "answer.", 7, &content), 0);
        assert_int_equal(content.len, 13);
        /* 18 */
        static const struct {
            const char *delta;
            int n_calls, n_complete;
            const char *args_sent; /* streamed so far for the last call */
        } steps[] = {
            {"[CS]", 0, 0, NULL},
            {"[C]get_weather", 0, 0, NULL},
            {"[K]", 1, 0, "{"},
            {"city[/K][V]", 1, 0, "{\"city\": \""},
            {"A", 1, 0, "{\"city\": \"A"},
            {"[/V]", 1, 0, "{\"city\": \"A\""},
            {"[/C]", 1, 1, "{\"city\": \"A\"}"},
            {"[C]get_current_date", 1, 1, NULL},
            {"[/C]", 2, 2, "{}"},
            {"[/CS]", 2, 2, "{}"},
        };
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
            char *d = expand(steps[i].delta, mk);
            assert_int_equal(hy_toolcall_feed(&p, d, strlen(d), &content), 0);
            free(d);
            if (p.n_calls != steps[i].n_calls || p.n_complete != steps[i].n_complete)
                fail_msg("suffix [%s] step %zu: %d/%d calls", k_suffixes[s], i, p.n_calls, p.n_complete);
            if (steps[i].args_sent)
                assert_string_equal(p.calls[p.n_calls - 1].args.p, steps[i].args_sent);
        }
        assert_int_equal(hy_toolcall_finish(&p, &content), 0);
        hy_sbuf_puts(&content, "");
        assert_string_equal(content.p, "Plain answer.");
        assert_string_equal(p.calls[0].name, "get_weather");
        assert_string_equal(p.calls[1].name, "get_current_date");
        hy_toolcall_free(&p);
        hy_sbuf_free(&content);
    }
    json_decref(tools);
}

/* The Hy4 parser forced to Hy3 (--tool-call-parser hy_v3) reads Hy3 markup with the same suffix. */
static void test_forced_hy3(void **st)
{
    (void)st;
    json_t *tools = json_loads(k_tools_json, 0, NULL);
    for (int s = 0; s < N_SUF; s++) {
        struct hy_tool_markers mk = g_mk[s];
        hy_tool_markers_set_dialect(&mk, HY_TOOL_DIALECT_HY3);
        const char *const deltas[] = {"[CS]\n[C]get_current_date[SEP]\n[/C]\n[/CS]", NULL};
        struct hy_toolcall_parser p;
        struct hy_sbuf content = {0};
        feed_deltas(&mk, tools, deltas, &p, &content);
        assert_int_equal(p.n_complete, 1);
        assert_string_equal(p.calls[0].name, "get_current_date");
        assert_string_equal(p.calls[0].args.p, "{}");
        assert_string_equal(content.p, "");
        hy_toolcall_free(&p);
        hy_sbuf_free(&content);
    }
    json_decref(tools);
}

/* ---------------------------------------------------------------- reasoning, cases 20-22 */

/* Splits text (a template) fed in chunks of `kind`; the content / reasoning templates expected. */
static void check_split(const char *tmpl, int start_in_reasoning, const char *want_r, const char *want_c)
{
    struct expect x = {tmpl, start_in_reasoning, 1, want_c, want_r, 0, 0, {NULL}};
    check_case(&x);
}

static void test_reasoning_split(void **st)
{
    (void)st;
    /* 20: the prompt ends with <think SUF> (thinking, the default effort high) */
    check_split("pondering[/TH]answer", 1, "pondering", "answer");
    check_split("[TH]pondering[/TH]answer", 1, "pondering", "answer"); /* echoed start tag */
    check_split("pondering", 1, "pondering", "");                      /* no end tag: all reasoning */
    check_split("pondering[/TH]", 1, "pondering", "");                 /* content empty (null) */
    check_split("answer", 0, "", "answer");                            /* no_think: <think></think> in the prompt */
    /* 21 */
    check_split("[/TH]c", 1, "", "c");
    check_split("[TH]r[/TH]c", 1, "r", "c");
    check_split("[TH]abc[/TH]def", 1, "abc", "def");
    check_split("思考🙂[/TH]答案 <b>x</b>", 1, "思考🙂", "答案 <b>x</b>");
    /* a stray closer after the split is dropped */
    check_split("r[/TH]a[/TH]b", 1, "r", "ab");
}

/* 21 with explicit deltas: a delta that is exactly one start or end marker gives nothing */
static void test_reasoning_deltas(void **st)
{
    (void)st;
    for (int s = 0; s < N_SUF; s++) {
        const struct hy_tool_markers *mk = &g_mk[s];
        static const struct {
            const char *deltas[4];
            const char *r, *c;
        } cases[] = {
            {{"pondering", "[/TH]", "answer", NULL}, "pondering", "answer"},
            {{"[TH]abc", "[/TH]", "def", NULL}, "abc", "def"},
            {{"[TH]abc[/TH]def", NULL}, "abc", "def"},
            {{"[TH]", "abc", "[/TH]def", NULL}, "abc", "def"},
            {{"[/TH]c", NULL}, "", "c"},
        };
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            struct hy_reasoning r;
            hy_reasoning_init_markers(&r, 1, mk->text[HY_TM_THINK_OPEN], mk->text[HY_TM_THINK_CLOSE]);
            struct hy_sbuf c = {0}, z = {0};
            for (int i = 0; cases[k].deltas[i]; i++) {
                char *d = expand(cases[k].deltas[i], mk);
                const size_t cl = c.len, zl = z.len;
                assert_int_equal(hy_reasoning_feed(&r, d, strlen(d), &c, &z), 0);
                if (!strcmp(d, mk->text[HY_TM_THINK_OPEN]) || !strcmp(d, mk->text[HY_TM_THINK_CLOSE])) {
                    assert_int_equal(c.len, cl); /* a lone marker delta: nothing */
                    assert_int_equal(z.len, zl);
                }
                free(d);
            }
            assert_int_equal(hy_reasoning_flush(&r, &c, &z), 0);
            hy_sbuf_puts(&c, "");
            hy_sbuf_puts(&z, "");
            assert_string_equal(z.p, cases[k].r);
            assert_string_equal(c.p, cases[k].c);
            hy_reasoning_free(&r);
            hy_sbuf_free(&c);
            hy_sbuf_free(&z);
        }
        /* 22: "reasoning ended" = the last marker seen is an end marker */
        char *ended = expand("1[/TH]2", mk), *reopened = expand("[/TH][TH]", mk), *held = expand("12[/TH]", mk);
        struct hy_reasoning r;
        struct hy_sbuf c = {0}, z = {0};
        hy_reasoning_init_markers(&r, 1, mk->text[HY_TM_THINK_OPEN], mk->text[HY_TM_THINK_CLOSE]);
        assert_int_equal(hy_reasoning_feed(&r, ended, strlen(ended), &c, &z), 0);
        assert_int_equal(r.in_reasoning, 0);
        hy_reasoning_free(&r);
        hy_reasoning_init_markers(&r, 1, mk->text[HY_TM_THINK_OPEN], mk->text[HY_TM_THINK_CLOSE]);
        assert_int_equal(hy_reasoning_feed(&r, reopened, strlen(reopened), &c, &z), 0);
        assert_int_equal(r.in_reasoning, 1);
        hy_reasoning_free(&r);
        /* content after "12</think>" is empty */
        c.len = z.len = 0;
        hy_reasoning_init_markers(&r, 1, mk->text[HY_TM_THINK_OPEN], mk->text[HY_TM_THINK_CLOSE]);
        assert_int_equal(hy_reasoning_feed(&r, held, strlen(held), &c, &z), 0);
        assert_int_equal(hy_reasoning_flush(&r, &c, &z), 0);
        assert_int_equal(c.len, 0);
        assert_int_equal(z.len, 2);
        hy_reasoning_free(&r);
        hy_sbuf_free(&c);
        hy_sbuf_free(&z);
        free(ended);
        free(reopened);
        free(held);
    }
}

/* Hy4's generation prompts: thinking ends with <think SUF>, no_think with <think SUF></think SUF>. */
static void test_prompt_open(void **st)
{
    (void)st;
    for (int s = 0; s < N_SUF; s++) {
        const struct hy_tool_markers *mk = &g_mk[s];
        const char *o = mk->text[HY_TM_THINK_OPEN], *c = mk->text[HY_TM_THINK_CLOSE];
        char think[256], no_think[256], hist[256];
        snprintf(think, sizeof(think), "<" BAR "hy_start" BAR ">assistant<" BAR "hy_middle" BAR ">%s", o);
        snprintf(no_think, sizeof(no_think), "<" BAR "hy_start" BAR ">assistant<" BAR "hy_middle" BAR ">%s%s", o, c);
        snprintf(hist, sizeof(hist), "%sa%sb%s\n", o, c, o);
        assert_true(hy_reasoning_prompt_open_markers(think, strlen(think), o, c));
        assert_false(hy_reasoning_prompt_open_markers(no_think, strlen(no_think), o, c));
        assert_true(hy_reasoning_prompt_open_markers(hist, strlen(hist), o, c)); /* SMG's trailing newline */
        assert_false(hy_reasoning_prompt_open_markers("hello", 5, o, c));
    }
    assert_false(hy_reasoning_prompt_open_markers("<think>", 7, "", "</think>"));
    assert_false(hy_reasoning_prompt_open_markers("<think>", 7, NULL, NULL));
}

static int setup(void **st)
{
    (void)st;
    for (int s = 0; s < N_SUF; s++) {
        g_tok[s] = hy4_tok(k_suffixes[s]);
        if (hy_tool_markers_from_vocab(g_tok[s], &g_mk[s])) {
            fprintf(stderr, "markers: %s\n", hy_err_msg());
            return -1;
        }
    }
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    for (int s = 0; s < N_SUF; s++)
        hy_tokenizer_free(g_tok[s]);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suffix_detection), cmocka_unit_test(test_markers_from_vocab),
        cmocka_unit_test(test_zero_arg_call),    cmocka_unit_test(test_typed_arguments),
        cmocka_unit_test(test_well_formed),      cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_split_markers),    cmocka_unit_test(test_integer_never_partial),
        cmocka_unit_test(test_announce_points),  cmocka_unit_test(test_forced_hy3),
        cmocka_unit_test(test_reasoning_split),  cmocka_unit_test(test_reasoning_deltas),
        cmocka_unit_test(test_prompt_open),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
