/* offline.c - batched generation for `hyinfer run` / `hyinfer generate`, driven by the serving
 * engine (engine.h): the same scheduler, paged KV cache, prefix cache and sampler as `serve`. */
#include "engine/offline.h"

#include "base/err.h"
#include "base/timing.h"
#include "engine/engine.h"

#include <stdlib.h>
#include <string.h>

static int check_requests(const struct hy_model *m, const struct hy_gen_request *reqs, size_t n, int32_t max_len)
{
    for (size_t i = 0; i < n; i++) {
        const struct hy_gen_request *r = &reqs[i];
        if (r->n_prompt == 0)
            return hy_err_set("request %zu: empty prompt", i);
        if (r->params.max_new_tokens < 1)
            return hy_err_set("request %zu: max_new_tokens=%d: must be >= 1", i, r->params.max_new_tokens);
        if ((int64_t)r->n_prompt + r->params.max_new_tokens > max_len)
            return hy_err_set("request %zu: prompt (%zu tokens) + max_new_tokens (%d) exceeds the maximum "
                              "context length %d",
                              i, r->n_prompt, r->params.max_new_tokens, max_len);
        for (size_t j = 0; j < r->n_prompt; j++)
            if (r->prompt_ids[j] < 0 || r->prompt_ids[j] >= m->cfg.vocab_size)
                return hy_err_set("request %zu: token id %d is outside the vocabulary [0, %d)", i, r->prompt_ids[j],
                                  m->cfg.vocab_size);
        if (hy_sampling_params_validate(&r->params))
            return hy_err_prefix("request %zu", i);
    }
    return 0;
}

static int append_token(struct hy_gen_request *r, size_t *cap, int32_t tok)
{
    if (r->n_out == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        int32_t *p = realloc(r->out_ids, nc * sizeof(int32_t));
        if (!p)
            return hy_err_set("generate: out of memory");
        r->out_ids = p;
        *cap = nc;
    }
    r->out_ids[r->n_out++] = tok;
    return 0;
}

int hy_generate(struct hy_model *m, struct hy_gen_request *reqs, size_t n_reqs, const struct hy_gen_opts *opts,
                struct hy_gen_stats *stats)
{
    memset(stats, 0, sizeof(*stats));
    const int32_t limit = opts->max_model_len > 0 ? opts->max_model_len : m->cfg.max_position_embeddings;
    for (size_t i = 0; i < n_reqs; i++) {
        reqs[i].out_ids = NULL;
        reqs[i].n_out = 0;
        reqs[i].finish = HY_FINISH_NONE;
    }
    if (check_requests(m, reqs, n_reqs, limit))
        return -1;
    int32_t longest = 1;
    for (size_t i = 0; i < n_reqs; i++)
        if ((int32_t)reqs[i].n_prompt + reqs[i].params.max_new_tokens > longest)
            longest = (int32_t)reqs[i].n_prompt + reqs[i].params.max_new_tokens;
    struct hy_engine_config ec;
    hy_engine_config_init(&ec);
    ec.max_num_seqs = opts->batch_size > 0 ? opts->batch_size : 1;
    ec.max_num_batched_tokens = opts->max_prefill_tokens > 0 ? opts->max_prefill_tokens : 2048;
    if (ec.max_num_batched_tokens < ec.max_num_seqs)
        ec.max_num_batched_tokens = ec.max_num_seqs; /* room for one decode token per sequence */
    ec.block_size = opts->block_size > 0 ? opts->block_size : 16;
    ec.max_model_len = longest;
    ec.kv_cache_memory_bytes = 0; /* enough for max_num_seqs sequences of max_model_len (capped by RAM) */
    ec.kv_cache_dtype = opts->kv_cache_dtype;
    if (opts->spec)
        ec.spec = *opts->spec;
    ec.max_waiting_requests = (int32_t)(n_reqs < INT32_MAX - 1 ? n_reqs + 1 : INT32_MAX);
    struct hy_engine *e = hy_engine_create(m, &ec);
    if (!e)
        return -1;
    int rc = -1;
    uint64_t *ids = malloc((n_reqs ? n_reqs : 1) * sizeof(uint64_t));
    size_t *caps = calloc(n_reqs ? n_reqs : 1, sizeof(size_t));
    if (!ids || !caps) {
        hy_err_set("generate: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n_reqs; i++) {
        struct hy_engine_request er = {reqs[i].prompt_ids, reqs[i].n_prompt, reqs[i].params, NULL, 0, -1, NULL};
        if (hy_engine_add_request(e, &er, &ids[i]) != HY_ENGINE_OK) {
            hy_err_prefix("request %zu", i);
            goto out;
        }
    }
    const double t0 = hy_time_now();
    while (hy_engine_has_work(e)) {
        struct hy_engine_stats before, after;
        hy_engine_get_stats(e, &before);
        const struct hy_engine_output *outs;
        size_t n_outs;
        double ts = hy_time_now();
        if (hy_engine_step(e, &outs, &n_outs))
            goto out;
        double now = hy_time_now();
        hy_engine_get_stats(e, &after);
        int64_t n_new = 0;
        for (size_t k = 0; k < n_outs; k++) {
            const struct hy_engine_output *o = &outs[k];
            /* ids are handed out in submission order: binary search */
            size_t lo = 0, hi = n_reqs;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (ids[mid] < o->request_id)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo >= n_reqs || ids[lo] != o->request_id)
                continue;
            struct hy_gen_request *r = &reqs[lo];
            if (o->token_id >= 0) {
                if (r->n_out == 0)
                    r->t_first_token = now - t0;
                if (append_token(r, &caps[lo], o->token_id))
                    goto out;
                n_new++;
                if (opts->on_token)
                    opts->on_token(opts->ud, lo, o->token_id);
            }
            if (o->finish != HY_ENGINE_RUNNING) {
                r->finish = o->finish == HY_ENGINE_FINISHED_STOP ? HY_FINISH_EOS : HY_FINISH_LENGTH;
                r->t_done = now - t0;
                if (opts->on_finish)
                    opts->on_finish(opts->ud, lo);
            }
        }
        stats->steps++;
        if (after.prompt_chunks > before.prompt_chunks) { /* the step carried prompt tokens */
            stats->prefill_seconds += now - ts;
        } else {
            stats->decode_seconds += now - ts;
            stats->decode_tokens += n_new;
        }
    }
    struct hy_engine_stats st;
    hy_engine_get_stats(e, &st);
    stats->max_batch_seen = st.max_batch_seqs;
    stats->num_speculative_tokens = st.num_speculative_tokens;
    stats->spec = st.spec;
    /* prompt tokens actually computed (prefix-cache hits excluded) */
    for (size_t i = 0; i < n_reqs; i++)
        stats->prefill_tokens += (int64_t)reqs[i].n_prompt;
    stats->prefill_tokens -= (int64_t)st.prefix_hits;
    rc = 0;
out:
    free(ids);
    free(caps);
    hy_engine_free(e);
    return rc;
}
