/* toolcall.h - Hy3 / Hy4 tool-call markup -> OpenAI tool calls, incrementally.
 *
 * Two dialects of one markup (spec: hy3_tool_calls.md §1.4, hy_chat_formats.md §3). Hy3 writes,
 * after its reasoning and optional text:
 *   <tool_calls>\n<tool_call>NAME<tool_sep>\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n...
 *   </tool_call>\n...</tool_calls>
 * Hy4 (Hy4-preview) has no <tool_sep>: the name is the text before the nearer of <arg_key> and
 * </tool_call>, and calls follow one another with no separator:
 *   <tool_calls><tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>
 *   <tool_call>NAME2</tool_call></tool_calls>
 * Whitespace (newlines included) between tags outside values is tolerated in both dialects, so
 * newline-separated parallel calls all parse, and a zero-argument call ends at its own
 * </tool_call> (never merged with the next call's name). Every tag carries the checkpoint's
 * suffix (":opensource" on Hy3 / Hy4-preview open weights, ":6124c78e" on hosted Hy4, none on
 * Hy3-preview), discovered from the vocabulary (hy_tool_suffix_from_vocab). One parser serves
 * streamed and non-streamed responses: a non-streamed response feeds the whole content once. Feed it
 * content only (after the reasoning split): markup inside the think block is reasoning.
 *
 * Arguments are written as JSON that is final when written: each call's `args` buffer only grows,
 * so a stream sends args.p[sent..len) and the concatenation equals the non-streamed string byte for
 * byte. "{" opens when the call is announced (Hy3: at <tool_sep>; Hy4: at the <arg_key> or
 * </tool_call> that ends the name), each argument is `"key": value` (separators ", " and ": ", UTF-8
 * raw, like Python's json.dumps(ensure_ascii=False)); a value whose schema type is only "string"
 * (or has no schema) streams as it arrives and its closing quote is written at </arg_value>; other
 * values are coerced by the tool's JSON schema at </arg_value> (see hy_tool_coerce_value); "}" is
 * written at </tool_call>. A call without arguments gets "{}". Duplicate keys are written as they
 * come (a JSON reader keeps the last). A Hy3 call whose body after <tool_sep> is a JSON object
 * (`NAME<tool_sep>{"k": 1}</tool_call>`, a variant some fine-tunes emit) is buffered to
 * </tool_call> and, when the body parses as one JSON object, that object is the arguments (as
 * vLLM's hy_v3 parser json.loads the body), re-written as Python's json.dumps writes it.
 *
 * Salvage rules for malformed markup (docs/tool-calling.md), the same for both dialects:
 *  S1 text before <tool_calls> is content, unstripped; text after </tool_calls> is content too.
 *  S2 a <tool_calls> block that ends (</tool_calls>, end of output, or broken markup) before any
 *     call was announced gives its raw text back as content (e.g. "<tool_calls>\n</tool_calls>").
 *  S3 a call is announced when the marker that ends its name arrives: Hy3 <tool_sep>; Hy4
 *     <arg_key> or </tool_call>, whichever comes first. Markup that breaks before that (another
 *     tag inside the name - Hy4: any tool tag but those two, <tool_sep> included; Hy3: any but
 *     <tool_sep> -; an empty or all-space name; text other than whitespace between calls) returns
 *     the raw text since the previous call ended (or since the block start when no call was
 *     announced) as content, and everything after it verbatim: parsing stops.
 *  S4 an announced call whose markup breaks (text other than whitespace between argument pairs, a
 *     value without a key, a tag out of place, a body that is not one JSON object) keeps the argument bytes written so far and is
 *     incomplete; the rest of the output is content verbatim.
 *  S5 output that ends inside a call (max_tokens, EOS) leaves it incomplete with the bytes written
 *     so far: no closing quote or brace is invented. A Hy4 name cut before <arg_key> or
 *     </tool_call> was never announced: S3 gives the raw text back.
 * A call counts as complete only when </tool_call> closed it (n_complete).
 * Calls to functions not in `tools` are kept (as vLLM does); their arguments stay strings.
 * Where vLLM's strict hy_v4 extractor returns the whole raw output for a malformed block, this
 * parser keeps what S1-S5 keep (complete calls before the break stay calls).
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
#define HY_TM_SUFFIX_MAX 24 /* a suffix is shorter than this (bytes, colon included) */

/* The tool-call dialect: where a call's name ends (see the file comment). */
enum hy_tool_dialect {
    HY_TOOL_DIALECT_HY3 = 0, /* NAME<tool_sep> */
    HY_TOOL_DIALECT_HY4 = 1  /* NAME<arg_key> or NAME</tool_call>, no <tool_sep> */
};

/* Hy4 turn tokens ("<｜hy_start…｜>" with U+FF5C bars), resolved from the vocabulary. */
enum hy_turn_token { HY_TT_START, HY_TT_MIDDLE, HY_TT_END, HY_TT_REASONING_MODE, HY_TT_COUNT };

/* The marker spellings of one checkpoint and their token ids. */
struct hy_tool_markers {
    char suffix[HY_TM_MAX_LEN];            /* ":opensource", ":6124c78e" or "" */
    char text[HY_TM_COUNT][HY_TM_MAX_LEN]; /* e.g. "<tool_calls:opensource>" */
    size_t len[HY_TM_COUNT];
    int32_t id[HY_TM_COUNT]; /* -1: not a single token in the vocabulary */
    int dialect;             /* enum hy_tool_dialect */
    /* Hy4 turn tokens as the vocabulary spells them ("" and -1 when absent; only filled by
     * hy_tool_markers_from_vocab): "<｜hy_start" + SUF + "｜>", else the ":opensource" spelling,
     * else the bare one. */
    char turn_text[HY_TT_COUNT][HY_TM_MAX_LEN];
    int32_t turn_id[HY_TT_COUNT];
};

/* Fills *m from a suffix for the Hy3 dialect (tests; ids = -1, no turn tokens). suffix: "" or e.g.
 * ":opensource" (< HY_TM_SUFFIX_MAX bytes; longer ones are cut). */
void hy_tool_markers_init(struct hy_tool_markers *m, const char *suffix);

/* The same for a given dialect (enum hy_tool_dialect; other values mean Hy3). */
void hy_tool_markers_init_dialect(struct hy_tool_markers *m, const char *suffix, int dialect);

/* Forces the dialect (the --tool-call-parser hy_v3|hy_v4 flag); spellings and ids are kept. */
void hy_tool_markers_set_dialect(struct hy_tool_markers *m, int dialect);

/* 1 if s[0..len) fully matches <(think|tool_calls|tool_call|arg_key|arg_value)(:[^\s>]+)?>
 * (spec hy_chat_formats.md §2; \s = ASCII whitespace and 0x1c-0x1f), with *suf_off / *suf_len
 * set to the suffix (colon included; length 0 for a bare tag); else 0. */
int hy_tool_tag_match(const char *s, size_t len, size_t *suf_off, size_t *suf_len);

/* The tag suffix of tok's vocabulary, by the spec's rule: every added token that fully matches
 * the pattern of hy_tool_tag_match is collected (when no added token matches, every ordinary
 * token's bytes are scanned instead); all matches must agree. Writes the suffix (colon included,
 * or "" when nothing matches) to suf[cap]. Returns 1 when a tag was found, 0 when none (suf = ""),
 * or -1 with hy_err_msg() naming two disagreeing spellings, or a suffix that does not fit cap or
 * HY_TM_SUFFIX_MAX (suf = ""). */
int hy_tool_suffix_from_vocab(const struct hy_tokenizer *tok, char *suf, size_t cap);

/* The dialect of tok's vocabulary: HY_TOOL_DIALECT_HY4 when it has "<｜hy_middle" + suffix + "｜>",
 * "<｜hy_middle:opensource｜>" or "<｜hy_middle｜>" (U+FF5C bars), else HY_TOOL_DIALECT_HY3. */
int hy_tool_dialect_from_vocab(const struct hy_tokenizer *tok, const char *suffix);

/* Fills *m from tok: the suffix (hy_tool_suffix_from_vocab), the dialect
 * (hy_tool_dialect_from_vocab), every marker's id and the Hy4 turn tokens. Returns 0; -1 with
 * hy_err_msg() when the vocabulary has no "<tool_calls" + SUF + ">" token (m is still filled: the
 * think markers carry the detected suffix, absent ids are -1; callers return tool calls as text);
 * -2 with hy_err_msg() when the vocabulary's tags disagree on the suffix (m filled as for "",
 * the ids looked up). */
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
