/* arch.h - what differs between the architectures, as one table chosen at load (m->arch): how a
 * checkpoint's tensors bind, the residual stream's width, the architecture's own activations, the
 * embedding into the stream, one decoder layer, the head's input, the MTP block. forward.c runs the
 * passes through it; hy_v3.c (Hy3, dense Llama) and hy_v4.c (Hy4-preview) fill it.
 */
#ifndef HY_MODEL_ARCH_H
#define HY_MODEL_ARCH_H

#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

struct hy_forward_scratch;

struct hy_arch_ops {
    const char *name;
    /* Binds every tensor of the checkpoint to m (load_v3.c / load_v4.c): 0, or -1 with hy_err_msg(). */
    int (*bind)(struct hy_model *m);
    /* Residual streams per token (hy_v4: hc_mult hyper-connection copies; 1 otherwise). */
    int64_t (*streams)(const struct hy_model_config *c);
    /* The architecture's own buffers for T tokens and contexts of max_ctx positions (NULL on out of
     * memory), freed with scratch_free; both NULL when it has none. */
    void *(*scratch_new)(const struct hy_model *m, int64_t T, int32_t max_ctx);
    void (*scratch_free)(void *p);
    /* The stream entering layer 0: x [T, streams * H] from b's tokens. */
    void (*embed)(const struct hy_model *m, const struct hy_batch *b, float *x, struct hy_forward_scratch *s);
    /* Main layer L over the stream x (in place; writes cache layer L). */
    void (*layer)(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b, float *x,
                  struct hy_forward_scratch *s);
    /* The [T, H] rows the final norm reads, from the stream x after the last layer (x itself, or a
     * buffer of s). */
    const float *(*head)(const struct hy_model *m, const float *x, int64_t T, struct hy_forward_scratch *s);
    /* Bytes one token takes in a KV cache of dtype dt (resolved: F32 / BF16 / F8_E4M3) over every
     * cache layer, scales included (hy_model_kv_token_bytes). */
    size_t (*kv_token_bytes)(const struct hy_model *m, enum hy_dtype dt);
    /* Creates this rank's KV cache of dtype dt (resolved) for the architecture's attention (GQA rows of
     * this rank's KV heads; hy_v4: the MLA latent cache): 0, or -1 with hy_err_msg(). */
    int (*kv_init)(const struct hy_model *m, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks,
                   enum hy_dtype dt);
    /* The MTP layer's block L over x [T, H] (in place). */
    void (*mtp_block)(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b, float *x,
                      struct hy_forward_scratch *s);
};

extern const struct hy_arch_ops hy_v3_arch; /* hy_v3.c: Hy3 and dense Llama */
extern const struct hy_arch_ops hy_v4_arch; /* hy_v4.c: Hy4-preview */

/* Cache layers of a model: the main layers, plus the MTP layer when config.json has one. */
static inline int32_t hy_arch_cache_layers(const struct hy_model_config *c)
{
    return c->num_hidden_layers + (c->num_nextn_predict_layers > 0);
}

/* The table of config.json's architecture. */
static inline const struct hy_arch_ops *hy_arch_of(const struct hy_model_config *c)
{
    return c->arch == HY_ARCH_HY_V4 ? &hy_v4_arch : &hy_v3_arch;
}

/* The binders of the tables above. */
int hy_v3_bind_all(struct hy_model *m);
int hy_v4_bind_all(struct hy_model *m);

#endif
