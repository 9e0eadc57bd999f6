/* cmd_quantize.c - `hyinfer quantize -m IN -o OUT --quant-dtype fp8|mxfp8|mxfp4|hybrid|w8a8-dynamic|w8a8|w8a8-mix
 *                  [--quant-target moe attn-linear mlp lm_head embed] [--mx-scale ocp|mse] [--calib-data TEXT ...]`
 * (round-to-nearest, or GPTQ with calibration: quantize/gptq.h, quantize/calib.h), and `hyinfer info -m DIR`'s
 * model part. */
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"

#include "base/err.h"
#include "base/fileio.h"
#include "base/log.h"
#include "bench/quality.h"
#include "config/model_config.h"
#include "config/quant_config.h"
#include "model/model.h"
#include "model/place.h"
#include "quantize/calib.h"
#include "quantize/outdir.h"
#include "quantize/quantize.h"
#include "text/tokenizer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *usage_text =
    "hyinfer quantize -m IN_DIR -o OUT_DIR --quant-dtype fp8|mxfp8|mxfp4|hybrid|w8a8-dynamic|w8a8|w8a8-mix\n"
    "                 [--quant-target moe attn-linear mlp lm_head embed]\n"
    "                 [--mx-scale ocp|mse]\n"
    "                 [--calib-data TEXT_FILE [--tokenizer DIR] [--num-calibration-samples N] [--max-seq-length L]\n"
    "                  [--dampening-frac F] [--no-actorder] [--no-qk-norm-weighting] [--no-routing-weighting] "
    "[--no-attention-hessian]\n"
    "                  [--calib-memory-gib G] [--no-gptq]]";

/* GPTQ calibration options (flag names follow llm-compressor's oneshot / GPTQModifier). */
struct calib_opts {
    const char *data;      /* --calib-data: text file, NULL = round-to-nearest */
    const char *tokenizer; /* --tokenizer: directory of the tokenizer (default: IN) */
    int samples;           /* --num-calibration-samples */
    int seq_len;           /* --max-seq-length (-1: min(512, max_position_embeddings)) */
    float damp;            /* --dampening-frac */
    int no_actorder;
    int no_qk_weight;    /* --no-qk-norm-weighting */
    int no_route_weight; /* --no-routing-weighting */
    int no_attn_hessian; /* --no-attention-hessian */
    float mem_gib;       /* --calib-memory-gib (< 0: half of physical memory) */
    int no_gptq;         /* --no-gptq */
};

/* Loads IN in fp32 mode (weights left in the file mapping, *m: the caller frees it after quantizing),
 * tokenizes the calibration text and binds it to *c; the statistics are collected while quantizing
 * (quantize/calib.h: in passes that fit --calib-memory-gib). */
static int calibrate(const char *in, const struct calib_opts *co, struct hy_calib *c, struct hy_model **m)
{
    char *text = NULL;
    size_t len = 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    struct hy_tokenizer *tok = NULL;
    int rc = -1;
    struct stat sb;
    *m = NULL;
    if (stat(co->data, &sb) != 0 || !S_ISREG(sb.st_mode))
        return hy_err_set("--calib-data %s: %s", co->data,
                          stat(co->data, &sb) != 0 ? strerror(errno) : "not a regular file");
    if (hy_file_read_all(co->data, &text, &len)) {
        hy_err_prefix("--calib-data");
        return -1;
    }
    if (hy_quality_utf8_chars(text, len) < 0) { /* the same rule as bench quality --text */
        hy_err_prefix("--calib-data %s", co->data);
        goto out;
    }
    struct hy_load_params lp; /* the calibration model is read once: no copy into the arena */
    hy_load_params_default(&lp, HY_COMPUTE_F32);
    lp.format = HY_LOAD_MMAP;
    if (hy_model_load_ex(in, &lp, m)) {
        hy_err_prefix("calibration: %s", in);
        goto out;
    }
    if ((*m)->quant.method != HY_QM_NONE) {
        hy_err_set("%s already has a quantization_config: quantize reads an unquantized (BF16/F16/F32) checkpoint", in);
        goto out;
    }
    if (hy_tokenizer_load_dir(co->tokenizer ? co->tokenizer : in, &tok)) {
        hy_err_prefix("%s", co->tokenizer ? "--tokenizer" : "calibration tokenizer");
        goto out;
    }
    if (hy_tokenizer_encode(tok, text, len, 0, &ids, &n_ids)) {
        hy_err_prefix("--calib-data %s", co->data);
        goto out;
    }
    const int32_t mp = (*m)->cfg.max_position_embeddings, seq = co->seq_len >= 0 ? co->seq_len : (mp < 512 ? mp : 512);
    const double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    const double want = co->mem_gib >= 0.0f ? (double)co->mem_gib * 1073741824.0 : phys / 2.0;
    const uint64_t cap = want >= 1.8e19 ? UINT64_MAX : (uint64_t)want;
    const unsigned weighting = (co->no_qk_weight ? 0u : (unsigned)HY_CALIB_QK_NORM) |
                               (co->no_route_weight ? 0u : (unsigned)HY_CALIB_ROUTING) |
                               (co->no_attn_hessian ? 0u : (unsigned)HY_CALIB_ATTN);
    if (hy_calib_init(c, *m, cap, weighting))
        goto out;
    if (hy_calib_bind(c, *m, ids, (int64_t)n_ids, hy_tokenizer_add_bos(tok), co->samples, seq)) {
        hy_calib_free(c);
        goto out;
    }
    rc = 0;
out:
    free(ids);
    free(text);
    hy_tokenizer_free(tok);
    if (rc) {
        hy_model_free(*m);
        *m = NULL;
    }
    return rc;
}

/* --quant-target takes one or more words (space- or comma-separated); they are folded into *mask and
 * removed from argv (the rest goes to the table parser). */
static int take_targets(int *argc, char **argv, unsigned *mask, int *seen)
{
    int w = 2;
    for (int i = 2; i < *argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (!strcmp(a, "--quant-target"))
            val = "";
        else if (!strncmp(a, "--quant-target=", 15))
            val = a + 15;
        if (!val) {
            argv[w++] = argv[i];
            continue;
        }
        *seen = 1;
        int n = 0;
        for (;;) {
            const char *word = val;
            if (!*word) {
                if (i + 1 >= *argc || argv[i + 1][0] == '-')
                    break;
                word = argv[++i];
                val = "";
            } else {
                val = "";
            }
            char *copy = strdup(word), *save = NULL;
            if (!copy)
                return hy_err_set("out of memory");
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                unsigned bit;
                if (hy_quant_target_parse(t, &bit)) {
                    free(copy);
                    return -1;
                }
                *mask |= bit;
                n++;
            }
            free(copy);
        }
        if (!n)
            return hy_err_set("--quant-target needs one or more of moe, attn-linear, mlp, lm_head, embed");
    }
    *argc = w;
    return 0;
}

int hy_cmd_quantize(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *dtype = NULL, *unused_targets = NULL, *mx_scale = NULL;
    /* -1 / NaN: not given (the calibration flags need --calib-data; defaults are filled in below) */
    struct calib_opts co = {.samples = -1, .seq_len = -1, .damp = NAN, .mem_gib = NAN};
    int help = 0, tseen = 0, threads = 0;
    unsigned targets = 0;
    const struct hy_arg args[] = {
        {"--model", "-m", HY_ARG_STR, &in, NULL, "input model directory (BF16 / F16 / F32 safetensors)"},
        {"--output", "-o", HY_ARG_STR, &out, NULL, "output directory (must not exist, or be empty)"},
        {"--quant-dtype", NULL, HY_ARG_STR, &dtype, NULL,
         "fp8 (per-tensor, Hy3-FP8 layout) | mxfp8 | mxfp4 | hybrid (routed experts mxfp4, the rest mxfp8) | "
         "w8a8-dynamic (Ascend int8, msModelSlim V1 layout) | w8a8 (static int8 activations except routed experts; "
         "needs --calib-data) | w8a8-mix (static attention, dynamic MLPs; needs --calib-data)"},
        {"--quant-target", NULL, HY_ARG_STR, &unused_targets, NULL,
         "one or more of moe (routed + shared experts), attn-linear (q/k/v/o, MTP eh_proj), mlp (dense MLP); "
         "lm_head, embed (opt-in: the published checkpoints keep both BF16); default: moe attn-linear mlp"},
        {"--mx-scale", NULL, HY_ARG_STR, &mx_scale, NULL,
         "MX block scales: ocp (floor(log2 amax) - emax, the OCP MX conversion; default) | mse (that or one "
         "exponent up, whichever has the smaller block error)"},
        {"--calib-data", NULL, HY_ARG_STR, &co.data, NULL,
         "text file: round with GPTQ on statistics of the model's own layer inputs over this text "
         "(default: round-to-nearest)"},
        {"--tokenizer", NULL, HY_ARG_STR, &co.tokenizer, NULL,
         "tokenizer directory for the calibration text (default: the model's)"},
        {"--num-calibration-samples", NULL, HY_ARG_INT, &co.samples, NULL,
         "calibration windows, consecutive from the start of the text (default 64)"},
        {"--max-seq-length", NULL, HY_ARG_INT, &co.seq_len, NULL,
         "tokens per window, BOS included, >= 2 (default min(512, max_position_embeddings))"},
        {"--dampening-frac", NULL, HY_ARG_FLOAT, &co.damp, NULL, "GPTQ dampening / mean(diag H) (default 0.01)"},
        {"--no-actorder", NULL, HY_ARG_FLAG, &co.no_actorder, NULL,
         "GPTQ columns in index order (default: by decreasing activation energy)"},
        {"--no-qk-norm-weighting", NULL, HY_ARG_FLAG, &co.no_qk_weight, NULL,
         "q_proj of a QK-norm layer shares the k/v Hessian, every token alike (default: its own, tokens weighted by "
         "1 / rms of their query heads)"},
        {"--no-routing-weighting", NULL, HY_ARG_FLAG, &co.no_route_weight, NULL,
         "a routed expert's calibration tokens count alike (default: weighted by their squared routing weight)"},
        {"--no-attention-hessian", NULL, HY_ARG_FLAG, &co.no_attn_hessian, NULL,
         "q_proj's rows are rounded independently (default: the rows of each head jointly, weighted by how the "
         "attention scores read them)"},
        {"--calib-memory-gib", NULL, HY_ARG_FLOAT, &co.mem_gib, NULL,
         "f64 statistics resident at once; more are collected in passes, which also keep a samples x tokens x "
         "hidden_size f32 hidden-state checkpoint (default: half of physical memory)"},
        {"--no-gptq", NULL, HY_ARG_FLAG, &co.no_gptq, NULL,
         "round to nearest even with --calib-data (the text then only calibrates static W8A8's activation ranges)"},
        {"--threads", "-t", HY_ARG_INT, &threads, NULL, "worker threads (default: all / HYINFER_NUM_THREADS)"},
        {"--help", "-h", HY_ARG_FLAG, &help, NULL, "this help"},
    };
    const int na = (int)(sizeof(args) / sizeof(args[0]));
    if (hy_args_help_requested(argc, argv, 2, args, na)) { /* before take_targets, which can fail */
        hy_args_help(usage_text, args, na);
        return 0;
    }
    if (take_targets(&argc, argv, &targets, &tseen)) {
        fprintf(stderr, "hyinfer quantize: %s\n", hy_err_msg());
        return 2;
    }
    int np;
    if (hy_args_parse(argc, argv, 2, args, na, NULL, 0, &np)) {
        fprintf(stderr, "hyinfer quantize: %s\n", hy_err_msg());
        return 2;
    }
    if (help) {
        hy_args_help(usage_text, args, na);
        return 0;
    }
    if (hy_cli_single_rank("hyinfer quantize")) {
        fprintf(stderr, "hyinfer quantize: %s\n", hy_err_msg());
        return 2;
    }
    struct hy_quantize_opts o = {.targets = tseen ? targets : HY_QT_ALL};
    if (!in || !out || !dtype || !*in || !*out) {
        /* an empty -o used to quantize everything into "./.tmp-PID" and then fail the rename; an empty
         * -m read the current directory */
        fprintf(stderr, "hyinfer quantize: need -m IN_DIR, -o OUT_DIR (non-empty paths) and --quant-dtype\n");
        hy_args_usage(usage_text, args, na);
        return 2;
    }
    if (hy_quant_dtype_parse(dtype, &o.dtype)) {
        fprintf(stderr, "hyinfer quantize: %s\n", hy_err_msg());
        return 2;
    }
    if (hy_cli_set_threads(&threads)) {
        fprintf(stderr, "hyinfer quantize: %s\n", hy_err_msg());
        return 2;
    }
    if (mx_scale && strcmp(mx_scale, "ocp") && strcmp(mx_scale, "mse")) {
        fprintf(stderr, "hyinfer quantize: --mx-scale %s: expected ocp or mse\n", mx_scale);
        return 2;
    }
    o.mx_scale = mx_scale && !strcmp(mx_scale, "mse") ? HY_MX_SCALE_MSE : HY_MX_SCALE_OCP;
    const int given = co.samples != -1 || co.seq_len != -1 || !isnan(co.damp) || !isnan(co.mem_gib) || co.no_actorder ||
                      co.no_qk_weight || co.no_route_weight || co.no_attn_hessian || co.tokenizer || co.no_gptq;
    if (!co.data && given) {
        fprintf(stderr, "hyinfer quantize: the calibration options need --calib-data FILE\n");
        return 2;
    }
    if (!co.data && (o.dtype == HY_QD_W8A8 || o.dtype == HY_QD_W8A8_MIX)) {
        fprintf(stderr,
                "hyinfer quantize: --quant-dtype %s needs --calib-data: static W8A8 takes each linear's activation "
                "scale and offset from the range of its inputs over calibration text\n",
                dtype);
        return 2;
    }
    struct hy_model_config in_cfg; /* the input is a model (its config.json) before the output path is looked at */
    if (hy_model_config_load(in, &in_cfg)) {
        fprintf(stderr, "hyinfer quantize: %s\n", hy_err_msg());
        return 2;
    }
    struct hy_quant_config in_q; /* an input that is quantized already is a bad input, refused before any work */
    memset(&in_q, 0, sizeof(in_q));
    const int qerr = hy_quant_config_load(in, &in_q);
    const int quantized = !qerr && in_q.method != HY_QM_NONE;
    hy_quant_config_free(&in_q);
    if (quantized) {
        fprintf(stderr,
                "hyinfer quantize: %s already has a quantization_config: quantize reads an unquantized "
                "(BF16/F16/F32) checkpoint\n",
                in);
        return 2;
    }
    const char *bad = co.samples != -1 && co.samples < 1           ? "--num-calibration-samples must be >= 1"
                      : co.seq_len != -1 && co.seq_len < 2         ? "--max-seq-length must be >= 2"
                      : !isnan(co.damp) && !(co.damp >= 0.0f)      ? "--dampening-frac must be >= 0"
                      : !isnan(co.mem_gib) && !(co.mem_gib > 0.0f) ? "--calib-memory-gib must be > 0"
                                                                   : NULL;
    if (bad) {
        fprintf(stderr, "hyinfer quantize: %s\n", bad);
        return 2;
    }
    if (co.samples == -1)
        co.samples = 64;
    if (isnan(co.damp))
        co.damp = 0.01f;
    if (isnan(co.mem_gib))
        co.mem_gib = -1.0f; /* default: half of physical memory */
    if (o.mx_scale == HY_MX_SCALE_MSE && o.dtype == HY_QD_FP8)
        fprintf(stderr, "hyinfer quantize: warning: --mx-scale applies to MX formats; fp8 has one per-tensor scale\n");
    struct hy_calib calib;
    struct hy_model *cm = NULL;
    if (co.data) {
        if (hy_quantize_check_out(in, out) || calibrate(in, &co, &calib, &cm)) {
            fprintf(stderr, "hyinfer quantize: %s\n", hy_err_msg());
            return 2; /* the input model, the calibration text or the output path */
        }
        o.calib = &calib;
        o.gptq = (struct hy_gptq_opts){.dampening_frac = co.damp, .actorder = !co.no_actorder};
        o.no_gptq = co.no_gptq;
    }
    struct hy_checkpoint ck;
    if (!co.data && (hy_quantize_check_out(in, out) || hy_checkpoint_open(in, &ck))) {
        fprintf(stderr, "hyinfer quantize: %s\n", hy_err_msg());
        return 2; /* the input model or the output path */
    }
    if (!co.data)
        hy_checkpoint_close(&ck);
    struct hy_quantize_stats st;
    const int qrc = hy_quantize_model(in, out, &o, &st);
    if (co.data && !qrc && co.no_gptq) {
        printf("  calibration: %d windows x %d tokens (%lld tokens) of %s%s; activation ranges only%s, %.2f s\n",
               calib.samples, calib.seq_len, (long long)calib.samples * calib.seq_len, co.data,
               calib.samples < co.samples ? " (all the text holds)" : "",
               calib.ranges_run ? "" : " (not needed by this --quant-dtype: nothing ran)", calib.seconds);
    } else if (co.data && !qrc) {
        if (calib.ranges_run)
            printf("  activation ranges (static w8a8): one run of every window through the model\n");
        char ck[96] = "";
        if (calib.resid)
            snprintf(ck, sizeof(ck), " (passes resume from a %.2f MiB hidden-state checkpoint)",
                     (double)calib.samples * calib.seq_len * hy_model_stream_width(cm) * sizeof(float) / 1048576.0);
        printf("  calibration: %d windows x %d tokens (%lld tokens) of %s%s; %d input groups (%.2f MiB in all) in %d "
               "pass%s%s (largest %.2f MiB of %.2f MiB allowed by --calib-memory-gib); %lld layer runs per window%s, "
               "%.2f s\n",
               calib.samples, calib.seq_len, (long long)calib.samples * calib.seq_len, co.data,
               calib.samples < co.samples ? " (all the text holds)" : "", calib.planned,
               (double)calib.planned_bytes / 1048576.0, calib.passes_run, calib.passes_run == 1 ? "" : "es",
               calib.passes_run != calib.n_passes ? " (fewer planned: a pass ran again)" : "",
               (double)calib.pass_bytes_max / 1048576.0, (double)calib.max_bytes / 1048576.0,
               (long long)calib.layers_run, ck, calib.seconds);
    }
    if (co.data) {
        hy_calib_free(&calib);
        hy_model_free(cm);
    }
    if (qrc) {
        fprintf(stderr, "hyinfer quantize: %s\n", hy_err_msg());
        return 1;
    }
    char words[64];
    hy_quant_targets_str(o.targets, words, sizeof(words));
    printf("quantized %s -> %s (%s; targets:%s)\n", in, out, dtype, words);
    printf("  weight matrices: fp8 %lld, mxfp8 %lld, mxfp4 %lld, w8a8-dynamic %lld, w8a8 static %lld; tensors copied "
           "unchanged %lld; other files %lld\n",
           (long long)st.n_quant[HY_QF_FP8_TENSOR], (long long)st.n_quant[HY_QF_MXFP8],
           (long long)st.n_quant[HY_QF_MXFP4], (long long)st.n_quant[HY_QF_W8A8_DYN],
           (long long)st.n_quant[HY_QF_W8A8_STATIC], (long long)st.n_copied, (long long)st.n_files);
    if (st.n_static_no_range)
        printf("  static w8a8: %lld linears no calibration input reached were written W8A8_DYNAMIC\n",
               (long long)st.n_static_no_range);
    printf("  bytes: %llu in (tensor data) -> %llu out (%s), ratio %.3f\n", (unsigned long long)st.bytes_in,
           (unsigned long long)st.bytes_out,
           o.dtype >= HY_QD_W8A8_DYN ? "quant_model_weights-00001-of-00001.safetensors" : "model.safetensors",
           st.bytes_in ? (double)st.bytes_out / (double)st.bytes_in : 0.0);
    if (co.data && !co.no_gptq)
        printf("  GPTQ: %lld matrices (mean output-error ratio vs round-to-nearest %.3f, tr(dW H dW^T); %lld H "
               "factorizations; %lld with each head's rows rounded jointly); round-to-nearest: %lld (no calibration "
               "tokens "
               "reached them), %lld (Hessian indefinite)\n",
               (long long)st.n_gptq, st.n_gptq ? st.gptq_ratio_sum / (double)st.n_gptq : 1.0,
               (long long)st.n_gptq_factors, (long long)st.n_gptq_coupled, (long long)st.n_gptq_rtn,
               (long long)st.n_gptq_indefinite);
    if (st.n_gptq_few_tokens)
        hy_log_warn("quantize: %lld of the GPTQ matrices saw fewer calibration tokens than their input width K, so "
                    "their H is rank-deficient: GPTQ then fits the calibration text (the ratio above looks better) "
                    "and can do worse than round-to-nearest on other text. Give each matrix at least K tokens: "
                    "more --num-calibration-samples or --max-seq-length (a routed expert sees about "
                    "num_experts_per_tok / num_experts of them)",
                    (long long)st.n_gptq_few_tokens);
    printf("  seconds: %.2f\n", st.seconds);
    return 0;
}

int hy_cmd_info_model(const char *model_dir)
{
    struct hy_model *m = NULL;
    if (hy_cli_single_rank("hyinfer info -m") || hy_model_load(model_dir, HY_COMPUTE_F32, &m)) {
        fprintf(stderr, "hyinfer info: %s\n", hy_err_msg());
        return 2; /* the model directory */
    }
    const struct hy_quant_config *q = &m->quant;
    printf("model: %s (%s, %d layers%s)\n", model_dir, m->cfg.model_type, m->cfg.num_hidden_layers,
           m->has_mtp ? " + MTP" : "");
    printf("quantization: %s", hy_quant_method_name(q->method));
    if (q->method == HY_QM_FP8)
        printf(" (activation_scheme %s; computed W8A16: activations stay f32/bf16)",
               q->activation_scheme[0] ? q->activation_scheme : "?");
    printf("\n");
    for (int g = 0; g < q->n_groups; g++)
        printf("  group %s: %s, %lld weight tensors%s%s\n", q->groups[g].name, hy_qformat_name(q->groups[g].format),
               (long long)q->groups[g].n_tensors, q->groups[g].act[0] ? "; input_activations (not applied): " : "",
               q->groups[g].act);
    printf("  unquantized linear weights: %lld\n", (long long)q->n_plain);
    printf("checkpoint bytes: %llu\n", (unsigned long long)m->ck.total_bytes);
    hy_model_free(m);
    return 0;
}
