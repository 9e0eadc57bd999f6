/* token_rules.c - token bans, forced sequences and constrained alternatives on a logits row. */
#include "sample/token_rules.h"

#include "base/err.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

int hy_token_rules_empty(const struct hy_token_rules *r)
{
    return !r || (r->n_banned == 0 && r->n_force == 0);
}

static int alt_len(const struct hy_force_rule *f, int32_t k)
{
    return f->alt_off[k + 1] - f->alt_off[k];
}

static int check_alts(const struct hy_force_rule *f, int32_t vocab)
{
    if (f->n_alts < 0 || f->n_alts > HY_RULES_MAX_ALTS)
        return hy_err_set("token rules: %d alternatives (at most %d)", (int)f->n_alts, HY_RULES_MAX_ALTS);
    if (f->n_alts && (f->alt_off[0] != 0 || f->alt_off[f->n_alts] > HY_RULES_MAX_ALT_IDS))
        return hy_err_set("token rules: alternatives hold %d ids (at most %d)", (int)f->alt_off[f->n_alts],
                          HY_RULES_MAX_ALT_IDS);
    for (int32_t k = 0; k < f->n_alts; k++) {
        if (alt_len(f, k) < 1)
            return hy_err_set("token rules: alternative %d is empty", (int)k);
        for (int32_t i = f->alt_off[k]; i < f->alt_off[k + 1]; i++)
            if (f->alt_ids[i] < 0 || f->alt_ids[i] >= vocab)
                return hy_err_set("token rules: alternative id %d outside the vocabulary (%d)", (int)f->alt_ids[i],
                                  (int)vocab);
        for (int32_t j = 0; j < f->n_alts; j++) {
            const int a = alt_len(f, k), b = alt_len(f, j);
            int same = j != k && a <= b;
            for (int i = 0; same && i < a; i++)
                same = f->alt_ids[f->alt_off[k] + i] == f->alt_ids[f->alt_off[j] + i];
            if (same)
                return hy_err_set("token rules: alternative %d is a prefix of alternative %d", (int)k, (int)j);
        }
    }
    return 0;
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
        if (f->n < 0 || f->n > HY_RULES_MAX_SEQ || (f->n == 0 && f->n_alts == 0))
            return hy_err_set("token rules: forced sequence of %d tokens (1..%d, or 0 with alternatives)", (int)f->n,
                              HY_RULES_MAX_SEQ);
        if (f->trigger < 0 || f->trigger >= vocab)
            return hy_err_set("token rules: trigger id %d outside the vocabulary (%d)", (int)f->trigger, (int)vocab);
        for (int32_t k = 0; k < f->n; k++)
            if (f->seq[k] < 0 || f->seq[k] >= vocab)
                return hy_err_set("token rules: forced id %d outside the vocabulary (%d)", (int)f->seq[k], (int)vocab);
        if (check_alts(f, vocab))
            return -1;
    }
    return 0;
}

static uint64_t all_alts(int32_t n)
{
    return n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
}

void hy_token_rules_observe(const struct hy_token_rules *r, struct hy_token_rules_state *st, int32_t tok)
{
    if (hy_token_rules_empty(r))
        return;
    if (st->active) {
        const struct hy_force_rule *f = &r->force[st->active - 1];
        const int32_t p = st->pos++;
        if (p >= f->n) { /* choosing: keep the alternatives this token continues */
            const int32_t a = p - f->n;
            int done = 0;
            for (int32_t k = 0; k < f->n_alts; k++) {
                if (!(st->alive >> k & 1))
                    continue;
                if (a >= alt_len(f, k) || f->alt_ids[f->alt_off[k] + a] != tok)
                    st->alive &= ~((uint64_t)1 << k);
                else if (a + 1 == alt_len(f, k))
                    done = 1;
            }
            if (done || !st->alive)
                st->active = 0;
        } else if (st->pos == f->n) {
            if (f->n_alts)
                st->alive = all_alts(f->n_alts);
            else
                st->active = 0;
        }
        if (st->active)
            return;
    }
    for (int32_t i = 0; i < r->n_force; i++)
        if (!(st->fired >> i & 1) && r->force[i].trigger == tok) {
            st->fired |= 1u << i;
            st->active = i + 1;
            st->pos = 0;
            st->alive = r->force[i].n ? 0 : all_alts(r->force[i].n_alts);
            return;
        }
}

int32_t hy_token_rules_apply(const struct hy_token_rules *r, const struct hy_token_rules_state *st, float *logits,
                             int32_t vocab)
{
    if (hy_token_rules_empty(r))
        return -1;
    if (!st->active) {
        for (int32_t i = 0; i < r->n_banned; i++)
            logits[r->banned[i]] = -INFINITY;
        return -1;
    }
    const struct hy_force_rule *f = &r->force[st->active - 1];
    if (st->pos < f->n) {
        const int32_t tok = f->seq[st->pos];
        const float keep = logits[tok];
        for (int32_t v = 0; v < vocab; v++)
            logits[v] = -INFINITY;
        logits[tok] = isfinite(keep) ? keep : 0.0f;
        return tok;
    }
    /* the live alternatives' next ids keep their logits; everything else is masked */
    const int32_t a = st->pos - f->n;
    int32_t allowed[HY_RULES_MAX_ALTS];
    float keep[HY_RULES_MAX_ALTS];
    int32_t na = 0;
    for (int32_t k = 0; k < f->n_alts; k++)
        if ((st->alive >> k & 1) && a < alt_len(f, k)) {
            const int32_t id = f->alt_ids[f->alt_off[k] + a];
            allowed[na] = id;
            keep[na++] = isfinite(logits[id]) ? logits[id] : -1e30f;
        }
    for (int32_t v = 0; v < vocab; v++)
        logits[v] = -INFINITY;
    for (int32_t i = 0; i < na; i++)
        logits[allowed[i]] = keep[i];
    return na == 1 ? allowed[0] : -1;
}
