/* metrics.c - Prometheus text format. */
#include "server/metrics.h"

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

void hy_server_metrics_init(struct hy_server_metrics *m)
{
    static const double ttft[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                  0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
    static const double tpot[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,
                                  0.4,   0.5,   0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0};
    static const double e2e[] = {0.01, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,
                                 5.0,  10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0};
    memset(m, 0, sizeof(*m));
    hy_histogram_init(&m->ttft, ttft, (int)(sizeof(ttft) / sizeof(ttft[0])));
    hy_histogram_init(&m->tpot, tpot, (int)(sizeof(tpot) / sizeof(tpot[0])));
    hy_histogram_init(&m->e2e, e2e, (int)(sizeof(e2e) / sizeof(e2e[0])));
}

static int render_hist(struct hy_sbuf *o, const char *name, const char *help, const struct hy_histogram *h,
                       const char *lbl)
{
    int rc = hy_sbuf_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n_bounds; i++) {
        cum += h->counts[i];
        rc |= hy_sbuf_printf(o, "%s_bucket{%s,le=\"%g\"} %llu\n", name, lbl, h->bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[h->n_bounds];
    rc |= hy_sbuf_printf(o, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, lbl, (unsigned long long)cum);
    rc |= hy_sbuf_printf(o, "%s_sum{%s} %.9g\n%s_count{%s} %llu\n", name, lbl, h->sum, name, lbl,
                         (unsigned long long)h->count);
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
    rc |= metric(o, "hyinfer:num_requests_running", "gauge", "Requests in the running batch.", lbl, st->num_running);
    rc |= metric(o, "hyinfer:num_requests_waiting", "gauge", "Requests waiting to be scheduled.", lbl, st->num_waiting);
    rc |= metric(o, "hyinfer:kv_cache_usage_perc", "gauge", "KV cache usage (1 = all blocks referenced).", lbl,
                 st->kv_usage);
    rc |=
        metric(o, "hyinfer:kv_cache_blocks_total", "gauge", "KV cache blocks in the pool.", lbl, st->num_blocks_total);
    rc |= metric(o, "hyinfer:kv_cache_blocks_used", "gauge", "KV cache blocks referenced by running requests.", lbl,
                 st->num_blocks_used);
    rc |= metric(o, "hyinfer:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
                 lbl, (double)st->prefix_queries);
    rc |= metric(o, "hyinfer:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.", lbl,
                 (double)st->prefix_hits);
    rc |= metric(o, "hyinfer:prefix_cache_hit_rate", "gauge", "prefix_cache_hits_total / prefix_cache_queries_total.",
                 lbl, hit_rate);
    rc |= metric(o, "hyinfer:num_preemptions_total", "counter", "Requests preempted (recomputed later).", lbl,
                 (double)st->num_preemptions);
    rc |=
        metric(o, "hyinfer:prompt_tokens_total", "counter", "Prompt tokens processed.", lbl, (double)st->prompt_tokens);
    rc |= metric(o, "hyinfer:generation_tokens_total", "counter", "Tokens generated.", lbl,
                 (double)st->generation_tokens);
    rc |= metric(o, "hyinfer:engine_steps_total", "counter", "Engine steps run.", lbl, (double)st->num_steps);
    rc |= metric(o, "hyinfer:max_batch_seqs", "gauge", "Most sequences batched in one step so far.", lbl,
                 st->max_batch_seqs);
    rc |= metric(o, "hyinfer:prompt_chunks_total", "counter", "Prefill chunks scheduled (> prompts when chunking).",
                 lbl, (double)st->prompt_chunks);
    static const char *const reasons[3] = {"stop", "length", "abort"};
    if (st->num_speculative_tokens > 0) { /* vLLM's spec_decode counters, under our prefix */
        const struct hy_spec_stats *sp = &st->spec;
        rc |= metric(o, "hyinfer:spec_decode_num_drafts_total", "counter", "Verify rounds that carried drafts.", lbl,
                     (double)sp->num_drafts);
        rc |= metric(o, "hyinfer:spec_decode_num_draft_tokens_total", "counter", "Draft tokens verified.", lbl,
                     (double)sp->num_draft_tokens);
        rc |= metric(o, "hyinfer:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.", lbl,
                     (double)sp->num_accepted_tokens);
        rc |=
            hy_sbuf_printf(o, "# HELP hyinfer:spec_decode_num_accepted_tokens_per_pos_total Accepted draft tokens "
                              "by position in the draft.\n# TYPE hyinfer:spec_decode_num_accepted_tokens_per_pos_total "
                              "counter\n");
        for (int32_t i = 0; i < st->num_speculative_tokens && i < HY_SPEC_MAX_TOKENS; i++)
            rc |= hy_sbuf_printf(o, "hyinfer:spec_decode_num_accepted_tokens_per_pos_total{%s,position=\"%d\"} %llu\n",
                                 lbl, i, (unsigned long long)sp->num_accepted_tokens_per_pos[i]);
        rc |= metric(o, "hyinfer:spec_decode_drafting", "gauge",
                     "1 while the gate lets requests draft, 0 while it falls back to plain decode.", lbl,
                     (double)sp->drafting);
    }
    rc |= hy_sbuf_printf(o, "# HELP hyinfer:request_success_total Finished requests by finish reason.\n"
                            "# TYPE hyinfer:request_success_total counter\n");
    for (int i = 0; i < 3; i++)
        rc |= hy_sbuf_printf(o, "hyinfer:request_success_total{%s,finished_reason=\"%s\"} %llu\n", lbl, reasons[i],
                             (unsigned long long)m->requests_ok[i]);
    rc |= metric(o, "hyinfer:request_errors_total", "counter", "Requests answered with an HTTP error.", lbl,
                 (double)m->requests_error);
    rc |= metric(o, "hyinfer:http_requests_total", "counter", "HTTP requests received.", lbl, (double)m->http_requests);
    rc |= render_hist(o, "hyinfer:time_to_first_token_seconds", "Time to first token.", &m->ttft, lbl);
    rc |= render_hist(o, "hyinfer:time_per_output_token_seconds", "Time per output token after the first.", &m->tpot,
                      lbl);
    rc |= render_hist(o, "hyinfer:e2e_request_latency_seconds", "End-to-end request latency.", &m->e2e, lbl);
    return rc ? -1 : 0;
}
