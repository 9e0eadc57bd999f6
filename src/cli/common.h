/* common.h - pieces shared by the hyinfer subcommands: model/tokenizer loading, prompts, threads. */
#ifndef HY_CLI_COMMON_H
#define HY_CLI_COMMON_H

#include "base/env.h"
#include "cli/args.h"
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

/* hy_chat_load for a command that renders chat prompts: no template found is an error naming the
 * model directory and --chat-template. 0 (free with hy_chat_free) or -1 with hy_err_msg(). */
int hy_cli_load_chat(const char *model_dir, const char *chat_template, struct hy_chat *chat);

/* The multi-rank flags every model command takes (vLLM's names; docs/distributed.md). */
struct hy_cli_par {
    int tp, dp, ep;                   /* --tensor-parallel-size, --data-parallel-size, --enable-expert-parallel */
    int dp_local, dp_start, headless; /* accepted; ranks come from mpirun (see the help text) */
    const char *dp_address;
    const char *combine;  /* --tp-combine exact|sum */
    const char *dispatch; /* --all2all-backend auto|allgather_reducescatter|alltoall */
    int given;            /* any of the layout flags was given */
};

/* clang-format off */
#define HY_CLI_PAR_ARGS(p) \
    {"--tensor-parallel-size", "-tp", HY_ARG_INT, &(p).tp, &(p).given, \
     "ranks splitting attention heads, dense MLP, vocabulary (mpirun -np = TP x DP; default: all ranks)"}, \
    {"--data-parallel-size", "-dp", HY_ARG_INT, &(p).dp, &(p).given, \
     "attention data-parallel groups, each with its own sequences and KV cache (default 1)"}, \
    {"--enable-expert-parallel", NULL, HY_ARG_FLAG, &(p).ep, &(p).given, \
     "routed experts spread over all ranks (else each expert is split over all ranks)"}, \
    {"--tp-combine", NULL, HY_ARG_STR, &(p).combine, NULL, \
     "exact (default: gathers; logits bitwise equal to 1 rank) | sum (partials added in rank order)"}, \
    {"--all2all-backend", NULL, HY_ARG_STR, &(p).dispatch, NULL, \
     "MoE exchange: auto (the recipe's rule) | allgather_reducescatter | alltoall"}, \
    {"--data-parallel-size-local", NULL, HY_ARG_INT, &(p).dp_local, NULL, \
     "accepted for vLLM compatibility; ranks per host come from mpirun (--map-by)"}, \
    {"--data-parallel-start-rank", NULL, HY_ARG_INT, &(p).dp_start, NULL, \
     "accepted for vLLM compatibility; ranks come from mpirun"}, \
    {"--data-parallel-address", NULL, HY_ARG_STR, &(p).dp_address, NULL, \
     "accepted for vLLM compatibility; hosts come from mpirun (--host / --hostfile)"}, \
    {"--headless", NULL, HY_ARG_FLAG, &(p).headless, NULL, \
     "accepted for vLLM compatibility; only world rank 0 serves HTTP"}
/* clang-format on */

/* The layout for the job's world size: from the flags of p; with from_yaml = 1 and no layout flag
 * given, *out already holds the YAML's parallel_config and is only checked (and the combine / dispatch
 * flags applied). One rank: everything 1. Returns 0, or -1 with hy_err_msg() naming the flag or key. */
int hy_cli_par_resolve(const struct hy_cli_par *p, int from_yaml, struct hy_parallel_config *out);

/* Loads the model for a command: in one process, hy_model_load_ex. Under mpirun (world > 1): every
 * rank first agrees on the command line and the model's config.json (hy_dist_agree; a mismatch
 * returns -1 naming the flag on every rank), loads its shard (a rank that fails ends the job with
 * MPI_Abort and its reason) and waits for all; world rank 0 then returns 0 with *m, while the other
 * ranks run the leader's steps (hy_executor_worker_run) and exit the process when it is done.
 * Release *m with hy_cli_free_model. */
int hy_cli_load_model(const char *model_dir, struct hy_load_params *lp, const struct hy_parallel_config *par, int argc,
                      char **argv, struct hy_model **m);

/* Ends the job on every rank (under mpirun the workers return from their loop: hy_executor_exit),
 * then frees m. m may be NULL. */
void hy_cli_free_model(struct hy_model *m);

/* hy_cli_load_model with the default load parameters for compute dtype cd and the layout of p. */
int hy_cli_load(const char *model_dir, enum hy_compute_dtype cd, const struct hy_cli_par *p, int argc, char **argv,
                struct hy_model **m);

/* 0 in a one-rank process; else -1 with hy_err_msg() saying `what` does not run under mpirun. */
int hy_cli_single_rank(const char *what);

/* Writes a human-readable byte count ("12.3 MiB") into buf. */
const char *hy_cli_fmt_bytes(double bytes, char *buf, size_t len);

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
    {"--speculative-config.num_speculative_tokens", NULL, HY_ARG_STR, &(s).k, NULL, "drafts per step, 1..8"}, \
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

#endif
