/* quantize.h - offline weight quantization of a BF16 / F16 / F32 checkpoint (`hyinfer quantize`).
 *
 * Reads IN (config.json + safetensors, mmapped, one tensor at a time) and writes OUT/model.safetensors
 * in the layouts the loader reads (model/load_quant.h; spec hy3_architecture.md §5.2, §5.4), OUT/config.json
 * with a quantization_config added, and a copy of every other regular file of IN (tokenizer, templates...).
 * Quantized linears (module M):
 * - fp8:   M.weight F8_E4M3 [N, K] = RNE(w / s) saturated to +-448, M.weight_scale F32 [1],
 *          s = max|W| / 448 in f32 (1.0 for an all-zero matrix); quantization_config
 *          {"quant_method": "fp8", "activation_scheme": "dynamic", "ignored_layers": [...]} (Hy3-FP8 style,
 *          no input_scale).
 * - mxfp8: M.weight F8_E4M3 [N, K] + M.weight_scale U8 [N, ceil(K/32)] (E8M0), OCP rule (hy_mx_quantize_row).
 * - mxfp4: M.weight U8 [N, K/2] (E2M1, element 2j in the low nibble) + M.weight_scale U8 [N, ceil(K/32)].
 * - hybrid: routed experts mxfp4, every other targeted linear mxfp8 (Ascend mxfp_moe_w4a8_attn_w8a8).
 * MX outputs carry a compressed-tensors quantization_config (config_groups with regex targets).
 * - w8a8-dynamic (Ascend W8A8_DYNAMIC, msModelSlim's V1 layout, specs/ascend_w8a8.md §1-2): M.weight I8 [N, K]
 *          = RNE(w / s_n) clamped to [-127, 127], M.weight_scale F32 [N, 1] with s_n = max_k |w_nk| / 127
 *          (at least FLT_EPSILON), M.weight_offset F32 [N, 1] zeros; written as
 *          quant_model_weights-00001-of-00001.safetensors + quant_model_weights.safetensors.index.json +
 *          quant_model_description.json (every tensor's type: W8A8_DYNAMIC or FLOAT), config.json unchanged
 *          (no quantization_config, as the V1 saver).
 * - w8a8 / w8a8-mix (Ascend static W8A8 where vLLM-Ascend has a static method, spec §2): the same int8
 *          weight, and from the calibration text's activation range [lo, hi] (zero included) of the linear's
 *          input: M.input_scale F32 [1] s_x = (hi - lo) / 255, M.input_offset F32 [1] o = RNE(-lo / s_x) - 128,
 *          M.deq_scale F32 [N] = s_x * s_w[n], M.quant_bias I32 [N] = -o * sum_k q[n, k] (no weight_scale /
 *          weight_offset, as V1). w8a8: every targeted linear static except routed experts (vLLM-Ascend's MoE
 *          method is dynamic only), which stay W8A8_DYNAMIC; w8a8-mix (DeepSeek's "mixed" recipe): the
 *          attention linears static, every MLP / expert dynamic. Needs calib (--calib-data); a linear the
 *          calibration never reached is written W8A8_DYNAMIC (stats). The static tensors come after every
 *          weight in the file (quant_bias needs the rounded weight's row sums).
 * Targets: HY_QT_MOE = routed experts + shared expert, HY_QT_ATTN = q/k/v/o_proj + MTP eh_proj,
 * HY_QT_MLP = dense MLP gate/up/down, HY_QT_LM_HEAD = lm_head.weight, HY_QT_EMBED = model.embed_tokens.weight
 * (opt-in; the published checkpoints keep both BF16). They take the dtype's format for a non-routed linear,
 * except that static W8A8 (w8a8, w8a8-mix) writes them W8A8_DYNAMIC (no calibrated input range; the
 * embedding has no input at all); always round-to-nearest (no GPTQ statistics). With tie_word_embeddings
 * the one table is both: the two targets must come together. Norms, router, expert_bias, hy_v4's indexer,
 * hc_* and sinks are copied as they are.
 * Fused experts (mlp.experts.gate_up_proj / down_proj) are written per expert when quantized.
 * Rounding: round-to-nearest, or with calibration statistics GPTQ (gptq.h) in the same layouts and
 * with the same scales (int8 too).
 */
#ifndef HY_QUANTIZE_QUANTIZE_H
#define HY_QUANTIZE_QUANTIZE_H

#include "quantize/gptq.h"

#include <stddef.h>
#include <stdint.h>

enum hy_quant_dtype {
    HY_QD_FP8 = 0,
    HY_QD_MXFP8,
    HY_QD_MXFP4,
    HY_QD_HYBRID,
    HY_QD_W8A8_DYN,
    HY_QD_W8A8,
    HY_QD_W8A8_MIX
};

/* HY_QT_ALL: the default (the published checkpoints' set); lm_head and embed are opt-in. */
enum { HY_QT_MOE = 1, HY_QT_ATTN = 2, HY_QT_MLP = 4, HY_QT_ALL = 7, HY_QT_LM_HEAD = 8, HY_QT_EMBED = 16 };

struct hy_calib;

struct hy_quantize_opts {
    enum hy_quant_dtype dtype;
    unsigned targets;               /* HY_QT_* bits, non-zero */
    struct hy_calib *calib;         /* NULL: round-to-nearest; else GPTQ (quantize/gptq.h) with these
                                        statistics for every matrix that has them (quantize/calib.h: bound,
                                        planned here in file order, passes run as the matrices need them) */
    struct hy_gptq_opts gptq;       /* used with calib (its mx_scale is taken from mx_scale below) */
    enum hy_mx_scale_rule mx_scale; /* MX block-scale rule (formats.h); default HY_MX_SCALE_OCP */
    int no_gptq;                    /* with calib: round to nearest all the same (calib then only gives static
                                        W8A8's activation ranges) */
};

struct hy_quantize_stats {
    int64_t n_quant[8];        /* weight matrices written per enum hy_qformat (index HY_QF_FP8_TENSOR ...) */
    int64_t n_copied;          /* tensors copied unchanged */
    int64_t n_files;           /* other files copied */
    uint64_t bytes_in;         /* tensor data bytes of IN */
    uint64_t bytes_out;        /* size of OUT/model.safetensors */
    int64_t n_gptq;            /* matrices rounded by GPTQ (with calib) */
    int64_t n_gptq_rtn;        /* with calib, matrices left to round-to-nearest: no statistics (an expert no
                                calibration token was routed to) ... */
    int64_t n_gptq_indefinite; /* ... or (counted here, not in n_gptq_rtn) a Hessian indefinite after damping */
    double gptq_ratio_sum;     /* sum over the GPTQ matrices of objective(GPTQ) / objective(RTN) */
    int64_t n_gptq_factors;    /* H factorizations computed (matrices that share inputs share one) */
    int64_t n_gptq_coupled;    /* GPTQ matrices whose rows were rounded jointly per head (q_proj with attention
                                statistics, quantize/calib_attn.h) */
    int64_t n_gptq_few_tokens; /* GPTQ matrices whose statistics came from fewer tokens than K (rank-deficient H) */
    int64_t n_static_no_range; /* w8a8 / w8a8-mix: linears meant to be static W8A8 whose input the calibration
                                never reached (written W8A8_DYNAMIC instead; counted in n_quant[HY_QF_W8A8_DYN]) */
    double seconds;
};

/* "fp8" | "mxfp8" | "mxfp4" | "hybrid" | "w8a8-dynamic" | "w8a8" | "w8a8-mix" -> *out; -1 with hy_err_msg()
 * otherwise. */
int hy_quant_dtype_parse(const char *s, enum hy_quant_dtype *out);

/* "moe" | "attn-linear" | "mlp" | "lm_head" | "embed" -> HY_QT_* bit; -1 with hy_err_msg() otherwise. */
int hy_quant_target_parse(const char *s, unsigned *bit);

/* The words of the HY_QT_* bits in mask, each after a space (" moe attn-linear mlp"), into buf (cap bytes,
 * cap >= 1; truncated to fit, always terminated). */
void hy_quant_targets_str(unsigned mask, char *buf, size_t cap);

/* Quantizes in_dir into out_dir (which must not exist, or be an empty directory). Everything is written
 * to a temporary sibling directory and renamed into place at the end; on error nothing is left behind.
 * Returns 0 and *st, or -1 with hy_err_msg() (IN not a checkpoint, IN already quantized, a targeted
 * tensor that is not BF16/F16/F32 or holds NaN/Inf, odd K for mxfp4, lm_head without embed or the reverse
 * on a tied checkpoint, OUT not empty, I/O errors). */
int hy_quantize_model(const char *in_dir, const char *out_dir, const struct hy_quantize_opts *o,
                      struct hy_quantize_stats *st);

#endif
