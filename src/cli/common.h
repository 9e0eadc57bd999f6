/* common.h - pieces shared by the hyinfer subcommands: model/tokenizer loading, prompts, threads. */
#ifndef HY_CLI_COMMON_H
#define HY_CLI_COMMON_H

#include "base/env.h"
#include "cli/args.h"
#include "cli/par.h"
#include "config/parallel.h"
#include "config/spec_config.h"
#include "model/model.h"
#include "text/chat.h"
#include "text/tokenizer.h"

#include <jansson.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* "float32" | "bfloat16" | "auto" (NULL = auto: float32 when the embedding is stored F32, else
 * bfloat16). Returns 0 and *out, or -1 with hy_err_msg(). model_dir is read for auto. */
int hy_cli_parse_dtype(const char *s, const char *model_dir, enum hy_compute_dtype *out);

/* vLLM's --quantization METHOD (NULL: nothing to check): "ascend", "fp8" or "compressed-tensors" must be what
 * model_dir holds (ascend: quant_model_description.json; the others: config.json's quant_method); hyinfer
 * detects the method from the files, so the flag only confirms it. Returns 0, or -1 with hy_err_msg(). */
int hy_cli_check_quantization(const char *q, const char *model_dir);

#define HY_CLI_MAX_THREADS HY_ENV_MAX_THREADS /* the same bound as HYINFER_NUM_THREADS */

/* Applies --threads (*threads > 0) or else HYINFER_NUM_THREADS; 0 and no variable leave OpenMP's
 * default. On return *threads holds the count applied (0 = default). Returns 0, or -1 with
 * hy_err_msg() for a count outside [1, HY_CLI_MAX_THREADS] or a malformed variable. */
int hy_cli_set_threads(int *threads);

/* Turns a text prompt into ids: raw (chat NULL: the tokenizer's BOS prepended when it adds one,
 * special token strings matched) or rendered as one user turn through the chat template `chat`
 * (add_generation_prompt true; reasoning_effort and tools - an OpenAI tools list, cli/tools_file.h -
 * may be NULL: the template's defaults). *start_in_reasoning (may be NULL) = 1 when the rendered
 * prompt ends inside an open think block (the output starts as reasoning). Returns 0 with malloc'd
 * *ids, or -1 with hy_err_msg(). */
int hy_cli_encode_prompt(const struct hy_tokenizer *tok, const struct hy_chat *chat, const char *text,
                         const char *reasoning_effort, const json_t *tools, int32_t **ids, size_t *n,
                         int *start_in_reasoning);

/* --reasoning-effort (NULL: not given): one of no_think, low, high, and only with --chat (chat 1).
 * Returns 0, or -1 with hy_err_msg() as a sentence naming the value and the choices. */
int hy_cli_check_reasoning_effort(const char *effort, int chat);

/* hy_chat_load for a command that renders chat prompts: no template found is an error naming the
 * model directory and --chat-template. 0 (free with hy_chat_free) or -1 with hy_err_msg(). */
int hy_cli_load_chat(const char *model_dir, const char *chat_template, struct hy_chat *chat);

/* Writes a human-readable byte count ("12.3 MiB") into buf. */
const char *hy_cli_fmt_bytes(double bytes, char *buf, size_t len);

#define HY_CLI_STR_(x) #x
#define HY_CLI_STR(x) HY_CLI_STR_(x)

/* --speculative-config in vLLM's JSON and dotted forms (serve, generate, bench latency). */
struct hy_cli_spec {
    const char *json;   /* --speculative-config '{"method":"mtp","num_speculative_tokens":k}' */
    const char *method; /* --speculative-config.method */
    const char *k;      /* --speculative-config.num_speculative_tokens */
    const char *p_min;  /* --speculative-config.draft_p_min */
    const char *gate;   /* --speculative-config.gate */
    const char *zero0;  /* --speculative-config.mtp_zero_pos0 */
};

/* clang-format off */
#define HY_CLI_SPEC_ARGS(s) \
    {"--speculative-config", NULL, HY_ARG_STR, &(s).json, NULL, \
     "MTP speculative decoding, vLLM's JSON: '{\"method\":\"mtp\",\"num_speculative_tokens\":1}' (also " \
     "draft_p_min 0..1, gate auto|off, mtp_zero_pos0)"}, \
    {"--speculative-config.method", NULL, HY_ARG_STR, &(s).method, NULL, "mtp (dotted form of the JSON keys)"}, \
    {"--speculative-config.num_speculative_tokens", NULL, HY_ARG_STR, &(s).k, NULL, "drafts per step, 0 (off) .. " HY_CLI_STR(HY_SPEC_MAX_TOKENS)}, \
    {"--speculative-config.draft_p_min", NULL, HY_ARG_STR, &(s).p_min, NULL, \
     "draft only while the MTP's top probability >= this (default 0.6)"}, \
    {"--speculative-config.gate", NULL, HY_ARG_STR, &(s).gate, NULL, \
     "auto (default: plain decode while drafting measures slower) | off"}, \
    {"--speculative-config.mtp_zero_pos0", NULL, HY_ARG_STR, &(s).zero0, NULL, \
     "true: zero the MTP embedding at position 0 (vLLM); default false"}
/* clang-format on */

/* Applies the spec flags over *out (filled by hy_spec_config_init or a YAML job): the JSON first, then
 * the dotted keys. Returns 0, or -1 with hy_err_msg() naming the flag. */
int hy_cli_spec_resolve(const struct hy_cli_spec *s, struct hy_spec_config *out);

struct hy_spec_stats;
/* Writes one line "<prefix>spec decode: k K, drafts N, draft tokens D, accepted A (R%), mean acceptance
 * length L, per-position acceptance [a0, a1, ...], gate ..." to f (nothing when k is 0). */
void hy_cli_print_spec(FILE *f, const char *prefix, int32_t k, const struct hy_spec_stats *st);

/* vLLM's `vllm serve` flags (arg_utils.py + cli_args.py of its v0.11 line), each implemented (by the commands that list
 * it), a no-op with a notice, or refused with its reason: the table serve, run and generate pass to
 * hy_args_parse_compat. Returns it and sets *n. */
const struct hy_arg_compat *hy_cli_vllm_flags(int *n);

/* --compilation-config / --additional-config (flag names which): parses json (NULL: nothing to do)
 * with jansson; every known key prints one notice naming what it maps to on a CPU, unknown keys one
 * warning line naming them. Returns 0, or -1 with hy_err_msg() for malformed JSON or a non-object
 * (--compilation-config also takes a bare level, e.g. 3, as vLLM's -O3). */
int hy_cli_check_json_config(const char *flag, const char *json);

/* Prints the flag table and the two JSON key tables as Markdown (docs/cli.md holds the same text),
 * with the counts implemented / no-op / refused first. */
void hy_cli_print_vllm_table(FILE *f);

#endif
