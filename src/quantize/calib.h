/* calib.h - calibration statistics for GPTQ (quantize/gptq.h): H = mean of x x^T of the inputs x of
 * every quantizable linear layer, collected by running the model's forward pass over calibration
 * text (the model's observer hook, model.h); and the inputs' ranges for static W8A8 (hy_calib_ranges).
 * hy_v3 and hy_v4 (its MLA linears: q_a / kv_a / linear_gate share one input; MTP model.mtp_layers.0).
 *
 * Linears that read the same input share one accumulator: q/k/v_proj (the normed attention input),
 * gate/up_proj of the dense MLP, of each routed expert and of the shared expert. o_proj, each
 * down_proj and the MTP eh_proj have their own. A routed expert only sees the tokens routed to it;
 * one never chosen has no statistics (its linears fall back to round-to-nearest). Statistics come from
 * the unquantized model (not layer-sequentially from the partly quantized one, as llm-compressor's
 * pipeline does).
 *
 * Memory: the statistics of all groups can exceed RAM (f64 [K, K] per group; a 4-layer Hy3-shaped model
 * needs 18 GiB). They are collected in passes: hy_calib_plan cuts the groups, in the order the quantizer
 * will ask for them, into passes of at most max_bytes; hy_calib_get runs the calibration windows again
 * for each pass it reaches, observing only that pass's groups, and frees the previous pass's
 * statistics. A pass runs only the layers from its first group's to its last group's (the MTP layer,
 * after the rest of the model, when it has MTP groups): it starts from a checkpoint of every window's
 * residual stream, which the previous pass saved entering the layer where this pass starts (plus
 * samples x seq_len x hidden_size f32 of memory, allocated when a second pass exists; a pass that
 * starts before the checkpoint starts from the embeddings). So a layer runs once per pass boundary
 * inside it at most, not once per later pass. The forward passes are deterministic and a layer's
 * output is a function of its input stream only, so the statistics, and GPTQ's output, are bitwise
 * the same whatever the number of passes.
 * Module names are the checkpoint's (`model.layers.L.self_attn.q_proj`, `...mlp.experts.E.gate_proj`,
 * `...mlp.shared_mlp.up_proj`; `shared_experts` is accepted as the other Hy3 spelling).
 */
#ifndef HY_QUANTIZE_CALIB_H
#define HY_QUANTIZE_CALIB_H

#include "model/model.h"
#include "quantize/calib_attn.h"
#include "quantize/calib_gram.h"

#include <stdint.h>

struct hy_calib_acc {
    const struct hy_tensor *w; /* the linear whose input is observed (the first of the group) */
    int64_t K;                 /* input width */
    double *g;                 /* [K, K] sum of x x^T, then the mean; NULL outside its pass */
    int64_t n;                 /* input rows seen */
    int32_t pass;              /* hy_calib_plan's pass, -1 when no asked-for module reads it */
    int32_t layer;             /* its decoder layer (num_hidden_layers: the MTP layer) */
    int32_t qk_heads;          /* > 0: q_proj of a QK-norm layer with this many heads, its tokens
                                         weighted (hy_calib_qk_weights); 0: every token alike */
    int32_t routed;            /* 1: a routed expert's group, its tokens weighted by
                                         hy_calib_routing_weights */
    float x_min, x_max;        /* hy_calib_ranges: the smallest / largest input element seen */
    int64_t range_rows;        /* hy_calib_ranges: input rows seen (0: none, the range is unset) */
};

/* q_proj's attention statistics of one layer (calib_attn.h), with HY_CALIB_ATTN. */
struct hy_calib_attn_stat {
    const struct hy_tensor *wq, *wk; /* the layer's q_proj / k_proj (the observer's lookup) */
    int32_t acc;                     /* q_proj's accumulator (its pass), -1 when q_proj is not quantizable */
    double *g;                       /* [n_heads, head_dim, head_dim] while its pass is resident, else NULL */
    int64_t windows;                 /* sequences added */
};

struct hy_calib_name {
    char module[96];
    int32_t acc; /* index into acc */
};

struct hy_calib {
    struct hy_calib_acc *acc; /* sorted by w (the observer's lookup) */
    int32_t n_acc;
    struct hy_calib_name *names; /* sorted by module */
    int32_t n_names;
    uint64_t max_bytes; /* statistics resident at once (one pass) */
    /* hy_calib_bind */
    struct hy_model *m; /* borrowed */
    int32_t *ids;       /* owned copy of the token ids the windows read */
    int32_t bos, seq_len;
    int32_t samples; /* windows each pass runs (fewer than asked when the text is short) */
    /* hy_calib_plan / hy_calib_get */
    int32_t n_passes;
    int32_t planned;         /* groups read by the planned modules */
    uint64_t planned_bytes;  /* their statistics' bytes */
    uint64_t pass_bytes_max; /* the largest pass's statistics */
    int32_t cur_pass;        /* resident pass, -1 none */
    float *resid;            /* [samples, seq_len, hidden_size] streams entering resid_layer, or NULL */
    int32_t resid_layer;     /* -1: no checkpoint */
    int64_t layers_run;      /* decoder layers (MTP: 1) run per window, summed over the passes */
    int32_t passes_run;
    double seconds;       /* spent in calibration forward passes */
    double *pack;         /* the observer's f64 copy of one chunk of inputs, while a pass runs */
    double *wt_buf;       /* the observer's scratch for weighted groups, while a pass runs: [seq_len]
                                         f64 token weights, then [seq_len, K] f32 */
    const float *route_w; /* while a routed expert runs: its tokens' routing weights [route_n] */
    int64_t route_n;
    struct hy_calib_attn_stat *attn; /* [layers incl. MTP] with HY_CALIB_ATTN, else NULL */
    int32_t n_attn;
    int64_t attn_stride; /* hy_calib_attn_g_add's query stride: seq_len / 16, at least 1 */
    float *q_stash;      /* the observer's copy of the last q_proj output [seq_len, n_heads * head_dim] */
    int32_t stash_layer; /* whose it is, -1 none */
    int obs_failed;      /* the observer hit an error (hy_err_msg()); run_pass fails the pass */
    int ranges;          /* hy_calib_ranges' pass is running: the observer records ranges only */
    int32_t ranges_run;  /* hy_calib_ranges ran (its windows: samples) */
    int64_t stash_T;
};

/* The QK-norm weight of each token (a prototype: experiments/gptq_qnorm_proto.py, README "QK-norm-aware
 * weighting"): q [T, n_heads * head_dim] f32, the q_proj outputs of the T tokens before the per-head RMSNorm
 * (spec §2.2), which sends an output error dq_h to the attention scaled by 1 / rms(q_h). w[t] = mean over
 * heads of 1 / (mean_d q[t, h, d]^2 + eps), f64. */
void hy_calib_qk_weights(const float *q, int64_t T, int64_t n_heads, int64_t head_dim, float eps, double *w);

/* The routing weight of each of a routed expert's T tokens: w[t] = route_w[t]^2 (f64), route_w [T] the
 * weights the forward pass multiplies the expert's output by (after renormalization and
 * router_scaling_factor, spec §3): an error in any of the expert's linears reaches the residual stream
 * scaled by route_w[t], so GPTQ's objective sum_t |dW x_t|^2 weights token t by its square. */
void hy_calib_routing_weights(const float *route_w, int64_t T, double *w);

/* g [K, K] += sum_t w[t] x_t x_t^T as hy_calib_gram_add on the rows sqrt(w[t]) x_t (f32, written to xs
 * [T, K], caller-owned); w from hy_calib_qk_weights or hy_calib_routing_weights. */
void hy_calib_weighted_gram_add(double *g, int64_t K, const float *x, int64_t T, const double *w, float *xs,
                                double *pack);

/* hy_calib_init's flags. */
enum {
    HY_CALIB_QK_NORM = 1, /* in layers with QK-norm, q_proj gets its own group with QK-norm-weighted tokens
                             and k/v_proj share another (else q/k/v share one group) */
    HY_CALIB_ROUTING = 2, /* routed experts' tokens weighted by their squared routing weights */
    HY_CALIB_ATTN = 4,    /* q_proj's attention statistics per head (calib_attn.h; hy_calib_get_attn) */
};

/* Sets up the accumulators of m's quantizable linears (main layers and MTP), none allocated yet;
 * max_bytes bounds the statistics resident at once (the attention statistics, n_heads x head_dim^2
 * doubles per layer, are not counted); weighting: HY_CALIB_* flags (`hyinfer quantize` sets all three
 * unless --no-qk-norm-weighting / --no-routing-weighting / --no-attention-hessian). -1 with
 * hy_err_msg() on out of memory. */
int hy_calib_init(struct hy_calib *c, const struct hy_model *m, uint64_t max_bytes, unsigned weighting);

/* Binds the calibration forward passes: `samples` windows of seq_len tokens on m, window i = [bos] +
 * ids[i * (seq_len - 1) ...] (no BOS when bos < 0: ids[i * seq_len ...]), consecutive and
 * non-overlapping from the start of ids (the ids they read are copied); the MTP layer (if loaded) runs over each window too.
 * m must outlive c's passes. Fails (-1, hy_err_msg()) on a seq_len outside [2, max_position_embeddings],
 * samples < 1, ids out of the vocabulary, fewer ids than one window; fewer windows than asked are run
 * when the text is short (c->samples says how many). Runs nothing yet. */
int hy_calib_bind(struct hy_calib *c, struct hy_model *m, const int32_t *ids, int64_t n_ids, int32_t bos,
                  int32_t samples, int32_t seq_len);

/* Cuts the groups read by modules[0..n) (module names as below, in the order hy_calib_get will be asked
 * for them; unknown names are skipped) into passes of at most max_bytes each, never between two requests
 * of one group (the groups asked for in between join its pass). Groups no module reads are never
 * collected. Fails (-1) when one group, with the groups asked for among its requests, exceeds
 * max_bytes, naming the first module and the sizes. */
int hy_calib_plan(struct hy_calib *c, const char *const *modules, int32_t n);

/* The mean x x^T [K, K] for module into *h (owned by c, valid until the next hy_calib_get), or *h = NULL
 * when the module has no statistics (not planned, not a quantizable linear, or an expert no token was
 * routed to). Runs the module's pass first when it is not the resident one. *K, *rows and *group (may be
 * NULL) get the width, the rows seen and the group's index (the same for modules that share inputs).
 * Returns 0, or -1 with hy_err_msg() when a pass fails (out of memory, a forward error). */
int hy_calib_get(struct hy_calib *c, const char *module, const double **h, int64_t *K, int64_t *rows, int32_t *group);

/* q_proj's attention statistics G for module (`model.layers.L.self_attn.q_proj`, after hy_calib_get of
 * it ran its pass): *g [n_heads, head_dim, head_dim] (owned by c, valid as hy_calib_get's) and
 * *group_rows = head_dim, or *g = NULL (not collected: no HY_CALIB_ATTN, another module, no window). */
void hy_calib_get_attn(const struct hy_calib *c, const char *module, const double **g, int64_t *group_rows);

/* Activation ranges for static int8 quantization (Ascend W8A8, specs/ascend_w8a8.md §2): runs every
 * calibration window once through the whole model (and MTP), recording for every group the smallest
 * and largest element of its inputs (no x x^T statistics; a resident GPTQ pass is dropped first, so call
 * it before hy_calib_plan's passes run). Returns 0, or -1 with hy_err_msg() on a forward error. */
int hy_calib_ranges(struct hy_calib *c);

/* The input range of module after hy_calib_ranges: 1 with *lo / *hi set, 0 when the module has none
 * (not a quantizable linear, ranges not run, an expert no calibration token was routed to, or a
 * non-finite range). */
int hy_calib_get_range(const struct hy_calib *c, const char *module, float *lo, float *hi);

void hy_calib_free(struct hy_calib *c);

#endif
