/* model_mpi_test.c - one model over the ranks of an mpirun job against the same model in one process.
 *
 *   mpirun -np N model_mpi_test MODEL_DIR [--tp T] [--dp D] [--ep] [--sum] [--dispatch ag|a2a]
 *          [--attn-tp A --dense-tp B --moe-tp C --embed-tp E --lmhead-tp L] [--sp] [--mtp]
 *
 * Rank 0 also loads the whole model without ranks (the reference) and runs three scenarios on both,
 * fp32 mode, collecting the fp32 logits of every step of sequence A:
 *   alone    A prefilled in one step (all positions), then 4 greedy decode steps;
 *   batch    A together with 6 other sequences (prefill in one batch, then batched decode);
 *   chunked  A prefilled in chunks of 64 tokens, then the same decode steps.
 * Checks: the multi-rank logits of every scenario are bitwise equal to each other (batch and chunk
 * invariance at fixed N); against the reference, bitwise equal (-0 == +0) in the exact combine, or
 * within |d| <= 1e-4 * max(1, |ref|) with the same greedy token wherever the reference's top-1/top-2
 * margin exceeds 1e-3 in the sum combine. With --mtp the MTP layer's logits of A's prefill rows are
 * checked the same way, and so are the logits of all 7 sequences of the batch prefill (the sequences
 * land in different attention-DP groups). Prints one line per check; exit 0 when all pass.
 */
#include "base/err.h"
#include "config/parallel.h"
#include "comm/comm.h"
#include "engine/executor.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_SEQ 7
#define LEN_A 150
#define DECODE 4
#define BS 16
#define MAX_BLOCKS 32

struct run {
    float *logits; /* [(LEN_A + DECODE), V]: A's logits of every position */
    float *mtp;    /* [LEN_A - 1, V] or NULL */
    float *batch;  /* batch scenario: [batch_rows, V] logits of every token of the 7-sequence prefill */
    int64_t batch_rows;
};

static uint32_t rng = 12345;
static int32_t next_id(int32_t V)
{
    rng = rng * 1103515245u + 12345u;
    return (int32_t)((rng >> 8) % (uint32_t)(V - 10));
}

static int32_t argmax(const float *x, int32_t V)
{
    int32_t b = 0;
    for (int32_t i = 1; i < V; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

/* Sequences: s = 0 is A; lengths of the others vary. Each gets its own blocks. */
static int32_t seq_len(int s)
{
    static const int32_t lens[N_SEQ] = {LEN_A, 5, 70, 17, 33, 1, 52};
    return lens[s];
}

/* Runs the scenario (0 alone, 1 batch, 2 chunked) on m and fills r (A's logits). tokens[s] hold the
 * prompts; A's decode tokens are the reference's greedy picks (decode_ids, chosen by the caller). */
static int scenario(struct hy_model *m, int sc, int32_t *const *tokens, const int32_t *decode_ids, int mtp,
                    struct run *r)
{
    const int32_t V = m->cfg.vocab_size, H = m->cfg.hidden_size;
    struct hy_executor ex;
    hy_executor_init(&ex, m);
    struct hy_kv_cache kv;
    if (hy_executor_kv_cache_init(&ex, &kv, BS, N_SEQ * (MAX_BLOCKS + 1), HY_DTYPE_UNKNOWN))
        return -1;
    int32_t tables[N_SEQ][MAX_BLOCKS];
    const int32_t *tp[N_SEQ];
    for (int s = 0; s < N_SEQ; s++) {
        for (int b = 0; b < MAX_BLOCKS; b++)
            tables[s][b] = s * (MAX_BLOCKS + 1) + b; /* first blocks 0, 33, 66, ...: every DP group gets some */
        tp[s] = tables[s];
    }
    const int n_seqs = sc == 1 ? N_SEQ : 1;
    int32_t tok[1024], pos[1024], seq[1024], rows[1024];
    int64_t slot[1024];
    float *lg = malloc((size_t)1024 * V * sizeof(float)), *hid = malloc((size_t)1024 * H * sizeof(float));
    int rc = 0;
    /* prefill (A in chunks of 64 for sc 2) */
    const int32_t chunk = sc == 2 ? 64 : LEN_A;
    for (int32_t c0 = 0; c0 < LEN_A && !rc; c0 += chunk) {
        int32_t n = 0;
        for (int s = 0; s < n_seqs; s++) {
            const int32_t L = s == 0 ? (c0 + chunk < LEN_A ? c0 + chunk : LEN_A) : seq_len(s);
            for (int32_t p = s == 0 ? c0 : 0; p < L; p++, n++) {
                tok[n] = tokens[s][p];
                pos[n] = p;
                seq[n] = s;
                slot[n] = (int64_t)tables[s][p / BS] * BS + p % BS;
                rows[n] = n;
            }
        }
        struct hy_batch b = {n, tok, pos, slot, seq, tp, n, rows, 0};
        rc = hy_executor_forward(&ex, &kv, &b, lg, hid);
        const int32_t a_n = (c0 + chunk < LEN_A ? c0 + chunk : LEN_A) - c0;
        if (!rc)
            memcpy(r->logits + (int64_t)c0 * V, lg, (size_t)a_n * V * sizeof(float));
        if (!rc && sc == 1 && r->batch) { /* every sequence's rows: each DP group's sequences are checked */
            memcpy(r->batch, lg, (size_t)n * V * sizeof(float));
            r->batch_rows = n;
        }
        if (!rc && mtp && c0 == 0 && sc == 0) { /* the MTP rows p = 0..LEN_A-2 of A */
            struct hy_batch mb = {LEN_A - 1, tok + 1, pos, slot, seq, tp, LEN_A - 1, rows, 0};
            rc = hy_executor_forward_mtp(&ex, &kv, &mb, hid, r->mtp, NULL);
        }
    }
    /* decode: A (and in the batch scenario every sequence) one token per step */
    for (int d = 0; d < DECODE && !rc; d++) {
        int32_t n = 0;
        for (int s = 0; s < n_seqs; s++, n++) {
            const int32_t p = seq_len(s) + d;
            tok[n] = s == 0 ? decode_ids[d] : tokens[s][(p * 7) % seq_len(s)];
            pos[n] = p;
            seq[n] = s;
            slot[n] = (int64_t)tables[s][p / BS] * BS + p % BS;
            rows[n] = n;
        }
        struct hy_batch b = {n, tok, pos, slot, seq, tp, n, rows, 0};
        rc = hy_executor_forward(&ex, &kv, &b, lg, NULL);
        if (!rc)
            memcpy(r->logits + (int64_t)(LEN_A + d) * V, lg, (size_t)V * sizeof(float));
    }
    free(lg);
    free(hid);
    hy_executor_kv_cache_free(&ex, &kv);
    return rc;
}

/* Bitwise (values ==, so -0 == +0). Returns the number of differing elements. */
static int64_t n_diff(const float *a, const float *b, int64_t n)
{
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += !(a[i] == b[i]);
    return d;
}

/* The sum combine's tolerance: |d| <= 1e-4 max(1, |ref|) and the same argmax where the margin > 1e-3. */
static int close_enough(const float *x, const float *ref, int64_t rows, int32_t V, double *max_rel)
{
    int ok = 1;
    *max_rel = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *a = x + r * V, *b = ref + r * V;
        for (int32_t i = 0; i < V; i++) {
            const double e = fabs((double)a[i] - b[i]) / fmax(1.0, fabs(b[i]));
            if (e > *max_rel)
                *max_rel = e;
        }
        int32_t t1 = argmax(b, V), t2 = t1 == 0 ? 1 : 0;
        for (int32_t i = 0; i < V; i++)
            if (i != t1 && b[i] > b[t2])
                t2 = i;
        if (b[t1] - b[t2] > 1e-3f && argmax(a, V) != t1)
            ok = 0;
    }
    return ok && *max_rel <= 1e-4;
}

static int arg_int(int argc, char **argv, const char *name, int def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return atoi(argv[i + 1]);
    return def;
}

static int has(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: model_mpi_test MODEL_DIR [layout flags]\n");
        return 2;
    }
    if (hy_dist_init(&argc, &argv)) {
        fprintf(stderr, "model_mpi_test: %s\n", hy_err_msg());
        return 2;
    }
    struct hy_comm *w = hy_dist_world();
    const int rank = hy_comm_rank(w), size = hy_comm_size(w);
    struct hy_parallel_config par;
    hy_parallel_default(&par);
    const int tp = arg_int(argc, argv, "--tp", 0), dp = arg_int(argc, argv, "--dp", 1);
    if (tp > 0 || has(argc, argv, "--ep") || dp > 1)
        hy_parallel_from_vllm(&par, tp > 0 ? tp : size / dp, dp, has(argc, argv, "--ep"));
    par.attn_tp_size = arg_int(argc, argv, "--attn-tp", par.attn_tp_size);
    par.dense_tp_size = arg_int(argc, argv, "--dense-tp", par.dense_tp_size);
    par.moe_tp_size = arg_int(argc, argv, "--moe-tp", par.moe_tp_size);
    par.embed_tp_size = arg_int(argc, argv, "--embed-tp", par.embed_tp_size);
    par.lmhead_tp_size = arg_int(argc, argv, "--lmhead-tp", par.lmhead_tp_size);
    par.combine_sum = has(argc, argv, "--sum");
    par.enable_sp = has(argc, argv, "--sp");
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--dispatch") && hy_moe_dispatch_parse(argv[i + 1], &par.moe_dispatch))
            return 2;
    const int mtp = has(argc, argv, "--mtp");
    struct hy_load_params lp;
    hy_load_params_default(&lp, HY_COMPUTE_F32);
    lp.comm = w;
    lp.par = &par;
    struct hy_model *m = NULL;
    if (hy_model_load_ex(argv[1], &lp, &m))
        hy_dist_abort(1, "rank %d: %s", rank, hy_err_msg());
    if (rank > 0) {
        struct hy_executor ex;
        hy_executor_init(&ex, m);
        if (hy_executor_worker_run(&ex))
            hy_dist_abort(1, "rank %d: %s", rank, hy_err_msg());
        hy_model_free(m);
        hy_dist_finalize();
        return 0;
    }
    struct hy_model *ref = NULL;
    if (hy_model_load(argv[1], HY_COMPUTE_F32, &ref))
        hy_dist_abort(1, "reference: %s", hy_err_msg());
    const int32_t V = ref->cfg.vocab_size;
    int32_t *tokens[N_SEQ];
    for (int s = 0; s < N_SEQ; s++) {
        tokens[s] = malloc((size_t)(seq_len(s) + DECODE) * sizeof(int32_t));
        for (int32_t p = 0; p < seq_len(s); p++)
            tokens[s][p] = next_id(V);
    }
    const int64_t rows = LEN_A + DECODE;
    struct run rr = {calloc((size_t)(rows * V), sizeof(float)), mtp ? calloc((size_t)(LEN_A * V), sizeof(float)) : NULL,
                     NULL, 0};
    struct run rd[3];
    int32_t decode_ids[DECODE] = {0};
    int fails = 0;
    /* the reference's greedy continuation of A (decoded token d is the argmax after position LEN_A-1+d) */
    if (scenario(ref, 0, tokens, decode_ids, mtp, &rr))
        hy_dist_abort(1, "reference: %s", hy_err_msg());
    for (int d = 0; d < DECODE; d++) {
        decode_ids[d] = argmax(rr.logits + (int64_t)(LEN_A - 1 + d) * V, V);
        if (scenario(ref, 0, tokens, decode_ids, mtp, &rr)) /* re-run so row LEN_A+d sees the token */
            hy_dist_abort(1, "reference: %s", hy_err_msg());
    }
    struct run rb = {calloc((size_t)(rows * V), sizeof(float)), NULL, calloc((size_t)1024 * V, sizeof(float)), 0};
    if (scenario(ref, 1, tokens, decode_ids, 0, &rb))
        hy_dist_abort(1, "reference batch: %s", hy_err_msg());
    for (int sc = 0; sc < 3; sc++) {
        rd[sc].logits = calloc((size_t)(rows * V), sizeof(float));
        rd[sc].batch = sc == 1 ? calloc((size_t)1024 * V, sizeof(float)) : NULL;
        rd[sc].batch_rows = 0;
        rd[sc].mtp = mtp && sc == 0 ? calloc((size_t)(LEN_A * V), sizeof(float)) : NULL;
        if (scenario(m, sc, tokens, decode_ids, mtp && sc == 0, &rd[sc]))
            hy_dist_abort(1, "scenario %d: %s", sc, hy_err_msg());
    }
    static const char *names[3] = {"alone", "batch of 7", "chunks of 64"};
    for (int sc = 1; sc < 3; sc++) {
        const int64_t d = n_diff(rd[sc].logits, rd[0].logits, rows * V);
        printf("%-4s %d ranks: %s == alone (bitwise): %lld differing logits\n", d ? "FAIL" : "ok", size, names[sc],
               (long long)d);
        fails += d != 0;
    }
    if (!par.combine_sum) {
        const int64_t d = n_diff(rd[0].logits, rr.logits, rows * V);
        printf("%-4s %d ranks == 1 rank (bitwise, %lld logits): %lld differ\n", d ? "FAIL" : "ok", size,
               (long long)(rows * V), (long long)d);
        fails += d != 0;
        const int64_t db = rd[1].batch_rows == rb.batch_rows ? n_diff(rd[1].batch, rb.batch, rb.batch_rows * V) : -1;
        printf("%-4s batch prefill of 7 sequences (%lld rows) == 1 rank (bitwise): %lld differ\n", db ? "FAIL" : "ok",
               (long long)rb.batch_rows, (long long)db);
        fails += db != 0;
        if (mtp) {
            const int64_t dm = n_diff(rd[0].mtp, rr.mtp, (int64_t)(LEN_A - 1) * V);
            printf("%-4s MTP logits == 1 rank (bitwise): %lld differ\n", dm ? "FAIL" : "ok", (long long)dm);
            fails += dm != 0;
        }
    } else {
        double e;
        const int ok = close_enough(rd[0].logits, rr.logits, rows, V, &e);
        printf("%-4s %d ranks vs 1 rank (sum combine): max |d|/max(1,|ref|) = %.3g, greedy tokens where margin > "
               "1e-3 equal\n",
               ok ? "ok" : "FAIL", size, e);
        fails += !ok;
        const int okb = rd[1].batch_rows == rb.batch_rows && close_enough(rd[1].batch, rb.batch, rb.batch_rows, V, &e);
        printf("%-4s batch prefill of 7 sequences vs 1 rank (sum combine): max rel %.3g\n", okb ? "ok" : "FAIL", e);
        fails += !okb;
    }
    const struct hy_dist_stats *st = hy_dist_stats();
    printf("     collectives %lld, log hash %016llx\n", (long long)st->n, (unsigned long long)st->log_hash);
    struct hy_executor ex;
    hy_executor_init(&ex, m);
    hy_executor_exit(&ex); /* releases the workers */
    hy_model_free(m);
    hy_model_free(ref);
    for (int s = 0; s < N_SEQ; s++)
        free(tokens[s]);
    free(rr.logits);
    free(rr.mtp);
    free(rb.logits);
    free(rb.batch);
    for (int sc = 0; sc < 3; sc++) {
        free(rd[sc].logits);
        free(rd[sc].mtp);
        free(rd[sc].batch);
    }
    hy_dist_finalize();
    return fails ? 1 : 0;
}
