/* completion.c - /v1/chat/completions and /v1/completions: prompt building, the per-choice text
 * pipeline (incremental detokenize -> stop strings -> reasoning split), non-streaming JSON and
 * SSE streaming. Streamed and non-streamed output go through the same pipeline, so their text is
 * identical. */
#include "server/server_internal.h"

#include "base/err.h"
#include "base/log.h"
#include "base/timing.h"
#include "text/reasoning.h"
#include "text/stop.h"
#include "text/prompt.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OUT_BATCH 256

struct choice {
    int index;
    struct hy_detok detok;
    struct hy_stop_matcher stop;
    struct hy_reasoning rs;
    struct hy_sbuf scratch, piece;
    struct hy_sbuf content, reasoning; /* whole text (non-stream) or pending delta (stream) */
    int tc_on;                         /* chat with tools and tool_choice != none: tool calls parsed */
    struct hy_toolcall_parser tc;      /* text/toolcall.h: content -> content + calls */
    struct hy_sbuf tc_in;              /* content text on its way into tc */
    int sent_calls;                    /* stream: calls announced */
    size_t *sent_args;                 /* stream: argument bytes sent per call [sent_cap] */
    int sent_cap;
    size_t text_offset; /* characters decoded so far (completions logprobs) */
    json_t *lp;         /* pending logprobs (array for chat, object for completions) */
    int32_t n_tokens;
    int finished;
    const char *finish_reason;
    json_t *stop_reason; /* vLLM: the stop string / stop token id, else null */
    int finish_emitted;
    int sent_role;
    double t_first, t_last;
};

struct gen {
    struct hy_server *s;
    struct hy_oai_request req;
    int32_t *prompt_ids;
    size_t n_prompt;
    int start_in_reasoning;
    struct hy_token_rules rules; /* tool_choice / parallel_tool_calls enforcement */
    struct hy_engine_request *ereqs;
    struct hy_engine_loop_job *job;
    int n;
    struct choice *ch;
    int n_finished;
    char id[64];
    long long created;
    double t_start;
    struct hy_histogram itl; /* gaps between the tokens of every choice (merged by record_metrics) */
    int all_done;
    /* streaming */
    struct MHD_Connection *conn;
    int fd;
    struct hy_conn_wait wait; /* parked while the engine works (conn_wait.c) */
    int wait_on, added;
    struct hy_sbuf out;
    size_t out_off;
    int sent_done;
    int metrics_done;
    struct hy_engine_loop_out outs[OUT_BATCH];
};

/* ---------------- helpers ---------------- */

static int client_gone(int fd)
{
    if (fd < 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* Unicode code points in s[len] (text_offset counts characters, as OpenAI does). */
static size_t utf8_chars(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

static json_t *token_json(const struct hy_server *s, int32_t id)
{
    size_t len = 0;
    const char *b = hy_tokenizer_token_bytes(s->tok, id, &len);
    if (!b)
        return json_string("");
    return hy_oai_json_string_lossy(b, len);
}

static json_t *token_bytes_json(const struct hy_server *s, int32_t id)
{
    size_t len = 0;
    const char *b = hy_tokenizer_token_bytes(s->tok, id, &len);
    json_t *a = json_array();
    for (size_t i = 0; b && i < len; i++)
        json_array_append_new(a, json_integer((unsigned char)b[i]));
    return a;
}

static void add_logprobs(struct gen *g, struct choice *c, const struct hy_engine_output *o)
{
    struct hy_server *s = g->s;
    if (g->req.kind == HY_OAI_CHAT) {
        if (!c->lp)
            c->lp = json_array();
        json_t *top = json_array();
        for (int k = 0; k < o->n_top && k < g->req.logprobs; k++)
            json_array_append_new(top,
                                  json_pack("{s:o, s:f, s:o}", "token", token_json(s, o->top_ids[k]), "logprob",
                                            (double)o->top_logprobs[k], "bytes", token_bytes_json(s, o->top_ids[k])));
        json_array_append_new(c->lp, json_pack("{s:o, s:f, s:o, s:o}", "token", token_json(s, o->token_id), "logprob",
                                               (double)o->logprob, "bytes", token_bytes_json(s, o->token_id),
                                               "top_logprobs", top));
    } else {
        if (!c->lp)
            c->lp = json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
        json_array_append_new(json_object_get(c->lp, "tokens"), token_json(s, o->token_id));
        json_array_append_new(json_object_get(c->lp, "token_logprobs"), json_real(o->logprob));
        json_t *top = json_object();
        for (int k = 0; k < o->n_top && k < g->req.logprobs; k++) {
            size_t len = 0;
            const char *b = hy_tokenizer_token_bytes(s->tok, o->top_ids[k], &len);
            json_t *key = hy_oai_json_string_lossy(b ? b : "", b ? len : 0);
            if (key)
                json_object_set_new(top, json_string_value(key), json_real(o->top_logprobs[k]));
            json_decref(key);
        }
        json_array_append_new(json_object_get(c->lp, "top_logprobs"), top);
        json_array_append_new(json_object_get(c->lp, "text_offset"), json_integer((json_int_t)c->text_offset));
    }
}

/* Routes stop-filtered text into content / reasoning. */
static void route(struct gen *g, struct choice *c, const char *t, size_t len)
{
    if (!len)
        return;
    if (g->req.kind == HY_OAI_CHAT && c->tc_on) {
        c->tc_in.len = 0;
        hy_reasoning_feed(&c->rs, t, len, &c->tc_in, &c->reasoning);
        hy_toolcall_feed(&c->tc, c->tc_in.p ? c->tc_in.p : "", c->tc_in.len, &c->content);
    } else if (g->req.kind == HY_OAI_CHAT) {
        hy_reasoning_feed(&c->rs, t, len, &c->content, &c->reasoning);
    } else {
        hy_sbuf_append(&c->content, t, len);
    }
}

static void finish_choice(struct gen *g, struct choice *c, const char *reason)
{
    if (c->finished)
        return;
    if (g->req.kind == HY_OAI_CHAT && c->tc_on) {
        c->tc_in.len = 0;
        hy_reasoning_flush(&c->rs, &c->tc_in, &c->reasoning);
        hy_toolcall_feed(&c->tc, c->tc_in.p ? c->tc_in.p : "", c->tc_in.len, &c->content);
        hy_toolcall_finish(&c->tc, &c->content);
        /* "tool_calls" only when a call was completed; "length" and "abort" win */
        if (!strcmp(reason, "stop") && c->tc.n_complete > 0)
            reason = "tool_calls";
    } else if (g->req.kind == HY_OAI_CHAT) {
        hy_reasoning_flush(&c->rs, &c->content, &c->reasoning);
    }
    c->finished = 1;
    c->finish_reason = reason;
    g->n_finished++;
}

/* Feeds decoded text through the stop matcher; finishes the choice on a stop string. */
static void feed(struct gen *g, struct choice *c, const char *t, size_t len)
{
    c->scratch.len = 0;
    int r = hy_stop_feed(&c->stop, t, len, &c->scratch);
    route(g, c, c->scratch.p, c->scratch.len);
    if (r == 1) {
        if (!c->stop_reason && c->stop.which)
            c->stop_reason = json_string(c->stop.which);
        finish_choice(g, c, "stop");
        if (g->job)
            hy_engine_loop_job_abort(g->s->se, g->job, c->index);
    }
}

/* Think and tool-call markers decode as text even when the vocabulary marks them special: the
 * reasoning split and the tool parser read them. */
static int is_markup(const struct hy_server *s, int32_t id)
{
    if (id < 0)
        return 0;
    for (int m = 0; m < HY_TM_COUNT; m++)
        if (s->markers.id[m] == id)
            return 1;
    return 0;
}

/* now: when the pump took the outputs; tokens taken together (one step, or MTP drafts accepted
 * together) make one inter-token gap, as vLLM counts one per engine iteration. */
static void process_output(struct gen *g, const struct hy_engine_loop_out *so, double now)
{
    struct choice *c = &g->ch[so->seq];
    const struct hy_engine_output *o = &so->o;
    if (c->finished)
        return;
    if (o->token_id >= 0) {
        if (c->n_tokens == 0)
            c->t_first = now;
        else if (now > c->t_last)
            hy_histogram_observe(&g->itl, now - c->t_last);
        c->t_last = now;
        c->n_tokens++;
        if (g->req.logprobs >= 0)
            add_logprobs(g, c, o);
        /* the EOS / stop token that ended the request contributes no text */
        if (o->finish == HY_ENGINE_FINISHED_STOP) {
            for (size_t k = 0; k < g->req.n_stop_token_ids; k++)
                if (g->req.stop_token_ids[k] == o->token_id && !c->stop_reason)
                    c->stop_reason = json_integer(o->token_id);
        } else {
            c->piece.len = 0;
            c->detok.skip_special = !is_markup(g->s, o->token_id);
            hy_detok_push(&c->detok, o->token_id, &c->piece.p, &c->piece.len, &c->piece.cap);
            c->detok.skip_special = 1;
            c->text_offset += utf8_chars(c->piece.p, c->piece.len); /* before any stop hold-back */
            feed(g, c, c->piece.p, c->piece.len);
        }
    }
    if (o->finish != HY_ENGINE_RUNNING && !c->finished) {
        c->piece.len = 0;
        hy_detok_flush(&c->detok, &c->piece.p, &c->piece.len, &c->piece.cap);
        feed(g, c, c->piece.p, c->piece.len);
        if (!c->finished) {
            c->scratch.len = 0;
            hy_stop_flush(&c->stop, &c->scratch);
            route(g, c, c->scratch.p, c->scratch.len);
            finish_choice(g, c,
                          o->finish == HY_ENGINE_FINISHED_STOP     ? "stop"
                          : o->finish == HY_ENGINE_FINISHED_LENGTH ? "length"
                                                                   : "abort");
        }
    }
}

/* Pulls outputs (waiting up to timeout_s). When the engine side is done, unfinished choices end
 * as "abort". Returns the number of outputs processed. */
static size_t pump(struct gen *g, double timeout_s)
{
    int all_done = 0;
    size_t n = hy_engine_loop_job_wait(g->s->se, g->job, timeout_s, g->outs, OUT_BATCH, &all_done);
    const double now = hy_time_now();
    for (size_t i = 0; i < n; i++)
        process_output(g, &g->outs[i], now);
    if (all_done) {
        g->all_done = 1;
        for (int i = 0; i < g->n; i++)
            finish_choice(g, &g->ch[i], "abort");
    }
    return n;
}

static void record_metrics(struct gen *g)
{
    if (g->metrics_done)
        return;
    g->metrics_done = 1;
    struct hy_server *s = g->s;
    double now = hy_time_now();
    pthread_mutex_lock(&s->mu);
    hy_histogram_observe(&s->metrics.e2e, now - g->t_start);
    hy_histogram_merge(&s->metrics.itl, &g->itl);
    hy_histogram_observe(&s->metrics.params_n, g->n);
    if (g->req.max_tokens > 0)
        hy_histogram_observe(&s->metrics.params_max_tokens, g->req.max_tokens);
    for (int i = 0; i < g->n; i++) {
        struct choice *c = &g->ch[i];
        hy_histogram_observe(&s->metrics.prompt_tokens, (double)g->n_prompt);
        hy_histogram_observe(&s->metrics.gen_tokens, c->n_tokens);
        if (c->n_tokens > 0) {
            hy_histogram_observe(&s->metrics.ttft, c->t_first - g->t_start);
            hy_histogram_observe(&s->metrics.decode, c->t_last - c->t_first);
            if (c->n_tokens > 1)
                hy_histogram_observe(&s->metrics.tpot, (c->t_last - c->t_first) / (c->n_tokens - 1));
        }
        const char *r = c->finish_reason ? c->finish_reason : "abort";
        s->metrics.requests_ok[!strcmp(r, "stop") || !strcmp(r, "tool_calls") ? 0 : !strcmp(r, "length") ? 1 : 2]++;
    }
    pthread_mutex_unlock(&s->mu);
}

static void gen_free(struct gen *g)
{
    if (!g)
        return;
    if (g->job)
        hy_engine_loop_job_release(g->s->se, g->job); /* no engine wake after this */
    if (g->wait_on)
        hy_conn_wait_fini(&g->wait);
    if (g->ch)
        for (int i = 0; i < g->n; i++) {
            struct choice *c = &g->ch[i];
            hy_stop_free(&c->stop);
            hy_reasoning_free(&c->rs);
            hy_toolcall_free(&c->tc);
            hy_sbuf_free(&c->tc_in);
            free(c->sent_args);
            hy_sbuf_free(&c->scratch);
            hy_sbuf_free(&c->piece);
            hy_sbuf_free(&c->content);
            hy_sbuf_free(&c->reasoning);
            json_decref(c->lp);
            json_decref(c->stop_reason);
        }
    free(g->ch);
    free(g->ereqs);
    free(g->prompt_ids);
    hy_sbuf_free(&g->out);
    hy_oai_request_free(&g->req);
    free(g);
}

static void inflight_add(struct hy_server *s, int d)
{
    pthread_mutex_lock(&s->mu);
    s->inflight += d;
    pthread_mutex_unlock(&s->mu);
}

/* ---------------- JSON building ---------------- */

static json_t *usage_json(const struct gen *g)
{
    long long comp = 0;
    for (int i = 0; i < g->n; i++)
        comp += g->ch[i].n_tokens;
    return json_pack("{s:I, s:I, s:I}", "prompt_tokens", (json_int_t)g->n_prompt, "completion_tokens", (json_int_t)comp,
                     "total_tokens", (json_int_t)(g->n_prompt + (size_t)comp));
}

static json_t *take_lp(struct choice *c, int kind)
{
    json_t *lp = c->lp;
    c->lp = NULL;
    if (!lp)
        return json_null();
    if (kind == HY_OAI_CHAT)
        return json_pack("{s:o}", "content", lp);
    return lp;
}

/* The OpenAI tool call k of choice c: {id, type, function: {name, arguments}} (head: the first
 * stream chunk of a call, arguments ""); or, for a stream's later chunks, {index, function:
 * {arguments: the bytes from `from`}}. ids are "call_" + the response id's hex + choice + index. */
static json_t *tool_call_json(const struct gen *g, const struct choice *c, int k, int head, size_t from)
{
    const struct hy_tool_call *tc = &c->tc.calls[k];
    /* the bytes this object carries: all of them (non-streamed), none (a stream's head), or the new ones */
    const size_t off = !head ? from : g->req.stream ? tc->args.len : 0;
    json_t *args = hy_oai_json_string_lossy(tc->args.p + off, tc->args.len - off);
    if (!head)
        return json_pack("{s:i, s:{s:o}}", "index", k, "function", "arguments", args);
    const char *hex = strchr(g->id, '-');
    char id[96];
    snprintf(id, sizeof(id), "call_%s%02x%02x", hex ? hex + 1 : g->id, c->index & 0xff, k & 0xff);
    json_t *j = json_pack("{s:s, s:s, s:{s:o, s:o}}", "id", id, "type", "function", "function", "name",
                          hy_oai_json_string_lossy(tc->name, strlen(tc->name)), "arguments", args);
    if (g->req.stream)
        json_object_set_new(j, "index", json_integer(k));
    return j;
}

static char *final_json(struct gen *g)
{
    json_t *choices = json_array();
    for (int i = 0; i < g->n; i++) {
        struct choice *c = &g->ch[i];
        json_t *ch;
        if (g->req.kind == HY_OAI_CHAT) {
            json_t *calls = json_array();
            for (int k = 0; k < c->tc.n_calls; k++)
                json_array_append_new(calls, tool_call_json(g, c, k, 1, 0));
            /* content: the text around the calls, or null when there is none besides them */
            json_t *content = c->content.len || !c->tc.n_calls
                                  ? hy_oai_json_string_lossy(c->content.p ? c->content.p : "", c->content.len)
                                  : json_null();
            json_t *msg =
                json_pack("{s:s, s:o, s:o, s:o}", "role", "assistant", "content", content, "reasoning_content",
                          c->reasoning.len ? hy_oai_json_string_lossy(c->reasoning.p, c->reasoning.len) : json_null(),
                          "tool_calls", calls);
            ch = json_pack("{s:i, s:o, s:o, s:s, s:O}", "index", i, "message", msg, "logprobs", take_lp(c, g->req.kind),
                           "finish_reason", c->finish_reason, "stop_reason",
                           c->stop_reason ? c->stop_reason : json_null());
        } else {
            ch = json_pack("{s:i, s:o, s:o, s:s, s:O}", "index", i, "text",
                           hy_oai_json_string_lossy(c->content.p ? c->content.p : "", c->content.len), "logprobs",
                           take_lp(c, g->req.kind), "finish_reason", c->finish_reason, "stop_reason",
                           c->stop_reason ? c->stop_reason : json_null());
        }
        json_array_append_new(choices, ch);
    }
    json_t *root =
        json_pack("{s:s, s:s, s:I, s:s, s:o, s:o}", "id", g->id, "object",
                  g->req.kind == HY_OAI_CHAT ? "chat.completion" : "text_completion", "created", (json_int_t)g->created,
                  "model", g->s->model_name, "choices", choices, "usage", usage_json(g));
    char *out = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return out;
}

static void sse_append(struct gen *g, json_t *chunk)
{
    char *s = json_dumps(chunk, JSON_COMPACT);
    json_decref(chunk);
    if (!s)
        return;
    hy_sbuf_puts(&g->out, "data: ");
    hy_sbuf_puts(&g->out, s);
    hy_sbuf_puts(&g->out, "\n\n");
    free(s);
}

static json_t *chunk_envelope(struct gen *g, json_t *choices)
{
    json_t *c = json_pack("{s:s, s:s, s:I, s:s, s:o}", "id", g->id, "object",
                          g->req.kind == HY_OAI_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)g->created, "model", g->s->model_name, "choices", choices);
    if (g->req.include_usage)
        json_object_set_new(c, "usage", json_null());
    return c;
}

/* One text chunk of choice i: its pending content / reasoning / logprobs, and the finish when
 * finishing. */
static void emit_text_chunk(struct gen *g, struct choice *c, int i, int finishing)
{
    json_t *ch;
    if (g->req.kind == HY_OAI_CHAT) {
        json_t *delta = json_object();
        if (c->reasoning.len)
            json_object_set_new(delta, "reasoning_content", hy_oai_json_string_lossy(c->reasoning.p, c->reasoning.len));
        if (c->content.len)
            json_object_set_new(delta, "content", hy_oai_json_string_lossy(c->content.p, c->content.len));
        ch = json_pack("{s:i, s:o, s:o}", "index", i, "delta", delta, "logprobs", take_lp(c, g->req.kind));
    } else {
        ch = json_pack("{s:i, s:o, s:o}", "index", i, "text",
                       hy_oai_json_string_lossy(c->content.p ? c->content.p : "", c->content.len), "logprobs",
                       take_lp(c, g->req.kind));
    }
    json_object_set_new(ch, "finish_reason", finishing ? json_string(c->finish_reason) : json_null());
    if (finishing) {
        json_object_set(ch, "stop_reason", c->stop_reason ? c->stop_reason : json_null());
        c->finish_emitted = 1;
    }
    c->content.len = 0;
    c->reasoning.len = 0;
    sse_append(g, chunk_envelope(g, json_pack("[o]", ch)));
}

/* 1 if choice c has calls to announce or argument bytes to send. */
static int tool_updates(const struct choice *c)
{
    if (c->tc.n_calls > c->sent_calls)
        return 1;
    for (int k = 0; k < c->sent_calls; k++)
        if (c->tc.calls[k].args.len > c->sent_args[k])
            return 1;
    return 0;
}

/* Tool-call chunks of choice i: a new call's head {index, id, type, function: {name, arguments:
 * ""}}, then {index, function: {arguments: fragment}} with the bytes not sent yet. */
static void emit_tool_chunks(struct gen *g, struct choice *c, int i)
{
    if (c->tc.n_calls > c->sent_cap) {
        int cap = c->tc.n_calls + 8;
        size_t *p = realloc(c->sent_args, (size_t)cap * sizeof(size_t));
        if (!p)
            return;
        memset(p + c->sent_cap, 0, (size_t)(cap - c->sent_cap) * sizeof(size_t));
        c->sent_args = p;
        c->sent_cap = cap;
    }
    for (int k = 0; k < c->tc.n_calls; k++) {
        if (k >= c->sent_calls) {
            json_t *delta = json_pack("{s:[o]}", "tool_calls", tool_call_json(g, c, k, 1, 0));
            sse_append(g, chunk_envelope(g, json_pack("[{s:i, s:o, s:n, s:n}]", "index", i, "delta", delta, "logprobs",
                                                      "finish_reason")));
            c->sent_calls = k + 1;
        }
        size_t len = c->tc.calls[k].args.len;
        if (len > c->sent_args[k]) {
            json_t *delta = json_pack("{s:[o]}", "tool_calls", tool_call_json(g, c, k, 0, c->sent_args[k]));
            sse_append(g, chunk_envelope(g, json_pack("[{s:i, s:o, s:n, s:n}]", "index", i, "delta", delta, "logprobs",
                                                      "finish_reason")));
            c->sent_args[k] = len;
        }
    }
}

/* Appends SSE chunks for whatever the choices have pending; on the end, the usage chunk (when
 * asked) and [DONE]. Within a choice: text before tool-call deltas (content precedes the calls). */
static void stream_emit(struct gen *g)
{
    for (int i = 0; i < g->n; i++) {
        struct choice *c = &g->ch[i];
        int finishing = c->finished && !c->finish_emitted;
        if (g->req.kind == HY_OAI_CHAT && !c->sent_role) {
            c->sent_role = 1;
            json_t *delta = json_pack("{s:s, s:s}", "role", "assistant", "content", "");
            sse_append(g, chunk_envelope(g, json_pack("[{s:i, s:o, s:n, s:n}]", "index", i, "delta", delta, "logprobs",
                                                      "finish_reason")));
        }
        if (c->tc_on && tool_updates(c)) {
            if (c->content.len || c->reasoning.len || c->lp)
                emit_text_chunk(g, c, i, 0);
            emit_tool_chunks(g, c, i);
        }
        if (!c->content.len && !c->reasoning.len && !c->lp && !finishing)
            continue;
        emit_text_chunk(g, c, i, finishing);
    }
    if (g->n_finished == g->n && !g->sent_done) {
        if (g->req.include_usage) {
            json_t *u = json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", g->id, "object",
                                  g->req.kind == HY_OAI_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                                  (json_int_t)g->created, "model", g->s->model_name, "choices", "usage", usage_json(g));
            sse_append(g, u);
        }
        hy_sbuf_puts(&g->out, "data: [DONE]\n\n");
        g->sent_done = 1;
        record_metrics(g);
    }
}

/* Drains every queued output into the choices (without waiting). */
static void pump_all(struct gen *g)
{
    while (g->n_finished < g->n && pump(g, 0) == OUT_BATCH)
        ;
}

/* The server drains for shutdown and a choice ended as "abort": the shutdown cut the request. */
static int shutdown_aborted(const struct gen *g)
{
    if (!g->s->draining)
        return 0;
    for (int i = 0; i < g->n; i++)
        if (g->ch[i].finish_reason && !strcmp(g->ch[i].finish_reason, "abort"))
            return 1;
    return 0;
}

static int gen_gone(struct gen *g)
{
    return g->wait.gone || client_gone(g->fd);
}

/* A stream cut by the shutdown ends with an error chunk and [DONE]. */
static void stream_error_end(struct gen *g)
{
    struct hy_oai_error e;
    hy_oai_error_set(&e, 503, NULL, "The server is shutting down; the request was aborted");
    char *body = hy_oai_error_json(&e);
    if (body) {
        hy_sbuf_puts(&g->out, "data: ");
        hy_sbuf_puts(&g->out, body);
        hy_sbuf_puts(&g->out, "\n\n");
        free(body);
    }
    hy_sbuf_puts(&g->out, "data: [DONE]\n\n");
    g->sent_done = 1;
    record_metrics(g);
}

/* libmicrohttpd's content reader: never waits. With nothing to send it suspends the connection
 * and returns 0; the engine's notify hook (or the disconnect watcher) resumes it. */
static ssize_t stream_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct gen *g = cls;
    for (;;) {
        if (g->out_off < g->out.len) {
            size_t n = g->out.len - g->out_off;
            if (n > max)
                n = max;
            memcpy(buf, g->out.p + g->out_off, n);
            g->out_off += n;
            return (ssize_t)n;
        }
        g->out.len = 0;
        g->out_off = 0;
        if (g->sent_done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        pump_all(g);
        if (g->n_finished == g->n && shutdown_aborted(g))
            stream_error_end(g);
        else
            stream_emit(g);
        if (g->out.len)
            continue;
        if (gen_gone(g)) {
            hy_log_info("client disconnected; aborting %s", g->id);
            hy_engine_loop_job_abort(g->s->se, g->job, -1);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (hy_conn_wait_suspend(&g->wait))
            return 0;
    }
}

static void stream_free(void *cls)
{
    struct gen *g = cls;
    struct hy_server *s = g->s;
    if (!g->sent_done) {
        for (int i = 0; i < g->n; i++)
            if (!g->ch[i].finished)
                finish_choice(g, &g->ch[i], "abort");
        record_metrics(g);
    }
    gen_free(g);
    inflight_add(s, -1);
}

/* ---------------- the handler ---------------- */

static int build_prompt(struct gen *g, struct hy_oai_error *e)
{
    struct hy_server *s = g->s;
    struct hy_oai_request *r = &g->req;
    if (r->kind == HY_OAI_CHAT) {
        if (hy_chat_parse_tool_arguments(r->messages))
            return hy_oai_error_set(e, 400, "messages", "%s", hy_err_msg());
        char *prompt = hy_chat_apply(&s->chat, r->messages, r->tools, r->template_kwargs);
        if (!prompt)
            return hy_oai_error_set(e, 400, "messages", "%s", hy_err_msg());
        g->start_in_reasoning = hy_reasoning_prompt_open_markers(
            prompt, strlen(prompt), s->markers.text[HY_TM_THINK_OPEN], s->markers.text[HY_TM_THINK_CLOSE]);
        int rc = hy_prompt_encode(s->tok, prompt, strlen(prompt), 0, &g->prompt_ids, &g->n_prompt);
        free(prompt);
        if (rc)
            return hy_oai_error_set(e, 500, NULL, "%s", hy_err_msg());
    } else if (r->prompt_ids) {
        g->prompt_ids = malloc(r->n_prompt_ids * sizeof(int32_t));
        if (!g->prompt_ids)
            return hy_oai_error_set(e, 500, NULL, "out of memory");
        memcpy(g->prompt_ids, r->prompt_ids, r->n_prompt_ids * sizeof(int32_t));
        g->n_prompt = r->n_prompt_ids;
    } else {
        if (hy_prompt_encode(s->tok, r->prompt_text, r->prompt_text_len, 1, &g->prompt_ids, &g->n_prompt))
            return hy_oai_error_set(e, 500, NULL, "%s", hy_err_msg());
    }
    return 0;
}

/* Appends the tokens of text[len] (no special-token parsing) to f->seq. 0 or -1 (too long / OOM). */
static int force_text(const struct hy_server *s, struct hy_force_rule *f, const char *text)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (hy_tokenizer_encode(s->tok, text, strlen(text), 0, &ids, &n))
        return -1;
    int rc = f->n + (int32_t)n > HY_RULES_MAX_SEQ ? -1 : 0;
    for (size_t i = 0; !rc && i < n; i++)
        f->seq[f->n++] = ids[i];
    free(ids);
    return rc;
}

/* Appends alternative ids[0..n) + end to f's alternatives; 0, or -1 when the rule's budget is spent. */
static int add_alternative(struct hy_force_rule *f, const int32_t *ids, size_t n, int32_t end)
{
    int32_t off = f->alt_off[f->n_alts];
    if (f->n_alts == HY_RULES_MAX_ALTS || off + (int32_t)n + 1 > HY_RULES_MAX_ALT_IDS)
        return -1;
    for (size_t k = 0; k < n; k++)
        f->alt_ids[off++] = ids[k];
    f->alt_ids[off++] = end;
    f->alt_off[++f->n_alts] = off;
    return 0;
}

/* The tool named `name` in an OpenAI tools array, or NULL. */
static const json_t *find_tool(const json_t *tools, const char *name)
{
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *t = json_array_get(tools, i);
        const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        if (n && !strcmp(n, name))
            return t;
    }
    return NULL;
}

/* The tokens that may follow a Hy4 call's name: <arg_key> when the tool takes parameters, </tool_call>
 * when none is required (a tool without a schema may do either). */
static void hy4_name_ends(const struct hy_server *s, const json_t *tool, int32_t end[2], int *n_end)
{
    const json_t *params = json_object_get(json_object_get(tool, "function"), "parameters");
    const json_t *props = json_object_get(params, "properties"), *req = json_object_get(params, "required");
    *n_end = 0;
    if (!params || !json_is_object(props) || json_object_size(props) > 0)
        end[(*n_end)++] = s->markers.id[HY_TM_KEY_OPEN];
    if (!json_is_array(req) || json_array_size(req) == 0)
        end[(*n_end)++] = s->markers.id[HY_TM_CALL_CLOSE];
}

/* required: the model picks one of the tools' names, each followed by what may follow a name (rule
 * alternatives): <tool_sep> in Hy3, <arg_key> or </tool_call> in Hy4. Duplicate names count once; with
 * more than HY_RULES_MAX_ALTS alternatives or names too long for the id budget the name is left free. */
static void name_alternatives(const struct hy_server *s, const json_t *tools, struct hy_force_rule *f)
{
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t)
    {
        const char *name = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        int dup = 0;
        for (size_t j = 0; j < i && !dup; j++) {
            const char *o =
                json_string_value(json_object_get(json_object_get(json_array_get(tools, j), "function"), "name"));
            dup = o && name && !strcmp(o, name);
        }
        if (dup || !name)
            continue;
        int32_t end[2] = {s->markers.id[HY_TM_SEP], -1};
        int n_end = 1;
        if (s->markers.dialect == HY_TOOL_DIALECT_HY4)
            hy4_name_ends(s, t, end, &n_end);
        int32_t *ids = NULL;
        size_t nid = 0;
        int bad = hy_tokenizer_encode(s->tok, name, strlen(name), 0, &ids, &nid);
        for (int k = 0; k < n_end && !bad; k++)
            bad = add_alternative(f, ids, nid, end[k]);
        free(ids);
        if (bad) {
            f->n_alts = 0;
            return;
        }
    }
}

/* tool_choice / parallel_tool_calls as token rules (sample/token_rules.h):
 *  none      - the <tool_calls> marker is banned, so the model cannot start a call;
 *  required  - after </think> (the no_think prompt ends with it; with reasoning, when the model
 *              closes its think block) "<tool_calls>\n<tool_call>" (Hy4: no newline) is forced, the
 *              model picks one of the tools' names (only those tokens are allowed) and writes the
 *              arguments;
 *  named     - the same plus the name and <tool_sep> (Hy4: then <arg_key> or </tool_call>, as the
 *              tool's schema allows): the model writes the arguments only;
 *  parallel_tool_calls false - after the first </tool_call>, "\n</tool_calls>" (Hy4: "</tool_calls>")
 *              and EOS. */
static int build_rules(struct gen *g, struct hy_oai_error *e)
{
    const struct hy_server *s = g->s;
    const struct hy_oai_request *r = &g->req;
    memset(&g->rules, 0, sizeof(g->rules));
    if (r->kind != HY_OAI_CHAT || !r->tools)
        return 0;
    const int32_t *id = s->markers.id;
    const int hy4 = s->markers.dialect == HY_TOOL_DIALECT_HY4;
    if (r->tool_choice == HY_TOOL_CHOICE_NONE) {
        if (id[HY_TM_CALLS_OPEN] >= 0)
            g->rules.banned[g->rules.n_banned++] = id[HY_TM_CALLS_OPEN];
        return 0;
    }
    const int need_force = r->tool_choice == HY_TOOL_CHOICE_REQUIRED || r->tool_choice == HY_TOOL_CHOICE_NAMED;
    if (!s->have_tool_markers || id[HY_TM_THINK_CLOSE] < 0 || id[HY_TM_CALLS_OPEN] < 0 || id[HY_TM_CALL_OPEN] < 0 ||
        (hy4 ? id[HY_TM_KEY_OPEN] : id[HY_TM_SEP]) < 0 || id[HY_TM_CALL_CLOSE] < 0 || id[HY_TM_CALLS_CLOSE] < 0) {
        if (need_force)
            return hy_oai_error_set(e, 400, "tool_choice",
                                    "tool_choice needs the model's tool-call tokens, which its vocabulary lacks");
        return 0;
    }
    const char *between = hy4 ? "" : "\n"; /* between the markers of the block and of its calls */
    if (need_force) {
        struct hy_force_rule *f = &g->rules.force[g->rules.n_force++];
        f->trigger = id[HY_TM_THINK_CLOSE];
        f->seq[f->n++] = id[HY_TM_CALLS_OPEN];
        if (force_text(s, f, between))
            return hy_oai_error_set(e, 500, NULL, "cannot tokenize the tool-call prefix");
        f->seq[f->n++] = id[HY_TM_CALL_OPEN];
        if (r->tool_choice == HY_TOOL_CHOICE_NAMED) {
            if (force_text(s, f, r->tool_choice_name) || f->n + 1 > HY_RULES_MAX_SEQ)
                return hy_oai_error_set(e, 400, "tool_choice", "tool_choice: the function name is too long to force");
            if (hy4) {
                int32_t end[2];
                int n_end;
                hy4_name_ends(s, find_tool(r->tools, r->tool_choice_name), end, &n_end);
                for (int k = 0; k < n_end; k++)
                    add_alternative(f, NULL, 0, end[k]);
            } else {
                f->seq[f->n++] = id[HY_TM_SEP];
            }
        } else {
            name_alternatives(s, r->tools, f);
        }
    }
    if (!r->parallel_tool_calls) {
        struct hy_force_rule *f = &g->rules.force[g->rules.n_force++];
        f->trigger = id[HY_TM_CALL_CLOSE];
        if (force_text(s, f, between))
            return hy_oai_error_set(e, 500, NULL, "cannot tokenize the tool-call suffix");
        f->seq[f->n++] = id[HY_TM_CALLS_CLOSE];
        if (s->model->cfg.n_eos > 0)
            f->seq[f->n++] = s->model->cfg.eos_token_ids[0];
    }
    return 0;
}

static int setup_choices(struct gen *g, struct hy_oai_error *e)
{
    if (build_rules(g, e))
        return -1;
    struct hy_server *s = g->s;
    g->n = g->req.n;
    g->ch = calloc((size_t)g->n, sizeof(struct choice));
    g->ereqs = calloc((size_t)g->n, sizeof(struct hy_engine_request));
    if (!g->ch || !g->ereqs)
        return hy_oai_error_set(e, 500, NULL, "out of memory");
    int32_t max_tokens =
        g->req.max_tokens > 0 ? g->req.max_tokens : (int32_t)(s->limits.max_model_len - (int32_t)g->n_prompt);
    for (int i = 0; i < g->n; i++) {
        struct choice *c = &g->ch[i];
        c->index = i;
        hy_detok_init(&c->detok, s->tok, 1);
        /* the detokenizer sees the prompt's last token first, so the first output token decodes in
         * context (SentencePiece leading-space rule); its text is discarded */
        if (g->n_prompt) {
            hy_detok_push(&c->detok, g->prompt_ids[g->n_prompt - 1], &c->piece.p, &c->piece.len, &c->piece.cap);
            c->piece.len = 0;
            c->detok.n_pending = 0;
        }
        if (hy_stop_init(&c->stop, g->req.stop, g->req.n_stop))
            return hy_oai_error_set(e, 500, NULL, "out of memory");
        hy_reasoning_init_markers(&c->rs, g->start_in_reasoning, s->markers.text[HY_TM_THINK_OPEN],
                                  s->markers.text[HY_TM_THINK_CLOSE]);
        c->tc_on = g->req.kind == HY_OAI_CHAT && g->req.tools && g->req.tool_choice != HY_TOOL_CHOICE_NONE &&
                   s->have_tool_markers;
        if (c->tc_on)
            hy_toolcall_init(&c->tc, &s->markers, g->req.tools);
        struct hy_engine_request *er = &g->ereqs[i];
        er->rules = hy_token_rules_empty(&g->rules) ? NULL : &g->rules;
        er->prompt_ids = g->prompt_ids;
        er->n_prompt = g->n_prompt;
        er->params = g->req.sp;
        er->params.max_new_tokens = max_tokens;
        if (er->params.has_seed)
            er->params.seed = g->req.sp.seed + (uint64_t)i;
        er->stop_token_ids = g->req.stop_token_ids;
        er->n_stop_token_ids = g->req.n_stop_token_ids;
        er->logprobs = g->req.logprobs;
    }
    return 0;
}

/* Ends a request that waited: frees it and queues an error (e) or nothing (e NULL: MHD_NO). */
static enum MHD_Result gen_end(struct gen *g, void **state, const struct hy_oai_error *e)
{
    struct hy_server *s = g->s;
    struct MHD_Connection *conn = g->conn;
    *state = NULL;
    gen_free(g);
    inflight_add(s, -1);
    return e ? hy_server_respond_error(s, conn, e) : MHD_NO;
}

/* The request after its submit: waits (suspended) for the engine to take it, then queues the SSE
 * response (stream) or waits for the end and queues the JSON. */
static enum MHD_Result gen_step(struct gen *g, void **state)
{
    struct hy_server *s = g->s;
    struct hy_oai_error e;
    memset(&e, 0, sizeof(e));
    for (;;) {
        if (!g->added) {
            char err[512];
            int rc = hy_engine_loop_job_status(s->se, g->job, err, sizeof(err));
            if (rc == HY_ENGINE_QUEUE_FULL) {
                hy_oai_error_set(&e, 503, NULL,
                                 "The server is overloaded: too many requests are waiting (%d). "
                                 "Retry later.",
                                 (int)s->cfg->engine.max_waiting_requests);
                return gen_end(g, state, &e);
            }
            if (rc != HY_ENGINE_OK && rc != HY_SRV_ADD_PENDING) {
                hy_oai_error_set(&e, rc == HY_ENGINE_SHUTTING_DOWN ? 503 : 400, NULL, "%s", err);
                return gen_end(g, state, &e);
            }
            if (rc == HY_ENGINE_OK) {
                g->added = 1;
                if (g->req.stream) {
                    struct MHD_Response *resp =
                        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_cb, g, stream_free);
                    if (!resp)
                        return gen_end(g, state, NULL);
                    *state = NULL; /* the response owns g now: stream_free */
                    MHD_add_response_header(resp, "Content-Type", "text/event-stream; charset=utf-8");
                    MHD_add_response_header(resp, "Cache-Control", "no-cache");
                    enum MHD_Result r = MHD_queue_response(g->conn, MHD_HTTP_OK, resp);
                    MHD_destroy_response(resp);
                    return r;
                }
            }
        }
        if (g->added) {
            pump_all(g);
            if (g->n_finished == g->n) {
                record_metrics(g);
                if (shutdown_aborted(g)) {
                    hy_oai_error_set(&e, 503, NULL, "The server is shutting down; the request was aborted");
                    return gen_end(g, state, &e);
                }
                char *out = final_json(g);
                struct MHD_Connection *conn = g->conn;
                gen_end(g, state, NULL);
                if (!out) {
                    hy_oai_error_set(&e, 500, NULL, "out of memory");
                    return hy_server_respond_error(s, conn, &e);
                }
                enum MHD_Result r = hy_server_respond_json(conn, MHD_HTTP_OK, out);
                free(out);
                return r;
            }
        }
        if (gen_gone(g)) {
            hy_log_info("client disconnected; aborting %s", g->id);
            for (int i = 0; i < g->n; i++)
                finish_choice(g, &g->ch[i], "abort");
            record_metrics(g);
            return gen_end(g, state, NULL);
        }
        if (hy_conn_wait_suspend(&g->wait))
            return MHD_YES;
    }
}

void hy_server_generate_free(void *state)
{
    struct gen *g = state;
    if (!g)
        return;
    for (int i = 0; i < g->n; i++)
        finish_choice(g, &g->ch[i], "abort");
    record_metrics(g);
    struct hy_server *s = g->s;
    gen_free(g);
    inflight_add(s, -1);
}

enum MHD_Result hy_server_handle_generate(struct hy_server *s, struct MHD_Connection *conn, enum hy_oai_kind kind,
                                          const char *body, size_t len, void **state)
{
    if (*state)
        return gen_step(*state, state);
    struct hy_oai_error e;
    memset(&e, 0, sizeof(e));
    struct gen *g = calloc(1, sizeof(*g));
    if (!g) {
        hy_oai_error_set(&e, 500, NULL, "out of memory");
        return hy_server_respond_error(s, conn, &e);
    }
    g->s = s;
    g->fd = -1;
    g->t_start = hy_time_now();
    hy_histogram_init_itl(&g->itl);
    g->created = (long long)time(NULL);
    if (hy_oai_parse(kind, body, len, &s->limits, &g->req, &e))
        goto fail;
    if (g->req.model && strcmp(g->req.model, s->model_name)) {
        hy_oai_error_set(&e, 404, "model", "The model `%s` does not exist.", g->req.model);
        goto fail;
    }
    if (build_prompt(g, &e) ||
        hy_oai_check_context(g->n_prompt, g->req.max_tokens, s->limits.max_model_len, kind, &e) || setup_choices(g, &e))
        goto fail;
    pthread_mutex_lock(&s->mu);
    unsigned long long seq = ++s->next_id;
    pthread_mutex_unlock(&s->mu);
    snprintf(g->id, sizeof(g->id), "%s-%016llx%08x", kind == HY_OAI_CHAT ? "chatcmpl" : "cmpl", seq, (unsigned)rand());
    g->conn = conn;
    if (hy_conn_wait_init(&g->wait, s, conn)) {
        hy_oai_error_set(&e, 500, NULL, "out of memory");
        goto fail;
    }
    g->wait_on = 1;
    g->fd = g->wait.fd;
    char err[512];
    int rc = hy_engine_loop_submit_async(s->se, g->ereqs, g->n, &g->job, hy_conn_wait_wake, &g->wait, err, sizeof(err));
    if (rc != HY_ENGINE_OK) {
        hy_oai_error_set(&e, rc == HY_ENGINE_SHUTTING_DOWN ? 503 : 400, NULL, "%s", err);
        goto fail;
    }
    inflight_add(s, 1);
    *state = g;
    return gen_step(g, state);
fail:
    gen_free(g);
    return hy_server_respond_error(s, conn, &e);
}
