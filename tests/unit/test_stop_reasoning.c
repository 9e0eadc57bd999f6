/* test_stop_reasoning.c - stop-string hold-back and reasoning splitting over every chunking of the
 * streamed text: the streamed result equals the one-shot result, released text is always a
 * prefix of the final text, no stop string or marker text ever leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "text/reasoning.h"
#include "text/stop.h"

static uint64_t rng = 12345;
static unsigned rnd(unsigned n)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)((rng >> 33) % n);
}

/* Feeds `text` in random pieces; returns the released text (malloc'd) and whether it matched. */
static char *stop_stream(const char *const *stops, size_t ns, const char *text, int *matched, int check_prefix,
                         const char *final_expect)
{
    struct hy_stop_matcher m;
    assert_int_equal(hy_stop_init(&m, stops, ns), 0);
    struct hy_sbuf out = {0};
    size_t len = strlen(text), i = 0;
    *matched = 0;
    while (i < len && !*matched) {
        size_t k = 1 + rnd(4);
        if (k > len - i)
            k = len - i;
        int r = hy_stop_feed(&m, text + i, k, &out);
        assert_true(r >= 0);
        *matched = r;
        i += k;
        if (check_prefix && out.len)
            assert_memory_equal(out.p, final_expect, out.len); /* never released more than the final text */
    }
    if (!*matched)
        assert_int_equal(hy_stop_flush(&m, &out), 0);
    hy_stop_free(&m);
    char *s = strndup(out.p ? out.p : "", out.len);
    hy_sbuf_free(&out);
    return s;
}

static void test_stop_basic(void **st)
{
    (void)st;
    const char *stops[] = {"END", "\n\n"};
    for (int rep = 0; rep < 200; rep++) {
        int matched;
        char *s = stop_stream(stops, 2, "hello EN world ENDING more", &matched, 1, "hello EN world ");
        assert_true(matched);
        assert_string_equal(s, "hello EN world ");
        free(s);
        s = stop_stream(stops, 2, "a\nb\n\nc", &matched, 1, "a\nb");
        assert_true(matched);
        assert_string_equal(s, "a\nb");
        free(s);
        /* no match: everything, including a trailing partial stop, is released at the end */
        s = stop_stream(stops, 2, "abc EN", &matched, 1, "abc EN");
        assert_false(matched);
        assert_string_equal(s, "abc EN");
        free(s);
    }
}

static void test_stop_holds_partial(void **st)
{
    (void)st;
    const char *stops[] = {"STOP"};
    struct hy_stop_matcher m;
    struct hy_sbuf out = {0};
    assert_int_equal(hy_stop_init(&m, stops, 1), 0);
    assert_int_equal(hy_stop_feed(&m, "abc ST", 6, &out), 0);
    assert_int_equal(out.len, 4); /* "ST" held */
    assert_memory_equal(out.p, "abc ", 4);
    assert_int_equal(hy_stop_feed(&m, "O", 1, &out), 0);
    assert_int_equal(out.len, 4);
    assert_int_equal(hy_stop_feed(&m, "P tail", 6, &out), 1);
    assert_int_equal(out.len, 4);
    assert_string_equal(m.which, "STOP");
    /* after a match further text is ignored */
    assert_int_equal(hy_stop_feed(&m, "zzz", 3, &out), 1);
    assert_int_equal(out.len, 4);
    hy_stop_free(&m);
    /* a held partial that turns out not to be a stop is released */
    assert_int_equal(hy_stop_init(&m, stops, 1), 0);
    out.len = 0;
    assert_int_equal(hy_stop_feed(&m, "xST", 3, &out), 0);
    assert_int_equal(hy_stop_feed(&m, "x", 1, &out), 0);
    assert_int_equal(out.len, 4);
    assert_memory_equal(out.p, "xSTx", 4);
    hy_stop_free(&m);
    /* no stop strings: pass-through; empty strings are ignored */
    const char *empty[] = {""};
    assert_int_equal(hy_stop_init(&m, empty, 1), 0);
    out.len = 0;
    assert_int_equal(hy_stop_feed(&m, "S", 1, &out), 0);
    assert_int_equal(out.len, 1);
    hy_stop_free(&m);
    hy_sbuf_free(&out);
}

static void test_stop_utf8(void **st)
{
    (void)st;
    const char *stops[] = {"。", "🙂!"};
    for (int rep = 0; rep < 200; rep++) {
        int matched;
        char *s = stop_stream(stops, 2, "你好🙂世界。后面", &matched, 1, "你好🙂世界");
        assert_true(matched);
        assert_string_equal(s, "你好🙂世界");
        free(s);
        s = stop_stream(stops, 2, "ab🙂🙂!cd", &matched, 1, "ab🙂");
        assert_true(matched);
        assert_string_equal(s, "ab🙂");
        free(s);
    }
}

/* reasoning: split the whole string at once, then in random pieces; both must agree */
static void split(const char *text, int start, int random_pieces, char **content, char **reasoning)
{
    struct hy_reasoning r;
    hy_reasoning_init(&r, start);
    struct hy_sbuf c = {0}, z = {0};
    size_t len = strlen(text), i = 0;
    while (i < len) {
        size_t k = random_pieces ? 1 + rnd(5) : len;
        if (k > len - i)
            k = len - i;
        assert_int_equal(hy_reasoning_feed(&r, text + i, k, &c, &z), 0);
        /* nothing released ever contains a marker or a marker's '<' start that was later completed */
        if (c.len)
            assert_null(strstr(c.p, "think:opensource"));
        if (z.len)
            assert_null(strstr(z.p, "think:opensource"));
        i += k;
    }
    assert_int_equal(hy_reasoning_flush(&r, &c, &z), 0);
    hy_reasoning_free(&r);
    *content = strndup(c.p ? c.p : "", c.len);
    *reasoning = strndup(z.p ? z.p : "", z.len);
    hy_sbuf_free(&c);
    hy_sbuf_free(&z);
}

static void check_split(const char *text, int start, const char *want_c, const char *want_r)
{
    for (int rep = 0; rep < 100; rep++) {
        char *c, *r;
        split(text, start, rep > 0, &c, &r);
        assert_string_equal(c, want_c);
        assert_string_equal(r, want_r);
        free(c);
        free(r);
    }
}

static void test_reasoning(void **st)
{
    (void)st;
    check_split("<think:opensource>let me see</think:opensource>The answer is 4.", 0, "The answer is 4.", "let me see");
    /* prompt ended inside an open think block (effort low/high) */
    check_split("hmm, 2+2</think:opensource>4", 1, "4", "hmm, 2+2");
    /* no_think: empty think block already in the prompt; plain content, stray markers dropped */
    check_split("plain <b>answer</b></think:opensource> done", 0, "plain <b>answer</b> done", "");
    /* unterminated reasoning stays reasoning */
    check_split("thinking <think:opensource>still", 1, "", "thinking still");
    /* a '<' that is not a marker is released */
    check_split("a < b and </think:open", 0, "a < b and </think:open", "");
    check_split("数学🙂<think:opensource>思考</think:opensource>答案", 0, "数学🙂答案", "思考");
}

static void test_prompt_open(void **st)
{
    (void)st;
    const char *p1 = "<x><｜hy_Assistant:opensource｜><think:opensource>";
    const char *p2 = "<x><｜hy_Assistant:opensource｜><think:opensource></think:opensource>";
    const char *p3 = "<think:opensource>a</think:opensource>b<think:opensource>";
    assert_true(hy_reasoning_prompt_open(p1, strlen(p1)));
    assert_false(hy_reasoning_prompt_open(p2, strlen(p2)));
    assert_true(hy_reasoning_prompt_open(p3, strlen(p3)));
    assert_false(hy_reasoning_prompt_open("hello", 5));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_basic), cmocka_unit_test(test_stop_holds_partial), cmocka_unit_test(test_stop_utf8),
        cmocka_unit_test(test_reasoning),  cmocka_unit_test(test_prompt_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
