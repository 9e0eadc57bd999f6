/* load_quant.h - binds one linear weight (plain or quantized) from a checkpoint, as config.json's
 * quantization_config says (config/quant_config.h; spec hy3_architecture.md §5.2, §5.4).
 *
 * On-disk layouts, for module M (name without ".weight"):
 * - plain:      M.weight F32 / F16 / BF16 [N, K]; no M.weight_scale.
 * - fp8:        M.weight F8_E4M3 [N, K]; M.weight_scale F32 / BF16 / F16 with one element (shape [], [1],
 *               [1, 1]), finite and >= 0; optional M.input_scale (one finite element > 0): checked,
 *               not used (activations are not quantized: W8A16).
 * - mxfp8:      M.weight F8_E4M3 [N, K]; M.weight_scale U8 or F8_E8M0 [N, ceil(K/32)], no byte 255.
 * - mxfp4:      M.weight (or M.weight_packed) U8 [N, K/2], K even; M.weight_scale as mxfp8.
 * Fused experts (one tensor for all E experts, HF spelling "mlp.experts.gate_up_proj" [E, 2I, H] and
 * "mlp.experts.down_proj" [E, H, I]): the tensor is named by the module itself, its scale is
 * "<name>_scale": fp8 [E] or [E, 1] (one scale per expert matrix), MX [E, rows, ceil(cols/32)]; mxfp4
 * data [E, rows, cols/2] U8.
 * Every tensor points into the mapping (no copy); the per-tensor fp8 scale is read into the struct.
 */
#ifndef HY_MODEL_LOAD_QUANT_H
#define HY_MODEL_LOAD_QUANT_H

#include "config/quant_config.h"
#include "model/safetensors.h"
#include "quant/tensor.h"

#include <stdint.h>

/* Binds module `module` as a [rows, cols] matrix in the format qc assigns it (qc->groups[g].n_tensors
 * or qc->n_plain counted). lenient = 1 accepts a plain float weight without any scale where qc says fp8
 * (used for the MTP layer, whose quantization in Hy3-FP8 is unconfirmed, spec §9.4; logged once).
 * Returns 0, or -1 with hy_err_msg() naming the tensor and the problem (missing weight or scale, wrong
 * dtype for the configured format, wrong shape, NaN / negative scale, E8M0 byte 255, odd K for mxfp4,
 * a quantized tensor the config does not quantize). */
int hy_qload_linear(struct hy_quant_config *qc, const struct hy_checkpoint *ck, const char *module, int64_t rows,
                    int64_t cols, int lenient, struct hy_tensor *out);

/* Binds a fused stack: tensor `name` [E, rows, cols] (module name = `name`), out[E] one matrix per
 * expert. Same formats and errors as hy_qload_linear. */
int hy_qload_stack(struct hy_quant_config *qc, const struct hy_checkpoint *ck, const char *name, int64_t E,
                   int64_t rows, int64_t cols, int lenient, struct hy_tensor *out);

/* Rows [r0, r0 + n) of t as a tensor of its own (same format; data and scales offset). */
struct hy_tensor hy_tensor_rows(const struct hy_tensor *t, int64_t r0, int64_t n);

/* Ascend checkpoints: every tensor the description lists exists, and every int8 tensor is listed (a float
 * one may be left out: FLOAT); a FLOAT entry is stored as a float. 0, or -1 with hy_err_msg() naming the
 * tensor. Nothing for other methods. */
int hy_qload_check_description(const struct hy_quant_config *qc, const struct hy_checkpoint *ck);

#endif
