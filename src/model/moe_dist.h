/* moe_dist.h - the MoE block and the split MLPs of a multi-rank forward pass (moe_dist.c; internal to
 * model/, used by shard_ops.c). */
#ifndef HY_MODEL_MOE_DIST_H
#define HY_MODEL_MOE_DIST_H

#include "model/layers.h"

/* A SwiGLU MLP split over the ranks of c by intermediate width. */
void hy_moe_dist_ffn(const struct hy_model *m, const struct hy_expert *e, const float *x, int64_t T, int64_t I,
                     struct hy_comm *c, float *ga, float *gb, float *y);

/* The MoE block over the ranks, after routing (s->sel, s->selw filled on every rank): s->y[T, H]. */
void hy_moe_dist_moe(const struct hy_model *m, const struct hy_layer *ly, const float *x, int64_t T,
                     struct hy_forward_scratch *s);

#endif
