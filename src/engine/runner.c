/* runner.c - plan -> flat batch -> forward. */
#include "engine/runner.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

int hy_runner_init(struct hy_runner *r, int32_t max_tokens, int32_t max_seqs, int32_t block_size, int32_t vocab,
                   int32_t max_drafts, int32_t hidden_size)
{
    memset(r, 0, sizeof(*r));
    r->max_tokens = max_tokens;
    r->max_seqs = max_seqs;
    r->block_size = block_size;
    r->max_drafts = max_drafts;
    const size_t n_rows = (size_t)max_seqs * (size_t)(max_drafts + 1);
    r->tok = malloc((size_t)max_tokens * sizeof(int32_t));
    r->pos = malloc((size_t)max_tokens * sizeof(int32_t));
    r->seq = malloc((size_t)max_tokens * sizeof(int32_t));
    r->slots = malloc((size_t)max_tokens * sizeof(int64_t));
    r->rows = malloc(n_rows * sizeof(int32_t));
    r->tables = malloc((size_t)max_seqs * sizeof(*r->tables));
    r->logits = malloc(n_rows * (size_t)vocab * sizeof(float));
    r->row0 = malloc((size_t)max_seqs * sizeof(int32_t));
    r->logit0 = malloc((size_t)max_seqs * sizeof(int32_t));
    if (max_drafts > 0)
        r->hidden = malloc((size_t)max_tokens * (size_t)hidden_size * sizeof(float));
    r->want_hidden = max_drafts > 0;
    if (!r->tok || !r->pos || !r->seq || !r->slots || !r->rows || !r->tables || !r->logits || !r->row0 || !r->logit0 ||
        (max_drafts > 0 && !r->hidden)) {
        hy_runner_free(r);
        return hy_err_set("runner: out of memory (%d tokens, %d sequences)", max_tokens, max_seqs);
    }
    return 0;
}

void hy_runner_free(struct hy_runner *r)
{
    free(r->tok);
    free(r->pos);
    free(r->seq);
    free(r->slots);
    free(r->rows);
    free(r->tables);
    free(r->logits);
    free(r->hidden);
    free(r->row0);
    free(r->logit0);
    memset(r, 0, sizeof(*r));
}

int hy_runner_execute(struct hy_runner *r, struct hy_executor *ex, struct hy_kv_cache *kv,
                      const struct hy_sched_plan *plan)
{
    const int32_t bs = r->block_size;
    int32_t n = 0, n_logits = 0;
    if (plan->n > r->max_seqs || plan->n_tokens > r->max_tokens)
        return hy_err_set("runner: plan of %d tokens / %d sequences exceeds %d / %d", plan->n_tokens, plan->n,
                          r->max_tokens, r->max_seqs);
    for (int32_t i = 0; i < plan->n; i++) {
        const struct hy_sched_entry *e = &plan->entries[i];
        const struct hy_request *q = e->req;
        if (e->n_drafts > r->max_drafts)
            return hy_err_set("runner: %d drafts exceed the %d this runner verifies", e->n_drafts, r->max_drafts);
        r->row0[i] = n;
        r->logit0[i] = e->wants_logits ? n_logits : -1;
        for (int32_t j = 0; j < e->n_tokens; j++, n++) {
            int32_t p = e->start + j;
            r->tok[n] = p < q->n_tokens ? q->tokens[p] : q->drafts[p - q->n_tokens];
            r->pos[n] = p;
            r->seq[n] = i;
            r->slots[n] = (int64_t)q->blocks[p / bs] * bs + p % bs;
        }
        r->tables[i] = q->blocks;
        if (e->wants_logits)
            for (int32_t j = e->n_drafts; j >= 0; j--)
                r->rows[n_logits++] = n - 1 - j;
    }
    struct hy_batch b = {n, r->tok, r->pos, r->slots, r->seq, r->tables, n_logits, r->rows, 0};
    return hy_executor_forward(ex, kv, &b, r->logits, r->want_hidden ? r->hidden : NULL);
}
