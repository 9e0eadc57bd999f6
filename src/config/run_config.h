/* run_config.h - the offline job config: cann-recipes-infer YAML schema (libyaml).
 *
 * Schema as ../shared/data/hy3/cann_recipes_hy3_example.yaml lays it out. Ascend-only keys are
 * accepted with one warning line naming them; any other unknown key is an error naming it.
 */
#ifndef HY_CONFIG_RUN_CONFIG_H
#define HY_CONFIG_RUN_CONFIG_H

#include <stdint.h>

struct hy_run_config {
    /* model_config */
    char   *model_name;          /* default "hy3" */
    char   *model_path;          /* required; relative paths resolve against the YAML's directory
                                    first, then the current directory */
    char   *dtype;               /* "bfloat16" (default) | "float32" */
    int     with_ckpt;           /* default 1; 0 = random weights: rejected ("not supported") */
    int     next_n;              /* MTP speculative tokens, default 0 */
    char   *output_path;         /* optional: write completions as JSON here */
    /* data_config */
    char   *dataset;             /* "default" | "LongBench" | "InfiniteBench" */
    char   *dataset_path;        /* required for LongBench / InfiniteBench; optional override for default */
    int32_t input_truncated_len; /* tokens; 0 = no truncation */
    int     apply_chat_template; /* default 0 (raw prompts) */
    /* parallel_config */
    int32_t world_size, attn_tp_size, moe_tp_size, embed_tp_size, lmhead_tp_size, dense_tp_size,
            o_proj_tp_size, cp_size, shared_tp_size;   /* all default 1 */
    /* scheduler_config */
    int32_t batch_size;          /* default 1 */
    int32_t max_new_tokens;      /* default 128 */
    int32_t max_prefill_tokens;  /* 0 = input_truncated_len * batch_size */
    int32_t block_size;          /* default 128 */
    int32_t num_reserved_decode_tokens;
    /* sampling (hyinfer extension, under scheduler_config or a top-level `sampling:` map) */
    float   temperature;         /* < 0 = take generation_config.json's default */
    float   top_p;
    int32_t top_k;
    int64_t seed;                /* < 0 = unset */
};

/* Parses a YAML file. Returns 0 and fills *cfg (free with hy_run_config_free), or -1 with
 * hy_err_msg() naming the file, the key (e.g. "scheduler_config.batch_sise") and the problem.
 * Warnings (Ascend-only keys) are printed to stderr as one line. Also rejects world_size or any
 * *_tp_size != 1 with "... not yet supported (multi-rank comes with the distributed issue)". */
int hy_run_config_load(const char *yaml_path, struct hy_run_config *cfg);
void hy_run_config_free(struct hy_run_config *cfg);

#endif
