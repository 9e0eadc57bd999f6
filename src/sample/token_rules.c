/* token_rules.c - token bans and forced sequences applied to a logits row. */
#include "sample/token_rules.h"

#include "base/err.h"

#include <math.h>
#include <stddef.h>

int hy_token_rules_empty(const struct hy_token_rules *r)
{
    return !r || (r->n_banned == 0 && r->n_force == 0);
}

int hy_token_rules_validate(const struct hy_token_rules *r, int32_t vocab)
{
    if (!r)
        return 0;
    if (r->n_banned < 0 || r->n_banned > HY_RULES_MAX_BANNED || r->n_force < 0 || r->n_force > HY_RULES_MAX_FORCE)
        return hy_err_set("token rules: %d banned ids / %d force rules (at most %d / %d)", (int)r->n_banned,
                          (int)r->n_force, HY_RULES_MAX_BANNED, HY_RULES_MAX_FORCE);
    for (int32_t i = 0; i < r->n_banned; i++)
        if (r->banned[i] < 0 || r->banned[i] >= vocab)
            return hy_err_set("token rules: banned id %d outside the vocabulary (%d)", (int)r->banned[i], (int)vocab);
    for (int32_t i = 0; i < r->n_force; i++) {
        const struct hy_force_rule *f = &r->force[i];
        if (f->n < 1 || f->n > HY_RULES_MAX_SEQ)
            return hy_err_set("token rules: forced sequence of %d tokens (1..%d)", (int)f->n, HY_RULES_MAX_SEQ);
        if (f->trigger < 0 || f->trigger >= vocab)
            return hy_err_set("token rules: trigger id %d outside the vocabulary (%d)", (int)f->trigger, (int)vocab);
        for (int32_t k = 0; k < f->n; k++)
            if (f->seq[k] < 0 || f->seq[k] >= vocab)
                return hy_err_set("token rules: forced id %d outside the vocabulary (%d)", (int)f->seq[k], (int)vocab);
    }
    return 0;
}

int32_t hy_token_rules_apply(const struct hy_token_rules *r, struct hy_token_rules_state *st, int32_t last,
                             float *logits, int32_t vocab)
{
    if (hy_token_rules_empty(r))
        return -1;
    if (!st->active)
        for (int32_t i = 0; i < r->n_force; i++)
            if (!(st->fired >> i & 1) && r->force[i].trigger == last) {
                st->fired |= 1u << i;
                st->active = i + 1;
                st->pos = 0;
                break;
            }
    if (st->active) {
        const struct hy_force_rule *f = &r->force[st->active - 1];
        const int32_t tok = f->seq[st->pos++];
        if (st->pos >= f->n)
            st->active = 0;
        const float keep = logits[tok];
        for (int32_t v = 0; v < vocab; v++)
            logits[v] = -INFINITY;
        logits[tok] = isfinite(keep) ? keep : 0.0f;
        return tok;
    }
    for (int32_t i = 0; i < r->n_banned; i++)
        logits[r->banned[i]] = -INFINITY;
    return -1;
}
