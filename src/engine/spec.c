/* spec.c - the MTP draft pass and the speculation gate. */
#include "engine/spec.h"

#include "base/err.h"
#include "sample/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int hy_spec_init(struct hy_spec *s, const struct hy_spec_config *cfg, const struct hy_model *m, int32_t max_tokens,
                 int32_t max_seqs, int32_t block_size)
{
    memset(s, 0, sizeof(*s));
    if (hy_spec_config_validate(cfg))
        return -1;
    if (cfg->num_speculative_tokens < 1)
        return hy_err_set("speculative decoding: num_speculative_tokens must be >= 1");
    if (!m->has_mtp)
        return hy_err_set("speculative decoding (method mtp) needs the checkpoint's MTP layer "
                          "(model.layers.%d.*, config num_nextn_predict_layers = 1); this model has none "
                          "(num_nextn_predict_layers = %d)",
                          m->cfg.num_hidden_layers, m->cfg.num_nextn_predict_layers);
    s->cfg = *cfg;
    s->max_tokens = max_tokens;
    s->max_seqs = max_seqs;
    s->block_size = block_size;
    s->vocab = m->cfg.vocab_size;
    s->hidden_size = m->cfg.hidden_size;
    const size_t T = (size_t)max_tokens, S = (size_t)max_seqs, H = (size_t)s->hidden_size;
    s->tok = malloc(T * sizeof(int32_t));
    s->pos = malloc(T * sizeof(int32_t));
    s->seq = malloc(T * sizeof(int32_t));
    s->rows = malloc(T * sizeof(int32_t));
    s->who = malloc(S * sizeof(int32_t));
    s->slots = malloc(T * sizeof(int64_t));
    s->tables = malloc(S * sizeof(*s->tables));
    s->logits = malloc(S * (size_t)s->vocab * sizeof(float));
    s->hidden = malloc(T * H * sizeof(float));
    s->hidden_in = malloc(T * H * sizeof(float));
    s->chain_in = malloc(S * H * sizeof(float));
    if (!s->tok || !s->pos || !s->seq || !s->rows || !s->who || !s->slots || !s->tables || !s->logits || !s->hidden ||
        !s->hidden_in || !s->chain_in) {
        hy_spec_free(s);
        return hy_err_set("speculative decoding: out of memory (%d tokens, %d sequences)", max_tokens, max_seqs);
    }
    hy_spec_gate_init(s);
    return 0;
}

void hy_spec_free(struct hy_spec *s)
{
    free(s->tok);
    free(s->pos);
    free(s->seq);
    free(s->rows);
    free(s->who);
    free(s->slots);
    free(s->tables);
    free(s->logits);
    free(s->hidden);
    free(s->hidden_in);
    free(s->chain_in);
    memset(s, 0, sizeof(*s));
}

/* Draft from one MTP logits row: its argmax when the top probability reaches p_min, else -1. */
static int32_t draft_of(const float *row, int32_t V, float p_min)
{
    const int32_t best = hy_argmax_f32(row, V);
    if (p_min <= 0.0f)
        return best;
    const float top = row[best];
    if (!isfinite(top))
        return -1;
    double sum = 0.0;
    for (int32_t v = 0; v < V; v++)
        if (row[v] == row[v]) /* NaN counts as -inf */
            sum += exp((double)row[v] - (double)top);
    return 1.0 / sum >= (double)p_min ? best : -1;
}

static int64_t slot_of(const struct hy_request *q, int32_t p, int32_t bs)
{
    return (int64_t)q->blocks[p / bs] * bs + p % bs;
}

/* Draft `step` for the n MTP logits rows just computed (row r: request of plan entry who[r], hidden
 * state at s->hidden row rows[r]): appends each confident argmax to its request's drafts and keeps the
 * requests allowed more than `step` drafts, in order, as the next chain step's rows (who, chain_in).
 * Returns how many it kept. */
static int32_t take_drafts(struct hy_spec *s, const struct hy_sched_plan *plan, const int32_t *allow, int32_t n,
                           int32_t step)
{
    const int64_t V = s->vocab, H = s->hidden_size;
    int32_t next = 0;
    for (int32_t r = 0; r < n; r++) {
        const int32_t i = s->who[r];
        struct hy_request *q = plan->entries[i].req;
        const int32_t d = draft_of(s->logits + r * V, (int32_t)V, s->cfg.draft_p_min);
        if (d < 0)
            continue;
        q->drafts[q->n_drafts++] = d;
        if (allow[i] > step) { /* next <= r: who[] is overwritten behind the reads */
            memcpy(s->chain_in + next * H, s->hidden + (int64_t)s->rows[r] * H, (size_t)H * sizeof(float));
            s->who[next++] = i;
        }
    }
    return next;
}

int hy_spec_propose(struct hy_spec *s, struct hy_executor *ex, struct hy_kv_cache *kv, const struct hy_sched_plan *plan,
                    const struct hy_runner *run, const int32_t *allow)
{
    const int32_t bs = s->block_size;
    const int64_t H = s->hidden_size;
    int32_t n = 0, n_logits = 0, k_max = 0;
    /* step 1: every kept row, with its next token */
    for (int32_t i = 0; i < plan->n; i++) {
        const struct hy_sched_entry *e = &plan->entries[i];
        struct hy_request *q = e->req;
        const int32_t kept = e->n_tokens - e->n_rejected;
        s->tables[i] = q->blocks;
        q->n_drafts = 0;
        int32_t last = -1;
        for (int32_t j = 0; j < kept && !q->mtp_stale; j++) {
            const int32_t p = e->start + j;
            if (p + 1 >= q->n_tokens) /* no next token (a request that ended at its cap) */
                break;
            memcpy(s->hidden_in + (int64_t)n * H, run->hidden + (int64_t)(run->row0[i] + j) * H,
                   (size_t)H * sizeof(float));
            s->tok[n] = q->tokens[p + 1];
            s->pos[n] = p;
            s->seq[n] = i;
            s->slots[n] = slot_of(q, p, bs);
            last = n++;
        }
        if (allow[i] > 0 && last >= 0 && last == n - 1 && e->start + kept == q->n_tokens - 1) {
            s->who[n_logits] = i;
            s->rows[n_logits++] = last;
            if (allow[i] > k_max)
                k_max = allow[i];
        }
    }
    if (n == 0)
        return 0;
    struct hy_batch b = {n, s->tok, s->pos, s->slots, s->seq, s->tables, n_logits, s->rows, s->cfg.mtp_zero_pos0};
    if (hy_executor_forward_mtp(ex, kv, &b, s->hidden_in, n_logits ? s->logits : NULL, k_max >= 2 ? s->hidden : NULL))
        return -1;
    /* draft 1 per allowed request, then the chain */
    int32_t live = take_drafts(s, plan, allow, n_logits, 1);
    for (int32_t step = 2; step <= k_max && live > 0; step++) {
        for (int32_t r = 0; r < live; r++) {
            const int32_t i = s->who[r];
            const struct hy_request *q = plan->entries[i].req;
            const int32_t p = q->n_tokens - 1 + q->n_drafts - 1; /* the previous draft's row position + 1 */
            s->tok[r] = q->drafts[q->n_drafts - 1];
            s->pos[r] = p;
            s->seq[r] = i;
            s->slots[r] = slot_of(q, p, bs);
            s->rows[r] = r;
        }
        struct hy_batch cb = {live, s->tok, s->pos, s->slots, s->seq, s->tables, live, s->rows, s->cfg.mtp_zero_pos0};
        if (hy_executor_forward_mtp(ex, kv, &cb, s->chain_in, s->logits, s->hidden))
            return -1;
        live = take_drafts(s, plan, allow, live, step);
    }
    return 0;
}

void hy_spec_count(struct hy_spec *s, int32_t n_drafts, int32_t n_accepted)
{
    if (n_drafts <= 0)
        return;
    s->win_drafts += n_drafts;
    s->stats.num_drafts++;
    s->stats.num_draft_tokens += (uint64_t)n_drafts;
    s->stats.num_accepted_tokens += (uint64_t)n_accepted;
    for (int32_t i = 0; i < n_accepted && i < HY_SPEC_MAX_TOKENS; i++)
        s->stats.num_accepted_tokens_per_pos[i]++;
}
