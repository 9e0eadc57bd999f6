/* fuzz_tokenizer_json.c - libFuzzer target: the input is a tokenizer.json. It is loaded from
 * memory (hy_tokenizer_load_json_mem, the same code path as files); when it loads, a fixed
 * string with ASCII, CJK, emoji, invalid UTF-8 and added-token look-alikes is encoded with and
 * without specials, decoded, and streamed through the incremental detokenizer. The input is also
 * encoded as text by a fixed byte-level tokenizer. Must not crash, hang or leak.
 * Built by `make fuzz`; seeds in tests/fuzz/corpus/tokenizer_json/. */
#include "text/tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char TEXT[] =
    "Hello, world! 123 4567  tabs\t\nnew\r\n \xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c "
    "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd bad\xff\xfe\xc3 <s></s><|endoftext|><think>"
    "\xe2\x96\x81x <0x41> caf\xc3\xa9 don't";

static const char FIXED[] =
    "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\xc4\xa0\":3,\"\xc4\xa0"
    "a\":4},"
    "\"merges\":[\"a b\",[\"\xc4\xa0\",\"a\"]]},"
    "\"added_tokens\":[{\"id\":5,\"content\":\"<x>\",\"special\":true,\"lstrip\":true,\"rstrip\":true}],"
    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
    "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{N}{1,3}\"},\"behavior\":\"Isolated\",\"invert\":false},"
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}]},"
    "\"decoder\":{\"type\":\"ByteLevel\"}}";

static struct hy_tokenizer *fixed_tok;

static void exercise(const struct hy_tokenizer *t, const char *text, size_t len)
{
    for (int sp = 0; sp < 2; sp++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (hy_tokenizer_encode(t, text, len, sp, &ids, &n) != 0)
            continue;
        char *d = hy_tokenizer_decode(t, ids, n, !sp);
        free(d);
        struct hy_detok dt;
        hy_detok_init(&dt, t, !sp);
        char *out = NULL;
        size_t ol = 0, oc = 0;
        for (size_t i = 0; i < n; i++)
            if (hy_detok_push(&dt, ids[i], &out, &ol, &oc) != 0)
                abort(); /* ids from encode are always valid */
        hy_detok_flush(&dt, &out, &ol, &oc);
        free(out);
        free(ids);
    }
    int32_t v = hy_tokenizer_vocab_size(t);
    size_t bl;
    if (v > 0 && !hy_tokenizer_token_bytes(t, v - 1, &bl))
        abort();
    if (hy_tokenizer_token_bytes(t, v, &bl))
        abort();
    (void)hy_tokenizer_add_bos(t);
    (void)hy_tokenizer_token_to_id(t, "<s>");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fixed_tok && hy_tokenizer_load_json_mem(FIXED, sizeof(FIXED) - 1, "fixed", &fixed_tok) != 0)
        abort();
    struct hy_tokenizer *t = NULL;
    if (hy_tokenizer_load_json_mem((const char *)data, size, "fuzz.json", &t) == 0) {
        exercise(t, TEXT, sizeof(TEXT) - 1);
        hy_tokenizer_free(t);
    }
    exercise(fixed_tok, (const char *)data, size);
    return 0;
}
