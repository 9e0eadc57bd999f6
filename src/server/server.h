/* server.h - `hyinfer serve`: the OpenAI-compatible HTTP server (libmicrohttpd) over the engine.
 *
 * Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health (503 while
 * the model loads), GET /metrics (Prometheus text, vLLM's names), GET /version ({"version": ...}),
 * POST /tokenize, POST /detokenize.
 * With api_key set, the /v1 routes need "Authorization: Bearer KEY" (health, metrics, tokenize stay public).
 * Threads: libmicrohttpd runs epoll in a pool of 4 HTTP threads; a generation request suspends its
 * connection while the engine works and is resumed by the engine thread's notify hook, so idle,
 * slow or waiting connections hold no thread (only a descriptor). One engine thread owns the
 * engine (engine_loop.h). A client that disconnects has its requests aborted.
 * Shutdown (*stop_flag): stop accepting, 503 to new requests and /health, abort requests still
 * queued in the engine, let running ones finish for shutdown_timeout_s, then abort the rest
 * (a stream gets an error chunk and [DONE], a non-streamed request a 503 error).
 */
#ifndef HY_SERVER_SERVER_H
#define HY_SERVER_SERVER_H

#include "engine/engine.h"
#include "model/model.h"

#include <signal.h>
#include <stddef.h>

/* What GET /version answers. */
#define HY_SERVER_VERSION "0.1.0"

struct hy_server_config {
    const char *model_dir;
    const char *host;              /* default "127.0.0.1" */
    int port;                      /* default 8000 */
    const char *served_model_name; /* default: model_dir */
    const char *api_key;           /* NULL: no auth */
    const char *chat_template;     /* --chat-template FILE or template text; NULL: the checkpoint's own */
    const char *tool_call_parser;  /* "hy_v3" | "hy_v4"; NULL: the checkpoint's dialect (from its vocabulary) */
    enum hy_compute_dtype dtype;
    struct hy_engine_config engine;
    size_t max_body_bytes;            /* default 4 MiB */
    int threads;                      /* OpenMP threads of the engine (<= 0: default) */
    volatile sig_atomic_t *stop_flag; /* set (by a signal handler) to drain and exit */
    unsigned max_connections;         /* open HTTP connections at once (0: 8192); more are refused */
    unsigned max_connections_per_ip;  /* per client address (0: no limit, as vLLM); beyond it a new
                                         connection is refused, /health included */
    unsigned http_timeout_s;          /* (0: 15 s) a request's header and body must have arrived this long
                                         after the connection opened, however slowly they trickle; also
                                         libmicrohttpd's inactivity timeout while a response is sent. Time
                                         spent waiting for the engine does not count */
    unsigned keepalive_timeout_s;     /* (0: http_timeout_s) after a response, a kept-alive connection is
                                         closed unless its next request has fully arrived within this */
    double shutdown_timeout_s;        /* time running requests get to finish on shutdown (0: abort at once) */
    /* NULL: hy_model_load(model_dir, dtype). Else called to load the model (the CLI's multi-rank
     * loader: returns once every rank holds its shard); 0 and *m, or -1 with hy_err_msg(). */
    int (*load_model)(void *ctx, struct hy_model **m);
    void *load_ctx;
};

/* Starts listening, loads the model, serves until *stop_flag, then stops accepting, drains the
 * requests in flight (up to shutdown_timeout_s, then aborts them) and returns 0; returns 1 with a logged message when start-up
 * fails (port in use, model or engine error). */
int hy_server_run(const struct hy_server_config *cfg);

#endif
