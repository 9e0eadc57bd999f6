/* token_rules.h - per-request token bans and forced token sequences (tool_choice enforcement).
 *
 * A request may carry rules the engine applies to each logits row before sampling:
 *  - banned ids are never sampled (tool_choice "none" bans the <tool_calls> marker);
 *  - a force rule fires once, when the last known token (the prompt's last token counts) equals
 *    its trigger: its sequence is then emitted token by token, whatever the model prefers, and
 *    then, when it has alternatives, the model continues with exactly one of them, choosing freely
 *    among those that match what it has emitted so far (tool_choice "required" forces the marker
 *    and lets the model pick one of the tools' names; a named function forces its name;
 *    parallel_tool_calls false forces the end of the block after the first </tool_call>).
 * Forcing masks every other logit to -inf, so the sampler (any temperature) picks the forced id
 * and records it; logprobs still come from the raw model row. One rule runs at a time.
 */
#ifndef HY_SAMPLE_TOKEN_RULES_H
#define HY_SAMPLE_TOKEN_RULES_H

#include <stdint.h>

#define HY_RULES_MAX_BANNED 4
#define HY_RULES_MAX_FORCE 2
#define HY_RULES_MAX_SEQ 64
#define HY_RULES_MAX_ALTS 64      /* alternatives of one rule (a bit each in the state) */
#define HY_RULES_MAX_ALT_IDS 1024 /* their tokens, all together */

struct hy_force_rule {
    int32_t trigger;               /* token id whose appearance as the last token fires the rule */
    int32_t seq[HY_RULES_MAX_SEQ]; /* ids to emit, in order */
    int32_t n;                     /* 0..HY_RULES_MAX_SEQ (n + n_alts >= 1) */
    /* then one of n_alts sequences, chosen by the model: alternative k is
     * alt_ids[alt_off[k] .. alt_off[k + 1]) (non-empty; none may be a prefix of another) */
    int32_t n_alts;
    int32_t alt_off[HY_RULES_MAX_ALTS + 1];
    int32_t alt_ids[HY_RULES_MAX_ALT_IDS];
};

struct hy_token_rules {
    int32_t banned[HY_RULES_MAX_BANNED];
    int32_t n_banned;
    struct hy_force_rule force[HY_RULES_MAX_FORCE];
    int32_t n_force;
};

/* Where a request is in its rules (zero-initialised = nothing fired). */
struct hy_token_rules_state {
    int32_t active; /* index+1 of the running rule, 0 none */
    int32_t pos;    /* tokens of it emitted so far (seq, then the chosen alternative) */
    uint64_t alive; /* alternatives still matching (bit k) */
    uint32_t fired; /* bit i: rule i has fired */
};

/* 1 if r has no bans and no force rules (NULL counts as empty). */
int hy_token_rules_empty(const struct hy_token_rules *r);

/* Checks ids against [0, vocab), the counts against the limits and the alternatives' layout (no
 * empty alternative, none a prefix of another); 0 or -1 with hy_err_msg(). */
int hy_token_rules_validate(const struct hy_token_rules *r, int32_t vocab);

/* Feeds one known token: the prompt's last token once before generation, then every generated
 * token. Advances the running rule and fires a rule whose trigger this token is. */
void hy_token_rules_observe(const struct hy_token_rules *r, struct hy_token_rules_state *st, int32_t tok);

/* Masks logits[vocab] for the next token: only the forced id (or the next ids of the live
 * alternatives) stay finite while a rule runs, else banned ids become -inf. Returns the forced id,
 * or -1 when the model chooses. */
int32_t hy_token_rules_apply(const struct hy_token_rules *r, const struct hy_token_rules_state *st, float *logits,
                             int32_t vocab);

#endif
