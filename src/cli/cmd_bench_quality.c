/* cmd_bench_quality.c - `hyinfer bench quality -m A --ref B`: top-1 agreement, KL divergence and
 * perplexities of model A's next-token distributions against reference model B over a fixed text
 * (default: the held-out last 10% of tinyshakespeare, the split tools/make/train_tiny_hy3.py validates
 * on). Measures and the window rule: src/bench/quality.h. The table (or, with --json, one JSON
 * object) goes to stdout; errors to stderr. Exit status: 0, 2 for bad input (flags, unreadable
 * model or text, too little text, mismatched tokenizers or vocabularies), 1 when a run fails.
 */
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"

#include "base/env.h"
#include "base/err.h"
#include "base/fileio.h"
#include "base/timing.h"
#include "bench/quality.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_CORPUS "tests/data/corpora/tinyshakespeare.txt"
#define DEFAULT_TEXT_START 0.9 /* tools/make/train_tiny_hy3.py: cut = int(len(text) * 0.9) */

/* Everything that decides how one side runs: [0] = model A (under test), [1] = reference B.
 * A new engine option for a side is a field here, a flag line in the table of hy_cmd_bench_quality
 * pointing at so[0] (or so[1]), and its use: in load_side when it acts at load time, else a field
 * of struct hy_quality_model (bench/quality.h) filled where qm[] is built. Example: --kv-cache-dtype
 * (so[0].kv_cache_dtype) is parsed in load_side into struct side, copied to
 * hy_quality_model.kv_dtype, and side_kv_init in quality.c calls hy_model_kv_cache_init_dtype
 * with it. */
struct side_opts {
    const char *dir;            /* -m / --ref */
    const char *dtype;          /* --dtype / --ref-dtype: float32 | bfloat16 | auto */
    const char *kv_cache_dtype; /* --kv-cache-dtype / --ref-kv-cache-dtype: auto | bf16 | fp8 | fp32 */
};

struct side {
    struct hy_model *m;
    struct hy_tokenizer *tok;
    enum hy_compute_dtype cd;
    enum hy_dtype kv_dtype; /* HY_DTYPE_UNKNOWN = auto */
};

/* Loads the model and the tokenizer of tok_dir (NULL: none). */
static int load_side(const struct side_opts *o, const char *what, const char *tok_dir, struct side *s)
{
    if (hy_kv_dtype_parse(o->kv_cache_dtype, &s->kv_dtype))
        return hy_err_prefix("%s", what[0] == 'r' ? "--ref-kv-cache-dtype" : "--kv-cache-dtype");
    if (hy_cli_parse_dtype(o->dtype, o->dir, &s->cd) || hy_model_load(o->dir, s->cd, &s->m) ||
        (tok_dir && hy_tokenizer_load_dir(tok_dir, &s->tok)))
        return hy_err_prefix("%s %s", what, o->dir);
    return 0;
}

static const char *dtype_name(enum hy_compute_dtype cd)
{
    return cd == HY_COMPUTE_F32 ? "float32" : "bfloat16";
}

/* p (malloc'd) made canonical for display when possible; takes ownership. */
static char *canonical(char *p)
{
    char *r = p ? realpath(p, NULL) : NULL;
    if (!r)
        return p;
    free(p);
    return r;
}

/* The default text file: $HYINFER_ROOT/DEFAULT_CORPUS, else <exe dir>/../DEFAULT_CORPUS (the
 * repository root of a build/hyinfer).
 * Returns a malloc'd path or NULL with hy_err_msg() listing where it looked. */
static char *find_default_text(void)
{
    char tried[2 * PATH_MAX + 64] = "";
    const char *env = hy_env_params()->root; /* HYINFER_ROOT */
    if (env) {
        char *p = hy_path_join(env, DEFAULT_CORPUS);
        if (p && hy_file_exists(p))
            return canonical(p);
        snprintf(tried, sizeof(tried), "%s", p ? p : "");
        free(p);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char *p = hy_path_join(exe, "../" DEFAULT_CORPUS);
            if (p && hy_file_exists(p))
                return canonical(p);
            size_t l = strlen(tried);
            snprintf(tried + l, sizeof(tried) - l, "%s%s", l ? ", " : "", p ? p : "");
            free(p);
        }
    }
    hy_err_set("no text to measure on: pass --text FILE, or set HYINFER_ROOT to the repository holding %s "
               "(looked at: %s)",
               DEFAULT_CORPUS, tried[0] ? tried : "nothing: HYINFER_ROOT unset, executable path unknown");
    return NULL;
}

#define POSITIONS_ALL (-1)

/* --positions: a decimal count in [1, INT32_MAX], or "all" (POSITIONS_ALL). 0, or -1 when s is neither. */
static int parse_positions(const char *s, int *out)
{
    if (!strcmp(s, "all")) {
        *out = POSITIONS_ALL;
        return 0;
    }
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < 1 || v > INT32_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

int hy_cmd_bench_quality(int argc, char **argv)
{
    struct side_opts so[2] = {{0}};
    const char *text_path = NULL, *text_start = NULL, *tokenizer_dir = NULL, *positions_s = NULL;
    int positions = 1000, context = 0, threads = 0, json = 0, help = 0, rows_per_step = 64;
    const struct hy_arg args[] = {
        {"--model", "-m", HY_ARG_STR, &so[0].dir, NULL, "model A, the one measured (directory)"},
        {"--ref", NULL, HY_ARG_STR, &so[1].dir, NULL, "reference model B (directory)"},
        {"--dtype", NULL, HY_ARG_STR, &so[0].dtype, NULL, "A's compute mode: float32 | bfloat16 | auto (default)"},
        {"--ref-dtype", NULL, HY_ARG_STR, &so[1].dtype, NULL, "B's compute mode (default: the same as --dtype)"},
        {"--kv-cache-dtype", NULL, HY_ARG_STR, &so[0].kv_cache_dtype, NULL,
         "A's KV cache: auto (default: its compute dtype) | bf16 | fp8 | fp32"},
        {"--ref-kv-cache-dtype", NULL, HY_ARG_STR, &so[1].kv_cache_dtype, NULL, "B's KV cache (default auto)"},
        {"--text", NULL, HY_ARG_STR, &text_path, NULL,
         "UTF-8 text file (default: $HYINFER_ROOT/" DEFAULT_CORPUS ", from --text-start 0.9)"},
        {"--text-start", NULL, HY_ARG_STR, &text_start, NULL,
         "fraction of the file's characters skipped (default 0.9 for the default text, 0 with --text)"},
        {"--tokenizer", NULL, HY_ARG_STR, &tokenizer_dir, NULL,
         "directory whose tokenizer both sides use (default: each model's own; they must agree)"},
        {"--positions", NULL, HY_ARG_STR, &positions_s, NULL,
         "predicted positions measured (default 1000), or all: every token of the text"},
        {"--context", NULL, HY_ARG_INT, &context, NULL,
         "tokens per window, KV reset between windows (default min(max_position_embeddings, 1024))"},
        {"--rows", NULL, HY_ARG_INT, &rows_per_step, NULL, "tokens (logits rows) per forward call (default 64)"},
        {"--threads", "-t", HY_ARG_INT, &threads, NULL, "worker threads (default: all / HYINFER_NUM_THREADS)"},
        {"--json", NULL, HY_ARG_FLAG, &json, NULL, "print one JSON object instead of the table"},
        {"--help", "-h", HY_ARG_FLAG, &help, NULL, "this help"},
    };
    const int na = (int)(sizeof(args) / sizeof(args[0]));
    const char *usage = "hyinfer bench quality -m A --ref B [--text FILE] [--tokenizer DIR] [--positions 1000|all] "
                        "[--context N] [--dtype auto|bfloat16|float32] [--ref-dtype ...] [--kv-cache-dtype fp8] "
                        "[--threads N] [--json]";
    int np;
    if (hy_args_parse(argc, argv, 3, args, na, NULL, 0, &np)) {
        fprintf(stderr, "hyinfer bench quality: %s\n", hy_err_msg());
        return 2;
    }
    if (help) {
        hy_args_help(usage, args, na);
        return 0;
    }
    if (hy_cli_single_rank("hyinfer bench quality")) {
        fprintf(stderr, "hyinfer bench quality: %s\n", hy_err_msg());
        return 2;
    }
    if (!so[0].dir || !so[1].dir) {
        fprintf(stderr, "hyinfer bench quality: need -m A (the model measured) and --ref B (the reference)\n");
        hy_args_usage(usage, args, na);
        return 2;
    }
    if (positions_s && parse_positions(positions_s, &positions)) {
        fprintf(stderr, "hyinfer bench quality: --positions \"%s\": expected a count in [1, %d] or all\n", positions_s,
                INT32_MAX);
        return 2;
    }
    if (context < 0 || rows_per_step < 1) {
        fprintf(stderr, "hyinfer bench quality: --rows (%d) must be >= 1, --context (%d) >= 2\n", rows_per_step,
                context);
        return 2;
    }
    if (!so[1].dtype)
        so[1].dtype = so[0].dtype;
    /* parsed as a double: the default split must be the trainer's double 0.9, not a float's */
    double frac = text_path ? 0.0 : DEFAULT_TEXT_START;
    if (text_start) {
        char *end;
        frac = strtod(text_start, &end);
        if (!*text_start || *end || !(frac >= 0.0 && frac < 1.0)) {
            fprintf(stderr, "hyinfer bench quality: --text-start \"%s\": expected a fraction in [0, 1)\n", text_start);
            return 2;
        }
    }

    struct side sd[2] = {{0}};
    char *found = NULL, *text = NULL;
    int32_t *ids[2] = {NULL, NULL};
    size_t n_ids[2] = {0, 0};
    int rc = 2;
    if (hy_cli_set_threads(&threads))
        goto fail;
    /* the text first: a missing corpus is reported before seconds of model loading */
    if (!text_path && !(text_path = found = find_default_text()))
        goto fail;
    size_t text_len = 0, off = 0;
    int64_t start_char = 0, n_chars = 0;
    if (hy_file_read_all(text_path, &text, &text_len))
        goto fail;
    if (hy_quality_text_tail(text, text_len, frac, &off, &start_char, &n_chars)) {
        hy_err_prefix("--text %s", text_path);
        goto fail;
    }
    for (int k = 0; k < 2; k++)
        /* with --tokenizer, one tokenizer (held by side 0) serves both */
        if (load_side(&so[k], k ? "reference" : "model", tokenizer_dir ? (k ? NULL : tokenizer_dir) : so[k].dir,
                      &sd[k]))
            goto fail;
    const struct hy_model_config *ca = &sd[0].m->cfg, *cb = &sd[1].m->cfg;
    if (ca->vocab_size != cb->vocab_size) {
        hy_err_set("vocab sizes differ: model %s has %d, reference %s has %d", so[0].dir, ca->vocab_size, so[1].dir,
                   cb->vocab_size);
        goto fail;
    }
    for (int k = 0; k < (tokenizer_dir ? 1 : 2); k++)
        if (hy_tokenizer_encode(sd[k].tok, text + off, text_len - off, 0, &ids[k], &n_ids[k])) {
            hy_err_prefix("%s tokenizer", k ? "reference" : "model");
            goto fail;
        }
    const int32_t bos = hy_tokenizer_add_bos(sd[0].tok), bos_b = sd[1].tok ? hy_tokenizer_add_bos(sd[1].tok) : bos;
    if (tokenizer_dir) { /* one tokenizer: the reference side reuses A's ids */
        n_ids[1] = n_ids[0];
        if (n_ids[0] && !(ids[1] = malloc(n_ids[0] * sizeof(int32_t)))) {
            hy_err_set("out of memory");
            goto fail;
        }
        if (n_ids[0])
            memcpy(ids[1], ids[0], n_ids[0] * sizeof(int32_t));
    }
    if (bos != bos_b) {
        hy_err_set("the tokenizers differ: BOS id %d (model) vs %d (reference)", bos, bos_b);
        goto fail;
    }
    if (n_ids[0] != n_ids[1] || (n_ids[0] && memcmp(ids[0], ids[1], n_ids[0] * sizeof(int32_t)))) {
        size_t i = 0;
        while (i < n_ids[0] && i < n_ids[1] && ids[0][i] == ids[1][i])
            i++;
        hy_err_set("the tokenizers differ on the text: %zu vs %zu tokens, first difference at token %zu", n_ids[0],
                   n_ids[1], i);
        goto fail;
    }
    if (positions == POSITIONS_ALL) { /* every text token predicted once: the inverse of tokens_needed */
        const int64_t all = bos >= 0 ? (int64_t)n_ids[0] : (int64_t)n_ids[0] - 1;
        if (all < 1) {
            hy_err_set("--positions all: the text (%s from character %lld) gives no position to predict (%zu "
                       "token%s)",
                       text_path, (long long)start_char, n_ids[0], n_ids[0] == 1 ? "" : "s");
            goto fail;
        }
        positions = all < INT32_MAX ? (int)all : INT32_MAX;
    }
    const int64_t need = hy_quality_tokens_needed(positions, bos);
    if ((int64_t)n_ids[0] < need) {
        hy_err_set("--positions %d needs %lld text tokens, the text (%s from character %lld) has %zu", positions,
                   (long long)need, text_path, (long long)start_char, n_ids[0]);
        goto fail;
    }
    const int32_t max_ctx = ca->max_position_embeddings < cb->max_position_embeddings ? ca->max_position_embeddings
                                                                                      : cb->max_position_embeddings;
    if (context == 0)
        context = max_ctx < 1024 ? max_ctx : 1024;
    if (context < 2 || context > max_ctx) {
        hy_err_set("--context %d: must be in [2, %d] (the models' max_position_embeddings)", context, max_ctx);
        goto fail;
    }

    struct hy_quality_stats st;
    const double t0 = hy_time_now();
    const struct hy_quality_model qm[2] = {{.m = sd[0].m, .kv_dtype = sd[0].kv_dtype},
                                           {.m = sd[1].m, .kv_dtype = sd[1].kv_dtype}};
    if (hy_quality_run(&qm[0], &qm[1], ids[0], (int64_t)n_ids[0], bos, positions, context, rows_per_step, &st)) {
        rc = 1;
        goto fail;
    }
    const double secs = hy_time_now() - t0;
    struct hy_quality_summary su;
    hy_quality_summarize(&st, &su);

    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "top1_agreement", json_real(su.top1_agreement));
        json_object_set_new(o, "top1_agreement_stderr", json_real(su.top1_stderr));
        json_object_set_new(o, "mean_kl", json_real(su.mean_kl));
        json_object_set_new(o, "positions", json_integer(st.positions));
        json_object_set_new(o, "max_kl", json_real(su.max_kl));
        json_object_set_new(o, "max_kl_position", json_integer(st.max_kl_position));
        json_object_set_new(o, "top1_in_ref_top5", json_real(su.top5_agreement));
        json_object_set_new(o, "top1_agree_count", json_integer(st.top1_agree));
        json_object_set_new(o, "perplexity", json_real(su.ppl_a));
        json_object_set_new(o, "ref_perplexity", json_real(su.ppl_b));
        json_object_set_new(o, "nll", json_real(su.nll_a));
        json_object_set_new(o, "ref_nll", json_real(su.nll_b));
        json_object_set_new(o, "kl_direction", json_string("KL(P_ref || P_model), nats"));
        for (int k = 0; k < 2; k++) {
            const enum hy_dtype kd = hy_model_kv_dtype(sd[k].m, sd[k].kv_dtype);
            json_t *side = json_pack("{s:s, s:s, s:s, s:i}", "dir", so[k].dir, "dtype", dtype_name(sd[k].cd),
                                     "kv_cache_dtype", hy_kv_dtype_name(kd), "vocab_size", sd[k].m->cfg.vocab_size);
            if (kd == HY_DTYPE_F8_E4M3) /* the rule the caches used (HYINFER_KV_FP8_SCALE) */
                json_object_set_new(side, "kv_fp8_scale",
                                    json_string(hy_env_params()->kv_fp8_scale_fit ? "mse" : "amax"));
            json_object_set_new(o, k ? "ref" : "model", side);
        }
        json_object_set_new(o, "text",
                            json_pack("{s:s, s:f, s:I, s:I, s:I, s:I}", "source", text_path, "start_fraction", frac,
                                      "start_char", (json_int_t)start_char, "chars", (json_int_t)(n_chars - start_char),
                                      "tokens", (json_int_t)n_ids[0], "tokens_used", (json_int_t)need));
        json_object_set_new(o, "bos", json_integer(bos));
        json_object_set_new(o, "tokenizer", json_string(tokenizer_dir ? tokenizer_dir : so[0].dir));
        json_object_set_new(o, "context", json_integer(context));
        json_object_set_new(o, "windows", json_integer(st.windows));
        json_object_set_new(o, "window_rule",
                            json_string(bos >= 0 ? "non-overlapping windows, fresh KV cache each, each window = "
                                                   "BOS + contiguous text"
                                                 : "non-overlapping windows of contiguous text, fresh KV cache each"));
        json_object_set_new(o, "seconds", json_real(secs));
        char *txt = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
        json_decref(o);
        if (!txt) {
            hy_err_set("cannot format the JSON output");
            rc = 1;
            goto fail;
        }
        printf("%s\n", txt);
        free(txt);
    } else {
        printf("hyinfer bench quality\n");
        for (int k = 0; k < 2; k++)
            printf("  %-11s %s  (%s, KV cache %s)\n", k ? "reference" : "model", so[k].dir, dtype_name(sd[k].cd),
                   hy_kv_dtype_name(hy_model_kv_dtype(sd[k].m, sd[k].kv_dtype)));
        printf("  text        %s from character %lld (%lld characters, %zu tokens)\n", text_path, (long long)start_char,
               (long long)(n_chars - start_char), n_ids[0]);
        printf("  positions   %lld in %lld window(s) of <= %d tokens, fresh KV cache each%s\n", (long long)st.positions,
               (long long)st.windows, context, bos >= 0 ? ", BOS first" : "");
        printf("\n");
        printf("  top-1 agreement            %.4f  (%lld / %lld; binomial standard error %.4f)\n", su.top1_agreement,
               (long long)st.top1_agree, (long long)st.positions, su.top1_stderr);
        printf("  model top-1 in ref top-5   %.4f\n", su.top5_agreement);
        printf("  mean KL(ref || model)      %.6g nats\n", su.mean_kl);
        printf("  max KL                     %.6g nats (position %lld)\n", su.max_kl, (long long)st.max_kl_position);
        printf("  perplexity model / ref     %.4f / %.4f  (mean NLL %.4f / %.4f nats/token)\n", su.ppl_a, su.ppl_b,
               su.nll_a, su.nll_b);
        printf("  seconds                    %.2f\n", secs);
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "hyinfer bench quality: %s\n", hy_err_msg());
out:
    for (int k = 0; k < 2; k++) {
        free(ids[k]);
        hy_tokenizer_free(sd[k].tok);
        hy_cli_free_model(sd[k].m);
    }
    free(text);
    free(found);
    return rc;
}
