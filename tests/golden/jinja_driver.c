/* jinja_driver.c - renders a template through the Jinja interpreter (text/jinja.h) for each case, for
 * tests/golden/test_jinja_templates.py.
 *
 * Usage: jinja_driver TEMPLATE CASES.json OUT.json
 * CASES is a JSON list of objects, each the template variables of one render (messages, tools,
 * add_generation_prompt, bos_token, ...). OUT gets a JSON list of {"text": output} or
 * {"error": hy_err_msg()}, one per case; a template that does not parse gives {"load_error": msg}
 * for every case. Exit 0, or 2 on bad usage / unreadable files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "text/jinja.h"

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *p = malloc(cap);
    size_t k;
    while (p && (k = fread(p + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *q = realloc(p, cap *= 2);
            if (!q) {
                free(p);
                p = NULL;
            }
            p = q;
        }
    }
    fclose(f);
    *len = n;
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s TEMPLATE CASES.json OUT.json\n", argv[0]);
        return 2;
    }
    size_t len;
    char *src = read_all(argv[1], &len);
    if (!src) {
        fprintf(stderr, "%s: cannot read\n", argv[1]);
        return 2;
    }
    json_error_t jerr;
    json_t *cases = json_load_file(argv[2], 0, &jerr);
    if (!json_is_array(cases)) {
        fprintf(stderr, "%s: %s (line %d)\n", argv[2], jerr.text, jerr.line);
        free(src);
        return 2;
    }
    struct hy_jinja *t = hy_jinja_parse(src, len);
    char *load_err = t ? NULL : strdup(hy_err_msg());
    json_t *results = json_array();
    struct hy_jinja_limits lim = {0};
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *r = json_object();
        if (!t) {
            json_object_set_new(r, "load_error", json_string(load_err));
        } else {
            size_t n = 0;
            char *s = hy_jinja_render(t, json_array_get(cases, i), &lim, &n);
            if (s)
                json_object_set_new(r, "text", json_stringn(s, n));
            else
                json_object_set_new(r, "error", json_string(hy_err_msg()));
            free(s);
        }
        json_array_append_new(results, r);
    }
    int rc = json_dump_file(results, argv[3], 0) ? 2 : 0;
    hy_jinja_free(t);
    free(load_err);
    free(src);
    json_decref(results);
    json_decref(cases);
    return rc;
}
