/* comm.h - the communicator the engine sees: rank, size, group split and the few collectives the
 * multi-rank forward pass needs, over Open MPI (the only code that includes <mpi.h> is comm/comm.c).
 *
 * Start-up: hy_dist_init() initializes MPI only when the process was started by mpirun (Open MPI's
 * OMPI_COMM_WORLD_SIZE / PMIX_RANK in the environment); otherwise nothing is loaded or started and
 * the world is one rank whose collectives are plain copies. A binary built without Open MPI
 * (no libopenmpi-dev at build time) refuses to start under mpirun with a message saying so.
 *
 * Threads: MPI is initialized with MPI_THREAD_SERIALIZED and every collective is issued by one
 * thread at a time (the engine thread of `serve`, the main thread elsewhere); OpenMP threads only
 * compute. Lockstep: every rank issues the same collectives in the same order with the same
 * shapes; the byte counts given below are per rank and must be consistent as MPI requires.
 *
 * Every collective is counted per kind (calls, bytes this rank sent + received, seconds) and its
 * (kind, total payload) is folded into a running hash (hy_dist_stats). Ranks that issue the same
 * collectives have the same hash: every rank of a job whose groups all span the world; with
 * attention-DP groups or lm_head groups smaller than the world, the ranks of one group agree (an idle
 * DP group skips its attention collectives, lm_head groups other than rank 0's skip the logits).
 * Errors: MPI's default handler (MPI_ERRORS_ARE_FATAL) ends the job on a transport failure; the
 * functions below return -1 with hy_err_msg() for what MPI cannot express (a byte count or
 * displacement above INT_MAX), a bad root or color, out of memory, or unequal counts in a one-rank
 * alltoallv.
 */
#ifndef HY_COMM_COMM_H
#define HY_COMM_COMM_H

#include <stddef.h>
#include <stdint.h>

struct hy_comm;

enum hy_coll {
    HY_COLL_BCAST = 0,
    HY_COLL_ALLGATHER, /* allgather + allgatherv */
    HY_COLL_GATHER,    /* gatherv */
    HY_COLL_ALLTOALL,  /* alltoallv */
    HY_COLL_ALLREDUCE, /* small integer reductions (counts, flags) only; never floats */
    HY_COLL_BARRIER,
    HY_COLL_COUNT
};

/* Name of a collective kind ("bcast", "allgather", ...). */
const char *hy_coll_name(enum hy_coll k);

/* Initializes the distributed runtime once per process: under mpirun, MPI_Init_thread
 * (SERIALIZED) and the world communicator; otherwise a one-rank world without MPI. Returns 0, or
 * -1 with hy_err_msg() (started by mpirun but built without Open MPI; MPI gave a lower thread
 * level). Safe to call again (no-op). */
int hy_dist_init(int *argc, char ***argv);

/* The Open MPI variable that says this process was started by mpirun (OMPI_COMM_WORLD_SIZE or
 * PMIX_RANK, a static string), or NULL when it was not. Needs no initialization. */
const char *hy_dist_launcher_var(void);

/* 1 when this binary was built with Open MPI (HY_HAVE_MPI), else 0. */
int hy_dist_built_with_mpi(void);

/* 1 when MPI was initialized (started by mpirun, even with -np 1), else 0. */
int hy_dist_mpi(void);

/* The world communicator (one rank before hy_dist_init or without mpirun). Never NULL; not owned. */
struct hy_comm *hy_dist_world(void);

/* Stops the watchdog and finalizes MPI (when initialized). Call once at the end of main. */
void hy_dist_finalize(void);

/* Ends the whole job: logs "rank R: <message>" at error level, then MPI_Abort(code) under MPI, or
 * exit(code) without it. Any thread may call it. Never returns. */
_Noreturn void hy_dist_abort(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int hy_comm_rank(const struct hy_comm *c);
int hy_comm_size(const struct hy_comm *c);

/* Splits c by color (ranks with the same color form one group, ordered by key then rank), like
 * MPI_Comm_split; collective over c. *out is owned by the caller (hy_comm_free). Returns 0, or -1
 * with hy_err_msg(). */
int hy_comm_split(struct hy_comm *c, int color, int key, struct hy_comm **out);

/* A duplicate of c with its own message space (the step-plan channel uses one so a plan can never
 * match a compute collective). Collective over c; owned by the caller. Returns 0 or -1. */
int hy_comm_dup(struct hy_comm *c, struct hy_comm **out);

/* Frees a communicator from hy_comm_split / hy_comm_dup (collective over it); NULL is a no-op. */
void hy_comm_free(struct hy_comm *c);

/* buf[bytes] from root to every rank. */
int hy_comm_bcast(struct hy_comm *c, void *buf, size_t bytes, int root);

/* hy_comm_bcast for a rank that may wait long (a worker rank waiting for the next step plan):
 * posts a non-blocking broadcast and polls it with a sleep that grows from 50 us to 2 ms, so an
 * idle rank uses a few percent of a core instead of spinning. The wait is not a step (the watchdog
 * does not count it). Same result as hy_comm_bcast. */
int hy_comm_bcast_idle(struct hy_comm *c, void *buf, size_t bytes, int root);

/* recv[size * bytes] = every rank's send[bytes] in rank order. */
int hy_comm_allgather(struct hy_comm *c, const void *send, size_t bytes, void *recv);

/* Variable sizes: counts[size] = bytes each rank contributes (the same array on every rank; this
 * rank's send holds counts[rank] bytes); recv gets them packed in rank order. */
int hy_comm_allgatherv(struct hy_comm *c, const void *send, void *recv, const size_t *counts);

/* As allgatherv but only root receives (recv may be NULL elsewhere). */
int hy_comm_gatherv(struct hy_comm *c, const void *send, void *recv, const size_t *counts, int root);

/* send packs scounts[j] bytes for rank j in rank order; recv gets rcounts[j] bytes from rank j in
 * rank order (rcounts[j] on this rank = scounts[this rank] on rank j). */
int hy_comm_alltoallv(struct hy_comm *c, const void *send, const size_t *scounts, void *recv, const size_t *rcounts);

/* v[n] = the element-wise maximum over the ranks (exact: integers). */
int hy_comm_allreduce_max_i64(struct hy_comm *c, int64_t *v, int n);

int hy_comm_barrier(struct hy_comm *c);

/* A non-blocking collective in flight (Open MPI progresses it only inside MPI calls, so poll with
 * hy_comm_test between compute chunks). Zero-initialize; one operation at a time per request. */
struct hy_comm_req {
    int active;
    enum hy_coll kind;
    size_t bytes;  /* payload this rank sends + receives */
    double t_post; /* when it was posted */
    double t_wait; /* seconds spent blocked in hy_comm_wait (the part not hidden) */
    void *impl;    /* owned by comm.c until completion */
};

/* Non-blocking hy_comm_allgatherv / hy_comm_alltoallv: the buffers must stay untouched until
 * hy_comm_wait returns. Return 0 or -1. */
int hy_comm_iallgatherv(struct hy_comm *c, const void *send, void *recv, const size_t *counts, struct hy_comm_req *r);
int hy_comm_ialltoallv(struct hy_comm *c, const void *send, const size_t *scounts, void *recv, const size_t *rcounts,
                       struct hy_comm_req *r);

/* Progresses r: 1 when complete (or not active), 0 while in flight. */
int hy_comm_test(struct hy_comm_req *r);

/* Completes r (r->t_wait = seconds blocked here). Returns 0. */
int hy_comm_wait(struct hy_comm_req *r);

/* Per-process totals since the last reset. */
struct hy_dist_stats {
    int64_t calls[HY_COLL_COUNT];
    int64_t bytes[HY_COLL_COUNT]; /* sent + received by this rank */
    double sec[HY_COLL_COUNT];    /* wall seconds inside the calls (blocking part for non-blocking ones) */
    double posted_sec;            /* non-blocking: seconds from post to completion, summed */
    double hidden_sec;            /* non-blocking: of those, seconds overlapped with compute */
    int64_t n;                    /* collectives issued */
    uint64_t log_hash;            /* FNV-1a over (kind, total payload, group size) of each, in order */
    const char *last;             /* kind of the last collective entered ("none" before any) */
    int64_t dummy_steps;          /* steps this rank ran with no tokens of its own (DP idle groups) */
};

/* The process's counters (not thread-safe: read them from the collective thread). */
struct hy_dist_stats *hy_dist_stats(void);
void hy_dist_stats_reset(void);

/* Agreement at start-up: every rank passes the same list of n (key, value) pairs in the same order
 * (the flags and values that shape collectives: model config hash, dtype, parallel sizes, batch
 * limits, block size). One allgather of their hashes. Returns 0 when all ranks agree; otherwise -1
 * on every rank with hy_err_msg() naming the first key that differs and the ranks' values' hashes
 * ("ranks disagree on --max-num-batched-tokens (this rank, 1, has \"64\"; rank 0 differs)"; a long or
 * multi-line value shows as its size and hash). */
int hy_dist_agree(struct hy_comm *c, int n, const char *const *keys, const char *const *values);

/* The watchdog: a thread that ends the job when a step runs longer than deadline_sec: it logs the
 * rank and its last collective and exits the process (_exit(1), no MPI call from a second thread);
 * mpirun then ends every rank. Steps are marked by hy_dist_step_begin/_end (the forward
 * pass of every rank); idle waits between steps are never counted. deadline_sec <= 0: no watchdog.
 * Returns 0 or -1 (thread creation failed). */
int hy_dist_watchdog_start(double deadline_sec);
void hy_dist_step_begin(void);
void hy_dist_step_end(void);

/* Fault injection for the hang tests (HYINFER_DIST_FAULT=skip:RANK:N, base/env.h): on rank RANK
 * the N-th collective (1-based, counted over all communicators) returns without communicating.
 * Set by hy_dist_init from the environment. */
void hy_dist_fault_skip(int rank, int64_t nth);

#endif
