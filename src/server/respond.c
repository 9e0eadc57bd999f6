/* respond.c - the JSON and error responses every route sends (server_internal.h). */
#include "server/server_internal.h"

#include "base/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum MHD_Result hy_server_respond_json(struct MHD_Connection *conn, unsigned status, const char *body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

enum MHD_Result hy_server_respond_error(struct hy_server *s, struct MHD_Connection *conn, const struct hy_oai_error *e)
{
    pthread_mutex_lock(&s->mu);
    s->metrics.requests_error++;
    pthread_mutex_unlock(&s->mu);
    if (e->status >= 500)
        hy_log_warn("HTTP %d: %s", e->status, e->message);
    else
        hy_log_debug("HTTP %d: %s", e->status, e->message);
    char *body = hy_oai_error_json(e);
    enum MHD_Result rc =
        hy_server_respond_json(conn, (unsigned)e->status, body ? body : "{\"error\":{\"message\":\"out of memory\"}}");
    free(body);
    return rc;
}
