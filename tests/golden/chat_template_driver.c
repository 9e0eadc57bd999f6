/* chat_template_driver.c - renders chat-template cases with the C renderer (for test_chat_template.py).
 *
 * Usage: chat_template_driver CASES.json OUT.json
 * CASES is a JSON list of {"messages", "tools"?, "add_generation_prompt"?, other kwargs...};
 * OUT gets a JSON list of {"text": prompt} or {"error": hy_err_msg()}, one per case.
 * Each case is rendered through hy_chat_template_render_kwargs; where its kwargs fit struct
 * hy_chat_template_opts (bools and strings), it is rendered through hy_chat_template_render too and
 * both results must agree (else the entry gets "opts_mismatch").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "text/chat_template.h"

/* -1: not representable; 0/1: the bool. */
static int opt_bool(const json_t *v, int *out)
{
    if (!v) {
        *out = -1;
        return 0;
    }
    if (!json_is_boolean(v))
        return -1;
    *out = json_is_true(v);
    return 0;
}

static int opt_str(const json_t *v, const char **out)
{
    if (!v) {
        *out = NULL;
        return 0;
    }
    if (!json_is_string(v))
        return -1;
    *out = json_string_value(v);
    return 0;
}

/* Fills opts from a case; returns -1 where the case's kwargs cannot be expressed as opts. */
static int case_opts(const json_t *c, struct hy_chat_template_opts *o)
{
    hy_chat_template_opts_init(o);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)c, key, v)
    {
        if (!strcmp(key, "messages") || !strcmp(key, "tools"))
            continue;
        if (strcmp(key, "add_generation_prompt") && strcmp(key, "reasoning_effort") &&
            strcmp(key, "preserved_thinking") && strcmp(key, "is_training") && strcmp(key, "raw_last_assistant") &&
            strcmp(key, "fallback_strategy"))
            return -1;
    }
    int agp;
    if (opt_bool(json_object_get(c, "add_generation_prompt"), &agp))
        return -1;
    o->add_generation_prompt = agp < 0 ? 0 : agp;
    if (opt_str(json_object_get(c, "reasoning_effort"), &o->reasoning_effort))
        return -1;
    if (opt_bool(json_object_get(c, "preserved_thinking"), &o->preserved_thinking))
        return -1;
    if (opt_bool(json_object_get(c, "is_training"), &o->is_training))
        return -1;
    if (opt_bool(json_object_get(c, "raw_last_assistant"), &o->raw_last_assistant))
        return -1;
    if (opt_str(json_object_get(c, "fallback_strategy"), &o->fallback_strategy))
        return -1;
    return 0;
}

static int same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s CASES.json OUT.json\n", argv[0]);
        return 2;
    }
    json_error_t jerr;
    json_t *cases = json_load_file(argv[1], 0, &jerr);
    if (!json_is_array(cases)) {
        fprintf(stderr, "%s: %s (line %d)\n", argv[1], jerr.text, jerr.line);
        return 2;
    }
    json_t *results = json_array();
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        json_t *kw = json_deep_copy(c);
        json_object_del(kw, "messages");
        json_object_del(kw, "tools");
        const json_t *messages = json_object_get(c, "messages");
        const json_t *tools = json_object_get(c, "tools");
        json_t *r = json_object();
        char *s = hy_chat_template_render_kwargs(messages, tools, kw);
        char *err = s ? NULL : strdup(hy_err_msg());
        if (s)
            json_object_set_new(r, "text", json_string(s));
        else
            json_object_set_new(r, "error", json_string(err));

        struct hy_chat_template_opts o;
        if (case_opts(c, &o) == 0) {
            char *s2 = hy_chat_template_render(messages, tools, &o);
            const char *err2 = s2 ? NULL : hy_err_msg();
            if (!same(s, s2) || !same(err, err2))
                json_object_set_new(r, "opts_mismatch", json_true());
            free(s2);
        }
        json_array_append_new(results, r);
        free(s);
        free(err);
        json_decref(kw);
    }
    int rc = json_dump_file(results, argv[2], 0) ? 1 : 0;
    json_decref(results);
    json_decref(cases);
    return rc;
}
