/* tools_file.c - tools from a JSON file; output ids -> content, reasoning and tool calls. */
#include "cli/tools_file.h"

#include "base/err.h"
#include "base/sbuf.h"
#include "text/reasoning.h"
#include "text/toolcall.h"

#include <stdlib.h>
#include <string.h>

int hy_cli_load_tools(const char *path, json_t **tools)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    *tools = NULL;
    if (!root)
        return hy_err_set("%s: line %d: %s", path, je.line, je.text);
    json_t *list = json_is_object(root) ? json_object_get(root, "tools") : root;
    if (!json_is_array(list) || !json_array_size(list)) {
        json_decref(root);
        return hy_err_set("%s: expected a non-empty list of tools (or {\"tools\": [...]})", path);
    }
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t)
    {
        json_t *fn = json_object_get(t, "function"), *name = json_object_get(fn, "name");
        json_t *ty = json_object_get(t, "type"), *params = json_object_get(fn, "parameters");
        if (!json_is_string(ty) || strcmp(json_string_value(ty), "function") || !json_is_string(name) ||
            !json_string_length(name) || (params && !json_is_null(params) && !json_is_object(params))) {
            json_decref(root);
            return hy_err_set("%s: tools[%zu]: expected {\"type\": \"function\", \"function\": {\"name\": "
                              "non-empty string, \"parameters\": object}}",
                              path, i);
        }
    }
    *tools = json_incref(list);
    json_decref(root);
    return 0;
}

int hy_cli_tool_result(const struct hy_tokenizer *tok, const int32_t *ids, size_t n, const json_t *tools,
                       int start_in_reasoning, struct hy_cli_tool_result *r)
{
    memset(r, 0, sizeof(*r));
    struct hy_tool_markers mk;
    hy_tool_markers_from_vocab(tok, &mk); /* without tool tokens: the Hy3 spelling, nothing parses */
    struct hy_sbuf text = {0}, content = {0}, reasoning = {0}, mid = {0};
    struct hy_detok d;
    hy_detok_init(&d, tok, 1);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        int markup = 0;
        for (int m = 0; m < HY_TM_COUNT; m++)
            markup |= ids[i] == mk.id[m] && ids[i] >= 0;
        d.skip_special = !markup;
        rc = hy_detok_push(&d, ids[i], &text.p, &text.len, &text.cap);
    }
    if (!rc)
        rc = hy_detok_flush(&d, &text.p, &text.len, &text.cap);
    struct hy_reasoning rs;
    hy_reasoning_init_markers(&rs, start_in_reasoning, mk.text[HY_TM_THINK_OPEN], mk.text[HY_TM_THINK_CLOSE]);
    struct hy_toolcall_parser p;
    hy_toolcall_init(&p, &mk, tools);
    rc = rc || hy_reasoning_feed(&rs, text.p ? text.p : "", text.len, &mid, &reasoning) ||
         hy_reasoning_flush(&rs, &mid, &reasoning) || hy_toolcall_feed(&p, mid.p ? mid.p : "", mid.len, &content) ||
         hy_toolcall_finish(&p, &content) || hy_sbuf_puts(&content, "") || hy_sbuf_puts(&reasoning, "");
    r->calls = json_array();
    for (int k = 0; !rc && k < p.n_calls; k++)
        json_array_append_new(r->calls, json_pack("{s:s, s:s#}", "name", p.calls[k].name, "arguments",
                                                  p.calls[k].args.p, (int)p.calls[k].args.len));
    r->n_complete = p.n_complete;
    r->content = content.p;
    r->reasoning = reasoning.p;
    hy_toolcall_free(&p);
    hy_reasoning_free(&rs);
    hy_sbuf_free(&text);
    hy_sbuf_free(&mid);
    if (rc) {
        hy_cli_tool_result_free(r);
        return hy_err_set("out of memory while parsing tool calls");
    }
    return 0;
}

void hy_cli_tool_result_free(struct hy_cli_tool_result *r)
{
    free(r->content);
    free(r->reasoning);
    json_decref(r->calls);
    memset(r, 0, sizeof(*r));
}
