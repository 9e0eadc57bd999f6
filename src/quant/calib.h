/* calib.h - calibration statistics for GPTQ (quant/gptq.h): H = mean of x x^T of the inputs x of
 * every quantizable linear layer, collected by running the model's forward pass over calibration
 * text (the model's observer hook, model.h).
 *
 * Linears that read the same input share one accumulator: q/k/v_proj (the normed attention input),
 * gate/up_proj of the dense MLP, of each routed expert and of the shared expert. o_proj, each
 * down_proj and the MTP eh_proj have their own. A routed expert only sees the tokens routed to it;
 * one never chosen has no statistics (its linears fall back to round-to-nearest). Statistics come from
 * the unquantized model (all layers at once, not layer-sequentially as llm-compressor's pipeline does).
 * Module names are the checkpoint's (`model.layers.L.self_attn.q_proj`, `...mlp.experts.E.gate_proj`,
 * `...mlp.shared_mlp.up_proj`; `shared_experts` is accepted as the other Hy3 spelling).
 */
#ifndef HY_QUANT_CALIB_H
#define HY_QUANT_CALIB_H

#include "model/model.h"

#include <stdint.h>

struct hy_calib_acc {
    const struct hy_tensor *w;   /* the linear whose input is observed (the first of the group) */
    int64_t                 K;   /* input width */
    double                 *g;   /* [K, K] sum of x x^T, then (hy_calib_run) the mean */
    int64_t                 n;   /* input rows seen */
};

struct hy_calib_name {
    char    module[96];
    int32_t acc;                 /* index into acc */
};

struct hy_calib {
    struct hy_calib_acc  *acc;   /* sorted by w (the observer's lookup) */
    int32_t               n_acc;
    struct hy_calib_name *names; /* sorted by module */
    int32_t               n_names;
    uint64_t              bytes; /* bytes of all g */
    int64_t               tokens; /* calibration tokens run (set by hy_calib_run) */
    int32_t               samples;
};

/* Sets up the accumulators of m's quantizable linears (main layers and MTP). Fails (-1, with
 * hy_err_msg() naming the need) when their [K, K] f64 matrices would take more than max_bytes, or on
 * out of memory. */
int hy_calib_init(struct hy_calib *c, const struct hy_model *m, uint64_t max_bytes);

/* Runs the calibration forward passes on m (then clears m's observer): `samples` windows of seq_len
 * tokens, window i = [bos] + ids[i * (seq_len - 1) ...] (no BOS when bos < 0: ids[i * seq_len ...]),
 * consecutive and non-overlapping from the start of ids; the MTP layer (if loaded) runs over each
 * window too. Fails when ids hold fewer tokens than one window; fewer windows than asked are run when
 * the text is short (c->samples says how many). Turns each g into the mean. Returns 0 or -1. */
int hy_calib_run(struct hy_calib *c, struct hy_model *m, const int32_t *ids, int64_t n_ids, int32_t bos,
                 int32_t samples, int32_t seq_len);

/* The mean x x^T [K, K] for module (see above), or NULL when the module has no statistics (not a
 * quantizable linear, or an expert no token was routed to). *K and *rows (may be NULL) get the width
 * and the rows seen. Owned by c. */
const double *hy_calib_hessian(const struct hy_calib *c, const char *module, int64_t *K, int64_t *rows);

void hy_calib_free(struct hy_calib *c);

#endif
