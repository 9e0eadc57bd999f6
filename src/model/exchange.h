/* exchange.h - the collectives of the multi-rank forward pass (internal to model/).
 *
 * All take the rank's struct hy_model_dist (shard.h), run on the calling thread (the one that issues
 * every collective) and must be called by every rank of the communicator with the same T. None sums
 * floating-point values across ranks except hy_exchange_sum_rows, which adds partials in rank order
 * (batch-invariant: each row's sum has the same operands in the same order whatever T is).
 * Return 0, or -1 with hy_err_msg() (out of memory for staging, a size MPI cannot express).
 */
#ifndef HY_MODEL_EXCHANGE_H
#define HY_MODEL_EXCHANGE_H

#include "model/shard.h"

#include <stdint.h>

/* out[T, total] = the column blocks of every rank of c side by side: rank r contributes local[T, n_r]
 * with n_r from hy_shard_part(total, size, r) (this rank's n must match). out must not alias local. */
int hy_exchange_gather_cols(struct hy_model_dist *d, struct hy_comm *c, const float *local, int64_t T, int64_t total,
                            float *out);

/* out[T, N] = Σ_r partial_r[T, N] over the ranks of c, added in rank order (reduce-scatter to row
 * slices, then all-gather). out may alias partial. */
int hy_exchange_sum_rows(struct hy_model_dist *d, struct hy_comm *c, const float *partial, int64_t T, int64_t N,
                         float *out);

/* Rows of a vocabulary-split table: ids[T] -> out[T, H], each row copied from the rank of c whose
 * range [hy_shard_part(V, size, r)] holds the id; rows_local(ids in this rank's range, in order) computed
 * by the caller into `mine` [n_mine, H]. */
int hy_exchange_gather_vocab_rows(struct hy_model_dist *d, struct hy_comm *c, const int32_t *ids, int64_t T, int64_t V,
                                  int64_t H, const float *mine, float *out);

/* The attention-DP group of each of the batch's T tokens (by its sequence's first KV block id:
 * sticky for a request, shared by requests that share a cached prefix) into grp[T]. */
void hy_exchange_token_groups(const struct hy_model_dist *d, int64_t T, const int32_t *seq_ids,
                              const int32_t *const *block_tables, int32_t *grp);

/* Rows of the attention-DP groups put together: group g computed rows[n_g, N] for its tokens
 * (grp[t] == g, ascending t); every rank receives all of them into out[T, N] at their token rows. */
int hy_exchange_dp_rows(struct hy_model_dist *d, const int32_t *grp, int64_t T, int64_t N, const float *rows,
                        float *out);

#endif
