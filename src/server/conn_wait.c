/* conn_wait.c - parking generation requests: suspend / resume of their libmicrohttpd connections
 * and the thread that watches parked clients for hang-ups (server_internal.h). */
#include "server/server_internal.h"

#include "base/log.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>

#define WATCH_SLICE_MS 200

static void *watch_main(void *arg)
{
    struct hy_server *s = arg;
    struct pollfd *pf = NULL;
    struct hy_conn_wait **ws = NULL;
    unsigned long long *ids = NULL;
    size_t cap = 0;
    while (!s->watcher_stop) {
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
