/* test_spec_gate.c - the speculation gate on synthetic step timings (no model): it settles on drafting
 * where drafting is faster, on plain decode where it is slower (probing rarely), and turns the MTP
 * layer off where drafting cannot win even with every draft accepted; cfg.gate 0 always drafts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/spec.h"

#include <string.h>

/* A decode workload of B requests: a plain step costs t_plain (of which sync is the MTP KV pass); a
 * drafting step costs t_draft (of which mtp is the MTP pass) and yields `yield` tokens per request from
 * k drafts. Runs n steps; returns the fraction of steps spent drafting. */
static double simulate(struct hy_spec *s, int n, int B, double t_plain, double sync, double t_draft, double mtp,
                       double yield, int k)
{
    int drafting = 0, prev = 0;
    for (int i = 0; i < n; i++) {
        const int on = hy_spec_drafting(s);
        const int active = hy_spec_mtp_active(s);
        if (prev) /* drafts made last step are verified now */
            hy_spec_count(s, k, k / 2);
        drafting += on;
        const double t = prev ? t_draft : active ? t_plain : t_plain - sync;
        const double m = on ? mtp : active ? sync : 0.0;
        const int64_t tokens = prev ? (int64_t)(yield * B) : B;
        hy_spec_gate_step(s, 1, B, tokens, t, m);
        prev = on;
    }
    return (double)drafting / n;
}

static void init(struct hy_spec *s, int gate)
{
    memset(s, 0, sizeof(*s));
    hy_spec_config_init(&s->cfg);
    s->cfg.num_speculative_tokens = 2;
    s->cfg.gate = gate;
    hy_spec_gate_init(s);
}

static void test_gate_keeps_the_faster_mode(void **state)
{
    (void)state;
    struct hy_spec s;
    /* drafting wins: 1.8 tokens per request for 1.3x the time */
    init(&s, 1);
    double f = simulate(&s, 2000, 4, 1.0, 0.02, 1.3, 0.1, 1.8, 2);
    assert_true(f > 0.85);
    assert_int_equal(s.stats.gate_hard_off, 0);
    /* drafting loses (1.2 tokens for 1.5x): mostly plain, probes spaced out */
    init(&s, 1);
    f = simulate(&s, 4000, 4, 1.0, 0.02, 1.5, 0.1, 1.2, 2);
    assert_true(f < 0.05);
    assert_true(hy_spec_mtp_active(&s) || s.stats.gate_hard_off > 0);
    /* drafting cannot win even with all drafts accepted (3 tokens for 4x): the MTP layer goes off */
    init(&s, 1);
    f = simulate(&s, 200, 1, 1.0, 0.15, 4.0, 1.5, 1.5, 2);
    assert_true(f < 0.05);
    assert_true(s.stats.gate_hard_off > 0);
    assert_false(hy_spec_mtp_active(&s));
    /* after the long plain stretch new requests may draft again */
    simulate(&s, 4100, 1, 1.0, 0.15, 4.0, 1.5, 1.5, 2);
    assert_true(s.stats.gate_hard_off >= 1);
    /* gate off: always drafting */
    init(&s, 0);
    assert_true(simulate(&s, 100, 1, 1.0, 0.1, 4.0, 1.5, 1.0, 2) == 1.0);
    assert_true(hy_spec_mtp_active(&s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gate_keeps_the_faster_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
