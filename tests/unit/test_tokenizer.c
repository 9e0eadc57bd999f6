/* test_tokenizer.c - unit tests of src/text/tokenizer.h on small hand-made tokenizer.json files
 * (exact expected ids worked out by hand from the HF `tokenizers` rules) and on the hy3-golden-b
 * tokenizer from tests/data: BPE merge order, added tokens, Split behaviors, ByteLevel regex and
 * prefix space, SentencePiece-style normalizer + byte_fallback + decoder, tiktoken files,
 * streaming detokenization of CJK / emoji split over tokens, invalid UTF-8, error messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/hy_tok_test_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *write_tmp(const char *name, const char *data, size_t len)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
    return path;
}

/* Surface (GPT-2 byte-level) form of raw bytes. */
static void surf_of(const char *raw, size_t n, char *out)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        w += (size_t)hy_utf8_encode(hy_bytelevel_cp((uint8_t)raw[i]), out + w);
    out[w] = '\0';
}

/* A byte-level tokenizer.json: ids 0..255 = bytes, then `merges` (raw "a+b" pairs, each adding
 * the merged token), then the JSON fragments given for added_tokens / pre_tokenizer. */
static struct hy_tokenizer *bytelevel_tok(const char *const *merges, int n_merges, const char *pre, const char *added,
                                          const char *extra_model)
{
    json_t *vocab = json_object();
    json_t *jm = json_array();
    char s[64], s2[64];
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        surf_of(&c, 1, s);
        json_object_set_new(vocab, s, json_integer(b));
    }
    for (int i = 0; i < n_merges; i++) {
        const char *sp = strchr(merges[i], '+');
        char l[32], r[32], both[64];
        snprintf(l, sizeof(l), "%.*s", (int)(sp - merges[i]), merges[i]);
        snprintf(r, sizeof(r), "%s", sp + 1);
        snprintf(both, sizeof(both), "%s%s", l, r);
        surf_of(l, strlen(l), s);
        surf_of(r, strlen(r), s2);
        char m[140];
        snprintf(m, sizeof(m), "%s %s", s, s2);
        json_array_append_new(jm, json_string(m));
        surf_of(both, strlen(both), s);
        if (!json_object_get(vocab, s))
            json_object_set_new(vocab, s, json_integer(256 + i));
    }
    json_t *model = json_pack("{s:s,s:o,s:o}", "type", "BPE", "vocab", vocab, "merges", jm);
    if (extra_model) {
        json_t *x = json_loads(extra_model, 0, NULL);
        assert_non_null(x);
        json_object_update(model, x);
        json_decref(x);
    }
    json_t *root = json_object();
    json_object_set_new(root, "model", model);
    /* the given pre-tokenizer, then ByteLevel (what makes the model see bytes) */
    json_t *seq = json_array();
    json_t *pj = json_loads(pre, JSON_DECODE_ANY, NULL);
    assert_non_null(pj);
    const char *pty = json_string_value(json_object_get(pj, "type"));
    if (!json_is_null(pj))
        json_array_append(seq, pj);
    if (!pty || strcmp(pty, "ByteLevel") != 0)
        json_array_append_new(seq,
                              json_pack("{s:s,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 0));
    json_decref(pj);
    json_object_set_new(root, "pre_tokenizer", json_pack("{s:s,s:o}", "type", "Sequence", "pretokenizers", seq));
    json_object_set_new(root, "decoder", json_pack("{s:s}", "type", "ByteLevel"));
    json_object_set_new(root, "added_tokens", added ? json_loads(added, 0, NULL) : json_array());
    char *text = json_dumps(root, 0);
    json_decref(root);
    struct hy_tokenizer *t = NULL;
    int rc = hy_tokenizer_load_json_mem(text, strlen(text), "test.json", &t);
    if (rc != 0)
        fprintf(stderr, "load: %s\n", hy_err_msg());
    free(text);
    assert_int_equal(rc, 0);
    return t;
}

static void expect_ids(const struct hy_tokenizer *t, const char *text, int allow_special, const int32_t *want,
                       size_t n_want)
{
    int32_t *ids;
    size_t n;
    assert_int_equal(hy_tokenizer_encode(t, text, strlen(text), allow_special, &ids, &n), 0);
    if (n != n_want || (n && memcmp(ids, want, n * sizeof(int32_t)) != 0)) {
        fprintf(stderr, "text %s:\n  want", text);
        for (size_t i = 0; i < n_want; i++)
            fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n  got ");
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
        fail();
    }
    free(ids);
}

#define EXPECT(t, text, sp, ...)                                                                                       \
    do {                                                                                                               \
        const int32_t w_[] = {__VA_ARGS__};                                                                            \
        expect_ids(t, text, sp, w_, sizeof(w_) / sizeof(w_[0]));                                                       \
    } while (0)

static int32_t id_of(const struct hy_tokenizer *t, const char *raw)
{
    char s[256];
    surf_of(raw, strlen(raw), s);
    int32_t id = hy_tokenizer_token_to_id(t, s);
    assert_true(id >= 0);
    return id;
}

static int utf8_ok(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int l = hy_utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (l == 0)
            return 0;
        i += (size_t)l;
    }
    return 1;
}

/* ---------------------------------------------------------------- BPE merge order */

static void test_merge_priority(void **state)
{
    (void)state;
    /* "b c" outranks "a b": in "abc" b+c merge first, then a+bc is no merge -> [a][bc] */
    const char *m[] = {"b+c", "a+b", "ab+c"};
    struct hy_tokenizer *t = bytelevel_tok(m, 3, "null", NULL, NULL);
    EXPECT(t, "abc", 1, 'a', id_of(t, "bc"));
    EXPECT(t, "abd", 1, id_of(t, "ab"), 'd');
    hy_tokenizer_free(t);
    /* ties go to the leftmost pair: "aaa" -> [aa][a] */
    const char *m2[] = {"a+a", "aa+aa"};
    t = bytelevel_tok(m2, 2, "null", NULL, NULL);
    EXPECT(t, "aaa", 1, id_of(t, "aa"), 'a');
    EXPECT(t, "aaaaa", 1, id_of(t, "aaaa"), 'a');
    /* a long piece goes through the heap path: 100000 'a' -> 25000 x "aaaa" */
    size_t n = 100000;
    char *big = malloc(n + 1);
    memset(big, 'a', n);
    big[n] = '\0';
    int32_t *ids;
    size_t nid;
    assert_int_equal(hy_tokenizer_encode(t, big, n, 1, &ids, &nid), 0);
    assert_int_equal(nid, n / 4);
    for (size_t i = 0; i < nid; i++)
        assert_int_equal(ids[i], id_of(t, "aaaa"));
    free(ids);
    free(big);
    hy_tokenizer_free(t);
}

static void test_ignore_merges(void **state)
{
    (void)state;
    /* "abc" is a token but no merge path reaches it from [a][bc] */
    const char *m[] = {"b+c", "ab+c", "a+b"};
    struct hy_tokenizer *t = bytelevel_tok(m, 3, "null", NULL, NULL);
    EXPECT(t, "abc", 1, 'a', id_of(t, "bc"));
    hy_tokenizer_free(t);
    t = bytelevel_tok(m, 3, "null", NULL, "{\"ignore_merges\": true}");
    EXPECT(t, "abc", 1, id_of(t, "abc"));
    EXPECT(t, "abcb", 1, 'a', id_of(t, "bc"), 'b');
    hy_tokenizer_free(t);
}

/* ---------------------------------------------------------------- pre-tokenizers */

static const char *SPLIT_MERGES[] = {"-+-", "a+-", "-+a"};

static struct hy_tokenizer *split_tok(const char *behavior, int invert)
{
    char pre[256];
    snprintf(pre, sizeof(pre), "{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"%s\",\"invert\":%s}",
             behavior, invert ? "true" : "false");
    return bytelevel_tok(SPLIT_MERGES, 3, pre, NULL, NULL);
}

static void test_split_behaviors(void **state)
{
    (void)state;
    struct hy_tokenizer *t = split_tok("Isolated", 0);
    EXPECT(t, "a--a", 1, 'a', '-', '-', 'a');
    hy_tokenizer_free(t);
    t = split_tok("Contiguous", 0);
    EXPECT(t, "a--a", 1, 'a', id_of(t, "--"), 'a');
    hy_tokenizer_free(t);
    t = split_tok("MergedWithPrevious", 0);
    EXPECT(t, "a--a", 1, id_of(t, "a-"), '-', 'a');
    hy_tokenizer_free(t);
    t = split_tok("MergedWithNext", 0);
    EXPECT(t, "a--a", 1, 'a', '-', id_of(t, "-a"));
    hy_tokenizer_free(t);
    t = split_tok("Removed", 0);
    EXPECT(t, "a--a", 1, 'a', 'a');
    hy_tokenizer_free(t);
    t = split_tok("Removed", 1); /* invert: the non-matches are removed */
    EXPECT(t, "a--a", 1, '-', '-');
    hy_tokenizer_free(t);
    /* no pre-tokenizer: one piece, merges cross freely */
    t = bytelevel_tok(SPLIT_MERGES, 3, "null", NULL, NULL);
    EXPECT(t, "a-a", 1, id_of(t, "a-"), 'a');
    EXPECT(t, "a--a", 1, 'a', id_of(t, "--"), 'a');
    hy_tokenizer_free(t);
}

static void test_bytelevel_regex_and_prefix(void **state)
{
    (void)state;
    const char *m[] = {" +w", " w+o", "o+r"};
    /* use_regex: GPT-2 split " ?\p{L}+" keeps the space with the word; add_prefix_space */
    struct hy_tokenizer *t =
        bytelevel_tok(m, 3, "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}", NULL, NULL);
    EXPECT(t, "wor", 1, id_of(t, " wo"), 'r');
    EXPECT(t, "a wor's", 1, ' ', 'a', id_of(t, " wo"), 'r', '\'', 's');
    hy_tokenizer_free(t);
    t = bytelevel_tok(m, 3, "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}", NULL, NULL);
    EXPECT(t, "wor", 1, 'w', id_of(t, "or"));
    /* "x  wor": \s+(?!\S) leaves the last space to the word */
    EXPECT(t, "x  wor", 1, 'x', ' ', id_of(t, " wo"), 'r');
    hy_tokenizer_free(t);
}

/* ---------------------------------------------------------------- added tokens */

static void test_added_tokens(void **state)
{
    (void)state;
    const char *m[] = {"<+|", "a+b"};
    const char *added = "[{\"id\":300,\"content\":\"<|x|>\",\"special\":true},"
                        " {\"id\":301,\"content\":\"<|x|>y\",\"special\":true},"
                        " {\"id\":302,\"content\":\"<think>\",\"special\":false},"
                        " {\"id\":303,\"content\":\"[R]\",\"special\":true,\"lstrip\":true,\"rstrip\":true}]";
    struct hy_tokenizer *t = bytelevel_tok(m, 2, "null", added, NULL);
    assert_int_equal(hy_tokenizer_vocab_size(t), 304);
    EXPECT(t, "ab<|x|>ab", 1, id_of(t, "ab"), 300, id_of(t, "ab"));
    EXPECT(t, "<|x|>y<|x|>", 1, 301, 300); /* longest match first */
    /* allow_special 0: specials are text, non-special added tokens still match */
    EXPECT(t, "<|x|><think>", 0, id_of(t, "<|"), 'x', '|', '>', 302);
    EXPECT(t, "a  [R]  b", 1, 'a', 303, 'b'); /* lstrip / rstrip eat the spaces */
    assert_true(hy_tokenizer_is_special(t, 300));
    assert_false(hy_tokenizer_is_special(t, 302));
    assert_int_equal(hy_tokenizer_token_to_id(t, "<think>"), 302);
    size_t len;
    const char *b = hy_tokenizer_token_bytes(t, 301, &len);
    assert_int_equal(len, 6);
    assert_memory_equal(b, "<|x|>y", 6);
    assert_null(hy_tokenizer_token_bytes(t, 304, &len));
    assert_null(hy_tokenizer_token_bytes(t, -1, &len));
    int32_t ids[] = {'h', 300, 'i'};
    char *d = hy_tokenizer_decode(t, ids, 3, 1);
    assert_string_equal(d, "hi");
    free(d);
    d = hy_tokenizer_decode(t, ids, 3, 0);
    assert_string_equal(d, "h<|x|>i");
    free(d);
    int32_t bad[] = {1, 99999};
    assert_null(hy_tokenizer_decode(t, bad, 2, 0));
    hy_tokenizer_free(t);
}

/* ---------------------------------------------------------------- invalid UTF-8 input */

static void test_invalid_utf8(void **state)
{
    (void)state;
    const char *m[] = {"a+b"};
    struct hy_tokenizer *t = bytelevel_tok(
        m, 1, "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{L}+|\\\\s+\"},\"behavior\":\"Isolated\"}", NULL,
        NULL);
    const char text[] = "ab\xff\xfe"
                        "ab\xe4\xbd"
                        " ab\xc3";
    int32_t *ids;
    size_t n;
    assert_int_equal(hy_tokenizer_encode(t, text, sizeof(text) - 1, 1, &ids, &n), 0);
    char *d = hy_tokenizer_decode(t, ids, n, 0);
    assert_memory_equal(d, text, sizeof(text));
    assert_int_equal(ids[0], id_of(t, "ab"));
    assert_int_equal(ids[1], 0xff);
    free(d);
    free(ids);
    hy_tokenizer_free(t);
}

/* ---------------------------------------------------------------- SentencePiece style */

static struct hy_tokenizer *sp_tok(void)
{
    /* ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then pieces */
    json_t *vocab = json_object();
    json_object_set_new(vocab, "<unk>", json_integer(0));
    json_object_set_new(vocab, "<s>", json_integer(1));
    json_object_set_new(vocab, "</s>", json_integer(2));
    for (int b = 0; b < 256; b++) {
        char n[8];
        snprintf(n, sizeof(n), "<0x%02X>", b);
        json_object_set_new(vocab, n, json_integer(3 + b));
    }
    const char *pieces[] = {"\xe2\x96\x81",
                            "h",
                            "i",
                            "e",
                            "l",
                            "o",
                            "\xe2\x96\x81h",
                            "\xe2\x96\x81hi",
                            "el",
                            "ell",
                            "ello",
                            "\xe2\x96\x81hello",
                            "\xe2\x96\x81he"};
    for (int i = 0; i < 13; i++)
        json_object_set_new(vocab, pieces[i], json_integer(259 + i));
    json_t *merges = json_pack("[[s,s],[s,s],[s,s],[s,s],[s,s],[s,s],[s,s]]", "\xe2\x96\x81", "h", "\xe2\x96\x81h", "i",
                               "e", "l", "el", "l", "ell", "o", "\xe2\x96\x81h", "e", "\xe2\x96\x81he", "llo");
    /* replace the last pair by "▁h" + "ello" (-> "▁hello") */
    json_array_remove(merges, 6);
    json_array_append_new(merges, json_pack("[s,s]", "\xe2\x96\x81h", "ello"));
    const char *rest =
        "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
        "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]},"
        "\"pre_tokenizer\":null,"
        "\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},{\"id\":1,\"content\":\"<s>\",\"special\":"
        "true},"
        "{\"id\":2,\"content\":\"</s>\",\"special\":true}],"
        "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":"
        "0}},"
        "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],"
        "\"tokens\":[\"<s>\"]}}},"
        "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":"
        "\"\xe2\x96\x81\"},\"content\":\" \"},"
        "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" "
        "\",\"start\":1,\"stop\":0}]}}";
    json_t *root = json_loads(rest, 0, NULL);
    assert_non_null(root);
    json_object_set_new(root, "model",
                        json_pack("{s:s,s:o,s:o,s:b,s:s,s:b}", "type", "BPE", "vocab", vocab, "merges", merges,
                                  "byte_fallback", 1, "unk_token", "<unk>", "fuse_unk", 1));
    char *text = json_dumps(root, 0);
    json_decref(root);
    struct hy_tokenizer *t = NULL;
    int rc = hy_tokenizer_load_json_mem(text, strlen(text), "sp.json", &t);
    if (rc)
        fprintf(stderr, "%s\n", hy_err_msg());
    free(text);
    assert_int_equal(rc, 0);
    return t;
}

static void test_sentencepiece_style(void **state)
{
    (void)state;
    struct hy_tokenizer *t = sp_tok();
    int32_t hello = hy_tokenizer_token_to_id(t, "\xe2\x96\x81hello");
    int32_t hi = hy_tokenizer_token_to_id(t, "\xe2\x96\x81hi");
    int32_t sp = hy_tokenizer_token_to_id(t, "\xe2\x96\x81");
    assert_true(hello > 0 && hi > 0 && sp > 0);
    assert_int_equal(hy_tokenizer_add_bos(t), 1);
    /* "hello hi" -> "▁hello▁hi"; "é" is not in the vocab -> <0xC3><0xA9> */
    EXPECT(t, "hello hi", 1, hello, hi);
    EXPECT(t, "hi\xc3\xa9", 1, hi, 3 + 0xC3, 3 + 0xA9);
    /* the normalizer runs per segment between added tokens (HF behavior) */
    EXPECT(t, "hi<s>hi", 1, hi, 1, hi);
    EXPECT(t, " hi", 1, sp, hi);
    /* decode: ▁ -> space, byte fallback, one leading space stripped */
    int32_t ids[] = {hello, hi, 3 + 0xC3, 3 + 0xA9};
    char *d = hy_tokenizer_decode(t, ids, 4, 0);
    assert_string_equal(d, "hello hi\xc3\xa9");
    free(d);
    int32_t ids2[] = {1, hello};
    d = hy_tokenizer_decode(t, ids2, 2, 1);
    assert_string_equal(d, "hello");
    free(d);
    d = hy_tokenizer_decode(t, ids2, 2, 0);
    assert_string_equal(d, "<s> hello");
    free(d);
    /* streaming: same text, the first space is stripped, bytes joined */
    struct hy_detok dt;
    hy_detok_init(&dt, t, 1);
    char *out = NULL;
    size_t len = 0, cap = 0;
    int32_t seq[] = {1, hello, hi, 3 + 0xC3};
    for (int i = 0; i < 4; i++)
        assert_int_equal(hy_detok_push(&dt, seq[i], &out, &len, &cap), 0);
    assert_string_equal(out, "hello hi");
    assert_int_equal(hy_detok_push(&dt, 3 + 0xA9, &out, &len, &cap), 0);
    assert_string_equal(out, "hello hi\xc3\xa9");
    free(out);
    hy_tokenizer_free(t);
}

/* ---------------------------------------------------------------- streaming detokenizer */

static void check_stream(const struct hy_tokenizer *t, const char *text)
{
    int32_t *ids;
    size_t n;
    assert_int_equal(hy_tokenizer_encode(t, text, strlen(text), 1, &ids, &n), 0);
    struct hy_detok d;
    hy_detok_init(&d, t, 0);
    char *out = NULL;
    size_t len = 0, cap = 0, held = 0;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(hy_detok_push(&d, ids[i], &out, &len, &cap), 0);
        assert_true(utf8_ok(out, len)); /* never a broken sequence, after every token */
        assert_true(len <= strlen(text) && memcmp(out, text, len) == 0);
        if (d.n_pending)
            held++;
    }
    assert_int_equal(hy_detok_flush(&d, &out, &len, &cap), 0);
    assert_string_equal(out, text);
    free(out);
    free(ids);
    (void)held;
}

static void test_detok_stream(void **state)
{
    (void)state;
    /* byte-level with no merges: every CJK char / emoji is split over 3-4 tokens */
    struct hy_tokenizer *t = bytelevel_tok(NULL, 0, "null", NULL, NULL);
    const char *texts[] = {"你好，世界！", "emoji 😀🎉👍🏽 ZWJ 👩\u200d💻 🇨🇳",
                           "mixed 日本語 and Ελληνικά ✓", ""};
    for (int i = 0; i < 4; i++)
        check_stream(t, texts[i]);

    /* held bytes: the first two bytes of 你 (E4 BD A0) give nothing, the third completes it */
    struct hy_detok d;
    hy_detok_init(&d, t, 0);
    char *out = NULL;
    size_t len = 0, cap = 0;
    assert_int_equal(hy_detok_push(&d, 0xE4, &out, &len, &cap), 0);
    assert_int_equal(hy_detok_push(&d, 0xBD, &out, &len, &cap), 0);
    assert_int_equal(len, 0);
    assert_int_equal(d.n_pending, 2);
    assert_int_equal(hy_detok_push(&d, 0xA0, &out, &len, &cap), 0);
    assert_string_equal(out, "\xe4\xbd\xa0");
    /* invalid bytes become U+FFFD: a stray continuation byte, an interrupted sequence */
    assert_int_equal(hy_detok_push(&d, 0x80, &out, &len, &cap), 0);
    assert_int_equal(hy_detok_push(&d, 0xF0, &out, &len, &cap), 0);
    assert_int_equal(hy_detok_push(&d, 'x', &out, &len, &cap), 0);
    assert_string_equal(out, "\xe4\xbd\xa0\xef\xbf\xbd\xef\xbf\xbdx");
    /* an incomplete tail at the end is flushed as one U+FFFD */
    assert_int_equal(hy_detok_push(&d, 0xE4, &out, &len, &cap), 0);
    assert_int_equal(hy_detok_push(&d, 0xBD, &out, &len, &cap), 0);
    assert_int_equal(hy_detok_flush(&d, &out, &len, &cap), 0);
    assert_string_equal(out, "\xe4\xbd\xa0\xef\xbf\xbd\xef\xbf\xbdx\xef\xbf\xbd");
    assert_int_equal(hy_detok_push(&d, 99999, &out, &len, &cap), -1);
    free(out);
    hy_tokenizer_free(t);
}

static void test_hy3_golden_tokenizer(void **state)
{
    (void)state;
    const char *root = getenv("HYINFER_ROOT"); /* unset: run from the repository root */
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/tests/data/hy3-golden-llamacpp/hy3-golden-b", root && *root ? root : ".");
    struct hy_tokenizer *t;
    if (hy_tokenizer_load_dir(dir, &t) != 0)
        fail_msg("%s", hy_err_msg());
    assert_int_equal(hy_tokenizer_add_bos(t), 471);
    assert_int_equal(hy_tokenizer_vocab_size(t), 480);
    assert_true(hy_tokenizer_is_special(t, 475));
    assert_false(hy_tokenizer_is_special(t, 478));
    /* golden.json case 4: "the crown" -> [471, 116, 257, 280, 114, 431] */
    EXPECT(t, "the crown", 1, 116, 257, 280, 114, 431);
    check_stream(t, "你好，世界！😀 KING RICHARD III:\n<｜hy_User:opensource｜>🇨🇳");
    hy_tokenizer_free(t);
}

/* ---------------------------------------------------------------- tiktoken */

static void test_tiktoken_small(void **state)
{
    (void)state;
    /* 256 bytes then "ab" (256), "abc" (257), "bc" (258); specials from the config */
    char *buf = malloc(256 * 16 + 64);
    size_t w = 0;
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int b = 0; b < 256; b++)
        w += (size_t)sprintf(buf + w, "%c%c== %d\n", b64[b >> 2], b64[(b & 3) << 4], b);
    w += (size_t)sprintf(buf + w, "YWI= 256\nYWJj 257\nYmM= 258\n");
    const char *tt = write_tmp("t.tiktoken", buf, w);
    char ttp[512];
    snprintf(ttp, sizeof(ttp), "%s", tt);
    const char *cfg = "{\"pat_str\": \"\\\\p{L}+|\\\\s+|[^\\\\s\\\\p{L}]+\", \"added_tokens_decoder\": "
                      "{\"300\": {\"content\": \"<|e|>\", \"special\": true}}, \"add_bos_token\": true, "
                      "\"bos_token\": \"<|e|>\"}";
    const char *cp = write_tmp("tokenizer_config.json", cfg, strlen(cfg));
    struct hy_tokenizer *t;
    assert_int_equal(hy_tokenizer_load_tiktoken(ttp, cp, &t), 0);
    assert_int_equal(hy_tokenizer_vocab_size(t), 301);
    assert_int_equal(hy_tokenizer_add_bos(t), 300);
    /* "abc" is a token (whole-piece rule); "abcb" -> ab (rank 256) beats bc (258): [abc? no] */
    EXPECT(t, "abc", 1, 257);
    EXPECT(t, "abcb", 1, 257, 'b'); /* a+b (256), then ab+c (257) */
    EXPECT(t, "xbc ab<|e|>", 1, 'x', 258, ' ', 256, 300);
    EXPECT(t, "<|e|>", 0, '<', '|', 'e', '|', '>');
    hy_tokenizer_free(t);
    /* the directory loader finds the *.tiktoken + config */
    assert_int_equal(hy_tokenizer_load_dir(tmpdir, &t), 0);
    EXPECT(t, "abc<|e|>", 1, 257, 300);
    hy_tokenizer_free(t);
    free(buf);
}

/* ---------------------------------------------------------------- errors */

static void expect_error(int rc, const char *must1, const char *must2)
{
    assert_int_equal(rc, -1);
    const char *m = hy_err_msg();
    if (!strstr(m, must1) || (must2 && !strstr(m, must2))) {
        fprintf(stderr, "message \"%s\" lacks \"%s\" / \"%s\"\n", m, must1, must2 ? must2 : "");
        fail();
    }
}

static void test_errors(void **state)
{
    (void)state;
    struct hy_tokenizer *t = (struct hy_tokenizer *)0x1;
    expect_error(hy_tokenizer_load_json("/nonexistent/dir/tokenizer.json", &t), "/nonexistent/dir/tokenizer.json",
                 NULL);
    assert_null(t);
    expect_error(hy_tokenizer_load_tiktoken("/nonexistent/x.tiktoken", NULL, &t), "/nonexistent/x.tiktoken", NULL);
    expect_error(hy_tokenizer_load_dir("/nonexistent/dir", &t), "/nonexistent/dir", NULL);

    char p[512];
    snprintf(p, sizeof(p), "%s", write_tmp("corrupt.json", "{\"model\": {\"vocab\": {\"a\": 0,", 28));
    expect_error(hy_tokenizer_load_json(p, &t), p, "invalid JSON");

    const char *wp = "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}";
    snprintf(p, sizeof(p), "%s", write_tmp("wordpiece.json", wp, strlen(wp)));
    expect_error(hy_tokenizer_load_json(p, &t), p, "WordPiece");

    const char *um = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}";
    snprintf(p, sizeof(p), "%s", write_tmp("badmerge.json", um, strlen(um)));
    expect_error(hy_tokenizer_load_json(p, &t), p, "merges[0]");

    const char *pt = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                     "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}";
    snprintf(p, sizeof(p), "%s", write_tmp("badpre.json", pt, strlen(pt)));
    expect_error(hy_tokenizer_load_json(p, &t), p, "BertPreTokenizer");

    const char *re =
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
        "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}}";
    snprintf(p, sizeof(p), "%s", write_tmp("badregex.json", re, strlen(re)));
    expect_error(hy_tokenizer_load_json(p, &t), p, "regex");

    const char *big = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 2000000000}, \"merges\": []}}";
    snprintf(p, sizeof(p), "%s", write_tmp("bigid.json", big, strlen(big)));
    expect_error(hy_tokenizer_load_json(p, &t), p, "id");

    const char *tt = "YQ== 0\nYg== 1\n!!notbase64 2\n";
    snprintf(p, sizeof(p), "%s", write_tmp("bad.tiktoken", tt, strlen(tt)));
    expect_error(hy_tokenizer_load_tiktoken(p, NULL, &t), p, "base64");

    const char *tt2 = "YQ== 0\nYg==\n";
    snprintf(p, sizeof(p), "%s", write_tmp("bad2.tiktoken", tt2, strlen(tt2)));
    expect_error(hy_tokenizer_load_tiktoken(p, NULL, &t), p, ":2:");
    assert_null(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_priority),
        cmocka_unit_test(test_ignore_merges),
        cmocka_unit_test(test_split_behaviors),
        cmocka_unit_test(test_bytelevel_regex_and_prefix),
        cmocka_unit_test(test_added_tokens),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_sentencepiece_style),
        cmocka_unit_test(test_detok_stream),
        cmocka_unit_test(test_hy3_golden_tokenizer),
        cmocka_unit_test(test_tiktoken_small),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
