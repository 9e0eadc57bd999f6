/* metrics.h - Prometheus text exposition of the server and engine counters (GET /metrics).
 *
 * Names, types, labels and histogram buckets are vLLM's (vllm/v1/metrics/loggers.py), so the
 * dashboards and alerts written for `vllm serve` work unchanged: every series carries
 * model_name="<served model name>"; gauges vllm:num_requests_running, vllm:num_requests_waiting,
 * vllm:kv_cache_usage_perc (and its older name vllm:gpu_cache_usage_perc); counters
 * vllm:prompt_tokens_total, vllm:generation_tokens_total, vllm:num_preemptions_total,
 * vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total (tokens),
 * vllm:request_success_total{finished_reason="stop|length|abort"}, vllm:spec_decode_* (with
 * speculative decoding on); histograms vllm:time_to_first_token_seconds,
 * vllm:inter_token_latency_seconds (and its older name vllm:time_per_output_token_seconds),
 * vllm:request_time_per_output_token_seconds, vllm:e2e_request_latency_seconds,
 * vllm:request_decode_time_seconds, vllm:request_prompt_tokens, vllm:request_generation_tokens,
 * vllm:request_params_n, vllm:request_params_max_tokens. What vLLM has no name for stays under
 * "hyinfer:" (KV block counts, prefix-cache hit rate, engine steps, largest batch, prefill chunks,
 * the speculative gate, HTTP errors and requests). Pure: no locking here; the caller passes
 * consistent copies.
 */
#ifndef HY_SERVER_METRICS_H
#define HY_SERVER_METRICS_H

#include "engine/engine.h"
#include "base/sbuf.h"

#include <stdint.h>

#define HY_HIST_MAX_BOUNDS 24

struct hy_histogram {
    int n_bounds; /* upper bounds, ascending */
    double bounds[HY_HIST_MAX_BOUNDS];
    uint64_t counts[HY_HIST_MAX_BOUNDS + 1]; /* per bucket (not cumulative); last = +Inf */
    double sum;
    uint64_t count;
};

/* Sets the bucket bounds (n <= HY_HIST_MAX_BOUNDS, ascending; more are dropped) and zeroes the counts. */
void hy_histogram_init(struct hy_histogram *h, const double *bounds, int n);
void hy_histogram_observe(struct hy_histogram *h, double v);

/* Adds src's observations to dst (same bounds: src was initialised like dst). */
void hy_histogram_merge(struct hy_histogram *dst, const struct hy_histogram *src);

/* vLLM's inter-token latency buckets (seconds), for a per-request histogram merged later. */
void hy_histogram_init_itl(struct hy_histogram *h);

struct hy_server_metrics {
    struct hy_histogram ttft;              /* seconds, per choice: first token - request arrival */
    struct hy_histogram itl;               /* seconds, each gap between tokens of a choice */
    struct hy_histogram tpot;              /* seconds, per choice: decode time / (tokens - 1) */
    struct hy_histogram e2e;               /* seconds, per request: response done - arrival */
    struct hy_histogram decode;            /* seconds, per choice: last token - first token */
    struct hy_histogram prompt_tokens;     /* tokens, per choice */
    struct hy_histogram gen_tokens;        /* tokens, per choice */
    struct hy_histogram params_n;          /* the request's n */
    struct hy_histogram params_max_tokens; /* the request's max_tokens, when given */
    uint64_t requests_ok[3];               /* choices finished with "stop" (tool_calls too), "length", "abort" */
    uint64_t requests_error;               /* rejected with an HTTP error */
    uint64_t http_requests;                /* all HTTP requests seen */
};

/* vLLM's buckets; the token-count histograms get 1-2-5 buckets up to 1,000,000 until
 * hy_server_metrics_set_max_model_len. */
void hy_server_metrics_init(struct hy_server_metrics *m);

/* Re-buckets the token-count histograms to vLLM's 1-2-5 series up to max_model_len (tokens);
 * call before any observation (it zeroes them). */
void hy_server_metrics_set_max_model_len(struct hy_server_metrics *m, int32_t max_model_len);

/* Appends the exposition text (Prometheus text format 0.0.4). model_name labels the series. Returns
 * 0 or -1 on OOM. */
int hy_metrics_render(const struct hy_server_metrics *m, const struct hy_engine_stats *st, const char *model_name,
                      struct hy_sbuf *out);

#endif
