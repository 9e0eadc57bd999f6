/* serve_load.h - the load generator of `hyinfer bench serve` (the CLI, cli/cmd_bench_serve.c, parses
 * flags, draws the lengths and prints): concurrent clients streaming /v1/completions from a running
 * server over plain HTTP/1.0, each request's TTFT / end times and output tokens recorded. */
#ifndef HY_BENCH_SERVE_LOAD_H
#define HY_BENCH_SERVE_LOAD_H

#include <pthread.h>
#include <stdint.h>

/* One request: lengths set by the caller, the rest filled by the client that ran it. */
struct hy_bench_serve_req {
    int32_t n_in, n_out;
    double t_start, t_first, t_end;
    int64_t out_tokens;
    int ok;
    char err[160];
};

/* The run: the server, the requests (caller-owned), the next one to take (under mu), the seed of the
 * prompts' token ids. The caller initializes mu. */
struct hy_bench_serve {
    const char *host, *model, *api_key;
    int port;
    struct hy_bench_serve_req *reqs;
    int n;
    int next;
    uint64_t seed;
    pthread_mutex_t mu;
};

/* splitmix64: the next value of the generator at *s. */
uint64_t hy_bench_serve_rand(uint64_t *s);

/* Runs the n requests of b with conc client threads, each taking the next request until none is left.
 * Returns 0 (a request that failed has ok = 0 and err), or -1 with hy_err_msg() when threads cannot
 * start (those that did finish first). */
int hy_bench_serve_drive(struct hy_bench_serve *b, int conc);

/* The p-th percentile (0..100, nearest rank) of v[n], sorted in place; 0 when n <= 0. */
double hy_bench_serve_pct(double *v, int n, double p);

#endif
