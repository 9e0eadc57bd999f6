/* scheduler.h - plans each step under one rule: every running request's computed tokens catch
 * up with its known tokens, capped by a per-step token budget (vLLM v1 Scheduler; DESIGN.md §2).
 *
 * Prefill, chunked prefill, prefix-cache hits, decode and recompute after preemption all fall
 * out of that rule. Order within a step: running requests with one token to go (decode) first,
 * then the other running requests (prompt chunks), then waiting requests in FIFO order while
 * fewer than max_num_seqs run and budget remains. On admission the longest cached prefix of
 * full blocks is reused (the last known token is always recomputed, so there are logits). When
 * blocks run out the newest running request is preempted: its blocks are freed, its computed
 * count reset to 0 and it goes back to the front of the waiting queue with its output tokens,
 * which are recomputed with the prompt. The scheduler moves block ids only; it never sees KV data.
 * Speculative decoding: a request's drafts count as known tokens (a decode step schedules the last
 * token plus its drafts; drafts that do not fit the token budget are dropped), blocks are reserved
 * for num_lookahead_tokens positions beyond the scheduled ones (the next drafts' MTP KV), and the
 * engine reports rejected drafts (hy_scheduler_reject) so only accepted rows count as computed.
 */
#ifndef HY_SCHED_SCHEDULER_H
#define HY_SCHED_SCHEDULER_H

#include "cache/block_pool.h"
#include "sched/request.h"

#include <stdint.h>

struct hy_sched_config {
    int32_t max_num_seqs;           /* >= 1 */
    int32_t max_num_batched_tokens; /* >= 1 */
    int enable_prefix_caching;
    int32_t max_waiting;          /* room for new waiting requests (preempted ones come on top) */
    int32_t dp_groups;            /* > 1: a new request's first block goes to the attention-DP group (first block id
                                        mod dp_groups) with the fewest running requests (multi-rank jobs) */
    int32_t num_lookahead_tokens; /* speculative decoding: slots reserved beyond the scheduled tokens (0: off) */
    int drop_last_hit_block;      /* 1: a prefix-cache hit gives back its last block, which is recomputed (its
                                     last position's MTP KV depends on the token after the block) */
};

/* One scheduled request: compute tokens[start, start + n_tokens) of req. */
struct hy_sched_entry {
    struct hy_request *req;
    int32_t start;
    int32_t n_tokens;
    int wants_logits;   /* start + n_tokens == req->n_tokens + req->n_drafts: sample after this step */
    int32_t n_drafts;   /* the last n_drafts of the n_tokens are drafts to verify (0 without) */
    int32_t n_rejected; /* set by hy_scheduler_reject: trailing rows whose input was a rejected draft */
};

struct hy_sched_plan {
    struct hy_sched_entry *entries; /* [n] in batch order */
    int32_t n;
    int32_t n_tokens; /* sum of entries' n_tokens (<= max_num_batched_tokens) */
};

struct hy_sched_stats {
    uint64_t prefix_queries; /* tokens of admitted requests looked up in the prefix cache */
    uint64_t prefix_hits;    /* of those, tokens found */
    uint64_t num_preemptions;
    uint64_t prompt_chunks; /* entries that compute prompt tokens */
    uint64_t num_steps;     /* non-empty plans */
    int32_t max_batch_seqs; /* most entries in one plan */
};

struct hy_scheduler {
    struct hy_sched_config cfg;
    struct hy_block_pool *pool;  /* not owned */
    struct hy_request **running; /* [max_num_seqs] in admission order (last = newest) */
    int32_t n_running;
    struct hy_request **waiting; /* [max_waiting + max_num_seqs] FIFO, front first */
    int32_t n_waiting;
    struct hy_sched_plan plan; /* entries[max_num_seqs] */
    int32_t *hit_ids;          /* scratch for prefix lookups */
    int32_t *dp_load;          /* [cfg.dp_groups] running requests per attention-DP group (scratch) */
    int32_t hit_cap;
    struct hy_sched_stats stats;
};

/* max_blocks_per_req bounds a request's block table (for the lookup scratch). Returns 0, or -1
 * with hy_err_msg(). */
int hy_scheduler_init(struct hy_scheduler *s, const struct hy_sched_config *cfg, struct hy_block_pool *pool,
                      int32_t max_blocks_per_req);
void hy_scheduler_free(struct hy_scheduler *s);

/* Queues a new request at the back of the waiting queue. Returns 0, or -1 when max_waiting
 * requests wait already (no error message). The request stays owned by the caller. */
int hy_scheduler_add(struct hy_scheduler *s, struct hy_request *r);

/* Plans one step (may preempt and admit). The plan is valid until the next call. */
const struct hy_sched_plan *hy_scheduler_schedule(struct hy_scheduler *s);

/* Marks the last n_rejected rows of plan entry i (0 <= n_rejected <= its n_drafts) as not computed:
 * their input tokens were rejected drafts (their KV slots are overwritten later). Before update. */
void hy_scheduler_reject(struct hy_scheduler *s, int32_t i, int32_t n_rejected);

/* After the plan ran: advances computed counts (n_tokens - n_rejected per entry) and, with prefix caching, registers newly full
 * blocks in the block pool's hash map. */
void hy_scheduler_update(struct hy_scheduler *s, const struct hy_sched_plan *plan);

/* Takes a request out of the running or waiting queue and frees its blocks (full blocks keep
 * their hashes in the pool until evicted). Marks it HY_REQ_FINISHED. */
void hy_scheduler_finish(struct hy_scheduler *s, struct hy_request *r);

#endif
