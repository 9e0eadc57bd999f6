/* lockstep.h - how the ranks of an mpirun job run one model together.
 *
 * World rank 0 (the leader) runs the command (serve, run, generate, logits, bench): it schedules,
 * samples and makes every rank-local decision (aborts, stops, timeouts, client disconnects). Every
 * model call that other ranks must join is broadcast first as a step plan on a channel of its own:
 * KV cache creation and release, scratch reservation, and each forward step (token ids, positions,
 * slot mapping, block tables, logits rows, the MTP input rows). The other ranks (workers) run
 * hy_model_worker_run: they wait for the next plan without spinning (hy_comm_bcast_idle), execute it
 * with the same collectives in the same order, and return when the leader frees the model. Only the
 * leader receives logits.
 */
#ifndef HY_MODEL_LOCKSTEP_H
#define HY_MODEL_LOCKSTEP_H

#include "model/model.h"

/* Leader: broadcasts a forward step (hidden_in non-NULL = the MTP layer, rows [n_tokens, H]). A no-op
 * on workers and in one-rank processes. Returns 0, or -1 with hy_err_msg(). */
int hy_lockstep_send_forward(struct hy_model *m, const struct hy_kv_cache *kv, const struct hy_batch *b,
                             const float *hidden_in, int want_logits);

/* Leader: a cache was created (kv->dist_id assigned here) / is about to be freed / scratch reserved.
 * No-ops elsewhere. Return 0, or -1 with hy_err_msg(). */
int hy_lockstep_kv_init(const struct hy_model *m, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks,
                        enum hy_dtype kv_dtype);
int hy_lockstep_kv_free(struct hy_model *m, const struct hy_kv_cache *kv);
int hy_lockstep_reserve(struct hy_model *m, int64_t max_tokens, int32_t max_ctx);

/* Leader: tells the workers to return from hy_model_worker_run (hy_model_free calls it). */
void hy_lockstep_exit(struct hy_model *m);

/* Worker ranks (m->dist, world rank > 0): executes the leader's plans until it frees the model.
 * Returns 0 then; a plan that fails here ends the job (hy_dist_abort), as the leader could not go on. */
int hy_model_worker_run(struct hy_model *m);

/* Frees a cache made by hy_model_kv_cache_init* and, on the leader, the workers' copies. */
void hy_model_kv_cache_free(struct hy_model *m, struct hy_kv_cache *kv);

#endif
