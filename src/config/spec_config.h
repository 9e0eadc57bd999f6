/* spec_config.h - speculative decoding settings: vLLM's --speculative-config (method "mtp",
 * num_speculative_tokens) plus hyinfer's draft gate (docs/speculative.md).
 *
 * JSON form (vLLM): {"method": "mtp", "num_speculative_tokens": 3, "draft_p_min": 0.6,
 * "gate": "auto", "mtp_zero_pos0": false}; dotted CLI form: --speculative-config.KEY VALUE for the
 * same keys. The YAML job sets num_speculative_tokens from model_config.next_n.
 */
#ifndef HY_CONFIG_SPEC_CONFIG_H
#define HY_CONFIG_SPEC_CONFIG_H

#include <stdint.h>

#define HY_SPEC_MAX_TOKENS 8 /* most drafts per step (num_speculative_tokens 0..8, 0 = off) */

struct hy_spec_config {
    int32_t num_speculative_tokens; /* 0: off; 1..HY_SPEC_MAX_TOKENS: MTP layer chained that many times */
    float draft_p_min;              /* [0, 1]: draft only while the MTP's top probability is >= this
                                       (llama.cpp's --draft-p-min); default 0.6 */
    int gate;                       /* 1 (default, "auto"): fall back to plain decode while measured decode
                                       tokens/s with drafts is below that without; 0 ("off"): always draft */
    int mtp_zero_pos0;              /* 1: zero the MTP token embedding at position 0 (vLLM's hy_v3_mtp);
                                       0 (default): the real embedding, as training and llama.cpp */
};

/* Off, draft_p_min 0.6, gate on, real embedding at position 0. */
void hy_spec_config_init(struct hy_spec_config *c);

/* Applies a --speculative-config JSON object to *c. Keys: method (must be "mtp"; required when the
 * object sets num_speculative_tokens), num_speculative_tokens, draft_p_min, gate ("auto" | "off" or a
 * boolean), mtp_zero_pos0 (boolean). Returns 0, or -1 with hy_err_msg() naming the bad key or value
 * (unknown keys are errors, as in vLLM). Validates the result. */
int hy_spec_config_parse_json(struct hy_spec_config *c, const char *json);

/* Sets one key from text (the dotted flag form): the keys of parse_json. Returns 0, or -1 with
 * hy_err_msg(). Call hy_spec_config_validate after the last key. */
int hy_spec_config_set(struct hy_spec_config *c, const char *key, const char *value);

/* Checks ranges: num_speculative_tokens in [0, HY_SPEC_MAX_TOKENS], draft_p_min in [0, 1]. Returns 0,
 * or -1 with hy_err_msg(). */
int hy_spec_config_validate(const struct hy_spec_config *c);

#endif
