/* token_rules.h - per-request token bans and forced token sequences (tool_choice enforcement).
 *
 * A request may carry rules the engine applies to each logits row before sampling:
 *  - banned ids are never sampled (tool_choice "none" bans the <tool_calls> marker);
 *  - a force rule fires once, when the last known token (prompt or output) equals its trigger:
 *    its sequence is then emitted token by token, whatever the model prefers (tool_choice
 *    "required" / a named function force the marker and the name after </think>;
 *    parallel_tool_calls false forces the end of the block after the first </tool_call>).
 * Forcing masks every other logit to -inf, so the sampler (any temperature) picks the forced id
 * and records it; logprobs still come from the raw model row.
 */
#ifndef HY_SAMPLE_TOKEN_RULES_H
#define HY_SAMPLE_TOKEN_RULES_H

#include <stdint.h>

#define HY_RULES_MAX_BANNED 4
#define HY_RULES_MAX_FORCE 2
#define HY_RULES_MAX_SEQ 64

struct hy_force_rule {
    int32_t trigger;               /* token id whose appearance as the last token fires the rule */
    int32_t seq[HY_RULES_MAX_SEQ]; /* ids to emit, in order */
    int32_t n;                     /* 1..HY_RULES_MAX_SEQ */
};

struct hy_token_rules {
    int32_t banned[HY_RULES_MAX_BANNED];
    int32_t n_banned;
    struct hy_force_rule force[HY_RULES_MAX_FORCE];
    int32_t n_force;
};

/* Where a request is in its rules (zero-initialised = nothing fired). */
struct hy_token_rules_state {
    int32_t active; /* index+1 of the rule being emitted, 0 none */
    int32_t pos;    /* next index in its seq */
    uint32_t fired; /* bit i: rule i has fired */
};

/* 1 if r has no bans and no force rules (NULL counts as empty). */
int hy_token_rules_empty(const struct hy_token_rules *r);

/* Checks ids against [0, vocab) and the counts against the limits; 0 or -1 with hy_err_msg(). */
int hy_token_rules_validate(const struct hy_token_rules *r, int32_t vocab);

/* Before sampling the token that follows `last`: masks logits[vocab] so that only the forced id
 * stays finite (a rule is being emitted or fires now; the state advances, assuming that id is the
 * one sampled), else sets banned ids to -inf. Returns the forced id or -1. */
int32_t hy_token_rules_apply(const struct hy_token_rules *r, struct hy_token_rules_state *st, int32_t last,
                             float *logits, int32_t vocab);

#endif
