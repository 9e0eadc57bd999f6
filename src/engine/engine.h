/* engine.h - the serving engine: continuous batching over a paged KV cache with prefix caching,
 * chunked prefill and preemption by recompute (docs/architecture.md).
 *
 * Single-threaded: one thread owns an engine and calls hy_engine_step in a loop; other threads
 * talk to it through their own queue (engine/engine_loop.h). Each step: the scheduler plans
 * {request, n_tokens} under one rule (a request's computed tokens catch up with its known
 * tokens, capped by max_num_batched_tokens), the KV manager allocates slots (preempting the
 * newest running request when blocks run out), the runner builds one flat batch (token ids,
 * positions, slot_mapping, block tables), the model runs, the sampler picks tokens for requests
 * whose known tokens are all computed, and stop checks (EOS unless ignore_eos, stop_token_ids,
 * max_tokens, max_model_len) finish requests and free their blocks (kept in the prefix cache).
 * With speculative decoding (cfg.spec) a decode step also verifies the request's MTP drafts: each
 * verified row is sampled with the request's own sampler and RNG (one draw per emitted token, so the
 * output equals decoding without drafts) and drafts are kept while they equal the sample; the stop
 * checks run after every emitted token; then the MTP layer drafts for the next step (engine/spec.h).
 */
#ifndef HY_ENGINE_ENGINE_H
#define HY_ENGINE_ENGINE_H

#include "config/spec_config.h"
#include "engine/spec.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "sched/request.h" /* enum hy_engine_finish */

#include <stddef.h>
#include <stdint.h>

struct hy_engine_config {
    int32_t max_num_seqs;           /* running requests at once (default 8) */
    int32_t max_model_len;          /* prompt + output tokens per request (0: model's max_position_embeddings;
                                        larger than that is an error) */
    int32_t max_num_batched_tokens; /* tokens per step (default 512); prompts longer than this are chunked */
    int32_t block_size;             /* tokens per KV block (default 16) */
    int enable_prefix_caching;      /* default 1 */
    size_t kv_cache_memory_bytes;   /* KV budget; 0 = 50% of MemAvailable (or the gpu_memory_utilization
                                        rule), capped at what max_num_seqs sequences of max_model_len
                                        tokens need; when set it wins over gpu_memory_utilization */
    float gpu_memory_utilization;   /* vLLM's --gpu-memory-utilization F in (0, 1]; 0 = unset. KV budget =
                                        F x total memory (MemTotal, or the cgroup limit when lower) - the
                                        checkpoint's weight bytes; not positive or too small for one
                                        max_model_len sequence is an error naming the numbers */
    int32_t max_waiting_requests;   /* add_request beyond this returns HY_ENGINE_QUEUE_FULL (default 1024) */
    enum hy_dtype kv_cache_dtype;   /* HY_DTYPE_UNKNOWN (default) = auto: the compute dtype; BF16, F32,
                                        or F8_E4M3 (FP8 KV cache, kv_cache.h); the budget counts its bytes */
    struct hy_spec_config spec;     /* MTP speculative decoding (default off; engine/spec.h) */
};

/* Defaults as documented above. */
void hy_engine_config_init(struct hy_engine_config *c);

#define HY_ENGINE_MAX_LOGPROBS 20

struct hy_engine_request {
    const int32_t *prompt_ids; /* [n_prompt], copied */
    size_t n_prompt;
    struct hy_sampling_params params; /* max_new_tokens = max_tokens; seed etc. */
    const int32_t *stop_token_ids;    /* [n_stop_token_ids], copied; may be NULL */
    size_t n_stop_token_ids;
    int32_t logprobs;                   /* -1: none; 0..20: chosen token's logprob + that many top */
    const struct hy_token_rules *rules; /* copied; NULL: none (bans / forced sequences, token_rules.h) */
};

/* One new token (or a finish without a token, token_id = -1, e.g. abort) of one request. */
struct hy_engine_output {
    uint64_t request_id;
    int32_t token_id;
    float logprob; /* log p(token) under the raw model */
    int32_t n_top;
    int32_t top_ids[HY_ENGINE_MAX_LOGPROBS];
    float top_logprobs[HY_ENGINE_MAX_LOGPROBS];
    enum hy_engine_finish finish;
};

struct hy_engine_stats {
    int32_t num_running, num_waiting;
    int32_t num_blocks_total, num_blocks_used; /* used = referenced by a running request */
    double kv_usage;                           /* num_blocks_used / num_blocks_total */
    uint64_t prefix_queries, prefix_hits;      /* tokens looked up / found in the prefix cache */
    uint64_t num_preemptions;
    uint64_t num_steps;
    int32_t max_batch_seqs;                    /* most sequences in one step so far */
    uint64_t prompt_chunks;                    /* prefill chunks scheduled (> prompts when chunking) */
    uint64_t prompt_tokens, generation_tokens; /* counters */
    int32_t num_blocks_cached;                 /* blocks findable in the prefix cache */
    uint64_t prefix_evictions;                 /* cached blocks reused for other content */
    int32_t num_speculative_tokens;            /* 0: speculative decoding off */
    struct hy_spec_stats spec;                 /* its counters (zero when off) */
};

/* Results of adding work: OK; ERROR (invalid input, out of memory: the message says which);
 * QUEUE_FULL (max_waiting_requests waiting); SHUTTING_DOWN (the engine thread is stopping and takes
 * no new work, engine_loop.h). Callers branch on these codes, never on message text. */
enum { HY_ENGINE_OK = 0, HY_ENGINE_ERROR = -1, HY_ENGINE_QUEUE_FULL = -2, HY_ENGINE_SHUTTING_DOWN = -3 };

/* Creates an engine over a loaded model (not owned). Sizes the KV cache from
 * kv_cache_memory_bytes and the bytes per token of kv_cache_dtype (logged at info level: dtype,
 * blocks, bytes per token); fails with a clear message when max_model_len cannot fit one sequence.
 * Returns NULL with hy_err_msg() on error. */
struct hy_engine *hy_engine_create(struct hy_model *m, const struct hy_engine_config *cfg);
void hy_engine_free(struct hy_engine *e);

/* Queues a request. Returns HY_ENGINE_OK and *id, HY_ENGINE_QUEUE_FULL when max_waiting_requests
 * are waiting, or HY_ENGINE_ERROR with hy_err_msg() for invalid input (empty prompt, token id out
 * of vocabulary, "Input length N exceeds the model's maximum context length M" when N > M,
 * max_tokens < 1, logprobs outside [-1, 20], stop token id out of vocabulary, bad sampling params
 * as hy_sampling_params_validate words them). As in vLLM a request finishes with LENGTH once
 * prompt + output reaches max_model_len (so an N = M prompt gets one token). Ids start at 1. */
int hy_engine_add_request(struct hy_engine *e, const struct hy_engine_request *r, uint64_t *id);

/* Aborts a request (waiting or running): frees its blocks; the next step reports it finished
 * with HY_ENGINE_FINISHED_ABORT. Returns 0, or -1 if the id is unknown or already finished. */
int hy_engine_abort_request(struct hy_engine *e, uint64_t id);

/* 1 if any request is waiting or running. */
int hy_engine_has_work(const struct hy_engine *e);

/* Runs one step. *outs points to an engine-owned array of *n_outs outputs, valid until the next
 * call (also on -1). Returns 0, or -1 with hy_err_msg() (the engine stays usable; the requests of
 * the failed step finish with HY_ENGINE_FINISHED_ABORT in *outs). */
int hy_engine_step(struct hy_engine *e, const struct hy_engine_output **outs, size_t *n_outs);

void hy_engine_get_stats(const struct hy_engine *e, struct hy_engine_stats *st);

#endif
