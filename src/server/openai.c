/* openai.c - OpenAI request parsing / validation and error bodies. */
#include "server/openai.h"

#include "base/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hy_oai_error_set(struct hy_oai_error *e, int status, const char *param, const char *fmt, ...)
{
    e->status = status;
    switch (status) {
    case 400:
        e->type = "BadRequestError";
        break;
    case 401:
        e->type = "AuthenticationError";
        break;
    case 404:
        e->type = "NotFoundError";
        break;
    case 413:
        e->type = "BadRequestError";
        break;
    case 503:
        e->type = "ServiceUnavailableError";
        break;
    default:
        e->type = "InternalServerError";
        break;
    }
    snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    return -1;
}

json_t *hy_oai_json_string_lossy(const char *s, size_t len)
{
    json_t *j = json_stringn(s, len);
    if (j)
        return j;
    /* invalid UTF-8: replace bad bytes with U+FFFD */
    char *buf = malloc(len * 3 + 1);
    if (!buf)
        return NULL;
    size_t o = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        unsigned c = u[i];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = n > 0 && i + n <= len;
        for (size_t k = 1; ok && k < n; k++)
            ok = (u[i + k] & 0xC0) == 0x80;
        if (ok && n > 1) {
            /* reject overlongs / surrogates / > U+10FFFF the way jansson does */
            char tmp[5] = {0};
            memcpy(tmp, s + i, n);
            json_t *t = json_stringn(tmp, n);
            ok = t != NULL;
            json_decref(t);
        }
        if (ok && c != 0) {
            memcpy(buf + o, s + i, n);
            o += n;
            i += n;
        } else {
            memcpy(buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += 1;
        }
    }
    j = json_stringn(buf, o);
    free(buf);
    return j;
}

char *hy_oai_error_json(const struct hy_oai_error *e)
{
    json_t *err = json_pack("{s:o, s:s, s:o, s:i}", "message", hy_oai_json_string_lossy(e->message, strlen(e->message)),
                            "type", e->type ? e->type : "InternalServerError", "param",
                            e->param[0] ? json_string(e->param) : json_null(), "code", e->status);
    if (!err)
        return NULL;
    json_t *root = json_pack("{s:o}", "error", err);
    if (!root)
        return NULL;
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

/* ---- typed field getters: 0 absent/null, 1 present, -1 bad type/range (error set) ---- */

static int get_number(json_t *root, const char *key, double *out, struct hy_oai_error *e)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return hy_oai_error_set(e, 400, key, "'%s' must be a number", key);
    *out = json_number_value(v);
    if (!isfinite(*out))
        return hy_oai_error_set(e, 400, key, "'%s' must be a finite number", key);
    return 1;
}

static int get_int(json_t *root, const char *key, long long *out, struct hy_oai_error *e)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return 0;
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 1;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9e15) {
            *out = (long long)d;
            return 1;
        }
    }
    return hy_oai_error_set(e, 400, key, "'%s' must be an integer", key);
}

static int get_bool(json_t *root, const char *key, int *out, struct hy_oai_error *e)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return hy_oai_error_set(e, 400, key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 1;
}

static int read_ids(json_t *arr, const char *what, int32_t vocab, int32_t **ids, size_t *n, struct hy_oai_error *e)
{
    size_t cnt = json_array_size(arr);
    *ids = malloc((cnt ? cnt : 1) * sizeof(int32_t));
    if (!*ids)
        return hy_oai_error_set(e, 500, NULL, "out of memory");
    *n = 0;
    for (size_t i = 0; i < cnt; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v))
            return hy_oai_error_set(e, 400, what, "'%s' must be a list of integers (token ids)", what);
        json_int_t id = json_integer_value(v);
        if (id < 0 || id >= vocab)
            return hy_oai_error_set(e, 400, what, "Token id %lld in '%s' is out of vocabulary (vocabulary size %d)",
                                    (long long)id, what, (int)vocab);
        (*ids)[(*n)++] = (int32_t)id;
    }
    return 0;
}

static int parse_common(struct hy_oai_request *r, const struct hy_oai_limits *lim, struct hy_oai_error *e)
{
    json_t *root = r->root;
    double d;
    long long ll;
    int b, g;
    struct hy_sampling_params *sp = &r->sp;

    json_t *model = json_object_get(root, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model))
            return hy_oai_error_set(e, 400, "model", "'model' must be a string");
        r->model = json_string_value(model);
    }

    /* max_tokens / max_completion_tokens */
    r->max_tokens = -1;
    const char *mt_keys[2] = {"max_completion_tokens", "max_tokens"};
    for (int i = 0; i < 2; i++) {
        if ((g = get_int(root, mt_keys[i], &ll, e)) < 0)
            return -1;
        if (g && r->max_tokens < 0) {
            if (ll < 1)
                return hy_oai_error_set(e, 400, mt_keys[i], "'%s' must be at least 1, got %lld", mt_keys[i], ll);
            if (ll > lim->max_model_len)
                return hy_oai_error_set(e, 400, mt_keys[i],
                                        "'%s' is too large: %lld. This model's maximum context length is %d tokens.",
                                        mt_keys[i], ll, (int)lim->max_model_len);
            r->max_tokens = (int32_t)ll;
        }
    }

    if ((g = get_number(root, "temperature", &d, e)) < 0)
        return -1;
    if (g) {
        if (d < 0 || d > 100)
            return hy_oai_error_set(e, 400, "temperature", "'temperature' must be in [0, 100], got %g", d);
        sp->temperature = (float)d;
    }
    if ((g = get_number(root, "top_p", &d, e)) < 0)
        return -1;
    if (g) {
        if (!(d > 0 && d <= 1))
            return hy_oai_error_set(e, 400, "top_p", "'top_p' must be in (0, 1], got %g", d);
        sp->top_p = (float)d;
    }
    if ((g = get_int(root, "top_k", &ll, e)) < 0)
        return -1;
    if (g) {
        if (ll < -1)
            return hy_oai_error_set(e, 400, "top_k", "'top_k' must be -1 (disable) or at least 1, got %lld", ll);
        sp->top_k = ll <= 0 ? 0 : (ll > INT32_MAX ? INT32_MAX : (int32_t)ll);
    }
    if ((g = get_number(root, "min_p", &d, e)) < 0)
        return -1;
    if (g) {
        if (d < 0 || d > 1)
            return hy_oai_error_set(e, 400, "min_p", "'min_p' must be in [0, 1], got %g", d);
        sp->min_p = (float)d;
    }
    const char *pen[2] = {"presence_penalty", "frequency_penalty"};
    float *pdst[2] = {&sp->presence_penalty, &sp->frequency_penalty};
    for (int i = 0; i < 2; i++) {
        if ((g = get_number(root, pen[i], &d, e)) < 0)
            return -1;
        if (g) {
            if (d < -2 || d > 2)
                return hy_oai_error_set(e, 400, pen[i], "'%s' must be in [-2, 2], got %g", pen[i], d);
            *pdst[i] = (float)d;
        }
    }
    if ((g = get_number(root, "repetition_penalty", &d, e)) < 0)
        return -1;
    if (g) {
        if (!(d > 0 && d <= 100))
            return hy_oai_error_set(e, 400, "repetition_penalty", "'repetition_penalty' must be in (0, 100], got %g",
                                    d);
        sp->repetition_penalty = (float)d;
    }
    if ((g = get_int(root, "seed", &ll, e)) < 0)
        return -1;
    if (g) {
        sp->seed = (uint64_t)ll;
        sp->has_seed = 1;
    }
    if ((g = get_bool(root, "ignore_eos", &b, e)) < 0)
        return -1;
    if (g)
        sp->ignore_eos = b;

    /* stop */
    json_t *stop = json_object_get(root, "stop");
    if (stop && !json_is_null(stop)) {
        if (json_is_string(stop)) {
            if (json_string_length(stop))
                r->stop[r->n_stop++] = json_string_value(stop);
        } else if (json_is_array(stop)) {
            if (json_array_size(stop) > HY_OAI_MAX_STOP)
                return hy_oai_error_set(e, 400, "stop", "'stop' may hold at most %d strings", HY_OAI_MAX_STOP);
            size_t i;
            json_t *v;
            json_array_foreach(stop, i, v)
            {
                if (!json_is_string(v))
                    return hy_oai_error_set(e, 400, "stop", "'stop' must be a string or a list of strings");
                if (json_string_length(v))
                    r->stop[r->n_stop++] = json_string_value(v);
            }
        } else {
            return hy_oai_error_set(e, 400, "stop", "'stop' must be a string or a list of strings");
        }
    }
    json_t *sti = json_object_get(root, "stop_token_ids");
    if (sti && !json_is_null(sti)) {
        if (!json_is_array(sti))
            return hy_oai_error_set(e, 400, "stop_token_ids", "'stop_token_ids' must be a list of integers");
        if (read_ids(sti, "stop_token_ids", lim->vocab_size, &r->stop_token_ids, &r->n_stop_token_ids, e))
            return -1;
    }

    r->n = 1;
    if ((g = get_int(root, "n", &ll, e)) < 0)
        return -1;
    if (g) {
        if (ll < 1 || ll > HY_OAI_MAX_N)
            return hy_oai_error_set(e, 400, "n", "'n' must be in [1, %d], got %lld", HY_OAI_MAX_N, ll);
        r->n = (int)ll;
    }

    if ((g = get_bool(root, "stream", &b, e)) < 0)
        return -1;
    r->stream = g ? b : 0;
    json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return hy_oai_error_set(e, 400, "stream_options", "'stream_options' must be an object");
        if (!r->stream)
            return hy_oai_error_set(e, 400, "stream_options", "'stream_options' can only be set when 'stream' is true");
        if ((g = get_bool(so, "include_usage", &b, e)) < 0)
            return hy_oai_error_set(e, 400, "stream_options", "'stream_options.include_usage' must be a boolean");
        r->include_usage = g ? b : 0;
    }

    /* logprobs */
    r->logprobs = -1;
    if (r->kind == HY_OAI_CHAT) {
        int lp = 0;
        if ((g = get_bool(root, "logprobs", &lp, e)) < 0)
            return -1;
        if ((g = get_int(root, "top_logprobs", &ll, e)) < 0)
            return -1;
        if (g) {
            if (ll < 0 || ll > HY_OAI_MAX_TOP_LOGPROBS)
                return hy_oai_error_set(e, 400, "top_logprobs", "'top_logprobs' must be in [0, %d], got %lld",
                                        HY_OAI_MAX_TOP_LOGPROBS, ll);
            if (!lp && ll > 0)
                return hy_oai_error_set(e, 400, "top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
        }
        if (lp)
            r->logprobs = g ? (int)ll : 0;
    } else {
        json_t *lpv = json_object_get(root, "logprobs");
        if (lpv && json_is_boolean(lpv))
            return hy_oai_error_set(e, 400, "logprobs", "'logprobs' must be an integer for completions");
        if ((g = get_int(root, "logprobs", &ll, e)) < 0)
            return -1;
        if (g) {
            if (ll < 0 || ll > HY_OAI_MAX_TOP_LOGPROBS)
                return hy_oai_error_set(e, 400, "logprobs", "'logprobs' must be in [0, %d], got %lld",
                                        HY_OAI_MAX_TOP_LOGPROBS, ll);
            r->logprobs = (int)ll;
        }
        if ((g = get_bool(root, "echo", &b, e)) < 0)
            return -1;
        if (g && b)
            return hy_oai_error_set(e, 400, "echo", "'echo' is not supported");
        json_t *sfx = json_object_get(root, "suffix");
        if (sfx && !json_is_null(sfx))
            return hy_oai_error_set(e, 400, "suffix", "'suffix' is not supported");
    }
    /* Accepted by the OpenAI API but not implemented here: refuse rather than silently ignore. */
    json_t *lb = json_object_get(root, "logit_bias");
    if (lb && !json_is_null(lb) && !(json_is_object(lb) && json_object_size(lb) == 0))
        return hy_oai_error_set(e, 400, "logit_bias", "'logit_bias' is not supported");
    json_t *rf = json_object_get(root, "response_format");
    if (rf && !json_is_null(rf)) {
        const char *t = json_string_value(json_object_get(rf, "type"));
        if (!t || strcmp(t, "text") != 0)
            return hy_oai_error_set(e, 400, "response_format",
                                    "'response_format' other than {\"type\": \"text\"} is not supported");
    }
    json_t *bo = json_object_get(root, "best_of");
    if (bo && !json_is_null(bo) && !(json_is_integer(bo) && json_integer_value(bo) == 1))
        return hy_oai_error_set(e, 400, "best_of", "'best_of' other than 1 is not supported");
    if (r->max_tokens > 0)
        sp->max_new_tokens = r->max_tokens;
    if (hy_sampling_params_validate(sp))
        return hy_oai_error_set(e, 400, NULL, "%s", hy_err_msg());
    return 0;
}

/* tools: a list of {"type": "function", "function": {"name": non-empty string, "description"?:
 * string, "parameters"?: object}}; tool_choice; parallel_tool_calls. */
static int parse_tools(struct hy_oai_request *r, struct hy_oai_error *e)
{
    json_t *tools = json_object_get(r->root, "tools");
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools))
            return hy_oai_error_set(e, 400, "tools", "'tools' must be a list");
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t)
        {
            json_t *ty = json_object_get(t, "type"), *fn = json_object_get(t, "function");
            if (!json_is_object(t) || !json_is_string(ty) || strcmp(json_string_value(ty), "function"))
                return hy_oai_error_set(e, 400, "tools", "tools[%zu]: must be an object with \"type\": \"function\"",
                                        i);
            json_t *name = json_object_get(fn, "name"), *params = json_object_get(fn, "parameters");
            json_t *desc = json_object_get(fn, "description");
            if (!json_is_object(fn) || !json_is_string(name) || !json_string_length(name))
                return hy_oai_error_set(e, 400, "tools",
                                        "tools[%zu].function: must be an object with a non-empty string 'name'", i);
            if (params && !json_is_null(params) && !json_is_object(params))
                return hy_oai_error_set(e, 400, "tools", "tools[%zu].function.parameters: must be an object", i);
            if (desc && !json_is_null(desc) && !json_is_string(desc))
                return hy_oai_error_set(e, 400, "tools", "tools[%zu].function.description: must be a string", i);
        }
        if (json_array_size(tools))
            r->tools = tools;
    }
    r->tool_choice = r->tools ? HY_TOOL_CHOICE_AUTO : HY_TOOL_CHOICE_NONE;
    r->parallel_tool_calls = 1;
    json_t *ptc = json_object_get(r->root, "parallel_tool_calls");
    if (ptc && !json_is_null(ptc)) {
        if (!json_is_boolean(ptc))
            return hy_oai_error_set(e, 400, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
        r->parallel_tool_calls = json_is_true(ptc);
    }
    json_t *tc = json_object_get(r->root, "tool_choice");
    if (!tc || json_is_null(tc))
        return 0;
    if (json_is_string(tc)) {
        const char *v = json_string_value(tc);
        if (!strcmp(v, "none"))
            r->tool_choice = HY_TOOL_CHOICE_NONE;
        else if (!strcmp(v, "auto"))
            r->tool_choice = HY_TOOL_CHOICE_AUTO;
        else if (!strcmp(v, "required"))
            r->tool_choice = HY_TOOL_CHOICE_REQUIRED;
        else
            return hy_oai_error_set(e, 400, "tool_choice",
                                    "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                    "{\"type\": \"function\", \"function\": {\"name\": ...}}, got \"%.64s\"",
                                    v);
    } else {
        json_t *ty = json_object_get(tc, "type"), *name = json_object_get(json_object_get(tc, "function"), "name");
        if (!json_is_object(tc) || !json_is_string(ty) || strcmp(json_string_value(ty), "function") ||
            !json_is_string(name))
            return hy_oai_error_set(e, 400, "tool_choice",
                                    "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                    "{\"type\": \"function\", \"function\": {\"name\": ...}}");
        r->tool_choice = HY_TOOL_CHOICE_NAMED;
        r->tool_choice_name = json_string_value(name);
    }
    if (r->tool_choice != HY_TOOL_CHOICE_NONE && !r->tools)
        return hy_oai_error_set(e, 400, "tool_choice",
                                "'tool_choice' is \"%s\" but the request has no 'tools' (only \"none\" is allowed "
                                "without tools)",
                                r->tool_choice == HY_TOOL_CHOICE_NAMED ? "function" : json_string_value(tc));
    if (r->tool_choice == HY_TOOL_CHOICE_NAMED) {
        size_t i;
        json_t *t;
        json_array_foreach(r->tools, i, t)
        {
            json_t *n = json_object_get(json_object_get(t, "function"), "name");
            if (!strcmp(json_string_value(n), r->tool_choice_name))
                return 0;
        }
        return hy_oai_error_set(e, 400, "tool_choice",
                                "tool_choice names the function '%.128s', which is not in 'tools'",
                                r->tool_choice_name);
    }
    return 0;
}

static int parse_chat(struct hy_oai_request *r, struct hy_oai_error *e)
{
    json_t *msgs = json_object_get(r->root, "messages");
    if (!msgs || json_is_null(msgs))
        return hy_oai_error_set(e, 400, "messages", "'messages' is required");
    if (!json_is_array(msgs))
        return hy_oai_error_set(e, 400, "messages", "'messages' must be a list of message objects");
    if (json_array_size(msgs) == 0)
        return hy_oai_error_set(e, 400, "messages", "'messages' must not be empty");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        if (!json_is_object(m))
            return hy_oai_error_set(e, 400, "messages", "messages[%zu] must be an object", i);
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role))
            return hy_oai_error_set(e, 400, "messages", "messages[%zu].role must be a string", i);
        const char *rs = json_string_value(role);
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "tool") &&
            strcmp(rs, "developer"))
            return hy_oai_error_set(e, 400, "messages",
                                    "messages[%zu].role '%s' is not one of system, developer, "
                                    "user, assistant, tool",
                                    i, rs);
        json_t *c = json_object_get(m, "content");
        if (c && !json_is_null(c) && !json_is_string(c) && !json_is_array(c))
            return hy_oai_error_set(e, 400, "messages", "messages[%zu].content must be a string or a list of parts", i);
        if (json_is_array(c)) {
            size_t k;
            json_t *part;
            json_array_foreach(c, k, part)
            {
                json_t *ty = json_object_get(part, "type");
                if (!json_is_object(part) || !json_is_string(ty) || strcmp(json_string_value(ty), "text") ||
                    !json_is_string(json_object_get(part, "text")))
                    return hy_oai_error_set(e, 400, "messages",
                                            "messages[%zu].content[%zu]: only {\"type\": \"text\", \"text\": ...} "
                                            "parts are supported",
                                            i, k);
            }
        }
    }
    r->messages = msgs;
    if (parse_tools(r, e))
        return -1;
    json_t *kw = json_object_get(r->root, "chat_template_kwargs");
    if (kw && !json_is_null(kw) && !json_is_object(kw))
        return hy_oai_error_set(e, 400, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
    r->template_kwargs = json_is_object(kw) ? json_deep_copy(kw) : json_object();
    if (!r->template_kwargs)
        return hy_oai_error_set(e, 500, NULL, "out of memory");
    /* The OpenAI field reaches the template as its reasoning_effort unless chat_template_kwargs sets one
     * (what the template accepts is the template's business: it raises on values it does not know). OpenAI's
     * levels map onto the Hy templates' three: none -> no_think, minimal/low -> low, medium/high/xhigh -> high. */
    json_t *top = json_object_get(r->root, "reasoning_effort");
    if (top && !json_is_null(top) && !json_object_get(r->template_kwargs, "reasoning_effort")) {
        static const char *const map[][2] = {{"none", "no_think"}, {"no_think", "no_think"}, {"minimal", "low"},
                                             {"low", "low"},       {"medium", "high"},       {"high", "high"},
                                             {"xhigh", "high"}};
        const char *v = json_is_string(top) ? json_string_value(top) : NULL, *to = NULL;
        for (size_t i = 0; v && i < sizeof(map) / sizeof(map[0]); i++)
            if (!strcmp(v, map[i][0]))
                to = map[i][1];
        if (!to)
            return hy_oai_error_set(e, 400, "reasoning_effort",
                                    "'reasoning_effort' must be one of none, minimal, low, medium, high, xhigh "
                                    "(or no_think)");
        json_object_set_new(r->template_kwargs, "reasoning_effort", json_string(to));
    }
    json_t *agp = json_object_get(r->root, "add_generation_prompt");
    if (agp && !json_is_null(agp) && !json_is_boolean(agp))
        return hy_oai_error_set(e, 400, "add_generation_prompt", "'add_generation_prompt' must be a boolean");
    if (!json_object_get(r->template_kwargs, "add_generation_prompt"))
        json_object_set_new(r->template_kwargs, "add_generation_prompt",
                            json_boolean(!agp || json_is_null(agp) || json_is_true(agp)));
    return 0;
}

static int parse_completion(struct hy_oai_request *r, const struct hy_oai_limits *lim, struct hy_oai_error *e)
{
    json_t *p = json_object_get(r->root, "prompt");
    if (!p || json_is_null(p))
        return hy_oai_error_set(e, 400, "prompt", "'prompt' is required");
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0); /* a batch of one */
    if (json_is_string(p)) {
        if (json_string_length(p) == 0)
            return hy_oai_error_set(e, 400, "prompt", "'prompt' must not be empty");
        r->prompt_text = json_string_value(p);
        r->prompt_text_len = json_string_length(p);
        return 0;
    }
    if (json_is_array(p)) {
        if (json_array_size(p) == 0)
            return hy_oai_error_set(e, 400, "prompt", "'prompt' must not be empty");
        if (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0)))
            return hy_oai_error_set(e, 400, "prompt", "only one prompt per request is supported");
        return read_ids(p, "prompt", lim->vocab_size, &r->prompt_ids, &r->n_prompt_ids, e);
    }
    return hy_oai_error_set(e, 400, "prompt", "'prompt' must be a string or a list of token ids");
}

int hy_oai_parse(enum hy_oai_kind kind, const char *body, size_t len, const struct hy_oai_limits *lim,
                 struct hy_oai_request *r, struct hy_oai_error *e)
{
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->sp = lim->defaults;
    json_error_t jerr;
    r->root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!r->root) {
        hy_oai_error_set(e, 400, NULL, "Invalid JSON in request body: %s (line %d, column %d)", jerr.text, jerr.line,
                         jerr.column);
        goto fail;
    }
    if (!json_is_object(r->root)) {
        hy_oai_error_set(e, 400, NULL, "The request body must be a JSON object");
        goto fail;
    }
    if (parse_common(r, lim, e))
        goto fail;
    if (kind == HY_OAI_CHAT ? parse_chat(r, e) : parse_completion(r, lim, e))
        goto fail;
    return 0;
fail:
    hy_oai_request_free(r);
    return -1;
}

void hy_oai_request_free(struct hy_oai_request *r)
{
    json_decref(r->root);
    json_decref(r->template_kwargs);
    free(r->prompt_ids);
    free(r->stop_token_ids);
    memset(r, 0, sizeof(*r));
}

int hy_oai_check_context(size_t n_prompt, int32_t max_tokens, int32_t max_model_len, enum hy_oai_kind kind,
                         struct hy_oai_error *e)
{
    const char *what = kind == HY_OAI_CHAT ? "messages" : "prompt";
    if (n_prompt == 0)
        return hy_oai_error_set(e, 400, kind == HY_OAI_CHAT ? "messages" : "prompt", "The %s encode to no tokens",
                                what);
    if (n_prompt >= (size_t)max_model_len)
        return hy_oai_error_set(e, 400, what,
                                "This model's maximum context length is %d tokens. However, you requested %zu tokens "
                                "in the %s. Input length %zu exceeds the model's maximum context length %d. "
                                "Please reduce the length of the %s.",
                                (int)max_model_len, n_prompt, what, n_prompt, (int)max_model_len, what);
    if (max_tokens > 0 && n_prompt + (size_t)max_tokens > (size_t)max_model_len)
        return hy_oai_error_set(e, 400, "max_tokens",
                                "This model's maximum context length is %d tokens. However, you requested %zu tokens "
                                "(%zu in the %s, %d in the completion). Please reduce the length of the %s or "
                                "completion.",
                                (int)max_model_len, n_prompt + (size_t)max_tokens, n_prompt, what, (int)max_tokens,
                                what);
    return 0;
}
