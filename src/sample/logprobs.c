/* logprobs.c - log_softmax(logits)[token] and the top-n entries (insertion into a short list). */
#include "sample/logprobs.h"

#include <math.h>

float hy_logprobs_compute(const float *logits, int32_t V, int32_t token, int32_t n_top, int32_t *top_ids, float *top_lp)
{
    float mx = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        if (logits[i] > mx)
            mx = logits[i];
    double sum = 0.0;
    for (int32_t i = 0; i < V; i++)
        if (logits[i] > -INFINITY)
            sum += exp((double)logits[i] - (double)mx);
    const double lse = (double)mx + log(sum);
    int32_t k = 0;
    for (int32_t i = 0; i < V && n_top > 0; i++) {
        float v = isnan(logits[i]) ? -INFINITY : logits[i];
        if (k == n_top && !(v > logits[top_ids[k - 1]]))
            continue;
        int32_t j = k < n_top ? k++ : k - 1;
        while (j > 0 && v > logits[top_ids[j - 1]]) {
            top_ids[j] = top_ids[j - 1];
            j--;
        }
        top_ids[j] = i;
    }
    for (int32_t j = 0; j < k; j++)
        top_lp[j] = (float)((double)logits[top_ids[j]] - lse);
    float lt = isnan(logits[token]) ? -INFINITY : logits[token];
    return (float)((double)lt - lse);
}
