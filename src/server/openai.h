/* openai.h - OpenAI API request parsing and validation, error bodies (pure; no engine, no HTTP).
 *
 * Parses a /v1/chat/completions or /v1/completions JSON body into struct hy_oai_request, checking
 * every known field's type and range the way vLLM's OpenAI server does (unknown fields are
 * ignored). Failures fill struct hy_oai_error with the HTTP status (400 for bad input), a
 * message naming the parameter, and the OpenAI error type.
 */
#ifndef HY_SERVER_OPENAI_H
#define HY_SERVER_OPENAI_H

#include "sample/sampler.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define HY_OAI_MAX_N 16
#define HY_OAI_MAX_STOP 16
#define HY_OAI_MAX_TOP_LOGPROBS 20

struct hy_oai_error {
    int status;       /* HTTP status: 400, 401, 404, 413, 503, 500 */
    const char *type; /* "invalid_request_error", ... (static) */
    char param[64];   /* offending parameter or "" */
    char message[1024];
};

/* Fills *e and returns -1 (printf-style message). */
int hy_oai_error_set(struct hy_oai_error *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The error response body {"error": {"message", "type", "param", "code"}} (code = the status)
 * as a malloc'd string, or NULL on OOM. */
char *hy_oai_error_json(const struct hy_oai_error *e);

enum hy_oai_kind { HY_OAI_CHAT = 0, HY_OAI_COMPLETION = 1 };

/* OpenAI tool_choice: "none", "auto", "required", or a named function. */
enum hy_oai_tool_choice { HY_TOOL_CHOICE_NONE = 0, HY_TOOL_CHOICE_AUTO, HY_TOOL_CHOICE_REQUIRED, HY_TOOL_CHOICE_NAMED };

/* Limits the parser checks against. */
struct hy_oai_limits {
    int32_t max_model_len;              /* max_tokens must be <= this */
    int32_t vocab_size;                 /* token ids (prompt, stop_token_ids) must be below */
    struct hy_sampling_params defaults; /* server defaults (generation_config.json) */
};

struct hy_oai_request {
    enum hy_oai_kind kind;
    json_t *root;      /* the parsed body (owned); strings below point into it */
    const char *model; /* NULL when absent */
    /* chat */
    json_t *messages;                    /* borrowed from root */
    json_t *tools;                       /* borrowed or NULL (NULL also when the list is empty) */
    enum hy_oai_tool_choice tool_choice; /* default: auto with tools, none without */
    const char *tool_choice_name;        /* HY_TOOL_CHOICE_NAMED: the function (in tools) */
    int parallel_tool_calls;             /* default 1 */
    json_t *template_kwargs;             /* owned: chat_template_kwargs + add_generation_prompt */
    /* completions: exactly one of prompt_text / prompt_ids */
    const char *prompt_text;
    size_t prompt_text_len;
    int32_t *prompt_ids; /* malloc'd [n_prompt_ids] */
    size_t n_prompt_ids;
    /* common */
    struct hy_sampling_params sp; /* max_new_tokens = max_tokens (when given) */
    int32_t max_tokens;           /* -1 when not given (then max_model_len - prompt) */
    const char *stop[HY_OAI_MAX_STOP];
    size_t n_stop;
    int32_t *stop_token_ids; /* malloc'd */
    size_t n_stop_token_ids;
    int n;        /* choices */
    int logprobs; /* -1 none, else top logprobs per token (0..20) */
    int stream;
    int include_usage;
};

/* Parses len bytes of JSON. Returns 0 (free with hy_oai_request_free) or -1 with *e filled
 * (status 400) and *r freed. */
int hy_oai_parse(enum hy_oai_kind kind, const char *body, size_t len, const struct hy_oai_limits *lim,
                 struct hy_oai_request *r, struct hy_oai_error *e);

void hy_oai_request_free(struct hy_oai_request *r);

/* The context check after tokenization: n_prompt > 0 and n_prompt + max_tokens <= max_model_len
 * (max_tokens < 0: not given, needs one free position). Messages follow vLLM's wording
 * ("This model's maximum context length is M tokens. However, you requested N tokens ..." and
 * "Input length N exceeds the model's maximum context length M"). Returns 0 or -1 with *e. */
int hy_oai_check_context(size_t n_prompt, int32_t max_tokens, int32_t max_model_len, enum hy_oai_kind kind,
                         struct hy_oai_error *e);

/* Writes a copy of s[0..len) into a jansson string, replacing invalid UTF-8 with U+FFFD.
 * Returns a new reference or NULL on OOM. */
json_t *hy_oai_json_string_lossy(const char *s, size_t len);

#endif
