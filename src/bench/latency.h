/* latency.h - the measurements of `hyinfer bench latency` (the CLI, cli/cmd_bench.c, parses flags
 * and prints): timed prefill and decode through the executor, with the per-stage seconds, the bytes
 * and FLOPs the router's choices imply (account.h) and rank 0's collectives of the timed calls. */
#ifndef HY_BENCH_LATENCY_H
#define HY_BENCH_LATENCY_H

#include "bench/account.h"
#include "comm/comm.h"
#include "model/model.h"

#include <stdint.h>

/* Rank 0's collectives during the timed forward calls of one phase (the difference of two
 * hy_dist_stats snapshots). All zero in a one-rank process. */
struct hy_bench_comm_phase {
    int64_t calls[HY_COLL_COUNT];
    int64_t bytes[HY_COLL_COUNT]; /* sent + received by rank 0 */
    double sec[HY_COLL_COUNT];    /* seconds inside the calls (the blocking part of non-blocking ones) */
    double posted_sec;            /* non-blocking: post to completion, summed */
    double hidden_sec;            /* non-blocking: of those, overlapped with compute */
};

struct hy_bench_prefill {
    int32_t len;
    double secs;
    double stage[HY_STAGE_COUNT];
    struct hy_bench_flops flops;
    int64_t distinct_experts;
    struct hy_bench_comm_phase comm; /* the one forward call */
};

struct hy_bench_decode {
    int32_t batch;
    int32_t steps;
    double step_s;                /* mean timed step */
    double stage[HY_STAGE_COUNT]; /* mean seconds per step */
    struct hy_bench_bytes bytes;  /* mean per step */
    double tokens_per_s;
    /* read bandwidth probed just before and just after this run (GB/s), and the one its roofline uses: the
     * larger (the probe at the start of the bench can be tens of seconds and a load away, and this VM's
     * bandwidth swings by 2x within minutes: fractions above 1 were seen against it) */
    double bw_before_gbs, bw_after_gbs, bw_gbs;
    struct hy_bench_comm_phase comm; /* summed over the timed steps */
};

/* Touches one byte per page of every mapped checkpoint file so the timed runs do not pay page faults. */
void hy_bench_prefault_weights(const struct hy_model *m);

/* One sequence of `len` random tokens (from seed) through a fresh KV cache of kv_dtype, logits of the
 * last row only, timed with the model's stage profile on: *r. Returns 0, or -1 with hy_err_msg(). */
int hy_bench_run_prefill(struct hy_model *m, enum hy_dtype kv_dtype, int32_t len, uint64_t seed,
                         struct hy_bench_prefill *r);

/* `batch` sequences: a prefill of `ctx0` random tokens each (one batch, untimed; with `synthetic` the ctx0
 * cache rows are filled with random values instead, bench/context_fill.h), one untimed warm-up decode step,
 * then `steps` timed decode steps of one token per sequence, all sequences together: *r (the bw_*
 * fields left to the caller). Returns 0, or -1 with hy_err_msg(). */
int hy_bench_run_decode(struct hy_model *m, enum hy_dtype kv_dtype, int32_t batch, int32_t ctx0, int synthetic,
                        int32_t steps, uint64_t seed, struct hy_bench_decode *r);

#endif
