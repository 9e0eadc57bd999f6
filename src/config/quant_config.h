/* quant_config.h - config.json `quantization_config` -> which linear module is stored in which format.
 *
 * Two families are understood (spec hy3_architecture.md §1, §5.2, §5.4):
 * - quant_method "fp8" (Hy3-FP8): every linear is F8_E4M3 with a per-tensor `weight_scale`, except the
 *   modules named in `ignored_layers` (also read: `ignore`, `ignore_layers`, `modules_to_not_convert`).
 *   `activation_scheme` ("static" | "dynamic") is recorded; activations are never quantized here (W8A16).
 *   `weight_block_size` (block fp8, e.g. [128, 128]) is rejected.
 * - quant_method "compressed-tensors": `config_groups` {name: {targets, weights, input_activations}} and
 *   a top-level `ignore` list. Weight formats understood: type "float" with num_bits 8 or 4 and a [1, 32]
 *   block given as block_structure [1, 32], weight_block_size [1, 32], or strategy "group" + group_size
 *   32 (MXFP8 / MXFP4, E8M0 scales); type "float" num_bits 8 strategy "tensor" (per-tensor FP8).
 *   `input_activations` is recorded as text, unused.
 * - Ascend (msModelSlim, vLLM-Ascend `--quantization ascend`; specs/ascend_w8a8.md): the model directory has
 *   `quant_model_description.json` (config.json then has no quantization_config): one type per stored tensor
 *   name ("FLOAT", "W8A8", "W8A8_DYNAMIC", ...) plus globals. A linear's format is the type of "<module>.weight";
 *   FLOAT = unquantized. Parsed by quant_ascend.c, which refuses (naming the tensor and its type) every type
 *   other than FLOAT / W8A8 / W8A8_DYNAMIC, C8 / FA / indexer / QuaRot globals, smoothing norm biases, and
 *   fused vLLM groups (q/k/v, gate/up, q_a/kv_a, a layer's experts) whose members disagree.
 * Module names are those of the linear without ".weight" ("model.layers.3.self_attn.q_proj"; per-expert
 * "model.layers.3.mlp.experts.5.gate_proj"; fused experts "model.layers.3.mlp.experts.gate_up_proj").
 * A target or ignore entry matches a module when it is the exact name, a dotted prefix of it
 * ("model.layers.80" matches every module of layer 80), "re:<regex>" whose PCRE2 match starts at the
 * beginning of the name (Python re.match semantics, as compressed-tensors and vLLM use), or the class
 * name "Linear" (targets only; every module here is a Linear).
 */
#ifndef HY_CONFIG_QUANT_CONFIG_H
#define HY_CONFIG_QUANT_CONFIG_H

#include <stdint.h>

enum hy_qformat {
    HY_QF_NONE = 0,   /* plain F32 / F16 / BF16 */
    HY_QF_FP8_TENSOR, /* F8_E4M3 + one per-tensor scale (F32 / BF16 / F16) */
    HY_QF_MXFP8,      /* F8_E4M3 [N, K] + E8M0 [N, ceil(K/32)] */
    HY_QF_MXFP4,      /* U8 [N, K/2] (E2M1 pairs, low nibble first) + E8M0 [N, ceil(K/32)] */
    HY_QF_W8A8_DYN,   /* Ascend W8A8_DYNAMIC: I8 [N, K] + weight_scale [N, 1] (+ zero weight_offset) */
    HY_QF_W8A8_STATIC /* Ascend W8A8: I8 [N, K] + input_scale / input_offset [1] + deq_scale / quant_bias [N] */
};

/* 1 for the int8 per-row weight formats (Ascend W8A8, dynamic or static: the weight side is the same). */
static inline int hy_qformat_is_int8(enum hy_qformat f)
{
    return f == HY_QF_W8A8_DYN || f == HY_QF_W8A8_STATIC;
}

enum hy_quant_method { HY_QM_NONE = 0, HY_QM_FP8, HY_QM_COMPRESSED_TENSORS, HY_QM_ASCEND };

struct hy_quant_pattern {
    char *text; /* as written in config.json */
    void *re;   /* pcre2_code * for "re:" entries, else NULL */
};

struct hy_quant_list {
    struct hy_quant_pattern *v;
    int n;
};

struct hy_quant_group {
    char *name; /* config_groups key ("fp8" for quant_method fp8) */
    struct hy_quant_list targets;
    enum hy_qformat format;
    char act[96];      /* input_activations summary ("" when absent); not used */
    int64_t n_tensors; /* filled by the loader: weight tensors bound in this format */
};

struct hy_quant_config {
    enum hy_quant_method method;
    char activation_scheme[16]; /* fp8: "static" / "dynamic" / "" */
    struct hy_quant_list ignore;
    struct hy_quant_group *groups;
    int n_groups;
    int64_t n_plain; /* filled by the loader: linear weights left unquantized */
    /* Ascend only */
    void *desc;                /* json_t object: stored tensor name -> type string (the description's entries) */
    char model_quant_type[32]; /* the description's model_quant_type ("" when absent) */
    int kv_c8;                 /* kv_cache_type / kv_quant_type "C8": int8 KV scales ship per layer
                                  (model/kv_scales.c maps them onto the FP8 KV cache) */
    void **owned;              /* buffers the loader made for this config (converted scales); freed with it */
    int n_owned, cap_owned;
};

/* The description file that marks an Ascend-quantized checkpoint (vLLM-Ascend's MODELSLIM_CONFIG_FILENAME). */
#define HY_ASCEND_DESCRIPTION "quant_model_description.json"

/* Parses <model_dir>/quant_model_description.json when present (HY_QM_ASCEND; a quantization_config in
 * config.json as well is refused), else <model_dir>/config.json's quantization_config into *qc (method
 * HY_QM_NONE when absent).
 * Returns 0, or -1 with hy_err_msg() ("DIR/config.json: quantization_config.quant_method \"awq\" is not
 * supported ..."). Free with hy_quant_config_free (also after an error). */
int hy_quant_config_load(const char *model_dir, struct hy_quant_config *qc);

/* Same from a JSON text of the quantization_config object itself (tests). */
int hy_quant_config_parse_text(const char *json_text, struct hy_quant_config *qc);

void hy_quant_config_free(struct hy_quant_config *qc);

/* Format of module `module` (see the header comment for names); *group receives the group index
 * (-1 for HY_QF_NONE; HY_QGROUP_UNDESCRIBED for a module an Ascend description does not list). Returns the format, or -1 with hy_err_msg() when two groups of equal priority
 * (exact name > regex / prefix > class name) match the module. */
int hy_quant_config_lookup(const struct hy_quant_config *qc, const char *module, int *group);

/* hy_quant_config_lookup's group for a module an Ascend description does not list (format HY_QF_NONE). */
#define HY_QGROUP_UNDESCRIBED (-2)

/* The Ascend type of stored tensor `tensor` ("FLOAT", "W8A8", ...), NULL when not listed or not Ascend. */
const char *hy_quant_ascend_type(const struct hy_quant_config *qc, const char *tensor);

/* fn(tensor, type, ctx) for every tensor entry of an Ascend description; stops at and returns -1 on the
 * first non-zero return. */
int hy_quant_ascend_foreach(const struct hy_quant_config *qc,
                            int (*fn)(const char *tensor, const char *type, void *ctx), void *ctx);

/* Keeps p (malloc'd) until hy_quant_config_free. Returns 0, or -1 (p freed) when out of memory. */
int hy_quant_config_own(struct hy_quant_config *qc, void *p);

/* "none", "fp8", "mxfp8", "mxfp4", "w8a8-dynamic", "w8a8". */
const char *hy_qformat_name(enum hy_qformat f);

/* "none", "fp8", "compressed-tensors", "ascend". */
const char *hy_quant_method_name(enum hy_quant_method m);

#endif
