/* comm_fit.c - the transport measurements of `hyinfer bench comm` (comm_fit.h). */
#include "bench/comm_fit.h"

#include "base/err.h"
#include "base/timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INNER_BYTES (1 << 20) /* a repetition runs about this many bytes of back-to-back calls */

const char *const hy_bench_comm_op_names[HY_COMM_OP_COUNT] = {"pingpong", "allgather", "alltoall", "allreduce"};
const char *const hy_bench_comm_op_bytes[HY_COMM_OP_COUNT] = {
    "message size, one way (ranks 0 and 1)", "gathered result every rank holds",
    "bytes each rank sends (a part to every rank)", "fp32 vector length (alltoallv + rank-order sum + allgatherv)"};

/* [lo, lo + n) of part i of `total` bytes split into `parts` contiguous parts: base + one more for the
 * first (total mod parts) parts (the engine's hy_shard_part splits at floor(total * i / parts) instead). */
static void part(size_t total, int parts, int i, size_t *lo, size_t *n)
{
    const size_t base = total / (size_t)parts, rem = total % (size_t)parts, ii = (size_t)i;
    *lo = ii * base + (ii < rem ? ii : rem);
    *n = base + (ii < rem ? 1 : 0);
}

/* "8", "64K", "16M", "1G" (binary multiples, at most 1G: MPI counts are ints) into *out bytes; 0 or -1
 * with hy_err_msg(). */
/* One call of operation `op` on `bytes`. Returns 0 or -1 with hy_err_msg(). */
static int run_op(struct hy_bench_comm *b, enum hy_bench_comm_op op, size_t bytes)
{
    const int n = b->size, me = b->rank;
    size_t lo, w, my_lo, my_w;
    switch (op) {
    case HY_COMM_OP_PINGPONG:
        if (!b->pair)
            return 0;
        return hy_comm_bcast(b->pair, b->send, bytes, 0) || hy_comm_bcast(b->pair, b->send, bytes, 1) ? -1 : 0;
    case HY_COMM_OP_ALLGATHER:
        for (int r = 0; r < n; r++) {
            part(bytes, n, r, &lo, &w);
            b->c1[r] = w;
        }
        return hy_comm_allgatherv(b->world, b->send, b->recv, b->c1);
    case HY_COMM_OP_ALLTOALL:
        part(bytes, n, me, &my_lo, &my_w);
        for (int r = 0; r < n; r++) {
            part(bytes, n, r, &lo, &w);
            b->c1[r] = w;
            b->c2[r] = my_w;
        }
        return hy_comm_alltoallv(b->world, b->send, b->c1, b->recv, b->c2);
    case HY_COMM_OP_ALLREDUCE: {
        const size_t nf = bytes / sizeof(float) > 0 ? bytes / sizeof(float) : 1;
        part(nf, n, me, &my_lo, &my_w);
        for (int r = 0; r < n; r++) {
            part(nf, n, r, &lo, &w);
            b->c1[r] = w * sizeof(float);
            b->c2[r] = my_w * sizeof(float);
            b->c3[r] = b->c1[r];
        }
        if (hy_comm_alltoallv(b->world, b->send, b->c1, b->recv, b->c2))
            return -1;
        const float *recv = (const float *)b->recv;
        memcpy(b->mine, recv, my_w * sizeof(float));
        for (int r = 1; r < n; r++)
            for (size_t i = 0; i < my_w; i++)
                b->mine[i] += recv[(size_t)r * my_w + i];
        return hy_comm_allgatherv(b->world, b->mine, b->recv, b->c3);
    }
    default:
        return hy_err_set("bench comm: unknown operation %d", (int)op);
    }
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Seconds per call of `op` on `bytes`: the median over reps of the slowest rank's repetition / inner
 * (pingpong: / 2, one way). Collective over the world. Returns 0 or -1 with hy_err_msg(). */
int hy_bench_comm_measure(struct hy_bench_comm *b, enum hy_bench_comm_op op, size_t bytes, int warmup, int reps,
                          int max_inner, double *sec)
{
    int64_t ns[HY_BENCH_COMM_MAX_REPS];
    size_t inner_z = INNER_BYTES / bytes;
    const int inner = inner_z < 1 ? 1 : inner_z > (size_t)max_inner ? max_inner : (int)inner_z;
    for (int i = 0; i < warmup; i++)
        if (run_op(b, op, bytes))
            return -1;
    for (int k = 0; k < reps; k++) {
        if (hy_comm_barrier(b->world))
            return -1;
        const double t0 = hy_time_now();
        for (int i = 0; i < inner; i++)
            if (run_op(b, op, bytes))
                return -1;
        ns[k] = (int64_t)((hy_time_now() - t0) * 1e9);
    }
    if (hy_comm_allreduce_max_i64(b->world, ns, reps))
        return -1;
    qsort(ns, (size_t)reps, sizeof(ns[0]), cmp_i64);
    const double med = reps % 2 ? (double)ns[reps / 2] : 0.5 * ((double)ns[reps / 2 - 1] + (double)ns[reps / 2]);
    *sec = med * 1e-9 / inner / (op == HY_COMM_OP_PINGPONG ? 2.0 : 1.0);
    return 0;
}

/* Weighted least squares of t[i] = α + x[i] / β with weights 1 / t[i]² over n points; α < 0 is
 * clamped to 0 (then β alone is fitted). t in seconds, x in bytes. */
struct hy_bench_comm_fit hy_bench_comm_fit_alpha_beta(const double *x, const double *t, int n)
{
    double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
    for (int i = 0; i < n; i++) {
        if (!(t[i] > 0.0))
            continue;
        const double w = 1.0 / (t[i] * t[i]);
        sw += w;
        sx += w * x[i];
        sxx += w * x[i] * x[i];
        st += w * t[i];
        sxt += w * x[i] * t[i];
    }
    double a = 0.0, s = 0.0; /* t = a + s * x, s = 1 / β */
    const double det = sw * sxx - sx * sx;
    if (det > 0.0) {
        a = (sxx * st - sx * sxt) / det;
        s = (sw * sxt - sx * st) / det;
    }
    if (a < 0.0 || det <= 0.0) {
        a = 0.0;
        s = sxx > 0.0 ? sxt / sxx : 0.0;
    }
    if (s < 0.0) { /* time falls with size: latency only */
        s = 0.0;
        a = sw > 0.0 ? st / sw : 0.0;
    }
    struct hy_bench_comm_fit f = {a * 1e6, s > 0.0 ? 1e-9 / s : 0.0, 0.0};
    int m = 0;
    for (int i = 0; i < n; i++)
        if (t[i] > 0.0) {
            const double e = (a + s * x[i] - t[i]) / t[i];
            f.rms_rel += e * e;
            m++;
        }
    f.rms_rel = m ? sqrt(f.rms_rel / m) : 0.0;
    return f;
}

/* Number of distinct host names over the world (one allgather of 64-byte names). -1 on failure. */
int hy_bench_comm_hosts(struct hy_bench_comm *b)
{
    enum { HN = 64 };
    char name[HN];
    memset(name, 0, sizeof(name));
    if (gethostname(name, sizeof(name) - 1))
        snprintf(name, sizeof(name), "unknown");
    char *all = calloc((size_t)b->size, HN);
    if (!all) {
        hy_err_set("bench comm: out of memory");
        return -1;
    }
    if (hy_comm_allgather(b->world, name, HN, all)) {
        free(all);
        return -1;
    }
    int hosts = 0;
    for (int r = 0; r < b->size; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = !memcmp(all + (size_t)q * HN, all + (size_t)r * HN, HN);
        hosts += !seen;
    }
    free(all);
    return hosts;
}
