/* chat.h - a checkpoint's chat template: where it comes from, and conversations rendered with it.
 *
 * The template is found the way vLLM resolves it: the --chat-template argument (a file, or the
 * template text itself), else the model directory's chat_template.jinja, else tokenizer_config.json's
 * "chat_template" (a string, or a list of {"name", "template"} where "default" is used, and
 * "tool_use" instead when a request has tools). It is parsed once, at load (text/jinja.h), and
 * rendered with the variables transformers' apply_chat_template passes: the tokenizer's special
 * tokens (bos_token, eos_token, pad_token, unk_token from tokenizer_config.json), messages, tools
 * (None without tools), documents (None), add_generation_prompt (default false), then the request's
 * template kwargs (chat_template_kwargs, reasoning_effort, add_generation_prompt).
 */
#ifndef HY_TEXT_CHAT_H
#define HY_TEXT_CHAT_H

#include <jansson.h>
#include <stddef.h>

struct hy_jinja;

struct hy_chat {
    struct hy_jinja *tpl;       /* the default template; NULL: the model has none */
    struct hy_jinja *tpl_tools; /* tokenizer_config.json's named "tool_use" template, or NULL */
    json_t *special;            /* owned: {"bos_token": str, ...} as transformers' special_tokens_map */
    char source[600];           /* where tpl came from, for messages ("" when none) */
};

/* Resolves and parses the template of the model in model_dir. chat_template may be NULL (no flag),
 * a path to a file, or template text (a string with '{' or a newline that is not a file). A
 * chat_template string that is neither an existing file nor template text, a file that cannot be
 * read, or a template that does not parse (syntax, or a construct the interpreter does not support:
 * the message names it and its line) returns -1 with hy_err_msg() naming the source. No template at
 * all is not an error (c->tpl = NULL; hy_chat_apply then fails). On success free with hy_chat_free;
 * on failure *c holds nothing to free. */
int hy_chat_load(struct hy_chat *c, const char *model_dir, const char *chat_template);

/* 1 when a template was found. */
int hy_chat_available(const struct hy_chat *c);

/* Renders messages (JSON array of message objects, borrowed) and tools (OpenAI tools array as the
 * request gave it, or NULL / JSON null: None) with the template variables of `kwargs` (a JSON object or NULL; a key
 * absent is undefined in the template, JSON null is None; "messages", "tools" and "documents" are
 * refused). Returns the malloc'd NUL-terminated prompt (caller frees), or NULL with hy_err_msg():
 * "chat template: " + the template's exception (e.g. raise_exception's message), or "this model has
 * no chat template ..." when none was found. */
char *hy_chat_apply(const struct hy_chat *c, const json_t *messages, const json_t *tools, const json_t *kwargs);

/* OpenAI clients send tool_calls[*].function.arguments as a JSON *string*; templates (like jinja2)
 * need a mapping there. Rewrites `messages` in place the way vLLM does before rendering: in every
 * assistant message's tool_calls, a string `arguments` is parsed as JSON (it must be an object), and a
 * missing, null or empty-string `arguments` becomes {}. Returns 0, or -1 with hy_err_msg() naming the
 * message and call index when an argument string is not a JSON object. */
int hy_chat_parse_tool_arguments(json_t *messages);

void hy_chat_free(struct hy_chat *c);

#endif
