/* runner.c - plan -> flat batch -> forward. */
#include "engine/runner.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

int hy_runner_init(struct hy_runner *r, int32_t max_tokens, int32_t max_seqs, int32_t block_size, int32_t vocab)
{
    memset(r, 0, sizeof(*r));
    r->max_tokens = max_tokens;
    r->max_seqs = max_seqs;
    r->block_size = block_size;
    r->tok = malloc((size_t)max_tokens * sizeof(int32_t));
    r->pos = malloc((size_t)max_tokens * sizeof(int32_t));
    r->seq = malloc((size_t)max_tokens * sizeof(int32_t));
    r->slots = malloc((size_t)max_tokens * sizeof(int64_t));
    r->rows = malloc((size_t)max_seqs * sizeof(int32_t));
    r->tables = malloc((size_t)max_seqs * sizeof(*r->tables));
    r->logits = malloc((size_t)max_seqs * (size_t)vocab * sizeof(float));
    if (!r->tok || !r->pos || !r->seq || !r->slots || !r->rows || !r->tables || !r->logits) {
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
    memset(r, 0, sizeof(*r));
}

int hy_runner_execute(struct hy_runner *r, struct hy_model *m, struct hy_kv_cache *kv, const struct hy_sched_plan *plan)
{
    const int32_t bs = r->block_size;
    int32_t n = 0, n_logits = 0;
    if (plan->n > r->max_seqs || plan->n_tokens > r->max_tokens)
        return hy_err_set("runner: plan of %d tokens / %d sequences exceeds %d / %d", plan->n_tokens, plan->n,
                          r->max_tokens, r->max_seqs);
    for (int32_t i = 0; i < plan->n; i++) {
        const struct hy_sched_entry *e = &plan->entries[i];
        const struct hy_request *q = e->req;
        for (int32_t j = 0; j < e->n_tokens; j++, n++) {
            int32_t p = e->start + j;
            r->tok[n] = q->tokens[p];
            r->pos[n] = p;
            r->seq[n] = i;
            r->slots[n] = (int64_t)q->blocks[p / bs] * bs + p % bs;
        }
        r->tables[i] = q->blocks;
        if (e->wants_logits)
            r->rows[n_logits++] = n - 1;
    }
    struct hy_batch b = {n, r->tok, r->pos, r->slots, r->seq, r->tables, n_logits, r->rows};
    return hy_model_forward(m, kv, &b, r->logits, NULL);
}
