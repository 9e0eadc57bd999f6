/* jinja.h - a Jinja2 interpreter for chat templates (the subset Hugging Face chat templates use).
 *
 * A template is parsed once (hy_jinja_parse) and rendered many times (hy_jinja_render), with the
 * environment transformers' apply_chat_template uses: ImmutableSandboxedEnvironment with
 * trim_blocks, lstrip_blocks and the loopcontrols extension; `tojson` is
 * json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) (keyword
 * arguments honoured); globals raise_exception(msg) and strftime_now(fmt). Values are Python values
 * over JSON (see pyjson.h: object -> dict in insertion order, array -> list, integer -> int,
 * real -> float, ...) plus undefined, namespace, macro and loop objects.
 *
 * Rendering is read-only on the parsed template: one parsed template may be rendered from several
 * threads at once.
 */
#ifndef HY_TEXT_JINJA_H
#define HY_TEXT_JINJA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct hy_jinja;

/* Parses template text src[0..len) (UTF-8; need not be NUL-terminated). Returns the parsed template
 * (free with hy_jinja_free), or NULL with hy_err_msg() set: a syntax error or a construct the
 * interpreter does not support names the construct and its 1-based line, e.g.
 * "line 12: unsupported statement 'include'" or "line 3: unexpected end of template, expected
 * 'endfor'". Never returns a template that would render differently from jinja2 by omission. */
struct hy_jinja *hy_jinja_parse(const char *src, size_t len);

void hy_jinja_free(struct hy_jinja *t);

/* Bounds on one render (a template that loops or grows its output without bound stops with an error). */
struct hy_jinja_limits {
    size_t max_output;  /* bytes of output; 0 = 64 MiB */
    uint64_t max_steps; /* evaluation steps (expressions + statements executed); 0 = 50 million */
    int max_depth;      /* macro / call recursion depth; 0 = 256 */
    time_t now;         /* the time strftime_now formats (local time); 0 = time(NULL) */
    size_t max_memory;  /* bytes one render may allocate (values, scopes, buffers);
                           0 = 8 * max_output + 64 MiB */
};

/* Renders t with the template variables `vars` (a JSON object: each key is a variable, e.g.
 * messages, tools, add_generation_prompt, bos_token, eos_token, and chat_template_kwargs' keys;
 * a key that is absent is undefined, JSON null is None). `limits` may be NULL (the defaults).
 * Returns the malloc'd NUL-terminated output (caller frees; *out_len = its length, out_len may be
 * NULL), or NULL with hy_err_msg() set to what jinja2 would raise for the same input: the message
 * of raise_exception, or jinja2's own text, e.g. "'str object' has no attribute 'items'",
 * "'x' is undefined", or a limit ("output exceeds 67108864 bytes"). */
char *hy_jinja_render(const struct hy_jinja *t, const json_t *vars, const struct hy_jinja_limits *limits,
                      size_t *out_len);

#endif
