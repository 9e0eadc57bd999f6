/* cmd_run.c - `hyinfer run --yaml CONFIG`: the offline batch job (cann-recipes-infer YAML schema).
 *
 * Loads the model and the prompts the config names, generates for all of them in batches of
 * scheduler_config.batch_size, prints each completion, then a timing report (load, prefill
 * tokens/s, TTFT, TPOT, decode tokens/s, peak RSS). A progress bar is drawn on stderr when it is
 * a terminal. */
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/dataset.h"
#include "cli/tools_file.h"

#include "base/err.h"
#include "base/timing.h"
#include "config/run_config.h"
#include "engine/offline.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct run_ctx {
    size_t n_reqs, n_done;
    int tty;
};

static void progress(const struct run_ctx *c, const char *label)
{
    if (!c->tty)
        return;
    const int width = 30;
    int fill = c->n_reqs ? (int)(width * c->n_done / c->n_reqs) : width;
    fprintf(stderr, "\r%-10s [", label);
    for (int i = 0; i < width; i++)
        fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %zu/%zu", c->n_done, c->n_reqs);
    if (c->n_done == c->n_reqs)
        fputc('\n', stderr);
    fflush(stderr);
}

static void on_finish(void *ud, size_t req)
{
    (void)req;
    struct run_ctx *c = ud;
    c->n_done++;
    progress(c, "generate");
}

/* Keeps at most max_len tokens, cutting from the middle (LongBench's rule: the head holds the
 * instructions, the tail holds the question). */
static void truncate_middle(int32_t *ids, size_t *n, int32_t max_len)
{
    if (max_len <= 0 || *n <= (size_t)max_len)
        return;
    size_t head = (size_t)max_len / 2, tail = (size_t)max_len - head;
    memmove(ids + head, ids + *n - tail, tail * sizeof(int32_t));
    *n = (size_t)max_len;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static char *decode_output(const struct hy_tokenizer *tok, const struct hy_gen_request *r)
{
    struct hy_detok d;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    hy_detok_init(&d, tok, 1);
    for (size_t i = 0; i < r->n_prompt; i++)
        hy_detok_push(&d, r->prompt_ids[i], &buf, &len, &cap);
    len = 0; /* the prompt only gives the completion its context */
    for (size_t i = 0; i < r->n_out; i++)
        hy_detok_push(&d, r->out_ids[i], &buf, &len, &cap);
    hy_detok_flush(&d, &buf, &len, &cap);
    char *s = malloc(len + 1);
    if (s) {
        if (len)
            memcpy(s, buf, len);
        s[len] = '\0';
    }
    free(buf);
    return s;
}

static void report(const struct hy_run_config *cfg, const struct hy_model *m, struct hy_gen_request *reqs, size_t n,
                   const struct hy_gen_stats *st, double t_load, double t_gen)
{
    double *ttft = malloc(n * sizeof(double));
    double tpot_sum = 0;
    int64_t out_tokens = 0, tpot_n = 0, in_tokens = 0;
    for (size_t i = 0; i < n; i++) {
        ttft[i] = reqs[i].t_first_token;
        out_tokens += (int64_t)reqs[i].n_out;
        in_tokens += (int64_t)reqs[i].n_prompt;
        if (reqs[i].n_out > 1) {
            tpot_sum += (reqs[i].t_done - reqs[i].t_first_token) / (double)(reqs[i].n_out - 1);
            tpot_n++;
        }
    }
    qsort(ttft, n, sizeof(double), cmp_double);
    double tpot = tpot_n ? tpot_sum / (double)tpot_n : 0;
    char rss[32], wb[32];
    fprintf(stderr, "\n==================== hyinfer run report ====================\n");
    fprintf(stderr, "model            %s (%s, %s compute, %s weights)\n", cfg->model_path, m->cfg.model_type,
            m->compute == HY_COMPUTE_F32 ? "float32" : "bfloat16",
            hy_cli_fmt_bytes((double)m->ck.total_bytes, wb, sizeof(wb)));
    fprintf(stderr, "requests         %zu (batch_size %d), prompt tokens %lld, generated tokens %lld\n", n,
            cfg->batch_size, (long long)in_tokens, (long long)out_tokens);
    fprintf(stderr, "load time        %.3f s\n", t_load);
    fprintf(stderr, "prefill          %.1f ms for %lld tokens = %.1f tokens/s\n", st->prefill_seconds * 1e3,
            (long long)st->prefill_tokens, st->prefill_seconds > 0 ? st->prefill_tokens / st->prefill_seconds : 0.0);
    fprintf(stderr, "TTFT             p50 %.1f ms, max %.1f ms (from job start)\n", ttft[n / 2] * 1e3,
            ttft[n - 1] * 1e3);
    fprintf(stderr, "TPOT             %.2f ms/token (mean over requests)\n", tpot * 1e3);
    fprintf(stderr, "decode           %.1f tokens/s in pure decode steps (%lld tokens, %.1f ms), max batch %d\n",
            st->decode_seconds > 0 ? st->decode_tokens / st->decode_seconds : 0.0, (long long)st->decode_tokens,
            st->decode_seconds * 1e3, st->max_batch_seen);
    fprintf(stderr, "throughput       %.1f generated tokens/s over %.2f s wall\n",
            t_gen > 0 ? (double)out_tokens / t_gen : 0.0, t_gen);
    hy_cli_print_spec(stderr, "", st->num_speculative_tokens, &st->spec);
    fprintf(stderr, "peak RSS         %s\n", hy_cli_fmt_bytes((double)hy_peak_rss_bytes(), rss, sizeof(rss)));
    free(ttft);
}

/* calls: per prompt, the parsed tool calls (with --tools) or NULL. */
static int write_output(const char *path, const struct hy_dataset *ds, struct hy_gen_request *reqs, char **texts,
                        json_t **calls)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < ds->n; i++) {
        json_t *rec =
            json_pack("{s:s, s:s?, s:I, s:I, s:s}", "prompt", ds->prompts[i], "completion", texts[i], "prompt_tokens",
                      (json_int_t)reqs[i].n_prompt, "completion_tokens", (json_int_t)reqs[i].n_out, "finish_reason",
                      reqs[i].finish == HY_FINISH_EOS ? "stop" : "length");
        if (calls && calls[i])
            json_object_set(rec, "tool_calls", calls[i]);
        json_array_append_new(arr, rec);
    }
    int rc = json_dump_file(arr, path, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    json_decref(arr);
    return rc ? hy_err_set("%s: cannot write output", path) : 0;
}

int hy_cmd_run(int argc, char **argv)
{
    const char *yaml = NULL, *kvd_flag = NULL, *tools_path = NULL, *chat_template = NULL;
    struct hy_chat chat = {0};
    json_t *tools = NULL, **calls = NULL;
    int *thinking = NULL;
    int threads = 0, help = 0, np = 0, list_keys = 0;
    const char *pos[1];
    struct hy_cli_par par = {0};
    struct hy_cli_spec spec_args = {0};
    const struct hy_arg args[] = {
        HY_CLI_PAR_ARGS(par),
        HY_CLI_SPEC_ARGS(spec_args),
        {"--yaml", NULL, HY_ARG_STR, &yaml, NULL, "run config (cann-recipes-infer YAML schema)"},
        {"--tools", NULL, HY_ARG_STR, &tools_path, NULL,
         "OpenAI tools list (JSON file) rendered into every chat prompt (needs apply_chat_template: true); "
         "tool calls are parsed from the completions"},
        {"--chat-template", NULL, HY_ARG_STR, &chat_template, NULL,
         "chat template file or text for apply_chat_template (default: the checkpoint's)"},
        {"--threads", "-t", HY_ARG_INT, &threads, NULL, "worker threads"},
        {"--kv-cache-dtype", NULL, HY_ARG_STR, &kvd_flag, NULL,
         "auto | bf16 | fp8 (fp8_e4m3) | fp32; overrides model_config.kv_cache_dtype"},
        {"--list-yaml-keys", NULL, HY_ARG_FLAG, &list_keys, NULL,
         "print every key of the YAML schema with what hyinfer does with it (Markdown), then exit"},
        {"--help", "-h", HY_ARG_FLAG, &help, NULL, "this help"},
    };
    const int na = (int)(sizeof(args) / sizeof(args[0]));
    int n_compat;
    const struct hy_arg_compat *compat = hy_cli_vllm_flags(&n_compat);
    if (hy_args_parse_compat(argc, argv, 2, args, na, compat, n_compat, pos, 0, &np)) {
        fprintf(stderr, "hyinfer run: %s\n", hy_err_msg());
        return 2;
    }
    const char *usage = "hyinfer run --yaml CONFIG.yaml [--kv-cache-dtype auto|bf16|fp8|fp32] [--threads N]";
    if (help) {
        hy_args_help(usage, args, na);
        return 0;
    }
    if (list_keys) {
        hy_run_config_print_keys(stdout);
        return 0;
    }
    if (!yaml) {
        fprintf(stderr, "hyinfer run: need --yaml CONFIG.yaml\n");
        hy_args_usage(usage, args, na);
        return 2;
    }
    if (hy_cli_set_threads(&threads)) {
        fprintf(stderr, "hyinfer run: %s\n", hy_err_msg());
        return 2;
    }
    struct hy_run_config cfg;
    struct hy_dataset ds = {0};
    struct hy_model *m = NULL;
    struct hy_tokenizer *tok = NULL;
    struct hy_gen_request *reqs = NULL;
    int32_t **ids = NULL;
    char **texts = NULL;
    int rc = 2; /* a bad flag value or input file (YAML, tools, dataset, model); 1 once generation runs */
    struct run_ctx ctx = {0, 0, isatty(2)};
    memset(&cfg, 0, sizeof(cfg));
    if (hy_run_config_load(yaml, &cfg))
        goto fail;
    if (tools_path && hy_cli_load_tools(tools_path, &tools))
        goto fail;
    if (tools && !cfg.apply_chat_template) {
        hy_err_set("--tools needs data_config.apply_chat_template: true in %s", yaml);
        goto fail;
    }
    enum hy_compute_dtype cd = cfg.dtype && !strcmp(cfg.dtype, "float32") ? HY_COMPUTE_F32 : HY_COMPUTE_BF16;
    enum hy_dtype kv_dtype;
    if (kvd_flag ? (hy_kv_dtype_parse(kvd_flag, &kv_dtype) && hy_err_prefix("--kv-cache-dtype"))
                 : (hy_kv_dtype_parse(cfg.kv_cache_dtype, &kv_dtype) &&
                    hy_err_prefix("%s: model_config.kv_cache_dtype", cfg.config_path)))
        goto fail;
    struct hy_spec_config spec;
    hy_spec_config_init(&spec);
    spec.num_speculative_tokens = cfg.next_n;
    if (hy_spec_config_validate(&spec) && hy_err_prefix("%s: model_config.next_n", cfg.config_path))
        goto fail;
    if (hy_cli_spec_resolve(&spec_args, &spec))
        goto fail;
    double t0 = hy_time_now();
    if (ctx.tty)
        fprintf(stderr, "loading    %s ...", cfg.model_path);
    struct hy_parallel_config pc;
    hy_parallel_default(&pc);
    pc.world_size = cfg.world_size;
    pc.attn_tp_size = cfg.attn_tp_size;
    pc.dense_tp_size = cfg.dense_tp_size;
    pc.moe_tp_size = cfg.moe_tp_size;
    pc.embed_tp_size = cfg.embed_tp_size;
    pc.lmhead_tp_size = cfg.lmhead_tp_size;
    pc.enable_sp = cfg.enable_sp;
    if (hy_cli_par_resolve(&par, 1, &pc) && hy_err_prefix("%s", cfg.config_path))
        goto fail;
    struct hy_load_params lp;
    hy_load_params_default(&lp, cd);
    if (hy_cli_load_model(cfg.model_path, &lp, &pc, argc, argv, &m) || hy_tokenizer_load_dir(cfg.model_path, &tok) ||
        (cfg.apply_chat_template && hy_cli_load_chat(cfg.model_path, chat_template, &chat)))
        goto fail;
    double t_load = hy_time_now() - t0;
    if (ctx.tty)
        fprintf(stderr, "\rloading    [##############################] %.2f s\n", t_load);
    if (hy_dataset_load(&cfg, NULL, &ds))
        goto fail;
    struct hy_sampling_params sp;
    hy_sampling_params_init(&sp);
    if (hy_sampling_params_from_generation_config(cfg.model_path, &sp) || hy_sampling_params_from_run_config(&cfg, &sp))
        goto fail;
    reqs = calloc(ds.n, sizeof(*reqs));
    ids = calloc(ds.n, sizeof(*ids));
    texts = calloc(ds.n, sizeof(*texts));
    calls = tools ? calloc(ds.n, sizeof(*calls)) : NULL;
    thinking = calloc(ds.n, sizeof(*thinking));
    if (!reqs || !ids || !texts || !thinking || (tools && !calls)) {
        hy_err_set("out of memory");
        goto fail;
    }
    for (size_t i = 0; i < ds.n; i++) {
        size_t n = 0;
        if (hy_cli_encode_prompt(tok, cfg.apply_chat_template ? &chat : NULL, ds.prompts[i], NULL, tools, &ids[i], &n,
                                 &thinking[i])) {
            hy_err_prefix("%s: prompt %zu", ds.source, i);
            goto fail;
        }
        truncate_middle(ids[i], &n, cfg.input_truncated_len);
        reqs[i].prompt_ids = ids[i];
        reqs[i].n_prompt = n;
        reqs[i].params = sp;
    }
    int32_t budget = cfg.max_prefill_tokens > 0    ? cfg.max_prefill_tokens
                     : cfg.input_truncated_len > 0 ? cfg.input_truncated_len * cfg.batch_size
                                                   : 2048;
    struct hy_gen_opts opts = {cfg.batch_size, budget, cfg.block_size, 0, NULL, on_finish, &ctx, kv_dtype, &spec};
    struct hy_gen_stats st;
    ctx.n_reqs = ds.n;
    progress(&ctx, "generate");
    double tg = hy_time_now();
    rc = 1;
    if (hy_generate(m, reqs, ds.n, &opts, &st))
        goto fail;
    double t_gen = hy_time_now() - tg;
    for (size_t i = 0; i < ds.n; i++) {
        texts[i] = decode_output(tok, &reqs[i]);
        if (tools) { /* the text becomes the content; calls print after it */
            struct hy_cli_tool_result tr;
            if (hy_cli_tool_result(tok, reqs[i].out_ids, reqs[i].n_out, tools, thinking[i], &tr))
                goto fail;
            free(texts[i]);
            texts[i] = strdup(tr.content);
            calls[i] = json_incref(tr.calls);
            hy_cli_tool_result_free(&tr);
        }
        printf("=== [%zu/%zu] prompt (%zu tokens) ===\n%s\n--- completion (%zu tokens, %s) ---\n%s\n\n", i + 1, ds.n,
               reqs[i].n_prompt, ds.prompts[i], reqs[i].n_out, reqs[i].finish == HY_FINISH_EOS ? "stop" : "length",
               texts[i] ? texts[i] : "");
        if (calls && json_array_size(calls[i])) {
            char *j = json_dumps(calls[i], JSON_COMPACT | JSON_ENSURE_ASCII);
            printf("--- tool_calls ---\n%s\n\n", j ? j : "[]");
            free(j);
        }
    }
    fflush(stdout);
    if (cfg.output_path && write_output(cfg.output_path, &ds, reqs, texts, calls))
        goto fail;
    report(&cfg, m, reqs, ds.n, &st, t_load, t_gen);
    rc = 0;
    goto out;
fail:
    if (ctx.tty)
        fputc('\n', stderr);
    fprintf(stderr, "hyinfer run: %s\n", hy_err_msg());
out:
    for (size_t i = 0; reqs && i < ds.n; i++) {
        free(reqs[i].out_ids);
        free(ids[i]);
        free(texts[i]);
        if (calls)
            json_decref(calls[i]);
    }
    free(calls);
    json_decref(tools);
    free(reqs);
    free(ids);
    free(texts);
    hy_dataset_free(&ds);
    free(thinking);
    hy_chat_free(&chat);
    hy_tokenizer_free(tok);
    hy_cli_free_model(m);
    hy_run_config_free(&cfg);
    return rc;
}
