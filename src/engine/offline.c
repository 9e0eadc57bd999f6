#include "engine/offline.h"

#include "base/err.h"
#include "base/timing.h"

#include <stdlib.h>
#include <string.h>

/* A running sequence. */
struct seq {
    size_t             req;          /* index into reqs */
    int32_t           *block_table;  /* its blocks (contiguous range of the pool) */
    int32_t            n_computed;   /* tokens whose KV is cached */
    struct hy_sampler *sampler;
    int32_t            last_token;   /* newest sampled token, not yet fed */
    size_t             out_cap;
};

static int32_t cdiv(int64_t a, int64_t b) { return (int32_t)((a + b - 1) / b); }

static int check_requests(const struct hy_model *m, struct hy_gen_request *reqs, size_t n, int32_t max_len)
{
    for (size_t i = 0; i < n; i++) {
        const struct hy_gen_request *r = &reqs[i];
        if (r->n_prompt == 0)
            return hy_err_set("request %zu: empty prompt", i);
        if (r->params.max_new_tokens < 1)
            return hy_err_set("request %zu: max_new_tokens=%d: must be >= 1", i, r->params.max_new_tokens);
        if ((int64_t)r->n_prompt + r->params.max_new_tokens > max_len)
            return hy_err_set("request %zu: prompt (%zu tokens) + max_new_tokens (%d) exceeds the maximum "
                              "context length %d", i, r->n_prompt, r->params.max_new_tokens, max_len);
        for (size_t j = 0; j < r->n_prompt; j++)
            if (r->prompt_ids[j] < 0 || r->prompt_ids[j] >= m->cfg.vocab_size)
                return hy_err_set("request %zu: token id %d is outside the vocabulary [0, %d)", i, r->prompt_ids[j],
                                  m->cfg.vocab_size);
        if (hy_sampling_params_validate(&r->params))
            return hy_err_prefix("request %zu", i);
    }
    return 0;
}

/* Appends a sampled token to its request; returns 1 when the sequence is finished. */
static int accept_token(const struct hy_model *m, struct hy_gen_request *r, struct seq *s, int32_t tok,
                        int32_t max_len, double now)
{
    if (r->n_out == s->out_cap) {
        size_t cap = s->out_cap ? s->out_cap * 2 : 64;
        int32_t *p = realloc(r->out_ids, cap * sizeof(int32_t));
        if (!p)
            return -1;
        r->out_ids = p;
        s->out_cap = cap;
    }
    if (r->n_out == 0)
        r->t_first_token = now;
    r->out_ids[r->n_out++] = tok;
    s->last_token = tok;
    if (!r->params.ignore_eos && hy_model_config_is_eos(&m->cfg, tok)) {
        r->finish = HY_FINISH_EOS;
        return 1;
    }
    if ((int32_t)r->n_out >= r->params.max_new_tokens || (int64_t)r->n_prompt + (int64_t)r->n_out >= max_len) {
        r->finish = HY_FINISH_LENGTH;
        return 1;
    }
    return 0;
}

struct step_batch {
    int32_t *tok, *pos, *seq_ids, *logit_rows, *logit_seq;
    int64_t *slots;
    const int32_t **tables;
    float *logits;
    int32_t n, n_logits;
};

static void step_batch_free(struct step_batch *sb)
{
    free(sb->tok);
    free(sb->pos);
    free(sb->seq_ids);
    free(sb->logit_rows);
    free(sb->logit_seq);
    free(sb->slots);
    free(sb->tables);
    free(sb->logits);
}

int hy_generate(struct hy_model *m, struct hy_gen_request *reqs, size_t n_reqs, const struct hy_gen_opts *opts,
                struct hy_gen_stats *stats)
{
    memset(stats, 0, sizeof(*stats));
    const int32_t max_len = opts->max_model_len > 0 ? opts->max_model_len : m->cfg.max_position_embeddings;
    const int32_t B = opts->batch_size > 0 ? opts->batch_size : 1;
    const int32_t budget = opts->max_prefill_tokens > 0 ? opts->max_prefill_tokens : 2048;
    const int32_t bs = opts->block_size > 0 ? opts->block_size : 16;
    const int32_t V = m->cfg.vocab_size;
    if (check_requests(m, reqs, n_reqs, max_len))
        return -1;
    for (size_t i = 0; i < n_reqs; i++) {
        reqs[i].out_ids = NULL;
        reqs[i].n_out = 0;
        reqs[i].finish = HY_FINISH_NONE;
    }
    /* Each of the B sequence places owns a fixed range of blocks big enough for the longest request. */
    int32_t blocks_per_seq = 1;
    for (size_t i = 0; i < n_reqs; i++) {
        int32_t nb = cdiv((int64_t)reqs[i].n_prompt + reqs[i].params.max_new_tokens + 1, bs);
        if (nb > blocks_per_seq)
            blocks_per_seq = nb;
    }
    struct hy_kv_cache kv;
    if (hy_model_kv_cache_init(m, &kv, bs, blocks_per_seq * B))
        return -1;
    int rc = -1;
    struct seq *seqs = calloc((size_t)B, sizeof(*seqs));
    int32_t *tables = malloc((size_t)B * (size_t)blocks_per_seq * sizeof(int32_t));
    int *active = calloc((size_t)B, sizeof(int));
    struct step_batch sb = {0};
    const int32_t cap = budget + B;
    sb.tok = malloc((size_t)cap * sizeof(int32_t));
    sb.pos = malloc((size_t)cap * sizeof(int32_t));
    sb.seq_ids = malloc((size_t)cap * sizeof(int32_t));
    sb.slots = malloc((size_t)cap * sizeof(int64_t));
    sb.logit_rows = malloc((size_t)B * sizeof(int32_t));
    sb.logit_seq = malloc((size_t)B * sizeof(int32_t));
    sb.tables = malloc((size_t)B * sizeof(*sb.tables));
    sb.logits = malloc((size_t)B * (size_t)V * sizeof(float));
    if (!seqs || !tables || !active || !sb.tok || !sb.pos || !sb.seq_ids || !sb.slots || !sb.logit_rows ||
        !sb.logit_seq || !sb.tables || !sb.logits) {
        hy_err_set("generate: out of memory");
        goto out;
    }
    for (int32_t i = 0; i < B * blocks_per_seq; i++)
        tables[i] = i;
    for (int32_t i = 0; i < B; i++) {
        seqs[i].block_table = tables + (size_t)i * blocks_per_seq;
        sb.tables[i] = seqs[i].block_table;
    }
    const double t0 = hy_time_now();
    size_t next_req = 0, n_done = 0;
    while (n_done < n_reqs) {
        /* admit waiting requests into free places */
        for (int32_t i = 0; i < B && next_req < n_reqs; i++) {
            if (active[i])
                continue;
            struct seq *s = &seqs[i];
            s->req = next_req++;
            s->n_computed = 0;
            s->out_cap = 0;
            s->sampler = hy_sampler_create(&reqs[s->req].params, V);
            if (!s->sampler)
                goto out;
            hy_sampler_accept_prompt(s->sampler, reqs[s->req].prompt_ids, reqs[s->req].n_prompt);
            active[i] = 1;
        }
        /* plan one step: decode tokens first (one per sequence past its prompt), then prompt chunks */
        sb.n = sb.n_logits = 0;
        int32_t left = budget, has_prefill = 0, n_prefill = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int32_t i = 0; i < B; i++) {
                if (!active[i])
                    continue;
                struct seq *s = &seqs[i];
                struct hy_gen_request *r = &reqs[s->req];
                int in_prompt = s->n_computed < (int32_t)r->n_prompt;
                if (pass == 0 && !in_prompt) {
                    sb.tok[sb.n] = s->last_token;
                    sb.pos[sb.n] = s->n_computed;
                } else if (pass == 1 && in_prompt && left > 0) {
                    int32_t take = (int32_t)r->n_prompt - s->n_computed;
                    if (take > left)
                        take = left;
                    for (int32_t j = 0; j < take; j++) {
                        int32_t p = s->n_computed + j;
                        sb.tok[sb.n + j] = r->prompt_ids[p];
                        sb.pos[sb.n + j] = p;
                        sb.seq_ids[sb.n + j] = i;
                        sb.slots[sb.n + j] = (int64_t)s->block_table[p / bs] * bs + p % bs;
                    }
                    left -= take;
                    n_prefill += take;
                    has_prefill = 1;
                    sb.n += take - 1; /* the last token is finished below */
                    if (s->n_computed + take < (int32_t)r->n_prompt) {
                        s->n_computed += take;
                        sb.n++;
                        continue;
                    }
                    s->n_computed += take - 1; /* the shared code below adds the final one */
                } else {
                    continue;
                }
                int32_t p = sb.pos[sb.n];
                sb.seq_ids[sb.n] = i;
                sb.slots[sb.n] = (int64_t)s->block_table[p / bs] * bs + p % bs;
                sb.logit_rows[sb.n_logits] = sb.n;
                sb.logit_seq[sb.n_logits++] = i;
                sb.n++;
                s->n_computed++;
            }
        if (sb.n == 0)
            break; /* cannot happen: every active sequence has work */
        int32_t n_active = 0;
        for (int32_t i = 0; i < B; i++)
            n_active += active[i];
        if (n_active > stats->max_batch_seen)
            stats->max_batch_seen = n_active;
        struct hy_batch batch = {sb.n, sb.tok, sb.pos, sb.slots, sb.seq_ids, sb.tables, sb.n_logits, sb.logit_rows};
        double ts = hy_time_now();
        if (hy_model_forward(m, &kv, &batch, sb.logits, NULL))
            goto out;
        double now = hy_time_now();
        int64_t n_new = 0;
        for (int32_t j = 0; j < sb.n_logits; j++) {
            struct seq *s = &seqs[sb.logit_seq[j]];
            struct hy_gen_request *r = &reqs[s->req];
            int32_t tok = hy_sampler_sample(s->sampler, sb.logits + (size_t)j * V);
            int fin = accept_token(m, r, s, tok, max_len, now - t0);
            if (fin < 0) {
                hy_err_set("generate: out of memory");
                goto out;
            }
            n_new++;
            if (opts->on_token)
                opts->on_token(opts->ud, s->req, tok);
            if (fin) {
                r->t_done = now - t0;
                hy_sampler_free(s->sampler);
                s->sampler = NULL;
                active[sb.logit_seq[j]] = 0;
                n_done++;
                if (opts->on_finish)
                    opts->on_finish(opts->ud, s->req);
            }
        }
        stats->steps++;
        if (has_prefill) {
            stats->prefill_seconds += now - ts;
            stats->prefill_tokens += n_prefill;
        } else {
            stats->decode_seconds += now - ts;
            stats->decode_tokens += n_new;
        }
    }
    rc = 0;
out:
    if (seqs)
        for (int32_t i = 0; i < B; i++)
            hy_sampler_free(seqs[i].sampler);
    free(seqs);
    free(tables);
    free(active);
    step_batch_free(&sb);
    hy_kv_cache_free(&kv);
    return rc;
}
