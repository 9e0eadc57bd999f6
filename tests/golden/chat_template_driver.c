/* chat_template_driver.c - renders chat-template cases through text/chat.h (the Jinja interpreter), for
 * tests/golden/test_chat_template.py and test_jinja_templates.py.
 *
 * Usage: chat_template_driver TEMPLATE CASES.json OUT.json [MODEL_DIR]
 * TEMPLATE is loaded as --chat-template would load it (MODEL_DIR, when given, supplies the special
 * tokens of its tokenizer_config.json). CASES is a JSON list of {"messages", "tools"?, other keys: template
 * kwargs such as add_generation_prompt, reasoning_effort}; OUT gets a JSON list of {"text": prompt} or
 * {"error": hy_err_msg()}, one per case; a template that does not load gives {"load_error"} for all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "text/chat.h"

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s TEMPLATE CASES.json OUT.json [MODEL_DIR]\n", argv[0]);
        return 2;
    }
    json_error_t jerr;
    json_t *cases = json_load_file(argv[2], 0, &jerr);
    if (!json_is_array(cases)) {
        fprintf(stderr, "%s: %s (line %d)\n", argv[2], jerr.text, jerr.line);
        return 2;
    }
    struct hy_chat chat;
    const int loaded = hy_chat_load(&chat, argc == 5 ? argv[4] : "/nonexistent-model-dir", argv[1]) == 0;
    char *load_err = loaded ? NULL : strdup(hy_err_msg());
    json_t *results = json_array();
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        json_t *r = json_object();
        if (!loaded) {
            json_object_set_new(r, "load_error", json_string(load_err));
            json_array_append_new(results, r);
            continue;
        }
        json_t *kw = json_deep_copy(c);
        json_object_del(kw, "messages");
        json_object_del(kw, "tools");
        char *s = hy_chat_apply(&chat, json_object_get(c, "messages"), json_object_get(c, "tools"), kw);
        if (s)
            json_object_set_new(r, "text", json_string(s));
        else
            json_object_set_new(r, "error", json_string(hy_err_msg()));
        json_array_append_new(results, r);
        free(s);
        json_decref(kw);
    }
    int rc = json_dump_file(results, argv[3], 0) ? 1 : 0;
    if (loaded)
        hy_chat_free(&chat);
    free(load_err);
    json_decref(results);
    json_decref(cases);
    return rc;
}
