/* test_sampler.c - greedy, temperature, top-k, top-p, min-p, penalties, seeding, validation,
 * generation_config.json defaults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "sample/sampler.h"

#define BIG_VOCAB 128256

/* Deterministic test data: a small LCG-driven normal-ish generator. */
static uint64_t lcg_state = 88172645463325252ULL;
static double lcg_uniform(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg_state >> 11) * 0x1.0p-53;
}
static void random_logits(float *l, int32_t n, float scale)
{
    for (int32_t i = 0; i < n; i++) {
        double s = 0;
        for (int k = 0; k < 4; k++)
            s += lcg_uniform() - 0.5;
        l[i] = (float)(s * scale);
    }
}

static struct hy_sampling_params params(float t, float top_p, int32_t top_k, float min_p)
{
    struct hy_sampling_params p;
    hy_sampling_params_init(&p);
    p.temperature = t;
    p.top_p = top_p;
    p.top_k = top_k;
    p.min_p = min_p;
    p.has_seed = 1;
    p.seed = 42;
    return p;
}

/* Draws `draws` tokens from fixed logits (copied each time); counts[i] += hits. */
static void histogram(struct hy_sampler *s, const float *logits, int32_t n, int draws, int *counts)
{
    float *tmp = malloc((size_t)n * sizeof(float));
    for (int d = 0; d < draws; d++) {
        memcpy(tmp, logits, (size_t)n * sizeof(float));
        int32_t id = hy_sampler_sample(s, tmp);
        assert_true(id >= 0 && id < n);
        counts[id]++;
    }
    free(tmp);
}

static void test_argmax(void **state)
{
    (void)state;
    float a[] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
    assert_int_equal(hy_argmax_f32(a, 5), 1); /* tie: lowest id */
    float b[] = {NAN, -INFINITY, -3.0f, NAN};
    assert_int_equal(hy_argmax_f32(b, 4), 2);
    float c[] = {NAN, NAN};
    assert_int_equal(hy_argmax_f32(c, 2), 0);
    float d[] = {-INFINITY, -INFINITY, -INFINITY};
    assert_int_equal(hy_argmax_f32(d, 3), 0);
    float e[] = {1.0f, INFINITY, INFINITY};
    assert_int_equal(hy_argmax_f32(e, 3), 1);
}

static void test_greedy_is_argmax(void **state)
{
    (void)state;
    float *l = malloc(BIG_VOCAB * sizeof(float));
    struct hy_sampling_params p;
    hy_sampling_params_init(&p); /* greedy defaults */
    struct hy_sampler *s = hy_sampler_create(&p, BIG_VOCAB);
    assert_non_null(s);
    for (int it = 0; it < 20; it++) {
        random_logits(l, BIG_VOCAB, 8.0f);
        int32_t want = hy_argmax_f32(l, BIG_VOCAB);
        assert_int_equal(hy_sampler_sample(s, l), want);
    }
    hy_sampler_free(s);
    free(l);
}

static void test_top_k_one_is_greedy(void **state)
{
    (void)state;
    float *l = malloc(BIG_VOCAB * sizeof(float));
    struct hy_sampling_params p = params(1.0f, 1.0f, 1, 0.0f);
    struct hy_sampler *s = hy_sampler_create(&p, BIG_VOCAB);
    assert_non_null(s);
    for (int it = 0; it < 20; it++) {
        random_logits(l, BIG_VOCAB, 1.0f);
        int32_t want = hy_argmax_f32(l, BIG_VOCAB);
        assert_int_equal(hy_sampler_sample(s, l), want);
    }
    hy_sampler_free(s);
    free(l);
}

static void test_temperature_to_zero(void **state)
{
    (void)state;
    /* distinct logits with gaps >= 0.05: at T = 1e-3 the runner-up has weight e^-50 */
    enum { N = 1000 };
    float base[N];
    for (int i = 0; i < N; i++)
        base[i] = (float)((i * 37) % N) * 0.05f;
    int32_t want = hy_argmax_f32(base, N);
    struct hy_sampling_params p = params(1e-3f, 1.0f, 0, 0.0f);
    struct hy_sampler *s = hy_sampler_create(&p, N);
    int counts[N] = {0};
    histogram(s, base, N, 300, counts);
    assert_int_equal(counts[want], 300);
    hy_sampler_free(s);
    /* and below vLLM's epsilon it is exactly greedy, ties to the lowest id */
    float tie[4] = {1.0f, 3.0f, 3.0f, 0.0f};
    p = params(1e-7f, 1.0f, 0, 0.0f);
    s = hy_sampler_create(&p, 4);
    int c2[4] = {0};
    histogram(s, tie, 4, 100, c2);
    assert_int_equal(c2[1], 100);
    hy_sampler_free(s);
}

static void test_seed_reproducible(void **state)
{
    (void)state;
    enum { N = 5000, STEPS = 200 };
    float *logits = malloc((size_t)STEPS * N * sizeof(float));
    for (int t = 0; t < STEPS; t++)
        random_logits(logits + (size_t)t * N, N, 3.0f);
    float *tmp = malloc(N * sizeof(float));
    int32_t seq[3][STEPS];
    uint64_t seeds[3] = {7, 7, 8};
    for (int r = 0; r < 3; r++) {
        struct hy_sampling_params p = params(1.0f, 0.95f, 0, 0.0f);
        p.seed = seeds[r];
        p.repetition_penalty = 1.1f;
        struct hy_sampler *s = hy_sampler_create(&p, N);
        assert_int_equal(hy_sampler_seed(s), seeds[r]);
        for (int t = 0; t < STEPS; t++) {
            memcpy(tmp, logits + (size_t)t * N, N * sizeof(float));
            seq[r][t] = hy_sampler_sample(s, tmp);
        }
        hy_sampler_free(s);
    }
    assert_memory_equal(seq[0], seq[1], sizeof(seq[0]));
    int differ = 0;
    for (int t = 0; t < STEPS; t++)
        differ += seq[0][t] != seq[2][t];
    assert_true(differ > STEPS / 2);
    /* unseeded samplers draw their own seeds */
    struct hy_sampling_params p = params(1.0f, 1.0f, 0, 0.0f);
    p.has_seed = 0;
    struct hy_sampler *a = hy_sampler_create(&p, N), *b = hy_sampler_create(&p, N);
    assert_true(hy_sampler_seed(a) != hy_sampler_seed(b));
    hy_sampler_free(a);
    hy_sampler_free(b);
    free(tmp);
    free(logits);
}

/* probabilities 0.5, 0.3, 0.1, 0.06, 0.04 */
static void small_dist(float *l)
{
    const double pr[5] = {0.5, 0.3, 0.1, 0.06, 0.04};
    for (int i = 0; i < 5; i++)
        l[i] = (float)log(pr[i]);
}

static void test_full_distribution(void **state)
{
    (void)state;
    float l[5];
    small_dist(l);
    struct hy_sampling_params p = params(1.0f, 1.0f, 0, 0.0f);
    struct hy_sampler *s = hy_sampler_create(&p, 5);
    int counts[5] = {0};
    const int draws = 40000;
    histogram(s, l, 5, draws, counts);
    const double pr[5] = {0.5, 0.3, 0.1, 0.06, 0.04};
    for (int i = 0; i < 5; i++) {
        double f = (double)counts[i] / draws;
        double sd = sqrt(pr[i] * (1 - pr[i]) / draws);
        if (fabs(f - pr[i]) > 5 * sd)
            fail_msg("token %d: frequency %.4f, expected %.4f", i, f, pr[i]);
    }
    hy_sampler_free(s);
    /* temperature 2 flattens: p ~ sqrt(pr) */
    p = params(2.0f, 1.0f, 0, 0.0f);
    s = hy_sampler_create(&p, 5);
    int c2[5] = {0};
    histogram(s, l, 5, draws, c2);
    double z = 0;
    for (int i = 0; i < 5; i++)
        z += sqrt(pr[i]);
    for (int i = 0; i < 5; i++) {
        double q = sqrt(pr[i]) / z, f = (double)c2[i] / draws;
        double sd = sqrt(q * (1 - q) / draws);
        if (fabs(f - q) > 5 * sd)
            fail_msg("T=2 token %d: frequency %.4f, expected %.4f", i, f, q);
    }
    hy_sampler_free(s);
}

static void test_top_p_nucleus(void **state)
{
    (void)state;
    float l[5];
    small_dist(l);
    /* top_p 0.75: 0.5 < 0.75 <= 0.8, so the nucleus is {0, 1}, renormalized to 5/8, 3/8 */
    struct hy_sampling_params p = params(1.0f, 0.75f, 0, 0.0f);
    struct hy_sampler *s = hy_sampler_create(&p, 5);
    int counts[5] = {0};
    const int draws = 20000;
    histogram(s, l, 5, draws, counts);
    assert_int_equal(counts[2] + counts[3] + counts[4], 0);
    double f0 = (double)counts[0] / draws;
    assert_true(fabs(f0 - 0.625) < 5 * sqrt(0.625 * 0.375 / draws));
    hy_sampler_free(s);
    /* top_p 0.85 adds token 2 */
    p = params(1.0f, 0.85f, 0, 0.0f);
    s = hy_sampler_create(&p, 5);
    int c2[5] = {0};
    histogram(s, l, 5, draws, c2);
    assert_int_equal(c2[3] + c2[4], 0);
    assert_true(c2[2] > 0);
    hy_sampler_free(s);
    /* top_p 0.4: only the top token */
    p = params(1.0f, 0.4f, 0, 0.0f);
    s = hy_sampler_create(&p, 5);
    int c3[5] = {0};
    histogram(s, l, 5, 500, c3);
    assert_int_equal(c3[0], 500);
    hy_sampler_free(s);
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y ? 1 : 0;
}

/* A large vocabulary (the bucketed nucleus path): every draw must lie inside the brute-force
 * nucleus (full sort in double), and the nucleus must be well covered. */
static void check_top_p_large(float scale, double top_p, int draws, int min_nucleus, int min_distinct)
{
    enum { N = 50000 };
    float *l = malloc(N * sizeof(float));
    random_logits(l, N, scale);
    double *pr = malloc(N * sizeof(double)), *sorted = malloc(N * sizeof(double));
    double lmax = -INFINITY, z = 0;
    for (int i = 0; i < N; i++)
        lmax = fmax(lmax, l[i]);
    for (int i = 0; i < N; i++)
        z += (pr[i] = exp((double)l[i] - lmax));
    memcpy(sorted, pr, N * sizeof(double));
    qsort(sorted, N, sizeof(double), cmp_desc);
    double cum = 0, thr = 0;
    int nucleus = 0;
    for (int i = 0; i < N; i++) {
        cum += sorted[i] / z;
        nucleus++;
        if (cum >= top_p) {
            thr = sorted[i];
            break;
        }
    }
    print_message("scale %g top_p %g: nucleus of %d tokens\n", (double)scale, top_p, nucleus);
    assert_true(nucleus >= min_nucleus);
    struct hy_sampling_params p = params(1.0f, (float)top_p, 0, 0.0f);
    struct hy_sampler *s = hy_sampler_create(&p, N);
    int *counts = calloc(N, sizeof(int));
    histogram(s, l, N, draws, counts);
    int distinct = 0;
    for (int i = 0; i < N; i++) {
        if (!counts[i])
            continue;
        distinct++;
        /* allow float-vs-double rounding right at the boundary */
        if (pr[i] < thr * (1 - 1e-5))
            fail_msg("token %d (p=%g) drawn outside the nucleus (threshold %g)", i, pr[i] / z, thr / z);
    }
    assert_true(distinct >= min_distinct);
    hy_sampler_free(s);
    free(counts);
    free(pr);
    free(sorted);
    free(l);
}

static void test_top_p_large_vocab(void **state)
{
    (void)state;
    check_top_p_large(2.0f, 0.9, 1500, 4096, 800); /* flat: a nucleus of thousands */
    check_top_p_large(12.0f, 0.5, 300, 2, 2);      /* peaky: a handful */
    check_top_p_large(6.0f, 0.99, 300, 100, 50);
}

static void test_top_k(void **state)
{
    (void)state;
    enum { N = 10 };
    float l[N] = {0.1f, 2.0f, 0.3f, 1.9f, -1.0f, 1.8f, 0.0f, 1.7f, 0.2f, 1.85f};
    /* top 3: ids 1 (2.0), 3 (1.9), 9 (1.85) */
    struct hy_sampling_params p = params(1.0f, 1.0f, 3, 0.0f);
    struct hy_sampler *s = hy_sampler_create(&p, N);
    int counts[N] = {0};
    histogram(s, l, N, 6000, counts);
    for (int i = 0; i < N; i++) {
        if (i == 1 || i == 3 || i == 9)
            assert_true(counts[i] > 1000);
        else
            assert_int_equal(counts[i], 0);
    }
    hy_sampler_free(s);
    /* ties at the boundary go to the lowest ids */
    float t[6] = {1.0f, 5.0f, 1.0f, 1.0f, 5.0f, 1.0f};
    p = params(1.0f, 1.0f, 3, 0.0f);
    s = hy_sampler_create(&p, 6);
    int c2[6] = {0};
    histogram(s, t, 6, 3000, c2);
    assert_true(c2[0] > 0 && c2[1] > 0 && c2[4] > 0);
    assert_int_equal(c2[2] + c2[3] + c2[5], 0);
    hy_sampler_free(s);
    /* top-k then top-p on the renormalized top-k mass, on a 128k vocab */
    float *big = malloc(BIG_VOCAB * sizeof(float));
    random_logits(big, BIG_VOCAB, 1.0f);
    big[777] = 20.0f;  /* p ~ 0.73 within the top 2 */
    big[4242] = 19.0f; /* p ~ 0.27 */
    p = params(1.0f, 0.7f, 2, 0.0f);
    s = hy_sampler_create(&p, BIG_VOCAB);
    int *c3 = calloc(BIG_VOCAB, sizeof(int));
    histogram(s, big, BIG_VOCAB, 200, c3);
    assert_int_equal(c3[777], 200);
    hy_sampler_free(s);
    p = params(1.0f, 1.0f, 2, 0.0f);
    s = hy_sampler_create(&p, BIG_VOCAB);
    memset(c3, 0, BIG_VOCAB * sizeof(int));
    histogram(s, big, BIG_VOCAB, 400, c3);
    assert_int_equal(c3[777] + c3[4242], 400);
    assert_true(c3[4242] > 40);
    hy_sampler_free(s);
    free(c3);
    free(big);
}

static void test_min_p(void **state)
{
    (void)state;
    float l[5];
    small_dist(l);
    /* threshold 0.15 * 0.5 = 0.075: keeps ids 0, 1, 2 */
    struct hy_sampling_params p = params(1.0f, 1.0f, 0, 0.15f);
    struct hy_sampler *s = hy_sampler_create(&p, 5);
    int counts[5] = {0};
    histogram(s, l, 5, 20000, counts);
    assert_int_equal(counts[3] + counts[4], 0);
    assert_true(counts[2] > 1000); /* 0.1 / 0.9 of the draws */
    hy_sampler_free(s);
    /* combined with top-p (sorted path) */
    p = params(1.0f, 0.95f, 0, 0.5f); /* threshold 0.25 keeps 0, 1 */
    s = hy_sampler_create(&p, 5);
    int c2[5] = {0};
    histogram(s, l, 5, 5000, c2);
    assert_int_equal(c2[2] + c2[3] + c2[4], 0);
    assert_true(c2[1] > 1000);
    hy_sampler_free(s);
    /* min_p = 1 keeps only the maximum */
    p = params(1.0f, 1.0f, 0, 1.0f);
    s = hy_sampler_create(&p, 5);
    int c3[5] = {0};
    histogram(s, l, 5, 300, c3);
    assert_int_equal(c3[0], 300);
    hy_sampler_free(s);
}

static void test_repetition_penalty(void **state)
{
    (void)state;
    struct hy_sampling_params p;
    hy_sampling_params_init(&p);
    p.repetition_penalty = 2.0f;
    struct hy_sampler *s = hy_sampler_create(&p, 6);
    int32_t prompt[] = {0, 1, 0, 7 /* out of range: ignored */};
    hy_sampler_accept_prompt(s, prompt, 4);
    float l[6] = {3.0f, -1.0f, 2.0f, 0.5f, 1.0f, 0.0f};
    hy_sampler_apply_penalties(s, l);
    /* HF rule: positive logits are divided, negative ones multiplied; once per distinct token */
    assert_float_equal(l[0], 1.5f, 0);
    assert_float_equal(l[1], -2.0f, 0);
    assert_float_equal(l[2], 2.0f, 0);
    assert_float_equal(l[3], 0.5f, 0);
    /* greedy picks token 2 now (3.0 / 2 < 2.0), then token 2 is penalized too */
    float m[6] = {3.0f, -1.0f, 2.0f, 0.5f, 1.0f, 0.0f};
    assert_int_equal(hy_sampler_sample(s, m), 2);
    float n[6] = {3.0f, -1.0f, 2.0f, 0.5f, 1.2f, 0.0f};
    assert_int_equal(hy_sampler_sample(s, n), 0); /* 1.5 vs 1.0 vs 1.2 */
    hy_sampler_free(s);
}

static void test_presence_frequency(void **state)
{
    (void)state;
    struct hy_sampling_params p;
    hy_sampling_params_init(&p);
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    struct hy_sampler *s = hy_sampler_create(&p, 4);
    int32_t prompt[] = {3};
    hy_sampler_accept_prompt(s, prompt, 1); /* prompt tokens do not count (OpenAI rule) */
    float a[4] = {5.0f, 0.0f, 0.0f, 0.0f};
    assert_int_equal(hy_sampler_sample(s, a), 0);
    float b[4] = {5.0f, 0.0f, 0.0f, 0.0f};
    assert_int_equal(hy_sampler_sample(s, b), 0);
    float c[4] = {1.0f, 1.0f, 2.0f, 3.0f};
    hy_sampler_apply_penalties(s, c);
    /* token 0 seen twice: 1 - 0.5 - 2 * 0.25 = 0 */
    assert_float_equal(c[0], 0.0f, 1e-6);
    assert_float_equal(c[1], 1.0f, 0);
    assert_float_equal(c[3], 3.0f, 0);
    hy_sampler_free(s);
}

static void test_nonfinite_logits(void **state)
{
    (void)state;
    struct hy_sampling_params p = params(1.0f, 0.9f, 0, 0.0f);
    struct hy_sampler *s = hy_sampler_create(&p, 4);
    float a[4] = {NAN, 1.0f, NAN, 1.0f};
    for (int i = 0; i < 50; i++) {
        float t[4];
        memcpy(t, a, sizeof(t));
        int32_t id = hy_sampler_sample(s, t);
        assert_true(id == 1 || id == 3);
    }
    float b[4] = {0.0f, INFINITY, 1.0f, INFINITY};
    assert_int_equal(hy_sampler_sample(s, b), 1);
    float c[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    assert_int_equal(hy_sampler_sample(s, c), 0);
    hy_sampler_free(s);
}

static void expect_invalid(struct hy_sampling_params p, const char *frag)
{
    assert_int_equal(hy_sampling_params_validate(&p), -1);
    if (!strstr(hy_err_msg(), frag))
        fail_msg("message \"%s\" lacks \"%s\"", hy_err_msg(), frag);
    hy_err_clear();
    assert_null(hy_sampler_create(&p, 100));
    assert_non_null(strstr(hy_err_msg(), frag));
}

static void test_validation(void **state)
{
    (void)state;
    struct hy_sampling_params p;
    hy_sampling_params_init(&p);
    assert_int_equal(hy_sampling_params_validate(&p), 0);
    struct hy_sampling_params q;
    q = p;
    q.temperature = -0.5f;
    expect_invalid(q, "temperature=-0.5");
    q = p;
    q.temperature = NAN;
    expect_invalid(q, "temperature=");
    q = p;
    q.temperature = INFINITY;
    expect_invalid(q, "temperature=inf");
    q = p;
    q.top_p = 0.0f;
    expect_invalid(q, "top_p=0");
    q = p;
    q.top_p = 1.5f;
    expect_invalid(q, "top_p=1.5");
    q = p;
    q.min_p = -0.1f;
    expect_invalid(q, "min_p=-0.1");
    q = p;
    q.min_p = 1.1f;
    expect_invalid(q, "min_p=1.1");
    q = p;
    q.repetition_penalty = 0.0f;
    expect_invalid(q, "repetition_penalty=0");
    q = p;
    q.presence_penalty = 2.5f;
    expect_invalid(q, "presence_penalty=2.5");
    q = p;
    q.frequency_penalty = -3.0f;
    expect_invalid(q, "frequency_penalty=-3");
    q = p;
    q.max_new_tokens = -1;
    expect_invalid(q, "max_new_tokens=-1");
    /* edge values are fine */
    q = p;
    q.top_p = 1.0f;
    q.min_p = 1.0f;
    q.presence_penalty = -2.0f;
    q.frequency_penalty = 2.0f;
    q.top_k = -1;
    q.max_new_tokens = 0;
    assert_int_equal(hy_sampling_params_validate(&q), 0);
    assert_null(hy_sampler_create(&p, 0));
    assert_non_null(strstr(hy_err_msg(), "vocab_size=0"));
}

static char gdir[256];

static void write_gen(const char *text)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/generation_config.json", gdir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_generation_config(void **state)
{
    (void)state;
    const char *base = access("build", W_OK) == 0 ? "build" : "/tmp";
    snprintf(gdir, sizeof(gdir), "%s/test_sampler_XXXXXX", base);
    assert_non_null(mkdtemp(gdir));
    struct hy_sampling_params p;

    /* missing file: not an error, nothing changes */
    hy_sampling_params_init(&p);
    assert_int_equal(hy_sampling_params_from_generation_config(gdir, &p), 0);
    assert_float_equal(p.temperature, 0.0f, 0);

    write_gen("{\"do_sample\": true, \"top_k\": 20, \"top_p\": 0.8, \"repetition_penalty\": 1.05,"
              " \"temperature\": 0.7, \"min_p\": 0.01, \"eos_token_id\": [1, 2]}");
    hy_sampling_params_init(&p);
    assert_int_equal(hy_sampling_params_from_generation_config(gdir, &p), 0);
    assert_float_equal(p.temperature, 0.7f, 1e-6);
    assert_float_equal(p.top_p, 0.8f, 1e-6);
    assert_int_equal(p.top_k, 20);
    assert_float_equal(p.min_p, 0.01f, 1e-6);
    assert_float_equal(p.repetition_penalty, 1.05f, 1e-6);

    write_gen("{\"do_sample\": false, \"temperature\": 0.7, \"top_k\": 0}");
    hy_sampling_params_init(&p);
    assert_int_equal(hy_sampling_params_from_generation_config(gdir, &p), 0);
    assert_float_equal(p.temperature, 0.0f, 0);
    assert_int_equal(p.top_k, 0);

    write_gen("{\"temperature\": 0.7,\n \"top_p\": }");
    hy_sampling_params_init(&p);
    assert_int_equal(hy_sampling_params_from_generation_config(gdir, &p), -1);
    assert_non_null(strstr(hy_err_msg(), "generation_config.json:2:"));
    assert_float_equal(p.temperature, 0.0f, 0); /* untouched on error */

    write_gen("{\"top_p\": \"0.8\"}");
    assert_int_equal(hy_sampling_params_from_generation_config(gdir, &p), -1);
    assert_non_null(strstr(hy_err_msg(), "\"top_p\": expected a number"));
    write_gen("{\"top_k\": 2.5}");
    assert_int_equal(hy_sampling_params_from_generation_config(gdir, &p), -1);
    assert_non_null(strstr(hy_err_msg(), "top_k"));
    write_gen("{\"do_sample\": 1}");
    assert_int_equal(hy_sampling_params_from_generation_config(gdir, &p), -1);
    assert_non_null(strstr(hy_err_msg(), "do_sample"));
    write_gen("{\"top_p\": 1.5}");
    assert_int_equal(hy_sampling_params_from_generation_config(gdir, &p), -1);
    assert_non_null(strstr(hy_err_msg(), "generation_config.json"));
    assert_non_null(strstr(hy_err_msg(), "top_p=1.5"));
    write_gen("[1, 2]");
    assert_int_equal(hy_sampling_params_from_generation_config(gdir, &p), -1);
    assert_non_null(strstr(hy_err_msg(), "expected a JSON object"));

    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", gdir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_greedy_is_argmax),
        cmocka_unit_test(test_top_k_one_is_greedy),
        cmocka_unit_test(test_temperature_to_zero),
        cmocka_unit_test(test_seed_reproducible),
        cmocka_unit_test(test_full_distribution),
        cmocka_unit_test(test_top_p_nucleus),
        cmocka_unit_test(test_top_p_large_vocab),
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_repetition_penalty),
        cmocka_unit_test(test_presence_frequency),
        cmocka_unit_test(test_nonfinite_logits),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_generation_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
