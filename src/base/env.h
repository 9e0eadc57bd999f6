/* env.h - every HYINFER_* environment variable of the product, read and checked in one place.
 *
 * | variable              | values (default first)          | field             | read by                   |
 * |-----------------------|---------------------------------|-------------------|---------------------------|
 * | HYINFER_ISA           | best level, ref, avx2, avx512, amx | isa            | kernels (table choice)    |
 * | HYINFER_MXFP4_ACT     | f32, mxint8                     | mxfp4_act_mxint8  | kernels (W4A8 path)       |
 * | HYINFER_KV_FP8_SCALE  | mse, amax                       | kv_fp8_scale_fit  | KV cache defaults         |
 * | HYINFER_LOAD_FORMAT   | copy, mmap                      | load_format       | model load defaults       |
 * | HYINFER_MOE_GROUPED   | 1, 0                            | moe_grouped       | model load defaults       |
 * | HYINFER_NUM_THREADS   | OpenMP's default, 1..1024       | num_threads       | CLI                       |
 * | HYINFER_ROOT          | unset, a directory              | root              | CLI (bundled data)        |
 * | HYINFER_LOG           | info, error, warn, debug        | log_level         | log                       |
 * | HYINFER_DIST_FAULT    | unset, skip:RANK:N              | dist_fault_rank,  | dist (hang tests: RANK's  |
 * |                       |                                 | dist_fault_nth    | N-th collective skipped)  |
 * | HYINFER_DIST_STEP_TIMEOUT | 600, seconds > 0            | dist_step_timeout | dist watchdog deadline    |
 * The modules take these values as parameters (hy_load_params, the KV cache's scale rule, the kernel
 * table); the defaults they fall back to come from hy_env_params(), a snapshot taken once. */
#ifndef HY_BASE_ENV_H
#define HY_BASE_ENV_H

#define HY_ENV_MAX_THREADS 1024
#define HY_ENV_DIST_STEP_TIMEOUT 600.0 /* HYINFER_DIST_STEP_TIMEOUT's default, seconds */

struct hy_env_params {
    int isa;                  /* HYINFER_ISA: -1 = the best level, else an enum hy_isa (base/cpu.h) */
    int mxfp4_act_mxint8;     /* HYINFER_MXFP4_ACT=mxint8: 1, else 0 */
    int kv_fp8_scale_fit;     /* HYINFER_KV_FP8_SCALE: 1 = least-squares fit (mse), 0 = amax / 448 */
    int load_format;          /* HYINFER_LOAD_FORMAT: 0 = unset, 1 = mmap, 2 = copy */
    int moe_grouped;          /* HYINFER_MOE_GROUPED: 1 = grouped MoE pass allowed, 0 = per-expert only */
    int num_threads;          /* HYINFER_NUM_THREADS: 0 = unset (OpenMP's default) */
    const char *root;         /* HYINFER_ROOT: NULL = unset (points into the environment) */
    int log_level;            /* HYINFER_LOG: enum hy_log_level (base/log.h) */
    int dist_fault_rank;      /* HYINFER_DIST_FAULT=skip:RANK:N: RANK (>= 0), -1 = unset (comm/comm.h) */
    long long dist_fault_nth; /* HYINFER_DIST_FAULT: N (>= 1, 1-based), 0 = unset */
    double dist_step_timeout; /* HYINFER_DIST_STEP_TIMEOUT: a step's deadline in seconds (> 0) */
};

/* Reads the environment now into *p. Every variable is checked; an unset or empty one takes its
 * default, and so does an invalid one, for which -1 is returned with hy_err_msg() naming the first
 * bad variable, its value and the allowed values (the other fields are still filled). 0 when all
 * are valid. */
int hy_env_params_read(struct hy_env_params *p);

/* The process's snapshot: hy_env_params_read once, on first use (thread-safe), never changed after.
 * Invalid values take their defaults there (the CLI refuses them at start with hy_env_params_read's
 * message). Never NULL. */
const struct hy_env_params *hy_env_params(void);

#endif
