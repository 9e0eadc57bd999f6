/* kernel_bench.c - micro-benchmark of the matmul kernels per ISA level and thread count (not a test).
 * Build: make && gcc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Isrc tools/kernel_bench.c build/libhyinfer.a \
 *          $(pkg-config --libs libpcre2-8 jansson yaml-0.1) -lm -o build/kernel_bench
 * Run:   nice build/kernel_bench [reps]
 * GEMV figures rotate over 3 weight matrices so the 32 MiB L3 does not hold them (DRAM-bound).
 * Figures are best-of-reps wall time; with 1 thread also "cpu": best-of-reps thread CPU time, which
 * leaves out time the thread was descheduled (useful on a shared, oversubscribed machine). */
#include "kernels/kernel_table.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double best_cpu;

static struct hy_tensor mk(int64_t N, int64_t K)
{
    struct hy_tensor W = {.dtype = HY_DTYPE_BF16, .rows = N, .cols = K};
    uint16_t *d = malloc((size_t)(N * K) * 2);
    for (int64_t i = 0; i < N * K; i++)
        d[i] = hy_f32_to_bf16((float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f);
    W.data = d;
    return W;
}

/* best seconds per call over reps, rotating over nW matrices */
static double run(const struct hy_kernel_table *k, struct hy_tensor *W, int nW, int64_t T, int reps)
{
    float *x = malloc((size_t)(T * W[0].cols) * 4), *y = malloc((size_t)(T * W[0].rows) * 4);
    for (int64_t i = 0; i < T * W[0].cols; i++)
        x[i] = (float)(i % 7) * 0.1f;
    k->matmul(y, x, T, &W[0]);
    double best = 1e30;
    best_cpu = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now(), c0 = cpu_now();
        k->matmul(y, x, T, &W[r % nW]);
        double dt = now() - t0, dc = cpu_now() - c0;
        if (dt < best)
            best = dt;
        if (dc < best_cpu)
            best_cpu = dc;
    }
    free(x);
    free(y);
    return best;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 10;
    struct hy_tensor g[3] = {mk(4096, 4096), mk(4096, 4096), mk(4096, 4096)};
    struct hy_tensor lm[3] = {mk(128192, 128), mk(128192, 128), mk(128192, 128)};
    struct hy_tensor gm[1] = {mk(4096, 4096)};
    for (int isa = 0; isa < HY_ISA_COUNT; isa++) {
        struct hy_kernel_table k;
        if (hy_kernels_table_for((enum hy_isa)isa, &k))
            continue;
        for (int th = 1; th <= 2; th++) {
            omp_set_num_threads(th);
            double a = run(&k, g, 3, 1, reps), ac = best_cpu;
            double b = run(&k, lm, 3, 1, reps), bc = best_cpu;
            double c = run(&k, gm, 1, 128, isa == HY_ISA_REF ? 2 : 4), cc = best_cpu;
            printf("%-5s threads=%d  gemv bf16 4096x4096: %6.2f GB/s  lm_head 128192x128: %6.2f GB/s  "
                   "gemm T=128 4096x4096: %6.1f GFLOP/s\n",
                   k.name, th, 4096.0 * 4096 * 2 / a / 1e9, 128192.0 * 128 * 2 / b / 1e9,
                   2.0 * 128 * 4096 * 4096 / c / 1e9);
            if (th == 1)
                printf("%-5s threads=1  (cpu) gemv %6.2f GB/s  lm_head %6.2f GB/s  gemm %6.1f GFLOP/s\n", k.name,
                       4096.0 * 4096 * 2 / ac / 1e9, 128192.0 * 128 * 2 / bc / 1e9, 2.0 * 128 * 4096 * 4096 / cc / 1e9);
            fflush(stdout);
        }
    }
    return 0;
}
