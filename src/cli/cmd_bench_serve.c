/* cmd_bench_serve.c - `hyinfer bench serve`: drives a running OpenAI-compatible server with a
 * fixed concurrency and a random prompt/output length distribution (vLLM `bench serve --dataset-name
 * random` style) and reports request throughput, output tokens/s, TTFT and TPOT p50/p99.
 *
 * Requests go to /v1/completions with token-id prompts (ids drawn from [0, 256), which every
 * byte-level vocabulary has), ignore_eos and max_tokens = the drawn output length, stream: true
 * with include_usage. TTFT = first SSE data event; TPOT = (last event - first event) / (tokens - 1).
 * One thread per concurrent client, plain HTTP/1.0 over a TCP socket (the server ends the body by
 * closing). */
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"

#include "base/err.h"
#include "base/timing.h"
#include "bench/serve_load.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hy_cmd_bench_serve(int argc, char **argv)
{
    const char *host = "127.0.0.1", *model = NULL, *api_key = NULL;
    int port = 8000, num = 64, conc = 4, in_len = 128, out_len = 64, json_out = 0, help = 0;
    float ratio = 0.0f;
    uint64_t seed = 0;
    const struct hy_arg args[] = {
        {"--host", NULL, HY_ARG_STR, &host, NULL, "server address (default 127.0.0.1)"},
        {"--port", NULL, HY_ARG_INT, &port, NULL, "server port (default 8000)"},
        {"--model", NULL, HY_ARG_STR, &model, NULL, "served model name (default: omitted, the server's own model)"},
        {"--api-key", NULL, HY_ARG_STR, &api_key, NULL, "bearer token"},
        {"--num-prompts", NULL, HY_ARG_INT, &num, NULL, "requests to send (default 64)"},
        {"--max-concurrency", "-c", HY_ARG_INT, &conc, NULL, "requests in flight at once (default 4)"},
        {"--random-input-len", NULL, HY_ARG_INT, &in_len, NULL, "prompt tokens (default 128)"},
        {"--random-output-len", NULL, HY_ARG_INT, &out_len, NULL, "output tokens (default 64)"},
        {"--random-range-ratio", NULL, HY_ARG_FLOAT, &ratio, NULL,
         "lengths uniform in [len*(1-r), len*(1+r)] (default 0)"},
        {"--seed", NULL, HY_ARG_U64, &seed, NULL, "length / prompt RNG seed"},
        {"--json", NULL, HY_ARG_FLAG, &json_out, NULL, "print one JSON object instead of the table"},
        {"--help", "-h", HY_ARG_FLAG, &help, NULL, "this help"},
    };
    const int na = (int)(sizeof(args) / sizeof(args[0]));
    const char *usage = "hyinfer bench serve [--host 127.0.0.1 --port 8000] [-c 4 --num-prompts 64 "
                        "--random-input-len 128 --random-output-len 64] [--json]";
    int np;
    if (hy_args_parse(argc, argv, 3, args, na, NULL, 0, &np)) {
        fprintf(stderr, "hyinfer bench serve: %s\n", hy_err_msg());
        return 2;
    }
    if (help) {
        hy_args_help(usage, args, na);
        return 0;
    }
    if (hy_cli_single_rank("hyinfer bench serve (a client: point it at a multi-rank server instead)")) {
        fprintf(stderr, "hyinfer bench serve: %s\n", hy_err_msg());
        return 2;
    }
    if (num < 1 || conc < 1 || in_len < 1 || out_len < 1 || ratio < 0 || ratio >= 1) {
        fprintf(stderr, "hyinfer bench serve: --num-prompts, --max-concurrency, lengths >= 1; "
                        "0 <= --random-range-ratio < 1\n");
        return 2;
    }
    struct hy_bench_serve b;
    memset(&b, 0, sizeof(b));
    b.host = host;
    b.port = port;
    b.model = model;
    b.api_key = api_key;
    b.n = num;
    b.seed = seed;
    b.reqs = calloc((size_t)num, sizeof(struct hy_bench_serve_req));
    if (!b.reqs) {
        fprintf(stderr, "hyinfer bench serve: out of memory\n");
        return 1;
    }
    pthread_mutex_init(&b.mu, NULL);
    uint64_t rng = seed ^ 0x5eedULL;
    for (int i = 0; i < num; i++) {
        double u1 = (double)(hy_bench_serve_rand(&rng) >> 11) * 0x1.0p-53,
               u2 = (double)(hy_bench_serve_rand(&rng) >> 11) * 0x1.0p-53;
        b.reqs[i].n_in = (int32_t)(in_len * (1 - ratio + 2 * ratio * u1) + 0.5);
        b.reqs[i].n_out = (int32_t)(out_len * (1 - ratio + 2 * ratio * u2) + 0.5);
        if (b.reqs[i].n_in < 1)
            b.reqs[i].n_in = 1;
        if (b.reqs[i].n_out < 1)
            b.reqs[i].n_out = 1;
    }
    double t0 = hy_time_now();
    if (hy_bench_serve_drive(&b, conc)) {
        fprintf(stderr, "hyinfer bench serve: %s\n", hy_err_msg());
        free(b.reqs);
        pthread_mutex_destroy(&b.mu);
        return 1;
    }
    double dur = hy_time_now() - t0;

    double *ttft = calloc((size_t)num, sizeof(double)), *tpot = calloc((size_t)num, sizeof(double));
    double *e2e = calloc((size_t)num, sizeof(double));
    int ok = 0, n_tpot = 0;
    int64_t in_tok = 0, out_tok = 0;
    const char *first_err = NULL;
    for (int i = 0; i < num; i++) {
        struct hy_bench_serve_req *r = &b.reqs[i];
        if (!r->ok) {
            if (!first_err)
                first_err = r->err;
            continue;
        }
        ttft[ok] = r->t_first - r->t_start;
        e2e[ok] = r->t_end - r->t_start;
        ok++;
        in_tok += r->n_in;
        out_tok += r->out_tokens;
        if (r->out_tokens > 1)
            tpot[n_tpot++] = (r->t_end - r->t_first) / (double)(r->out_tokens - 1);
    }
    double mean_ttft = 0;
    for (int i = 0; i < ok; i++)
        mean_ttft += ttft[i] / ok;
    double ttft50 = hy_bench_serve_pct(ttft, ok, 50), ttft99 = hy_bench_serve_pct(ttft, ok, 99);
    double tpot50 = hy_bench_serve_pct(tpot, n_tpot, 50), tpot99 = hy_bench_serve_pct(tpot, n_tpot, 99);
    double e2e50 = hy_bench_serve_pct(e2e, ok, 50);
    if (json_out) {
        json_t *j =
            json_pack("{s:i, s:i, s:i, s:f, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i, "
                      "s:i, s:f}",
                      "num_prompts", num, "completed", ok, "failed", num - ok, "duration_s", dur, "total_input_tokens",
                      (json_int_t)in_tok, "total_output_tokens", (json_int_t)out_tok, "request_throughput", ok / dur,
                      "output_throughput", out_tok / dur, "total_token_throughput", (in_tok + out_tok) / dur,
                      "mean_ttft_ms", mean_ttft * 1e3, "p50_ttft_ms", ttft50 * 1e3, "p99_ttft_ms", ttft99 * 1e3,
                      "p50_tpot_ms", tpot50 * 1e3, "p99_tpot_ms", tpot99 * 1e3, "p50_e2e_ms", e2e50 * 1e3,
                      "max_concurrency", conc, "random_input_len", in_len, "random_range_ratio", (double)ratio);
        json_object_set_new(j, "random_output_len", json_integer(out_len));
        if (first_err)
            json_object_set_new(j, "first_error", json_string(first_err));
        char *s = json_dumps(j, JSON_INDENT(2));
        printf("%s\n", s);
        free(s);
        json_decref(j);
    } else if (ok == 0) { /* a table of zeros would read as a measurement */
        fprintf(stderr, "hyinfer bench serve: all %d requests failed; the first: %s\n", num,
                first_err ? first_err : "(no error recorded)");
    } else {
        printf("============ Serving Benchmark Result ============\n");
        printf("%-40s %d\n", "Max concurrency:", conc);
        printf("%-40s %d\n", "Successful requests:", ok);
        printf("%-40s %d\n", "Failed requests:", num - ok);
        printf("%-40s %.2f\n", "Benchmark duration (s):", dur);
        printf("%-40s %lld\n", "Total input tokens:", (long long)in_tok);
        printf("%-40s %lld\n", "Total generated tokens:", (long long)out_tok);
        printf("%-40s %.2f\n", "Request throughput (req/s):", ok / dur);
        printf("%-40s %.2f\n", "Output token throughput (tok/s):", out_tok / dur);
        printf("%-40s %.2f\n", "Total token throughput (tok/s):", (in_tok + out_tok) / dur);
        printf("%-40s %.2f\n", "Mean TTFT (ms):", mean_ttft * 1e3);
        printf("%-40s %.2f\n", "P50 TTFT (ms):", ttft50 * 1e3);
        printf("%-40s %.2f\n", "P99 TTFT (ms):", ttft99 * 1e3);
        printf("%-40s %.2f\n", "P50 TPOT (ms):", tpot50 * 1e3);
        printf("%-40s %.2f\n", "P99 TPOT (ms):", tpot99 * 1e3);
        printf("==================================================\n");
        if (first_err)
            printf("first error: %s\n", first_err);
    }
    free(ttft);
    free(tpot);
    free(e2e);
    free(b.reqs);
    pthread_mutex_destroy(&b.mu);
    return ok == num ? 0 : 1;
}
