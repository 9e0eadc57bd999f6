/* test_task_rows.c - the task size of decode-sized matmuls and grouped passes (kernels/task_rows.h):
 *  - rows per task are a multiple of 4 and never under the floor;
 *  - a task streams at most HY_TASK_BYTES unless the floor asks for more;
 *  - each thread gets at least HY_TASKS_PER_THREAD tasks of a pass while the floor allows it;
 *  - inside a parallel region the team's size counts, outside omp_get_max_threads();
 *  - hy_task_groups: 4-row groups of a whole matrix (a BF16 lm_head, FP8 and MXFP4 matrices,
 *    matrices too small to split), scales counted in the row bytes.
 * That the split never changes values is tested per kernel (test_kernels*.c: 1 vs 2 threads, bands)
 * and end to end (test_batch_invariance.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/task_rows.h"

#include <omp.h>

/* Checks the invariants of one hy_task_rows answer for `threads` threads. */
static void check_rows(int64_t row_bytes, int64_t pass_bytes, int64_t min_rows, int threads)
{
    const int64_t r = hy_task_rows(row_bytes, pass_bytes, min_rows);
    assert_true(r >= min_rows);
    assert_int_equal(r % 4, 0);
    if (r > min_rows) {
        assert_true(r * row_bytes <= HY_TASK_BYTES);
        /* the pass still gives every thread HY_TASKS_PER_THREAD tasks of r rows */
        assert_true(r * row_bytes * HY_TASKS_PER_THREAD * threads <= pass_bytes);
        /* and r is the largest multiple of 4 that does both */
        const int64_t r4 = r + 4;
        assert_true(r4 * row_bytes > HY_TASK_BYTES || r4 * row_bytes * HY_TASKS_PER_THREAD * threads > pass_bytes);
    }
}

static void test_rows_invariants(void **state)
{
    (void)state;
    static const int64_t row_bytes[] = {1, 7, 64, 768, 2112, 4096, 4352, 8192, 16384, 1 << 20, 5 << 20};
    static const int64_t passes[] = {0, 1, 4096, 1 << 20, 13 << 20, 100 << 20, 990LL << 20, 40LL << 30};
    static const int64_t floors[] = {4, 16, 64};
    static const int threads[] = {1, 2, 3, 8};
    for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
        omp_set_num_threads(threads[t]);
        for (size_t i = 0; i < sizeof(row_bytes) / sizeof(row_bytes[0]); i++)
            for (size_t j = 0; j < sizeof(passes) / sizeof(passes[0]); j++)
                for (size_t k = 0; k < sizeof(floors) / sizeof(floors[0]); k++)
                    check_rows(row_bytes[i], passes[j], floors[k], threads[t]);
    }
    omp_set_num_threads(2);
    assert_int_equal(hy_task_rows(0, 1 << 30, 16), 16); /* no row size: the floor */
    assert_int_equal(hy_task_rows(-5, 1 << 30, 16), 16);
}

static void test_rows_examples(void **state)
{
    (void)state;
    omp_set_num_threads(2);
    /* BF16 lm_head 120832 x 4096: 4 MiB tasks = 512 rows of 8 KiB */
    assert_int_equal(hy_task_rows(8192, 120832LL * 8192, 64), 512);
    /* 8 x (gate + up) BF16 experts 1536 x 4096 at batch 1: 25 MiB each -> 4 MiB tasks of 256 rows */
    assert_int_equal(hy_task_rows(2 * 8192, 8LL * 2 * 1536 * 8192, 16), 256);
    /* one 1024 x 4096 BF16 matrix (8 MiB): 8 tasks of 1 MiB for 2 threads */
    assert_int_equal(hy_task_rows(8192, 1024LL * 8192, 16), 128);
    omp_set_num_threads(8);
    assert_int_equal(hy_task_rows(8192, 1024LL * 8192, 16), 32);
    assert_int_equal(hy_task_rows(8192, 100LL * 8192, 16), 16); /* the floor */
}

static void test_team_size(void **state)
{
    (void)state;
    omp_set_num_threads(4);
    const int64_t outside = hy_task_rows(8192, 1024LL * 8192, 4);
    assert_int_equal(outside, 64); /* 4 threads x 4 tasks of 64 rows */
    int64_t inside = -1;
    int team = 0;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        {
            team = omp_get_num_threads();
            inside = hy_task_rows(8192, 1024LL * 8192, 4);
        }
    }
    /* the team's size counts (2, or 1 where the runtime gives fewer threads): 4 tasks per thread */
    assert_true(team == 1 || team == 2);
    assert_int_equal(inside, 1024 / (4 * team));
    int64_t nested = -1;
#pragma omp parallel num_threads(1) /* an inactive region: a team of 1 */
    nested = hy_task_rows(8192, 1024LL * 8192, 4);
    assert_int_equal(nested, 256);
    omp_set_num_threads(2);
}

static void test_groups(void **state)
{
    (void)state;
    omp_set_num_threads(2);
    struct hy_tensor lm = {.dtype = HY_DTYPE_BF16, .rows = 120832, .cols = 4096};
    assert_int_equal(hy_task_groups(&lm), 512 / 4);
    struct hy_tensor fp8 = {.dtype = HY_DTYPE_F8_E4M3, .qscheme = HY_QS_PER_TENSOR, .rows = 8192, .cols = 4096};
    assert_int_equal(hy_task_row_bytes(&fp8), 4096);
    assert_int_equal(hy_task_groups(&fp8), 1024 / 4); /* 32 MiB / 8 tasks: 4 MiB of 4 KiB rows */
    struct hy_tensor mx4 = {.dtype = HY_DTYPE_F4_E2M1, .qscheme = HY_QS_MX32, .rows = 4096, .cols = 1536};
    assert_int_equal(hy_task_row_bytes(&mx4), 768 + 48); /* E2M1 pairs + one E8M0 byte per 32 */
    /* 3.19 MiB / 8 tasks = 417792 bytes: 512 rows of 816 bytes */
    assert_int_equal(hy_task_groups(&mx4), 512 / 4);
    struct hy_tensor tiny = {.dtype = HY_DTYPE_F32, .rows = 96, .cols = 96};
    assert_int_equal(hy_task_groups(&tiny), 16); /* the 64-row floor */
    struct hy_tensor empty = {.dtype = HY_DTYPE_BF16, .rows = 0, .cols = 4096};
    assert_int_equal(hy_task_groups(&empty), 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_invariants),
        cmocka_unit_test(test_rows_examples),
        cmocka_unit_test(test_team_size),
        cmocka_unit_test(test_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
