/* sampler.h - next-token selection from fp32 logits, with a per-request seeded RNG.
 *
 * Order (as vLLM / HF): repetition penalty (HF/CTRL rule: logit>0 ? /p : *p over tokens seen in
 * prompt+output), presence/frequency penalties (OpenAI rule, output tokens only), temperature,
 * top-k, top-p (nucleus), min-p, then a draw. temperature == 0 (or top_k == 1) means greedy argmax
 * (lowest id wins ties); as in vLLM, temperatures below 1e-5 count as 0. Same seed + same logits
 * sequence → same tokens (RNG: xoshiro256** seeded via splitmix64 from the 64-bit seed).
 */
#ifndef HY_SAMPLE_SAMPLER_H
#define HY_SAMPLE_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

struct hy_sampling_params {
    float temperature;        /* >= 0; 0 = greedy */
    float top_p;              /* (0, 1]; 1 = off */
    int32_t top_k;            /* <= 0 = off */
    float min_p;              /* [0, 1]; 0 = off */
    float repetition_penalty; /* > 0; 1 = off */
    float presence_penalty;   /* [-2, 2]; 0 = off */
    float frequency_penalty;  /* [-2, 2]; 0 = off */
    uint64_t seed;            /* used when has_seed */
    int has_seed;             /* 0: seed drawn from the clock/urandom at init */
    int32_t max_new_tokens;   /* >= 0 */
    int ignore_eos;
};

/* Greedy defaults (temperature 0, everything off), max_new_tokens 128. */
void hy_sampling_params_init(struct hy_sampling_params *p);

/* Checks ranges; returns 0, or -1 with hy_err_msg() naming the bad parameter and its value. */
int hy_sampling_params_validate(const struct hy_sampling_params *p);

/* Reads defaults from a model dir's generation_config.json (temperature, top_p, top_k, min_p,
 * repetition_penalty; do_sample false → temperature 0) into *p. A missing file is not an error;
 * malformed JSON is (-1 with hy_err_msg()). */
int hy_sampling_params_from_generation_config(const char *model_dir, struct hy_sampling_params *p);

/* Overrides *p (typically filled by hy_sampling_params_init + _from_generation_config) with the
 * sampling keys the run YAML set (config/run_config.h), sets p->max_new_tokens =
 * cfg->max_new_tokens, then validates. Returns 0, or -1 with hy_err_msg() prefixed by the YAML path. */
struct hy_run_config;
int hy_sampling_params_from_run_config(const struct hy_run_config *cfg, struct hy_sampling_params *p);

/* Per-request sampler state: RNG and token counts for penalties. */
struct hy_sampler;

/* vocab_size: logits row length. Returns NULL on OOM or invalid params (hy_err_msg()). Copies p. */
struct hy_sampler *hy_sampler_create(const struct hy_sampling_params *p, int32_t vocab_size);
void hy_sampler_free(struct hy_sampler *s);

/* Records prompt tokens (for the repetition penalty). Ids outside [0, vocab_size) are ignored. */
void hy_sampler_accept_prompt(struct hy_sampler *s, const int32_t *ids, size_t n);

/* Picks the next token from logits[vocab_size] (fp32; modified in place as scratch) and records
 * it as an output token. Returns the id (>= 0). NaN logits count as -inf; a +inf logit wins
 * outright (lowest id first).
 * Cost: greedy O(V). Sampling: O(V) for the softmax; top_k uses a partial selection (O(V) average
 * plus O(k log k)); top_p buckets the probabilities (one O(V) pass) and sorts only the bucket
 * where the cumulative mass crosses top_p; min_p alone needs no sort. Memory: 8 * V bytes of scratch, allocated at the first non-greedy draw; penalties add
 * V bits (repetition) / 4 * V bytes (presence, frequency) when enabled. */
int32_t hy_sampler_sample(struct hy_sampler *s, float *logits);

/* Applies the repetition / presence / frequency penalties (the first step of hy_sampler_sample)
 * to logits[vocab_size] in place, from the tokens recorded so far. No-op when all are off. */
void hy_sampler_apply_penalties(const struct hy_sampler *s, float *logits);

/* vLLM's --seed N for a whole process: from now on, a sampler created without its own seed
 * (has_seed 0) takes the next draw of a generator seeded with N instead of the clock / urandom, so the
 * same start + the same order of hy_sampler_create calls (the same request order) gives the same
 * samples. Thread-safe (one atomic counter); without a call: fresh seeds as before. */
void hy_sampler_set_default_seed(uint64_t seed);

/* The RNG seed in use (p->seed when has_seed, else the one drawn at create), for logs / replay. */
uint64_t hy_sampler_seed(const struct hy_sampler *s);

/* argmax with lowest-id tie break; logits[n]. NaN entries are skipped; returns 0 when every
 * entry is NaN (or n <= 0). */
int32_t hy_argmax_f32(const float *logits, int32_t n);

#endif
