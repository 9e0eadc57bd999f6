/* test_comm.c - comm/comm.h in a one-rank world (no mpirun): rank 0 of 1, the collectives as copies,
 * split/dup, agreement, non-blocking requests, the stats (calls, bytes, the log hash), fault
 * injection, HYINFER_DIST_* parsing (base/env.h), and the watchdog left idle. The multi-rank
 * behaviour is tests/dist/test_comm_mpi.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/env.h"
#include "base/err.h"
#include "comm/comm.h"

static int setup(void **state)
{
    (void)state;
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMIX_RANK");
    return 0;
}

static void test_one_rank_world(void **state)
{
    (void)state;
    struct hy_comm *w = hy_dist_world();
    assert_non_null(w);
    assert_int_equal(hy_comm_rank(w), 0);
    assert_int_equal(hy_comm_size(w), 1);
#ifndef HY_HAVE_MPI
    /* built without Open MPI: started by mpirun (as its variables say) is refused, every time */
    setenv("PMIX_RANK", "0", 1);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(hy_dist_init(NULL, NULL), -1);
        assert_non_null(strstr(hy_err_msg(), "built without Open MPI"));
        assert_non_null(strstr(hy_err_msg(), "PMIX_RANK"));
    }
    unsetenv("PMIX_RANK");
#endif
    assert_int_equal(hy_dist_init(NULL, NULL), 0);
    assert_int_equal(hy_dist_init(NULL, NULL), 0); /* again: a no-op */
    assert_int_equal(hy_dist_mpi(), 0);
    assert_ptr_equal(hy_dist_world(), w);
    assert_int_equal(hy_comm_rank(w), 0);
    assert_int_equal(hy_comm_size(w), 1);
    assert_string_equal(hy_coll_name(HY_COLL_BCAST), "bcast");
    assert_string_equal(hy_coll_name(HY_COLL_ALLTOALL), "alltoall");
    assert_string_equal(hy_coll_name(HY_COLL_BARRIER), "barrier");
}

static void test_copies(void **state)
{
    (void)state;
    struct hy_comm *w = hy_dist_world();
    char send[32], recv[32];
    for (int i = 0; i < 32; i++)
        send[i] = (char)('a' + i % 26);

    char b[8] = "bcast!!";
    assert_int_equal(hy_comm_bcast(w, b, sizeof(b), 0), 0);
    assert_string_equal(b, "bcast!!");
    assert_int_equal(hy_comm_bcast_idle(w, b, sizeof(b), 0), 0);
    assert_string_equal(b, "bcast!!");
    assert_int_equal(hy_comm_bcast(w, b, sizeof(b), 1), -1); /* no rank 1 */
    assert_non_null(strstr(hy_err_msg(), "root 1"));

    memset(recv, 0, sizeof(recv));
    assert_int_equal(hy_comm_allgather(w, send, 10, recv), 0);
    assert_memory_equal(recv, send, 10);
    assert_int_equal(recv[10], 0);

    size_t counts[1] = {7};
    memset(recv, 0, sizeof(recv));
    assert_int_equal(hy_comm_allgatherv(w, send, recv, counts), 0);
    assert_memory_equal(recv, send, 7);
    assert_int_equal(recv[7], 0);

    memset(recv, 0, sizeof(recv));
    counts[0] = 5;
    assert_int_equal(hy_comm_gatherv(w, send + 3, recv, counts, 0), 0);
    assert_memory_equal(recv, send + 3, 5);
    assert_int_equal(recv[5], 0);

    size_t sc[1] = {9}, rc[1] = {9};
    memset(recv, 0, sizeof(recv));
    assert_int_equal(hy_comm_alltoallv(w, send, sc, recv, rc), 0);
    assert_memory_equal(recv, send, 9);
    assert_int_equal(recv[9], 0);
    rc[0] = 8; /* the one rank cannot receive other than it sends itself */
    assert_int_equal(hy_comm_alltoallv(w, send, sc, recv, rc), -1);

    int64_t v[3] = {5, -7, 1LL << 40};
    assert_int_equal(hy_comm_allreduce_max_i64(w, v, 3), 0);
    assert_int_equal(v[0], 5);
    assert_int_equal(v[1], -7);
    assert_true(v[2] == 1LL << 40);
    assert_int_equal(hy_comm_barrier(w), 0);

    /* zero bytes and NULL buffers are fine */
    assert_int_equal(hy_comm_bcast(w, NULL, 0, 0), 0);
    counts[0] = 0;
    assert_int_equal(hy_comm_allgatherv(w, NULL, NULL, counts), 0);
}

static void test_nonblocking(void **state)
{
    (void)state;
    struct hy_comm *w = hy_dist_world();
    char send[16] = "non-blocking", recv[16] = {0};
    size_t counts[1] = {13};
    struct hy_comm_req r = {0};
    assert_int_equal(hy_comm_test(&r), 1); /* not active */
    assert_int_equal(hy_comm_wait(&r), 0);
    hy_dist_stats_reset();
    assert_int_equal(hy_comm_iallgatherv(w, send, recv, counts, &r), 0);
    assert_int_equal(r.active, 1);
    assert_int_equal(r.kind, HY_COLL_ALLGATHER);
    assert_int_equal(r.bytes, 26);
    assert_int_equal(hy_comm_test(&r), 1);
    assert_int_equal(r.active, 0);
    assert_string_equal(recv, "non-blocking");
    assert_int_equal(hy_comm_wait(&r), 0); /* already complete */

    memset(recv, 0, sizeof(recv));
    size_t sc[1] = {4}, rc[1] = {4};
    assert_int_equal(hy_comm_ialltoallv(w, send, sc, recv, rc, &r), 0);
    assert_int_equal(r.kind, HY_COLL_ALLTOALL);
    assert_int_equal(hy_comm_wait(&r), 0);
    assert_int_equal(r.active, 0);
    assert_true(r.t_wait >= 0);
    assert_memory_equal(recv, "non-", 4);

    struct hy_dist_stats *st = hy_dist_stats();
    assert_int_equal(st->calls[HY_COLL_ALLGATHER], 1);
    assert_int_equal(st->calls[HY_COLL_ALLTOALL], 1);
    assert_int_equal(st->bytes[HY_COLL_ALLGATHER], 26);
    assert_int_equal(st->bytes[HY_COLL_ALLTOALL], 8);
    assert_int_equal(st->n, 2);
    assert_true(st->posted_sec >= 0 && st->hidden_sec >= 0 && st->hidden_sec <= st->posted_sec + 1e-9);
}

static void test_split_dup(void **state)
{
    (void)state;
    struct hy_comm *w = hy_dist_world(), *s = NULL, *d = NULL;
    assert_int_equal(hy_comm_split(w, 3, 0, &s), 0);
    assert_non_null(s);
    assert_ptr_not_equal(s, w);
    assert_int_equal(hy_comm_rank(s), 0);
    assert_int_equal(hy_comm_size(s), 1);
    assert_int_equal(hy_comm_dup(s, &d), 0);
    assert_int_equal(hy_comm_size(d), 1);
    char buf[4] = "abc", out[4] = {0};
    assert_int_equal(hy_comm_allgather(d, buf, 4, out), 0);
    assert_string_equal(out, "abc");
    hy_comm_free(d);
    hy_comm_free(s);
    hy_comm_free(NULL);
    hy_comm_free(w); /* the world is not owned: a no-op */
    assert_int_equal(hy_comm_size(hy_dist_world()), 1);
    assert_int_equal(hy_comm_split(w, -2, 0, &s), -1);
    assert_null(s);
}

static void test_agree(void **state)
{
    (void)state;
    const char *keys[] = {"model", "dtype", "max-num-batched-tokens"};
    const char *vals[] = {"0123abcd", "bf16", "2048"};
    assert_int_equal(hy_dist_agree(hy_dist_world(), 3, keys, vals), 0);
    assert_int_equal(hy_dist_agree(hy_dist_world(), 0, NULL, NULL), 0);
}

static void test_stats_and_hash(void **state)
{
    (void)state;
    struct hy_comm *w = hy_dist_world();
    char a[64] = {0}, b[64];
    size_t counts[1] = {20};
    hy_dist_stats_reset();
    struct hy_dist_stats *st = hy_dist_stats();
    assert_string_equal(st->last, "none");
    assert_int_equal(st->n, 0);
    const uint64_t h0 = st->log_hash;

    assert_int_equal(hy_comm_bcast(w, a, 16, 0), 0);
    const uint64_t h1 = st->log_hash;
    assert_true(h1 != h0);
    assert_string_equal(st->last, "bcast");
    assert_int_equal(hy_comm_allgatherv(w, a, b, counts), 0);
    const uint64_t h2 = st->log_hash;
    assert_true(h2 != h1);
    assert_string_equal(st->last, "allgather");
    assert_int_equal(hy_comm_gatherv(w, a, b, counts, 0), 0);
    assert_string_equal(st->last, "gather");
    int64_t v[2] = {1, 2};
    assert_int_equal(hy_comm_allreduce_max_i64(w, v, 2), 0);
    assert_int_equal(hy_comm_barrier(w), 0);
    assert_string_equal(st->last, "barrier");

    assert_int_equal(st->n, 5);
    assert_int_equal(st->calls[HY_COLL_BCAST], 1);
    assert_int_equal(st->calls[HY_COLL_ALLGATHER], 1);
    assert_int_equal(st->calls[HY_COLL_GATHER], 1);
    assert_int_equal(st->calls[HY_COLL_ALLREDUCE], 1);
    assert_int_equal(st->calls[HY_COLL_BARRIER], 1);
    assert_int_equal(st->bytes[HY_COLL_BCAST], 16);
    assert_int_equal(st->bytes[HY_COLL_ALLGATHER], 40); /* 20 sent + 20 received */
    assert_int_equal(st->bytes[HY_COLL_GATHER], 40);    /* root: sent + received */
    assert_int_equal(st->bytes[HY_COLL_ALLREDUCE], 32);
    assert_int_equal(st->bytes[HY_COLL_BARRIER], 0);
    for (int k = 0; k < HY_COLL_COUNT; k++)
        assert_true(st->sec[k] >= 0);
    const uint64_t h5 = st->log_hash;

    /* the same sequence after a reset gives the same hash; another payload size does not */
    hy_dist_stats_reset();
    assert_int_equal(hy_comm_bcast(w, a, 16, 0), 0);
    assert_true(st->log_hash == h1);
    assert_int_equal(hy_comm_allgatherv(w, a, b, counts), 0);
    assert_true(st->log_hash == h2);
    hy_dist_stats_reset();
    assert_int_equal(hy_comm_bcast(w, a, 17, 0), 0);
    assert_true(st->log_hash != h1);
    /* the kind counts too: a barrier is not a bcast of 0 bytes */
    hy_dist_stats_reset();
    assert_int_equal(hy_comm_bcast(w, a, 0, 0), 0);
    const uint64_t hb = st->log_hash;
    hy_dist_stats_reset();
    assert_int_equal(hy_comm_barrier(w), 0);
    assert_true(st->log_hash != hb);
    assert_true(h5 != h2);
}

static void test_fault_injection(void **state)
{
    (void)state;
    struct hy_comm *w = hy_dist_world();
    char send[4] = "abc", recv[4];
    hy_dist_stats_reset();
    hy_dist_fault_skip(0, 2); /* the 2nd collective from now, on rank 0 (this one) */
    memset(recv, 0, 4);
    assert_int_equal(hy_comm_allgather(w, send, 4, recv), 0);
    assert_string_equal(recv, "abc");
    memset(recv, 0, 4);
    assert_int_equal(hy_comm_allgather(w, send, 4, recv), 0); /* skipped: nothing copied */
    assert_int_equal(recv[0], 0);
    assert_int_equal(hy_dist_stats()->n, 1);
    assert_int_equal(hy_comm_allgather(w, send, 4, recv), 0);
    assert_string_equal(recv, "abc");
    assert_int_equal(hy_dist_stats()->n, 2);

    /* a non-blocking one skipped: inactive at once */
    hy_dist_fault_skip(0, 1);
    struct hy_comm_req r = {0};
    size_t counts[1] = {4};
    memset(recv, 0, 4);
    assert_int_equal(hy_comm_iallgatherv(w, send, recv, counts, &r), 0);
    assert_int_equal(r.active, 0);
    assert_int_equal(hy_comm_wait(&r), 0);
    assert_int_equal(recv[0], 0);

    /* another rank's fault leaves this one alone; a negative rank disarms */
    hy_dist_fault_skip(1, 1);
    assert_int_equal(hy_comm_allgather(w, send, 4, recv), 0);
    assert_string_equal(recv, "abc");
    hy_dist_fault_skip(-1, 0);
    memset(recv, 0, 4);
    assert_int_equal(hy_comm_allgather(w, send, 4, recv), 0);
    assert_string_equal(recv, "abc");
}

static void test_env(void **state)
{
    (void)state;
    struct hy_env_params ep;
    unsetenv("HYINFER_DIST_FAULT");
    unsetenv("HYINFER_DIST_STEP_TIMEOUT");
    assert_int_equal(hy_env_params_read(&ep), 0);
    assert_int_equal(ep.dist_fault_rank, -1);
    assert_true(ep.dist_step_timeout == 600.0);

    setenv("HYINFER_DIST_FAULT", "skip:1:3", 1);
    setenv("HYINFER_DIST_STEP_TIMEOUT", "2.5", 1);
    assert_int_equal(hy_env_params_read(&ep), 0);
    assert_int_equal(ep.dist_fault_rank, 1);
    assert_true(ep.dist_fault_nth == 3);
    assert_true(ep.dist_step_timeout == 2.5);

    static const char *const bad_fault[] = {"skip:1",   "skip:1:0",  "skip:-1:3", "skip::3",   "skip:1:3x",
                                            "drop:1:3", "skip:1: 3", "skip:+1:3", "skip:1:3:4"};
    for (size_t i = 0; i < sizeof(bad_fault) / sizeof(bad_fault[0]); i++) {
        setenv("HYINFER_DIST_FAULT", bad_fault[i], 1);
        assert_int_equal(hy_env_params_read(&ep), -1);
        assert_non_null(strstr(hy_err_msg(), "HYINFER_DIST_FAULT"));
        assert_int_equal(ep.dist_fault_rank, -1);
    }
    unsetenv("HYINFER_DIST_FAULT");
    static const char *const bad_timeout[] = {"0", "-1", "abc", "1s", "inf", "nan"};
    for (size_t i = 0; i < sizeof(bad_timeout) / sizeof(bad_timeout[0]); i++) {
        setenv("HYINFER_DIST_STEP_TIMEOUT", bad_timeout[i], 1);
        assert_int_equal(hy_env_params_read(&ep), -1);
        assert_non_null(strstr(hy_err_msg(), "HYINFER_DIST_STEP_TIMEOUT"));
        assert_true(ep.dist_step_timeout == 600.0);
    }
    unsetenv("HYINFER_DIST_STEP_TIMEOUT");
}

static void test_watchdog_idle(void **state)
{
    (void)state;
    /* a step well within its deadline, and idle time outside steps, never trip it */
    assert_int_equal(hy_dist_watchdog_start(0.3), 0);
    hy_dist_step_begin();
    assert_int_equal(hy_comm_barrier(hy_dist_world()), 0);
    hy_dist_step_end();
    struct timespec ts = {0, 500 * 1000 * 1000};
    nanosleep(&ts, NULL);
    assert_int_equal(hy_dist_watchdog_start(0), 0); /* off */
    hy_dist_step_begin();
    nanosleep(&ts, NULL);
    hy_dist_step_end();
    hy_dist_finalize(); /* no MPI: stops the watchdog only */
    assert_int_equal(hy_comm_size(hy_dist_world()), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank_world),  cmocka_unit_test(test_copies), cmocka_unit_test(test_nonblocking),
        cmocka_unit_test(test_split_dup),       cmocka_unit_test(test_agree),  cmocka_unit_test(test_stats_and_hash),
        cmocka_unit_test(test_fault_injection), cmocka_unit_test(test_env),    cmocka_unit_test(test_watchdog_idle),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
