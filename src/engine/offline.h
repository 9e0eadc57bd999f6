/* offline.h - batched generation for the offline job and `hyinfer generate`.
 *
 * A synchronous wrapper over the serving engine (engine.h): all requests are queued, then the
 * engine steps until they finish: up to batch_size sequences run at once (continuous batching),
 * prompts are prefilled in chunks of at most max_prefill_tokens tokens per step, shared prompt
 * prefixes come from the prefix cache, and a finished sequence's place goes to the next request.
 */
#ifndef HY_ENGINE_OFFLINE_H
#define HY_ENGINE_OFFLINE_H

#include "engine/spec.h"
#include "model/model.h"
#include "sample/sampler.h"

#include <stddef.h>
#include <stdint.h>

enum hy_finish_reason { HY_FINISH_NONE = 0, HY_FINISH_LENGTH, HY_FINISH_EOS };

struct hy_gen_request {
    /* in */
    const int32_t *prompt_ids; /* [n_prompt], not owned */
    size_t n_prompt;
    struct hy_sampling_params params;
    /* out */
    int32_t *out_ids; /* malloc'd [n_out]; caller frees */
    size_t n_out;
    enum hy_finish_reason finish;
    double t_first_token; /* seconds since the job started (TTFT) */
    double t_done;
};

struct hy_gen_opts {
    int32_t batch_size;         /* max concurrent sequences (>= 1) */
    int32_t max_prefill_tokens; /* per-step prompt token budget (>= 1) */
    int32_t block_size;         /* KV cache block size in tokens */
    int32_t max_model_len;      /* prompt + output cap (0 = model max_position_embeddings) */
    /* called for every generated token (may be NULL) */
    void (*on_token)(void *ud, size_t request_index, int32_t token_id);
    void (*on_finish)(void *ud, size_t request_index);
    void *ud;
    enum hy_dtype kv_cache_dtype;      /* HY_DTYPE_UNKNOWN (0, also when left out of an initializer) = auto;
                                     BF16, F32 or F8_E4M3 (engine.h) */
    const struct hy_spec_config *spec; /* MTP speculative decoding, NULL (default) = off */
};

struct hy_gen_stats {
    double prefill_seconds; /* wall time of steps that carried prompt tokens */
    int64_t prefill_tokens;
    double decode_seconds; /* wall time of pure decode steps */
    int64_t decode_tokens; /* tokens produced by decode steps */
    int64_t steps;
    int32_t max_batch_seen;         /* most sequences in one step */
    int32_t num_speculative_tokens; /* 0: speculative decoding was off */
    struct hy_spec_stats spec;      /* its counters */
};

/* Generates for every request. Requests whose prompt plus max_new_tokens exceed max_model_len
 * are rejected up front (-1 with hy_err_msg() naming the request index and the lengths).
 * Returns 0, or -1 on error (invalid sampling params, out of memory, forward error). */
int hy_generate(struct hy_model *m, struct hy_gen_request *reqs, size_t n_reqs, const struct hy_gen_opts *opts,
                struct hy_gen_stats *stats);

#endif
