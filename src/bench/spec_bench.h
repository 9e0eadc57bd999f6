/* spec_bench.h - the measurements of `hyinfer bench latency --speculative-config` (the CLI,
 * cli/cmd_bench_spec.c, interleaves them and prints the table): verify-shaped steps and the MTP draft
 * step through the executor, the engine's decode rate with and without drafts, and the projection of
 * step times to a deeper model. */
#ifndef HY_BENCH_SPEC_BENCH_H
#define HY_BENCH_SPEC_BENCH_H

#include "config/spec_config.h"
#include "engine/offline.h"
#include "model/model.h"

#include <stdint.h>

struct hy_bench_verify {
    double step_s[HY_SPEC_MAX_TOKENS + 2];                /* [n] seconds per step of n tokens per sequence */
    double experts[HY_SPEC_MAX_TOKENS + 2];               /* [n] distinct routed experts per MoE layer per step */
    double stage[HY_SPEC_MAX_TOKENS + 2][HY_STAGE_COUNT]; /* [n] per-stage seconds of those steps */
    double mtp_s;                                         /* one MTP draft step (B rows, logits) */
};

/* Verify-shaped steps on a fresh KV cache of kv_dtype: B sequences, prefill ctx0 random tokens, then
 * `steps` timed steps of n tokens per sequence for n = 1 .. n_max (after one warm-up each), positions
 * advancing by n, and one MTP draft step: *r. Returns 0, or -1 with hy_err_msg(). */
int hy_bench_spec_verify(struct hy_model *m, enum hy_dtype kv_dtype, int32_t B, int32_t ctx0, int32_t steps,
                         int32_t n_max, uint64_t seed, struct hy_bench_verify *r);

/* Seconds of an n-token verify step of r scaled to a model of proj_layers decoder layers (proj_dense
 * dense): the measured step plus the missing layers at the measured per-layer stage times (bench
 * latency's projection rule). proj_layers <= the model's layers: the measured step. */
double hy_bench_spec_project(const struct hy_model *m, const struct hy_bench_verify *r, int32_t n, int proj_layers,
                             int proj_dense);

/* B requests of ctx0 random tokens decoding `steps` tokens each (greedy, ignore_eos) through the engine
 * with sc's drafts: *tok_s = decode tokens/s of its pure-decode steps, *ss (may be NULL) the spec
 * counters. Returns 0, or -1 with hy_err_msg(). */
int hy_bench_spec_engine(struct hy_model *m, enum hy_dtype kv_dtype, const struct hy_spec_config *sc, int32_t B,
                         int32_t ctx0, int32_t steps, uint64_t seed, double *tok_s, struct hy_spec_stats *ss);

#endif
