/* http.c - libmicrohttpd daemon (epoll, a pool of HTTP threads, suspend/resume for generation),
 * connection limits, routing, auth, body limits, /health /metrics /v1/models /tokenize
 * /detokenize, start-up (listen first, then load: /health says 503 until ready) and the drain on
 * shutdown. */
#include "server/server_internal.h"

#include "base/err.h"
#include "base/log.h"
#include "base/timing.h"
#include "engine/executor.h"
#include "text/prompt.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_MAX_BODY (4u << 20)
#define HTTP_THREADS 4 /* libmicrohttpd's pool; none of them ever waits on the engine */
#define DEFAULT_MAX_CONNECTIONS 8192
#define DEFAULT_HTTP_TIMEOUT_S 15

struct conn_ctx {
    struct hy_sbuf body;
    int too_large;
    int arrived; /* the whole request is in */
    int is_gen;
    void *gen; /* a generation request waiting for the engine (hy_server_handle_generate) */
};

/* During the shutdown drain: 503 and close the connection. */
static enum MHD_Result respond_draining(struct hy_server *s, struct MHD_Connection *conn, const char *url)
{
    pthread_mutex_lock(&s->mu);
    s->metrics.requests_error++;
    pthread_mutex_unlock(&s->mu);
    struct hy_oai_error e;
    hy_oai_error_set(&e, 503, NULL, "The server is shutting down");
    char *body = !strcmp(url, "/health") ? NULL : hy_oai_error_json(&e);
    const char *b = body ? body : "shutting down\n";
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(b), (void *)b, MHD_RESPMEM_MUST_COPY);
    free(body);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", strcmp(url, "/health") ? "application/json" : "text/plain");
    MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_SERVICE_UNAVAILABLE, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result respond_text(struct MHD_Connection *conn, unsigned status, const char *ctype, const char *body,
                                    size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static int auth_ok(const struct hy_server *s, struct MHD_Connection *conn)
{
    const char *key = s->cfg->api_key;
    if (!key || !key[0])
        return 1;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7))
        return 0;
    h += 7;
    size_t a = strlen(h), b = strlen(key);
    unsigned diff = (unsigned)(a ^ b);
    for (size_t i = 0; i < a && i < b; i++)
        diff |= (unsigned)(h[i] ^ key[i]);
    return diff == 0;
}

/* vLLM's ModelCard: id, object, created, owned_by "vllm", root (the model path), parent null,
 * max_model_len, and one ModelPermission. */
static enum MHD_Result handle_models(struct hy_server *s, struct MHD_Connection *conn)
{
    const json_int_t now = (json_int_t)time(NULL);
    char perm_id[48];
    snprintf(perm_id, sizeof(perm_id), "modelperm-%08x%08x%08x%08x", (unsigned)rand(), (unsigned)rand(),
             (unsigned)rand(), (unsigned)rand());
    json_t *perm = json_pack("{s:s, s:s, s:I, s:b, s:b, s:b, s:b, s:b, s:b, s:s, s:n, s:b}", "id", perm_id, "object",
                             "model_permission", "created", now, "allow_create_engine", 0, "allow_sampling", 1,
                             "allow_logprobs", 1, "allow_search_indices", 0, "allow_view", 1, "allow_fine_tuning", 0,
                             "organization", "*", "group", "is_blocking", 0);
    json_t *root =
        json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:s, s:n, s:i, s:[o]}]}", "object", "list", "data", "id",
                  s->model_name, "object", "model", "created", now, "owned_by", "vllm", "root", s->cfg->model_dir,
                  "parent", "max_model_len", (int)s->limits.max_model_len, "permission", perm);
    char *out = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    enum MHD_Result rc = hy_server_respond_json(conn, MHD_HTTP_OK, out ? out : "{}");
    free(out);
    return rc;
}

static enum MHD_Result handle_metrics(struct hy_server *s, struct MHD_Connection *conn)
{
    struct hy_engine_stats st;
    memset(&st, 0, sizeof(st));
    if (s->se)
        hy_engine_loop_stats(s->se, &st);
    struct hy_server_metrics m;
    pthread_mutex_lock(&s->mu);
    m = s->metrics;
    pthread_mutex_unlock(&s->mu);
    struct hy_sbuf o = {0};
    hy_metrics_render(&m, &st, s->model_name, &o);
    enum MHD_Result rc = respond_text(conn, MHD_HTTP_OK, "text/plain; version=0.0.4", o.p ? o.p : "", o.len);
    hy_sbuf_free(&o);
    return rc;
}

static enum MHD_Result handle_tokenize(struct hy_server *s, struct MHD_Connection *conn, const char *body, size_t len)
{
    struct hy_oai_error e;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    int32_t *ids = NULL;
    size_t n = 0;
    char *prompt = NULL;
    enum MHD_Result rc;
    if (!json_is_object(root)) {
        hy_oai_error_set(&e, 400, NULL, "Invalid JSON in request body: expected an object");
        goto err;
    }
    json_t *model = json_object_get(root, "model");
    if (json_is_string(model) && strcmp(json_string_value(model), s->model_name)) {
        hy_oai_error_set(&e, 404, "model", "The model `%s` does not exist.", json_string_value(model));
        goto err;
    }
    json_t *p = json_object_get(root, "prompt"), *msgs = json_object_get(root, "messages");
    json_t *ast = json_object_get(root, "add_special_tokens");
    if (ast && !json_is_boolean(ast)) {
        hy_oai_error_set(&e, 400, "add_special_tokens", "'add_special_tokens' must be a boolean");
        goto err;
    }
    if (json_is_string(p)) {
        if (hy_prompt_encode(s->tok, json_string_value(p), json_string_length(p), !ast || json_is_true(ast), &ids,
                             &n)) {
            hy_oai_error_set(&e, 500, NULL, "%s", hy_err_msg());
            goto err;
        }
    } else if (json_is_array(msgs) && json_array_size(msgs)) {
        json_t *kw = json_object_get(root, "chat_template_kwargs");
        json_t *kwc = json_is_object(kw) ? json_deep_copy(kw) : json_object();
        json_t *agp = json_object_get(root, "add_generation_prompt");
        if (!json_object_get(kwc, "add_generation_prompt"))
            json_object_set_new(kwc, "add_generation_prompt", json_boolean(!agp || json_is_true(agp)));
        if (hy_chat_parse_tool_arguments(msgs) == 0)
            prompt = hy_chat_apply(&s->chat, msgs, json_object_get(root, "tools"), kwc);
        json_decref(kwc);
        if (!prompt) {
            hy_oai_error_set(&e, 400, "messages", "%s", hy_err_msg());
            goto err;
        }
        if (hy_prompt_encode(s->tok, prompt, strlen(prompt), 0, &ids, &n)) {
            hy_oai_error_set(&e, 500, NULL, "%s", hy_err_msg());
            goto err;
        }
    } else {
        hy_oai_error_set(&e, 400, "prompt", "need 'prompt' (a string) or 'messages' (a non-empty list)");
        goto err;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_integer(ids[i]));
    json_t *out = json_pack("{s:I, s:i, s:o}", "count", (json_int_t)n, "max_model_len", (int)s->limits.max_model_len,
                            "tokens", arr);
    char *str = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    rc = hy_server_respond_json(conn, MHD_HTTP_OK, str ? str : "{}");
    free(str);
    goto done;
err:
    rc = hy_server_respond_error(s, conn, &e);
done:
    free(ids);
    free(prompt);
    json_decref(root);
    return rc;
}

static enum MHD_Result handle_detokenize(struct hy_server *s, struct MHD_Connection *conn, const char *body, size_t len)
{
    struct hy_oai_error e;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    int32_t *ids = NULL;
    enum MHD_Result rc;
    json_t *toks = json_is_object(root) ? json_object_get(root, "tokens") : NULL;
    if (!json_is_array(toks)) {
        hy_oai_error_set(&e, 400, "tokens",
                         json_is_object(root) ? "'tokens' must be a list of integers"
                                              : "Invalid JSON in request body: expected an object");
        goto err;
    }
    size_t n = json_array_size(toks);
    ids = malloc((n ? n : 1) * sizeof(int32_t));
    int32_t vocab = s->limits.vocab_size;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(toks, i);
        if (!json_is_integer(v)) {
            hy_oai_error_set(&e, 400, "tokens", "'tokens' must be a list of integers");
            goto err;
        }
        json_int_t id = json_integer_value(v);
        if (id < 0 || id >= vocab) {
            hy_oai_error_set(&e, 400, "tokens", "Token id %lld is out of vocabulary (vocabulary size %d)",
                             (long long)id, (int)vocab);
            goto err;
        }
        ids[i] = (int32_t)id;
    }
    char *text = hy_tokenizer_decode(s->tok, ids, n, 0);
    if (!text) {
        hy_oai_error_set(&e, 500, NULL, "decode failed");
        goto err;
    }
    json_t *out = json_pack("{s:o}", "prompt", hy_oai_json_string_lossy(text, strlen(text)));
    free(text);
    char *str = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    rc = hy_server_respond_json(conn, MHD_HTTP_OK, str ? str : "{}");
    free(str);
    goto done;
err:
    rc = hy_server_respond_error(s, conn, &e);
done:
    free(ids);
    json_decref(root);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    struct hy_server *s = cls;
    struct conn_ctx *cc = *con_cls;
    struct hy_oai_error e;
    size_t max_body = s->cfg->max_body_bytes ? s->cfg->max_body_bytes : DEFAULT_MAX_BODY;
    if (!cc) {
        cc = calloc(1, sizeof(*cc));
        if (!cc)
            return MHD_NO;
        *con_cls = cc;
        pthread_mutex_lock(&s->mu);
        s->metrics.http_requests++;
        pthread_mutex_unlock(&s->mu);
        if (s->draining && strcmp(url, "/metrics"))
            return respond_draining(s, conn, url);
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > max_body) {
            hy_oai_error_set(&e, 413, NULL, "Request body too large: %s bytes (limit %zu)", cl, max_body);
            return hy_server_respond_error(s, conn, &e);
        }
        return MHD_YES;
    }
    if (cc->gen) /* resumed: the request waits for the engine */
        return hy_server_handle_generate(s, conn, HY_OAI_CHAT, NULL, 0, &cc->gen);
    if (*upload_data_size) {
        if (!cc->too_large) {
            if (cc->body.len + *upload_data_size > max_body)
                cc->too_large = 1;
            else if (hy_sbuf_append(&cc->body, upload_data, *upload_data_size))
                return MHD_NO;
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (!cc->arrived) { /* header and body are in: no arrival deadline while it is handled */
        cc->arrived = 1;
        hy_conn_track_deadline(s, conn, 0);
    }
    if (cc->too_large) {
        hy_oai_error_set(&e, 413, NULL, "Request body too large (limit %zu bytes)", max_body);
        return hy_server_respond_error(s, conn, &e);
    }
    const char *body = cc->body.p ? cc->body.p : "";
    size_t blen = cc->body.len;
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");

    if (!strcmp(url, "/health")) {
        if (!get)
            goto bad_method;
        return s->ready ? respond_text(conn, MHD_HTTP_OK, "text/plain", "", 0)
                        : respond_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", "loading\n", 8);
    }
    if (!strcmp(url, "/metrics")) {
        if (!get)
            goto bad_method;
        return handle_metrics(s, conn);
    }
    if (!strcmp(url, "/version")) { /* vLLM's {"version": ...}: hyinfer's own version */
        if (!get)
            goto bad_method;
        return hy_server_respond_json(conn, MHD_HTTP_OK, "{\"version\":\"" HY_SERVER_VERSION "\"}");
    }
    int is_v1 = !strncmp(url, "/v1/", 4);
    if (is_v1 && !auth_ok(s, conn)) {
        hy_oai_error_set(&e, 401, NULL, "Unauthorized: missing or invalid API key");
        return hy_server_respond_error(s, conn, &e);
    }
    if (!s->ready && (is_v1 || !strcmp(url, "/tokenize") || !strcmp(url, "/detokenize"))) {
        hy_oai_error_set(&e, 503, NULL, "The model is still loading");
        return hy_server_respond_error(s, conn, &e);
    }
    if (!strcmp(url, "/v1/models")) {
        if (!get)
            goto bad_method;
        return handle_models(s, conn);
    }
    if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/v1/completions")) {
        if (!post)
            goto bad_method;
        if (!cc->is_gen) {
            cc->is_gen = 1;
            pthread_mutex_lock(&s->mu);
            s->gen_active++;
            pthread_mutex_unlock(&s->mu);
        }
        return hy_server_handle_generate(s, conn, url[4] == 'c' && url[5] == 'h' ? HY_OAI_CHAT : HY_OAI_COMPLETION,
                                         body, blen, &cc->gen);
    }
    if (!strcmp(url, "/tokenize") || !strcmp(url, "/detokenize")) {
        if (!post)
            goto bad_method;
        return url[1] == 't' ? handle_tokenize(s, conn, body, blen) : handle_detokenize(s, conn, body, blen);
    }
    hy_oai_error_set(&e, 404, NULL, "Not found: %s %s", method, url);
    return hy_server_respond_error(s, conn, &e);
bad_method:
    hy_oai_error_set(&e, 405, NULL, "Method %s not allowed for %s", method, url);
    e.type = "MethodNotAllowed";
    return hy_server_respond_error(s, conn, &e);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    struct hy_server *s = cls;
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) /* kept alive: the next request has a deadline too */
        hy_conn_track_deadline(s, conn, s->keepalive_timeout_s);
    struct conn_ctx *cc = *con_cls;
    if (cc) {
        hy_server_generate_free(cc->gen);
        if (cc->is_gen) {
            pthread_mutex_lock(&s->mu);
            s->gen_active--;
            pthread_mutex_unlock(&s->mu);
        }
        hy_sbuf_free(&cc->body);
        free(cc);
        *con_cls = NULL;
    }
}

/* The global connection limit, checked here rather than by libmicrohttpd: at its own limit it
 * stops accepting, which leaves new clients hanging in the listen backlog instead of refused. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)addr;
    (void)addrlen;
    struct hy_server *s = cls;
    return (unsigned)__atomic_load_n(&s->n_conn, __ATOMIC_RELAXED) >= s->max_conn ? MHD_NO : MHD_YES;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct hy_server *s = cls;
    __atomic_add_fetch(&s->n_conn, toe == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1, __ATOMIC_RELAXED);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        if (hy_conn_track_open(s, conn, socket_context))
            hy_log_warn("serve: out of memory tracking a connection; it has no request deadline");
    } else {
        hy_conn_track_close(s, *socket_context);
        *socket_context = NULL;
    }
}

/* libmicrohttpd's messages, as warnings; a peer that closed (or whose socket the deadline shut
 * down, counted in the watcher's own log line) is not news, one line per socket would flood. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char buf[512];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = 0;
    if (strstr(buf, "connection closure") || strstr(buf, "Connection socket is closed"))
        return;
    hy_log_warn("serve: libmicrohttpd: %s", buf);
}

static int load(struct hy_server *s)
{
    const struct hy_server_config *c = s->cfg;
    double t0 = hy_time_now();
    if (hy_tokenizer_load_dir(c->model_dir, &s->tok) || hy_chat_load(&s->chat, c->model_dir, c->chat_template))
        return -1;
    if (hy_chat_available(&s->chat))
        hy_log_info("serve: chat template %s", s->chat.source);
    else
        hy_log_warn("serve: the model has no chat template; chat requests will fail (pass --chat-template)");
    if ((c->load_model ? c->load_model(c->load_ctx, &s->model) : hy_model_load(c->model_dir, c->dtype, &s->model)))
        return -1;
    s->engine = hy_engine_create(s->model, &c->engine);
    if (!s->engine)
        return -1;
    s->se = hy_engine_loop_start(s->engine, c->threads);
    if (!s->se)
        return -1;
    s->limits.max_model_len =
        c->engine.max_model_len > 0 ? c->engine.max_model_len : s->model->cfg.max_position_embeddings;
    s->limits.vocab_size = s->model->cfg.vocab_size;
    pthread_mutex_lock(&s->mu);
    hy_server_metrics_set_max_model_len(&s->metrics, s->limits.max_model_len);
    pthread_mutex_unlock(&s->mu);
    int32_t tv = hy_tokenizer_vocab_size(s->tok);
    if (tv < s->limits.vocab_size)
        s->limits.vocab_size = tv; /* ids the tokenizer cannot decode are out of vocabulary */
    hy_sampling_params_init(&s->limits.defaults);
    s->limits.defaults.temperature = 1.0f; /* OpenAI default, unless generation_config.json says otherwise */
    if (hy_sampling_params_from_generation_config(c->model_dir, &s->limits.defaults))
        return -1;
    s->have_tool_markers = hy_tool_markers_from_vocab(s->tok, &s->markers) == 0;
    if (c->tool_call_parser)
        hy_tool_markers_set_dialect(&s->markers,
                                    strcmp(c->tool_call_parser, "hy_v4") ? HY_TOOL_DIALECT_HY3 : HY_TOOL_DIALECT_HY4);
    if (!s->have_tool_markers)
        hy_log_warn("serve: %s; tool calls are returned as text", hy_err_msg());
    hy_log_info("serve: model %s loaded in %.2f s (max_model_len %d, vocab %d)", c->model_dir, hy_time_now() - t0,
                (int)s->limits.max_model_len, (int)s->limits.vocab_size);
    return 0;
}

int hy_server_run(const struct hy_server_config *cfg)
{
    struct hy_server s;
    memset(&s, 0, sizeof(s));
    s.cfg = cfg;
    s.model_name = cfg->served_model_name && cfg->served_model_name[0] ? cfg->served_model_name : cfg->model_dir;
    pthread_mutex_init(&s.mu, NULL);
    hy_server_metrics_init(&s.metrics);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());

    const char *host = cfg->host && cfg->host[0] ? cfg->host : "127.0.0.1";
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)cfg->port);
    if (!strcmp(host, "0.0.0.0")) {
        addr.sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (!strcmp(host, "localhost")) {
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        hy_log_error("serve: --host %s: not an IPv4 address", host);
        return 1;
    }
    /* thousands of connections need thousands of descriptors */
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl))
            hy_log_warn("serve: cannot raise the open-file limit to %llu", (unsigned long long)rl.rlim_max);
    }
    unsigned max_conn = cfg->max_connections ? cfg->max_connections : DEFAULT_MAX_CONNECTIONS;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)max_conn + 64) {
        unsigned fit = rl.rlim_cur > 128 ? (unsigned)rl.rlim_cur - 64 : 64;
        hy_log_warn("serve: open-file limit %llu: at most %u connections (--max-connections %u)",
                    (unsigned long long)rl.rlim_cur, fit, max_conn);
        max_conn = fit;
    }
    if (max_conn > (1u << 24))
        max_conn = 1u << 24;
    s.max_conn = max_conn;
    unsigned timeout = cfg->http_timeout_s ? cfg->http_timeout_s : DEFAULT_HTTP_TIMEOUT_S;
    s.http_timeout_s = timeout;
    s.keepalive_timeout_s = cfg->keepalive_timeout_s ? cfg->keepalive_timeout_s : timeout;
    pthread_mutex_init(&s.wmu, NULL);
    pthread_mutex_init(&s.cmu, NULL);
    s.conns.next = s.conns.prev = &s.conns;
    /* epoll in a pool of HTTP threads; a generation request suspends its connection while the
     * engine works (conn_wait.c), so no thread waits and idle or slow connections cost no thread.
     * libmicrohttpd splits its own connection limit among the pool's threads: it is set above ours. */
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, (uint16_t)cfg->port,
        on_accept, &s, on_request, &s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, (void *)NULL, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, &s, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)HTTP_THREADS, MHD_OPTION_NOTIFY_CONNECTION, on_connection, &s, MHD_OPTION_CONNECTION_LIMIT,
        (max_conn + 1) * HTTP_THREADS, MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->max_connections_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024, MHD_OPTION_END);
    if (!d) {
        hy_log_error("serve: cannot listen on %s:%d (port in use?)", host, cfg->port);
        pthread_mutex_destroy(&s.wmu);
        pthread_mutex_destroy(&s.cmu);
        return 1;
    }
    char per_ip[32];
    snprintf(per_ip, sizeof(per_ip), "%u", cfg->max_connections_per_ip);
    hy_log_info("serve: listening on http://%s:%d (loading the model; up to %u connections, %s per address; a "
                "request must arrive within %u s, a kept-alive connection idles up to %.0f s)",
                host, cfg->port, max_conn, cfg->max_connections_per_ip ? per_ip : "no limit", timeout,
                s.keepalive_timeout_s);
    int rc = 0;
    if (hy_conn_wait_start(&s) || load(&s)) {
        hy_log_error("serve: %s", s.watcher_on ? hy_err_msg() : "cannot start the watcher thread");
        rc = 1;
        hy_conn_wait_stop(&s);
        MHD_stop_daemon(d);
        goto out;
    }
    s.ready = 1;
    hy_log_info("serve: ready; model name \"%s\"", s.model_name);
    while (!(cfg->stop_flag && *cfg->stop_flag))
        usleep(50 * 1000);
    /* the drain: refuse new connections (the listen socket stops listening), answer 503 to new
     * requests on open ones, abort what still waits in the engine's queue, give running requests
     * up to shutdown_timeout_s, then abort the rest (their clients get errors, not a cut). */
    double t0 = hy_time_now();
    s.draining = 1;
    MHD_socket lfd = MHD_quiesce_daemon(d);
    if (lfd != MHD_INVALID_SOCKET)
        shutdown(lfd, SHUT_RDWR);
    hy_engine_loop_drain(s.se);
    hy_log_info("serve: shutting down: no new connections or requests; running requests get up to %.1f s",
                cfg->shutdown_timeout_s);
    for (;;) {
        pthread_mutex_lock(&s.mu);
        int n = s.inflight;
        pthread_mutex_unlock(&s.mu);
        if (n == 0)
            break;
        if (hy_time_now() - t0 >= cfg->shutdown_timeout_s) {
            hy_log_warn("serve: %d requests still running after %.1f s; aborting them", n, cfg->shutdown_timeout_s);
            break;
        }
        usleep(10 * 1000);
    }
    /* abort leftovers: their connections resume and get an error response */
    hy_engine_loop_stop(s.se);
    double t1 = hy_time_now();
    for (;;) {
        pthread_mutex_lock(&s.mu);
        int n = s.gen_active;
        pthread_mutex_unlock(&s.mu);
        if (n == 0 || hy_time_now() - t1 > 1.0)
            break;
        usleep(5 * 1000);
    }
    hy_conn_wait_stop(&s);
    MHD_stop_daemon(d);
    if (lfd != MHD_INVALID_SOCKET)
        close(lfd);
    hy_log_info("serve: drained in %.2f s", hy_time_now() - t0);
out:
    hy_engine_loop_stop(s.se);
    hy_engine_loop_free(s.se);
    hy_engine_free(s.engine);
    struct hy_executor ex; /* the end of the job on every rank */
    hy_executor_init(&ex, s.model);
    hy_executor_exit(&ex);
    hy_model_free(s.model);
    hy_chat_free(&s.chat);
    hy_tokenizer_free(s.tok);
    free(s.waits);
    pthread_mutex_destroy(&s.wmu);
    pthread_mutex_destroy(&s.cmu);
    pthread_mutex_destroy(&s.mu);
    if (!rc)
        hy_log_info("serve: stopped");
    return rc;
}
