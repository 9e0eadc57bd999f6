/* serve_load.c - the client threads of `hyinfer bench serve` (serve_load.h). */
#include "bench/serve_load.h"

#include "base/err.h"
#include "base/timing.h"
#include "bench/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

uint64_t hy_bench_serve_rand(uint64_t *s)
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

static void run_one(struct hy_bench_serve *b, struct hy_bench_serve_req *r, uint64_t rng)
{
    json_t *ids = json_array();
    for (int32_t i = 0; i < r->n_in; i++)
        json_array_append_new(ids, json_integer((json_int_t)(hy_bench_serve_rand(&rng) % 256)));
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
    struct hy_bench_serve *b = arg;
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

double hy_bench_serve_pct(double *v, int n, double p)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(double), hy_bench_cmp_double);
    int k = (int)(p / 100.0 * (n - 1) + 0.5);
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

int hy_bench_serve_drive(struct hy_bench_serve *b, int conc)
{
    pthread_t *th = calloc((size_t)conc, sizeof(pthread_t));
    if (!th)
        return hy_err_set("bench serve: out of memory for %d clients", conc);
    int started = 0;
    for (; started < conc; started++)
        if (pthread_create(&th[started], NULL, worker, b))
            break;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(th);
    return started == conc ? 0 : hy_err_set("bench serve: could start only %d of %d client threads", started, conc);
}
