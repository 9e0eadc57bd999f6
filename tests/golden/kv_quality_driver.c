/* kv_quality_driver.c - next-token distributions of one model with two KV cache dtypes, compared
 * (used by tests/golden/test_kv_fp8.py; linked against build/libhyinfer.a).
 *
 * usage: kv_quality_driver MODEL_DIR TEXT_FILE CHAR_OFFSET WINDOWS WINDOW_LEN REF_KV TEST_KV [bfloat16]
 * Encodes TEXT_FILE from byte CHAR_OFFSET on (no BOS; at most 8 bytes per needed token), cuts
 * WINDOWS consecutive windows of WINDOW_LEN tokens, runs each window as one sequence in float32 (or bfloat16) compute mode twice
 * (KV cache dtype REF_KV, then TEST_KV: auto | bf16 | fp8 | fp32) and prints one JSON object:
 * {"positions", "top1_agreement", "mean_kl", "max_kl", "p99_kl", "mean_abs_dlogit", "max_abs_dlogit",
 *  "tokens_encoded", "positions_margin_ge_0.5", "top1_agreement_margin_ge_0.5",
 *  "ref_margin_at_disagreements": [the reference's top-1/top-2 logit margin at each disagreement]}
 * where KL = sum_v p_ref(v) (log p_ref(v) - log p_test(v)) in nats, per position, in double. */
#include "base/err.h"
#include "base/fileio.h"
#include "model/model.h"
#include "text/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int forward_window(struct hy_model *m, enum hy_dtype kv_dtype, const int32_t *ids, int32_t n, float *logits)
{
    const int32_t bs = 16, nb = (n + bs - 1) / bs;
    struct hy_kv_cache kv;
    if (hy_model_kv_cache_init_dtype(m, &kv, bs, nb, kv_dtype))
        return -1;
    int32_t *pos = malloc((size_t)n * 4), *seq = calloc((size_t)n, 4), *table = malloc((size_t)nb * 4);
    int32_t *rows = malloc((size_t)n * 4);
    int64_t *slots = malloc((size_t)n * 8);
    for (int32_t i = 0; i < nb; i++)
        table[i] = nb - 1 - i; /* non-contiguous blocks */
    for (int32_t i = 0; i < n; i++) {
        pos[i] = i;
        rows[i] = i;
        slots[i] = (int64_t)table[i / bs] * bs + i % bs;
    }
    const int32_t *tables[1] = {table};
    struct hy_batch b = {n, ids, pos, slots, seq, tables, n, rows, 0};
    int rc = hy_model_forward(m, &kv, &b, logits, NULL);
    free(pos);
    free(seq);
    free(table);
    free(rows);
    free(slots);
    hy_kv_cache_free(&kv);
    return rc;
}

static void log_softmax(const float *x, int32_t V, double *out)
{
    double mx = -INFINITY, s = 0;
    for (int32_t v = 0; v < V; v++)
        mx = x[v] > mx ? x[v] : mx;
    for (int32_t v = 0; v < V; v++)
        s += exp((double)x[v] - mx);
    const double lse = mx + log(s);
    for (int32_t v = 0; v < V; v++)
        out[v] = (double)x[v] - lse;
}

#define WIDE 0.5 /* logits: a reference top-1/top-2 margin at least this wide is "no near-tie" */

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc != 8 && !(argc == 9 && !strcmp(argv[8], "bfloat16"))) {
        fprintf(stderr, "usage: %s MODEL_DIR TEXT_FILE CHAR_OFFSET WINDOWS WINDOW_LEN REF_KV TEST_KV [bfloat16]\n",
                argv[0]);
        return 2;
    }
    const long off = atol(argv[3]);
    const int32_t nw = atoi(argv[4]), wl = atoi(argv[5]);
    enum hy_dtype ref_dt, test_dt;
    struct hy_model *m = NULL;
    struct hy_tokenizer *tok = NULL;
    char *text = NULL;
    size_t len = 0, n_ids = 0;
    int32_t *ids = NULL;
    if (hy_kv_dtype_parse(argv[6], &ref_dt) || hy_kv_dtype_parse(argv[7], &test_dt) ||
        hy_model_load(argv[1], argc == 9 ? HY_COMPUTE_BF16 : HY_COMPUTE_F32, &m) ||
        hy_tokenizer_load_dir(argv[1], &tok) || hy_file_read_all(argv[2], &text, &len)) {
        fprintf(stderr, "driver: %s\n", hy_err_msg());
        return 1;
    }
    if (off < 0 || (size_t)off >= len || nw < 1 || wl < 2) {
        fprintf(stderr, "driver: bad offset / window arguments\n");
        return 2;
    }
    size_t span = len - (size_t)off; /* about 3.5 characters per token here: 8 per token is plenty */
    if (span > (size_t)nw * (size_t)wl * 8)
        span = (size_t)nw * (size_t)wl * 8;
    if (hy_tokenizer_encode(tok, text + off, span, 0, &ids, &n_ids)) {
        fprintf(stderr, "driver: %s\n", hy_err_msg());
        return 1;
    }
    if ((size_t)nw * (size_t)wl > n_ids || wl > m->cfg.max_position_embeddings) {
        fprintf(stderr, "driver: %d windows of %d tokens do not fit (%zu tokens, context %d)\n", nw, wl, n_ids,
                m->cfg.max_position_embeddings);
        return 2;
    }
    const int32_t V = m->cfg.vocab_size;
    float *la = malloc((size_t)wl * V * 4), *lb = malloc((size_t)wl * V * 4);
    double *pa = malloc((size_t)V * 8), *pb = malloc((size_t)V * 8), *kls = malloc((size_t)nw * wl * 8);
    int64_t agree = 0, npos = 0, n_wide = 0, agree_wide = 0;
    double *margins_dis = malloc((size_t)nw * wl * 8);
    int64_t n_dis = 0;
    double sum_abs = 0, max_abs = 0;
    for (int32_t w = 0; w < nw; w++) {
        const int32_t *wi = ids + (size_t)w * wl;
        if (forward_window(m, ref_dt, wi, wl, la) || forward_window(m, test_dt, wi, wl, lb)) {
            fprintf(stderr, "driver: %s\n", hy_err_msg());
            return 1;
        }
        for (int32_t t = 0; t < wl; t++, npos++) {
            const float *ra = la + (size_t)t * V, *rb = lb + (size_t)t * V;
            log_softmax(ra, V, pa);
            log_softmax(rb, V, pb);
            double kl = 0;
            int32_t aa = 0, ab = 0;
            for (int32_t v = 0; v < V; v++) {
                kl += exp(pa[v]) * (pa[v] - pb[v]);
                aa = ra[v] > ra[aa] ? v : aa;
                ab = rb[v] > rb[ab] ? v : ab;
                const double d = fabs((double)ra[v] - rb[v]);
                sum_abs += d;
                max_abs = d > max_abs ? d : max_abs;
            }
            kls[npos] = kl > 0 ? kl : 0;
            agree += aa == ab;
            float second = -INFINITY; /* the reference's top-1 / top-2 logit margin */
            for (int32_t v = 0; v < V; v++)
                if (v != aa && ra[v] > second)
                    second = ra[v];
            const double margin = (double)ra[aa] - second;
            if (aa != ab)
                margins_dis[n_dis++] = margin;
            if (margin >= WIDE) {
                n_wide++;
                agree_wide += aa == ab;
            }
        }
    }
    double sum_kl = 0;
    for (int64_t i = 0; i < npos; i++)
        sum_kl += kls[i];
    qsort(kls, (size_t)npos, sizeof(double), cmp_double);
    qsort(margins_dis, (size_t)n_dis, sizeof(double), cmp_double);
    printf("{\"positions\": %lld, \"top1_agreement\": %.6f, \"mean_kl\": %.6g, \"max_kl\": %.6g, \"p99_kl\": %.6g, "
           "\"mean_abs_dlogit\": %.6g, \"max_abs_dlogit\": %.6g, \"tokens_encoded\": %zu, "
           "\"positions_margin_ge_%.1f\": %lld, \"top1_agreement_margin_ge_%.1f\": %.6f, "
           "\"ref_margin_at_disagreements\": [",
           (long long)npos, (double)agree / (double)npos, sum_kl / (double)npos, kls[npos - 1], kls[(npos * 99) / 100],
           sum_abs / ((double)npos * V), max_abs, n_ids, WIDE, (long long)n_wide, WIDE,
           n_wide ? (double)agree_wide / (double)n_wide : 1.0);
    for (int64_t i = 0; i < n_dis; i++)
        printf(i ? ", %.4g" : "%.4g", margins_dis[i]);
    printf("]}\n");
    free(margins_dis);
    free(la);
    free(lb);
    free(pa);
    free(pb);
    free(kls);
    free(ids);
    free(text);
    hy_tokenizer_free(tok);
    hy_model_free(m);
    return 0;
}
