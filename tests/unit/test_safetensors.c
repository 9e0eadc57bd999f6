/* test_safetensors.c - hy_st_parse / hy_checkpoint_open / tensor binding on bad input (issue #2
 * item 11): every malformed image is rejected with one message naming the file, the tensor and the
 * problem, and valid corner cases (metadata, zero-size tensors, unknown dtypes) are accepted.
 * Images are built in memory; checkpoints are written under a temporary directory. The binding
 * tests (missing tensor, wrong shape, unsupported dtype) rewrite the header of a copy of the
 * hy3-golden-b checkpoint from tests/data (found through $HYINFER_ROOT, else the working directory). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "base/fileio.h"
#include "model/model.h"
#include "model/safetensors.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- in-memory images ---------------------------------------------------------------------- */

/* A safetensors image: u64 header length, the header padded with spaces to a multiple of 8, then
 * data_len bytes (value i & 0xff at data offset i). The buffer is 16-byte aligned (malloc). */
static uint8_t *make_image(const char *header, size_t data_len, size_t *size)
{
    size_t hl = strlen(header);
    size_t padded = (hl + 7) & ~(size_t)7;
    *size = 8 + padded + data_len;
    uint8_t *buf = malloc(*size ? *size : 1);
    assert_non_null(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, header, hl);
    memset(buf + 8 + hl, ' ', padded - hl);
    for (size_t i = 0; i < data_len; i++)
        buf[8 + padded + i] = (uint8_t)i;
    return buf;
}

/* Parses header+data (cut to `keep` bytes when keep != (size_t)-1); expects failure with a message
 * containing every one of the NULL-terminated substrings. */
static void expect_reject_cut(const char *header, size_t data_len, size_t keep, ...)
{
    size_t size;
    uint8_t *buf = make_image(header, data_len, &size);
    if (keep != (size_t)-1)
        size = keep;
    struct hy_st_file f;
    hy_err_clear();
    int rc = hy_st_parse(buf, size, "bad.safetensors", &f);
    if (rc == 0)
        fail_msg("accepted a bad image: header %s", header);
    const char *msg = hy_err_msg();
    if (!strstr(msg, "bad.safetensors"))
        fail_msg("message does not name the file: \"%s\"", msg);
    if (strchr(msg, '\n'))
        fail_msg("message spans several lines: \"%s\"", msg);
    va_list ap;
    va_start(ap, keep);
    const char *want;
    while ((want = va_arg(ap, const char *)))
        if (!strstr(msg, want))
            fail_msg("message \"%s\" lacks \"%s\"", msg, want);
    va_end(ap);
    assert_null(f.tensors); /* nothing half-built is handed out */
    assert_int_equal(f.n_tensors, 0);
    free(buf);
}

#define expect_reject(header, data_len, ...) expect_reject_cut(header, data_len, (size_t)-1, __VA_ARGS__, NULL)

static const struct hy_st_tensor *by_name(const struct hy_st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

static void test_too_short(void **state)
{
    (void)state;
    uint8_t b[8] = {0};
    struct hy_st_file f;
    for (size_t n = 0; n < 8; n++) {
        assert_int_equal(hy_st_parse(b, n, "tiny.st", &f), -1);
        assert_non_null(strstr(hy_err_msg(), "tiny.st"));
        assert_non_null(strstr(hy_err_msg(), "too short"));
    }
    /* 8 bytes: header length 0, i.e. an empty header, which is not JSON */
    assert_int_equal(hy_st_parse(b, 8, "tiny.st", &f), -1);
    assert_non_null(strstr(hy_err_msg(), "not valid JSON"));
}

static void test_header_length_past_file(void **state)
{
    (void)state;
    size_t size;
    uint8_t *buf = make_image("{}", 0, &size);
    struct hy_st_file f;
    buf[0] = (uint8_t)(size - 8 + 1); /* one byte more than there is */
    assert_int_equal(hy_st_parse(buf, size, "h.st", &f), -1);
    assert_non_null(strstr(hy_err_msg(), "header length 9 exceeds the file"));
    /* a huge length must not wrap around */
    memset(buf, 0xff, 8);
    assert_int_equal(hy_st_parse(buf, size, "h.st", &f), -1);
    assert_non_null(strstr(hy_err_msg(), "exceeds the file"));
    free(buf);
    /* a header cut in the middle (file truncated inside the JSON) */
    expect_reject_cut("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 20, "exceeds the file",
                      NULL);
}

static void test_header_not_json(void **state)
{
    (void)state;
    expect_reject("not json at all", 0, "header is not valid JSON");
    expect_reject("{\"a\":", 0, "header is not valid JSON");
    expect_reject("[1, 2, 3]", 0, "header is not a JSON object");
    expect_reject("\"str\"", 0, "not", "JSON");
    expect_reject("{\"a\": 5}", 0, "\"a\"", "not an object");
}

static void test_entry_missing_fields(void **state)
{
    (void)state;
    expect_reject("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "\"w\"", "dtype");
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "\"w\"", "shape");
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "\"w\"", "data_offsets");
    expect_reject("{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "\"w\"", "dtype");
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4, "\"w\"", "shape");
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "\"w\"", "data_offsets");
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, "\"w\"", "data_offsets");
}

static void test_bad_shape(void **state)
{
    (void)state;
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "\"w\"", "bad shape entry 0");
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,1.5],\"data_offsets\":[0,12]}}", 12, "\"w\"",
                  "bad shape entry 1");
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8, "\"w\"", "bad shape");
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "\"w\"",
                  "9 dimensions");
    /* numel overflow must not wrap to a small number */
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,0]}}", 0,
                  "\"w\"", "too large");
}

static void test_bad_offsets(void **state)
{
    (void)state;
    expect_reject("{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,2]}}", 4, "\"w\"", "begin <= end");
    expect_reject("{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[-2,0]}}", 4, "\"w\"", "begin <= end");
    expect_reject("{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2.0]}}", 4, "\"w\"", "integers");
    /* past the end of the data: the file is truncated */
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 12, "\"w\"",
                  "run past the end of the data", "truncated");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                  16 - 1, "\"b\"", "[8, 16)", "15 bytes");
    /* an offset near 2^63 must not wrap */
    expect_reject("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[9223372036854775806,9223372036854775807]}}",
                  4, "\"w\"", "past the end");
}

static void test_size_mismatch(void **state)
{
    (void)state;
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24, "\"w\"", "20 bytes",
                  "needs 24");
    expect_reject("{\"w\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16, "\"w\"", "BF16", "needs 8");
    expect_reject("{\"w\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,8]}}", 8, "\"w\"", "needs 4");
}

static void test_overlap(void **state)
{
    (void)state;
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                  16, "\"a\"", "\"b\"", "overlap");
    /* identical ranges (aliasing) */
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                  4, "overlap");
    /* a zero-size tensor lying between two overlapping ones must not hide the overlap */
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]},"
                  "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
                  16, "\"a\"", "\"b\"", "overlap");
    /* a small tensor nested in a big one, followed by a third that still overlaps the big one */
    expect_reject("{\"a\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,2]},"
                  "\"c\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[14,16]}}",
                  16, "\"a\"", "\"c\"", "overlap");
}

static void test_duplicate_keys(void **state)
{
    (void)state;
    expect_reject("{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
                  8, "duplicate", "w");
}

static void test_misaligned(void **state)
{
    (void)state;
    /* an F32 tensor at data offset 2 would be read through a misaligned float pointer */
    expect_reject("{\"a\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}",
                  8, "\"b\"", "aligned");
    /* U8 and 1-byte types need no alignment */
    size_t size;
    uint8_t *buf = make_image("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                              "\"b\":{\"dtype\":\"F8_E4M3\",\"shape\":[3],\"data_offsets\":[1,4]}}",
                              4, &size);
    struct hy_st_file f;
    assert_int_equal(hy_st_parse(buf, size, "ok.st", &f), 0);
    hy_st_file_free(&f);
    free(buf);
}

static void test_valid(void **state)
{
    (void)state;
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"},"
                      "\"emb\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                      "\"empty\":{\"dtype\":\"BF16\",\"shape\":[0,5],\"data_offsets\":[24,24]},"
                      "\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[24,28]},"
                      "\"h\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[28,32]},"
                      "\"q\":{\"dtype\":\"Q4_FANCY\",\"shape\":[7],\"data_offsets\":[32,37]}}";
    size_t size;
    uint8_t *buf = make_image(hdr, 37, &size);
    struct hy_st_file f;
    hy_err_clear();
    assert_int_equal(hy_st_parse(buf, size, "good.st", &f), 0);
    assert_int_equal(f.n_tensors, 5); /* __metadata__ is not a tensor */
    assert_null(by_name(&f, "__metadata__"));
    const uint8_t *data = buf + size - 37;

    const struct hy_st_tensor *t = by_name(&f, "emb");
    assert_non_null(t);
    assert_int_equal(t->dtype, HY_DTYPE_F32);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(t->nbytes, 24);
    assert_ptr_equal(t->data, data);

    t = by_name(&f, "empty");
    assert_non_null(t);
    assert_int_equal(t->nbytes, 0);
    assert_int_equal(t->shape[0], 0);

    t = by_name(&f, "scalar");
    assert_non_null(t);
    assert_int_equal(t->ndim, 0);
    assert_int_equal(t->nbytes, 4);
    assert_ptr_equal(t->data, data + 24);

    t = by_name(&f, "h");
    assert_non_null(t);
    assert_int_equal(t->dtype, HY_DTYPE_BF16);
    assert_ptr_equal(t->data, data + 28);

    /* an unknown dtype parses (binding rejects it later by name) */
    t = by_name(&f, "q");
    assert_non_null(t);
    assert_int_equal(t->dtype, HY_DTYPE_UNKNOWN);
    assert_string_equal(t->dtype_name, "Q4_FANCY");
    assert_int_equal(t->nbytes, 5);
    assert_ptr_equal(t->data, data + 32);
    hy_st_file_free(&f);
    free(buf);

    /* an empty header object: a file with no tensors */
    buf = make_image("{}", 0, &size);
    assert_int_equal(hy_st_parse(buf, size, "none.st", &f), 0);
    assert_int_equal(f.n_tensors, 0);
    hy_st_file_free(&f);
    free(buf);

    /* several zero-size tensors at the same offset do not "overlap" */
    buf = make_image("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                     "\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                     4, &size);
    assert_int_equal(hy_st_parse(buf, size, "zeros.st", &f), 0);
    assert_int_equal(f.n_tensors, 3);
    hy_st_file_free(&f);
    free(buf);
}

/* ---- checkpoints on disk --------------------------------------------------------------------- */

static char tmp_root[256];

static int make_tmp_root(void **state)
{
    (void)state;
    snprintf(tmp_root, sizeof(tmp_root), "/tmp/hy_test_st_XXXXXX");
    return mkdtemp(tmp_root) ? 0 : -1;
}

static int remove_tmp_root(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_root);
    return system(cmd) == 0 ? 0 : -1;
}

static char *new_dir(const char *name)
{
    char *d = hy_path_join(tmp_root, name);
    assert_non_null(d);
    assert_int_equal(mkdir(d, 0755), 0);
    return d;
}

static void write_file(const char *dir, const char *name, const void *data, size_t n)
{
    char *p = hy_path_join(dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
    free(p);
}

/* Writes a one-tensor U8 file holding `name` (4 bytes). */
static void write_shard(const char *dir, const char *file, const char *name)
{
    char hdr[256];
    snprintf(hdr, sizeof(hdr), "{\"%s\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", name);
    size_t size;
    uint8_t *buf = make_image(hdr, 4, &size);
    write_file(dir, file, buf, size);
    free(buf);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    write_file(dir, name, text, strlen(text));
}

static void expect_ck_fail(const char *dir, const char *want1, const char *want2)
{
    struct hy_checkpoint ck;
    hy_err_clear();
    assert_int_equal(hy_checkpoint_open(dir, &ck), -1);
    const char *msg = hy_err_msg();
    if (!strstr(msg, want1) || (want2 && !strstr(msg, want2)))
        fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", msg, want1, want2 ? want2 : "");
    assert_null(ck.files);
    assert_int_equal(ck.n_index, 0);
}

static void test_ck_sharded_ok(void **state)
{
    (void)state;
    char *d = new_dir("sharded_ok");
    write_shard(d, "model-00001-of-00002.safetensors", "a.weight");
    write_shard(d, "model-00002-of-00002.safetensors", "b.weight");
    write_text(d, "model.safetensors.index.json",
               "{\"metadata\":{\"total_size\":8},\"weight_map\":{"
               "\"a.weight\":\"model-00001-of-00002.safetensors\","
               "\"b.weight\":\"model-00002-of-00002.safetensors\"}}");
    struct hy_checkpoint ck;
    assert_int_equal(hy_checkpoint_open(d, &ck), 0);
    assert_int_equal(ck.n_files, 2);
    assert_int_equal(ck.n_index, 2);
    const struct hy_st_tensor *t = hy_checkpoint_find(&ck, "b.weight");
    assert_non_null(t);
    assert_int_equal(t->file_index, 1);
    assert_null(hy_checkpoint_find(&ck, "c.weight"));
    hy_checkpoint_close(&ck);
    free(d);
}

static void test_ck_missing_shard(void **state)
{
    (void)state;
    char *d = new_dir("missing_shard");
    write_shard(d, "model-00001-of-00002.safetensors", "a.weight");
    write_text(d, "model.safetensors.index.json",
               "{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
               "\"b.weight\":\"model-00002-of-00002.safetensors\"}}");
    expect_ck_fail(d, "model-00002-of-00002.safetensors", "cannot open");
    free(d);
}

static void test_ck_shard_with_slash(void **state)
{
    (void)state;
    char *d = new_dir("slash");
    write_shard(d, "model.safetensors", "a.weight");
    write_text(d, "model.safetensors.index.json", "{\"weight_map\":{\"a.weight\":\"../slash/model.safetensors\"}}");
    expect_ck_fail(d, "model.safetensors.index.json", "weight_map[\"a.weight\"]");
    write_text(d, "model.safetensors.index.json", "{\"weight_map\":{\"a.weight\":\"/etc/passwd\"}}");
    expect_ck_fail(d, "weight_map[\"a.weight\"]", "file name");
    write_text(d, "model.safetensors.index.json", "{\"weight_map\":{\"a.weight\":\"..\"}}");
    expect_ck_fail(d, "weight_map[\"a.weight\"]", "file name");
    write_text(d, "model.safetensors.index.json", "{\"weight_map\":{\"a.weight\":3}}");
    expect_ck_fail(d, "weight_map[\"a.weight\"]", NULL);
    write_text(d, "model.safetensors.index.json", "{\"weight_map\":{}}");
    expect_ck_fail(d, "weight_map", "non-empty");
    write_text(d, "model.safetensors.index.json", "{\"weight_map\":");
    expect_ck_fail(d, "model.safetensors.index.json", "invalid JSON");
    free(d);
}

static void test_ck_duplicate_across_shards(void **state)
{
    (void)state;
    char *d = new_dir("dup");
    write_shard(d, "s1.safetensors", "a.weight");
    write_shard(d, "s2.safetensors", "a.weight");
    write_text(d, "model.safetensors.index.json",
               "{\"weight_map\":{\"a.weight\":\"s1.safetensors\",\"b.weight\":\"s2.safetensors\"}}");
    expect_ck_fail(d, "\"a.weight\"", "two shards");
    free(d);
}

static void test_ck_bad_shard_content(void **state)
{
    (void)state;
    char *d = new_dir("badshard");
    write_shard(d, "s1.safetensors", "a.weight");
    write_text(d, "s2.safetensors", "garbage!garbage!");
    write_text(d, "model.safetensors.index.json",
               "{\"weight_map\":{\"a.weight\":\"s1.safetensors\",\"b.weight\":\"s2.safetensors\"}}");
    expect_ck_fail(d, "s2.safetensors", "header length");
    free(d);
}

static void test_ck_no_safetensors(void **state)
{
    (void)state;
    char *d = new_dir("empty_dir");
    expect_ck_fail(d, d, "no model.safetensors");
    write_text(d, "config.json", "{}");
    expect_ck_fail(d, "no model.safetensors", "0 *.safetensors");
    /* two loose files and no index: ambiguous */
    write_shard(d, "x.safetensors", "a");
    write_shard(d, "y.safetensors", "b");
    expect_ck_fail(d, "no model.safetensors", "2 *.safetensors");
    free(d);

    d = new_dir("single_other_name");
    write_shard(d, "weights.safetensors", "a");
    struct hy_checkpoint ck;
    assert_int_equal(hy_checkpoint_open(d, &ck), 0);
    assert_non_null(hy_checkpoint_find(&ck, "a"));
    hy_checkpoint_close(&ck);
    free(d);

    char *missing = hy_path_join(tmp_root, "does_not_exist");
    expect_ck_fail(missing, missing, "cannot open");
    free(missing);
}

static void test_ck_empty_file(void **state)
{
    (void)state;
    char *d = new_dir("emptyfile");
    write_text(d, "model.safetensors", "");
    expect_ck_fail(d, "model.safetensors", "too short");
    free(d);
}

/* ---- binding (load.c) on rewritten copies of hy3-golden-b ------------------------------------- */

static const char *golden_dir(void)
{
    static char path[1024];
    const char *root = getenv("HYINFER_ROOT"); /* unset: run from the repository root */
    snprintf(path, sizeof(path), "%s/tests/data/hy3-golden-llamacpp/hy3-golden-b", root && *root ? root : ".");
    return path;
}

/* Copies golden's config.json, generation_config.json and model.safetensors into tmp_root/name,
 * passing the safetensors header through edit(header) first (re-padded, data region unchanged). */
static char *golden_copy(const char *name, void (*edit)(json_t *hdr))
{
    char *src = hy_path_join(golden_dir(), "model.safetensors");
    if (!hy_file_exists(src)) {
        free(src);
        return NULL;
    }
    char *d = new_dir(name);
    const char *plain[] = {"config.json", "generation_config.json"};
    for (int i = 0; i < 2; i++) {
        char *p = hy_path_join(golden_dir(), plain[i]);
        char *data;
        size_t n;
        assert_int_equal(hy_file_read_all(p, &data, &n), 0);
        write_file(d, plain[i], data, n);
        free(data);
        free(p);
    }
    char *img;
    size_t n;
    assert_int_equal(hy_file_read_all(src, &img, &n), 0);
    free(src);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = (hl << 8) | (uint8_t)img[i];
    json_error_t je;
    json_t *hdr = json_loadb(img + 8, (size_t)hl, 0, &je);
    assert_non_null(hdr);
    edit(hdr);
    char *text = json_dumps(hdr, JSON_COMPACT);
    json_decref(hdr);
    size_t data_len = n - 8 - (size_t)hl;
    size_t out_size;
    uint8_t *out = make_image(text, data_len, &out_size);
    memcpy(out + out_size - data_len, img + 8 + hl, data_len);
    write_file(d, "model.safetensors", out, out_size);
    free(out);
    free(text);
    free(img);
    return d;
}

static void expect_load_fail(const char *dir, const char *want1, const char *want2)
{
    struct hy_model *m = NULL;
    hy_err_clear();
    assert_int_equal(hy_model_load(dir, HY_COMPUTE_F32, &m), -1);
    assert_null(m);
    const char *msg = hy_err_msg();
    if (!strstr(msg, want1) || (want2 && !strstr(msg, want2)))
        fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", msg, want1, want2 ? want2 : "");
}

static void edit_nothing(json_t *h)
{
    (void)h;
}

static void edit_drop_q_proj(json_t *h)
{
    json_object_del(h, "model.layers.2.self_attn.q_proj.weight");
}

/* Same byte size, transposed shape. */
static void edit_transpose_embed(json_t *h)
{
    json_t *e = json_object_get(h, "model.embed_tokens.weight");
    json_object_set_new(e, "shape", json_pack("[ii]", 96, 480));
}

/* Same bytes (BF16 [96] = 192 bytes) relabelled I16 and as an unknown dtype; and a
 * BF16 [480, 96] embedding as F8_E4M3 [480, 192]. */
static void edit_i16_norm(json_t *h)
{
    json_object_set_new(json_object_get(h, "model.norm.weight"), "dtype", json_string("I16"));
}

static void edit_unknown_dtype(json_t *h)
{
    json_object_set_new(json_object_get(h, "model.layers.1.self_attn.o_proj.weight"), "dtype", json_string("Q4_FANCY"));
}

static void edit_fp8_embed(json_t *h)
{
    json_t *e = json_object_get(h, "model.embed_tokens.weight");
    json_object_set_new(e, "dtype", json_string("F8_E4M3"));
    json_object_set_new(e, "shape", json_pack("[ii]", 480, 192));
}

static void test_bind_errors(void **state)
{
    (void)state;
    char *d = golden_copy("bind_ok", edit_nothing);
    if (!d)
        fail_msg("%s/model.safetensors not found (run from the repository root or set HYINFER_ROOT)", golden_dir());
    /* the rewrite itself keeps the checkpoint valid */
    struct hy_model *m = NULL;
    if (hy_model_load(d, HY_COMPUTE_F32, &m))
        fail_msg("unmodified copy does not load: %s", hy_err_msg());
    hy_model_free(m);
    free(d);

    d = golden_copy("bind_missing", edit_drop_q_proj);
    expect_load_fail(d, "\"model.layers.2.self_attn.q_proj.weight\"", "missing");
    free(d);
    d = golden_copy("bind_shape", edit_transpose_embed);
    expect_load_fail(d, "\"model.embed_tokens.weight\" has shape [96, 480]", "[480, 96]");
    free(d);
    d = golden_copy("bind_i16", edit_i16_norm);
    expect_load_fail(d, "unsupported dtype I16 for tensor \"model.norm.weight\"", NULL);
    free(d);
    d = golden_copy("bind_unknown", edit_unknown_dtype);
    expect_load_fail(d, "unsupported dtype Q4_FANCY for tensor \"model.layers.1.self_attn.o_proj.weight\"", NULL);
    free(d);
    d = golden_copy("bind_fp8", edit_fp8_embed);
    expect_load_fail(d, "unsupported dtype F8_E4M3 for tensor \"model.embed_tokens.weight\"", NULL);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_too_short),
        cmocka_unit_test(test_header_length_past_file),
        cmocka_unit_test(test_header_not_json),
        cmocka_unit_test(test_entry_missing_fields),
        cmocka_unit_test(test_bad_shape),
        cmocka_unit_test(test_bad_offsets),
        cmocka_unit_test(test_size_mismatch),
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_misaligned),
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_ck_sharded_ok),
        cmocka_unit_test(test_ck_missing_shard),
        cmocka_unit_test(test_ck_shard_with_slash),
        cmocka_unit_test(test_ck_duplicate_across_shards),
        cmocka_unit_test(test_ck_bad_shard_content),
        cmocka_unit_test(test_ck_no_safetensors),
        cmocka_unit_test(test_ck_empty_file),
        cmocka_unit_test(test_bind_errors),
    };
    return cmocka_run_group_tests(tests, make_tmp_root, remove_tmp_root);
}
