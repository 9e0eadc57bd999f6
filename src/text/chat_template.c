/* chat_template.c - the Hy3 chat template (tencent-Hy3.jinja) rendered in C.
 *
 * Each section of the jinja file has one function here, in template order. Values follow jinja2
 * semantics on the Python objects json.loads would make (see pyjson.h): truthiness, `{{ x }}` =
 * str(x), `tojson` = json.dumps(ensure_ascii=False), a missing key is Undefined (prints as '',
 * raises UndefinedError when indexed, called or added to a string). Where jinja2 raises, the
 * render fails with the same message text, prefixed "chat template: ".
 */
#include "text/chat_template.h"

#include <string.h>

#include "base/err.h"
#include "text/pyjson.h"

/* ------------------------------------------------------------ special tokens (HYTK = ':opensource') */
#define EOS_TOKEN "<｜hy_eos:opensource｜>"
#define BOS_TOKEN "<｜hy_begin_of_sentence:opensource｜>"
#define USER_TOKEN "<｜hy_User:opensource｜>"
#define ASSISTANT_TOKEN "<｜hy_Assistant:opensource｜>"
#define THINK_BEGIN_TOKEN "<think:opensource>"
#define THINK_END_TOKEN "</think:opensource>"
#define TOOLCALLS_BEGIN_TOKEN "<tool_calls:opensource>"
#define TOOLCALLS_END_TOKEN "</tool_calls:opensource>"
#define TOOLCALL_BEGIN_TOKEN "<tool_call:opensource>"
#define TOOLCALL_END_TOKEN "</tool_call:opensource>"
#define TOOLSEP_TOKEN "<tool_sep:opensource>"
#define ARGKEY_BEGIN_TOKEN "<arg_key:opensource>"
#define ARGKEY_END_TOKEN "</arg_key:opensource>"
#define ARGVALUE_BEGIN_TOKEN "<arg_value:opensource>"
#define ARGVALUE_END_TOKEN "</arg_value:opensource>"
#define TOOLRESPONSES_BEGIN_TOKEN "<tool_responses:opensource>"
#define TOOLRESPONSES_END_TOKEN "</tool_responses:opensource>"
#define TOOLRESPONSE_BEGIN_TOKEN "<tool_response:opensource>"
#define TOOLRESPONSE_END_TOKEN "</tool_response:opensource>"
#define REASONING_MODE_TOKEN "<｜reasoning_mode:opensource｜>"

#define ERR_PREFIX "chat template: "

/* Render state: the template's variables and namespaces. */
struct tpl {
    struct hy_pyjson_buf out;
    json_t *messages;    /* list(messages), owned */
    const json_t *tools; /* NULL = None */
    int tools_truthy;    /* `tools` as a condition */
    /* hyperparameters, after defaults */
    int add_generation_prompt;
    int preserved_thinking;
    int is_training;
    int raw_last_assistant;
    const char *reasoning_effort; /* "no_think" | "low" | "high" once validated */
    /* ns / sp_ns */
    long last_user_index;
    struct hy_pyjson_buf system_prompt;
    /* prev_ns / last_ns */
    int is_tool, is_tool_first;
    int last_is_assistant;
};

/* ------------------------------------------------------------ small jinja helpers */

static void emit(struct tpl *t, const char *s)
{
    hy_pyjson_buf_puts(&t->out, s);
}

static void emit_str(struct hy_pyjson_buf *b, const json_t *s)
{
    hy_pyjson_buf_append(b, json_string_value(s), json_string_length(s));
}

/* obj[key] as jinja2 resolves it for the keys this template uses: the dict value, or NULL
 * (Undefined) for a missing key or a non-dict obj. */
static const json_t *getitem(const json_t *obj, const char *key)
{
    return json_is_object(obj) ? json_object_get(obj, key) : NULL;
}

/* `v == lit` for a str literal. */
static int str_eq(const json_t *v, const char *lit)
{
    return json_is_string(v) && json_string_length(v) == strlen(lit) &&
           memcmp(json_string_value(v), lit, json_string_length(v)) == 0;
}

/* The UndefinedError jinja2 raises when Undefined `obj[name]` is used. */
static int err_undefined(const json_t *obj, const char *name)
{
    if (!obj || json_is_null(obj))
        return hy_err_set(ERR_PREFIX "'None' has no attribute '%s'", name);
    return hy_err_set(ERR_PREFIX "'%s object' has no attribute '%s'", hy_pyjson_type_name(obj), name);
}

/* The TypeError of Python's `str + v` for a non-str v. */
static int err_concat(const json_t *v)
{
    return hy_err_set(ERR_PREFIX "can only concatenate str (not \"%s\") to str", hy_pyjson_type_name(v));
}

/* What `for x in v` iterates, as a new array reference: a list itself, a dict's keys, a str's
 * characters. NULL (TypeError "... is not iterable") for None, bool and numbers. */
static json_t *py_list(const json_t *v)
{
    if (json_is_array(v))
        return json_incref((json_t *)v);
    if (json_is_object(v)) {
        json_t *a = json_array();
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val) json_array_append_new(a, json_string(key));
        return a;
    }
    if (json_is_string(v)) {
        json_t *a = json_array();
        const unsigned char *s = (const unsigned char *)json_string_value(v);
        size_t n = json_string_length(v);
        for (size_t i = 0; i < n;) {
            size_t len = s[i] < 0x80 ? 1 : (s[i] >> 5) == 6 ? 2 : (s[i] >> 4) == 14 ? 3 : 4;
            if (len > n - i)
                len = n - i;
            json_array_append_new(a, json_stringn_nocheck((const char *)s + i, len));
            i += len;
        }
        return a;
    }
    hy_err_set(ERR_PREFIX "'%s' object is not iterable", hy_pyjson_type_name(v));
    return NULL;
}

/* ------------------------------------------------------------ macro visible_text(content) */

static void visible_text(struct hy_pyjson_buf *b, const json_t *content)
{
    if (!content || json_is_null(content))
        return; /* Undefined iterates as empty; None → '' */
    if (json_is_string(content)) {
        emit_str(b, content);
    } else if (json_is_array(content)) {
        for (size_t i = 0; i < json_array_size(content); i++) {
            const json_t *item = json_array_get(content, i);
            if (json_is_object(item) && str_eq(json_object_get(item, "type"), "text")) {
                const json_t *text = json_object_get(item, "text");
                if (text)
                    hy_pyjson_str(b, text); /* {{ item.text }}: Undefined prints '' */
            } else if (json_is_string(item)) {
                emit_str(b, item);
            }
        }
    } else {
        hy_pyjson_str(b, content); /* mapping, number, bool: str(content) */
    }
}

/* ------------------------------------------------------------ hyperparameters variables */

static int read_hyperparameters(struct tpl *t, const json_t *kw)
{
    const json_t *v;
    t->add_generation_prompt = hy_pyjson_truthy(getitem(kw, "add_generation_prompt"));
    v = getitem(kw, "preserved_thinking");
    t->preserved_thinking = v ? hy_pyjson_truthy(v) : t->tools_truthy;
    t->is_training = hy_pyjson_truthy(getitem(kw, "is_training"));

    v = getitem(kw, "reasoning_effort");
    if (!v) {
        t->reasoning_effort = "no_think";
    } else if (str_eq(v, "high") || str_eq(v, "low") || str_eq(v, "no_think")) {
        t->reasoning_effort = json_string_value(v);
    } else if (json_is_null(v)) {
        return hy_err_set(ERR_PREFIX "reasoning_effort error : None, should be no_think/low/high");
    } else if (json_is_string(v)) {
        return hy_err_set(ERR_PREFIX "reasoning_effort error : %s, should be no_think/low/high", json_string_value(v));
    } else {
        return err_concat(v);
    }

    if (str_eq(getitem(kw, "fallback_strategy"), "reasoning_toolcall_retry")) {
        t->reasoning_effort = "high";
        t->add_generation_prompt = 0;
    }
    t->raw_last_assistant = hy_pyjson_truthy(getitem(kw, "raw_last_assistant"));
    return 0;
}

/* ------------------------------------------------------------ system prompt + last user index */

static void scan_messages(struct tpl *t)
{
    t->last_user_index = -1;
    for (size_t i = 0; i < json_array_size(t->messages); i++) {
        const json_t *m = json_array_get(t->messages, i);
        const json_t *role = getitem(m, "role");
        if (str_eq(role, "system"))
            visible_text(&t->system_prompt, getitem(m, "content"));
        if (str_eq(role, "user"))
            t->last_user_index = (long)i;
    }
    if (t->reasoning_effort[0] && !t->tools_truthy) {
        hy_pyjson_buf_puts(&t->system_prompt, REASONING_MODE_TOKEN "reasoning_effort:");
        hy_pyjson_buf_puts(&t->system_prompt, t->reasoning_effort);
    }
}

/* ------------------------------------------------------------ tools block */

static int render_tools(struct tpl *t)
{
    if (!t->tools_truthy)
        return 0;
    if (t->system_prompt.len)
        emit(t, "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.");
    else
        emit(t, "# Tools\n\nYou may call one or more functions to assist with the user query.");
    emit(t, "\n\nYou are provided with function signatures within <tools></tools> XML tags:");
    emit(t, "\n<tools>\n");
    json_t *list = py_list(t->tools);
    if (!list)
        return -1;
    for (size_t i = 0; i < json_array_size(list); i++) {
        if (i > 0)
            emit(t, "\n");
        hy_pyjson_dumps(&t->out, json_array_get(list, i));
    }
    json_decref(list);
    emit(t, "\n</tools>\n\n");
    emit(t, "For function call returns, you should first print " TOOLCALLS_BEGIN_TOKEN "\n");
    emit(t, "For each function call, you should return object like:\n");
    emit(t, TOOLCALL_BEGIN_TOKEN "{function-name}" TOOLSEP_TOKEN "\n");
    emit(t, ARGKEY_BEGIN_TOKEN "{arg-key-1}" ARGKEY_END_TOKEN "\n");
    emit(t, ARGVALUE_BEGIN_TOKEN "{arg-value-1}" ARGVALUE_END_TOKEN "\n");
    emit(t, ARGKEY_BEGIN_TOKEN "{arg-key-2}" ARGKEY_END_TOKEN "\n");
    emit(t, ARGVALUE_BEGIN_TOKEN "{arg-value-2}" ARGVALUE_END_TOKEN "\n");
    emit(t, "...\n");
    emit(t, TOOLCALL_END_TOKEN "\n");
    if (t->reasoning_effort[0]) {
        emit(t, "At the end of function call returns, you should print " TOOLCALLS_END_TOKEN REASONING_MODE_TOKEN
                "reasoning_effort:");
        emit(t, t->reasoning_effort);
    } else {
        emit(t, "At the end of function call returns, you should print " TOOLCALLS_END_TOKEN);
    }
    return 0;
}

/* ------------------------------------------------------------ messages */

static void render_user(struct tpl *t, const json_t *m)
{
    if (t->is_tool)
        emit(t, TOOLRESPONSES_END_TOKEN);
    emit(t, USER_TOKEN);
    visible_text(&t->out, getitem(m, "content"));
    t->is_tool = 0;
}

/* The assistant's `content` variable: think tags around the reasoning (when kept) + visible text.
 * Reasoning is kept when training, with preserved_thinking, or after the last user turn. */
static void emit_assistant_content(struct tpl *t, const json_t *m, size_t index)
{
    const json_t *rc = NULL;
    if (t->is_training || t->preserved_thinking || (long)index > t->last_user_index) {
        rc = getitem(m, "reasoning_content");
        if (!json_is_string(rc))
            rc = getitem(m, "reasoning");
        if (!json_is_string(rc))
            rc = NULL;
    }
    emit(t, THINK_BEGIN_TOKEN);
    if (rc)
        emit_str(&t->out, rc);
    emit(t, THINK_END_TOKEN);
    visible_text(&t->out, getitem(m, "content"));
}

/* One entry of tool_calls: name line, then `arguments.items()` as key / value lines (str values
 * as-is, others through tojson). */
static int render_tool_call(struct tpl *t, const json_t *call)
{
    const json_t *fn = getitem(call, "function");
    if (!fn)
        return err_undefined(call, "function"); /* tool['function']['arguments'] raises */
    const json_t *arguments = getitem(fn, "arguments");
    const json_t *name = getitem(fn, "name");
    if (!name)
        return err_undefined(fn, "name");
    if (!json_is_string(name))
        return err_concat(name);
    emit(t, TOOLCALL_BEGIN_TOKEN);
    emit_str(&t->out, name);
    emit(t, TOOLSEP_TOKEN "\n");
    if (!arguments)
        return err_undefined(fn, "arguments");
    if (!json_is_object(arguments))
        return err_undefined(arguments, "items"); /* e.g. a JSON string */
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)arguments, key, value)
    {
        emit(t, ARGKEY_BEGIN_TOKEN);
        emit(t, key);
        emit(t, ARGKEY_END_TOKEN "\n" ARGVALUE_BEGIN_TOKEN);
        if (json_is_string(value))
            emit_str(&t->out, value);
        else
            hy_pyjson_dumps(&t->out, value);
        emit(t, ARGVALUE_END_TOKEN "\n");
    }
    emit(t, TOOLCALL_END_TOKEN "\n");
    return 0;
}

static int render_tool_calls(struct tpl *t, const json_t *m, const json_t *tool_calls, size_t index)
{
    t->is_tool_first = 1;
    emit_assistant_content(t, m, index);
    emit(t, TOOLCALLS_BEGIN_TOKEN "\n");
    json_t *list = py_list(tool_calls);
    if (!list)
        return -1;
    for (size_t i = 0; i < json_array_size(list); i++) {
        if (render_tool_call(t, json_array_get(list, i))) {
            json_decref(list);
            return -1;
        }
    }
    json_decref(list);
    emit(t, TOOLCALLS_END_TOKEN EOS_TOKEN);
    return 0;
}

static int render_assistant(struct tpl *t, const json_t *m, size_t index, int is_last)
{
    if (t->is_tool)
        emit(t, TOOLRESPONSES_END_TOKEN);
    emit(t, ASSISTANT_TOKEN);
    const json_t *tool_calls = getitem(m, "tool_calls");
    if (hy_pyjson_truthy(tool_calls)) {
        if (render_tool_calls(t, m, tool_calls, index))
            return -1;
    } else if (is_last && t->raw_last_assistant) {
        visible_text(&t->out, getitem(m, "content"));
    } else if (!is_last || t->is_training) {
        emit_assistant_content(t, m, index);
        emit(t, EOS_TOKEN);
    } else {
        emit_assistant_content(t, m, index);
    }
    t->is_tool = 0;
    return 0;
}

static void render_tool_response(struct tpl *t, const json_t *m)
{
    t->is_tool = 1;
    if (t->is_tool_first) {
        emit(t, TOOLRESPONSES_BEGIN_TOKEN "\n");
        t->is_tool_first = 0;
    }
    emit(t, TOOLRESPONSE_BEGIN_TOKEN "\n");
    visible_text(&t->out, getitem(m, "content"));
    emit(t, "\n" TOOLRESPONSE_END_TOKEN "\n");
}

static int render_messages(struct tpl *t)
{
    t->is_tool = 0;
    t->is_tool_first = 1;
    t->last_is_assistant = 0;
    size_t n = json_array_size(t->messages);
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(t->messages, i);
        const json_t *role = getitem(m, "role");
        int is_last = i + 1 == n;
        if (str_eq(role, "user"))
            render_user(t, m);
        if (str_eq(role, "assistant") && render_assistant(t, m, i, is_last))
            return -1;
        if (str_eq(role, "tool"))
            render_tool_response(t, m);
        if (is_last && str_eq(role, "assistant"))
            t->last_is_assistant = 1;
    }
    if (t->is_tool)
        emit(t, TOOLRESPONSES_END_TOKEN);
    return 0;
}

/* ------------------------------------------------------------ generation prompt */

static void render_generation_prompt(struct tpl *t)
{
    if (!t->add_generation_prompt || t->last_is_assistant)
        return;
    const char *e = t->reasoning_effort;
    if (!strcmp(e, "low") || !strcmp(e, "high"))
        emit(t, ASSISTANT_TOKEN THINK_BEGIN_TOKEN);
    else if (!strcmp(e, "no_think"))
        emit(t, ASSISTANT_TOKEN THINK_BEGIN_TOKEN THINK_END_TOKEN);
    else
        emit(t, ASSISTANT_TOKEN);
}

/* ------------------------------------------------------------ public API */

void hy_chat_template_opts_init(struct hy_chat_template_opts *o)
{
    o->add_generation_prompt = 1;
    o->reasoning_effort = NULL;
    o->preserved_thinking = -1;
    o->is_training = -1;
    o->raw_last_assistant = -1;
    o->fallback_strategy = NULL;
}

char *hy_chat_template_render_kwargs(const json_t *messages, const json_t *tools, const json_t *kwargs)
{
    struct tpl t;
    memset(&t, 0, sizeof t);
    hy_pyjson_buf_init(&t.out);
    hy_pyjson_buf_init(&t.system_prompt);
    t.tools = tools;
    t.tools_truthy = hy_pyjson_truthy(tools);
    char *result = NULL;

    if (kwargs && !json_is_object(kwargs)) {
        hy_err_set(ERR_PREFIX "template kwargs must be a JSON object");
        goto done;
    }
    if (read_hyperparameters(&t, kwargs))
        goto done;
    t.messages = py_list(messages);
    if (!t.messages)
        goto done;
    scan_messages(&t);
    emit(&t, BOS_TOKEN);
    hy_pyjson_buf_append(&t.out, t.system_prompt.data ? t.system_prompt.data : "", t.system_prompt.len);
    if (render_tools(&t))
        goto done;
    if (render_messages(&t))
        goto done;
    render_generation_prompt(&t);
    if (t.out.failed || t.system_prompt.failed) {
        hy_err_set(ERR_PREFIX "out of memory");
        goto done;
    }
    result = hy_pyjson_buf_take(&t.out);
    if (!result)
        hy_err_set(ERR_PREFIX "out of memory");
done:
    json_decref(t.messages);
    hy_pyjson_buf_free(&t.out);
    hy_pyjson_buf_free(&t.system_prompt);
    return result;
}

char *hy_chat_template_render(const json_t *messages, const json_t *tools, const struct hy_chat_template_opts *opts)
{
    struct hy_chat_template_opts defaults;
    if (!opts) {
        hy_chat_template_opts_init(&defaults);
        opts = &defaults;
    }
    json_t *kw = json_object();
    if (!kw) {
        hy_err_set(ERR_PREFIX "out of memory");
        return NULL;
    }
    json_object_set_new(kw, "add_generation_prompt", json_boolean(opts->add_generation_prompt));
    if (opts->reasoning_effort) {
        json_t *e = json_string(opts->reasoning_effort);
        if (!e) {
            json_decref(kw);
            hy_err_set(ERR_PREFIX "reasoning_effort is not valid UTF-8");
            return NULL;
        }
        json_object_set_new(kw, "reasoning_effort", e);
    }
    if (opts->preserved_thinking >= 0)
        json_object_set_new(kw, "preserved_thinking", json_boolean(opts->preserved_thinking));
    if (opts->is_training >= 0)
        json_object_set_new(kw, "is_training", json_boolean(opts->is_training));
    if (opts->raw_last_assistant >= 0)
        json_object_set_new(kw, "raw_last_assistant", json_boolean(opts->raw_last_assistant));
    if (opts->fallback_strategy)
        json_object_set_new(kw, "fallback_strategy", json_string(opts->fallback_strategy));
    char *s = hy_chat_template_render_kwargs(messages, tools, kw);
    json_decref(kw);
    return s;
}

int hy_chat_template_parse_tool_arguments(json_t *messages)
{
    for (size_t i = 0; i < json_array_size(messages); i++) {
        json_t *m = json_array_get(messages, i);
        if (!str_eq(getitem(m, "role"), "assistant"))
            continue;
        json_t *calls = json_object_get(m, "tool_calls");
        for (size_t j = 0; j < json_array_size(calls); j++) {
            json_t *fn = json_object_get(json_array_get(calls, j), "function");
            if (!json_is_object(fn))
                continue;
            json_t *args = json_object_get(fn, "arguments");
            if (json_is_object(args))
                continue;
            json_t *parsed = NULL;
            if (!args || json_is_null(args) || (json_is_string(args) && json_string_length(args) == 0)) {
                parsed = json_object();
            } else if (json_is_string(args)) {
                json_error_t e;
                parsed = json_loadb(json_string_value(args), json_string_length(args), 0, &e);
                if (!json_is_object(parsed)) {
                    json_decref(parsed);
                    return hy_err_set("messages[%zu].tool_calls[%zu].function.arguments: not a JSON "
                                      "object%s%s",
                                      i, j, parsed ? "" : ": ", parsed ? "" : e.text);
                }
            } else {
                return hy_err_set("messages[%zu].tool_calls[%zu].function.arguments: expected an object "
                                  "or a JSON string, got %s",
                                  i, j, hy_pyjson_type_name(args));
            }
            if (!parsed || json_object_set_new(fn, "arguments", parsed))
                return hy_err_set("messages[%zu].tool_calls[%zu]: out of memory", i, j);
        }
    }
    return 0;
}
