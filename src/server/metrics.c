/* metrics.c - Prometheus text format, vLLM's metric names and buckets. */
#include "server/metrics.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void hy_histogram_init(struct hy_histogram *h, const double *bounds, int n)
{
    memset(h, 0, sizeof(*h));
    if (n > HY_HIST_MAX_BOUNDS)
        n = HY_HIST_MAX_BOUNDS;
    h->n_bounds = n;
    memcpy(h->bounds, bounds, (size_t)n * sizeof(double));
}

void hy_histogram_observe(struct hy_histogram *h, double v)
{
    int i = 0;
    while (i < h->n_bounds && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

void hy_histogram_merge(struct hy_histogram *dst, const struct hy_histogram *src)
{
    for (int i = 0; i <= dst->n_bounds && i <= HY_HIST_MAX_BOUNDS; i++)
        dst->counts[i] += src->counts[i];
    dst->sum += src->sum;
    dst->count += src->count;
}

/* vllm/v1/metrics/loggers.py */
static const double k_ttft[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                                1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double k_itl[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                               0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double k_latency[] = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                   30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
static const double k_n[] = {1, 2, 5, 10, 20};
#define NB(a) ((int)(sizeof(a) / sizeof((a)[0])))

void hy_histogram_init_itl(struct hy_histogram *h)
{
    hy_histogram_init(h, k_itl, NB(k_itl));
}

/* vLLM's build_1_2_5_buckets(max): 1, 2, 5, 10, 20, 50, ... <= max. */
static void init_125(struct hy_histogram *h, double max)
{
    double b[HY_HIST_MAX_BOUNDS];
    int n = 0;
    for (double e = 1; n < HY_HIST_MAX_BOUNDS; e *= 10) {
        static const double mant[3] = {1, 2, 5};
        for (int k = 0; k < 3 && n < HY_HIST_MAX_BOUNDS; k++) {
            if (mant[k] * e > max)
                goto done;
            b[n++] = mant[k] * e;
        }
    }
done:
    hy_histogram_init(h, b, n);
}

void hy_server_metrics_set_max_model_len(struct hy_server_metrics *m, int32_t max_model_len)
{
    const double mx = max_model_len > 0 ? (double)max_model_len : 1e6;
    init_125(&m->prompt_tokens, mx);
    init_125(&m->gen_tokens, mx);
    init_125(&m->params_max_tokens, mx);
}

void hy_server_metrics_init(struct hy_server_metrics *m)
{
    memset(m, 0, sizeof(*m));
    hy_histogram_init(&m->ttft, k_ttft, NB(k_ttft));
    hy_histogram_init(&m->itl, k_itl, NB(k_itl));
    hy_histogram_init(&m->tpot, k_itl, NB(k_itl));
    hy_histogram_init(&m->e2e, k_latency, NB(k_latency));
    hy_histogram_init(&m->decode, k_latency, NB(k_latency));
    hy_histogram_init(&m->params_n, k_n, NB(k_n));
    hy_server_metrics_set_max_model_len(m, 0);
}

/* A bucket bound as prometheus_client writes it (Python's float repr: "1.0", "0.025", "2560.0"). */
static void fmt_bound(char *buf, size_t cap, double v)
{
    if (v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, cap, "%.1f", v);
    else
        snprintf(buf, cap, "%g", v);
}

static int render_hist(struct hy_sbuf *o, const char *name, const char *help, const struct hy_histogram *h,
                       const char *lbl)
{
    int rc = hy_sbuf_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    char b[40];
    for (int i = 0; i < h->n_bounds; i++) {
        cum += h->counts[i];
        fmt_bound(b, sizeof(b), h->bounds[i]);
        rc |= hy_sbuf_printf(o, "%s_bucket{%s,le=\"%s\"} %llu\n", name, lbl, b, (unsigned long long)cum);
    }
    cum += h->counts[h->n_bounds];
    rc |= hy_sbuf_printf(o, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, lbl, (unsigned long long)cum);
    rc |= hy_sbuf_printf(o, "%s_count{%s} %llu\n%s_sum{%s} %.9g\n", name, lbl, (unsigned long long)h->count, name, lbl,
                         h->sum);
    return rc ? -1 : 0;
}

static int metric(struct hy_sbuf *o, const char *name, const char *type, const char *help, const char *lbl, double v)
{
    return hy_sbuf_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %.17g\n", name, help, name, type, name, lbl, v);
}

int hy_metrics_render(const struct hy_server_metrics *m, const struct hy_engine_stats *st, const char *model_name,
                      struct hy_sbuf *o)
{
    char lbl[300];
    /* label values: escape backslash, quote and newline */
    size_t j = 0;
    const char *pre = "model_name=\"";
    memcpy(lbl, pre, strlen(pre));
    j = strlen(pre);
    for (const char *p = model_name; *p && j < sizeof(lbl) - 4; p++) {
        if (*p == '\\' || *p == '"') {
            lbl[j++] = '\\';
            lbl[j++] = *p;
        } else if (*p == '\n') {
            lbl[j++] = '\\';
            lbl[j++] = 'n';
        } else {
            lbl[j++] = *p;
        }
    }
    lbl[j++] = '"';
    lbl[j] = 0;
    double hit_rate = st->prefix_queries ? (double)st->prefix_hits / (double)st->prefix_queries : 0.0;
    int rc = 0;
    /* vLLM's names */
    rc |= metric(o, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", lbl,
                 st->num_running);
    rc |= metric(o, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", lbl,
                 st->num_waiting);
    rc |=
        metric(o, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", lbl, st->kv_usage);
    rc |= metric(o, "vllm:gpu_cache_usage_perc", "gauge",
                 "KV-cache usage. 1 means 100 percent usage (the older name of vllm:kv_cache_usage_perc).", lbl,
                 st->kv_usage);
    rc |= metric(o, "vllm:prefix_cache_queries_total", "counter",
                 "Prefix cache queries, in terms of number of queried tokens.", lbl, (double)st->prefix_queries);
    rc |= metric(o, "vllm:prefix_cache_hits_total", "counter",
                 "Prefix cache hits, in terms of number of cached tokens.", lbl, (double)st->prefix_hits);
    rc |= metric(o, "vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", lbl,
                 (double)st->num_preemptions);
    rc |= metric(o, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", lbl,
                 (double)st->prompt_tokens);
    rc |= metric(o, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", lbl,
                 (double)st->generation_tokens);
    static const char *const reasons[3] = {"stop", "length", "abort"};
    rc |= hy_sbuf_printf(o, "# HELP vllm:request_success_total Count of successfully processed requests.\n"
                            "# TYPE vllm:request_success_total counter\n");
    for (int i = 0; i < 3; i++)
        rc |= hy_sbuf_printf(o, "vllm:request_success_total{%s,finished_reason=\"%s\"} %llu\n", lbl, reasons[i],
                             (unsigned long long)m->requests_ok[i]);
    if (st->num_speculative_tokens > 0) {
        const struct hy_spec_stats *sp = &st->spec;
        rc |= metric(o, "vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.", lbl,
                     (double)sp->num_drafts);
        rc |= metric(o, "vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.", lbl,
                     (double)sp->num_draft_tokens);
        rc |= metric(o, "vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.", lbl,
                     (double)sp->num_accepted_tokens);
        rc |= hy_sbuf_printf(o, "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft "
                                "position.\n# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n");
        for (int32_t i = 0; i < st->num_speculative_tokens && i < HY_SPEC_MAX_TOKENS; i++)
            rc |= hy_sbuf_printf(o, "vllm:spec_decode_num_accepted_tokens_per_pos_total{%s,position=\"%d\"} %llu\n",
                                 lbl, i, (unsigned long long)sp->num_accepted_tokens_per_pos[i]);
    }
    rc |= render_hist(o, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &m->ttft,
                      lbl);
    rc |= render_hist(o, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &m->itl,
                      lbl);
    rc |= render_hist(o, "vllm:time_per_output_token_seconds",
                      "Histogram of time per output token in seconds (the older name of "
                      "vllm:inter_token_latency_seconds).",
                      &m->itl, lbl);
    rc |= render_hist(o, "vllm:request_time_per_output_token_seconds",
                      "Histogram of time_per_output_token_seconds per request.", &m->tpot, lbl);
    rc |= render_hist(o, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &m->e2e,
                      lbl);
    rc |= render_hist(o, "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                      &m->decode, lbl);
    rc |= render_hist(o, "vllm:request_prompt_tokens", "Number of prefill tokens processed.", &m->prompt_tokens, lbl);
    rc |=
        render_hist(o, "vllm:request_generation_tokens", "Number of generation tokens processed.", &m->gen_tokens, lbl);
    rc |= render_hist(o, "vllm:request_params_n", "Histogram of the n request parameter.", &m->params_n, lbl);
    rc |= render_hist(o, "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
                      &m->params_max_tokens, lbl);
    /* hyinfer's own (no vLLM equivalent) */
    rc |=
        metric(o, "hyinfer:kv_cache_blocks_total", "gauge", "KV cache blocks in the pool.", lbl, st->num_blocks_total);
    rc |= metric(o, "hyinfer:kv_cache_blocks_used", "gauge", "KV cache blocks referenced by running requests.", lbl,
                 st->num_blocks_used);
    rc |= metric(o, "hyinfer:prefix_cache_hit_rate", "gauge",
                 "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total.", lbl, hit_rate);
    rc |= metric(o, "hyinfer:engine_steps_total", "counter", "Engine steps run.", lbl, (double)st->num_steps);
    rc |= metric(o, "hyinfer:max_batch_seqs", "gauge", "Most sequences batched in one step so far.", lbl,
                 st->max_batch_seqs);
    rc |= metric(o, "hyinfer:prompt_chunks_total", "counter", "Prefill chunks scheduled (> prompts when chunking).",
                 lbl, (double)st->prompt_chunks);
    if (st->num_speculative_tokens > 0)
        rc |= metric(o, "hyinfer:spec_decode_drafting", "gauge",
                     "1 while the gate lets requests draft, 0 while it falls back to plain decode.", lbl,
                     (double)st->spec.drafting);
    rc |= metric(o, "hyinfer:request_errors_total", "counter", "Requests answered with an HTTP error.", lbl,
                 (double)m->requests_error);
    rc |= metric(o, "hyinfer:http_requests_total", "counter", "HTTP requests received.", lbl, (double)m->http_requests);
    return rc ? -1 : 0;
}
