/* tokenizer_driver.c - a small command-line front end to src/text/tokenizer.h for the golden
 * tokenizer tests (tests/golden/test_tokenizer_*.py build it against build/libhyinfer.a).
 *
 *   tokenizer_driver LOAD encode-list STRINGS.json   -> JSON array, one object per string:
 *        {"special": [ids, added tokens matched], "ordinary": [ids, specials as text],
 *         "roundtrip": decode(special ids) == text byte for byte,
 *         "stream_ok": concatenated hy_detok output == decode output (when that is valid UTF-8),
 *         "decoded_hex": hex of decode(special ids, skip_special 0)}
 *   tokenizer_driver LOAD encode-file FILE [MAX_BYTES] -> {"ids": [...], "bytes": n,
 *         "seconds": encode wall time, "cpu_seconds": its thread CPU time, "roundtrip": bool}
 *   tokenizer_driver LOAD info   -> {"vocab_size": n, "bos": id}
 * LOAD is one of: --json tokenizer.json | --tiktoken F.tiktoken [--config tokenizer_config.json]
 *                 | --dir MODEL_DIR
 * Exit status 0, or 1 with the library's error message on stderr.
 */
#include "base/err.h"
#include "base/fileio.h"
#include "text/tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static json_t *ids_json(const int32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    return a;
}

static int valid_utf8(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            need = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 3;
            if (c == 0xE0)
                lo = 0xA0;
            if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 4;
            if (c == 0xF0)
                lo = 0x90;
            if (c == 0xF4)
                hi = 0x8F;
        } else
            return 0;
        if (i + need > n)
            return 0;
        for (size_t k = 1; k < need; k++) {
            unsigned b = u[i + k];
            if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF))
                return 0;
        }
        i += need;
    }
    return 1;
}

static int stream_matches(const struct hy_tokenizer *t, const int32_t *ids, size_t n, const char *dec, size_t dl)
{
    struct hy_detok d;
    hy_detok_init(&d, t, 0);
    char *out = NULL;
    size_t len = 0, cap = 0;
    for (size_t i = 0; i < n; i++)
        if (hy_detok_push(&d, ids[i], &out, &len, &cap) != 0)
            return 0;
    if (hy_detok_flush(&d, &out, &len, &cap) != 0)
        return 0;
    int ok = valid_utf8(out, len) && (!valid_utf8(dec, dl) || (len == dl && memcmp(out, dec, dl) == 0));
    free(out);
    return ok;
}

static double now_clock(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double now(void)
{
    return now_clock(CLOCK_MONOTONIC);
}

int main(int argc, char **argv)
{
    struct hy_tokenizer *t = NULL;
    int i = 1;
    if (argc < 3) {
        fprintf(stderr, "usage: see the comment at the top of tokenizer_driver.c\n");
        return 2;
    }
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
        if (hy_tokenizer_load_json(argv[i + 1], &t) != 0)
            goto fail;
        i += 2;
    } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
        if (hy_tokenizer_load_dir(argv[i + 1], &t) != 0)
            goto fail;
        i += 2;
    } else if (strcmp(argv[i], "--tiktoken") == 0 && i + 1 < argc) {
        const char *cfg = NULL;
        const char *tt = argv[i + 1];
        i += 2;
        if (i + 1 < argc && strcmp(argv[i], "--config") == 0) {
            cfg = argv[i + 1];
            i += 2;
        }
        if (hy_tokenizer_load_tiktoken(tt, cfg, &t) != 0)
            goto fail;
    } else {
        fprintf(stderr, "unknown loader %s\n", argv[i]);
        return 2;
    }
    if (i >= argc) {
        fprintf(stderr, "missing command\n");
        return 2;
    }
    const char *cmd = argv[i++];
    json_t *res = NULL;
    if (strcmp(cmd, "info") == 0) {
        res =
            json_pack("{s:i,s:i}", "vocab_size", (int)hy_tokenizer_vocab_size(t), "bos", (int)hy_tokenizer_add_bos(t));
    } else if (strcmp(cmd, "encode-list") == 0 && i < argc) {
        json_error_t jerr;
        json_t *in = json_load_file(argv[i], JSON_ALLOW_NUL, &jerr);
        if (!json_is_array(in)) {
            fprintf(stderr, "%s: not a JSON array of strings\n", argv[i]);
            return 1;
        }
        res = json_array();
        size_t k;
        json_t *v;
        json_array_foreach(in, k, v)
        {
            const char *s = json_string_value(v);
            size_t n = json_string_length(v);
            int32_t *a, *b;
            size_t na, nb;
            if (hy_tokenizer_encode(t, s, n, 1, &a, &na) != 0 || hy_tokenizer_encode(t, s, n, 0, &b, &nb) != 0)
                goto fail;
            size_t dl;
            char *dec = hy_tokenizer_decode_len(t, a, na, 0, &dl);
            if (!dec)
                goto fail;
            int rt = dl == n && memcmp(dec, s, n) == 0;
            char *hex = malloc(2 * dl + 1);
            if (!hex)
                goto fail;
            hex[0] = '\0';
            for (size_t q = 0; q < dl; q++)
                snprintf(hex + 2 * q, 3, "%02x", (unsigned char)dec[q]);
            json_array_append_new(res, json_pack("{s:o,s:o,s:b,s:b,s:s}", "special", ids_json(a, na), "ordinary",
                                                 ids_json(b, nb), "roundtrip", rt, "stream_ok",
                                                 stream_matches(t, a, na, dec, dl), "decoded_hex", hex));
            free(hex);
            free(dec);
            free(a);
            free(b);
        }
        json_decref(in);
    } else if (strcmp(cmd, "encode-file") == 0 && i < argc) {
        char *data;
        size_t len;
        if (hy_file_read_all(argv[i], &data, &len) != 0)
            goto fail;
        if (i + 1 < argc && (size_t)atol(argv[i + 1]) < len)
            len = (size_t)atol(argv[i + 1]);
        int32_t *a;
        size_t na;
        double t0 = now(), c0 = now_clock(CLOCK_THREAD_CPUTIME_ID);
        if (hy_tokenizer_encode(t, data, len, 0, &a, &na) != 0)
            goto fail;
        double dt = now() - t0, dc = now_clock(CLOCK_THREAD_CPUTIME_ID) - c0;
        size_t dl;
        char *dec = hy_tokenizer_decode_len(t, a, na, 0, &dl);
        int rt = dec && dl == len && memcmp(dec, data, len) == 0;
        res = json_pack("{s:o,s:I,s:f,s:f,s:b}", "ids", ids_json(a, na), "bytes", (json_int_t)len, "seconds", dt,
                        "cpu_seconds", dc, "roundtrip", rt);
        free(dec);
        free(a);
        free(data);
    } else {
        fprintf(stderr, "unknown command %s\n", cmd);
        return 2;
    }
    char *s = json_dumps(res, JSON_COMPACT);
    puts(s);
    free(s);
    json_decref(res);
    hy_tokenizer_free(t);
    return 0;
fail:
    fprintf(stderr, "error: %s\n", hy_err_msg());
    hy_tokenizer_free(t);
    return 1;
}
