/* quality.h - how closely model A's next-token distributions follow reference model B's over a
 * fixed text (for `hyinfer bench quality`: quantized or bf16 runs against a reference).
 *
 * Per predicted position, with P_A = softmax(logits_A), P_B = softmax(logits_B) computed in double
 * from the fp32 logits:
 *   top-1 agreement     argmax P_A == argmax P_B (ties resolved to the lowest id, on each side)
 *   KL(P_B || P_A)      sum_v P_B(v) (ln P_B(v) - ln P_A(v)), nats (B is the reference)
 *   A's top-1 in B's top-5   A's argmax is among B's 5 most likely ids (B's ties: lowest ids first)
 *   NLL                 -ln P(actual next token), per model (perplexity = exp(mean NLL))
 *
 * Windows (how a text longer than the context is fed): the text tokens are cut into
 * non-overlapping windows of `context` input tokens, each run on a fresh (reset) KV cache starting
 * at position 0. With a BOS id (bos >= 0) every window is [BOS, x_o .. x_{o+context-2}] and predicts
 * x_o .. x_{o+context-1} (the way tools/make/train_tiny_hy3.py builds its validation rows: BOS +
 * contiguous text), so `positions` predictions need `positions` text tokens. Without a BOS a window
 * is x_o .. x_{o+context-1} predicting x_{o+1} .. x_{o+context} and the next window starts at
 * x_{o+context}; `positions` predictions need positions + 1 text tokens. Either way every
 * predicted token is predicted exactly once, and positions early in a window see short contexts.
 */
#ifndef HY_BENCH_QUALITY_H
#define HY_BENCH_QUALITY_H

#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

/* The measures of one position. */
struct hy_quality_row {
    double kl;      /* KL(P_B || P_A), nats */
    double nll_a;   /* -ln P_A(target), nats (0 when no target was given) */
    double nll_b;   /* -ln P_B(target) */
    int32_t top1_a; /* argmax of A's logits (lowest id among ties) */
    int32_t top1_b;
    int a_in_b_top5; /* 1 when top1_a is among B's 5 most likely ids */
};

/* exp(x): the vectorizable exp the measures use on [-700, 0] (relative error about 2e-16), glibc's
 * exp elsewhere (exposed for its test). */
double hy_quality_exp_neg(double x);

/* Sums over positions; the means are formed by hy_quality_summary. */
struct hy_quality_stats {
    int64_t positions;       /* rows accumulated */
    int64_t top1_agree;      /* rows with top1_a == top1_b */
    int64_t a_in_b_top5;     /* rows with a_in_b_top5 */
    double sum_kl;           /* nats */
    double max_kl;           /* nats */
    int64_t max_kl_position; /* index (0-based, in accumulation order) of the row with max_kl; -1 if none */
    double sum_nll_a;        /* nats */
    double sum_nll_b;
    int64_t windows; /* windows (KV resets) run by hy_quality_run */
};

/* Derived figures of a stats struct (all 0 when positions == 0). */
struct hy_quality_summary {
    double top1_agreement; /* 0..1 */
    double top1_stderr;    /* binomial standard error sqrt(p (1 - p) / positions): a scale for how far
                                  two agreements must differ to mean something (positions of one text are
                                  not independent, so it is an underestimate) */
    double top5_agreement; /* fraction of rows with A's top-1 in B's top-5 */
    double mean_kl;        /* nats */
    double max_kl;         /* nats */
    double nll_a, nll_b;   /* mean NLL, nats/token */
    double ppl_a, ppl_b;   /* exp(mean NLL) */
};

void hy_quality_stats_init(struct hy_quality_stats *s);
void hy_quality_summarize(const struct hy_quality_stats *s, struct hy_quality_summary *out);

/* Measures of one position from la[V] (A) and lb[V] (B), fp32 logits; target in [0, V), or -1
 * for none (the NLLs are then 0). Returns 0, or -1 with hy_err_msg() when a logit is NaN or
 * infinite or the target is out of range. */
int hy_quality_row_measure(const float *la, const float *lb, int32_t V, int32_t target, struct hy_quality_row *r);

/* Measures n rows (la, lb: [n, V] row-major; targets[n] or NULL) and adds them to s, in row
 * order (the sums do not depend on the thread count). Rows are processed in parallel (OpenMP).
 * Returns 0, or -1 with hy_err_msg() naming the row (s unchanged then). */
int hy_quality_accumulate(struct hy_quality_stats *s, const float *la, const float *lb, int32_t n, int32_t V,
                          const int32_t *targets);

/* Text tokens hy_quality_run needs for `positions` predictions (see the window rule above). */
int64_t hy_quality_tokens_needed(int32_t positions, int32_t bos);

/* One model of a comparison and how it runs. A new engine option that changes a model's outputs
 * (e.g. its KV cache dtype) is a field here, used where hy_quality_run sets up that model. */
struct hy_quality_model {
    struct hy_model *m;
    enum hy_dtype kv_dtype; /* its KV cache (hy_model_kv_dtype; HY_DTYPE_UNKNOWN = auto) */
};

/* Runs A and B over the first hy_quality_tokens_needed(positions, bos) ids of text[n_text] in
 * windows of `context` tokens (>= 2), `rows_per_step` tokens per forward call (each call returns
 * the logits of all its tokens from both models, so memory is 2 * rows_per_step * vocab floats
 * plus each model's KV cache for `context` positions), and fills *s (initialized here).
 * Both models must have the same vocab_size; context must not exceed either model's
 * max_position_embeddings. Returns 0, or -1 with hy_err_msg() (bad sizes, too little text,
 * ids outside the vocabulary, a forward failure, out of memory). */
int hy_quality_run(const struct hy_quality_model *a, const struct hy_quality_model *b, const int32_t *text,
                   int64_t n_text, int32_t bos, int32_t positions, int32_t context, int32_t rows_per_step,
                   struct hy_quality_stats *s);

/* Characters (Unicode code points of UTF-8 text) in text[len]. Returns the count, or -1 with
 * hy_err_msg() when the bytes are not valid UTF-8. */
int64_t hy_quality_utf8_chars(const char *text, size_t len);

/* Byte offset of the held-out tail of text[len]: the tail starts at character
 * floor(n_chars * start_frac) (computed as Python's int(len(text) * start_frac) does, in double),
 * start_frac in [0, 1). *start_char gets that character index, *n_chars the total. Returns 0, or -1
 * with hy_err_msg() (invalid UTF-8, start_frac out of range). */
int hy_quality_text_tail(const char *text, size_t len, double start_frac, size_t *byte_offset, int64_t *start_char,
                         int64_t *n_chars);

#endif
