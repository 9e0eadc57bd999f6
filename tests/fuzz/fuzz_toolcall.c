/* fuzz_toolcall.c - libFuzzer target: the Hy3 / Hy4 tool-call parser on arbitrary model output and
 * arbitrary tool schemas. Input: a tools JSON document, a NUL byte, then the output text (markers
 * written as bytes 0x01..0x09 for <tool_calls> ... </arg_value> so the fuzzer reaches them). The
 * last input byte picks the markers: bit 0 the dialect (0 Hy3, 1 Hy4), bits 1-2 the suffix
 * (":opensource", ":6124c78e", "", ":a+b(c"); the byte stays part of the text. The parser must
 * never crash or leak, and the result fed whole must equal the result fed in pieces whose sizes
 * come from the text itself: same content, same calls, same argument bytes. */
#include "base/sbuf.h"
#include "text/toolcall.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct out {
    struct hy_sbuf content;
    struct hy_toolcall_parser p;
};

static void run(const struct hy_tool_markers *mk, const json_t *tools, const char *t, size_t n, int pieces,
                struct out *o)
{
    memset(o, 0, sizeof(*o));
    hy_toolcall_init(&o->p, mk, tools);
    size_t i = 0, k = 0;
    while (i < n) {
        size_t step = pieces ? 1 + ((unsigned char)t[k++ % n] % 13) : n;
        if (step > n - i)
            step = n - i;
        if (hy_toolcall_feed(&o->p, t + i, step, &o->content))
            abort();
        i += step;
    }
    if (hy_toolcall_finish(&o->p, &o->content))
        abort();
}

static int same(const struct out *a, const struct out *b)
{
    if (a->content.len != b->content.len || (a->content.len && memcmp(a->content.p, b->content.p, a->content.len)))
        return 0;
    if (a->p.n_calls != b->p.n_calls || a->p.n_complete != b->p.n_complete)
        return 0;
    for (int i = 0; i < a->p.n_calls; i++) {
        const struct hy_tool_call *x = &a->p.calls[i], *y = &b->p.calls[i];
        if (strcmp(x->name, y->name) || x->args.len != y->args.len || x->complete != y->complete ||
            (x->args.len && memcmp(x->args.p, y->args.p, x->args.len)))
            return 0;
        if (x->complete) { /* a complete call's arguments are one JSON object */
            json_t *j = json_loadb(x->args.p, x->args.len, 0, NULL);
            if (j && !json_is_object(j))
                abort();
            json_decref(j);
        }
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t tl = nul ? (size_t)(nul - data) : 0;
    json_t *tools = nul ? json_loadb((const char *)data, tl, 0, NULL) : NULL;
    const uint8_t *text = nul ? nul + 1 : data;
    size_t n = size - (size_t)(text - data);
    static struct hy_tool_markers mks[8];
    static int init;
    if (!init) {
        static const char *const sufs[4] = {":opensource", ":6124c78e", "", ":a+b(c"};
        for (int i = 0; i < 8; i++)
            hy_tool_markers_init_dialect(&mks[i], sufs[i >> 1], i & 1 ? HY_TOOL_DIALECT_HY4 : HY_TOOL_DIALECT_HY3);
        init = 1;
    }
    const struct hy_tool_markers *mk = &mks[size ? data[size - 1] & 7 : 0];
    struct hy_sbuf t = {0};
    for (size_t i = 0; i < n; i++) { /* bytes 1..9 stand for the nine tool markers */
        if (text[i] >= 1 && text[i] <= 9)
            hy_sbuf_puts(&t, mk->text[text[i] - 1]);
        else
            hy_sbuf_append(&t, (const char *)text + i, 1);
    }
    struct out a, b;
    run(mk, tools, t.p ? t.p : "", t.len, 0, &a);
    run(mk, tools, t.p ? t.p : "", t.len, 1, &b);
    if (!same(&a, &b))
        abort(); /* streamed pieces must give the one-shot result */
    hy_toolcall_free(&a.p);
    hy_toolcall_free(&b.p);
    hy_sbuf_free(&a.content);
    hy_sbuf_free(&b.content);
    hy_sbuf_free(&t);
    json_decref(tools);
    return 0;
}
