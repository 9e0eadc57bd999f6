/* bind.h - the generic tensor binders (bind.c) that load_v3.c and load_v4.c bind a checkpoint with
 * (internal to model/).
 *
 * Every binder finds a tensor by its checkpoint name, checks its dtype and the shape config.json
 * implies, and returns 0, or -1 with hy_err_msg() naming the tensor ("tensor \"X\" is missing from the
 * checkpoint", "... has shape [..] but config.json implies [..]", "unsupported dtype ..."). Matrices
 * point into the mmapped checkpoint (not owned); f32 copies are malloc'd and owned by the caller (the
 * model's free_layer / hy_model_free release them). */
#ifndef HY_MODEL_BIND_H
#define HY_MODEL_BIND_H

#include "model/model.h"

#include "base/err.h"

#include <stdint.h>

#define NAME_LEN 256

/* A plain float [rows, cols] matrix (F32/F16/BF16) by full name, zero-copy. */
int hy_bind_matrix(const struct hy_model *m, const char *name, int64_t rows, int64_t cols, struct hy_tensor *out);

/* Tensor t ([rows] when cols == 0, else [rows, cols]) widened to a malloc'd f32 copy *out. */
int hy_bind_f32(const struct hy_st_tensor *t, int64_t rows, int64_t cols, float **out);

/* The embedding or the lm_head, module `module` ("model.embed_tokens", "lm_head") [rows, cols]: stored as a
 * float matrix without a weight_scale, it binds plain whatever quantization_config says (the published
 * checkpoints keep both BF16 and name them in the ignore lists); stored otherwise, it binds as a linear in
 * the format quantization_config assigns it (`hyinfer quantize --quant-target lm_head embed`), so a
 * quantized table the config does not quantize is an error naming it. */
int hy_bind_table(struct hy_model *m, const char *module, int64_t rows, int64_t cols, struct hy_tensor *out);

/* A [n] vector by full name, widened to a malloc'd f32 copy *out. */
int hy_bind_vec(const struct hy_model *m, const char *name, int64_t n, float **out);

/* A linear weight [rows, cols] by module name (without ".weight"), plain or quantized as the
 * checkpoint's quantization_config says; L == num_hidden_layers marks the MTP layer (lenient). */
int hy_bind_linear(struct hy_model *m, int L, const char *module, int64_t rows, int64_t cols, struct hy_tensor *out);

/* A SwiGLU MLP <prefix>.{gate,up,down}_proj of intermediate width `width`. */
int hy_bind_mlp(struct hy_model *m, int L, const char *prefix, int64_t width, struct hy_expert *e);

/* The MoE block of the layer whose tensors start with lp (e.g. "model.layers.3", "model.mtp_layers.0"):
 * router (f32), selection bias (zeros when absent), routed experts (fused gate_up_proj/down_proj or
 * per expert) and the shared expert(s); ly->experts is malloc'd (owned by the layer). */
int hy_bind_moe(struct hy_model *m, int L, const char *lp, struct hy_layer *ly);

/* m->inv_freq [head_dim/2] = rope_theta^(-2i/head_dim) (malloc'd, freed by hy_model_free); -1 on out of memory.
 * hy_v4's config sets head_dim to qk_rope_head_dim, the width it rotates. */
int hy_bind_inv_freq(struct hy_model *m);

/* The tensor named by the printf format into name [NAME_LEN], or NULL when the checkpoint lacks it. */
const struct hy_st_tensor *hy_bind_find_fmt(const struct hy_model *m, char *name, const char *fmt, ...) HY_PRINTF(3, 4);

#endif
