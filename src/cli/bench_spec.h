/* bench_spec.h - the speculative-decoding part of `hyinfer bench latency` (cmd_bench_spec.c). */
#ifndef HY_CLI_BENCH_SPEC_H
#define HY_CLI_BENCH_SPEC_H

#include "config/spec_config.h"
#include "model/model.h"

#include <jansson.h>
#include <stdint.h>

/* Measures, per decode batch size in batches[n_batches] (contexts of ctx0 random tokens, `steps` timed
 * steps each): verify steps of 1 .. k+1 tokens per sequence (seconds, ratio to the 1-token step,
 * distinct routed experts per MoE layer), one MTP draft step, the engine's decode tokens/s with sc's
 * drafts vs without (medians of 3 interleaved rounds of 8 * steps tokens per request) with the measured
 * acceptance, and the speed-up at acceptance 0.6 / 0.8 / 0.9 on this model and projected to proj_layers
 * decoder layers (proj_dense of them dense; the per-layer stage times of the verify steps, as bench
 * latency's projection; the MTP step as measured). print = 1 writes the table to
 * stdout. *out receives a new JSON object (caller owns). Returns 0, or -1 with hy_err_msg() (no MTP
 * layer, out of memory, forward error). One process only. */
int hy_bench_spec_run(struct hy_model *m, enum hy_dtype kv_dtype, const struct hy_spec_config *sc,
                      const int32_t *batches, int n_batches, int32_t ctx0, int32_t steps, uint64_t seed,
                      int proj_layers, int proj_dense, int print, json_t **out);

#endif
