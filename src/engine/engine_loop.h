/* engine_loop.h - runs a hy_engine on its own thread for the HTTP handler threads.
 *
 * The engine is single-threaded: one engine thread owns it and loops hy_engine_step while it has
 * work, otherwise it sleeps on a condition variable. Handler threads submit jobs (one HTTP
 * request = n engine requests, one per choice) and aborts through a mutex-protected command list;
 * the engine thread routes each step's outputs into the job's queue and wakes its waiter.
 *
 * Lifetime of a job: references are held by the handler (until hy_engine_loop_job_release) and by the
 * engine thread (until every sequence of the job has finished or been aborted). Releasing a job
 * with unfinished sequences aborts them (a disconnected client frees its KV blocks).
 */
#ifndef HY_ENGINE_ENGINE_LOOP_H
#define HY_ENGINE_ENGINE_LOOP_H

#include "engine/engine.h"

#include <stddef.h>

struct hy_engine_loop;
struct hy_engine_loop_job;

/* One output of one sequence (choice) of a job. */
struct hy_engine_loop_out {
    int seq; /* choice index 0..n-1 */
    struct hy_engine_output o;
};

/* Starts the engine thread over e (not owned; it must outlive hy_engine_loop_stop); threads > 0
 * sets the engine thread's OpenMP team size. Returns NULL with hy_err_msg() on failure. */
struct hy_engine_loop *hy_engine_loop_start(struct hy_engine *e, int threads);

/* Stops the thread (aborting whatever still runs) and joins it. Jobs still held by handlers
 * stay valid until released; their waits return with all sequences finished, and new submits
 * fail. The engine is no longer touched afterwards. */
void hy_engine_loop_stop(struct hy_engine_loop *se);

/* Frees the wrapper (after hy_engine_loop_stop and after every handler released its jobs). */
void hy_engine_loop_free(struct hy_engine_loop *se);

/* Submits n requests as one job and waits until the engine thread has queued them. Returns
 * HY_ENGINE_OK and *job, or HY_ENGINE_QUEUE_FULL, HY_ENGINE_SHUTTING_DOWN (stopped or stopping) or
 * HY_ENGINE_ERROR with the message copied into err[errlen] (nothing is left queued on failure). */
int hy_engine_loop_submit(struct hy_engine_loop *se, const struct hy_engine_request *reqs, int n,
                          struct hy_engine_loop_job **job, char *err, size_t errlen);

/* hy_engine_loop_job_status while the engine thread has not taken an async submit yet. */
#define HY_SRV_ADD_PENDING 1

/* Like hy_engine_loop_submit, but returns at once: HY_ENGINE_OK and *job once the job is on the command
 * list, or HY_ENGINE_SHUTTING_DOWN / HY_ENGINE_ERROR (nothing queued). The add's own outcome
 * (HY_ENGINE_QUEUE_FULL, ...) comes later through hy_engine_loop_job_status. reqs must stay valid until
 * hy_engine_loop_job_status says != HY_SRV_ADD_PENDING or the job is released (a job released before its
 * add is dropped unread). notify(arg), when not NULL, is called whenever the job's state changes:
 * the add is done (or failed), outputs were queued, or its last sequence ended. It runs on the
 * engine thread (or in hy_engine_loop_stop's caller) with the loop's lock held, so it must be quick
 * and must not call back into engine_loop; it is no longer called once the job is released. */
int hy_engine_loop_submit_async(struct hy_engine_loop *se, const struct hy_engine_request *reqs, int n,
                                struct hy_engine_loop_job **job, void (*notify)(void *), void *arg, char *err,
                                size_t errlen);

/* The add's outcome of an (async) submit: HY_SRV_ADD_PENDING, HY_ENGINE_OK, or the error code with
 * its message copied into err[errlen]. */
int hy_engine_loop_job_status(struct hy_engine_loop *se, struct hy_engine_loop_job *job, char *err, size_t errlen);

/* Starts the shutdown drain: from now on submits fail with HY_ENGINE_SHUTTING_DOWN, and the engine
 * thread aborts every sequence that has produced no output yet (still waiting in the engine's
 * queue, or in its prefill): each gets a HY_ENGINE_FINISHED_ABORT output. Sequences that already
 * produced tokens run on until they finish or hy_engine_loop_stop. Returns at once. */
void hy_engine_loop_drain(struct hy_engine_loop *se);

/* Waits up to timeout_s seconds for outputs of the job; moves up to max queued outputs into
 * out[] and returns how many. *all_done is set to 1 once every sequence has finished and the
 * queue is drained. */
size_t hy_engine_loop_job_wait(struct hy_engine_loop *se, struct hy_engine_loop_job *job, double timeout_s,
                               struct hy_engine_loop_out *out, size_t max, int *all_done);

/* Aborts one sequence (seq >= 0) or all unfinished ones (seq < 0). Their later outputs are dropped. */
void hy_engine_loop_job_abort(struct hy_engine_loop *se, struct hy_engine_loop_job *job, int seq);

/* Drops the handler's reference (aborting unfinished sequences). job may be NULL. */
void hy_engine_loop_job_release(struct hy_engine_loop *se, struct hy_engine_loop_job *job);

/* Latest engine statistics (a copy taken after the last step / command). */
void hy_engine_loop_stats(struct hy_engine_loop *se, struct hy_engine_stats *st);

#endif
