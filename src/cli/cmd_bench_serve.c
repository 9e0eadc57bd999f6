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

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct bench_req {
    int32_t n_in, n_out;
    double t_start, t_first, t_end;
    int64_t out_tokens;
    int ok;
    char err[160];
};

struct bench {
    const char *host, *model, *api_key;
    int port;
    struct bench_req *reqs;
    int n;
    int next;
    uint64_t seed;
    pthread_mutex_t mu;
};

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int connect_to(const char *host, int port)
{
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, ps, &hints, &res) || !res)
        return -1;
    int fd = -1;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

static void run_one(struct bench *b, struct bench_req *r, uint64_t rng)
{
    json_t *ids = json_array();
    for (int32_t i = 0; i < r->n_in; i++)
        json_array_append_new(ids, json_integer((json_int_t)(splitmix(&rng) % 256)));
    json_t *body = json_pack("{s:s?, s:o, s:i, s:f, s:b, s:b, s:{s:b}}", "model", b->model, "prompt", ids, "max_tokens",
                             (int)r->n_out, "temperature", 0.0, "ignore_eos", 1, "stream", 1, "stream_options",
                             "include_usage", 1);
    char *bs = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char head[512];
    char auth[300] = "";
    if (b->api_key)
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", b->api_key);
    int hl = snprintf(head, sizeof(head),
                      "POST /v1/completions HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\n%s"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      b->host, auth, strlen(bs));
    r->t_start = hy_time_now();
    int fd = connect_to(b->host, b->port);
    if (fd < 0) {
        snprintf(r->err, sizeof(r->err), "cannot connect to %s:%d", b->host, b->port);
        free(bs);
        return;
    }
    if (write(fd, head, (size_t)hl) != hl || write(fd, bs, strlen(bs)) != (ssize_t)strlen(bs)) {
        snprintf(r->err, sizeof(r->err), "write failed: %s", strerror(errno));
        close(fd);
        free(bs);
        return;
    }
    free(bs);
    char *buf = NULL;
    size_t len = 0, cap = 0, scan = 0;
    int status = 0, in_body = 0, done = 0;
    for (;;) {
        if (cap - len < 4096) {
            cap = cap ? cap * 2 : 16384;
            char *nb = realloc(buf, cap + 1);
            if (!nb)
                break;
            buf = nb;
        }
        ssize_t k = read(fd, buf + len, cap - len);
        if (k <= 0)
            break;
        double now = hy_time_now();
        len += (size_t)k;
        buf[len] = 0;
        if (!in_body) {
            char *e = strstr(buf, "\r\n\r\n");
            if (!e)
                continue;
            sscanf(buf, "HTTP/%*s %d", &status);
            in_body = 1;
            scan = (size_t)(e + 4 - buf);
        }
        /* complete SSE events */
        for (;;) {
            char *ev = strstr(buf + scan, "\n\n");
            if (!ev)
                break;
            char *line = buf + scan;
            *ev = 0;
            if (!strncmp(line, "data: ", 6)) {
                if (!strcmp(line + 6, "[DONE]")) {
                    done = 1;
                } else {
                    json_t *j = json_loads(line + 6, 0, NULL);
                    json_t *u = json_object_get(j, "usage");
                    json_t *ch = json_object_get(j, "choices");
                    if (json_array_size(ch) > 0) {
                        if (r->t_first == 0)
                            r->t_first = now;
                        r->t_end = now;
                    }
                    if (json_is_object(u))
                        r->out_tokens = json_integer_value(json_object_get(u, "completion_tokens"));
                    json_decref(j);
                }
            }
            *ev = '\n';
            scan = (size_t)(ev + 2 - buf);
        }
    }
    close(fd);
    if (status != 200)
        snprintf(r->err, sizeof(r->err), "HTTP %d: %.120s", status,
                 in_body && buf ? buf + (strstr(buf, "\r\n\r\n") ? (size_t)(strstr(buf, "\r\n\r\n") - buf) + 4 : 0)
                                : "");
    else if (!done)
        snprintf(r->err, sizeof(r->err), "stream ended without [DONE]");
    else
        r->ok = 1;
    if (!r->t_end)
        r->t_end = hy_time_now();
    free(buf);
}

static void *worker(void *arg)
{
    struct bench *b = arg;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        int i = b->next < b->n ? b->next++ : -1;
        pthread_mutex_unlock(&b->mu);
        if (i < 0)
            return NULL;
        uint64_t rng = b->seed * 1000003ULL + (uint64_t)i;
        run_one(b, &b->reqs[i], rng);
    }
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    int k = (int)(p / 100.0 * (n - 1) + 0.5);
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

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
    struct bench b;
    memset(&b, 0, sizeof(b));
    b.host = host;
    b.port = port;
    b.model = model;
    b.api_key = api_key;
    b.n = num;
    b.seed = seed;
    b.reqs = calloc((size_t)num, sizeof(struct bench_req));
    pthread_t *th = calloc((size_t)conc, sizeof(pthread_t));
    if (!b.reqs || !th) {
        fprintf(stderr, "hyinfer bench serve: out of memory\n");
        return 1;
    }
    pthread_mutex_init(&b.mu, NULL);
    uint64_t rng = seed ^ 0x5eedULL;
    for (int i = 0; i < num; i++) {
        double u1 = (double)(splitmix(&rng) >> 11) * 0x1.0p-53, u2 = (double)(splitmix(&rng) >> 11) * 0x1.0p-53;
        b.reqs[i].n_in = (int32_t)(in_len * (1 - ratio + 2 * ratio * u1) + 0.5);
        b.reqs[i].n_out = (int32_t)(out_len * (1 - ratio + 2 * ratio * u2) + 0.5);
        if (b.reqs[i].n_in < 1)
            b.reqs[i].n_in = 1;
        if (b.reqs[i].n_out < 1)
            b.reqs[i].n_out = 1;
    }
    double t0 = hy_time_now();
    for (int i = 0; i < conc; i++)
        pthread_create(&th[i], NULL, worker, &b);
    for (int i = 0; i < conc; i++)
        pthread_join(th[i], NULL);
    double dur = hy_time_now() - t0;

    double *ttft = calloc((size_t)num, sizeof(double)), *tpot = calloc((size_t)num, sizeof(double));
    double *e2e = calloc((size_t)num, sizeof(double));
    int ok = 0, n_tpot = 0;
    int64_t in_tok = 0, out_tok = 0;
    const char *first_err = NULL;
    for (int i = 0; i < num; i++) {
        struct bench_req *r = &b.reqs[i];
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
    double ttft50 = pct(ttft, ok, 50), ttft99 = pct(ttft, ok, 99);
    double tpot50 = pct(tpot, n_tpot, 50), tpot99 = pct(tpot, n_tpot, 99);
    double e2e50 = pct(e2e, ok, 50);
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
    free(th);
    pthread_mutex_destroy(&b.mu);
    return ok == num ? 0 : 1;
}
