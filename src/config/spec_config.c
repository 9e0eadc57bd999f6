/* spec_config.c - --speculative-config parsing (JSON and dotted keys). */
#include "config/spec_config.h"

#include "base/err.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hy_spec_config_init(struct hy_spec_config *c)
{
    memset(c, 0, sizeof(*c));
    c->draft_p_min = 0.6f;
    c->gate = 1;
}

int hy_spec_config_validate(const struct hy_spec_config *c)
{
    if (c->num_speculative_tokens < 0 || c->num_speculative_tokens > HY_SPEC_MAX_TOKENS)
        return hy_err_set("speculative-config: num_speculative_tokens=%d: must be in [0, %d] (0 = off)",
                          c->num_speculative_tokens, HY_SPEC_MAX_TOKENS);
    if (!(c->draft_p_min >= 0.0f && c->draft_p_min <= 1.0f))
        return hy_err_set("speculative-config: draft_p_min=%g: must be in [0, 1]", (double)c->draft_p_min);
    return 0;
}

static int parse_bool(const char *key, const char *v, int *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "1")) {
        *out = 1;
        return 0;
    }
    if (!strcmp(v, "false") || !strcmp(v, "0")) {
        *out = 0;
        return 0;
    }
    return hy_err_set("speculative-config: %s=%s: must be true or false", key, v);
}

int hy_spec_config_set(struct hy_spec_config *c, const char *key, const char *value)
{
    char *end = NULL;
    if (!strcmp(key, "method")) {
        if (strcmp(value, "mtp") != 0)
            return hy_err_set("speculative-config: method \"%s\" is not supported (hyinfer drafts with the "
                              "checkpoint's MTP layer: \"mtp\")",
                              value);
        return 0;
    }
    if (!strcmp(key, "num_speculative_tokens")) {
        long v = strtol(value, &end, 10);
        if (!*value || *end || v < 0 || v > HY_SPEC_MAX_TOKENS)
            return hy_err_set("speculative-config: num_speculative_tokens=%s: must be an integer in [0, %d] (0 = off)",
                              value, HY_SPEC_MAX_TOKENS);
        c->num_speculative_tokens = (int32_t)v;
        return 0;
    }
    if (!strcmp(key, "draft_p_min")) {
        double v = strtod(value, &end);
        if (!*value || *end || !(v >= 0.0 && v <= 1.0))
            return hy_err_set("speculative-config: draft_p_min=%s: must be a number in [0, 1]", value);
        c->draft_p_min = (float)v;
        return 0;
    }
    if (!strcmp(key, "gate")) {
        if (!strcmp(value, "auto") || !strcmp(value, "true") || !strcmp(value, "on")) {
            c->gate = 1;
            return 0;
        }
        if (!strcmp(value, "off") || !strcmp(value, "false")) {
            c->gate = 0;
            return 0;
        }
        return hy_err_set("speculative-config: gate=%s: must be auto or off", value);
    }
    if (!strcmp(key, "mtp_zero_pos0"))
        return parse_bool(key, value, &c->mtp_zero_pos0);
    return hy_err_set("speculative-config: unknown key \"%s\" (known: method, num_speculative_tokens, draft_p_min, "
                      "gate, mtp_zero_pos0)",
                      key);
}

int hy_spec_config_parse_json(struct hy_spec_config *c, const char *json)
{
    json_error_t jerr;
    json_t *root = json_loads(json, 0, &jerr);
    if (!root)
        return hy_err_set("--speculative-config '%s' is not valid JSON: %s (column %d)", json, jerr.text, jerr.column);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = hy_err_set("speculative-config: must be a JSON object, e.g. "
                        "{\"method\": \"mtp\", \"num_speculative_tokens\": 1}");
        goto out;
    }
    if (json_object_get(root, "num_speculative_tokens") && !json_object_get(root, "method")) {
        rc = hy_err_set("speculative-config: \"method\" is required (hyinfer supports \"mtp\")");
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        char buf[64];
        if (json_is_string(v)) {
            rc = hy_spec_config_set(c, key, json_string_value(v));
        } else if (json_is_integer(v)) {
            snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
            rc = hy_spec_config_set(c, key, buf);
        } else if (json_is_real(v)) {
            snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
            rc = hy_spec_config_set(c, key, buf);
        } else if (json_is_boolean(v)) {
            rc = hy_spec_config_set(c, key, json_is_true(v) ? "true" : "false");
        } else if (json_is_null(v)) {
            continue; /* vLLM's "unset" */
        } else {
            rc = hy_err_set("speculative-config: %s: must be a string, number or boolean", key);
        }
        if (rc)
            goto out;
    }
    rc = hy_spec_config_validate(c);
out:
    json_decref(root);
    return rc;
}
