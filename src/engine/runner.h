/* runner.h - turns a scheduler plan into one flat hy_batch (token ids, positions, slot mapping
 * from the block tables, logits rows) and runs the model on it (vLLM v1 model runner). */
#ifndef HY_ENGINE_RUNNER_H
#define HY_ENGINE_RUNNER_H

#include "engine/executor.h"
#include "model/model.h"
#include "sched/scheduler.h"

struct hy_runner {
    int32_t max_tokens; /* per step (max_num_batched_tokens) */
    int32_t max_seqs;
    int32_t block_size;
    int32_t max_drafts;              /* drafts per request verified in one step (0 without speculation) */
    int32_t *tok, *pos, *seq, *rows; /* [max_tokens], rows [max_seqs * (max_drafts + 1)] */
    int64_t *slots;                  /* [max_tokens] */
    const int32_t **tables;          /* [max_seqs] */
    float *logits;                   /* [max_seqs * (max_drafts + 1), vocab] */
    float *hidden;                   /* [max_tokens, hidden_size] final-normed states (MTP input), or NULL */
    int want_hidden;                 /* 1 (default with hidden): fill it; 0: the MTP layer is off this step */
    int32_t *row0;                   /* [max_seqs] first batch row of each plan entry */
    int32_t *logit0;                 /* [max_seqs] first logits row of each entry (-1: none) */
};

/* max_drafts > 0 (speculative decoding) also keeps the final-normed hidden states (hidden_size
 * floats per token). Returns 0, or -1 with hy_err_msg() (out of memory). */
int hy_runner_init(struct hy_runner *r, int32_t max_tokens, int32_t max_seqs, int32_t block_size, int32_t vocab,
                   int32_t max_drafts, int32_t hidden_size);
void hy_runner_free(struct hy_runner *r);

/* Runs the plan through the executor's hy_model_forward. On success r->logits holds, per entry with wants_logits
 * in plan order, n_drafts + 1 rows [vocab] (its last known token, then each draft), starting at
 * row logit0[i]; with max_drafts > 0 r->hidden holds every batch row's final-normed state, entry i's
 * rows from row0[i]. Returns 0, or -1 with hy_err_msg(). */
int hy_runner_execute(struct hy_runner *r, struct hy_executor *ex, struct hy_kv_cache *kv,
                      const struct hy_sched_plan *plan);

#endif
