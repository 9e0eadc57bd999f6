/* metrics.h - Prometheus text exposition of the server and engine counters (GET /metrics).
 *
 * Names follow vLLM's with a "hyinfer:" prefix: hyinfer:num_requests_running,
 * hyinfer:num_requests_waiting, hyinfer:kv_cache_usage_perc, hyinfer:prefix_cache_queries_total,
 * hyinfer:prefix_cache_hits_total, hyinfer:prefix_cache_hit_rate, hyinfer:num_preemptions_total,
 * hyinfer:prompt_tokens_total, hyinfer:generation_tokens_total, histograms
 * hyinfer:time_to_first_token_seconds, hyinfer:time_per_output_token_seconds,
 * hyinfer:e2e_request_latency_seconds, and debug gauges (steps, most sequences in one step,
 * prefill chunks, KV blocks). Pure: no locking here; the caller passes consistent copies.
 */
#ifndef HY_SERVER_METRICS_H
#define HY_SERVER_METRICS_H

#include "engine/engine.h"
#include "base/sbuf.h"

#include <stdint.h>

#define HY_HIST_MAX_BOUNDS 24

struct hy_histogram {
    int n_bounds; /* upper bounds (seconds), ascending */
    double bounds[HY_HIST_MAX_BOUNDS];
    uint64_t counts[HY_HIST_MAX_BOUNDS + 1]; /* per bucket (not cumulative); last = +Inf */
    double sum;
    uint64_t count;
};

/* Sets the bucket bounds (n <= HY_HIST_MAX_BOUNDS, ascending) and zeroes the counts. */
void hy_histogram_init(struct hy_histogram *h, const double *bounds, int n);
void hy_histogram_observe(struct hy_histogram *h, double v);

struct hy_server_metrics {
    struct hy_histogram ttft, tpot, e2e; /* seconds */
    uint64_t requests_ok[3];             /* finished with "stop", "length", "abort" */
    uint64_t requests_error;             /* rejected with an HTTP error */
    uint64_t http_requests;              /* all HTTP requests seen */
};

/* Default buckets (vLLM-like). */
void hy_server_metrics_init(struct hy_server_metrics *m);

/* Appends the exposition text. model_name labels the series. Returns 0 or -1 on OOM. */
int hy_metrics_render(const struct hy_server_metrics *m, const struct hy_engine_stats *st, const char *model_name,
                      struct hy_sbuf *out);

#endif
