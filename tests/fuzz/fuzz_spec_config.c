/* fuzz_spec_config.c - libFuzzer target: --speculative-config JSON (and the dotted key=value form) must
 * be accepted with a valid result or rejected with an error message, never crash or leak. */
#include "base/err.h"
#include "config/spec_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    struct hy_spec_config c;
    hy_spec_config_init(&c);
    if (hy_spec_config_parse_json(&c, s) == 0) {
        if (hy_spec_config_validate(&c) != 0)
            abort(); /* an accepted config is valid */
    } else if (hy_err_msg()[0] == '\0') {
        abort(); /* every failure must say why */
    }
    char *eq = strchr(s, '=');
    if (eq) { /* dotted form: KEY=VALUE */
        *eq = '\0';
        hy_spec_config_init(&c);
        if (hy_spec_config_set(&c, s, eq + 1) != 0 && hy_err_msg()[0] == '\0')
            abort();
    }
    free(s);
    return 0;
}
