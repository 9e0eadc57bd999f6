/* forward_check.c - the whole fp32 forward pass of a model at the kernel level this CPU picks, against
 * logits dumped by another run (tests/emu/run_avx512_tests.sh: dumped natively at HYINFER_ISA=ref,
 * checked inside the Bochs emulator, where the avx512 level is picked).
 *
 * usage: forward_check dump  MODEL_DIR FILE [MODEL_DIR FILE ...]   writes the logits of every
 *                                            position (float32, raw), per model
 *        forward_check check MODEL_DIR FILE [...]   compares with FILE; exit 0 if all are within
 *                                            tolerance (one emulator boot checks several models)
 * The sequence: N_TOK = 24 fixed token ids (one sequence, positions 0..23, scattered KV blocks).
 * Tolerance (DESIGN.md §5, the fp32 golden bound): max |dlogit| <= 1e-4 * max(1, max |ref logit|),
 * and the same argmax at every position where the reference's top-1/top-2 margin exceeds 1e-3.
 * Prints one line: the kernel level, max |dlogit|, the bound and the argmax agreement. */
#include "base/err.h"
#include "kernels/kernel_table.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TOK 24

static int forward(struct hy_model *m, float *logits)
{
    const int32_t bs = 4, nb = (N_TOK + bs - 1) / bs;
    struct hy_kv_cache kv;
    if (hy_model_kv_cache_init_dtype(m, &kv, bs, nb, HY_DTYPE_F32))
        return -1;
    int32_t ids[N_TOK], pos[N_TOK], seq[N_TOK] = {0}, table[N_TOK], rows[N_TOK];
    int64_t slots[N_TOK];
    for (int32_t i = 0; i < nb; i++)
        table[i] = nb - 1 - i; /* blocks in reverse order */
    for (int32_t i = 0; i < N_TOK; i++) {
        ids[i] = (int32_t)((1000u + 7919u * (uint32_t)i) % (uint32_t)m->cfg.vocab_size);
        pos[i] = i;
        rows[i] = i;
        slots[i] = (int64_t)table[i / bs] * bs + i % bs;
    }
    const int32_t *tables[1] = {table};
    struct hy_batch b = {N_TOK, ids, pos, slots, seq, tables, N_TOK, rows, 0};
    const int rc = hy_model_forward(m, &kv, &b, logits, NULL);
    hy_kv_cache_free(&kv);
    return rc;
}

/* dump or check one model; returns 0 (written / within tolerance), 1 (out of tolerance), 2 (error) */
static int one(int dump, const char *dir, const char *file)
{
    struct hy_model *m;
    if (hy_model_load(dir, HY_COMPUTE_F32, &m)) {
        fprintf(stderr, "forward_check: %s: %s\n", dir, hy_err_msg());
        return 2;
    }
    const int64_t V = m->cfg.vocab_size, n = (int64_t)N_TOK * V;
    float *y = malloc((size_t)n * sizeof(float)), *r = malloc((size_t)n * sizeof(float));
    int rc = 2;
    FILE *f = NULL;
    if (!y || !r || forward(m, y)) {
        fprintf(stderr, "forward_check: %s: forward failed: %s\n", dir, hy_err_msg());
        goto done;
    }
    if (!(f = fopen(file, dump ? "wb" : "rb"))) {
        perror(file);
        goto done;
    }
    if (dump) {
        if (fwrite(y, sizeof(float), (size_t)n, f) == (size_t)n) {
            printf("forward_check: [%s] %s: wrote %lld logits\n", hy_kernels_active()->name, dir, (long long)n);
            rc = 0;
        }
        goto done;
    }
    if (fread(r, sizeof(float), (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "forward_check: %s: short file\n", file);
        goto done;
    }
    double maxd = 0, maxr = 0;
    int agree = 0, strict = 0;
    for (int64_t t = 0; t < N_TOK; t++) {
        const float *yr = y + t * V, *rr = r + t * V;
        int64_t a = 0, b = 0, top2 = -1;
        for (int64_t v = 0; v < V; v++) {
            maxd = fmax(maxd, fabs((double)yr[v] - (double)rr[v]));
            maxr = fmax(maxr, fabs((double)rr[v]));
            if (yr[v] > yr[a])
                a = v;
            if (rr[v] > rr[b])
                b = v;
        }
        for (int64_t v = 0; v < V; v++)
            if (v != b && (top2 < 0 || rr[v] > rr[top2]))
                top2 = v;
        if (rr[b] - rr[top2] > 1e-3) {
            strict++;
            agree += a == b;
        }
    }
    const double bound = 1e-4 * fmax(1.0, maxr);
    rc = maxd <= bound && agree == strict ? 0 : 1;
    printf("forward_check: [%s] %s: max|dlogit| %.3g (bound %.3g), argmax %d/%d where margin > 1e-3: %s\n",
           hy_kernels_active()->name, dir, maxd, bound, agree, strict, rc ? "FAIL" : "PASS");
done:
    if (f)
        fclose(f);
    free(y);
    free(r);
    hy_model_free(m);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc % 2 || (strcmp(argv[1], "dump") && strcmp(argv[1], "check"))) {
        fprintf(stderr, "usage: forward_check dump|check MODEL_DIR FILE [MODEL_DIR FILE ...]\n");
        return 2;
    }
    int worst = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        const int rc = one(argv[1][0] == 'd', argv[i], argv[i + 1]);
        worst = rc > worst ? rc : worst;
    }
    return worst;
}
