/* logprobs.h - log-softmax of raw logits: one token's log-probability and the top n. */
#ifndef HY_SAMPLE_LOGPROBS_H
#define HY_SAMPLE_LOGPROBS_H

#include <stdint.h>

/* logits[V] (fp32, raw model output, not modified). Returns log p(token) under softmax(logits);
 * fills top_ids[n_top] / top_lp[n_top] with the n_top most likely tokens, most likely first
 * (lowest id first on ties). NaN logits count as -inf. n_top <= V. */
float hy_logprobs_compute(const float *logits, int32_t V, int32_t token, int32_t n_top, int32_t *top_ids,
                          float *top_lp);

#endif
