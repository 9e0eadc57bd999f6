/* engine_loop.c - the engine thread, command list and per-job output queues. */
#include "engine/engine_loop.h"

#include "base/err.h"
#include "base/log.h"

#include <errno.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum seq_state { SEQ_PENDING = 0, SEQ_ACTIVE, SEQ_DONE };

struct seq {
    uint64_t id;
    enum seq_state state;
    int want_abort;
    int has_out; /* an output was queued (the drain spares it) */
};

struct hy_engine_loop_job {
    int n;
    struct seq *seqs;
    const struct hy_engine_request *reqs; /* valid while the add is pending (submitter waits) */
    int add_pending;
    int add_rc;
    char add_err[512];
    int want_abort; /* some seq has want_abort set */
    int in_cmds;    /* on the command list */
    struct hy_engine_loop_job *cmd_next;
    struct hy_engine_loop_job *act_prev, *act_next; /* active list (engine reference) */
    int engine_ref;
    int handler_ref;
    int n_done;
    struct hy_engine_loop_out *q;
    size_t q_len, q_cap, q_head;
    pthread_cond_t cond;
    void (*notify)(void *); /* hy_engine_loop_submit_async's hook, or NULL */
    void *notify_arg;
};

struct hy_engine_loop {
    struct hy_engine *e;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* engine thread wakes on commands */
    struct hy_engine_loop_job *cmds, *cmds_tail;
    struct hy_engine_loop_job *active;
    int stop;
    int drain; /* 1: hy_engine_loop_drain asked, 2: done */
    int running;
    int joined;
    struct hy_engine_stats stats;
    int threads;
};

static void job_free(struct hy_engine_loop_job *j)
{
    pthread_cond_destroy(&j->cond);
    free(j->seqs);
    free(j->q);
    free(j);
}

/* Wakes the job's waiters: the condition variable and the async hook (se->mu held). */
static void job_signal(struct hy_engine_loop_job *j)
{
    pthread_cond_broadcast(&j->cond);
    if (j->notify && j->handler_ref)
        j->notify(j->notify_arg);
}

static void maybe_free(struct hy_engine_loop_job *j)
{
    if (!j->engine_ref && !j->handler_ref && !j->in_cmds)
        job_free(j);
}

static void enqueue_cmd(struct hy_engine_loop *se, struct hy_engine_loop_job *j)
{
    if (j->in_cmds)
        return;
    j->in_cmds = 1;
    j->cmd_next = NULL;
    if (se->cmds_tail)
        se->cmds_tail->cmd_next = j;
    else
        se->cmds = j;
    se->cmds_tail = j;
    pthread_cond_signal(&se->cond);
}

static void act_remove(struct hy_engine_loop *se, struct hy_engine_loop_job *j)
{
    if (j->act_prev)
        j->act_prev->act_next = j->act_next;
    else if (se->active == j)
        se->active = j->act_next;
    if (j->act_next)
        j->act_next->act_prev = j->act_prev;
    j->act_prev = j->act_next = NULL;
}

/* A sequence finished (any way): count it; drop the engine reference when all are done. */
static void seq_done(struct hy_engine_loop *se, struct hy_engine_loop_job *j, int s)
{
    if (j->seqs[s].state == SEQ_DONE)
        return;
    j->seqs[s].state = SEQ_DONE;
    j->n_done++;
    if (j->n_done == j->n && j->engine_ref) {
        act_remove(se, j);
        j->engine_ref = 0;
        job_signal(j);
    }
}

static int q_push(struct hy_engine_loop_job *j, int s, const struct hy_engine_output *o)
{
    if (j->q_head > 0 && j->q_head == j->q_len) {
        j->q_head = j->q_len = 0;
    }
    if (j->q_len == j->q_cap) {
        size_t cap = j->q_cap ? j->q_cap * 2 : 16;
        struct hy_engine_loop_out *q = realloc(j->q, cap * sizeof(*q));
        if (!q)
            return -1;
        j->q = q;
        j->q_cap = cap;
    }
    j->q[j->q_len].seq = s;
    j->q[j->q_len].o = *o;
    j->q_len++;
    return 0;
}

static void process_cmds(struct hy_engine_loop *se)
{
    while (se->cmds) {
        struct hy_engine_loop_job *j = se->cmds;
        se->cmds = j->cmd_next;
        if (!se->cmds)
            se->cmds_tail = NULL;
        j->in_cmds = 0;
        j->cmd_next = NULL;
        if (j->add_pending && !j->handler_ref) { /* an async submit released before its add: drop it */
            j->add_pending = 0;
            j->add_rc = HY_ENGINE_ERROR;
            j->engine_ref = 0;
            j->reqs = NULL;
        }
        if (j->add_pending) {
            j->add_pending = 0;
            j->add_rc = HY_ENGINE_OK;
            int i;
            for (i = 0; i < j->n; i++) {
                uint64_t id = 0;
                int rc = hy_engine_add_request(se->e, &j->reqs[i], &id);
                if (rc != HY_ENGINE_OK) {
                    j->add_rc = rc;
                    snprintf(j->add_err, sizeof(j->add_err), "%s",
                             rc == HY_ENGINE_QUEUE_FULL ? "the engine queue is full" : hy_err_msg());
                    break;
                }
                j->seqs[i].id = id;
                j->seqs[i].state = SEQ_ACTIVE;
            }
            if (j->add_rc != HY_ENGINE_OK) {
                for (int k = 0; k < i; k++)
                    hy_engine_abort_request(se->e, j->seqs[k].id);
                j->engine_ref = 0;
            } else {
                j->act_next = se->active;
                if (se->active)
                    se->active->act_prev = j;
                se->active = j;
            }
            j->reqs = NULL;
            job_signal(j);
        }
        if (j->want_abort && j->engine_ref) {
            j->want_abort = 0;
            for (int i = 0; i < j->n; i++)
                if (j->seqs[i].want_abort && j->seqs[i].state != SEQ_DONE) {
                    if (j->seqs[i].state == SEQ_ACTIVE)
                        hy_engine_abort_request(se->e, j->seqs[i].id);
                    seq_done(se, j, i);
                }
        }
        maybe_free(j);
    }
    hy_engine_get_stats(se->e, &se->stats);
}

static struct hy_engine_loop_job *find_seq(struct hy_engine_loop *se, uint64_t id, int *s)
{
    for (struct hy_engine_loop_job *j = se->active; j; j = j->act_next)
        for (int i = 0; i < j->n; i++)
            if (j->seqs[i].state == SEQ_ACTIVE && j->seqs[i].id == id) {
                *s = i;
                return j;
            }
    return NULL;
}

/* hy_engine_loop_drain, on the engine thread: aborts every sequence without an output yet. */
static void drain_unstarted(struct hy_engine_loop *se)
{
    int n = 0;
    for (struct hy_engine_loop_job *j = se->active, *next; j; j = next) {
        next = j->act_next; /* seq_done may unlink j */
        for (int i = 0; i < j->n && j->engine_ref; i++)
            if (j->seqs[i].state == SEQ_ACTIVE && !j->seqs[i].has_out) {
                hy_engine_abort_request(se->e, j->seqs[i].id);
                struct hy_engine_output ab;
                memset(&ab, 0, sizeof(ab));
                ab.request_id = j->seqs[i].id;
                ab.token_id = -1;
                ab.finish = HY_ENGINE_FINISHED_ABORT;
                q_push(j, i, &ab);
                job_signal(j);
                seq_done(se, j, i);
                n++;
            }
        maybe_free(j);
    }
    if (n)
        hy_log_info("engine loop: drain: aborted %d requests that had not started", n);
}

static void *engine_main(void *arg)
{
    struct hy_engine_loop *se = arg;
#ifdef _OPENMP
    if (se->threads > 0)
        omp_set_num_threads(se->threads); /* OpenMP's thread count is per thread: set it here */
#endif
    pthread_mutex_lock(&se->mu);
    for (;;) {
        process_cmds(se);
        if (se->stop)
            break;
        if (se->drain == 1) {
            drain_unstarted(se);
            se->drain = 2;
            hy_engine_get_stats(se->e, &se->stats);
        }
        if (!hy_engine_has_work(se->e)) {
            pthread_cond_wait(&se->cond, &se->mu);
            continue;
        }
        pthread_mutex_unlock(&se->mu);
        const struct hy_engine_output *outs = NULL;
        size_t n_outs = 0;
        int rc = hy_engine_step(se->e, &outs, &n_outs);
        if (rc)
            hy_log_error("engine step failed: %s", hy_err_msg());
        pthread_mutex_lock(&se->mu);
        for (size_t k = 0; k < n_outs; k++) {
            int s;
            struct hy_engine_loop_job *j = find_seq(se, outs[k].request_id, &s);
            if (!j)
                continue; /* aborted by its handler */
            if (q_push(j, s, &outs[k])) {
                hy_log_error("engine loop: out of memory queueing an output; aborting the request");
                if (outs[k].finish == HY_ENGINE_RUNNING)
                    hy_engine_abort_request(se->e, outs[k].request_id);
                seq_done(se, j, s); /* the handler sees the choice end without a finish: "abort" */
                maybe_free(j);
                continue;
            }
            j->seqs[s].has_out = 1;
            job_signal(j);
            if (outs[k].finish != HY_ENGINE_RUNNING) {
                seq_done(se, j, s);
                maybe_free(j);
            }
        }
        hy_engine_get_stats(se->e, &se->stats);
    }
    /* stopping: abort everything still active */
    while (se->active) {
        struct hy_engine_loop_job *j = se->active;
        for (int i = 0; i < j->n && j->engine_ref; i++)
            if (j->seqs[i].state != SEQ_DONE) {
                if (j->seqs[i].state == SEQ_ACTIVE)
                    hy_engine_abort_request(se->e, j->seqs[i].id);
                struct hy_engine_output ab;
                memset(&ab, 0, sizeof(ab));
                ab.request_id = j->seqs[i].id;
                ab.token_id = -1;
                ab.finish = HY_ENGINE_FINISHED_ABORT;
                q_push(j, i, &ab);
                seq_done(se, j, i);
            }
        maybe_free(j);
    }
    se->running = 0;
    pthread_mutex_unlock(&se->mu);
    return NULL;
}

struct hy_engine_loop *hy_engine_loop_start(struct hy_engine *e, int threads)
{
    struct hy_engine_loop *se = calloc(1, sizeof(*se));
    if (!se) {
        hy_err_set("engine loop: out of memory");
        return NULL;
    }
    se->e = e;
    se->threads = threads;
    pthread_mutex_init(&se->mu, NULL);
    pthread_cond_init(&se->cond, NULL);
    hy_engine_get_stats(e, &se->stats);
    se->running = 1;
    if (pthread_create(&se->thread, NULL, engine_main, se)) {
        hy_err_set("engine loop: cannot start the engine thread");
        free(se);
        return NULL;
    }
    return se;
}

void hy_engine_loop_stop(struct hy_engine_loop *se)
{
    if (!se || se->joined)
        return;
    se->joined = 1;
    pthread_mutex_lock(&se->mu);
    se->stop = 1;
    pthread_cond_signal(&se->cond);
    pthread_mutex_unlock(&se->mu);
    pthread_join(se->thread, NULL);
    /* pending adds that never ran: fail them */
    pthread_mutex_lock(&se->mu);
    while (se->cmds) {
        struct hy_engine_loop_job *j = se->cmds;
        se->cmds = j->cmd_next;
        j->in_cmds = 0;
        if (j->add_pending) {
            j->add_pending = 0;
            j->add_rc = HY_ENGINE_SHUTTING_DOWN;
            snprintf(j->add_err, sizeof(j->add_err), "the server is shutting down");
            j->engine_ref = 0;
            job_signal(j);
        }
        maybe_free(j);
    }
    pthread_mutex_unlock(&se->mu);
}

void hy_engine_loop_drain(struct hy_engine_loop *se)
{
    if (!se)
        return;
    pthread_mutex_lock(&se->mu);
    if (!se->drain) {
        se->drain = 1;
        pthread_cond_signal(&se->cond);
    }
    pthread_mutex_unlock(&se->mu);
}

void hy_engine_loop_free(struct hy_engine_loop *se)
{
    if (!se)
        return;
    pthread_mutex_destroy(&se->mu);
    pthread_cond_destroy(&se->cond);
    free(se);
}

static void abs_deadline(struct timespec *ts, double s)
{
    clock_gettime(CLOCK_REALTIME, ts);
    double whole = floor(s);
    ts->tv_sec += (time_t)whole;
    ts->tv_nsec += (long)((s - whole) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

int hy_engine_loop_submit_async(struct hy_engine_loop *se, const struct hy_engine_request *reqs, int n,
                                struct hy_engine_loop_job **job, void (*notify)(void *), void *arg, char *err,
                                size_t errlen)
{
    *job = NULL;
    struct hy_engine_loop_job *j = calloc(1, sizeof(*j));
    if (j)
        j->seqs = calloc((size_t)n, sizeof(struct seq));
    if (!j || !j->seqs) {
        free(j);
        snprintf(err, errlen, "out of memory");
        return HY_ENGINE_ERROR;
    }
    pthread_cond_init(&j->cond, NULL);
    j->n = n;
    j->reqs = reqs;
    j->add_pending = 1;
    j->engine_ref = 1;
    j->handler_ref = 1;
    j->notify = notify;
    j->notify_arg = arg;
    pthread_mutex_lock(&se->mu);
    if (se->stop || se->drain || !se->running) {
        pthread_mutex_unlock(&se->mu);
        job_free(j);
        snprintf(err, errlen, "the server is shutting down");
        return HY_ENGINE_SHUTTING_DOWN;
    }
    enqueue_cmd(se, j);
    pthread_mutex_unlock(&se->mu);
    *job = j;
    return HY_ENGINE_OK;
}

int hy_engine_loop_submit(struct hy_engine_loop *se, const struct hy_engine_request *reqs, int n,
                          struct hy_engine_loop_job **job, char *err, size_t errlen)
{
    int rc = hy_engine_loop_submit_async(se, reqs, n, job, NULL, NULL, err, errlen);
    if (rc != HY_ENGINE_OK)
        return rc;
    struct hy_engine_loop_job *j = *job;
    pthread_mutex_lock(&se->mu);
    while (j->add_pending)
        pthread_cond_wait(&j->cond, &se->mu);
    rc = j->add_rc;
    if (rc != HY_ENGINE_OK) {
        snprintf(err, errlen, "%s", j->add_err);
        j->handler_ref = 0;
        maybe_free(j);
        *job = NULL;
    }
    pthread_mutex_unlock(&se->mu);
    return rc;
}

int hy_engine_loop_job_status(struct hy_engine_loop *se, struct hy_engine_loop_job *j, char *err, size_t errlen)
{
    pthread_mutex_lock(&se->mu);
    int rc = j->add_pending ? HY_SRV_ADD_PENDING : j->add_rc;
    if (rc != HY_ENGINE_OK && rc != HY_SRV_ADD_PENDING && err && errlen)
        snprintf(err, errlen, "%s", j->add_err);
    pthread_mutex_unlock(&se->mu);
    return rc;
}

size_t hy_engine_loop_job_wait(struct hy_engine_loop *se, struct hy_engine_loop_job *j, double timeout_s,
                               struct hy_engine_loop_out *out, size_t max, int *all_done)
{
    pthread_mutex_lock(&se->mu);
    if (j->q_head == j->q_len && j->engine_ref && timeout_s > 0) {
        struct timespec ts;
        abs_deadline(&ts, timeout_s);
        while (j->q_head == j->q_len && j->engine_ref)
            if (pthread_cond_timedwait(&j->cond, &se->mu, &ts) == ETIMEDOUT)
                break;
    }
    size_t n = 0;
    while (n < max && j->q_head < j->q_len)
        out[n++] = j->q[j->q_head++];
    *all_done = !j->engine_ref && j->q_head == j->q_len;
    pthread_mutex_unlock(&se->mu);
    return n;
}

void hy_engine_loop_job_abort(struct hy_engine_loop *se, struct hy_engine_loop_job *j, int seq)
{
    pthread_mutex_lock(&se->mu);
    int any = 0;
    for (int i = 0; i < j->n; i++)
        if ((seq < 0 || i == seq) && j->seqs[i].state != SEQ_DONE && !j->seqs[i].want_abort) {
            j->seqs[i].want_abort = 1;
            any = 1;
        }
    if (any && j->engine_ref) {
        j->want_abort = 1;
        enqueue_cmd(se, j);
    }
    pthread_mutex_unlock(&se->mu);
}

void hy_engine_loop_job_release(struct hy_engine_loop *se, struct hy_engine_loop_job *j)
{
    if (!j)
        return;
    hy_engine_loop_job_abort(se, j, -1);
    pthread_mutex_lock(&se->mu);
    j->handler_ref = 0;
    j->notify = NULL;
    maybe_free(j);
    pthread_mutex_unlock(&se->mu);
}

void hy_engine_loop_stats(struct hy_engine_loop *se, struct hy_engine_stats *st)
{
    pthread_mutex_lock(&se->mu);
    *st = se->stats;
    pthread_mutex_unlock(&se->mu);
}
