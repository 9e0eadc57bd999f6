/* spec.h - MTP speculative decoding: the draft pass and the gate that keeps it from making decoding
 * slower (docs/speculative.md; spec mtp_speculative_decoding.md).
 *
 * Per engine step, after the target forward, verification (engine.c: each verified row is sampled with
 * the request's own sampler; drafts are kept while they equal the sample) and hy_scheduler_update:
 *   1. the MTP layer runs over every row the target computed and kept: row p pairs token p+1 (the next
 *      prompt token, an accepted draft or the token just sampled) with the target's final-normed hidden
 *      state at p, at position p, writing the MTP layer's KV in the request's own paged blocks;
 *   2. for the requests allowed to draft, the last row's MTP argmax is draft 1 while its probability is
 *      >= draft_p_min; steps 2..k run one row per request (the previous draft, position + 1, the MTP's own
 *      final-norm output), each kept while confident.
 * Drafts land in req->drafts; the next step verifies them with the last known token. The MTP KV of
 * every computed position is thus always that of (token p+1, h_p), whatever was drafted.
 * The gate (spec_gate.c) keeps drafting from making decoding slower; see hy_spec_gate_step.
 */
#ifndef HY_ENGINE_SPEC_H
#define HY_ENGINE_SPEC_H

#include "config/spec_config.h"
#include "engine/runner.h"
#include "model/model.h"
#include "sched/scheduler.h"

#include <stdint.h>

struct hy_spec_stats {
    uint64_t num_drafts;                                      /* verify rounds with at least one draft */
    uint64_t num_draft_tokens;                                /* drafts verified */
    uint64_t num_accepted_tokens;                             /* drafts equal to the sampled token */
    uint64_t num_accepted_tokens_per_pos[HY_SPEC_MAX_TOKENS]; /* [i]: rounds whose draft i was accepted */
    uint64_t gate_windows_on, gate_windows_off;               /* measurement windows spent in each mode */
    uint64_t gate_early_off;  /* drafting windows ended early as provably slower than plain decode */
    uint64_t gate_hard_off;   /* times drafting could not win even with every draft accepted: MTP layer off */
    double rate_on, rate_off; /* last measured decode tokens/s (0: not yet) */
    int drafting;             /* the gate's current mode */
};

struct hy_spec {
    struct hy_spec_config cfg;
    int32_t max_tokens, max_seqs, block_size, vocab, hidden_size;
    int32_t *tok, *pos, *seq, *rows, *who; /* [max_tokens] MTP batch; who: [max_seqs] entry of each chain row */
    int64_t *slots;                        /* [max_tokens] */
    const int32_t **tables;                /* [max_seqs] */
    float *logits;                         /* [max_seqs, vocab] */
    float *hidden;                         /* [max_tokens, hidden_size] MTP final-norm outputs */
    float *hidden_in;                      /* [max_tokens, hidden_size] the MTP batch's target hidden states */
    float *chain_in;                       /* [max_seqs, hidden_size] the next chain step's hidden input */
    /* gate (spec_gate.c) */
    int mode;          /* 1: requests draft; 0: they do not (the MTP layer still keeps its KV) */
    int probing;       /* the current window measures the mode that is not the current best */
    int64_t hard_left; /* > 0: pure-decode steps left with the MTP layer off altogether */
    int32_t win_steps, exploit_len, exploit_left, skip;
    int64_t win_tokens, win_seqs, win_drafts;
    double win_sec, win_mtp_sec;
    double rate[2];  /* tokens/s measured per mode (EMA over windows) */
    int have[2];     /* rate[mode] measured */
    double cost_off; /* plain steps: seconds per request-step (EMA) */
    double sync_rel; /* plain steps: MTP KV pass seconds / the rest of the step (EMA) */
    struct hy_spec_stats stats;
};

/* Sizes the MTP batches for max_tokens rows per step and max_seqs requests. cfg->num_speculative_tokens
 * must be >= 1 and the model must have its MTP layer. Returns 0, or -1 with hy_err_msg(). */
int hy_spec_init(struct hy_spec *s, const struct hy_spec_config *cfg, const struct hy_model *m, int32_t max_tokens,
                 int32_t max_seqs, int32_t block_size);
void hy_spec_free(struct hy_spec *s);

/* Resets the gate: plain decode first (2 steps), then a drafting probe. */
void hy_spec_gate_init(struct hy_spec *s);

/* 1 while the gate lets requests draft (always with cfg.gate 0). */
int hy_spec_drafting(const struct hy_spec *s);

/* 1 while the MTP layer runs at all (0: the gate found that drafting cannot win on this model and
 * batch even with every draft accepted; the requests of such steps get hy_request.mtp_stale and never
 * draft). */
int hy_spec_mtp_active(const struct hy_spec *s);

/* Steps 1 and 2 above for a plan that ran (run holds its hidden states, hy_scheduler_update done).
 * allow[i] (per plan entry): how many drafts entry i's request may get (0: none; its rows still go
 * through the MTP layer). Sets req->drafts / n_drafts. Returns 0, or -1 with hy_err_msg() (forward
 * error). */
int hy_spec_propose(struct hy_spec *s, struct hy_executor *ex, struct hy_kv_cache *kv, const struct hy_sched_plan *plan,
                    const struct hy_runner *run, const int32_t *allow);

/* Records a verify round of n_drafts drafts of which the first n_accepted were accepted. */
void hy_spec_count(struct hy_spec *s, int32_t n_drafts, int32_t n_accepted);

/* Feeds the gate one finished step: pure_decode (no prompt tokens in it), n_seqs requests in it, tokens
 * emitted, wall seconds of the whole step (target, verification, MTP pass) and of the MTP pass alone.
 * Only pure-decode steps are measured, and not the first one after a switch (it verifies the old
 * mode's drafts). The rules, measured in windows of 8 steps (the first plain window 2):
 *  - start with plain decode, then probe drafting; keep the faster mode, re-probe the other after 4
 *    windows, doubling the interval (up to 64) while the probes keep losing;
 *  - a drafting window ends after 2 steps once it provably loses: a plain step costs at most the verify
 *    part of a drafting step (fewer rows) plus its MTP KV pass (sync_rel of the rest, measured in plain
 *    steps), so drafting is slower when tokens / n_seqs * (seconds - mtp_seconds) * (1 + sync_rel) <
 *    seconds;
 *  - and when even accepting every draft could not win, (1 + drafts / n_seqs) * cost_off / (1 + sync_rel)
 *    < seconds / n_seqs, the MTP layer goes off altogether for 4096 pure-decode steps (its KV pass is a
 *    cost of its own on small models), after which new requests may draft again. */
void hy_spec_gate_step(struct hy_spec *s, int pure_decode, int32_t n_seqs, int64_t tokens, double seconds,
                       double mtp_seconds);

#endif
