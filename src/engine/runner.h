/* runner.h - turns a scheduler plan into one flat hy_batch (token ids, positions, slot mapping
 * from the block tables, logits rows) and runs the model on it (vLLM v1 model runner). */
#ifndef HY_ENGINE_RUNNER_H
#define HY_ENGINE_RUNNER_H

#include "model/model.h"
#include "sched/scheduler.h"

struct hy_runner {
    int32_t max_tokens; /* per step (max_num_batched_tokens) */
    int32_t max_seqs;
    int32_t block_size;
    int32_t *tok, *pos, *seq, *rows; /* [max_tokens], rows [max_seqs] */
    int64_t *slots;                  /* [max_tokens] */
    const int32_t **tables;          /* [max_seqs] */
    float *logits;                   /* [max_seqs, vocab] */
};

/* Returns 0, or -1 with hy_err_msg() (out of memory). */
int hy_runner_init(struct hy_runner *r, int32_t max_tokens, int32_t max_seqs, int32_t block_size, int32_t vocab);
void hy_runner_free(struct hy_runner *r);

/* Runs the plan through hy_model_forward. On success r->logits holds one row [vocab] per entry
 * with wants_logits, in plan order. Returns 0, or -1 with hy_err_msg(). */
int hy_runner_execute(struct hy_runner *r, struct hy_model *m, struct hy_kv_cache *kv,
                      const struct hy_sched_plan *plan);

#endif
