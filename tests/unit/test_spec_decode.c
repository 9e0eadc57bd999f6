/* test_spec_decode.c - MTP speculative decoding in the engine, fp32 mode (where the forward is batch-
 * and chunk-invariant, so outputs must be IDENTICAL with drafts on and off):
 *  - greedy outputs with k = 0 (reference, one request at a time) == k = 1, 2, 3 for batch 1 and 8,
 *    prefix caching on/off, prompt chunks of 7 / 64 / whole, a KV budget that forces preemption, on a
 *    random golden checkpoint (hy3-golden-b) and the trained models/hy3-tiny (where drafts are accepted);
 *  - live acceptance == replay: every draft round of a k = 1 run recomputed teacher-forced from the
 *    finished sequence with hy_model_forward + hy_model_forward_mtp gives the same accepted count;
 *    a request that shares exactly the cached blocks of another has the same counts with prefix
 *    caching on and off;
 *  - max_tokens 1 .. 2k+1, a stop token at every offset of an output, prompts of max_model_len - j;
 *  - seeded temperature-1 sampling, logprobs / top-5, penalties: on == off; a chi-square test of the
 *    token sampled at a verified row against the target distribution (10^4 samples);
 *  - the MTP position-0 switch leaves outputs unchanged; bad settings are refused at create. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "engine/engine.h"
#include "text/tokenizer.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXP 96
#define MAXOUT 48
#define NJ 8

static struct hy_model *golden, *tiny;

struct job {
    int32_t ids[MAXP];
    int32_t n;
};

struct out {
    int32_t toks[MAXOUT];
    float lp[MAXOUT];
    int32_t top[MAXOUT][5];
    float top_lp[MAXOUT][5];
    int n;
    enum hy_engine_finish finish;
};

static struct job gjobs[NJ], tjobs[NJ];

static const char *path_of(const char *rel)
{
    static char path[2][1024];
    static int w;
    const char *root = getenv("HYINFER_ROOT");
    w ^= 1;
    snprintf(path[w], sizeof(path[w]), "%s/%s", root && *root ? root : ".", rel);
    return path[w];
}

static void config(struct hy_engine_config *c, int k, int prefix, int chunk, int max_seqs)
{
    hy_engine_config_init(c);
    c->max_model_len = 160;
    c->block_size = 4;
    c->kv_cache_memory_bytes = 16u << 20;
    c->enable_prefix_caching = prefix;
    c->max_num_batched_tokens = chunk;
    c->max_num_seqs = max_seqs;
    c->spec.num_speculative_tokens = k;
    c->spec.draft_p_min = 0.0f; /* draft always: the most verify work */
    c->spec.gate = 0;
}

static void req_init(struct hy_engine_request *r, const struct job *j, int32_t max_tokens)
{
    memset(r, 0, sizeof(*r));
    r->prompt_ids = j->ids;
    r->n_prompt = (size_t)j->n;
    hy_sampling_params_init(&r->params);
    r->params.max_new_tokens = max_tokens;
    r->params.ignore_eos = 1;
    r->logprobs = -1;
}

static struct hy_engine *create(struct hy_model *m, const struct hy_engine_config *c)
{
    struct hy_engine *e = hy_engine_create(m, c);
    if (!e)
        fail_msg("engine create: %s", hy_err_msg());
    return e;
}

static void drain(struct hy_engine *e, const uint64_t *ids, int n, struct out *res)
{
    for (int steps = 0; hy_engine_has_work(e); steps++) {
        assert_true(steps < 20000);
        const struct hy_engine_output *o;
        size_t no;
        assert_int_equal(hy_engine_step(e, &o, &no), 0);
        for (size_t k = 0; k < no; k++)
            for (int i = 0; i < n; i++) {
                if (o[k].request_id != ids[i])
                    continue;
                struct out *r = &res[i];
                if (o[k].token_id >= 0) {
                    assert_true(r->n < MAXOUT);
                    r->lp[r->n] = o[k].logprob;
                    for (int t = 0; t < o[k].n_top && t < 5; t++) {
                        r->top[r->n][t] = o[k].top_ids[t];
                        r->top_lp[r->n][t] = o[k].top_logprobs[t];
                    }
                    r->toks[r->n++] = o[k].token_id;
                }
                assert_true(r->finish == HY_ENGINE_RUNNING); /* nothing after a finish */
                r->finish = o[k].finish;
            }
    }
}

/* Runs requests rs[0..n) on a fresh engine, all queued at once (concurrent) or one after another. */
static void run_reqs(struct hy_model *m, const struct hy_engine_config *c, const struct hy_engine_request *rs, int n,
                     int concurrent, struct out *res, struct hy_engine_stats *st)
{
    struct hy_engine *e = create(m, c);
    uint64_t ids[NJ * 2];
    memset(res, 0, (size_t)n * sizeof(*res));
    for (int i = 0; i < n; i++) {
        assert_int_equal(hy_engine_add_request(e, &rs[i], &ids[i]), HY_ENGINE_OK);
        if (!concurrent)
            drain(e, ids + i, 1, res + i);
    }
    drain(e, ids, n, res);
    struct hy_engine_stats s;
    hy_engine_get_stats(e, st ? st : &s);
    hy_engine_free(e);
}

static void run_jobs(struct hy_model *m, const struct hy_engine_config *c, const struct job *js, int n, int32_t max_tok,
                     int concurrent, struct out *res, struct hy_engine_stats *st)
{
    struct hy_engine_request rs[NJ];
    for (int i = 0; i < n; i++)
        req_init(&rs[i], &js[i], max_tok);
    run_reqs(m, c, rs, n, concurrent, res, st);
}

static void assert_same_out(const struct out *a, const struct out *b, int n)
{
    for (int i = 0; i < n; i++) {
        if (a[i].n != b[i].n || memcmp(a[i].toks, b[i].toks, (size_t)a[i].n * sizeof(int32_t)) != 0)
            fail_msg("request %d: %d vs %d tokens, or different tokens", i, a[i].n, b[i].n);
        assert_int_equal(a[i].finish, b[i].finish);
    }
}

static uint32_t lcg = 777;
static int32_t rnd(int32_t n)
{
    lcg = lcg * 1103515245u + 12345u;
    return (int32_t)((lcg >> 8) % (uint32_t)n);
}

static int setup(void **state)
{
    (void)state;
    omp_set_num_threads(1);
    if (hy_model_load(path_of("tests/data/hy3-golden-llamacpp/hy3-golden-b"), HY_COMPUTE_F32, &golden) ||
        hy_model_load(path_of("models/hy3-tiny"), HY_COMPUTE_F32, &tiny)) {
        fprintf(stderr, "cannot load a model: %s\n", hy_err_msg());
        return -1;
    }
    /* golden: random ids, jobs 4..7 share the first 12 tokens (3 blocks) of job 3 */
    static const int32_t glens[NJ] = {5, 17, 9, 33, 14, 26, 40, 21};
    for (int i = 0; i < NJ; i++) {
        gjobs[i].n = glens[i];
        gjobs[i].ids[0] = 471;
        for (int p = 1; p < glens[i]; p++)
            gjobs[i].ids[p] = i >= 4 && p < 12 ? gjobs[3].ids[p] : rnd(470);
    }
    /* tiny: real text, some sharing a prefix */
    static const char *texts[NJ] = {
        "ROMEO:",
        "JULIET:\nO Romeo, Romeo!",
        "First Citizen:\nBefore we proceed any further, hear me speak.",
        "KING HENRY VI:\n",
        "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.",
        "MENENIUS:\nWhat work's, my countrymen, in hand?",
        "ROMEO:\nI will not",
        "GLOUCESTER:\nNow is the winter"};
    struct hy_tokenizer *tok;
    if (hy_tokenizer_load_dir(path_of("models/hy3-tiny"), &tok))
        return -1;
    for (int i = 0; i < NJ; i++) {
        int32_t *ids;
        size_t n;
        if (hy_tokenizer_encode(tok, texts[i], strlen(texts[i]), 0, &ids, &n) || n + 1 > MAXP)
            return -1;
        tjobs[i].ids[0] = 128167; /* BOS */
        memcpy(tjobs[i].ids + 1, ids, n * sizeof(int32_t));
        tjobs[i].n = (int32_t)n + 1;
        free(ids);
    }
    hy_tokenizer_free(tok);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hy_model_free(golden);
    hy_model_free(tiny);
    return 0;
}

/* Greedy identity over k x prefix caching x chunk size x batch, on one model. */
static void greedy_matrix(struct hy_model *m, const struct job *js, int32_t max_tok, int full)
{
    struct hy_engine_config c;
    struct out ref[NJ], got[NJ];
    struct hy_engine_stats st;
    config(&c, 0, 0, 512, NJ);
    run_jobs(m, &c, js, NJ, max_tok, 0, ref, NULL);
    static const int chunks[3] = {7, 64, 512};
    uint64_t accepted = 0, hits = 0;
    for (int k = 1; k <= 3; k++)
        for (int prefix = 0; prefix < 2; prefix++)
            for (int ci = 0; ci < 3; ci++)
                for (int conc = 0; conc < 2; conc++) {
                    if (!full && (ci == 1 || (k == 2 && conc == 0)))
                        continue;
                    config(&c, k, prefix, chunks[ci], conc ? NJ : 1);
                    run_jobs(m, &c, js, NJ, max_tok, conc, got, &st);
                    assert_same_out(ref, got, NJ);
                    assert_true(st.spec.num_draft_tokens > 0);
                    assert_int_equal(st.num_blocks_used, 0);
                    accepted += st.spec.num_accepted_tokens;
                    hits += st.prefix_hits;
                }
    assert_true(hits > 0);
    if (m == tiny)
        assert_true(accepted > 0);
}

static void test_greedy_identical_golden(void **state)
{
    (void)state;
    greedy_matrix(golden, gjobs, 20, 1);
}

static void test_greedy_identical_tiny(void **state)
{
    (void)state;
    greedy_matrix(tiny, tjobs, 32, 0);
}

/* A KV budget that preempts: same outputs with k = 2 as with k = 0. */
static void test_preemption(void **state)
{
    (void)state;
    for (int mi = 0; mi < 2; mi++) {
        struct hy_model *m = mi ? tiny : golden;
        const struct job *js = mi ? tjobs : gjobs;
        struct hy_engine_config c;
        struct out ref[NJ], got[NJ];
        struct hy_engine_stats st;
        config(&c, 0, 1, 512, NJ);
        run_jobs(m, &c, js, NJ, 24, 0, ref, NULL);
        config(&c, 2, 1, 64, NJ);
        c.max_model_len = 80;
        c.kv_cache_memory_bytes = hy_model_kv_token_bytes(m, HY_DTYPE_UNKNOWN) * 4 * 26; /* 26 blocks */
        run_jobs(m, &c, js, NJ, 24, 1, got, &st);
        assert_same_out(ref, got, NJ);
        assert_true(st.num_preemptions > 0);
    }
}

/* Teacher-forced replay of a k = 1 run: the accepted count of every draft round recomputed from the
 * final sequence (MTP argmax at row r == token r + 2), walking the rounds as the engine does. */
static void replay_k1(struct hy_model *m, const int32_t *seq, int32_t n_prompt, int32_t n, uint64_t *drafts,
                      uint64_t *accepted)
{
    struct hy_kv_cache kv;
    assert_int_equal(hy_model_kv_cache_init(m, &kv, 4, (n + 3) / 4), 0);
    const int32_t V = m->cfg.vocab_size, H = m->cfg.hidden_size;
    int32_t *pos = malloc((size_t)n * sizeof(int32_t)), *sid = calloc((size_t)n, sizeof(int32_t));
    int32_t *rows = malloc((size_t)n * sizeof(int32_t)), *table = malloc((size_t)n * sizeof(int32_t));
    int64_t *slots = malloc((size_t)n * sizeof(int64_t));
    float *hidden = malloc((size_t)n * (size_t)H * sizeof(float)), *lg = malloc((size_t)n * (size_t)V * sizeof(float));
    int32_t *arg = malloc((size_t)n * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) {
        pos[i] = i;
        rows[i] = i;
        table[i] = i;
        slots[i] = i;
    }
    const int32_t *tables[1] = {table};
    struct hy_batch b = {n, seq, pos, slots, sid, tables, 0, rows, 0};
    assert_int_equal(hy_model_forward(m, &kv, &b, NULL, hidden), 0);
    struct hy_batch mb = {n - 1, seq + 1, pos, slots, sid, tables, n - 1, rows, 0};
    assert_int_equal(hy_model_forward_mtp(m, &kv, &mb, hidden, lg, NULL), 0);
    for (int32_t r = 0; r < n - 1; r++)
        arg[r] = hy_argmax_f32(lg + (size_t)r * V, V);
    /* after the prefill, the draft for token n_prompt + 1 comes from MTP row n_prompt - 1; a round at
     * row r verifies token r + 2 and moves on by 2 tokens when accepted, 1 otherwise; no draft for the
     * last token (its bonus would be past max_tokens) */
    *drafts = *accepted = 0;
    for (int32_t r = n_prompt - 1; r + 3 < n;) {
        (*drafts)++;
        const int ok = arg[r] == seq[r + 2];
        *accepted += (uint64_t)ok;
        r += ok ? 2 : 1;
    }
    free(pos);
    free(sid);
    free(rows);
    free(table);
    free(slots);
    free(hidden);
    free(lg);
    free(arg);
    hy_kv_cache_free(&kv);
}

static void test_live_acceptance_equals_replay(void **state)
{
    (void)state;
    uint64_t total = 0;
    for (int i = 0; i < NJ; i++) {
        struct hy_engine_config c;
        struct out o;
        struct hy_engine_stats st;
        config(&c, 1, 1, 512, 1);
        run_jobs(tiny, &c, &tjobs[i], 1, 40, 1, &o, &st);
        int32_t seq[MAXP + MAXOUT];
        memcpy(seq, tjobs[i].ids, (size_t)tjobs[i].n * sizeof(int32_t));
        memcpy(seq + tjobs[i].n, o.toks, (size_t)o.n * sizeof(int32_t));
        uint64_t d, a;
        replay_k1(tiny, seq, tjobs[i].n, tjobs[i].n + o.n, &d, &a);
        assert_int_equal(st.spec.num_drafts, d);
        assert_int_equal(st.spec.num_accepted_tokens, a);
        total += a;
    }
    assert_true(total > 0);
}

/* B shares exactly A's first 3 cached blocks, then diverges: the same draft counts with the prefix
 * cache on (B hits A's blocks) as off. */
static void test_shared_blocks_same_acceptance(void **state)
{
    (void)state;
    struct job jb[2];
    jb[0] = tjobs[4]; /* 20+ tokens */
    jb[1] = tjobs[4];
    assert_true(jb[0].n > 14);
    jb[1].n = 14; /* 3 full blocks of 4 + 2 tokens of its own */
    jb[1].ids[12] = tjobs[7].ids[2];
    jb[1].ids[13] = tjobs[7].ids[3];
    struct hy_engine_stats st[2];
    struct out o[2][2];
    for (int prefix = 0; prefix < 2; prefix++) {
        struct hy_engine_config c;
        config(&c, 3, prefix, 512, 1);
        run_jobs(tiny, &c, jb, 2, 30, 0, o[prefix], &st[prefix]);
    }
    assert_true(st[1].prefix_hits > 0);
    assert_same_out(o[0], o[1], 2);
    assert_int_equal(st[0].spec.num_drafts, st[1].spec.num_drafts);
    assert_int_equal(st[0].spec.num_draft_tokens, st[1].spec.num_draft_tokens);
    assert_int_equal(st[0].spec.num_accepted_tokens, st[1].spec.num_accepted_tokens);
    for (int i = 0; i < 3; i++)
        assert_int_equal(st[0].spec.num_accepted_tokens_per_pos[i], st[1].spec.num_accepted_tokens_per_pos[i]);
}

/* max_tokens 1 .. 2k+1 gives exactly that many tokens; a stop id at every offset ends the output at its
 * first occurrence, as without drafts; prompts of max_model_len - j stay in range. */
static void test_limits_and_stops(void **state)
{
    (void)state;
    const int k = 3;
    struct hy_engine_config c0, c3;
    config(&c0, 0, 1, 512, NJ);
    config(&c3, k, 1, 512, NJ);
    for (int32_t mt = 1; mt <= 2 * k + 1; mt++) {
        struct out a[2], b[2];
        run_jobs(tiny, &c0, tjobs, 2, mt, 1, a, NULL);
        run_jobs(tiny, &c3, tjobs, 2, mt, 1, b, NULL);
        assert_same_out(a, b, 2);
        assert_int_equal(b[0].n, mt);
        assert_int_equal(b[0].finish, HY_ENGINE_FINISHED_LENGTH);
    }
    struct out ref;
    run_jobs(tiny, &c0, &tjobs[0], 1, 40, 1, &ref, NULL);
    for (int j = 0; j < ref.n; j++) {
        struct hy_engine_request r;
        req_init(&r, &tjobs[0], 40);
        r.stop_token_ids = &ref.toks[j];
        r.n_stop_token_ids = 1;
        struct out a, b;
        run_reqs(tiny, &c0, &r, 1, 1, &a, NULL);
        run_reqs(tiny, &c3, &r, 1, 1, &b, NULL);
        assert_same_out(&a, &b, 1);
        assert_int_equal(b.finish, HY_ENGINE_FINISHED_STOP);
        assert_int_equal(b.toks[b.n - 1], ref.toks[j]);
    }
    /* prompt lengths max_model_len - j, j = 1 .. k+1 */
    for (int j = 1; j <= k + 1; j++) {
        struct hy_engine_config d0 = c0, d3 = c3;
        d0.max_model_len = d3.max_model_len = tjobs[2].n + j;
        struct job jj = tjobs[2];
        struct out a, b;
        jj.n = tjobs[2].n; /* prompt fixed, max_model_len moves */
        run_jobs(tiny, &d0, &jj, 1, 40, 1, &a, NULL);
        run_jobs(tiny, &d3, &jj, 1, 40, 1, &b, NULL);
        assert_same_out(&a, &b, 1);
        assert_int_equal(b.n, j);
        assert_int_equal(b.finish, HY_ENGINE_FINISHED_LENGTH);
    }
}

/* Seeded sampling, logprobs, penalties: drafts on == off. */
static void test_sampling_logprobs_penalties(void **state)
{
    (void)state;
    struct hy_engine_request rs[NJ];
    for (int i = 0; i < NJ; i++) {
        req_init(&rs[i], &tjobs[i], 30);
        rs[i].params.temperature = 1.0f;
        rs[i].params.seed = 1000 + (uint64_t)i;
        rs[i].params.has_seed = 1;
        if (i % 2)
            rs[i].params.top_p = 0.9f, rs[i].params.top_k = 40;
        if (i >= 4) /* greedy with penalties */
            rs[i].params.temperature = 0.0f, rs[i].params.repetition_penalty = 1.3f,
            rs[i].params.presence_penalty = 0.5f, rs[i].params.frequency_penalty = 0.3f;
        rs[i].logprobs = 5;
    }
    struct hy_engine_config c0, c2;
    config(&c0, 0, 1, 512, NJ);
    config(&c2, 2, 1, 512, NJ);
    struct out a[NJ], b[NJ];
    struct hy_engine_stats st;
    run_reqs(tiny, &c0, rs, NJ, 1, a, NULL);
    run_reqs(tiny, &c2, rs, NJ, 1, b, &st);
    assert_same_out(a, b, NJ);
    assert_true(st.spec.num_accepted_tokens > 0);
    for (int i = 0; i < NJ; i++)
        for (int t = 0; t < a[i].n; t++) {
            assert_true(fabsf(a[i].lp[t] - b[i].lp[t]) < 1e-4f);
            for (int j = 0; j < 5; j++) {
                assert_int_equal(a[i].top[t][j], b[i].top[t][j]);
                assert_true(fabsf(a[i].top_lp[t][j] - b[i].top_lp[t][j]) < 1e-4f);
            }
        }
}

/* The sampler's distribution for logits lg[V] at temperature 1 with top_k: softmax over the k largest. */
static void topk_probs(const float *lg, int32_t V, int32_t k, double *p)
{
    int32_t best[16];
    for (int32_t i = 0; i < k; i++) {
        int32_t b = -1;
        for (int32_t v = 0; v < V; v++) {
            int taken = 0;
            for (int32_t j = 0; j < i; j++)
                taken |= best[j] == v;
            if (!taken && (b < 0 || lg[v] > lg[b]))
                b = v;
        }
        best[i] = b;
    }
    double z = 0.0;
    for (int32_t i = 0; i < k; i++)
        z += exp((double)lg[best[i]] - (double)lg[best[0]]);
    for (int32_t v = 0; v < V; v++)
        p[v] = 0.0;
    for (int32_t i = 0; i < k; i++)
        p[best[i]] = exp((double)lg[best[i]] - (double)lg[best[0]]) / z;
}

/* Chi-square: x2 (the first token sampled at a row verified against a draft, temperature 1, top_k 8)
 * over 10^4 seeded requests follows the target's marginal sum_x1 p(x1) p(x2 | x1); hy3-tiny accepts
 * many of these drafts, so both the accepted and the rejected path are in the sample. */
static void test_chi_square_verified_row(void **state)
{
    (void)state;
    struct hy_model *m = tiny;
    enum { MAXN = 16, TOPK = 8 };
#ifdef __SANITIZE_ADDRESS__
    const int32_t N = 2000; /* the sanitizer build checks memory, the plain build the statistics (10^4) */
#else
    const int32_t N = 10000;
#endif
    const int32_t V = m->cfg.vocab_size, P = tjobs[6].n;
    double *p1 = malloc((size_t)V * sizeof(double)), *p2 = calloc((size_t)V, sizeof(double));
    double *pc = malloc((size_t)V * sizeof(double));
    float *lg = malloc((size_t)V * sizeof(float));
    struct hy_kv_cache kv;
    assert_true(P + 1 <= MAXN);
    assert_int_equal(hy_model_kv_cache_init(m, &kv, 4, MAXN / 4), 0);
    int32_t ids[MAXN], pos[MAXN], sid[MAXN] = {0}, table[MAXN / 4];
    int64_t slots[MAXN];
    for (int32_t i = 0; i < MAXN; i++)
        pos[i] = i, slots[i] = i, ids[i] = i < P ? tjobs[6].ids[i] : 0;
    for (int32_t i = 0; i < MAXN / 4; i++)
        table[i] = i;
    const int32_t *tables[1] = {table};
    for (int32_t x1 = -1; x1 < V; x1++) {
        const int32_t n = x1 < 0 ? P : P + 1, last = n - 1;
        if (x1 >= 0) {
            if (p1[x1] == 0.0)
                continue;
            ids[P] = x1;
        }
        struct hy_batch b = {n, ids, pos, slots, sid, tables, 1, &last, 0};
        assert_int_equal(hy_model_forward(m, &kv, &b, lg, NULL), 0);
        topk_probs(lg, V, TOPK, x1 < 0 ? p1 : pc);
        if (x1 >= 0)
            for (int32_t v = 0; v < V; v++)
                p2[v] += p1[x1] * pc[v];
    }
    hy_kv_cache_free(&kv);
    struct hy_engine_config c;
    config(&c, 1, 1, 512, 64);
    c.max_waiting_requests = N;
    struct hy_engine *e = create(m, &c);
    uint64_t *rid = malloc((size_t)N * sizeof(uint64_t));
    int32_t *n_out = calloc((size_t)N, sizeof(int32_t));
    double *count = calloc((size_t)V, sizeof(double));
    for (int32_t i = 0; i < N; i++) {
        struct hy_engine_request r;
        req_init(&r, &tjobs[6], 3);
        r.params.temperature = 1.0f;
        r.params.top_k = TOPK;
        r.params.seed = 7 + (uint64_t)i;
        r.params.has_seed = 1;
        assert_int_equal(hy_engine_add_request(e, &r, &rid[i]), HY_ENGINE_OK);
    }
    while (hy_engine_has_work(e)) {
        const struct hy_engine_output *o;
        size_t no;
        assert_int_equal(hy_engine_step(e, &o, &no), 0);
        for (size_t k = 0; k < no; k++) {
            const int32_t i = (int32_t)(o[k].request_id - rid[0]);
            if (o[k].token_id >= 0 && n_out[i]++ == 1)
                count[o[k].token_id] += 1.0;
        }
    }
    struct hy_engine_stats st;
    hy_engine_get_stats(e, &st);
    assert_true(st.spec.num_drafts >= (uint64_t)N);
    hy_engine_free(e);
    /* bins with expected count >= 5, the rest pooled */
    double chi = 0.0, pool_e = 0.0, pool_o = 0.0;
    int bins = 0;
    for (int32_t v = 0; v < V; v++) {
        const double ex = p2[v] * N;
        if (ex >= 5.0) {
            chi += (count[v] - ex) * (count[v] - ex) / ex;
            bins++;
        } else {
            pool_e += ex;
            pool_o += count[v];
        }
    }
    if (pool_e >= 5.0) {
        chi += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        bins++;
    } else {
        assert_true(pool_o <= 10.0 + 3.0 * pool_e); /* no mass where the target has (almost) none */
    }
    const double dof = bins - 1, z = 3.72; /* p = 1e-4, Wilson-Hilferty */
    const double crit = dof * pow(1.0 - 2.0 / (9.0 * dof) + z * sqrt(2.0 / (9.0 * dof)), 3.0);
    fprintf(stderr, "chi-square %.1f over %d bins (critical %.1f at p = 1e-4), %llu of %llu drafts accepted\n", chi,
            bins, crit, (unsigned long long)st.spec.num_accepted_tokens, (unsigned long long)st.spec.num_drafts);
    assert_true(bins > 8);
    assert_true(chi < crit);
    assert_true(st.spec.num_accepted_tokens > (uint64_t)N / 10); /* the accepted path is well represented */
    free(p1);
    free(p2);
    free(pc);
    free(lg);
    free(rid);
    free(n_out);
    free(count);
}

/* The position-0 rule and the gate change speed and drafts, never outputs; bad settings are refused. */
static void test_switches_and_errors(void **state)
{
    (void)state;
    struct hy_engine_config c;
    struct out a[NJ], b[NJ], g[NJ];
    struct hy_engine_stats sa, sb;
    config(&c, 2, 1, 512, NJ);
    run_jobs(tiny, &c, tjobs, NJ, 24, 1, a, &sa);
    c.spec.mtp_zero_pos0 = 1;
    run_jobs(tiny, &c, tjobs, NJ, 24, 1, b, &sb);
    assert_same_out(a, b, NJ);
    c.spec.mtp_zero_pos0 = 0;
    c.spec.gate = 1;
    c.spec.draft_p_min = 0.6f;
    run_jobs(tiny, &c, tjobs, NJ, 24, 1, g, NULL);
    assert_same_out(a, g, NJ);
    /* refused at create */
    config(&c, 9, 1, 512, 1);
    assert_null(hy_engine_create(tiny, &c));
    assert_non_null(strstr(hy_err_msg(), "num_speculative_tokens"));
    config(&c, 1, 1, 512, 1);
    c.spec.draft_p_min = 1.5f;
    assert_null(hy_engine_create(tiny, &c));
    assert_non_null(strstr(hy_err_msg(), "draft_p_min"));
    config(&c, 1, 1, 512, 1);
    tiny->has_mtp = 0; /* as a checkpoint without model.layers.N.eh_proj loads (tests/e2e/test_spec_cli.sh) */
    assert_null(hy_engine_create(tiny, &c));
    tiny->has_mtp = 1;
    assert_non_null(strstr(hy_err_msg(), "MTP layer"));
    /* the JSON and dotted forms */
    struct hy_spec_config sc;
    hy_spec_config_init(&sc);
    assert_int_equal(hy_spec_config_parse_json(&sc, "{\"method\":\"mtp\",\"num_speculative_tokens\":3}"), 0);
    assert_int_equal(sc.num_speculative_tokens, 3);
    assert_int_equal(hy_spec_config_parse_json(&sc, "{\"method\":\"eagle\",\"num_speculative_tokens\":3}"), -1);
    assert_non_null(strstr(hy_err_msg(), "eagle"));
    assert_int_equal(hy_spec_config_parse_json(&sc, "{\"num_speculative_tokens\":3}"), -1);
    assert_int_equal(hy_spec_config_parse_json(&sc, "{\"method\":\"mtp\",\"speculative_tokens\":3}"), -1);
    assert_non_null(strstr(hy_err_msg(), "speculative_tokens"));
    assert_int_equal(hy_spec_config_parse_json(&sc, "[1]"), -1);
    assert_int_equal(hy_spec_config_parse_json(&sc, "{\"method\":\"mtp\",\"num_speculative_tokens\":0.5}"), -1);
    assert_int_equal(hy_spec_config_set(&sc, "num_speculative_tokens", "2"), 0);
    assert_int_equal(hy_spec_config_set(&sc, "gate", "off"), 0);
    assert_int_equal(sc.gate, 0);
    assert_int_equal(hy_spec_config_set(&sc, "draft_p_min", "x"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_identical_golden),
        cmocka_unit_test(test_greedy_identical_tiny),
        cmocka_unit_test(test_preemption),
        cmocka_unit_test(test_live_acceptance_equals_replay),
        cmocka_unit_test(test_shared_blocks_same_acceptance),
        cmocka_unit_test(test_limits_and_stops),
        cmocka_unit_test(test_sampling_logprobs_penalties),
        cmocka_unit_test(test_chi_square_verified_row),
        cmocka_unit_test(test_switches_and_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
