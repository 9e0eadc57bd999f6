/* test_quality.c - the per-position measures of src/bench/quality.c (KL, ties, top-5 rule, NLL),
 * their accumulation, and the held-out text split (characters, not bytes; strict UTF-8). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/timing.h"
#include "bench/quality.h"

/* Direct double-precision reference: log-softmax of each row, then sum p_b (lp_b - lp_a). */
static double ref_kl(const float *a, const float *b, int32_t V, double *nll_a, double *nll_b, int32_t t)
{
    double ma = -INFINITY, mb = -INFINITY, sa = 0, sb = 0, kl = 0;
    for (int32_t v = 0; v < V; v++) {
        ma = fmax(ma, a[v]);
        mb = fmax(mb, b[v]);
    }
    for (int32_t v = 0; v < V; v++) {
        sa += exp(a[v] - ma);
        sb += exp(b[v] - mb);
    }
    for (int32_t v = 0; v < V; v++) {
        const double la = a[v] - ma - log(sa), lb = b[v] - mb - log(sb);
        kl += exp(lb) * (lb - la);
    }
    *nll_a = -(a[t] - ma - log(sa));
    *nll_b = -(b[t] - mb - log(sb));
    return kl;
}

static uint64_t rng = 0x243F6A8885A308D3ull;
static float rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) * 0x1.0p-53 * 8.0 - 4.0);
}

static void test_kl_matches_reference(void **state)
{
    (void)state;
    enum { V = 1000 };
    static float a[V], b[V];
    for (int trial = 0; trial < 20; trial++) {
        for (int v = 0; v < V; v++) {
            b[v] = rnd();
            a[v] = b[v] + (trial % 2 ? 0.5f : 0.01f) * rnd();
        }
        struct hy_quality_row r;
        assert_int_equal(hy_quality_row_measure(a, b, V, trial * 37 % V, &r), 0);
        double na, nb;
        const double kl = ref_kl(a, b, V, &na, &nb, trial * 37 % V);
        assert_true(kl > 0);
        assert_true(fabs(r.kl - kl) <= 1e-12 * fmax(1.0, kl) + 1e-15);
        assert_true(fabs(r.nll_a - na) <= 1e-12 * na);
        assert_true(fabs(r.nll_b - nb) <= 1e-12 * nb);
    }
    /* identical rows: exactly 0, whatever the values */
    struct hy_quality_row r;
    assert_int_equal(hy_quality_row_measure(b, b, V, -1, &r), 0);
    assert_true(r.kl == 0.0 && r.nll_a == 0.0 && r.nll_b == 0.0);
    assert_int_equal(r.top1_a, r.top1_b);
    assert_int_equal(r.a_in_b_top5, 1);
}

static void test_ties_and_top5(void **state)
{
    (void)state;
    /* ties: the lowest id wins on each side */
    const float a[8] = {1, 3, 3, 0, 0, 0, 0, 0};
    const float b[8] = {5, 5, 5, 5, 5, 5, 5, 5};
    struct hy_quality_row r;
    assert_int_equal(hy_quality_row_measure(a, b, 8, 2, &r), 0);
    assert_int_equal(r.top1_a, 1);
    assert_int_equal(r.top1_b, 0);
    /* all of B tied: B's order is 0,1,2,...; A's top-1 (1) is 2nd -> in top-5 */
    assert_int_equal(r.a_in_b_top5, 1);
    /* A's top-1 at id 5 among 8 tied in B: ids 0..4 come first -> 6th -> not in top-5 */
    const float a5[8] = {0, 0, 0, 0, 0, 9, 0, 0};
    assert_int_equal(hy_quality_row_measure(a5, b, 8, -1, &r), 0);
    assert_int_equal(r.top1_a, 5);
    assert_int_equal(r.a_in_b_top5, 0);
    /* A's top-1 at id 4: 5th -> in */
    const float a4[8] = {0, 0, 0, 0, 9, 0, 0, 0};
    assert_int_equal(hy_quality_row_measure(a4, b, 8, -1, &r), 0);
    assert_int_equal(r.a_in_b_top5, 1);
    /* by value: B ranks id 7 > 6 > 5 > 4 > 3 > 2 ...; A's top-1 = 3 is 5th, = 2 is 6th */
    const float bv[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const float a3[8] = {0, 0, 0, 9, 0, 0, 0, 0}, a2[8] = {0, 0, 9, 0, 0, 0, 0, 0};
    assert_int_equal(hy_quality_row_measure(a3, bv, 8, -1, &r), 0);
    assert_int_equal(r.a_in_b_top5, 1);
    assert_int_equal(hy_quality_row_measure(a2, bv, 8, -1, &r), 0);
    assert_int_equal(r.a_in_b_top5, 0);
    assert_int_equal(r.top1_b, 7);
}

static void test_bad_rows(void **state)
{
    (void)state;
    float a[4] = {0, 1, 2, 3}, b[4] = {0, 1, 2, 3};
    struct hy_quality_row r;
    assert_int_equal(hy_quality_row_measure(a, b, 4, 4, &r), -1);
    assert_non_null(strstr(hy_err_msg(), "target id 4"));
    a[2] = NAN;
    assert_int_equal(hy_quality_row_measure(a, b, 4, 0, &r), -1);
    assert_non_null(strstr(hy_err_msg(), "model A"));
    a[2] = 2;
    b[1] = INFINITY;
    assert_int_equal(hy_quality_row_measure(a, b, 4, 0, &r), -1);
    assert_non_null(strstr(hy_err_msg(), "reference"));
    /* accumulate names the position and leaves the stats alone */
    struct hy_quality_stats s;
    hy_quality_stats_init(&s);
    float rows_a[8] = {0, 1, 2, 3, 0, 1, 2, 3}, rows_b[8] = {0, 1, 2, 3, 0, NAN, 2, 3};
    assert_int_equal(hy_quality_accumulate(&s, rows_a, rows_b, 2, 4, NULL), -1);
    assert_non_null(strstr(hy_err_msg(), "position 1"));
    assert_int_equal(s.positions, 0);
}

static void test_accumulate(void **state)
{
    (void)state;
    enum { V = 300, N = 7 };
    static float a[N * V], b[N * V];
    int32_t t[N];
    for (int i = 0; i < N * V; i++) {
        b[i] = rnd();
        a[i] = b[i] + (i / V == 4 ? 1.0f : 0.05f) * rnd(); /* row 4 differs most */
    }
    double sum = 0, mx = -1, na = 0, nb = 0;
    int64_t agree = 0;
    for (int i = 0; i < N; i++) {
        t[i] = (i * 41) % V;
        double x, y;
        const double kl = ref_kl(a + i * V, b + i * V, V, &x, &y, t[i]);
        sum += kl;
        mx = fmax(mx, kl);
        na += x;
        nb += y;
        struct hy_quality_row r;
        hy_quality_row_measure(a + i * V, b + i * V, V, t[i], &r);
        agree += r.top1_a == r.top1_b;
    }
    struct hy_quality_stats s;
    hy_quality_stats_init(&s);
    assert_int_equal(hy_quality_accumulate(&s, a, b, 3, V, t), 0);
    assert_int_equal(hy_quality_accumulate(&s, a + 3 * V, b + 3 * V, N - 3, V, t + 3), 0);
    assert_int_equal(s.positions, N);
    assert_int_equal(s.max_kl_position, 4);
    assert_int_equal(s.top1_agree, agree);
    assert_true(fabs(s.sum_kl - sum) <= 1e-12 * sum);
    assert_true(fabs(s.max_kl - mx) <= 1e-12 * mx);
    struct hy_quality_summary su;
    hy_quality_summarize(&s, &su);
    assert_true(fabs(su.mean_kl - sum / N) <= 1e-12 * sum);
    assert_true(fabs(su.ppl_a - exp(na / N)) <= 1e-10 * su.ppl_a);
    assert_true(fabs(su.ppl_b - exp(nb / N)) <= 1e-10 * su.ppl_b);
    assert_true(su.top1_agreement == (double)agree / N);
    const double p = (double)agree / N;
    assert_true(fabs(su.top1_stderr - sqrt(p * (1.0 - p) / N)) <= 1e-15);
}

/* Not a timing assertion: prints the cost of 64 rows of a 128k vocabulary (the CLI's step). */
static void test_big_vocab_rows(void **state)
{
    (void)state;
    enum { V = 128192, N = 64 };
    float *a = malloc((size_t)N * V * sizeof(float)), *b = malloc((size_t)N * V * sizeof(float));
    assert_non_null(a);
    assert_non_null(b);
    for (size_t i = 0; i < (size_t)N * V; i++) {
        b[i] = rnd();
        a[i] = b[i];
    }
    struct hy_quality_stats s;
    hy_quality_stats_init(&s);
    const double t0 = hy_time_now();
    assert_int_equal(hy_quality_accumulate(&s, a, b, N, V, NULL), 0);
    print_message("64 rows x %d vocab: %.3f s\n", V, hy_time_now() - t0);
    assert_true(s.sum_kl == 0.0 && s.top1_agree == N && s.a_in_b_top5 == N);
    free(a);
    free(b);
}

static void test_text_tail(void **state)
{
    (void)state;
    /* "héllo wörld!" = 12 characters, 14 bytes; int(12 * 0.5) = 6 -> starts at "wörld!" */
    const char *t = "h\xc3\xa9llo w\xc3\xb6rld!";
    size_t off;
    int64_t start, n;
    assert_int_equal(hy_quality_text_tail(t, strlen(t), 0.5, &off, &start, &n), 0);
    assert_int_equal(n, 12);
    assert_int_equal(start, 6);
    assert_int_equal(off, 7);
    assert_string_equal(t + off, "w\xc3\xb6rld!");
    /* Python: int(10 * 0.9) == 9 (0.9 * 10 rounds to exactly 9.0) */
    assert_int_equal(hy_quality_text_tail("0123456789", 10, 0.9, &off, &start, &n), 0);
    assert_int_equal(start, 9);
    assert_int_equal(hy_quality_text_tail("abc", 3, 0.0, &off, &start, &n), 0);
    assert_int_equal(off, 0);
    /* 4-byte characters count once */
    assert_int_equal(hy_quality_utf8_chars("\xf0\x9f\x98\x80x", 5), 2);
    /* strict UTF-8: overlong, surrogate, > U+10FFFF, truncated, stray continuation */
    const char *bad[] = {"\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\x80"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(hy_quality_utf8_chars(bad[i], strlen(bad[i])), -1);
    assert_int_equal(hy_quality_text_tail("abc", 3, 1.0, &off, &start, &n), -1);
    assert_int_equal(hy_quality_text_tail("abc", 3, -0.1, &off, &start, &n), -1);
}

static void test_exp(void **state)
{
    (void)state;
    double worst = 0;
    for (int i = 0; i <= 2000000; i++) {
        const double x = -700.0 * i / 2000000.0;
        const double want = exp(x), got = hy_quality_exp_neg(x);
        worst = fmax(worst, fabs(got - want) / want);
    }
    print_message("exp_neg: worst relative error %.3g on [-700, 0]\n", worst);
    assert_true(worst < 4e-16);
    assert_true(hy_quality_exp_neg(0.0) == 1.0);
    assert_true(hy_quality_exp_neg(-800.0) == 0.0 && hy_quality_exp_neg(-INFINITY) == 0.0);
}

/* A logit range over 700 nats takes the scalar path: same measures as the reference. */
static void test_wide_range(void **state)
{
    (void)state;
    float a[5] = {0, -800, 3, 1, -50}, b[5] = {0.5f, -900, 2, 1, -20};
    struct hy_quality_row r;
    double na, nb;
    assert_int_equal(hy_quality_row_measure(a, b, 5, 1, &r), 0);
    const double kl = ref_kl(a, b, 5, &na, &nb, 1);
    assert_true(fabs(r.kl - kl) <= 1e-12 * kl);
    assert_true(fabs(r.nll_a - na) <= 1e-12 * na && fabs(r.nll_b - nb) <= 1e-12 * nb);
}

static void test_tokens_needed(void **state)
{
    (void)state;
    assert_int_equal(hy_quality_tokens_needed(1000, 5), 1000);  /* BOS + text per window */
    assert_int_equal(hy_quality_tokens_needed(1000, -1), 1001); /* plain text: one more to predict from */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kl_matches_reference),
        cmocka_unit_test(test_ties_and_top5),
        cmocka_unit_test(test_bad_rows),
        cmocka_unit_test(test_accumulate),
        cmocka_unit_test(test_big_vocab_rows),
        cmocka_unit_test(test_text_tail),
        cmocka_unit_test(test_tokens_needed),
        cmocka_unit_test(test_exp),
        cmocka_unit_test(test_wide_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
