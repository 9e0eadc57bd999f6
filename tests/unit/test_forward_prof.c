/* test_forward_prof.c - the forward pass's stage timers (struct hy_model_prof, used by `hyinfer
 * bench`): turning them on changes no output bit, the stage seconds add up to the call total, the
 * expert-selection counts match top-k per token per MoE layer, and the byte/FLOP accounting of
 * src/bench/account.c agrees with counts written out here. hy3-golden-b checkpoint from tests/data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/err.h"
#include "bench/account.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTOK 11

static struct hy_model *model;

static const char *golden_dir(void)
{
    static char path[1024];
    const char *root = getenv("HYINFER_ROOT"); /* unset: run from the repository root */
    snprintf(path, sizeof(path), "%s/tests/data/hy3-golden-llamacpp/hy3-golden-b", root && *root ? root : ".");
    return path;
}

static int setup(void **state)
{
    (void)state;
    if (hy_model_load(golden_dir(), HY_COMPUTE_F32, &model)) {
        fprintf(stderr, "cannot load %s: %s\n", golden_dir(), hy_err_msg());
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hy_model_prof_enable(model, 0);
    hy_model_free(model);
    return 0;
}

/* One prompt of NTOK tokens, logits of every row, into out[NTOK, V]. */
static void run_prompt(float *out)
{
    static const int32_t ids[NTOK] = {3, 77, 150, 9, 401, 222, 18, 5, 300, 64, 471};
    int32_t pos[NTOK], seq[NTOK], rows[NTOK], table[4] = {2, 0, 3, 1};
    int64_t slot[NTOK];
    for (int i = 0; i < NTOK; i++) {
        pos[i] = i;
        seq[i] = 0;
        rows[i] = i;
        slot[i] = (int64_t)table[i / 4] * 4 + i % 4;
    }
    const int32_t *tables[1] = {table};
    struct hy_kv_cache kv;
    assert_int_equal(hy_model_kv_cache_init(model, &kv, 4, 4), 0);
    struct hy_batch b = {NTOK, ids, pos, slot, seq, tables, NTOK, rows, 0};
    assert_int_equal(hy_model_forward(model, &kv, &b, out, NULL), 0);
    hy_kv_cache_free(&kv);
}

static void test_prof_changes_nothing(void **state)
{
    (void)state;
    const size_t V = (size_t)model->cfg.vocab_size;
    float *off = malloc(NTOK * V * sizeof(float)), *on = malloc(NTOK * V * sizeof(float));
    assert_non_null(off);
    assert_non_null(on);
    assert_int_equal(hy_model_prof_enable(model, 0), 0);
    run_prompt(off);
    assert_int_equal(model->prof.calls, 0); /* off: nothing recorded */
    assert_int_equal(hy_model_prof_enable(model, 1), 0);
    run_prompt(on);
    assert_memory_equal(off, on, NTOK * V * sizeof(float));

    const struct hy_model_prof *p = &model->prof;
    assert_int_equal(p->calls, 1);
    assert_int_equal(p->tokens, NTOK);
    double sum = 0.0;
    for (int i = 0; i < HY_STAGE_COUNT; i++) {
        assert_true(p->sec[i] >= 0.0);
        sum += p->sec[i];
    }
    assert_true(p->sec[HY_STAGE_ATTENTION] > 0.0);
    assert_true(p->sec[HY_STAGE_ROUTED] > 0.0);
    assert_true(p->sec[HY_STAGE_DENSE_MLP] > 0.0);
    assert_true(p->sec[HY_STAGE_LM_HEAD] > 0.0);
    assert_true(fabs(sum - p->total_sec) <= 1e-9 + 1e-6 * p->total_sec);

    /* every token selects exactly top-k distinct experts in every MoE layer, none in dense ones */
    const int K = model->cfg.num_experts_per_tok;
    for (int L = 0; L < model->cfg.num_hidden_layers; L++) {
        int64_t tot = 0;
        for (int e = 0; e < p->n_experts; e++) {
            const int64_t h = p->expert_hits[(int64_t)L * p->n_experts + e];
            assert_true(h >= 0 && h <= NTOK);
            tot += h;
        }
        assert_int_equal(tot, model->layers[L].is_moe ? (int64_t)NTOK * K : 0);
    }

    /* a second call accumulates; reset clears */
    run_prompt(on);
    assert_int_equal(p->calls, 2);
    hy_model_prof_reset(model);
    assert_int_equal(p->calls, 0);
    assert_true(p->total_sec == 0.0);
    for (int64_t i = 0; i < (int64_t)p->n_layers * p->n_experts; i++)
        assert_int_equal(p->expert_hits[i], 0);
    free(off);
    free(on);
}

static void test_account_counts(void **state)
{
    (void)state;
    assert_int_equal(hy_model_prof_enable(model, 1), 0);
    float *lg = malloc((size_t)NTOK * (size_t)model->cfg.vocab_size * sizeof(float));
    assert_non_null(lg);
    run_prompt(lg);
    free(lg);
    const struct hy_model_config *c = &model->cfg;
    const double H = c->hidden_size, D = c->head_dim, E = c->num_experts, K = c->num_experts_per_tok;
    const double I = c->moe_intermediate_size, F = c->intermediate_size, V = c->vocab_size;
    const double qd = (double)c->num_attention_heads * D, kvd = (double)c->num_key_value_heads * D;
    int nmoe = 0, ndense = 0;
    for (int L = 0; L < c->num_hidden_layers; L++)
        model->layers[L].is_moe ? nmoe++ : ndense++;
    int32_t ctx[NTOK];
    double ctx_sum = 0.0;
    for (int i = 0; i < NTOK; i++) {
        ctx[i] = i + 1;
        ctx_sum += i + 1;
    }
    struct hy_bench_bytes b;
    struct hy_bench_flops f;
    hy_bench_account(model, model->prof.expert_hits, NTOK, ctx, 1, 4, &b, &f);
    const double attn_p = 2.0 * qd * H + 2.0 * kvd * H, nl = c->num_hidden_layers;
    assert_true(f.attn_proj == 2.0 * NTOK * attn_p * nl);
    assert_true(f.attn_core == 4.0 * qd * ctx_sum * nl);
    assert_true(f.dense_mlp == 2.0 * NTOK * 3.0 * H * F * ndense);
    assert_true(f.router == 2.0 * NTOK * E * H * nmoe);
    assert_true(f.routed == 2.0 * NTOK * K * 3.0 * H * I * nmoe);
    assert_true(f.shared == 2.0 * NTOK * 3.0 * H * I * c->num_shared_experts * nmoe);
    assert_true(f.lm_head == 2.0 * V * H);
    /* bytes: bf16 matrices of this checkpoint, f32 router/bias/norms, f32 KV (4 bytes per element) */
    assert_true(b.attn == 2.0 * attn_p * nl);
    assert_true(b.lm_head == 2.0 * V * H);
    assert_true(b.embed == NTOK * H * 2.0);
    assert_true(b.router == (E * H + E) * 4.0 * nmoe);
    assert_true(b.kv_read == ctx_sum * kvd * 2.0 * 4.0 * nl);
    assert_true(b.distinct_experts >= (int64_t)K * nmoe && b.distinct_experts <= (int64_t)E * nmoe);
    assert_true(b.routed == 2.0 * 3.0 * H * I * (double)b.distinct_experts);
    assert_int_equal(b.expert_selections, (int64_t)NTOK * (int64_t)K * nmoe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prof_changes_nothing),
        cmocka_unit_test(test_account_counts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
