/* fuzz_openai_request.c - libFuzzer target: any HTTP body given to the OpenAI request parser (chat
 * and completions) is either accepted, then rendered through the chat template like the server
 * does (tests/data/hy3/tencent-Hy3.jinja through the Jinja interpreter), or rejected with status 400 and a message that serializes to valid error JSON; never a
 * crash or leak. The same bytes also go through the stop-string matcher and the reasoning
 * splitter in two pieces, which must give what one piece gives. */
#include "server/openai.h"
#include "text/reasoning.h"
#include "text/stop.h"
#include "text/chat.h"

#include "base/err.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The official Hy3 template, loaded once (the fuzzer runs from the repository root, or HYINFER_ROOT). */
static struct hy_chat chat;
static int chat_loaded;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *root = getenv("HYINFER_ROOT");
    char p[1024];
    snprintf(p, sizeof(p), "%s/tests/data/hy3/tencent-Hy3.jinja", root && *root ? root : ".");
    chat_loaded = hy_chat_load(&chat, "/nonexistent-model-dir", p) == 0;
    if (!chat_loaded) {
        fprintf(stderr, "fuzz_openai_request: %s\n", hy_err_msg());
        abort();
    }
    return 0;
}

static void check_error(const struct hy_oai_error *e)
{
    if (e->status != 400 && e->status != 500)
        abort();
    if (!e->message[0])
        abort();
    char *j = hy_oai_error_json(e);
    if (!j)
        abort();
    json_t *back = json_loads(j, 0, NULL);
    if (!back)
        abort();
    json_decref(back);
    free(j);
}

static void split_twice(const char *d, size_t n)
{
    const char *stops[2] = {"</think", "\n\n"};
    struct hy_sbuf one_c = {0}, one_r = {0}, two_c = {0}, two_r = {0}, s1 = {0}, s2 = {0};
    struct hy_reasoning r1, r2;
    struct hy_stop_matcher m1, m2;
    hy_reasoning_init(&r1, n & 1);
    hy_reasoning_init(&r2, n & 1);
    hy_stop_init(&m1, stops, 2);
    hy_stop_init(&m2, stops, 2);
    hy_reasoning_feed(&r1, d, n, &one_c, &one_r);
    hy_reasoning_flush(&r1, &one_c, &one_r);
    size_t h = n / 2;
    hy_reasoning_feed(&r2, d, h, &two_c, &two_r);
    hy_reasoning_feed(&r2, d + h, n - h, &two_c, &two_r);
    hy_reasoning_flush(&r2, &two_c, &two_r);
    if (one_c.len != two_c.len || one_r.len != two_r.len || (one_c.len && memcmp(one_c.p, two_c.p, one_c.len)) ||
        (one_r.len && memcmp(one_r.p, two_r.p, one_r.len)))
        abort();
    int a = hy_stop_feed(&m1, d, n, &s1);
    if (!a)
        hy_stop_flush(&m1, &s1);
    int b = hy_stop_feed(&m2, d, h, &s2);
    if (!b)
        b = hy_stop_feed(&m2, d + h, n - h, &s2);
    if (!b)
        hy_stop_flush(&m2, &s2);
    if (a != b || s1.len != s2.len || (s1.len && memcmp(s1.p, s2.p, s1.len)))
        abort();
    hy_reasoning_free(&r1);
    hy_reasoning_free(&r2);
    hy_stop_free(&m1);
    hy_stop_free(&m2);
    hy_sbuf_free(&one_c);
    hy_sbuf_free(&one_r);
    hy_sbuf_free(&two_c);
    hy_sbuf_free(&two_r);
    hy_sbuf_free(&s1);
    hy_sbuf_free(&s2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hy_oai_limits lim;
    memset(&lim, 0, sizeof(lim));
    lim.max_model_len = 256;
    lim.vocab_size = 480;
    hy_sampling_params_init(&lim.defaults);
    for (int kind = 0; kind < 2; kind++) {
        struct hy_oai_request r;
        struct hy_oai_error e;
        memset(&e, 0, sizeof(e));
        if (hy_oai_parse((enum hy_oai_kind)kind, (const char *)data, size, &lim, &r, &e) == 0) {
            if (kind == HY_OAI_CHAT) {
                if (hy_chat_parse_tool_arguments(r.messages) == 0) {
                    char *p = hy_chat_apply(&chat, r.messages, r.tools, r.template_kwargs);
                    free(p);
                }
            }
            hy_oai_request_free(&r);
        } else {
            check_error(&e);
        }
    }
    split_twice((const char *)data, size);
    return 0;
}
