/* server_internal.h - state shared by http.c and completion.c (not a public API). */
#ifndef HY_SERVER_INTERNAL_H
#define HY_SERVER_INTERNAL_H

#include "engine/engine_loop.h"
#include "server/metrics.h"
#include "server/openai.h"
#include "server/server.h"
#include "text/tokenizer.h"

#include <microhttpd.h>
#include <pthread.h>

struct hy_server {
    const struct hy_server_config *cfg;
    const char *model_name;
    struct hy_tokenizer *tok;
    struct hy_model *model;
    struct hy_engine *engine;
    struct hy_srv_engine *se;
    struct hy_oai_limits limits;
    int32_t think_open_id, think_close_id; /* -1 when the vocab lacks them */
    volatile int ready;
    pthread_mutex_t mu; /* metrics, counters */
    struct hy_server_metrics metrics;
    int inflight; /* generation requests in progress */
    unsigned long long next_id;
};

/* Handles POST /v1/chat/completions and /v1/completions (body already read). Queues the
 * response on conn and returns MHD's result. */
enum MHD_Result hy_server_handle_generate(struct hy_server *s, struct MHD_Connection *conn, enum hy_oai_kind kind,
                                          const char *body, size_t len);

/* Queues a JSON response (body copied). */
enum MHD_Result hy_server_respond_json(struct MHD_Connection *conn, unsigned status, const char *body);

/* Queues an OpenAI error response and counts it. */
enum MHD_Result hy_server_respond_error(struct hy_server *s, struct MHD_Connection *conn, const struct hy_oai_error *e);

#endif
