/* server_internal.h - state shared by http.c and completion.c (not a public API). */
#ifndef HY_SERVER_INTERNAL_H
#define HY_SERVER_INTERNAL_H

#include "engine/engine_loop.h"
#include "server/metrics.h"
#include "server/openai.h"
#include "server/server.h"
#include "text/chat.h"
#include "text/tokenizer.h"
#include "text/toolcall.h"

#include <microhttpd.h>
#include <pthread.h>

/* One open HTTP connection (its libmicrohttpd socket context), on s->conns while open. deadline:
 * when the watcher shuts the socket down (hy_time_now() seconds; 0: none) - the end of the
 * request-arrival window (connection start + http timeout, or the end of the previous response +
 * keep-alive timeout); none while a request is handled or its response sent. */
struct hy_conn_track {
    struct hy_conn_track *prev, *next;
    int fd;
    double deadline;
};

struct hy_server {
    const struct hy_server_config *cfg;
    const char *model_name;
    struct hy_tokenizer *tok;
    struct hy_model *model;
    struct hy_engine *engine;
    struct hy_engine_loop *se;
    struct hy_oai_limits limits;
    struct hy_chat chat;            /* the checkpoint's chat template (or --chat-template) */
    struct hy_tool_markers markers; /* tool-call / think spellings from the vocabulary */
    int have_tool_markers;          /* 0: the vocabulary has no <tool_calls> token */
    volatile int ready;
    pthread_mutex_t mu; /* metrics, counters */
    struct hy_server_metrics metrics;
    int inflight;   /* generation requests in progress */
    int gen_active; /* generation requests whose HTTP exchange is not complete (response being sent) */
    unsigned long long next_id;
    volatile int draining; /* shutdown: new requests get 503, the engine drains */
    int n_conn;            /* open HTTP connections (__atomic) */
    unsigned max_conn;     /* beyond it a new connection is closed at once */
    /* parked generation requests (conn_wait.c), watched for disconnects by one thread */
    pthread_mutex_t wmu;
    struct hy_conn_wait **waits;
    size_t n_waits, cap_waits;
    unsigned long long next_wait_id;
    pthread_t watcher;
    int watcher_on;
    volatile int watcher_stop;
    /* every open connection, for the request-arrival deadline (conn_wait.c) */
    pthread_mutex_t cmu;
    struct hy_conn_track conns; /* list head (sentinel) */
    double http_timeout_s, keepalive_timeout_s;
    unsigned long long n_timed_out; /* connections shut down at their deadline (under cmu) */
};

/* A generation request's connection parked while it waits for the engine (conn_wait.c). The
 * handler suspends the connection in libmicrohttpd (no HTTP thread waits on the engine);
 * hy_conn_wait_wake resumes it. The engine loop calls the wake as the job's notify hook (outputs,
 * end, add done) and the watcher thread calls it when the client hangs up (POLLRDHUP), so a
 * disconnected client is seen while the request waits. Lock order: engine loop / s->wmu, then
 * w->mu, then libmicrohttpd's. */
struct hy_conn_wait {
    struct hy_server *s;
    struct MHD_Connection *conn;
    int fd;
    pthread_mutex_t mu;
    int suspended;         /* suspended, no resume yet */
    int wake;              /* a wake came while running: the next suspend returns 0 instead */
    volatile int gone;     /* the watcher saw the client hang up */
    unsigned long long id; /* registration with the watcher */
};

/* Connection tracking (call from libmicrohttpd's notify callbacks, any HTTP thread). open: a new
 * connection, whose request must arrive within s->http_timeout_s; stores its record in
 * *socket_context (0, or -1 when out of memory: the connection is then never timed out by us).
 * close: the connection ended (frees the record; NULL is ignored). */
int hy_conn_track_open(struct hy_server *s, struct MHD_Connection *conn, void **socket_context);
void hy_conn_track_close(struct hy_server *s, void *socket_context);

/* The connection's deadline: seconds from now (> 0), or 0 for none (its request is complete). */
void hy_conn_track_deadline(struct hy_server *s, struct MHD_Connection *conn, double seconds);

/* Starts / stops the disconnect watcher thread, which also shuts down the sockets of connections
 * past their deadline (within WATCH_SLICE_MS). Stopping resumes any connection still suspended
 * (MHD_stop_daemon must find none). */
int hy_conn_wait_start(struct hy_server *s);
void hy_conn_wait_stop(struct hy_server *s);

/* Registers w for conn (fd from libmicrohttpd); 0, or -1 when out of memory. */
int hy_conn_wait_init(struct hy_conn_wait *w, struct hy_server *s, struct MHD_Connection *conn);

/* Unregisters w; after it no wake touches w (release the engine job first). */
void hy_conn_wait_fini(struct hy_conn_wait *w);

/* From a libmicrohttpd callback of w's connection: suspends it and returns 1 (return to MHD:
 * MHD_YES from the access handler, 0 from a content reader), or returns 0 without suspending when a
 * wake came since the last call (look at the job again). */
int hy_conn_wait_suspend(struct hy_conn_wait *w);

/* Any thread: resumes w's connection if suspended, else makes the next suspend return 0. */
void hy_conn_wait_wake(void *w);

/* Handles POST /v1/chat/completions and /v1/completions (body already read). With *state NULL it
 * starts the request; while it waits for the engine it keeps its state in *state, suspends the
 * connection and returns MHD_YES: libmicrohttpd calls the access handler again on resume, which
 * passes the same *state back (kind, body, len unused). Once a response is queued (or the request
 * failed) *state is NULL again. Returns MHD's result. */
enum MHD_Result hy_server_handle_generate(struct hy_server *s, struct MHD_Connection *conn, enum hy_oai_kind kind,
                                          const char *body, size_t len, void **state);

/* The connection of a request still held in *state ended (MHD's completion callback): aborts and
 * frees it. */
void hy_server_generate_free(void *state);

/* Queues a JSON response (body copied) (respond.c). */
enum MHD_Result hy_server_respond_json(struct MHD_Connection *conn, unsigned status, const char *body);

/* Queues an OpenAI error response and counts it. */
enum MHD_Result hy_server_respond_error(struct hy_server *s, struct MHD_Connection *conn, const struct hy_oai_error *e);

#endif
