/* run_config.h - the offline job config: cann-recipes-infer YAML schema (libyaml).
 *
 * Schema as tests/data/hy3/cann_recipes_hy3_example.yaml lays it out. Ascend-only keys are
 * accepted with one warning line naming them; any other unknown key is an error naming it.
 *
 * Layout (every section and key optional except model_config.model_path):
 *   model_config:     model_name, model_path, dtype, with_ckpt, next_n, output_path,
 *                     kv_cache_dtype (hyinfer extension: auto | bf16 | bfloat16 | fp8 | fp8_e4m3 |
 *                     fp32 | float32, as `--kv-cache-dtype`; auto = the compute dtype),
 *                     [Ascend-only] platform_version, exe_mode, enable_profiler,
 *                     enable_cache_compile, enable_static_kernel, force_eplb, enable_weight_nz,
 *                     custom_params: {enable_online_split_weight, enable_multi_streams, enable_sp}
 *   data_config:      dataset, dataset_path, input_truncated_len, apply_chat_template
 *   parallel_config:  world_size, attn_tp_size, dense_tp_size, moe_tp_size, embed_tp_size,
 *                     lmhead_tp_size, o_proj_tp_size, cp_size, shared_tp_size
 *   scheduler_config: max_new_tokens, batch_size, max_prefill_tokens, block_size,
 *                     num_reserved_decode_tokens (no effect), [Ascend-only] mem_fraction_static,
 *                     sampling: {...}   (same keys as the top-level map below)
 *   sampling:         (hyinfer extension) temperature, top_p, top_k, min_p, repetition_penalty, seed
 *
 * Value rules: booleans are true/True/TRUE/false/False/FALSE (unquoted); integers are unquoted
 * decimal; a plain `~` / `null` / empty value leaves the default. Every error message starts with
 * "FILE:LINE: full.key.path" and names the offending value.
 *
 * Path rules: a relative model_path or dataset_path is resolved against the directory of the YAML
 * file when that path exists there (so configs/default.yaml says "../models/hy3-tiny"), else it is
 * kept as given (i.e. relative to the current directory). output_path is always kept as given.
 */
#ifndef HY_CONFIG_RUN_CONFIG_H
#define HY_CONFIG_RUN_CONFIG_H

#include <stdint.h>
#include <stdio.h>

struct hy_run_config {
    /* model_config */
    char *model_name;     /* default "hy3" */
    char *model_path;     /* required; relative paths resolve against the YAML's directory
                                    first, then the current directory */
    char *dtype;          /* "bfloat16" (default) | "float32" */
    char *kv_cache_dtype; /* "auto" (default) | "bf16" | "fp8" | ... (hy_kv_dtype_parse names) */
    int with_ckpt;        /* default 1; 0 = random weights: rejected ("not supported") */
    int next_n;           /* MTP speculative tokens, default 0; 0..16 parse, more than 8 fails the spec check */
    char *output_path;    /* optional: write completions as JSON here (NULL = none) */
    /* data_config */
    char *dataset;               /* "default" | "LongBench" | "InfiniteBench" */
    char *dataset_path;          /* required for LongBench / InfiniteBench; optional override for default */
    int32_t input_truncated_len; /* tokens; 0 = no truncation */
    int apply_chat_template;     /* default 0 (raw prompts) */
    int enable_sp;               /* model_config.custom_params.enable_sp: sequence-parallel o_proj (default 0) */
    /* parallel_config */
    int32_t world_size, attn_tp_size, moe_tp_size, embed_tp_size, lmhead_tp_size, dense_tp_size, o_proj_tp_size,
        cp_size, shared_tp_size; /* all default 1 */
    /* scheduler_config */
    int32_t batch_size;         /* default 1 */
    int32_t max_new_tokens;     /* default 128; >= 1 */
    int32_t max_prefill_tokens; /* 0 = input_truncated_len * batch_size */
    int32_t block_size;         /* default 128 */
    int32_t num_reserved_decode_tokens;
    /* sampling (hyinfer extension, a top-level `sampling:` map or scheduler_config.sampling) */
    float temperature;        /* < 0 = take generation_config.json's default */
    float top_p;              /* < 0 = unset; else (0, 1] */
    int32_t top_k;            /* < 0 = unset; 0 = off */
    int64_t seed;             /* < 0 = unset */
    float min_p;              /* < 0 = unset; else [0, 1] */
    float repetition_penalty; /* <= 0 = unset; else > 0 */
    /* bookkeeping */
    char *config_path;  /* the YAML path as given to hy_run_config_load */
    char *config_dir;   /* its directory ("." when the path has no '/') */
    char *ignored_keys; /* NULL, or "model_config.exe_mode, ..." (the Ascend-only keys
                                    present, in file order; also printed as the warning) */
};

/* Prints every key of the schema as a Markdown table (key, implemented or Ascend-only warning, value
 * rule, note), the counts first; docs/cli.md holds the same text. */
void hy_run_config_print_keys(FILE *f);

/* Fills *cfg with the defaults above (strings strdup'd; model_path NULL). Returns 0, -1 on OOM. */
int hy_run_config_init(struct hy_run_config *cfg);

/* Parses a YAML file. Returns 0 and fills *cfg (free with hy_run_config_free), or -1 with
 * hy_err_msg() naming the file, the key (e.g. "scheduler_config.batch_sise") and the problem;
 * *cfg is then zeroed (freeing it is harmless).
 * Warnings (Ascend-only keys) are printed to stderr as one line (hy_log_warn: "hyinfer: warning:
 * FILE: Ascend-only keys ... ignored: KEY, KEY"), also when a later check fails.
 * Also rejects a parallel_config size that does not divide world_size ("parallel_config.attn_tp_size=3
 * does not divide world_size 4"; the job's rank count is compared at start), cp_size != 1, with_ckpt False,
 * and LongBench / InfiniteBench without dataset_path. */
int hy_run_config_load(const char *yaml_path, struct hy_run_config *cfg);
void hy_run_config_free(struct hy_run_config *cfg);

#endif
