/* test_kv_fp8.c - the FP8 E4M3 KV cache (kv_cache.h, spec §5.3):
 *  - write: bytes and scales equal a scalar reference of the rule (K and dynamic V: per (token,
 *    kv head) s = the least-squares fit of kernels/fp8_scale.h through the ref pass, or with
 *    HYINFER_KV_FP8_SCALE=amax s = amax/448, byte = e4m3(x / s); static V: byte =
 *    e4m3(x / v_scale[head]), saturating); under amax the dequantized value is within E4M3's
 *    rounding of the input, under the fit the row's squared error is at most amax's; another
 *    HYINFER_KV_FP8_SCALE value is an error of hy_env_params_read (base/env.h);
 *  - zero rows and rows whose amax/448 underflows: scale 0, zero bytes, finite attention;
 *  - static V scales: copied, used by write and by attention, invalid ones rejected;
 *  - attention: ref against a double-precision oracle over the dequantized values, every other
 *    ISA level against ref (same nmse bound as test_kernels: 1e-10), 1 vs 2 threads bitwise, and
 *    FP8 against an fp32 cache of the same rows (nmse <= 2e-3, see test_attention_vs_f32);
 *  - byte accounting, dtype names, the engine on hy3-golden-b with an FP8 cache: the KV budget buys
 *    bf16_bytes / fp8_bytes times the blocks, and greedy outputs are identical for sequential vs
 *    concurrent, prefix caching on/off, chunked prefill and preemption (fp32 compute, FP8 KV). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/env.h"
#include "base/err.h"
#include "engine/engine.h"
#include "kernels/fp8_scale.h"
#include "kernels/kernel_table.h"
#include "unit/kv_test_util.h"
#include "quant/formats.h"
#include "kernel_test_util.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMSE_MAX 1e-10

static struct hy_kernel_table ref;
static struct hy_kernel_table levels[HY_ISA_COUNT];
static int n_levels;

static int all_finite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

/* Reference quantization of one head's row: the rule of kv_cache.h, written out independently
 * (fit: the scale search of kernels/fp8_scale.h on the ref pass, tested in test_fp8_scale.c). */
static float ref_quant(const float *x, int n, float static_scale, int fit, uint8_t *q)
{
    float s = static_scale;
    if (static_scale <= 0.0f && fit)
        s = hy_fp8_scale_fit_with(hy_ref_fp8_fit_pass, x, n);
    else if (static_scale <= 0.0f) {
        float amax = 0.0f;
        for (int i = 0; i < n; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        s = amax / 448.0f;
    }
    for (int i = 0; i < n; i++)
        q[i] = s == 0.0f ? 0 : hy_f32_to_e4m3(x[i] / s);
    return s;
}

/* A row of n values with a per-row magnitude drawn from 2^-12..2^12 and a few elements tiny
 * (E4M3 subnormals after scaling). */
static void fill_row(float *x, int n)
{
    const float mag = ldexpf(1.0f, (int)(kt_rnd_u32() % 25) - 12);
    for (int i = 0; i < n; i++) {
        x[i] = kt_rnd_f() * mag;
        if (kt_rnd_u32() % 11 == 0)
            x[i] *= 1e-4f;
    }
}

static int setup(void **state)
{
    (void)state;
    if (hy_kernels_table_for(HY_ISA_REF, &ref))
        return -1;
    for (int i = HY_ISA_REF + 1; i < HY_ISA_COUNT; i++)
        if (hy_kernels_table_for((enum hy_isa)i, &levels[n_levels]) == 0)
            n_levels++;
    fprintf(stderr, "testing ref +%d level(s)\n", n_levels);
    return 0;
}

/* sum (e4m3(x / s) * s - x)^2 over a row, in double. */
static double row_err(const uint8_t *b, float s, const float *x, int n)
{
    double e = 0;
    for (int i = 0; i < n; i++) {
        const double d = (double)hy_e4m3_to_f32(b[i]) * s - x[i];
        e += d * d;
    }
    return e;
}

/* One rule (fit: the default, else amax, as HYINFER_KV_FP8_SCALE=amax selects) over every slot of a
 * 2-layer cache. */
static void write_matches_reference(int fit)
{
    enum { NKV = 3, D = 40, BS = 4, NB = 5, L = 2 };
    const float vstat[NKV] = {0.01f, 0.5f, 3.0f};
    const float *vs_layers[L] = {NULL, vstat};
    struct hy_kv_cache kv;
    assert_int_equal(hy_kv_cache_init_ex(&kv, L, NKV, D, BS, NB, HY_DTYPE_F8_E4M3, vs_layers, fit), 0);
    assert_int_equal(kv.scale_fit, fit);
    uint8_t qa[D];
    assert_null(kv.v_static[0]);
    assert_non_null(kv.v_scale[0]);
    assert_non_null(kv.v_static[1]);
    assert_null(kv.v_scale[1]);
    assert_true(kv.v_static[1] != vstat); /* copied */
    float k[NKV * D], v[NKV * D];
    uint8_t q[D];
    for (int layer = 0; layer < L; layer++)
        for (int64_t slot = 0; slot < NB * BS; slot += 3) {
            for (int g = 0; g < NKV; g++) {
                fill_row(k + g * D, D);
                fill_row(v + g * D, D);
            }
            if (slot == 6) { /* values beyond the static range: they must saturate */
                v[0] = 1e4f;
                v[D + 1] = -1e4f;
            }
            kv_write(&kv, layer, slot, k, v);
            for (int g = 0; g < NKV; g++) {
                const uint8_t *kb = (const uint8_t *)kv.k[layer] + (slot * NKV + g) * D;
                const uint8_t *vb = (const uint8_t *)kv.v[layer] + (slot * NKV + g) * D;
                float s = ref_quant(k + g * D, D, 0.0f, fit, q);
                assert_memory_equal(kb, q, D);
                assert_true(hy_kv_view_k_scale(KV_VIEW(&kv, layer), slot, g) == s);
                if (fit) { /* the fitted row's error is at most the amax rule's */
                    const float sa = ref_quant(k + g * D, D, 0.0f, 0, qa);
                    assert_true(row_err(kb, s, k + g * D, D) <= row_err(qa, sa, k + g * D, D) * (1 + 1e-6));
                } else
                    for (int i = 0; i < D; i++) { /* within E4M3 rounding: half an ulp (2^-4 relative)
                                                     or half the subnormal step s * 2^-10 */
                        const float deq = hy_e4m3_to_f32(kb[i]) * s, x = k[g * D + i];
                        assert_true(fabsf(deq - x) <= fmaxf(fabsf(x) * 0x1p-4f, s * 0x1p-10f) * 1.0001f);
                    }
                const float sv = layer == 1 ? vstat[g] : 0.0f;
                s = ref_quant(v + g * D, D, sv, fit, q);
                assert_memory_equal(vb, q, D);
                assert_true(hy_kv_view_v_scale(KV_VIEW(&kv, layer), slot, g) == s);
                if (layer == 0)
                    assert_true(kv.v_scale[0][slot * NKV + g] == s);
            }
            if (slot == 6 && layer == 1) {
                assert_int_equal(((const uint8_t *)kv.v[1])[6 * NKV * D], 0x7e);
                assert_int_equal(((const uint8_t *)kv.v[1])[6 * NKV * D + D + 1], 0xfe);
            }
        }
    hy_kv_cache_free(&kv);
}

static void test_write_matches_reference(void **state)
{
    (void)state;
    write_matches_reference(1);
    write_matches_reference(0);
    /* the environment's rule: read by base/env.c, a bad one an error naming the variable (the CLI
     * refuses it at start); the default rule is the fit; bf16 / fp32 caches have none */
    struct hy_env_params ep;
    setenv("HYINFER_KV_FP8_SCALE", "absmax", 1);
    assert_int_equal(hy_env_params_read(&ep), -1);
    assert_non_null(strstr(hy_err_msg(), "HYINFER_KV_FP8_SCALE=\"absmax\""));
    assert_int_equal(ep.kv_fp8_scale_fit, 1);
    setenv("HYINFER_KV_FP8_SCALE", "amax", 1);
    assert_int_equal(hy_env_params_read(&ep), 0);
    assert_int_equal(ep.kv_fp8_scale_fit, 0);
    unsetenv("HYINFER_KV_FP8_SCALE");
    assert_int_equal(hy_env_params_read(&ep), 0);
    assert_int_equal(ep.kv_fp8_scale_fit, 1);
    struct hy_kv_cache kv;
    assert_int_equal(hy_kv_cache_init(&kv, 1, 1, 8, 4, 2, HY_DTYPE_BF16), 0);
    assert_int_equal(kv.scale_fit, 0);
    hy_kv_cache_free(&kv);
}

static void test_zero_rows(void **state)
{
    (void)state;
    enum { NKV = 2, D = 32, NH = 4 };
    struct hy_kv_cache kv;
    assert_int_equal(hy_kv_cache_init(&kv, 1, NKV, D, 4, 2, HY_DTYPE_F8_E4M3), 0);
    float k[NKV * D], v[NKV * D];
    memset(k, 0, sizeof(k));
    memset(v, 0, sizeof(v));
    for (int i = 0; i < D; i++) { /* head 1: amax / 448 underflows to 0 */
        k[D + i] = i % 2 ? 1e-44f : -1e-45f;
        v[D + i] = 1e-44f;
    }
    for (int64_t slot = 0; slot < 5; slot++)
        kv_write(&kv, 0, slot, k, v);
    for (int64_t slot = 0; slot < 5; slot++)
        for (int g = 0; g < NKV; g++) {
            assert_true(hy_kv_view_k_scale(KV_VIEW(&kv, 0), slot, g) == 0.0f);
            assert_true(hy_kv_view_v_scale(KV_VIEW(&kv, 0), slot, g) == 0.0f);
        }
    for (int i = 0; i < 5 * NKV * D; i++) {
        assert_int_equal(((uint8_t *)kv.k[0])[i], 0);
        assert_int_equal(((uint8_t *)kv.v[0])[i], 0);
    }
    const int32_t table[2] = {0, 1};
    float q[NH * D], o[NH * D], sc[8];
    for (int i = 0; i < NH * D; i++)
        q[i] = kt_rnd_f() * 4.0f;
    for (int l = -1; l < n_levels; l++) {
        const struct hy_kernel_table *t = l < 0 ? &ref : &levels[l];
        memset(o, 0xff, sizeof(o)); /* NaN pattern: every output must be written */
        t->attend(KV_VIEW(&kv, 0), q, NH, table, 5, sc, o);
        for (int i = 0; i < NH * D; i++)
            assert_true(o[i] == 0.0f);
    }
    hy_kv_cache_free(&kv);
}

/* Every non-NaN E4M3 byte (signs, subnormals, 448) decoded by each level's attention: one cached
 * position with a static V scale of 1, so the output is exactly the V row's values. */
static void test_decode_every_byte(void **state)
{
    (void)state;
    enum { D = 128, NH = 2 };
    const float one[1] = {1.0f};
    const float *per[1] = {one};
    float q[NH * D], o[NH * D], sc[1];
    memset(q, 0, sizeof(q));
    for (int half = 0; half < 2; half++) {
        struct hy_kv_cache kv;
        assert_int_equal(hy_kv_cache_init_ex(&kv, 1, 1, D, 1, 1, HY_DTYPE_F8_E4M3, per, -1), 0);
        uint8_t *vb = kv.v[0];
        for (int i = 0; i < D; i++) {
            int b = half * 128 + i;
            vb[i] = (uint8_t)((b & 0x7f) == 0x7f ? b - 1 : b); /* NaN codes: never written */
        }
        const int32_t table[1] = {0};
        for (int l = -1; l < n_levels; l++) {
            const struct hy_kernel_table *t = l < 0 ? &ref : &levels[l];
            t->attend(KV_VIEW(&kv, 0), q, NH, table, 1, sc, o);
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < D; i++) {
                    const float want = hy_e4m3_to_f32(vb[i]);
                    if (!(o[h * D + i] == want)) /* (-0 accumulates to +0) */
                        fail_msg("[%s] byte 0x%02x decoded as %g, want %g", t->name, vb[i], (double)o[h * D + i],
                                 (double)want);
                }
        }
        hy_kv_cache_free(&kv);
    }
}

static void test_init_errors_and_names(void **state)
{
    (void)state;
    struct hy_kv_cache kv;
    const float bad[3][2] = {{1.0f, 0.0f}, {NAN, 1.0f}, {-2.0f, 1.0f}};
    for (int i = 0; i < 3; i++) {
        const float *per[2] = {NULL, bad[i]};
        assert_int_equal(hy_kv_cache_init_ex(&kv, 2, 2, 8, 4, 2, HY_DTYPE_F8_E4M3, per, -1), -1);
        assert_non_null(strstr(hy_err_msg(), "static V scale"));
        assert_null(kv.k);
    }
    const float ok[2] = {1.0f, 2.0f};
    const float *per[2] = {NULL, ok};
    assert_int_equal(hy_kv_cache_init_ex(&kv, 2, 2, 8, 4, 2, HY_DTYPE_BF16, per, -1), 0); /* ignored */
    assert_null(kv.v_static);
    hy_kv_cache_free(&kv);
    assert_int_equal(hy_kv_cache_init(&kv, 1, 2, 8, 4, 2, HY_DTYPE_F16), -1);

    enum hy_dtype dt;
    static const struct {
        const char *s;
        enum hy_dtype dt;
    } names[] = {{"auto", HY_DTYPE_UNKNOWN}, {"bf16", HY_DTYPE_BF16},        {"bfloat16", HY_DTYPE_BF16},
                 {"fp8", HY_DTYPE_F8_E4M3},  {"fp8_e4m3", HY_DTYPE_F8_E4M3}, {"fp32", HY_DTYPE_F32},
                 {"float32", HY_DTYPE_F32}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        assert_int_equal(hy_kv_dtype_parse(names[i].s, &dt), 0);
        assert_int_equal(dt, names[i].dt);
    }
    assert_int_equal(hy_kv_dtype_parse(NULL, &dt), 0);
    assert_int_equal(dt, HY_DTYPE_UNKNOWN);
    assert_int_equal(hy_kv_dtype_parse("fp8_e5m2", &dt), -1);
    assert_non_null(strstr(hy_err_msg(), "fp8_e5m2"));
    assert_int_equal(hy_kv_dtype_parse("FP8", &dt), -1);
    assert_string_equal(hy_kv_dtype_name(HY_DTYPE_F8_E4M3), "fp8_e4m3");
    assert_string_equal(hy_kv_dtype_name(HY_DTYPE_UNKNOWN), "auto");

    /* Hy3 geometry: 80 layers + MTP, 8 kv heads x 128 */
    const size_t b16 = hy_kv_cache_token_bytes(81, 8, 128, HY_DTYPE_BF16, 0);
    const size_t f8 = hy_kv_cache_token_bytes(81, 8, 128, HY_DTYPE_F8_E4M3, 0);
    const size_t f8s = hy_kv_cache_token_bytes(81, 8, 128, HY_DTYPE_F8_E4M3, 81);
    assert_int_equal(b16, 81 * 2 * 8 * 128 * 2);
    assert_int_equal(f8, 81 * 2 * 8 * 128 + 81 * 8 * 4 * 2);
    assert_int_equal(f8s, 81 * 2 * 8 * 128 + 81 * 8 * 4);
    assert_int_equal(hy_kv_cache_bytes(81, 8, 128, 16, 10, HY_DTYPE_F8_E4M3), f8 * 160);
    printf("Hy3 bytes per token: bf16 %zu, fp8 %zu (dynamic V) / %zu (static V): %.3fx / %.3fx\n", b16, f8, f8s,
           (double)b16 / (double)f8, (double)b16 / (double)f8s);
}

/* A cache (dtype dt, static V scales in layer 1 when vstat) with random rows, in a reversed block
 * table; the f32 rows are also returned in kf/vf [n_ctx][nkv*D] when non-NULL. */
static void make_cache(struct hy_kv_cache *kv, enum hy_dtype dt, const float *vstat, int32_t nkv, int32_t D,
                       int32_t n_ctx, int32_t *table, float *kf, float *vf)
{
    const int32_t bs = 4, nblk = (n_ctx + bs - 1) / bs + 2;
    const float *per[2] = {NULL, vstat};
    assert_int_equal(hy_kv_cache_init_ex(kv, 2, nkv, D, bs, nblk, dt, per, -1), 0);
    for (int32_t i = 0; i < nblk; i++)
        table[i] = nblk - 1 - i;
    float *k = malloc((size_t)nkv * D * 4), *v = malloc((size_t)nkv * D * 4);
    for (int32_t j = 0; j < n_ctx; j++) {
        for (int32_t i = 0; i < nkv * D; i++) {
            k[i] = kt_rnd_f() * 2.0f;
            v[i] = kt_rnd_f() * (1.0f + (float)(i / D)); /* heads of different V ranges */
        }
        if (j % 7 == 3) /* a zero K row and V row now and then */
            for (int32_t i = 0; i < D; i++)
                k[i] = v[i] = 0.0f;
        kv_write(kv, 1, (int64_t)table[j / bs] * bs + j % bs, k, v);
        if (kf) {
            memcpy(kf + (size_t)j * nkv * D, k, (size_t)nkv * D * 4);
            memcpy(vf + (size_t)j * nkv * D, v, (size_t)nkv * D * 4);
        }
    }
    free(k);
    free(v);
}

/* Double-precision attention over the dequantized FP8 cache (reads bytes and scales directly). */
static void oracle(const struct hy_kv_cache *kv, const float *q, int32_t nh, const int32_t *table, int32_t n_ctx,
                   float *out)
{
    const int32_t D = kv->head_dim, nkv = kv->n_kv_heads, bs = kv->block_size, group = nh / nkv;
    double *s = malloc((size_t)n_ctx * sizeof(double));
    for (int32_t h = 0; h < nh; h++) {
        const int32_t g = h / group;
        double mx = -INFINITY, sum = 0;
        for (int32_t j = 0; j < n_ctx; j++) {
            const int64_t slot = (int64_t)table[j / bs] * bs + j % bs;
            const uint8_t *kb = (const uint8_t *)kv->k[1] + (slot * nkv + g) * D;
            const double ks = hy_kv_view_k_scale(KV_VIEW(kv, 1), slot, g);
            double d = 0;
            for (int32_t i = 0; i < D; i++)
                d += (double)q[h * D + i] * hy_e4m3_to_f32(kb[i]) * ks;
            s[j] = d / sqrt((double)D);
            mx = s[j] > mx ? s[j] : mx;
        }
        for (int32_t j = 0; j < n_ctx; j++)
            sum += (s[j] = exp(s[j] - mx));
        for (int32_t i = 0; i < D; i++) {
            double acc = 0;
            for (int32_t j = 0; j < n_ctx; j++) {
                const int64_t slot = (int64_t)table[j / bs] * bs + j % bs;
                const uint8_t *vb = (const uint8_t *)kv->v[1] + (slot * nkv + g) * D;
                acc += s[j] / sum * hy_e4m3_to_f32(vb[i]) * hy_kv_view_v_scale(KV_VIEW(kv, 1), slot, g);
            }
            out[h * D + i] = (float)acc;
        }
    }
    free(s);
}

static void test_attention_levels(void **state)
{
    (void)state;
    static const int32_t cfg[][3] = {/* n_kv_heads, group, head_dim */
                                     {2, 1, 8}, {2, 3, 64}, {1, 8, 128}, {2, 12, 16}, {3, 2, 12}, {1, 5, 256}};
    static const int32_t ctxs[] = {1, 5, 31, 32, 33, 100};
    const float vstat[3] = {0.004f, 0.008f, 0.02f};
    for (int st = 0; st < 2; st++)
        for (size_t c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++)
            for (size_t ci = 0; ci < sizeof(ctxs) / sizeof(ctxs[0]); ci++) {
                const int32_t nkv = cfg[c][0], nh = nkv * cfg[c][1], D = cfg[c][2], n_ctx = ctxs[ci];
                struct hy_kv_cache kv;
                int32_t table[64];
                make_cache(&kv, HY_DTYPE_F8_E4M3, st ? vstat : NULL, nkv, D, n_ctx, table, NULL, NULL);
                float *q = malloc((size_t)nh * D * 4), *o0 = malloc((size_t)nh * D * 4),
                      *o1 = malloc((size_t)nh * D * 4), *sc = malloc((size_t)n_ctx * 4);
                for (int32_t i = 0; i < nh * D; i++)
                    q[i] = kt_rnd_f() * 3.0f;
                char what[128];
                snprintf(what, sizeof(what), "fp8 (%s V) kv=%d heads=%d D=%d n_ctx=%d", st ? "static" : "dynamic", nkv,
                         nh, D, n_ctx);
                oracle(&kv, q, nh, table, n_ctx, o1);
                ref.attend(KV_VIEW(&kv, 1), q, nh, table, n_ctx, sc, o0);
                double e = kt_nmse(o0, o1, (int64_t)nh * D);
                if (!(e <= NMSE_MAX))
                    fail_msg("%s: ref vs double oracle nmse %.3g", what, e);
                for (int l = 0; l < n_levels; l++) {
                    levels[l].attend(KV_VIEW(&kv, 1), q, nh, table, n_ctx, sc, o1);
                    e = kt_nmse(o1, o0, (int64_t)nh * D);
                    if (!(e <= NMSE_MAX))
                        fail_msg("%s [%s]: nmse vs ref %.3g > %.3g", what, levels[l].name, e, NMSE_MAX);
                }
                free(q);
                free(o0);
                free(o1);
                free(sc);
                hy_kv_cache_free(&kv);
            }
}

/* FP8 against fp32 storage of the same rows. Each element's relative rounding error is at most
 * 2^-4 (uniform-ish: rms about 2^-4/sqrt(3) = 0.036, squared 1.3e-3); the attention output
 * averages many V rows and softmax weights move by the K error times |q|; the output nmse here is
 * about 8e-4 (7e-4 with static V); 2e-3 bounds it, while a wrong scale (2x, checked below) or a
 * head/slot mix-up gives >= 0.1. */
static void test_attention_vs_f32(void **state)
{
    (void)state;
    const int32_t nkv = 2, nh = 8, D = 128, n_ctx = 77;
    const float vstat[2] = {1.0f / 448.0f, 2.0f / 448.0f}; /* absmax/448 of the V ranges */
    for (int st = 0; st < 2; st++) {
        struct hy_kv_cache k8, k32;
        int32_t table[64];
        float *kf = malloc((size_t)n_ctx * nkv * D * 4), *vf = malloc((size_t)n_ctx * nkv * D * 4);
        make_cache(&k8, HY_DTYPE_F8_E4M3, st ? vstat : NULL, nkv, D, n_ctx, table, kf, vf);
        const int32_t nblk = k8.n_blocks;
        assert_int_equal(hy_kv_cache_init(&k32, 2, nkv, D, 4, nblk, HY_DTYPE_F32), 0);
        for (int32_t j = 0; j < n_ctx; j++)
            kv_write(&k32, 1, (int64_t)table[j / 4] * 4 + j % 4, kf + (size_t)j * nkv * D, vf + (size_t)j * nkv * D);
        float q[8 * 128], o8[8 * 128], o32[8 * 128], sc[128];
        for (int32_t i = 0; i < nh * D; i++)
            q[i] = kt_rnd_f() * 0.5f;
        for (int l = -1; l < n_levels; l++) {
            const struct hy_kernel_table *t = l < 0 ? &ref : &levels[l];
            t->attend(KV_VIEW(&k8, 1), q, nh, table, n_ctx, sc, o8);
            t->attend(KV_VIEW(&k32, 1), q, nh, table, n_ctx, sc, o32);
            const double e = kt_nmse(o8, o32, nh * D);
            printf("fp8 (%s V) vs fp32 cache [%s]: nmse %.3g\n", st ? "static" : "dynamic", t->name, e);
            assert_true(all_finite(o8, nh * D));
            assert_true(e <= 2e-3);
        }
        /* a wrong static scale is visible: V read back 2x too large */
        if (st) {
            for (int32_t g = 0; g < nkv; g++)
                k8.v_static[1][g] *= 2.0f;
            ref.attend(KV_VIEW(&k8, 1), q, nh, table, n_ctx, sc, o8);
            ref.attend(KV_VIEW(&k32, 1), q, nh, table, n_ctx, sc, o32);
            assert_true(kt_nmse(o8, o32, nh * D) > 0.5);
        }
        free(kf);
        free(vf);
        hy_kv_cache_free(&k8);
        hy_kv_cache_free(&k32);
    }
}

static void test_attention_threads(void **state)
{
    (void)state;
    const int32_t nkv = 4, nh = 16, D = 64, n_ctx = 90;
    struct hy_kv_cache kv;
    int32_t table[64];
    make_cache(&kv, HY_DTYPE_F8_E4M3, NULL, nkv, D, n_ctx, table, NULL, NULL);
    float *q = malloc((size_t)nh * D * 4), *o1 = malloc((size_t)nh * D * 4), *o2 = malloc((size_t)nh * D * 4),
          *sc = malloc((size_t)n_ctx * 4);
    for (int32_t i = 0; i < nh * D; i++)
        q[i] = kt_rnd_f();
    for (int l = -1; l < n_levels; l++) {
        const struct hy_kernel_table *k = l < 0 ? &ref : &levels[l];
        omp_set_num_threads(1);
        k->attend(KV_VIEW(&kv, 1), q, nh, table, n_ctx, sc, o1);
        omp_set_num_threads(2);
        k->attend(KV_VIEW(&kv, 1), q, nh, table, n_ctx, sc, o2);
        assert_memory_equal(o1, o2, (size_t)nh * D * 4);
    }
    omp_set_num_threads(1);
    free(q);
    free(o1);
    free(o2);
    free(sc);
    hy_kv_cache_free(&kv);
}

/* ---- the engine with an FP8 cache on hy3-golden-b (fp32 compute) ---- */

#define NREQ 6
#define MAXTOK 10

struct prompt {
    int32_t ids[48];
    int32_t n;
};
struct result {
    int32_t toks[MAXTOK];
    int32_t n;
};

static const char *golden_dir(void)
{
    static char path[1024];
    const char *root = getenv("HYINFER_ROOT"); /* unset: run from the repository root */
    snprintf(path, sizeof(path), "%s/tests/data/hy3-golden-llamacpp/hy3-golden-b", root && *root ? root : ".");
    return path;
}

static void engine_run(struct hy_model *m, const struct hy_engine_config *c, const struct prompt *ps, int n,
                       int concurrent, struct result *res, struct hy_engine_stats *st)
{
    struct hy_engine *e = hy_engine_create(m, c);
    if (!e)
        fail_msg("engine: %s", hy_err_msg());
    uint64_t ids[NREQ * 2];
    memset(res, 0, (size_t)n * sizeof(*res));
    int next = 0;
    for (int steps = 0; next < n || hy_engine_has_work(e); steps++) {
        assert_true(steps < 5000);
        while (next < n && (concurrent || !hy_engine_has_work(e))) {
            struct hy_engine_request r;
            memset(&r, 0, sizeof(r));
            r.prompt_ids = ps[next].ids;
            r.n_prompt = (size_t)ps[next].n;
            hy_sampling_params_init(&r.params);
            r.params.max_new_tokens = MAXTOK;
            r.params.ignore_eos = 1;
            r.logprobs = -1;
            assert_int_equal(hy_engine_add_request(e, &r, &ids[next]), HY_ENGINE_OK);
            next++;
        }
        const struct hy_engine_output *o;
        size_t no;
        assert_int_equal(hy_engine_step(e, &o, &no), 0);
        for (size_t k = 0; k < no; k++)
            for (int i = 0; i < next; i++)
                if (o[k].request_id == ids[i] && o[k].token_id >= 0)
                    res[i].toks[res[i].n++] = o[k].token_id;
    }
    hy_engine_get_stats(e, st);
    assert_int_equal(st->num_blocks_used, 0);
    hy_engine_free(e);
}

static void assert_same(const struct result *a, const struct result *b, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(a[i].n, MAXTOK);
        assert_int_equal(b[i].n, MAXTOK);
        assert_memory_equal(a[i].toks, b[i].toks, sizeof(a[i].toks));
    }
}

static void test_engine_fp8(void **state)
{
    (void)state;
    struct hy_model *m;
    if (hy_model_load(golden_dir(), HY_COMPUTE_F32, &m))
        fail_msg("cannot load %s: %s", golden_dir(), hy_err_msg());
    omp_set_num_threads(1);
    struct prompt ps[NREQ * 2];
    uint32_t lcg = 777;
    static const int32_t lens[NREQ] = {5, 17, 9, 33, 12, 26};
    for (int i = 0; i < NREQ; i++) {
        ps[i].n = lens[i];
        ps[i].ids[0] = 471;
        for (int j = 1; j < lens[i]; j++) {
            lcg = lcg * 1103515245u + 12345u;
            ps[i].ids[j] = (int32_t)((lcg >> 8) % 470);
        }
        ps[NREQ + i] = ps[i];
    }
    /* budget arithmetic: the same bytes buy bf16_bytes / fp8_bytes times the blocks */
    const size_t b32 = hy_model_kv_token_bytes(m, HY_DTYPE_UNKNOWN), b16 = hy_model_kv_token_bytes(m, HY_DTYPE_BF16);
    const size_t b8 = hy_model_kv_token_bytes(m, HY_DTYPE_F8_E4M3);
    const int32_t L = m->cfg.num_hidden_layers + 1, nkv = m->cfg.num_key_value_heads, D = m->cfg.head_dim;
    assert_int_equal(b32, (size_t)L * 2 * nkv * D * 4);
    assert_int_equal(b16, (size_t)L * 2 * nkv * D * 2);
    assert_int_equal(b8, (size_t)L * 2 * nkv * D + (size_t)L * 2 * nkv * 4);
    struct hy_engine_config c;
    hy_engine_config_init(&c);
    c.max_model_len = 64;
    c.block_size = 4;
    c.kv_cache_memory_bytes = 100 * 4 * b16;
    struct hy_engine_stats st;
    struct result ref8[NREQ], res[NREQ * 2];
    c.kv_cache_dtype = HY_DTYPE_BF16;
    engine_run(m, &c, ps, 1, 0, res, &st);
    assert_int_equal(st.num_blocks_total, 100);
    c.kv_cache_dtype = HY_DTYPE_F8_E4M3;
    engine_run(m, &c, ps, 1, 0, res, &st);
    assert_int_equal(st.num_blocks_total, (int32_t)(100 * 4 * b16 / (4 * b8)));
    printf("engine: %zu bytes per token fp32, %zu bf16, %zu fp8 -> %d fp8 blocks for 100 bf16 blocks\n", b32, b16, b8,
           st.num_blocks_total);

    /* reference: one at a time, no prefix caching, no chunking */
    c.enable_prefix_caching = 0;
    engine_run(m, &c, ps, NREQ, 0, ref8, &st);
    /* fp8 differs from fp32 storage, but not everywhere (a sanity check that it ran at all) */
    struct hy_engine_config c32 = c;
    c32.kv_cache_dtype = HY_DTYPE_UNKNOWN;
    engine_run(m, &c32, ps, NREQ, 0, res, &st);
    int same_first = 0;
    for (int i = 0; i < NREQ; i++)
        same_first += res[i].toks[0] == ref8[i].toks[0];
    printf("engine: first greedy token equal fp8 vs fp32 KV in %d of %d requests\n", same_first, NREQ);
    assert_true(same_first >= NREQ / 2);

    c.enable_prefix_caching = 1;
    engine_run(m, &c, ps, NREQ, 1, res, &st); /* concurrent */
    assert_same(ref8, res, NREQ);
    assert_true(st.max_batch_seqs >= 4);
    engine_run(m, &c, ps, NREQ * 2, 0, res, &st); /* each prompt twice: prefix hits */
    assert_same(ref8, res, NREQ);
    assert_same(ref8, res + NREQ, NREQ);
    assert_true(st.prefix_hits > 0);
    c.max_num_batched_tokens = 3; /* chunked prefill */
    engine_run(m, &c, ps, NREQ, 1, res, &st);
    assert_same(ref8, res, NREQ);
    assert_true(st.prompt_chunks >= 2 * NREQ);
    c.max_num_batched_tokens = 512;
    c.max_model_len = 48;                  /* the longest request takes 43 tokens = 11 blocks */
    c.kv_cache_memory_bytes = 12 * 4 * b8; /* 12 blocks for 162 tokens: preemption */
    for (int prefix = 0; prefix < 2; prefix++) {
        c.enable_prefix_caching = prefix;
        engine_run(m, &c, ps, NREQ, 1, res, &st);
        assert_int_equal(st.num_blocks_total, 12);
        assert_same(ref8, res, NREQ);
        printf("engine fp8, 12 blocks, prefix caching %d: %llu preemptions\n", prefix,
               (unsigned long long)st.num_preemptions);
        assert_true(st.num_preemptions > 0);
    }
    c.kv_cache_dtype = (enum hy_dtype)HY_DTYPE_F16;
    assert_null(hy_engine_create(m, &c));
    assert_non_null(strstr(hy_err_msg(), "kv_cache_dtype"));
    hy_model_free(m);
}

int main(void)
{
    kt_rng = 0x2545f4914f6cdd1dull; /* this file's own data */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_matches_reference), cmocka_unit_test(test_zero_rows),
        cmocka_unit_test(test_decode_every_byte),       cmocka_unit_test(test_init_errors_and_names),
        cmocka_unit_test(test_attention_levels),        cmocka_unit_test(test_attention_vs_f32),
        cmocka_unit_test(test_attention_threads),       cmocka_unit_test(test_engine_fp8),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
