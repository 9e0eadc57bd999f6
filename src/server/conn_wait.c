/* conn_wait.c - parking generation requests: suspend / resume of their libmicrohttpd connections
 * and the thread that watches parked clients for hang-ups; the request-arrival deadline of every
 * connection (server_internal.h). */
#include "server/server_internal.h"

#include "base/log.h"
#include "base/timing.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define WATCH_SLICE_MS 200
#define TIMEOUT_LOG_EVERY_S 10.0

/* libmicrohttpd's connection timeout restarts on every byte, so a client sending one header byte
 * a second would hold its socket for ever: the watcher shuts down (SHUT_RDWR) the socket of a
 * connection past its deadline, and libmicrohttpd, seeing the end of the stream, closes it. The
 * record leaves the list in the CLOSED notification, before libmicrohttpd closes the descriptor,
 * and the shutdown happens under the same lock, so it never hits a reused descriptor. */
static void sweep(struct hy_server *s, double now, double *last_log, unsigned long long *logged)
{
    pthread_mutex_lock(&s->cmu);
    for (struct hy_conn_track *t = s->conns.next; t && t != &s->conns; t = t->next)
        if (t->deadline > 0 && now >= t->deadline) {
            t->deadline = 0;
            shutdown(t->fd, SHUT_RDWR);
            s->n_timed_out++;
        }
    const unsigned long long n = s->n_timed_out;
    pthread_mutex_unlock(&s->cmu);
    if (n != *logged && now - *last_log >= TIMEOUT_LOG_EVERY_S) {
        hy_log_info("serve: closed %llu connections that sent no complete request within the HTTP timeout (%.0f s) "
                    "or stayed idle past the keep-alive timeout (%.0f s); %llu in all",
                    n - *logged, s->http_timeout_s, s->keepalive_timeout_s, n);
        *logged = n;
        *last_log = now;
    }
}

int hy_conn_track_open(struct hy_server *s, struct MHD_Connection *conn, void **socket_context)
{
    *socket_context = NULL;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct hy_conn_track *t = ci ? calloc(1, sizeof(*t)) : NULL;
    if (!t)
        return -1;
    t->fd = ci->connect_fd;
    t->deadline = hy_time_now() + s->http_timeout_s;
    pthread_mutex_lock(&s->cmu);
    t->next = s->conns.next;
    t->prev = &s->conns;
    s->conns.next->prev = t;
    s->conns.next = t;
    pthread_mutex_unlock(&s->cmu);
    *socket_context = t;
    return 0;
}

void hy_conn_track_close(struct hy_server *s, void *socket_context)
{
    struct hy_conn_track *t = socket_context;
    if (!t)
        return;
    pthread_mutex_lock(&s->cmu);
    t->prev->next = t->next;
    t->next->prev = t->prev;
    pthread_mutex_unlock(&s->cmu);
    free(t);
}

void hy_conn_track_deadline(struct hy_server *s, struct MHD_Connection *conn, double seconds)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct hy_conn_track *t = ci ? ci->socket_context : NULL;
    if (!t)
        return;
    const double d = seconds > 0 ? hy_time_now() + seconds : 0;
    pthread_mutex_lock(&s->cmu);
    t->deadline = d;
    pthread_mutex_unlock(&s->cmu);
}

static void *watch_main(void *arg)
{
    struct hy_server *s = arg;
    struct pollfd *pf = NULL;
    struct hy_conn_wait **ws = NULL;
    unsigned long long *ids = NULL;
    size_t cap = 0;
    double last_log = 0;
    unsigned long long logged = 0;
    while (!s->watcher_stop) {
        sweep(s, hy_time_now(), &last_log, &logged);
        size_t n = 0;
        pthread_mutex_lock(&s->wmu);
        if (s->n_waits > cap) {
            size_t c = s->n_waits * 2;
            struct pollfd *p2 = realloc(pf, c * sizeof(*pf));
            if (p2)
                pf = p2;
            struct hy_conn_wait **w2 = realloc(ws, c * sizeof(*ws));
            if (w2)
                ws = w2;
            unsigned long long *i2 = realloc(ids, c * sizeof(*ids));
            if (i2)
                ids = i2;
            if (p2 && w2 && i2)
                cap = c;
        }
        for (size_t i = 0; i < s->n_waits && n < cap; i++) {
            struct hy_conn_wait *w = s->waits[i];
            if (w->gone || w->fd < 0)
                continue;
            pf[n].fd = w->fd;
            pf[n].events = POLLRDHUP;
            pf[n].revents = 0;
            ws[n] = w;
            ids[n] = w->id;
            n++;
        }
        pthread_mutex_unlock(&s->wmu);
        /* an fd closed meanwhile is harmless: entries are checked against the registry below */
        if (poll(pf, (nfds_t)n, WATCH_SLICE_MS) <= 0)
            continue;
        pthread_mutex_lock(&s->wmu);
        for (size_t k = 0; k < n; k++) {
            if (!(pf[k].revents & (POLLRDHUP | POLLHUP | POLLERR)))
                continue;
            for (size_t i = 0; i < s->n_waits; i++)
                if (s->waits[i] == ws[k] && ws[k]->id == ids[k]) {
                    ws[k]->gone = 1;
                    hy_conn_wait_wake(ws[k]);
                    break;
                }
        }
        pthread_mutex_unlock(&s->wmu);
    }
    free(pf);
    free(ws);
    free(ids);
    return NULL;
}

int hy_conn_wait_start(struct hy_server *s)
{
    s->watcher_stop = 0;
    if (pthread_create(&s->watcher, NULL, watch_main, s))
        return -1;
    s->watcher_on = 1;
    return 0;
}

void hy_conn_wait_stop(struct hy_server *s)
{
    if (s->watcher_on) {
        s->watcher_stop = 1;
        pthread_join(s->watcher, NULL);
        s->watcher_on = 0;
    }
    pthread_mutex_lock(&s->wmu);
    int n = 0;
    for (size_t i = 0; i < s->n_waits; i++) {
        struct hy_conn_wait *w = s->waits[i];
        pthread_mutex_lock(&w->mu);
        if (w->suspended) {
            w->suspended = 0;
            MHD_resume_connection(w->conn);
            n++;
        }
        pthread_mutex_unlock(&w->mu);
    }
    pthread_mutex_unlock(&s->wmu);
    if (n)
        hy_log_warn("serve: %d connections were still waiting at shutdown", n);
}

int hy_conn_wait_init(struct hy_conn_wait *w, struct hy_server *s, struct MHD_Connection *conn)
{
    memset(w, 0, sizeof(*w));
    w->s = s;
    w->conn = conn;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    w->fd = ci ? ci->connect_fd : -1;
    pthread_mutex_lock(&s->wmu);
    if (s->n_waits == s->cap_waits) {
        size_t c = s->cap_waits ? s->cap_waits * 2 : 64;
        struct hy_conn_wait **p = realloc(s->waits, c * sizeof(*p));
        if (!p) {
            pthread_mutex_unlock(&s->wmu);
            return -1;
        }
        s->waits = p;
        s->cap_waits = c;
    }
    pthread_mutex_init(&w->mu, NULL);
    w->id = ++s->next_wait_id;
    s->waits[s->n_waits++] = w;
    pthread_mutex_unlock(&s->wmu);
    return 0;
}

void hy_conn_wait_fini(struct hy_conn_wait *w)
{
    struct hy_server *s = w->s;
    if (!s)
        return;
    pthread_mutex_lock(&s->wmu);
    for (size_t i = 0; i < s->n_waits; i++)
        if (s->waits[i] == w) {
            s->waits[i] = s->waits[--s->n_waits];
            break;
        }
    pthread_mutex_unlock(&s->wmu);
    pthread_mutex_destroy(&w->mu);
    w->s = NULL;
}

int hy_conn_wait_suspend(struct hy_conn_wait *w)
{
    pthread_mutex_lock(&w->mu);
    if (w->wake) {
        w->wake = 0;
        pthread_mutex_unlock(&w->mu);
        return 0;
    }
    w->suspended = 1;
    MHD_suspend_connection(w->conn);
    pthread_mutex_unlock(&w->mu);
    return 1;
}

void hy_conn_wait_wake(void *arg)
{
    struct hy_conn_wait *w = arg;
    pthread_mutex_lock(&w->mu);
    if (w->suspended) {
        w->suspended = 0;
        MHD_resume_connection(w->conn);
    } else {
        w->wake = 1;
    }
    pthread_mutex_unlock(&w->mu);
}
