/* chat_template.h - the Hy3 chat template (tests/data/hy3/tencent-Hy3.jinja), rendered in C.
 *
 * Output is byte-for-byte what Hugging Face apply_chat_template produces with jinja2
 * (trim_blocks, lstrip_blocks; tojson = json.dumps(ensure_ascii=False) ) for the same inputs.
 */
#ifndef HY_TEXT_CHAT_TEMPLATE_H
#define HY_TEXT_CHAT_TEMPLATE_H

#include <jansson.h>

/* Template variables besides messages/tools. Use NULL / -1 for "not defined". */
struct hy_chat_template_opts {
    int add_generation_prompt;     /* 0 or 1 */
    const char *reasoning_effort;  /* "no_think" | "low" | "high"; NULL = undefined (→ no_think) */
    int preserved_thinking;        /* -1 undefined (→ true iff tools), 0, 1 */
    int is_training;               /* -1 undefined (→ false), 0, 1 */
    int raw_last_assistant;        /* -1 undefined (→ false), 0, 1 */
    const char *fallback_strategy; /* NULL or e.g. "reasoning_toolcall_retry" */
};

/* Defaults: add_generation_prompt 1, everything else undefined. */
void hy_chat_template_opts_init(struct hy_chat_template_opts *o);

/* Renders `messages` (JSON array of {role, content, reasoning_content?, tool_calls?, ...}; content
 * may be a string, null or an array of {type:"text", text} parts) and `tools` (JSON array or NULL)
 * into a malloc'd NUL-terminated prompt string (caller frees). Returns NULL with hy_err_msg() set on
 * invalid input or where the template raises (e.g. an unknown reasoning_effort; message text names it). */
char *hy_chat_template_render(const json_t *messages, const json_t *tools, const struct hy_chat_template_opts *opts);

/* Same, with the template variables as a JSON object of kwargs, exactly as jinja2 would see them
 * (e.g. an OpenAI request's chat_template_kwargs plus add_generation_prompt): a key that is absent
 * is undefined (the template's default applies; add_generation_prompt defaults to false here), JSON
 * null is None, and conditions use Python truthiness. Keys read: add_generation_prompt,
 * reasoning_effort, preserved_thinking, is_training, raw_last_assistant, fallback_strategy; others
 * are ignored. `kwargs` may be NULL (all undefined). `messages` and `tools` iterate like Python
 * (a dict yields its keys, a str its characters; None / numbers / bools raise).
 * Returns a malloc'd prompt (caller frees), or NULL with hy_err_msg() = "chat template: " + the
 * text of the exception jinja2 raises for the same input, e.g.
 * "reasoning_effort error : None, should be no_think/low/high" or
 * "'str object' has no attribute 'items'" (tool-call `arguments` given as a JSON string). */
char *hy_chat_template_render_kwargs(const json_t *messages, const json_t *tools, const json_t *kwargs);

/* OpenAI clients send tool_calls[*].function.arguments as a JSON *string*; the template (like
 * jinja2) needs an object there and fails on a string ("'str object' has no attribute 'items'").
 * This rewrites `messages` in place the way vLLM does before rendering: for every assistant
 * message's tool_calls entry, a string `arguments` is parsed as JSON (it must be an object), and a
 * missing, null or empty-string `arguments` becomes {}. Returns 0, or -1 with hy_err_msg() naming
 * the message / call index when an argument string is not a JSON object. */
int hy_chat_template_parse_tool_arguments(json_t *messages);

/* Which chat format a model speaks, from its vocabulary (chat_template_hy4.c). */
enum hy_chat_format {
    HY_CHAT_HY3 = 0, /* tencent-Hy3.jinja (above) */
    HY_CHAT_HY4 = 1, /* Hy4-preview turns: <｜hy_start｜>role<｜hy_middle｜>content<｜hy_end｜> */
};
struct hy_tokenizer;

/* HY_CHAT_HY4 when tok has the added token <｜hy_middle:opensource｜> (Hy4-preview), else HY_CHAT_HY3
 * (tok may be NULL). */
enum hy_chat_format hy_chat_format_of(const struct hy_tokenizer *tok);

/* The Hy4-preview turn format (spec hy4_architecture.md §12): for each message hy_start + role +
 * hy_middle + content (string, null or text parts) + hy_end, then, when kwargs has add_generation_prompt
 * true, hy_start + "assistant" + hy_middle. The hub's reasoning-mode preamble and tool-call rendering are
 * not public: non-empty tools, a non-null reasoning_effort or a message with tool_calls return NULL with
 * hy_err_msg() naming them. Returns a malloc'd prompt (caller frees), or NULL with hy_err_msg(). */
char *hy_chat_template_render_hy4(const json_t *messages, const json_t *tools, const json_t *kwargs);

/* hy_chat_template_render_kwargs (HY_CHAT_HY3) or hy_chat_template_render_hy4 (HY_CHAT_HY4). */
char *hy_chat_render(enum hy_chat_format fmt, const json_t *messages, const json_t *tools, const json_t *kwargs);

#endif
