/* executor.h - how the ranks of an mpirun job run one model together (vLLM's model executor).
 *
 * Every command that runs a model (the engine's runner and speculative decoding, `logits`, `bench`)
 * calls the model through an executor. In one process it calls the model directly. In an mpirun job
 * world rank 0 (the leader) runs the command: it schedules, samples and makes every rank-local
 * decision (aborts, stops, timeouts, client disconnects), and every model call the other ranks must
 * join is first broadcast as a step plan on a channel of its own: KV cache creation and release,
 * scratch reservation, and each forward step (token ids, positions, slot mapping, block tables,
 * logits rows, the MTP input rows). The other ranks (workers) run hy_executor_worker_run: they wait
 * for the next plan without spinning, execute it with the same collectives in the same order, and
 * return when the leader sends the end of the job (hy_executor_exit). Only the leader gets logits.
 *
 * The model is reached through a small backend table and the plans through a broadcast channel, so
 * the leader/worker protocol runs without mpirun too (tests/unit/test_executor.c: threads as ranks).
 */
#ifndef HY_ENGINE_EXECUTOR_H
#define HY_ENGINE_EXECUTOR_H

#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

#define HY_EXEC_MAX_KV 64 /* KV caches alive at once in a multi-rank job */

/* What a plan runs on one rank. ctx is the backend's (the model for hy_executor_init). Every function
 * returns 0, or -1 with hy_err_msg(). */
struct hy_exec_backend {
    /* The leader's checks before a plan leaves, so that nothing is left half done: batch b is valid
     * for kv (mtp: for the MTP layer) and fits one step's exchanges. b == NULL: only that n_tokens
     * tokens fit (a reservation). */
    int (*check)(void *ctx, const struct hy_kv_cache *kv, const struct hy_batch *b, int mtp, int64_t n_tokens);
    int (*kv_init)(void *ctx, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks, enum hy_dtype kv_dtype);
    void (*kv_free)(void *ctx, struct hy_kv_cache *kv);
    int (*reserve)(void *ctx, int64_t max_tokens, int32_t max_ctx);
    /* hidden_in NULL: the main model; otherwise the MTP layer with input rows [n_tokens, hidden]. */
    int (*forward)(void *ctx, struct hy_kv_cache *kv, const struct hy_batch *b, const float *hidden_in, float *logits,
                   float *hidden_out);
    /* Called on every rank when the job ends (the model's logs the collective count the tests compare). */
    void (*finish)(void *ctx, int rank);
};

/* Broadcasts bytes from rank 0 to every rank of the job, blocking without spinning until they come;
 * every rank calls it with the same byte count. Returns 0, or -1 with hy_err_msg(). */
typedef int (*hy_exec_bcast_fn)(void *chan_ctx, void *buf, size_t bytes);

struct hy_executor {
    const struct hy_exec_backend *be;
    void *be_ctx;
    int64_t hidden_size;    /* floats per MTP input row */
    hy_exec_bcast_fn bcast; /* NULL: one process, nothing is broadcast */
    void *chan_ctx;
    int rank;         /* 0 on the leader and in one process */
    uint8_t *kv_used; /* leader: [HY_EXEC_MAX_KV] cache ids the workers hold now; shared by every executor of one
                          model (the model's shard owns it), borrowed */
};

/* An executor for model m (a value; nothing to free): one-process when m is not sharded, otherwise
 * over the job's plan channel (m->dist), leader on world rank 0. */
void hy_executor_init(struct hy_executor *ex, struct hy_model *m);

/* The same over any backend and channel (tests): kv_used [HY_EXEC_MAX_KV] zeroed, borrowed. */
void hy_executor_init_with(struct hy_executor *ex, const struct hy_exec_backend *be, void *be_ctx, int64_t hidden_size,
                           hy_exec_bcast_fn bcast, void *chan_ctx, int rank, uint8_t *kv_used);

/* Leader: creates cache kv on every rank (dtype HY_DTYPE_UNKNOWN = the compute mode's; kv->dist_id is
 * the id the workers know it by) / frees it everywhere (a no-op on a zeroed kv). Returns 0, or -1 with
 * hy_err_msg() (nothing was created then). A plan that cannot be sent ends the job. */
int hy_executor_kv_cache_init(struct hy_executor *ex, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks,
                              enum hy_dtype kv_dtype);
void hy_executor_kv_cache_free(struct hy_executor *ex, struct hy_kv_cache *kv);

/* Leader: hy_model_reserve on every rank. Returns 0, or -1 with hy_err_msg(). */
int hy_executor_reserve(struct hy_executor *ex, int64_t max_tokens, int32_t max_ctx);

/* Leader: hy_model_forward / hy_model_forward_mtp on every rank (arguments as there; only the leader
 * passes logits). Returns 0, or -1 with hy_err_msg() when the batch is refused before the plan left;
 * a step that fails after that ends the job (the other ranks are already in it). */
int hy_executor_forward(struct hy_executor *ex, struct hy_kv_cache *kv, const struct hy_batch *b, float *logits,
                        float *hidden_out);
int hy_executor_forward_mtp(struct hy_executor *ex, struct hy_kv_cache *kv, const struct hy_batch *b,
                            const float *hidden_in, float *logits, float *hidden_out);

/* Leader: tells the workers the job is done (they return from hy_executor_worker_run) and logs this
 * rank's end-of-job line. Call once, after the last model call; a no-op in one process. */
void hy_executor_exit(struct hy_executor *ex);

/* Workers (rank > 0): executes the leader's plans until it sends the end of the job, then frees the
 * caches it made and returns 0. A plan that is malformed or fails here returns -1 with hy_err_msg()
 * (the caller ends the job: the leader cannot go on without this rank). */
int hy_executor_worker_run(struct hy_executor *ex);

#endif
