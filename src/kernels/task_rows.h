/* task_rows.h - how many weight rows one dynamically scheduled task of a decode-sized matmul takes.
 *
 * Decode matmuls (a few tokens) stream each weight row once; the threads take tasks of consecutive
 * rows from an OpenMP dynamic schedule, so a thread that loses its core on a shared machine does not
 * hold up the step. Each task starts its row streams cold (the first 4-row tile has nothing
 * prefetched), which costs about a DRAM round trip or two per task, so small tasks read measurably
 * slower (docs/tuning.md, decode task size). So a task streams about HY_TASK_BYTES,
 * fewer when that would leave a thread under HY_TASKS_PER_THREAD tasks of the pass (balance on busy
 * or many-core machines), and never fewer rows than the caller's floor. Which rows a task computes
 * never changes their values: every kernel keeps one fixed summation order per output whatever the split.
 */
#ifndef HY_KERNELS_TASK_ROWS_H
#define HY_KERNELS_TASK_ROWS_H

#include "quant/tensor.h"

#include <omp.h>
#include <stdint.h>

#define HY_TASK_BYTES ((int64_t)4 << 20) /* weight bytes one task streams, at most */
#define HY_TASKS_PER_THREAD 4            /* tasks of a pass per thread, at least (while rows allow) */

/* Rows per task (a multiple of 4, the kernels' row tiles) for a pass that streams pass_bytes of weights
 * (all matrices of the pass, scales included) in rows of row_bytes each; min_rows: the floor (> 0, a
 * multiple of 4). Threads: the team's size inside a parallel region (active or not: a team of 1 is 1),
 * else omp_get_max_threads(). */
static inline int64_t hy_task_rows(int64_t row_bytes, int64_t pass_bytes, int64_t min_rows)
{
    if (row_bytes <= 0)
        return min_rows;
    const int threads = omp_get_level() > 0 ? omp_get_num_threads() : omp_get_max_threads();
    int64_t bytes = pass_bytes / ((int64_t)HY_TASKS_PER_THREAD * threads);
    if (bytes > HY_TASK_BYTES)
        bytes = HY_TASK_BYTES;
    const int64_t r = bytes / row_bytes / 4 * 4;
    return r > min_rows ? r : min_rows;
}

/* Bytes one row of W streams, its share of the scales included. */
static inline int64_t hy_task_row_bytes(const struct hy_tensor *W)
{
    return hy_tensor_bytes(W) / (W->rows > 0 ? W->rows : 1);
}

/* Groups of 4 rows per task when one decode-sized matmul covers all of W's rows (floor: 16 groups,
 * the 64 rows every decode loop took before). */
static inline int64_t hy_task_groups(const struct hy_tensor *W)
{
    return hy_task_rows(hy_task_row_bytes(W), hy_tensor_bytes(W), 64) / 4;
}

#endif
