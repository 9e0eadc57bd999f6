/* fuzz_jinja.c - libFuzzer target: the Jinja interpreter on arbitrary template text and variables.
 * Input: template text, a NUL byte, then a JSON document for `messages` (any JSON; other variables
 * fixed: tools, add_generation_prompt, bos_token). Parse, then render twice under small limits
 * (1 MiB output, 1e6 steps, depth 32, 64 MiB memory): never crash or leak, stop in bounded time,
 * and render the same bytes (or fail with the same message) both times. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "text/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t tl = nul ? (size_t)(nul - data) : size;
    struct hy_jinja *t = hy_jinja_parse((const char *)data, tl);
    if (!t)
        return 0;
    json_t *vars = json_object();
    json_t *msgs = nul ? json_loadb((const char *)nul + 1, size - tl - 1, JSON_DECODE_ANY, NULL) : NULL;
    json_object_set_new(vars, "messages", msgs ? msgs : json_pack("[{s:s,s:s}]", "role", "user", "content", "hi"));
    json_object_set_new(vars, "tools", json_pack("[{s:s,s:{s:s}}]", "type", "function", "function", "name", "f"));
    json_object_set_new(vars, "add_generation_prompt", json_true());
    json_object_set_new(vars, "bos_token", json_string("<s>"));
    struct hy_jinja_limits lim = {
        .max_output = 1 << 20, .max_steps = 1000000, .max_depth = 32, .now = 1, .max_memory = 64 << 20};
    size_t n1 = 0, n2 = 0;
    char *a = hy_jinja_render(t, vars, &lim, &n1);
    char *e1 = a ? NULL : strdup(hy_err_msg());
    char *b = hy_jinja_render(t, vars, &lim, &n2);
    if ((a == NULL) != (b == NULL))
        abort();
    if (a && (n1 != n2 || memcmp(a, b, n1)))
        abort(); /* rendering is deterministic and read-only on the template */
    if (!a && strcmp(e1, hy_err_msg()))
        abort();
    free(a);
    free(b);
    free(e1);
    json_decref(vars);
    hy_jinja_free(t);
    return 0;
}
