/* comm_fit.h - the measurements of `mpirun -np N hyinfer bench comm` (the CLI, cli/cmd_bench_comm.c,
 * parses flags and prints; the method is described there): one operation's seconds per call over the
 * job's communicator, the α / β fit of t = α + bytes / β, and the job's host count. */
#ifndef HY_BENCH_COMM_FIT_H
#define HY_BENCH_COMM_FIT_H

#include "comm/comm.h"

#include <stddef.h>
#include <stdint.h>

#define HY_BENCH_COMM_MAX_REPS 1000
#define HY_BENCH_COMM_MAX_RANKS 4096

enum hy_bench_comm_op {
    HY_COMM_OP_PINGPONG,
    HY_COMM_OP_ALLGATHER,
    HY_COMM_OP_ALLTOALL,
    HY_COMM_OP_ALLREDUCE,
    HY_COMM_OP_COUNT
};

extern const char *const hy_bench_comm_op_names[HY_COMM_OP_COUNT]; /* "pingpong", ... */
extern const char *const hy_bench_comm_op_bytes[HY_COMM_OP_COUNT]; /* what `bytes` means for each */

/* The buffers and communicators of one run. */
struct hy_bench_comm {
    struct hy_comm *world, *pair; /* pair: ranks 0 and 1 (NULL elsewhere), owned */
    int rank, size;
    uint8_t *send, *recv; /* [cap] bytes each */
    float *mine;          /* allreduce: this rank's slice of the sum */
    size_t cap;
    size_t *c1, *c2, *c3; /* [size] byte counts */
};

struct hy_bench_comm_fit {
    double alpha_us, beta_gbs; /* beta_gbs 0: no bandwidth term could be fitted */
    double rms_rel;            /* root mean square of (model - measured) / measured */
};

/* Seconds per call of `op` on `bytes` (warmup untimed calls, then reps <= HY_BENCH_COMM_MAX_REPS
 * repetitions of up to max_inner back-to-back calls): the median over reps of the slowest rank's
 * repetition / inner (pingpong: / 2, one way). Collective over the world. Returns 0 or -1 with
 * hy_err_msg(). */
int hy_bench_comm_measure(struct hy_bench_comm *b, enum hy_bench_comm_op op, size_t bytes, int warmup, int reps,
                          int max_inner, double *sec);

/* Weighted least squares of t[i] = α + x[i] / β with weights 1 / t[i]² over n points; α < 0 is
 * clamped to 0 (then β alone is fitted). t in seconds, x in bytes. */
struct hy_bench_comm_fit hy_bench_comm_fit_alpha_beta(const double *x, const double *t, int n);

/* Number of distinct host names over the world (one allgather of 64-byte names). -1 on failure. */
int hy_bench_comm_hosts(struct hy_bench_comm *b);

#endif
