/* request.h - one generation request as the scheduler and engine see it: its known tokens
 * (prompt + output so far), how many of them have KV computed, its block table and the chained
 * hashes of its full blocks (vLLM v1 Request). All arrays are sized at creation for the longest
 * the request can get, so a step never allocates.
 */
#ifndef HY_SCHED_REQUEST_H
#define HY_SCHED_REQUEST_H

#include "config/spec_config.h"
#include "sample/token_rules.h"

#include <stddef.h>
#include <stdint.h>

struct hy_sampler;

/* Why a request stopped (the engine sets it; the scheduler frees finished requests). */
enum hy_engine_finish {
    HY_ENGINE_RUNNING = 0,
    HY_ENGINE_FINISHED_STOP,   /* EOS or a stop token id */
    HY_ENGINE_FINISHED_LENGTH, /* max_tokens or max_model_len */
    HY_ENGINE_FINISHED_ABORT,  /* hy_engine_abort_request (engine/engine.h) */
};

enum hy_request_status {
    HY_REQ_WAITING = 0,
    HY_REQ_RUNNING,
    HY_REQ_FINISHED,
};

struct hy_request {
    uint64_t id;
    enum hy_request_status status;
    int32_t *tokens; /* [cap] prompt then output ids */
    int32_t n_prompt;
    int32_t n_tokens;   /* known tokens: n_prompt + outputs */
    int32_t cap;        /* most tokens this request can have */
    int32_t n_computed; /* leading tokens whose KV is in the cache */
    int32_t *blocks;    /* [blocks_cap] block table (append-only while running) */
    int32_t n_blocks;
    int32_t blocks_cap;
    uint64_t *hashes; /* [blocks_cap] chained hashes of full blocks, computed lazily */
    int32_t n_hashes;
    int32_t n_cached_blocks;            /* leading blocks found in or offered to the prefix cache */
    int32_t canon_prev;                 /* cached block holding block n_cached_blocks-1's content (-1 none,
                                  -2: the chain broke, register no more) */
    uint32_t canon_gen;                 /* its generation when seen */
    int32_t plan_idx;                   /* index in the current step's plan, -1 if not scheduled */
    int32_t drafts[HY_SPEC_MAX_TOKENS]; /* MTP drafts for positions n_tokens.. (engine/spec.h), verified by
                                           the next step together with the last known token */
    int32_t n_drafts;                   /* 0 when none; cleared by preemption */
    int mtp_stale;                      /* 1: some computed position lacks its MTP KV (the gate had the MTP
                                           layer off); the request no longer drafts */
    uint32_t n_preemptions;
    /* generation settings and state (engine) */
    struct hy_sampler *sampler; /* survives preemption */
    int32_t max_tokens;
    int ignore_eos;
    int32_t logprobs;  /* -1: none */
    int32_t *stop_ids; /* [n_stop] */
    size_t n_stop;
    struct hy_token_rules *rules;            /* malloc'd copy, or NULL (sample/token_rules.h) */
    struct hy_token_rules_state rules_state; /* survives preemption */
    enum hy_engine_finish finish;
};

/* Allocates a request with the prompt ids[n_prompt] copied and room for cap tokens
 * (cap >= n_prompt) in blocks of block_size. Returns NULL on out of memory (hy_err_msg()). */
struct hy_request *hy_request_create(uint64_t id, const int32_t *ids, int32_t n_prompt, int32_t cap,
                                     int32_t block_size);

/* Frees the request, its arrays and its sampler. NULL is a no-op. */
void hy_request_free(struct hy_request *r);

/* Appends an output token. Returns 0, or -1 when the request is at cap. */
int hy_request_append(struct hy_request *r, int32_t token);

/* Makes sure hashes[0..n_full) are computed (chained hy_block_hash over tokens; n_full *
 * block_size <= n_tokens). */
void hy_request_hash_blocks(struct hy_request *r, int32_t n_full, int32_t block_size);

#endif
