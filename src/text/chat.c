/* chat.c - resolving a checkpoint's chat template and rendering conversations with it. */
#include "text/chat.h"

#include "base/err.h"
#include "base/fileio.h"
#include "text/jinja.h"
#include "text/pyjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const special_keys[] = {"bos_token", "eos_token", "unk_token", "pad_token"};

/* tokenizer_config.json's special tokens: a string or an AddedToken dict {"content": ...}. */
static json_t *special_tokens(const json_t *cfg)
{
    json_t *out = json_object();
    for (size_t i = 0; out && i < sizeof(special_keys) / sizeof(special_keys[0]); i++) {
        const json_t *v = json_object_get(cfg, special_keys[i]);
        if (json_is_object(v))
            v = json_object_get(v, "content");
        if (json_is_string(v))
            json_object_set_new(out, special_keys[i], json_string(json_string_value(v)));
    }
    return out;
}

static int parse_into(struct hy_jinja **out, const char *text, size_t len, const char *source)
{
    *out = hy_jinja_parse(text, len);
    if (!*out)
        return hy_err_prefix("chat template %s", source);
    return 0;
}

/* The "chat_template" of tokenizer_config.json: a string, or a list of named templates. */
static int from_tokenizer_config(struct hy_chat *c, const json_t *ct, const char *source)
{
    if (json_is_string(ct))
        return parse_into(&c->tpl, json_string_value(ct), json_string_length(ct), source);
    if (!json_is_array(ct))
        return hy_err_set("%s: chat_template must be a string or a list of {name, template}", source);
    for (size_t i = 0; i < json_array_size(ct); i++) {
        const json_t *e = json_array_get(ct, i), *name = json_object_get(e, "name"),
                     *t = json_object_get(e, "template");
        if (!json_is_string(name) || !json_is_string(t))
            return hy_err_set("%s: chat_template[%zu] needs string 'name' and 'template'", source, i);
        struct hy_jinja **slot = !strcmp(json_string_value(name), "default")    ? &c->tpl
                                 : !strcmp(json_string_value(name), "tool_use") ? &c->tpl_tools
                                                                                : NULL;
        if (slot && !*slot && parse_into(slot, json_string_value(t), json_string_length(t), source))
            return -1;
    }
    if (!c->tpl && json_array_size(ct))
        return hy_err_set("%s: chat_template lists no template named 'default'", source);
    return 0;
}

/* A --chat-template value: an existing file, else template text (vLLM's rule: text holds one of "{}\n"). */
static int from_flag(struct hy_chat *c, const char *arg)
{
    char *data = NULL;
    size_t len = 0;
    if (hy_file_exists(arg)) {
        if (hy_file_read_all(arg, &data, &len))
            return hy_err_prefix("--chat-template %s", arg);
        snprintf(c->source, sizeof(c->source), "%s", arg);
        int rc = parse_into(&c->tpl, data, len, c->source);
        free(data);
        return rc;
    }
    if (!strpbrk(arg, "{}\n"))
        return hy_err_set("--chat-template %s: no such file (and not template text: it has no '{', '}' or newline)",
                          arg);
    snprintf(c->source, sizeof(c->source), "(--chat-template text)");
    return parse_into(&c->tpl, arg, strlen(arg), c->source);
}

int hy_chat_load(struct hy_chat *c, const char *model_dir, const char *chat_template)
{
    memset(c, 0, sizeof(*c));
    char *cfg_path = hy_path_join(model_dir, "tokenizer_config.json");
    char *jinja_path = hy_path_join(model_dir, "chat_template.jinja");
    json_t *cfg = NULL;
    int rc = -1;
    if (!cfg_path || !jinja_path) {
        hy_err_set("out of memory");
        goto out;
    }
    if (hy_file_exists(cfg_path)) {
        json_error_t je;
        cfg = json_load_file(cfg_path, 0, &je);
        if (!json_is_object(cfg)) {
            hy_err_set("%s: %s", cfg_path, cfg ? "not a JSON object" : je.text);
            goto out;
        }
    }
    c->special = special_tokens(cfg);
    if (!c->special) {
        hy_err_set("out of memory");
        goto out;
    }
    if (chat_template) {
        rc = from_flag(c, chat_template);
    } else if (hy_file_exists(jinja_path)) {
        snprintf(c->source, sizeof(c->source), "%s", jinja_path);
        char *data = NULL;
        size_t len = 0;
        rc = hy_file_read_all(jinja_path, &data, &len) ? hy_err_prefix("%s", jinja_path)
                                                       : parse_into(&c->tpl, data, len, c->source);
        free(data);
    } else if (json_object_get(cfg, "chat_template")) {
        snprintf(c->source, sizeof(c->source), "%s", cfg_path);
        rc = from_tokenizer_config(c, json_object_get(cfg, "chat_template"), cfg_path);
    } else {
        rc = 0;
    }
out:
    json_decref(cfg);
    free(cfg_path);
    free(jinja_path);
    if (rc)
        hy_chat_free(c);
    return rc;
}

int hy_chat_available(const struct hy_chat *c)
{
    return c && c->tpl;
}

/* transformers' rule: tools given (not None) select the "tool_use" template. */
static int has_tools(const json_t *tools)
{
    return tools && !json_is_null(tools);
}

char *hy_chat_apply(const struct hy_chat *c, const json_t *messages, const json_t *tools, const json_t *kwargs)
{
    if (!hy_chat_available(c))
        return hy_err_set("this model has no chat template (no chat_template.jinja, no chat_template in "
                          "tokenizer_config.json): pass --chat-template FILE"),
               NULL;
    if (kwargs && !json_is_object(kwargs))
        return hy_err_set("chat template kwargs must be an object"), NULL;
    static const char *const reserved[] = {"messages", "tools", "documents"};
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (json_object_get(kwargs, reserved[i]))
            return hy_err_set("chat_template_kwargs may not set '%s'", reserved[i]), NULL;
    json_t *vars = json_deep_copy(c->special);
    if (!vars)
        return hy_err_set("out of memory"), NULL;
    json_object_set(vars, "messages", (json_t *)messages);
    json_object_set_new(vars, "tools", has_tools(tools) ? json_incref((json_t *)tools) : json_null());
    json_object_set_new(vars, "documents", json_null());
    json_object_set_new(vars, "add_generation_prompt", json_false());
    if (kwargs)
        json_object_update(vars, (json_t *)kwargs);
    const struct hy_jinja *t = has_tools(tools) && c->tpl_tools ? c->tpl_tools : c->tpl;
    char *out = hy_jinja_render(t, vars, NULL, NULL);
    json_decref(vars);
    if (!out)
        hy_err_prefix("chat template");
    return out;
}

int hy_chat_parse_tool_arguments(json_t *messages)
{
    for (size_t i = 0; i < json_array_size(messages); i++) {
        json_t *m = json_array_get(messages, i);
        const json_t *role = json_object_get(m, "role");
        if (!json_is_string(role) || strcmp(json_string_value(role), "assistant"))
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
                    return hy_err_set("messages[%zu].tool_calls[%zu].function.arguments: not a JSON object%s%s", i, j,
                                      parsed ? "" : ": ", parsed ? "" : e.text);
                }
            } else {
                return hy_err_set("messages[%zu].tool_calls[%zu].function.arguments: expected an object or a JSON "
                                  "string, got %s",
                                  i, j, hy_pyjson_type_name(args));
            }
            if (!parsed || json_object_set_new(fn, "arguments", parsed))
                return hy_err_set("messages[%zu].tool_calls[%zu]: out of memory", i, j);
        }
    }
    return 0;
}

void hy_chat_free(struct hy_chat *c)
{
    if (!c)
        return;
    hy_jinja_free(c->tpl);
    hy_jinja_free(c->tpl_tools);
    json_decref(c->special);
    memset(c, 0, sizeof(*c));
}
