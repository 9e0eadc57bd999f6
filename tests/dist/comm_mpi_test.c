/* comm_mpi_test.c - comm/comm.h across ranks; run by tests/dist/test_comm_mpi.sh under mpirun.
 *
 *   comm_mpi_test          every collective with rank-dependent (uneven) sizes and contents, split,
 *                          dup, non-blocking allgatherv/alltoallv, bcast_idle, the stats' log hash equal
 *                          on every rank, hy_dist_agree catching a value one rank has differently.
 *                          Prints "comm_mpi_test: N ranks ok" on rank 0; a failed check ends the job.
 *   comm_mpi_test hang     steps of one allgather each under the watchdog (deadline
 *                          HYINFER_DIST_STEP_TIMEOUT); with HYINFER_DIST_FAULT=skip:1:3 rank 1 skips
 *                          one, so rank 0 waits forever in its last step and the watchdog ends the job.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/env.h"
#include "base/err.h"
#include "comm/comm.h"

static int me, np;

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            hy_dist_abort(3, "FAIL %s:%d: %s (%s)", __FILE__, __LINE__, #cond, hy_err_msg());                          \
    } while (0)

/* the byte rank `src` puts at position k of what it sends to rank `dst` */
static unsigned char pat(int src, int dst, size_t k)
{
    return (unsigned char)(src * 37 + dst * 11 + (int)k * 3 + 1);
}

static void test_bcast(struct hy_comm *w)
{
    unsigned char buf[1000];
    const int root = np - 1;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < sizeof(buf); k++)
            buf[k] = me == root ? pat(root, 0, k) : 0;
        if (pass == 0) {
            CHECK(hy_comm_bcast(w, buf, sizeof(buf), root) == 0);
        } else {
            if (me == root) { /* the others wait idle a while */
                struct timespec ts = {0, 30 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            CHECK(hy_comm_bcast_idle(w, buf, sizeof(buf), root) == 0);
        }
        for (size_t k = 0; k < sizeof(buf); k++)
            CHECK(buf[k] == pat(root, 0, k));
    }
}

static void test_allgather(struct hy_comm *w)
{
    unsigned char send[16], *recv = malloc(16 * (size_t)np);
    for (size_t k = 0; k < 16; k++)
        send[k] = pat(me, 0, k);
    CHECK(hy_comm_allgather(w, send, 16, recv) == 0);
    for (int r = 0; r < np; r++)
        for (size_t k = 0; k < 16; k++)
            CHECK(recv[r * 16 + k] == pat(r, 0, k));
    free(recv);
}

/* rank r contributes (r * 7 + 3) % 5 bytes: 3, 0, 2, 4 ... (one rank sends nothing) */
static size_t vcount(int r)
{
    return (size_t)((r * 7 + 3) % 5);
}

static void test_allgatherv_gatherv(struct hy_comm *w)
{
    size_t counts[64], total = 0;
    for (int r = 0; r < np; r++)
        total += counts[r] = vcount(r);
    unsigned char send[8], *recv = malloc(total + 1);
    for (size_t k = 0; k < counts[me]; k++)
        send[k] = pat(me, 0, k);
    memset(recv, 0xee, total + 1);
    CHECK(hy_comm_allgatherv(w, send, recv, counts) == 0);
    size_t off = 0;
    for (int r = 0; r < np; r++)
        for (size_t k = 0; k < counts[r]; k++)
            CHECK(recv[off++] == pat(r, 0, k));
    CHECK(recv[total] == 0xee);

    const int root = 1 % np;
    memset(recv, 0xee, total + 1);
    CHECK(hy_comm_gatherv(w, send, me == root ? recv : NULL, counts, root) == 0);
    if (me == root) {
        off = 0;
        for (int r = 0; r < np; r++)
            for (size_t k = 0; k < counts[r]; k++)
                CHECK(recv[off++] == pat(r, 0, k));
        CHECK(recv[total] == 0xee);
    }
    free(recv);
}

/* rank s sends (3s + 5d + 1) % 4 + s bytes to rank d: uneven, asymmetric, rank 0 sends rank 3 nothing */
static size_t a2a_count(int s, int d)
{
    return (size_t)((3 * s + 5 * d + 1) % 4 + s);
}

static void a2a_fill(size_t *sc, size_t *rc, unsigned char **send, unsigned char **recv, size_t *stot, size_t *rtot)
{
    *stot = *rtot = 0;
    for (int j = 0; j < np; j++) {
        *stot += sc[j] = a2a_count(me, j);
        *rtot += rc[j] = a2a_count(j, me);
    }
    *send = malloc(*stot + 1);
    *recv = malloc(*rtot + 1);
    size_t off = 0;
    for (int j = 0; j < np; j++)
        for (size_t k = 0; k < sc[j]; k++)
            (*send)[off++] = pat(me, j, k);
    memset(*recv, 0xee, *rtot + 1);
}

static void a2a_check(const size_t *rc, const unsigned char *recv, size_t rtot)
{
    size_t off = 0;
    for (int j = 0; j < np; j++)
        for (size_t k = 0; k < rc[j]; k++)
            CHECK(recv[off++] == pat(j, me, k));
    CHECK(recv[rtot] == 0xee);
}

static void test_alltoallv(struct hy_comm *w)
{
    size_t sc[64], rc[64], stot, rtot;
    unsigned char *send, *recv;
    a2a_fill(sc, rc, &send, &recv, &stot, &rtot);
    CHECK(hy_comm_alltoallv(w, send, sc, recv, rc) == 0);
    a2a_check(rc, recv, rtot);
    free(send);
    free(recv);
}

static void test_allreduce(struct hy_comm *w)
{
    int64_t v[4] = {me, -me, (int64_t)me * me, me == 0 ? (int64_t)1 << 50 : -5};
    CHECK(hy_comm_allreduce_max_i64(w, v, 4) == 0);
    CHECK(v[0] == np - 1);
    CHECK(v[1] == 0);
    CHECK(v[2] == (int64_t)(np - 1) * (np - 1));
    CHECK(v[3] == (int64_t)1 << 50);
    CHECK(hy_comm_barrier(w) == 0);
}

static void test_split_dup(struct hy_comm *w)
{
    /* two groups by parity, ordered by descending world rank (key = -rank) */
    struct hy_comm *g = NULL, *d = NULL;
    CHECK(hy_comm_split(w, me % 2, -me, &g) == 0);
    const int gsize = (np - me % 2 + 1) / 2;
    CHECK(hy_comm_size(g) == gsize);
    int members[64];
    CHECK(hy_comm_allgather(g, &me, sizeof(int), members) == 0);
    for (int i = 0; i < gsize; i++) /* descending, same parity */
        CHECK(members[i] % 2 == me % 2 && (i == 0 || members[i] < members[i - 1]));
    CHECK(members[hy_comm_rank(g)] == me);

    CHECK(hy_comm_dup(w, &d) == 0);
    CHECK(hy_comm_size(d) == np && hy_comm_rank(d) == me);
    int64_t x = 100 + me;
    CHECK(hy_comm_bcast(d, &x, sizeof(x), 0) == 0);
    CHECK(x == 100);
    hy_comm_free(d);
    hy_comm_free(g);
}

static void test_nonblocking(struct hy_comm *w)
{
    size_t counts[64], total = 0;
    for (int r = 0; r < np; r++)
        total += counts[r] = 1000 * vcount(r) + 1;
    unsigned char *send = malloc(counts[me]), *recv = malloc(total);
    for (size_t k = 0; k < counts[me]; k++)
        send[k] = pat(me, 0, k);
    struct hy_comm_req r = {0};
    hy_dist_stats_reset();
    CHECK(hy_comm_iallgatherv(w, send, recv, counts, &r) == 0);
    CHECK(r.active && r.kind == HY_COLL_ALLGATHER && r.bytes == counts[me] + total);
    volatile double acc = 0; /* some compute between the tests */
    int polls = 0;
    while (!hy_comm_test(&r) && polls < 1000) {
        for (int i = 0; i < 10000; i++)
            acc += i * 0.5;
        polls++;
    }
    CHECK(hy_comm_wait(&r) == 0);
    CHECK(!r.active);
    size_t off = 0;
    for (int q = 0; q < np; q++)
        for (size_t k = 0; k < counts[q]; k++)
            CHECK(recv[off++] == pat(q, 0, k));
    free(send);
    free(recv);

    size_t sc[64], rc[64], stot, rtot;
    unsigned char *as, *ar;
    a2a_fill(sc, rc, &as, &ar, &stot, &rtot);
    CHECK(hy_comm_ialltoallv(w, as, sc, ar, rc, &r) == 0);
    CHECK(hy_comm_wait(&r) == 0);
    CHECK(r.t_wait >= 0);
    a2a_check(rc, ar, rtot);
    free(as);
    free(ar);
    const struct hy_dist_stats *st = hy_dist_stats();
    CHECK(st->calls[HY_COLL_ALLGATHER] == 1 && st->calls[HY_COLL_ALLTOALL] == 1);
    CHECK(st->posted_sec > 0 && st->hidden_sec >= 0 && st->hidden_sec <= st->posted_sec + 1e-9);
}

static void test_log_hash(struct hy_comm *w)
{
    const struct hy_dist_stats *st = hy_dist_stats();
    const uint64_t mine[2] = {st->log_hash, (uint64_t)st->n};
    CHECK(mine[0] != 0 && mine[1] > 0);
    uint64_t all[2 * 64];
    CHECK(hy_comm_allgather(w, mine, sizeof(mine), all) == 0);
    for (int r = 0; r < np; r++)
        CHECK(all[2 * r] == mine[0] && all[2 * r + 1] == mine[1]);
}

static void test_agree(struct hy_comm *w)
{
    const char *keys[] = {"model", "dtype", "max-num-batched-tokens", "block-size"};
    const char *same[] = {"9f0e", "bf16", "2048", "16"};
    CHECK(hy_dist_agree(w, 4, keys, same) == 0);
    if (np < 2)
        return;
    /* the last rank has another batch limit (and another block size, reported second): every rank fails */
    const char *odd[] = {"9f0e", "bf16", me == np - 1 ? "64" : "2048", me == np - 1 ? "32" : "16"};
    CHECK(hy_dist_agree(w, 4, keys, odd) == -1);
    const char *msg = hy_err_msg();
    CHECK(strstr(msg, "ranks disagree on max-num-batched-tokens") != NULL);
    char expect[128];
    snprintf(expect, sizeof(expect), "(this rank, %d, has \"%s\";", me, odd[2]);
    CHECK(strstr(msg, expect) != NULL);
    if (me == np - 1) {
        CHECK(strstr(msg, np == 2 ? "rank 0 differs" : "ranks 0, 1") != NULL);
    } else {
        snprintf(expect, sizeof(expect), "rank %d differs)", np - 1);
        CHECK(strstr(msg, expect) != NULL);
    }
    if (me == 0)
        printf("comm_mpi_test: agree says: %s\n", msg);
    /* a different number of values: every rank fails too */
    CHECK(hy_dist_agree(w, me == 0 ? 3 : 4, keys, same) == -1);
    CHECK(strstr(hy_err_msg(), "number of start-up values") != NULL);
}

static int run_hang(struct hy_comm *w)
{
    /* rank 1 skips the 3rd collective (HYINFER_DIST_FAULT=skip:1:3): it finishes one allgather early
     * and the last step of the others never completes */
    CHECK(hy_dist_watchdog_start(hy_env_params()->dist_step_timeout) == 0);
    for (int s = 0; s < 10; s++) {
        int64_t x = me, all[64];
        hy_dist_step_begin();
        CHECK(hy_comm_allgather(w, &x, sizeof(x), all) == 0);
        hy_dist_step_end();
    }
    printf("comm_mpi_test: rank %d finished its steps\n", me);
    fflush(stdout);
    hy_dist_finalize();
    return 0;
}

int main(int argc, char **argv)
{
    if (hy_dist_init(&argc, &argv) != 0) {
        fprintf(stderr, "comm_mpi_test: %s\n", hy_err_msg());
        return 1;
    }
    struct hy_comm *w = hy_dist_world();
    me = hy_comm_rank(w);
    np = hy_comm_size(w);
    CHECK(hy_dist_mpi() == 1);
    CHECK(np >= 1 && np <= 64);
    const char *ws = getenv("OMPI_COMM_WORLD_SIZE");
    CHECK(!ws || atoi(ws) == np);
    if (argc > 1 && !strcmp(argv[1], "hang"))
        return run_hang(w);

    hy_dist_stats_reset();
    test_bcast(w);
    test_allgather(w);
    test_allgatherv_gatherv(w);
    test_alltoallv(w);
    test_allreduce(w);
    test_split_dup(w);
    test_log_hash(w);
    test_nonblocking(w);
    test_log_hash(w);
    test_agree(w);
    test_log_hash(w);
    if (me == 0) {
        const struct hy_dist_stats *st = hy_dist_stats();
        printf("comm_mpi_test: %d ranks ok (%lld collectives, last %s)\n", np, (long long)st->n, st->last);
    }
    fflush(stdout);
    hy_dist_finalize();
    return 0;
}
