/* engine.c - the serving engine's step loop: schedule, execute, sample, stop checks, outputs. */
#include "engine/engine.h"

#include "base/err.h"
#include "base/log.h"
#include "base/timing.h"
#include "cache/block_pool.h"
#include "sample/logprobs.h"
#include "engine/runner.h"
#include "sched/scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hy_engine {
    struct hy_model *m;          /* not owned */
    struct hy_executor ex;       /* runs m (on every rank of a multi-rank job) */
    struct hy_engine_config cfg; /* resolved (max_model_len > 0) */
    struct hy_kv_cache kv;
    struct hy_block_pool pool;
    struct hy_scheduler sched;
    struct hy_runner runner;
    struct hy_spec spec;      /* used when cfg.spec.num_speculative_tokens > 0 */
    int32_t *allow;           /* [max_num_seqs] drafts each plan entry may get */
    struct hy_request **done; /* [max_num_seqs] requests that finished in this step */
    double spec_log_t;        /* when the last speculative-decoding log line was written */
    uint64_t spec_log_drafts;
    struct hy_request **live; /* [live_cap] waiting or running requests */
    int32_t n_live, live_cap;
    uint64_t *aborted; /* [live_cap] ids to report as aborted next step */
    int32_t n_aborted;
    struct hy_engine_output *outs; /* [live_cap + max_num_seqs * (num_speculative_tokens + 2)] */
    float *row;                    /* [vocab] raw logits copy for logprobs */
    uint64_t next_id;
    uint64_t prompt_tokens, generation_tokens;
};

void hy_engine_config_init(struct hy_engine_config *c)
{
    memset(c, 0, sizeof(*c));
    c->max_num_seqs = 8;
    c->max_model_len = 0;
    c->max_num_batched_tokens = 512;
    c->block_size = 16;
    c->enable_prefix_caching = 1;
    c->kv_cache_memory_bytes = 0;
    c->max_waiting_requests = 1024;
    c->kv_cache_dtype = HY_DTYPE_UNKNOWN;
    hy_spec_config_init(&c->spec);
}

static int32_t cdiv(int64_t a, int64_t b)
{
    return (int32_t)((a + b - 1) / b);
}

/* MemAvailable from /proc/meminfo in bytes, or 0 when unknown. */
static size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (size_t)kb * 1024;
}

/* Total memory this process may use, in bytes: MemTotal, or the cgroup limit (v2 memory.max, v1
 * memory.limit_in_bytes) when one is set and lower; 0 when unknown. */
static size_t mem_total_limit(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0, lim = 0;
    if (f) {
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
                break;
        fclose(f);
    }
    size_t total = (size_t)kb * 1024;
    const char *paths[] = {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (int i = 0; i < 2; i++) {
        f = fopen(paths[i], "r");
        if (!f)
            continue;
        int got = fscanf(f, "%llu", &lim) == 1; /* "max" (no limit) does not scan */
        fclose(f);
        if (got && lim > 0 && (total == 0 || lim < total))
            total = (size_t)lim;
        break;
    }
    return total;
}

static int check_config(const struct hy_engine_config *c)
{
    if (c->max_num_seqs < 1)
        return hy_err_set("engine: max_num_seqs=%d: must be >= 1", c->max_num_seqs);
    if (c->max_num_batched_tokens < 1)
        return hy_err_set("engine: max_num_batched_tokens=%d: must be >= 1", c->max_num_batched_tokens);
    if (c->block_size < 1 || c->block_size > 4096)
        return hy_err_set("engine: block_size=%d: must be in [1, 4096]", c->block_size);
    if (c->max_model_len < 1)
        return hy_err_set("engine: max_model_len=%d: must be >= 1", c->max_model_len);
    if (c->max_waiting_requests < 0)
        return hy_err_set("engine: max_waiting_requests=%d: must be >= 0", c->max_waiting_requests);
    if (hy_spec_config_validate(&c->spec))
        return -1;
    if (!(c->gpu_memory_utilization >= 0.0f && c->gpu_memory_utilization <= 1.0f))
        return hy_err_set("engine: gpu_memory_utilization %g: must be in (0, 1]", (double)c->gpu_memory_utilization);
    if (c->kv_cache_dtype != HY_DTYPE_UNKNOWN && c->kv_cache_dtype != HY_DTYPE_F32 &&
        c->kv_cache_dtype != HY_DTYPE_BF16 && c->kv_cache_dtype != HY_DTYPE_F8_E4M3)
        return hy_err_set("engine: kv_cache_dtype %s: not a KV cache dtype (auto, bf16, fp8, fp32)",
                          hy_dtype_name(c->kv_cache_dtype));
    return 0;
}

/* Number of KV blocks the budget buys; 0 with hy_err_msg() when one max_model_len sequence
 * does not fit. */
static int32_t size_blocks(const struct hy_model *m, const struct hy_engine_config *c)
{
    const int32_t bs = c->block_size;
    size_t per_block = hy_model_kv_token_bytes(m, c->kv_cache_dtype) * (size_t)bs;
    const int32_t need = cdiv(c->max_model_len, bs);
    size_t budget = c->kv_cache_memory_bytes;
    size_t n = 0;
    if (budget == 0 && c->gpu_memory_utilization > 0.0f) {
        const size_t total = mem_total_limit();
        const double share = (double)c->gpu_memory_utilization * (double)total;
        const double weights = (double)m->ck.total_bytes;
        if (total == 0) {
            hy_err_set("engine: --gpu-memory-utilization needs the machine's memory size, but neither "
                       "/proc/meminfo nor the cgroup limit gave one; pass --kv-cache-memory-bytes");
            return 0;
        }
        if (share - weights < (double)need * (double)per_block) {
            hy_err_set("engine: --gpu-memory-utilization %g leaves %.0f bytes for the KV cache (%g x %zu bytes of "
                       "memory - %.0f bytes of weights), but one max_model_len %d sequence needs %zu bytes; raise "
                       "it, lower --max-model-len, or pass --kv-cache-memory-bytes",
                       (double)c->gpu_memory_utilization, share - weights > 0 ? share - weights : 0.0,
                       (double)c->gpu_memory_utilization, total, weights, c->max_model_len, (size_t)need * per_block);
            return 0;
        }
        budget = (size_t)(share - weights);
        n = budget / per_block;
        size_t most = (size_t)c->max_num_seqs * (size_t)need; /* no use for more */
        if (n > most)
            n = most;
    } else if (budget == 0) {
        budget = mem_available() / 2;
        n = budget / per_block;
        size_t most = (size_t)c->max_num_seqs * (size_t)need; /* no use for more */
        if (n > most)
            n = most;
    } else {
        n = budget / per_block;
    }
    if (n > (size_t)(INT32_MAX / bs))
        n = (size_t)(INT32_MAX / bs);
    if (n < (size_t)need) {
        hy_err_set("engine: max_model_len %d needs %d KV blocks of %d tokens (%zu bytes), but the KV "
                   "cache budget of %zu bytes holds only %zu; raise kv_cache_memory_bytes or lower "
                   "max_model_len",
                   c->max_model_len, need, bs, (size_t)need * per_block, budget, n);
        return 0;
    }
    return (int32_t)n;
}

struct hy_engine *hy_engine_create(struct hy_model *m, const struct hy_engine_config *cfg)
{
    struct hy_engine *e = calloc(1, sizeof(*e));
    if (!e) {
        hy_err_set("engine: out of memory");
        return NULL;
    }
    e->m = m;
    hy_executor_init(&e->ex, m);
    e->cfg = *cfg;
    if (e->cfg.max_model_len == 0)
        e->cfg.max_model_len = m->cfg.max_position_embeddings;
    int32_t n_blocks = 0;
    if (e->cfg.max_model_len > m->cfg.max_position_embeddings) {
        hy_err_set("engine: max_model_len %d exceeds the model's max_position_embeddings %d", e->cfg.max_model_len,
                   m->cfg.max_position_embeddings);
        goto fail;
    }
    if (check_config(&e->cfg) || !(n_blocks = size_blocks(m, &e->cfg)))
        goto fail;
    const struct hy_engine_config *c = &e->cfg;
    const int32_t k = c->spec.num_speculative_tokens;
    struct hy_sched_config sc = {c->max_num_seqs,
                                 c->max_num_batched_tokens,
                                 c->enable_prefix_caching,
                                 c->max_waiting_requests,
                                 hy_model_dp_groups(m),
                                 k,
                                 k > 0};
    if ((k > 0 && hy_spec_init(&e->spec, &c->spec, m, c->max_num_batched_tokens, c->max_num_seqs, c->block_size)) ||
        hy_block_pool_init(&e->pool, n_blocks, c->block_size) ||
        hy_executor_kv_cache_init(&e->ex, &e->kv, c->block_size, n_blocks, c->kv_cache_dtype) ||
        hy_scheduler_init(&e->sched, &sc, &e->pool, cdiv((int64_t)c->max_model_len + 1, c->block_size)) ||
        hy_runner_init(&e->runner, c->max_num_batched_tokens, c->max_num_seqs, c->block_size, m->cfg.vocab_size, k,
                       m->cfg.hidden_size) ||
        hy_executor_reserve(&e->ex, c->max_num_batched_tokens, c->max_model_len))
        goto fail;
    e->live_cap = c->max_waiting_requests + c->max_num_seqs;
    e->live = calloc((size_t)e->live_cap, sizeof(*e->live));
    e->aborted = calloc((size_t)e->live_cap, sizeof(*e->aborted));
    /* a step reports the aborts (<= live_cap), up to k + 1 tokens per scheduled request and, when the MTP
     * pass fails after them, one abort each */
    e->outs = calloc((size_t)e->live_cap + (size_t)c->max_num_seqs * (size_t)(k + 2), sizeof(*e->outs));
    e->row = malloc((size_t)m->cfg.vocab_size * sizeof(float));
    e->allow = calloc((size_t)c->max_num_seqs, sizeof(int32_t));
    e->done = calloc((size_t)c->max_num_seqs, sizeof(*e->done));
    if (!e->live || !e->aborted || !e->outs || !e->row || !e->allow || !e->done) {
        hy_err_set("engine: out of memory");
        goto fail;
    }
    e->next_id = 1;
    {
        const enum hy_dtype kd = hy_model_kv_dtype(m, c->kv_cache_dtype);
        const size_t tb = hy_model_kv_token_bytes(m, c->kv_cache_dtype);
        char vnote[128] = "";
        if (kd == HY_DTYPE_F8_E4M3)
            snprintf(vnote, sizeof(vnote), "; K scales dynamic (%s), V scales static in %d of %d layers",
                     e->kv.scale_fit ? "least-squares fit" : "amax/448", m->n_v_cache_scales, e->kv.n_layers);
        hy_log_info("kv cache: %s, %d blocks of %d tokens (%lld token slots), %zu bytes per token, %.1f MiB%s",
                    hy_kv_dtype_name(kd), n_blocks, c->block_size, (long long)n_blocks * c->block_size, tb,
                    (double)tb * (double)n_blocks * (double)c->block_size / 1048576.0, vnote);
        if (k > 0)
            hy_log_info("speculative decoding: mtp, num_speculative_tokens %d, draft_p_min %.2f, gate %s, "
                        "position-0 embedding %s",
                        k, (double)c->spec.draft_p_min, c->spec.gate ? "auto" : "off",
                        c->spec.mtp_zero_pos0 ? "zeroed" : "real");
    }
    e->spec_log_t = hy_time_now();
    return e;
fail:
    hy_engine_free(e);
    return NULL;
}

void hy_engine_free(struct hy_engine *e)
{
    if (!e)
        return;
    for (int32_t i = 0; i < e->n_live; i++)
        hy_request_free(e->live[i]);
    free(e->live);
    free(e->aborted);
    free(e->outs);
    free(e->row);
    free(e->allow);
    free(e->done);
    if (e->cfg.spec.num_speculative_tokens > 0)
        hy_spec_free(&e->spec);
    hy_runner_free(&e->runner);
    hy_scheduler_free(&e->sched);
    hy_executor_kv_cache_free(&e->ex, &e->kv);
    hy_block_pool_free(&e->pool);
    free(e);
}

static int check_request(const struct hy_engine *e, const struct hy_engine_request *r)
{
    const int32_t V = e->m->cfg.vocab_size;
    const int32_t M = e->cfg.max_model_len;
    if (!r->prompt_ids || r->n_prompt == 0)
        return hy_err_set("engine: empty prompt");
    if (r->n_prompt > (size_t)M)
        return hy_err_set("Input length %zu exceeds the model's maximum context length %d", r->n_prompt, M);
    if (cdiv((int64_t)r->n_prompt, e->cfg.block_size) > e->pool.n_blocks)
        return hy_err_set("Input length %zu exceeds the KV cache capacity of %lld tokens", r->n_prompt,
                          (long long)e->pool.n_blocks * e->cfg.block_size);
    for (size_t i = 0; i < r->n_prompt; i++)
        if (r->prompt_ids[i] < 0 || r->prompt_ids[i] >= V)
            return hy_err_set("engine: prompt token id %d at position %zu is outside the vocabulary [0, %d)",
                              r->prompt_ids[i], i, V);
    for (size_t i = 0; i < r->n_stop_token_ids; i++)
        if (r->stop_token_ids[i] < 0 || r->stop_token_ids[i] >= V)
            return hy_err_set("engine: stop_token_ids: id %d is outside the vocabulary [0, %d)", r->stop_token_ids[i],
                              V);
    if (r->logprobs < -1 || r->logprobs > HY_ENGINE_MAX_LOGPROBS)
        return hy_err_set("engine: logprobs=%d: must be in [0, %d] (or -1 for none)", r->logprobs,
                          HY_ENGINE_MAX_LOGPROBS);
    if (r->params.max_new_tokens < 1)
        return hy_err_set("engine: max_tokens=%d: must be >= 1", r->params.max_new_tokens);
    if (hy_token_rules_validate(r->rules, V))
        return -1;
    return hy_sampling_params_validate(&r->params);
}

/* Builds the request's engine-side state (copies, sampler). NULL with hy_err_msg(). */
static struct hy_request *make_request(struct hy_engine *e, const struct hy_engine_request *r)
{
    int64_t cap = (int64_t)r->n_prompt + r->params.max_new_tokens;
    if (cap > (int64_t)e->cfg.max_model_len + 1)
        cap = (int64_t)e->cfg.max_model_len + 1;
    struct hy_request *q =
        hy_request_create(e->next_id, r->prompt_ids, (int32_t)r->n_prompt, (int32_t)cap, e->cfg.block_size);
    if (!q)
        return NULL;
    q->max_tokens = r->params.max_new_tokens;
    q->ignore_eos = r->params.ignore_eos;
    q->logprobs = r->logprobs;
    if (r->n_stop_token_ids) {
        q->stop_ids = malloc(r->n_stop_token_ids * sizeof(int32_t));
        if (!q->stop_ids) {
            hy_request_free(q);
            hy_err_set("engine: out of memory");
            return NULL;
        }
        memcpy(q->stop_ids, r->stop_token_ids, r->n_stop_token_ids * sizeof(int32_t));
        q->n_stop = r->n_stop_token_ids;
    }
    if (!hy_token_rules_empty(r->rules)) {
        q->rules = malloc(sizeof(*q->rules));
        if (!q->rules) {
            hy_request_free(q);
            hy_err_set("engine: out of memory");
            return NULL;
        }
        *q->rules = *r->rules;
        hy_token_rules_observe(q->rules, &q->rules_state, r->prompt_ids[r->n_prompt - 1]);
    }
    q->sampler = hy_sampler_create(&r->params, e->m->cfg.vocab_size);
    if (!q->sampler) {
        hy_request_free(q);
        return NULL;
    }
    hy_sampler_accept_prompt(q->sampler, r->prompt_ids, r->n_prompt);
    return q;
}

int hy_engine_add_request(struct hy_engine *e, const struct hy_engine_request *r, uint64_t *id)
{
    if (e->sched.n_waiting >= e->cfg.max_waiting_requests || e->n_live + e->n_aborted >= e->live_cap) {
        hy_err_set("engine: too many waiting requests (max_waiting_requests=%d)", e->cfg.max_waiting_requests);
        return HY_ENGINE_QUEUE_FULL;
    }
    if (check_request(e, r))
        return HY_ENGINE_ERROR;
    struct hy_request *q = make_request(e, r);
    if (!q)
        return HY_ENGINE_ERROR;
    if (hy_scheduler_add(&e->sched, q)) { /* cannot happen: checked above */
        hy_request_free(q);
        hy_err_set("engine: waiting queue full");
        return HY_ENGINE_QUEUE_FULL;
    }
    e->live[e->n_live++] = q;
    e->prompt_tokens += r->n_prompt;
    *id = e->next_id++;
    return HY_ENGINE_OK;
}

/* Removes a finished request from the scheduler and the live set and frees it. */
static void retire(struct hy_engine *e, struct hy_request *q)
{
    hy_scheduler_finish(&e->sched, q);
    for (int32_t i = 0; i < e->n_live; i++)
        if (e->live[i] == q) {
            e->live[i] = e->live[--e->n_live];
            break;
        }
    hy_request_free(q);
}

int hy_engine_abort_request(struct hy_engine *e, uint64_t id)
{
    for (int32_t i = 0; i < e->n_live; i++)
        if (e->live[i]->id == id) {
            e->aborted[e->n_aborted++] = id;
            retire(e, e->live[i]);
            return 0;
        }
    return hy_err_set("engine: no unfinished request with id %llu", (unsigned long long)id);
}

int hy_engine_has_work(const struct hy_engine *e)
{
    return e->n_live > 0 || e->n_aborted > 0;
}

static struct hy_engine_output *new_output(struct hy_engine *e, size_t *n, uint64_t id)
{
    struct hy_engine_output *o = &e->outs[(*n)++];
    memset(o, 0, sizeof(*o));
    o->request_id = id;
    o->token_id = -1;
    return o;
}

static int is_stop_id(const struct hy_request *q, int32_t tok)
{
    for (size_t i = 0; i < q->n_stop; i++)
        if (q->stop_ids[i] == tok)
            return 1;
    return 0;
}

/* vLLM's check order: length limits first, then EOS, then stop token ids. */
static enum hy_engine_finish check_stop(const struct hy_engine *e, const struct hy_request *q, int32_t tok)
{
    if (q->n_tokens - q->n_prompt >= q->max_tokens || q->n_tokens >= e->cfg.max_model_len)
        return HY_ENGINE_FINISHED_LENGTH;
    if (!q->ignore_eos && hy_model_config_is_eos(&e->m->cfg, tok))
        return HY_ENGINE_FINISHED_STOP;
    if (is_stop_id(q, tok))
        return HY_ENGINE_FINISHED_STOP;
    return HY_ENGINE_RUNNING;
}

/* Samples the next token of q from logits[vocab] (used as scratch), appends it and fills an output.
 * Returns the token; *finish says whether q finished (the caller retires it). */
static int32_t emit_token(struct hy_engine *e, struct hy_request *q, float *logits, size_t *n_outs,
                          enum hy_engine_finish *finish)
{
    const int32_t V = e->m->cfg.vocab_size;
    if (q->logprobs >= 0)
        memcpy(e->row, logits, (size_t)V * sizeof(float));
    if (q->rules)
        hy_token_rules_apply(q->rules, &q->rules_state, logits, V);
    int32_t tok = hy_sampler_sample(q->sampler, logits);
    if (q->rules)
        hy_token_rules_observe(q->rules, &q->rules_state, tok);
    struct hy_engine_output *o = new_output(e, n_outs, q->id);
    o->token_id = tok;
    if (q->logprobs >= 0) {
        o->n_top = q->logprobs < V ? q->logprobs : V;
        o->logprob = hy_logprobs_compute(e->row, V, tok, o->n_top, o->top_ids, o->top_logprobs);
    }
    e->generation_tokens++;
    if (hy_request_append(q, tok)) {
        o->finish = HY_ENGINE_FINISHED_LENGTH; /* cannot happen: cap covers max_tokens */
    } else {
        o->finish = check_stop(e, q, tok);
    }
    *finish = o->finish;
    return tok;
}

/* The forward failed: every scheduled request that has not finished yet finishes (aborted). */
static void fail_plan(struct hy_engine *e, const struct hy_sched_plan *plan, size_t *n_outs)
{
    for (int32_t i = 0; i < plan->n; i++)
        plan->entries[i].req->plan_idx = -1; /* so retiring leaves the plan as it is */
    for (int32_t i = 0; i < plan->n; i++) {
        struct hy_request *q = plan->entries[i].req;
        if (q->status == HY_REQ_FINISHED)
            continue;
        new_output(e, n_outs, q->id)->finish = HY_ENGINE_FINISHED_ABORT;
        retire(e, q);
    }
}

/* Verifies entry i of the plan: samples its logits rows in order (the last known token, then each
 * draft), keeping drafts while they equal the sample; stop checks after every token. Returns the
 * number of tokens emitted; *finish as emit_token. */
static int32_t verify_entry(struct hy_engine *e, const struct hy_sched_plan *plan, int32_t i, size_t *n_outs,
                            enum hy_engine_finish *finish)
{
    const int32_t V = e->m->cfg.vocab_size;
    const struct hy_sched_entry *en = &plan->entries[i];
    struct hy_request *q = en->req;
    float *rows = e->runner.logits + (size_t)e->runner.logit0[i] * V;
    int32_t drafts[HY_SPEC_MAX_TOKENS], j = 0, accepted = 0;
    memcpy(drafts, q->drafts, (size_t)en->n_drafts * sizeof(int32_t)); /* emitting appends to q->tokens only */
    for (;; j++) {
        const int32_t tok = emit_token(e, q, rows + (size_t)j * V, n_outs, finish);
        const int match = j < en->n_drafts && tok == drafts[j];
        accepted += match;
        if (*finish != HY_ENGINE_RUNNING || !match)
            break;
    }
    if (en->n_drafts > 0) {
        hy_spec_count(&e->spec, en->n_drafts, accepted);
        hy_scheduler_reject(&e->sched, i, en->n_drafts - j);
    }
    return j + 1;
}

/* How many drafts the request of plan entry i may get for the next step: none when it finished, has
 * prompt left or the gate is off; else num_speculative_tokens, fewer near max_tokens (a step yields at
 * most drafts + 1 tokens) and max_model_len (verified positions stay below max_model_len - 1). */
static int32_t draft_allowance(const struct hy_engine *e, const struct hy_sched_entry *en)
{
    const struct hy_request *q = en->req;
    if (!en->wants_logits || q->status == HY_REQ_FINISHED || q->mtp_stale || !hy_spec_drafting(&e->spec))
        return 0;
    int32_t k = e->cfg.spec.num_speculative_tokens;
    const int32_t by_len = e->cfg.max_model_len - 1 - q->n_tokens;
    const int32_t by_max = q->max_tokens - (q->n_tokens - q->n_prompt) - 1;
    if (by_len < k)
        k = by_len;
    if (by_max < k)
        k = by_max;
    return k > 0 ? k : 0;
}

static void spec_log(struct hy_engine *e, double now)
{
    const struct hy_spec_stats *st = &e->spec.stats;
    if (now - e->spec_log_t < 10.0 || st->num_drafts == e->spec_log_drafts)
        return;
    char per[HY_SPEC_MAX_TOKENS * 8 + 8];
    size_t off = 0;
    for (int32_t i = 0; i < e->cfg.spec.num_speculative_tokens && off < sizeof(per) - 8; i++)
        off += (size_t)snprintf(per + off, sizeof(per) - off, "%s%.3f", i ? ", " : "",
                                (double)st->num_accepted_tokens_per_pos[i] / (double)st->num_drafts);
    hy_log_info("spec decode: mean acceptance length %.2f, accepted %llu of %llu draft tokens (%.1f%%), "
                "per-position acceptance [%s], drafting %s (gate: %.1f tok/s with drafts, %.1f without)",
                1.0 + (double)st->num_accepted_tokens / (double)st->num_drafts,
                (unsigned long long)st->num_accepted_tokens, (unsigned long long)st->num_draft_tokens,
                100.0 * (double)st->num_accepted_tokens / (double)st->num_draft_tokens, per,
                hy_spec_drafting(&e->spec) ? "on" : "off", st->rate_on, st->rate_off);
    e->spec_log_t = now;
    e->spec_log_drafts = st->num_drafts;
}

int hy_engine_step(struct hy_engine *e, const struct hy_engine_output **outs, size_t *n_outs)
{
    const double t0 = hy_time_now();
    size_t n = 0;
    *outs = e->outs;
    *n_outs = 0;
    for (int32_t i = 0; i < e->n_aborted; i++)
        new_output(e, &n, e->aborted[i])->finish = HY_ENGINE_FINISHED_ABORT;
    e->n_aborted = 0;
    const struct hy_sched_plan *plan = hy_scheduler_schedule(&e->sched);
    if (plan->n == 0) {
        *n_outs = n;
        return 0;
    }
    e->runner.want_hidden = e->cfg.spec.num_speculative_tokens > 0 && hy_spec_mtp_active(&e->spec);
    if (hy_runner_execute(&e->runner, &e->ex, &e->kv, plan)) {
        fail_plan(e, plan, &n);
        *n_outs = n;
        return -1;
    }
    /* verify and sample; finished requests are retired after the MTP pass (it still writes their rows) */
    int32_t n_done = 0;
    int64_t emitted = 0;
    int pure_decode = 1;
    for (int32_t i = 0; i < plan->n; i++) {
        const struct hy_sched_entry *en = &plan->entries[i];
        if (en->n_tokens - en->n_drafts != 1)
            pure_decode = 0;
        if (!en->wants_logits)
            continue;
        enum hy_engine_finish fin;
        emitted += verify_entry(e, plan, i, &n, &fin);
        if (fin != HY_ENGINE_RUNNING) {
            en->req->status = HY_REQ_FINISHED;
            e->done[n_done++] = en->req;
        }
    }
    hy_scheduler_update(&e->sched, plan);
    int rc = 0;
    double t_mtp = hy_time_now();
    if (e->cfg.spec.num_speculative_tokens > 0 && !hy_spec_mtp_active(&e->spec)) {
        for (int32_t i = 0; i < plan->n; i++) /* their new rows get no MTP KV: they never draft again */
            plan->entries[i].req->mtp_stale = 1;
    } else if (e->cfg.spec.num_speculative_tokens > 0) {
        for (int32_t i = 0; i < plan->n; i++)
            e->allow[i] = draft_allowance(e, &plan->entries[i]);
        if (hy_spec_propose(&e->spec, &e->ex, &e->kv, plan, &e->runner, e->allow)) {
            fail_plan(e, plan, &n);
            rc = -1;
        }
    }
    t_mtp = hy_time_now() - t_mtp;
    for (int32_t i = 0; i < n_done; i++)
        retire(e, e->done[i]);
    if (e->cfg.spec.num_speculative_tokens > 0 && rc == 0) {
        const double now = hy_time_now();
        hy_spec_gate_step(&e->spec, pure_decode, plan->n, emitted, now - t0, t_mtp);
        spec_log(e, now);
    }
    *n_outs = n;
    return rc;
}

void hy_engine_get_stats(const struct hy_engine *e, struct hy_engine_stats *st)
{
    const struct hy_sched_stats *ss = &e->sched.stats;
    memset(st, 0, sizeof(*st));
    st->num_running = e->sched.n_running;
    st->num_waiting = e->sched.n_waiting;
    st->num_blocks_total = e->pool.n_blocks;
    st->num_blocks_used = hy_block_pool_num_used(&e->pool);
    st->kv_usage = st->num_blocks_total ? (double)st->num_blocks_used / st->num_blocks_total : 0.0;
    st->prefix_queries = ss->prefix_queries;
    st->prefix_hits = ss->prefix_hits;
    st->num_preemptions = ss->num_preemptions;
    st->num_steps = ss->num_steps;
    st->max_batch_seqs = ss->max_batch_seqs;
    st->prompt_chunks = ss->prompt_chunks;
    st->prompt_tokens = e->prompt_tokens;
    st->generation_tokens = e->generation_tokens;
    st->num_blocks_cached = e->pool.n_cached;
    st->prefix_evictions = e->pool.n_evictions;
    st->num_speculative_tokens = e->cfg.spec.num_speculative_tokens;
    if (st->num_speculative_tokens > 0)
        st->spec = e->spec.stats;
}
