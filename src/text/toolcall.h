/* toolcall.h - Hy3 tool-call markup -> OpenAI tool calls, incrementally.
 *
 * The model writes, after its reasoning and optional text (spec: hy3_tool_calls.md §1.4):
 *   <tool_calls>\n<tool_call>NAME<tool_sep>\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n...
 *   </tool_call>\n...</tool_calls>
 * with every tag carrying the checkpoint's suffix (":opensource" on Hy3, none on Hy3-preview),
 * discovered from the vocabulary. One parser serves streamed and non-streamed responses: a
 * non-streamed response feeds the whole content once. Feed it content only (after the reasoning
 * split): markup inside the think block is reasoning.
 *
 * Arguments are written as JSON that is final when written: each call's `args` buffer only grows,
 * so a stream sends args.p[sent..len) and the concatenation equals the non-streamed string byte for
 * byte. "{" opens at <tool_sep>, each argument is `"key": value` (separators ", " and ": ", UTF-8
 * raw, like Python's json.dumps(ensure_ascii=False)); a value whose schema type is only "string"
 * (or has no schema) streams as it arrives and its closing quote is written at </arg_value>; other
 * values are coerced by the tool's JSON schema at </arg_value> (see hy_tool_coerce_value); "}" is
 * written at </tool_call>. A call without arguments gets "{}".
 *
 * Salvage rules for malformed markup (docs/tool-calling.md):
 *  S1 text before <tool_calls> is content, unstripped; text after </tool_calls> is content too.
 *  S2 a <tool_calls> block that ends (</tool_calls>, end of output, or broken markup) before any
 *     call was announced gives its raw text back as content (e.g. "<tool_calls>\n</tool_calls>").
 *  S3 a call is announced when <tool_sep> ends its name; markup that breaks before that (another
 *     tag inside the name, text other than whitespace between calls) returns the raw text since
 *     the previous call ended (or since the block start when no call was announced) as content,
 *     and everything after it verbatim: parsing stops.
 *  S4 an announced call whose markup breaks (text other than whitespace between argument pairs, a
 *     value without a key) keeps the argument bytes written so far and is incomplete; the rest of
 *     the output is content verbatim.
 *  S5 output that ends inside a call (max_tokens, EOS) leaves it incomplete with the bytes written
 *     so far: no closing quote or brace is invented.
 * A call counts as complete only when </tool_call> closed it (n_complete).
 * Calls to functions not in `tools` are kept (as vLLM does); their arguments stay strings.
 */
#ifndef HY_TEXT_TOOLCALL_H
#define HY_TEXT_TOOLCALL_H

#include "base/sbuf.h"
#include "text/tokenizer.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

enum hy_tool_marker {
    HY_TM_CALLS_OPEN,
    HY_TM_CALLS_CLOSE,
    HY_TM_CALL_OPEN,
    HY_TM_CALL_CLOSE,
    HY_TM_SEP,
    HY_TM_KEY_OPEN,
    HY_TM_KEY_CLOSE,
    HY_TM_VALUE_OPEN,
    HY_TM_VALUE_CLOSE,
    HY_TM_THINK_OPEN,
    HY_TM_THINK_CLOSE,
    HY_TM_COUNT
};

#define HY_TM_MAX_LEN 48

/* The marker spellings of one checkpoint and their token ids. */
struct hy_tool_markers {
    char suffix[HY_TM_MAX_LEN];            /* ":opensource" or "" */
    char text[HY_TM_COUNT][HY_TM_MAX_LEN]; /* e.g. "<tool_calls:opensource>" */
    size_t len[HY_TM_COUNT];
    int32_t id[HY_TM_COUNT]; /* -1: not a single token in the vocabulary */
};

/* Fills *m from a suffix (tests; ids = -1). suffix: "" or e.g. ":opensource" (< 24 bytes). */
void hy_tool_markers_init(struct hy_tool_markers *m, const char *suffix);

/* Discovers the suffix from tok's added tokens: the first added token spelled "<tool_calls>" or
 * "<tool_calls:SUFFIX>" decides; then every marker's id is looked up. Returns 0, or -1 with
 * hy_err_msg() when the vocabulary has no <tool_calls…> token (m is then filled for ":opensource",
 * with the ids of those spellings the vocabulary has, e.g. the think markers, and -1 for the rest). */
int hy_tool_markers_from_vocab(const struct hy_tokenizer *tok, struct hy_tool_markers *m);

/* One parsed call. */
struct hy_tool_call {
    char *name;          /* malloc'd, stripped */
    struct hy_sbuf args; /* JSON arguments written so far (only ever appended) */
    int complete;        /* closed by </tool_call> */
};

struct hy_toolcall_parser {
    const struct hy_tool_markers *mk; /* borrowed */
    const json_t *tools;              /* borrowed OpenAI tools array, or NULL */
    int state;
    struct hy_sbuf in;    /* fed, not yet decided */
    struct hy_sbuf raw;   /* raw text of the current block (salvage) */
    size_t call_start;    /* offset in raw of the current <tool_call> */
    int block_calls;      /* calls announced in the current block */
    struct hy_sbuf acc;   /* name / key / buffered value being collected */
    char *key;            /* current argument key (malloc'd) */
    int n_args;           /* arguments written in the current call */
    const json_t *schema; /* parameters.properties of the current call's tool, or NULL */
    int value_streams;    /* current value streams as a JSON string */
    struct hy_tool_call *calls;
    int n_calls, cap_calls;
    int n_complete;
};

/* mk and tools are borrowed and must outlive the parser. */
void hy_toolcall_init(struct hy_toolcall_parser *p, const struct hy_tool_markers *mk, const json_t *tools);

/* Feeds len bytes of content text (UTF-8; a chunk may end inside a character). Decided content
 * text is appended to *content; calls grow in p->calls. Returns 0 or -1 on OOM. */
int hy_toolcall_feed(struct hy_toolcall_parser *p, const char *text, size_t len, struct hy_sbuf *content);

/* End of output: held text is resolved by the salvage rules (S2, S5). 0 or -1 on OOM. */
int hy_toolcall_finish(struct hy_toolcall_parser *p, struct hy_sbuf *content);

void hy_toolcall_free(struct hy_toolcall_parser *p);

/* Appends s[0..len) as the inside of a JSON string (no quotes): '"' and '\\' escaped, \b \f \n
 * \r \t, other bytes < 0x20 as \u00XX, everything else raw (UTF-8 kept, '/' not escaped) - the
 * bytes Python's json.dumps(ensure_ascii=False) writes. 0 or -1 on OOM. */
int hy_json_escape_append(struct hy_sbuf *out, const char *s, size_t len);

/* The schema of argument `key` of function `name` in an OpenAI tools array, or NULL. */
const json_t *hy_tool_arg_schema(const json_t *tools, const char *name, const char *key);

/* Writes value v[0..len) coerced by schema (NULL: string) as JSON to *out, the way vLLM's and
 * SGLang's hy_v3 parsers agree: the allowed types come from `type` (a string or a list), else
 * `anyOf`, else `oneOf` (aliases: str/text/varchar/char/enum -> string, bool/binary -> boolean,
 * int.../uint.../long.../short... -> integer, num.../float/double -> number, list -> array,
 * dict/map -> object); then boolean ("true"/"false", any case) -> integer -> number -> JSON value
 * (when object/array is allowed) -> raw string (when string is allowed) -> any JSON value -> raw
 * string. Strings are written unstripped. 0 or -1 on OOM. */
int hy_tool_coerce_value(const json_t *schema, const char *v, size_t len, struct hy_sbuf *out);

#endif
