/* chat_template_hy4.c - the Hy4-preview turn format (spec hy4_architecture.md §12), rendered in C.
 *
 * What the public sources confirm (the LLaMA-Factory / ms-swift template of the Hy4-preview repository,
 * and the tokenizer_config.json template of tests/data/hy4-golden-llamacpp): each message is
 * <｜hy_start:opensource｜> + role as plain text + <｜hy_middle:opensource｜> + content + <｜hy_end:opensource｜>,
 * and the generation prompt is <｜hy_start:opensource｜>assistant<｜hy_middle:opensource｜>. The hub's own
 * chat_template.jinja (its reasoning-mode preamble and tool-call rendering) is not public, so reasoning_effort
 * and tools are refused by name instead of being guessed. */
#include "text/chat_template.h"

#include "base/err.h"
#include "text/pyjson.h"
#include "text/tokenizer.h"

#include <string.h>

#define HY4_START "<\xef\xbd\x9chy_start:opensource\xef\xbd\x9c>"
#define HY4_MIDDLE "<\xef\xbd\x9chy_middle:opensource\xef\xbd\x9c>"
#define HY4_END "<\xef\xbd\x9chy_end:opensource\xef\xbd\x9c>"

enum hy_chat_format hy_chat_format_of(const struct hy_tokenizer *tok)
{
    const int n = tok ? hy_tokenizer_added_count(tok) : 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        int32_t id;
        const char *s = hy_tokenizer_added_token(tok, i, &len, &id);
        if (s && len == strlen(HY4_MIDDLE) && memcmp(s, HY4_MIDDLE, len) == 0)
            return HY_CHAT_HY4;
    }
    return HY_CHAT_HY3;
}

/* content: a string, null, or a list of {type: "text", text} parts (other parts are refused). */
static int content_text(struct hy_pyjson_buf *b, const json_t *content, size_t index)
{
    if (!content || json_is_null(content))
        return 0;
    if (json_is_string(content))
        return hy_pyjson_buf_append(b, json_string_value(content), json_string_length(content)) < 0 ? -1 : 0;
    if (json_is_array(content)) {
        for (size_t i = 0; i < json_array_size(content); i++) {
            const json_t *part = json_array_get(content, i);
            const json_t *text = json_object_get(part, "text");
            if (!json_is_string(text))
                return hy_err_set("chat template (Hy4): messages[%zu].content[%zu] is not a text part", index, i);
            hy_pyjson_buf_append(b, json_string_value(text), json_string_length(text));
        }
        return 0;
    }
    return hy_err_set("chat template (Hy4): messages[%zu].content must be a string, null or a list of text parts",
                      index);
}

char *hy_chat_template_render_hy4(const json_t *messages, const json_t *tools, const json_t *kwargs)
{
    if (!json_is_array(messages))
        return hy_err_set("chat template (Hy4): messages must be a list"), NULL;
    if (tools && !json_is_null(tools) && !(json_is_array(tools) && json_array_size(tools) == 0))
        return hy_err_set("chat template (Hy4): tools are not supported with the Hy4 chat format yet (its tool-call "
                          "rendering is not public)"),
               NULL;
    const json_t *effort = kwargs ? json_object_get(kwargs, "reasoning_effort") : NULL;
    if (effort && !json_is_null(effort))
        return hy_err_set("chat template (Hy4): reasoning_effort is not supported with the Hy4 chat format yet (its "
                          "reasoning-mode preamble is not public)"),
               NULL;
    struct hy_pyjson_buf b;
    hy_pyjson_buf_init(&b);
    for (size_t i = 0; i < json_array_size(messages); i++) {
        const json_t *m = json_array_get(messages, i);
        const json_t *role = json_object_get(m, "role");
        if (!json_is_object(m) || !json_is_string(role)) {
            hy_pyjson_buf_free(&b);
            return hy_err_set("chat template (Hy4): messages[%zu] needs a string role", i), NULL;
        }
        if (json_object_get(m, "tool_calls") && !json_is_null(json_object_get(m, "tool_calls"))) {
            hy_pyjson_buf_free(&b);
            return hy_err_set("chat template (Hy4): messages[%zu].tool_calls: tool calls are not supported with the "
                              "Hy4 chat format yet",
                              i),
                   NULL;
        }
        hy_pyjson_buf_puts(&b, HY4_START);
        hy_pyjson_buf_append(&b, json_string_value(role), json_string_length(role));
        hy_pyjson_buf_puts(&b, HY4_MIDDLE);
        if (content_text(&b, json_object_get(m, "content"), i)) {
            hy_pyjson_buf_free(&b);
            return NULL;
        }
        hy_pyjson_buf_puts(&b, HY4_END);
    }
    const json_t *agp = kwargs ? json_object_get(kwargs, "add_generation_prompt") : NULL;
    if (agp && json_is_true(agp)) {
        hy_pyjson_buf_puts(&b, HY4_START);
        hy_pyjson_buf_puts(&b, "assistant");
        hy_pyjson_buf_puts(&b, HY4_MIDDLE);
    }
    char *out = b.failed ? NULL : hy_pyjson_buf_take(&b);
    hy_pyjson_buf_free(&b);
    if (!out)
        hy_err_set("chat template (Hy4): out of memory");
    return out;
}

char *hy_chat_render(enum hy_chat_format fmt, const json_t *messages, const json_t *tools, const json_t *kwargs)
{
    return fmt == HY_CHAT_HY4 ? hy_chat_template_render_hy4(messages, tools, kwargs)
                              : hy_chat_template_render_kwargs(messages, tools, kwargs);
}
