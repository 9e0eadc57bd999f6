/* common.h - pieces shared by the hyinfer subcommands: model/tokenizer loading, prompts, threads. */
#ifndef HY_CLI_COMMON_H
#define HY_CLI_COMMON_H

#include "base/env.h"
#include "model/model.h"
#include "text/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

/* "float32" | "bfloat16" | "auto" (NULL = auto: float32 when the embedding is stored F32, else
 * bfloat16). Returns 0 and *out, or -1 with hy_err_msg(). model_dir is read for auto. */
int hy_cli_parse_dtype(const char *s, const char *model_dir, enum hy_compute_dtype *out);

#define HY_CLI_MAX_THREADS HY_ENV_MAX_THREADS /* the same bound as HYINFER_NUM_THREADS */

/* Applies --threads (*threads > 0) or else HYINFER_NUM_THREADS; 0 and no variable leave OpenMP's
 * default. On return *threads holds the count applied (0 = default). Returns 0, or -1 with
 * hy_err_msg() for a count outside [1, HY_CLI_MAX_THREADS] or a malformed variable. */
int hy_cli_set_threads(int *threads);

/* Turns a text prompt into ids: raw (tokenizer's BOS prepended when it adds one, special token
 * strings matched) or, with chat = 1, rendered as one user turn through the model's chat template
 * (reasoning_effort may be NULL). Returns 0 with malloc'd *ids, or -1 with hy_err_msg(). */
int hy_cli_encode_prompt(const struct hy_tokenizer *tok, const char *text, int chat, const char *reasoning_effort,
                         int32_t **ids, size_t *n);

/* Writes a human-readable byte count ("12.3 MiB") into buf. */
const char *hy_cli_fmt_bytes(double bytes, char *buf, size_t len);

#endif
