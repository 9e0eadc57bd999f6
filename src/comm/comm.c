/* comm.c - the communicator (comm.h) over Open MPI, or a one-rank world of plain copies.
 *
 * The only file that includes <mpi.h>, and only when built with HY_HAVE_MPI (the Makefile defines it
 * where pkg-config finds ompi-c). Every communicator is a struct hy_comm; comm == MPI_COMM_NULL (or a
 * build without MPI) means a one-rank group whose collectives are memcpy. Byte counts travel as
 * MPI_BYTE with int counts and displacements.
 *
 * Counting: each collective entered takes the next number of a process-wide sequence (the watchdog
 * prints it with the kind, and the fault injection picks one by it); the stats (comm.h) count the ones
 * that were issued. Bytes of one call, per rank: bcast the buffer, allgather(v) this rank's part +
 * the packed total, gatherv this rank's part (+ the total at root), alltoallv the sums of both
 * counts, allreduce 2 * 8 * n, barrier 0. The log hash folds (kind, total payload of the whole
 * collective, group size) with FNV-1a; the payload is the bytes every rank can compute alike
 * (alltoallv: 0, as the ranks see different counts).
 */
#include "comm/comm.h"

#include "base/env.h"
#include "base/err.h"
#include "base/log.h"
#include "base/timing.h"

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HY_HAVE_MPI
#include <mpi.h>
#endif

#ifdef HY_HAVE_MPI
struct hy_comm {
    MPI_Comm comm; /* MPI_COMM_NULL: a one-rank group without MPI */
    int rank, size;
};
#define LOCAL(c) ((c)->comm == MPI_COMM_NULL)
static struct hy_comm one_rank = {MPI_COMM_NULL, 0, 1};
static struct hy_comm mpi_world = {MPI_COMM_NULL, 0, 1}; /* comm set by hy_dist_init */
#else
struct hy_comm {
    int rank, size;
};
#define LOCAL(c) ((void)(c), 1)
static struct hy_comm one_rank = {0, 1};
#endif

static struct hy_comm *world = &one_rank;
static int dist_inited;  /* hy_dist_init ran (successfully or not) */
static int dist_init_rc; /* its result (-1: MPI gave a lower thread level) */
static int mpi_on;       /* MPI_Init_thread succeeded and MPI_Finalize has not run */
static int world_rank;   /* for hy_dist_abort's message (any thread) */

/* ---- counting, hashing, fault injection ---------------------------------------------------------- */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static struct hy_dist_stats stats = {.log_hash = FNV_OFFSET, .last = "none"};
static _Atomic long long coll_seq;               /* collectives entered since the process started */
static _Atomic(const char *) coll_last = "none"; /* kind of the last one entered (the watchdog reads it) */
static int fault_rank = -1;
static long long fault_at; /* the coll_seq number (1-based) to skip on fault_rank */

const char *hy_coll_name(enum hy_coll k)
{
    static const char *const names[HY_COLL_COUNT] = {"bcast",    "allgather", "gather",
                                                     "alltoall", "allreduce", "barrier"};
    return (unsigned)k < HY_COLL_COUNT ? names[k] : "?";
}

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * FNV_PRIME;
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        h = (h ^ ((v >> (8 * i)) & 0xff)) * FNV_PRIME;
    return h;
}

void hy_dist_fault_skip(int rank, int64_t nth)
{
    fault_rank = rank >= 0 && nth >= 1 ? rank : -1;
    fault_at = fault_rank >= 0 ? (long long)atomic_load(&coll_seq) + (long long)nth : 0;
}

/* Enters a collective of kind k on c: takes its sequence number and returns 1 when the fault
 * injection skips it (nothing counted, nothing communicated), else 0 with it counted (calls, the log
 * hash with total = the payload every rank computes alike). */
static int coll_enter(const struct hy_comm *c, enum hy_coll k, uint64_t total)
{
    const long long seq = atomic_fetch_add(&coll_seq, 1) + 1;
    atomic_store(&coll_last, hy_coll_name(k));
    stats.last = hy_coll_name(k);
    if (fault_rank >= 0 && seq == fault_at && world_rank == fault_rank) {
        hy_log_warn("fault injection: rank %d skips collective %lld (%s)", world_rank, seq, hy_coll_name(k));
        return 1;
    }
    stats.calls[k]++;
    stats.n++;
    uint64_t h = fnv_u64(stats.log_hash, (uint64_t)k);
    h = fnv_u64(h, total);
    stats.log_hash = fnv_u64(h, (uint64_t)c->size);
    return 0;
}

static void coll_leave(enum hy_coll k, size_t bytes, double t0)
{
    stats.bytes[k] += (int64_t)bytes;
    stats.sec[k] += hy_time_now() - t0;
}

struct hy_dist_stats *hy_dist_stats(void)
{
    return &stats;
}

void hy_dist_stats_reset(void)
{
    memset(&stats, 0, sizeof(stats));
    stats.log_hash = FNV_OFFSET;
    stats.last = "none";
}

static size_t sum_sizes(const size_t *v, int n)
{
    size_t s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s;
}

static void copy(void *dst, const void *src, size_t n)
{
    if (n && dst != src)
        memmove(dst, src, n);
}

/* ---- MPI helpers ---------------------------------------------------------------------------------- */

#ifdef HY_HAVE_MPI
/* A growable int buffer for the blocking collectives' counts and displacements (collectives are
 * issued by one thread at a time, comm.h). */
static int *ibuf;
static size_t ibuf_cap;

static int *ints(size_t n)
{
    if (n > ibuf_cap) {
        int *p = realloc(ibuf, n * sizeof(int));
        if (!p) {
            hy_err_set("out of memory for %zu collective counts", n);
            return NULL;
        }
        ibuf = p;
        ibuf_cap = n;
    }
    return ibuf;
}

static int to_int(size_t v, const char *what, int *out)
{
    if (v > (size_t)INT_MAX)
        return hy_err_set("%s: %zu bytes exceed what MPI can express (INT_MAX = %d)", what, v, INT_MAX);
    *out = (int)v;
    return 0;
}

/* cnt[i] = counts[i], dsp[i] = their prefix sums, each checked against INT_MAX. */
static int counts_displs(const char *what, const size_t *counts, int n, int *cnt, int *dsp)
{
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        if (to_int(counts[i], what, &cnt[i]) || to_int(off, what, &dsp[i]))
            return -1;
        off += counts[i];
    }
    return 0;
}
#endif

static int check_root(const struct hy_comm *c, int root, const char *what)
{
    if (root < 0 || root >= c->size)
        return hy_err_set("%s: root %d is not a rank of a group of %d", what, root, c->size);
    return 0;
}

/* ---- start-up, world, abort ----------------------------------------------------------------------- */

const char *hy_dist_launcher_var(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK"};
    for (int i = 0; i < 2; i++)
        if (getenv(vars[i]))
            return vars[i];
    return NULL;
}

int hy_dist_init(int *argc, char ***argv)
{
    if (dist_inited)
        return dist_init_rc ? hy_err_set("the distributed runtime failed to start earlier (MPI thread level)") : 0;
    const char *var = hy_dist_launcher_var();
#ifndef HY_HAVE_MPI
    (void)argc;
    (void)argv;
    if (var) /* not marked done: every call refuses */
        return hy_err_set("this hyinfer was built without Open MPI but was started by mpirun (%s is set); install "
                          "libopenmpi-dev and rebuild",
                          var);
#endif
    dist_inited = 1;
    const struct hy_env_params *ep = hy_env_params();
    if (ep->dist_fault_rank >= 0)
        hy_dist_fault_skip(ep->dist_fault_rank, ep->dist_fault_nth);
    if (!var)
        return 0;
#ifdef HY_HAVE_MPI
    int provided = 0, already = 0;
    MPI_Initialized(&already);
    if (!already && MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return dist_init_rc = hy_err_set("MPI_Init_thread failed (started by mpirun: %s is set)", var);
    if (already)
        MPI_Query_thread(&provided);
    mpi_on = 1;
    mpi_world.comm = MPI_COMM_WORLD;
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_world.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_world.size);
    world = &mpi_world;
    world_rank = mpi_world.rank;
    if (provided < MPI_THREAD_SERIALIZED)
        return dist_init_rc = hy_err_set("MPI gave thread level %d, below MPI_THREAD_SERIALIZED (%d)", provided,
                                         MPI_THREAD_SERIALIZED);
#endif
    return 0;
}

int hy_dist_built_with_mpi(void)
{
#ifdef HY_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

int hy_dist_mpi(void)
{
    return mpi_on;
}

struct hy_comm *hy_dist_world(void)
{
    return world;
}

static void watchdog_stop(void);

void hy_dist_finalize(void)
{
    watchdog_stop();
#ifdef HY_HAVE_MPI
    if (mpi_on) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin)
            MPI_Finalize();
        mpi_on = 0;
        mpi_world.comm = MPI_COMM_NULL;
        mpi_world.rank = 0;
        mpi_world.size = 1;
        world = &one_rank;
    }
    free(ibuf);
    ibuf = NULL;
    ibuf_cap = 0;
#endif
}

_Noreturn void hy_dist_abort(int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hy_log_error("rank %d: %s", world_rank, msg);
    fflush(stderr);
    fflush(stdout);
#ifdef HY_HAVE_MPI
    if (mpi_on) {
        int fin = 1;
        MPI_Finalized(&fin);
        if (!fin)
            MPI_Abort(MPI_COMM_WORLD, code);
    }
#endif
    exit(code);
}

int hy_comm_rank(const struct hy_comm *c)
{
    return c->rank;
}

int hy_comm_size(const struct hy_comm *c)
{
    return c->size;
}

/* ---- groups --------------------------------------------------------------------------------------- */

static struct hy_comm *new_local(void)
{
    struct hy_comm *n = calloc(1, sizeof(*n));
    if (!n) {
        hy_err_set("out of memory for a communicator");
        return NULL;
    }
    *n = one_rank;
    return n;
}

int hy_comm_split(struct hy_comm *c, int color, int key, struct hy_comm **out)
{
    *out = NULL;
    if (color < 0)
        return hy_err_set("hy_comm_split: color %d is negative", color);
    (void)key;
    if (LOCAL(c))
        return (*out = new_local()) ? 0 : -1;
#ifdef HY_HAVE_MPI
    struct hy_comm *n = new_local();
    if (!n)
        return -1;
    if (MPI_Comm_split(c->comm, color, key, &n->comm) != MPI_SUCCESS) {
        free(n);
        return hy_err_set("MPI_Comm_split failed");
    }
    MPI_Comm_rank(n->comm, &n->rank);
    MPI_Comm_size(n->comm, &n->size);
    *out = n;
#endif
    return 0;
}

int hy_comm_dup(struct hy_comm *c, struct hy_comm **out)
{
    *out = NULL;
    if (LOCAL(c))
        return (*out = new_local()) ? 0 : -1;
#ifdef HY_HAVE_MPI
    struct hy_comm *n = new_local();
    if (!n)
        return -1;
    if (MPI_Comm_dup(c->comm, &n->comm) != MPI_SUCCESS) {
        free(n);
        return hy_err_set("MPI_Comm_dup failed");
    }
    n->rank = c->rank;
    n->size = c->size;
    *out = n;
#endif
    return 0;
}

void hy_comm_free(struct hy_comm *c)
{
    if (!c || c == &one_rank)
        return;
#ifdef HY_HAVE_MPI
    if (c == &mpi_world)
        return;
    if (!LOCAL(c) && mpi_on)
        MPI_Comm_free(&c->comm);
#endif
    free(c);
}

/* ---- blocking collectives ------------------------------------------------------------------------- */

int hy_comm_bcast(struct hy_comm *c, void *buf, size_t bytes, int root)
{
    if (check_root(c, root, "bcast"))
        return -1;
#ifdef HY_HAVE_MPI
    int n = 0;
    if (!LOCAL(c) && to_int(bytes, "bcast", &n))
        return -1;
#endif
    const double t0 = hy_time_now();
    if (coll_enter(c, HY_COLL_BCAST, bytes))
        return 0;
#ifdef HY_HAVE_MPI
    if (!LOCAL(c))
        MPI_Bcast(buf, n, MPI_BYTE, root, c->comm);
#else
    (void)buf;
#endif
    coll_leave(HY_COLL_BCAST, bytes, t0);
    return 0;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

int hy_comm_bcast_idle(struct hy_comm *c, void *buf, size_t bytes, int root)
{
    if (LOCAL(c))
        return hy_comm_bcast(c, buf, bytes, root);
#ifdef HY_HAVE_MPI
    int n = 0;
    if (check_root(c, root, "bcast") || to_int(bytes, "bcast", &n))
        return -1;
    const double t0 = hy_time_now();
    if (coll_enter(c, HY_COLL_BCAST, bytes))
        return 0;
    MPI_Request req;
    MPI_Ibcast(buf, n, MPI_BYTE, root, c->comm, &req);
    if (c->rank == root) { /* the sender does not wait for anyone: complete it now */
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        long us = 50;
        for (;;) {
            int done = 0;
            MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            if (done)
                break;
            sleep_us(us);
            us = us * 2 < 2000 ? us * 2 : 2000;
        }
    }
    coll_leave(HY_COLL_BCAST, bytes, t0);
#endif
    return 0;
}

int hy_comm_allgather(struct hy_comm *c, const void *send, size_t bytes, void *recv)
{
#ifdef HY_HAVE_MPI
    int n = 0;
    if (!LOCAL(c) && to_int(bytes, "allgather", &n))
        return -1;
#endif
    const double t0 = hy_time_now();
    const size_t total = bytes * (size_t)c->size;
    if (coll_enter(c, HY_COLL_ALLGATHER, total))
        return 0;
    if (LOCAL(c))
        copy(recv, send, bytes);
#ifdef HY_HAVE_MPI
    else
        MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, c->comm);
#endif
    coll_leave(HY_COLL_ALLGATHER, bytes + total, t0);
    return 0;
}

int hy_comm_allgatherv(struct hy_comm *c, const void *send, void *recv, const size_t *counts)
{
    const size_t total = sum_sizes(counts, c->size);
#ifdef HY_HAVE_MPI
    int *cnt = NULL;
    if (!LOCAL(c) &&
        (!(cnt = ints(2 * (size_t)c->size)) || counts_displs("allgatherv", counts, c->size, cnt, cnt + c->size)))
        return -1;
#endif
    const double t0 = hy_time_now();
    if (coll_enter(c, HY_COLL_ALLGATHER, total))
        return 0;
    if (LOCAL(c))
        copy(recv, send, counts[0]);
#ifdef HY_HAVE_MPI
    else
        MPI_Allgatherv(send, cnt[c->rank], MPI_BYTE, recv, cnt, cnt + c->size, MPI_BYTE, c->comm);
#endif
    coll_leave(HY_COLL_ALLGATHER, counts[c->rank] + total, t0);
    return 0;
}

int hy_comm_gatherv(struct hy_comm *c, const void *send, void *recv, const size_t *counts, int root)
{
    if (check_root(c, root, "gatherv"))
        return -1;
    const size_t total = sum_sizes(counts, c->size);
#ifdef HY_HAVE_MPI
    int *cnt = NULL;
    if (!LOCAL(c) &&
        (!(cnt = ints(2 * (size_t)c->size)) || counts_displs("gatherv", counts, c->size, cnt, cnt + c->size)))
        return -1;
#endif
    const double t0 = hy_time_now();
    if (coll_enter(c, HY_COLL_GATHER, total))
        return 0;
    if (LOCAL(c))
        copy(recv, send, counts[0]);
#ifdef HY_HAVE_MPI
    else
        MPI_Gatherv(send, cnt[c->rank], MPI_BYTE, recv, cnt, cnt + c->size, MPI_BYTE, root, c->comm);
#endif
    coll_leave(HY_COLL_GATHER, counts[c->rank] + (c->rank == root ? total : 0), t0);
    return 0;
}

int hy_comm_alltoallv(struct hy_comm *c, const void *send, const size_t *scounts, void *recv, const size_t *rcounts)
{
    const size_t bytes = sum_sizes(scounts, c->size) + sum_sizes(rcounts, c->size);
    if (LOCAL(c) && scounts[0] != rcounts[0])
        return hy_err_set("alltoallv: the one rank sends itself %zu bytes but receives %zu", scounts[0], rcounts[0]);
#ifdef HY_HAVE_MPI
    int *cnt = NULL;
    const int p = c->size;
    if (!LOCAL(c) && (!(cnt = ints(4 * (size_t)p)) || counts_displs("alltoallv", scounts, p, cnt, cnt + p) ||
                      counts_displs("alltoallv", rcounts, p, cnt + 2 * p, cnt + 3 * p)))
        return -1;
#endif
    const double t0 = hy_time_now();
    if (coll_enter(c, HY_COLL_ALLTOALL, 0))
        return 0;
    if (LOCAL(c))
        copy(recv, send, rcounts[0]);
#ifdef HY_HAVE_MPI
    else
        MPI_Alltoallv(send, cnt, cnt + p, MPI_BYTE, recv, cnt + 2 * p, cnt + 3 * p, MPI_BYTE, c->comm);
#endif
    coll_leave(HY_COLL_ALLTOALL, bytes, t0);
    return 0;
}

int hy_comm_allreduce_max_i64(struct hy_comm *c, int64_t *v, int n)
{
    if (n < 0)
        return hy_err_set("allreduce: %d values", n);
    const size_t bytes = (size_t)n * sizeof(int64_t);
    const double t0 = hy_time_now();
    if (coll_enter(c, HY_COLL_ALLREDUCE, bytes))
        return 0;
#ifdef HY_HAVE_MPI
    if (!LOCAL(c))
        MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_MAX, c->comm);
#else
    (void)v;
#endif
    coll_leave(HY_COLL_ALLREDUCE, 2 * bytes, t0);
    return 0;
}

int hy_comm_barrier(struct hy_comm *c)
{
    const double t0 = hy_time_now();
    if (coll_enter(c, HY_COLL_BARRIER, 0))
        return 0;
#ifdef HY_HAVE_MPI
    if (!LOCAL(c))
        MPI_Barrier(c->comm);
#endif
    coll_leave(HY_COLL_BARRIER, 0, t0);
    return 0;
}

/* ---- non-blocking collectives --------------------------------------------------------------------- */

#ifdef HY_HAVE_MPI
struct req_impl {
    MPI_Request req;
    int cnt[]; /* counts and displacements, alive until completion as MPI requires */
};
#endif

static void req_post(struct hy_comm_req *r, enum hy_coll kind, size_t bytes, double t0, void *impl)
{
    r->active = 1;
    r->kind = kind;
    r->bytes = bytes;
    r->t_post = t0;
    r->t_wait = 0;
    r->impl = impl;
    stats.bytes[kind] += (int64_t)bytes;
    stats.sec[kind] += hy_time_now() - t0;
}

/* r is complete at time t: the posted and hidden seconds, the request released. */
static void req_done(struct hy_comm_req *r, double t)
{
    const double posted = t - r->t_post;
    stats.posted_sec += posted;
    stats.hidden_sec += posted > r->t_wait ? posted - r->t_wait : 0;
    free(r->impl);
    r->impl = NULL;
    r->active = 0;
}

/* The skipped (fault-injected) post: the request is inactive, as if complete. */
static int req_skipped(struct hy_comm_req *r, enum hy_coll kind)
{
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    return 0;
}

int hy_comm_iallgatherv(struct hy_comm *c, const void *send, void *recv, const size_t *counts, struct hy_comm_req *r)
{
    const size_t total = sum_sizes(counts, c->size);
    void *impl = NULL;
#ifdef HY_HAVE_MPI
    struct req_impl *q = NULL;
    if (!LOCAL(c)) {
        if (!(q = malloc(sizeof(*q) + 2 * (size_t)c->size * sizeof(int))))
            return hy_err_set("out of memory for a request");
        if (counts_displs("iallgatherv", counts, c->size, q->cnt, q->cnt + c->size)) {
            free(q);
            return -1;
        }
        impl = q;
    }
#endif
    const double t0 = hy_time_now();
    if (coll_enter(c, HY_COLL_ALLGATHER, total)) {
        free(impl);
        return req_skipped(r, HY_COLL_ALLGATHER);
    }
    if (LOCAL(c))
        copy(recv, send, counts[0]);
#ifdef HY_HAVE_MPI
    else
        MPI_Iallgatherv(send, q->cnt[c->rank], MPI_BYTE, recv, q->cnt, q->cnt + c->size, MPI_BYTE, c->comm, &q->req);
#endif
    req_post(r, HY_COLL_ALLGATHER, counts[c->rank] + total, t0, impl);
    return 0;
}

int hy_comm_ialltoallv(struct hy_comm *c, const void *send, const size_t *scounts, void *recv, const size_t *rcounts,
                       struct hy_comm_req *r)
{
    const size_t bytes = sum_sizes(scounts, c->size) + sum_sizes(rcounts, c->size);
    if (LOCAL(c) && scounts[0] != rcounts[0])
        return hy_err_set("ialltoallv: the one rank sends itself %zu bytes but receives %zu", scounts[0], rcounts[0]);
    void *impl = NULL;
#ifdef HY_HAVE_MPI
    struct req_impl *q = NULL;
    const int p = c->size;
    if (!LOCAL(c)) {
        if (!(q = malloc(sizeof(*q) + 4 * (size_t)p * sizeof(int))))
            return hy_err_set("out of memory for a request");
        if (counts_displs("ialltoallv", scounts, p, q->cnt, q->cnt + p) ||
            counts_displs("ialltoallv", rcounts, p, q->cnt + 2 * p, q->cnt + 3 * p)) {
            free(q);
            return -1;
        }
        impl = q;
    }
#endif
    const double t0 = hy_time_now();
    if (coll_enter(c, HY_COLL_ALLTOALL, 0)) {
        free(impl);
        return req_skipped(r, HY_COLL_ALLTOALL);
    }
    if (LOCAL(c))
        copy(recv, send, rcounts[0]);
#ifdef HY_HAVE_MPI
    else
        MPI_Ialltoallv(send, q->cnt, q->cnt + p, MPI_BYTE, recv, q->cnt + 2 * p, q->cnt + 3 * p, MPI_BYTE, c->comm,
                       &q->req);
#endif
    req_post(r, HY_COLL_ALLTOALL, bytes, t0, impl);
    return 0;
}

int hy_comm_test(struct hy_comm_req *r)
{
    if (!r->active)
        return 1;
    int done = 1;
    const double t0 = hy_time_now();
#ifdef HY_HAVE_MPI
    if (r->impl)
        MPI_Test(&((struct req_impl *)r->impl)->req, &done, MPI_STATUS_IGNORE);
#endif
    const double t1 = hy_time_now();
    stats.sec[r->kind] += t1 - t0;
    if (done)
        req_done(r, t1);
    return done;
}

int hy_comm_wait(struct hy_comm_req *r)
{
    if (!r->active)
        return 0;
    const double t0 = hy_time_now();
#ifdef HY_HAVE_MPI
    if (r->impl)
        MPI_Wait(&((struct req_impl *)r->impl)->req, MPI_STATUS_IGNORE);
#endif
    const double t1 = hy_time_now();
    r->t_wait = t1 - t0;
    stats.sec[r->kind] += r->t_wait;
    req_done(r, t1);
    return 0;
}

/* ---- agreement ------------------------------------------------------------------------------------ */

int hy_dist_agree(struct hy_comm *c, int n, const char *const *keys, const char *const *values)
{
    const int p = c->size, me = c->rank;
    /* the same n everywhere: max(n) and max(-n) */
    int64_t nn[2] = {n, -(int64_t)n};
    if (hy_comm_allreduce_max_i64(c, nn, 2))
        return -1;
    if (nn[0] != -nn[1])
        return hy_err_set("ranks disagree on the number of start-up values (this rank, %d, has %d; the ranks have "
                          "%lld to %lld)",
                          me, n, (long long)-nn[1], (long long)nn[0]);
    if (n <= 0)
        return 0;
    uint64_t *h = malloc((size_t)n * (size_t)(p + 1) * sizeof(uint64_t));
    if (!h)
        return hy_err_set("out of memory for %d start-up values", n);
    uint64_t *all = h + n;
    for (int i = 0; i < n; i++) {
        uint64_t x = fnv_bytes(FNV_OFFSET, keys[i], strlen(keys[i]) + 1);
        h[i] = fnv_bytes(x, values[i], strlen(values[i]));
    }
    if (hy_comm_allgather(c, h, (size_t)n * sizeof(uint64_t), all)) {
        free(h);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        int any = 0;
        for (int r = 1; r < p; r++)
            any |= all[(size_t)r * n + i] != all[i];
        if (!any)
            continue;
        /* the ranks whose value differs from this rank's */
        char list[512];
        int len = 0, ndiff = 0;
        list[0] = 0;
        for (int r = 0; r < p; r++) {
            if (all[(size_t)r * n + i] == h[i])
                continue;
            if (ndiff < 16 && len < (int)sizeof(list) - 16)
                len += snprintf(list + len, sizeof(list) - len, "%s%d", ndiff ? ", " : "", r);
            else if (ndiff == 16)
                len += snprintf(list + len, sizeof(list) - len, ", ...");
            ndiff++;
        }
        const size_t vl = strlen(values[i]);
        char shown[96];
        if (vl > 64 || strpbrk(values[i], "\n\r")) /* a file's contents: its hash, not a cut-off first line */
            snprintf(shown, sizeof(shown), "%zu bytes, hash %016llx", vl, (unsigned long long)h[i]);
        else
            snprintf(shown, sizeof(shown), "\"%s\"", values[i]);
        rc = hy_err_set("ranks disagree on %s (this rank, %d, has %s; %s %s %s)", keys[i], me, shown,
                        ndiff == 1 ? "rank" : "ranks", list, ndiff == 1 ? "differs" : "differ");
    }
    free(h);
    return rc;
}

/* ---- watchdog ------------------------------------------------------------------------------------- */

/* One detached thread, started on the first hy_dist_watchdog_start and never joined: it wakes every
 * 100 ms and looks at the step start and the deadline; "stopping" it sets the deadline to 0. */
static _Atomic long long step_start_ns; /* 0: not in a step */
static _Atomic long long deadline_ns;   /* 0: no watchdog */
static atomic_int watchdog_started;

static long long now_ns(void)
{
    const long long t = (long long)(hy_time_now() * 1e9);
    return t > 0 ? t : 1;
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    for (;;) {
        sleep_us(100000);
        const long long start = atomic_load(&step_start_ns), dl = atomic_load(&deadline_ns);
        if (start && dl > 0 && now_ns() - start > dl) {
            /* the collective thread may be inside MPI (SERIALIZED allows no second caller): log and end
             * this process; mpirun then ends the job for a rank that exits without finalizing */
            hy_log_error("rank %d: watchdog: step exceeded %.1f s deadline; last collective: %s (#%lld)", world_rank,
                         (double)dl * 1e-9, atomic_load(&coll_last), atomic_load(&coll_seq));
            fflush(stderr);
            fflush(stdout);
            _exit(1);
        }
    }
    return NULL;
}

int hy_dist_watchdog_start(double deadline_sec)
{
    if (!(deadline_sec > 0)) {
        atomic_store(&deadline_ns, 0);
        return 0;
    }
    if (!atomic_exchange(&watchdog_started, 1)) {
        pthread_attr_t attr;
        pthread_t tid;
        int e = pthread_attr_init(&attr);
        if (!e) {
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            e = pthread_create(&tid, &attr, watchdog_main, NULL);
            pthread_attr_destroy(&attr);
        }
        if (e) {
            atomic_store(&watchdog_started, 0);
            return hy_err_set("watchdog: cannot start its thread (%s)", strerror(e));
        }
    }
    atomic_store(&deadline_ns, (long long)((deadline_sec < 1e9 ? deadline_sec : 1e9) * 1e9));
    return 0;
}

static void watchdog_stop(void)
{
    atomic_store(&deadline_ns, 0);
    atomic_store(&step_start_ns, 0);
}

void hy_dist_step_begin(void)
{
    atomic_store(&step_start_ns, now_ns());
}

void hy_dist_step_end(void)
{
    atomic_store(&step_start_ns, 0);
}
