/* cmd_generate.c - `hyinfer generate`: one prompt, completion streamed to stdout, stats to stderr. */
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/tools_file.h"

#include "base/err.h"
#include "base/timing.h"
#include "engine/offline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gen_ctx {
    struct hy_detok detok;
    int print_text;
    char *buf;
    size_t len, cap;
};

static void emit(struct gen_ctx *g)
{
    if (g->print_text && g->len) {
        fwrite(g->buf, 1, g->len, stdout);
        fflush(stdout);
    }
    g->len = 0;
}

static void on_token(void *ud, size_t req, int32_t id)
{
    (void)req;
    struct gen_ctx *g = ud;
    if (g->detok.tok && hy_detok_push(&g->detok, id, &g->buf, &g->len, &g->cap) == 0)
        emit(g);
}

int hy_cmd_generate(int argc, char **argv)
{
    const char *model_dir = NULL, *prompt = NULL, *prompt_ids = NULL, *dtype = NULL, *effort = NULL, *kvd = NULL,
               *quantization = NULL;
    const char *tools_path = NULL, *chat_template = NULL;
    json_t *tools = NULL;
    struct hy_chat chat_tpl = {0};
    int thinking = 0;
    int max_tokens = 128, threads = 0, print_ids = 0, echo = 0, chat = 0, help = 0, ignore_eos = 0;
    struct hy_sampling_params sp, cli;
    hy_sampling_params_init(&cli);
    int seen_t = 0, seen_p = 0, seen_k = 0, seen_minp = 0, seen_rep = 0, seen_pres = 0, seen_freq = 0, seen_seed = 0;
    struct hy_cli_par par = {0};
    struct hy_cli_spec spec_args = {0};
    const struct hy_arg args[] = {
        HY_CLI_PAR_ARGS(par),
        HY_CLI_SPEC_ARGS(spec_args),
        {"--model", "-m", HY_ARG_STR, &model_dir, NULL, "model directory (Hugging Face layout)"},
        {"--prompt", "-p", HY_ARG_STR, &prompt, NULL, "prompt text"},
        {"--prompt-ids", NULL, HY_ARG_STR, &prompt_ids, NULL, "prompt as comma-separated token ids"},
        {"--max-tokens", "-n", HY_ARG_INT, &max_tokens, NULL, "new tokens to generate (default 128)"},
        {"--temperature", NULL, HY_ARG_FLOAT, &cli.temperature, &seen_t,
         "0 = greedy (default: generation_config.json)"},
        {"--top-p", NULL, HY_ARG_FLOAT, &cli.top_p, &seen_p, "nucleus sampling mass"},
        {"--top-k", NULL, HY_ARG_INT, &cli.top_k, &seen_k, "keep the k most likely tokens (<= 0 off)"},
        {"--min-p", NULL, HY_ARG_FLOAT, &cli.min_p, &seen_minp, "drop tokens below min_p * p(max)"},
        {"--repetition-penalty", NULL, HY_ARG_FLOAT, &cli.repetition_penalty, &seen_rep, "HF repetition penalty"},
        {"--presence-penalty", NULL, HY_ARG_FLOAT, &cli.presence_penalty, &seen_pres, "OpenAI presence penalty"},
        {"--frequency-penalty", NULL, HY_ARG_FLOAT, &cli.frequency_penalty, &seen_freq, "OpenAI frequency penalty"},
        {"--seed", "-s", HY_ARG_U64, &cli.seed, &seen_seed, "RNG seed (same seed, same output)"},
        {"--ignore-eos", NULL, HY_ARG_FLAG, &ignore_eos, NULL, "do not stop at EOS"},
        {"--chat", NULL, HY_ARG_FLAG, &chat, NULL, "render the prompt as a user turn via the chat template"},
        {"--reasoning-effort", NULL, HY_ARG_STR, &effort, NULL,
         "no_think | low | high (with --chat; default: the template's)"},
        {"--chat-template", NULL, HY_ARG_STR, &chat_template, NULL,
         "chat template file or text for --chat (default: the checkpoint's)"},
        {"--tools", NULL, HY_ARG_STR, &tools_path, NULL,
         "OpenAI tools list (JSON file) for the chat prompt (with --chat); prints the text, then the parsed "
         "calls as a JSON line 'tool_calls: [...]'"},
        {"--dtype", NULL, HY_ARG_STR, &dtype, NULL, "float32 | bfloat16 | auto (compute mode)"},
        {"--quantization", "-q", HY_ARG_STR, &quantization, NULL,
         "ascend | fp8 | compressed-tensors: confirms the checkpoint's method (detected from its files)"},
        {"--kv-cache-dtype", NULL, HY_ARG_STR, &kvd, NULL, "auto (compute dtype) | bf16 | fp8 (fp8_e4m3) | fp32"},
        {"--threads", "-t", HY_ARG_INT, &threads, NULL, "worker threads"},
        {"--print-ids", NULL, HY_ARG_FLAG, &print_ids, NULL, "print the generated ids as one JSON array line"},
        {"--echo", NULL, HY_ARG_FLAG, &echo, NULL, "print the (decoded) prompt before the completion"},
        {"--help", "-h", HY_ARG_FLAG, &help, NULL, "this help"},
    };
    const int na = (int)(sizeof(args) / sizeof(args[0]));
    int n_compat;
    const struct hy_arg_compat *compat = hy_cli_vllm_flags(&n_compat);
    const char *usage = "hyinfer generate -m DIR (-p TEXT | --prompt-ids 1,2,3) [-n 128] [--temperature T ...]";
    int np;
    if (hy_args_parse_compat(argc, argv, 2, args, na, compat, n_compat, NULL, 0, &np)) {
        fprintf(stderr, "hyinfer generate: %s\n", hy_err_msg());
        return 2;
    }
    if (help) {
        hy_args_help(usage, args, na);
        return 0;
    }
    if (!model_dir || (!prompt == !prompt_ids)) {
        fprintf(stderr, "hyinfer generate: need -m DIR and exactly one of -p / --prompt-ids\n");
        hy_args_usage(usage, args, na);
        return 2;
    }
    if (hy_cli_set_threads(&threads)) {
        fprintf(stderr, "hyinfer generate: %s\n", hy_err_msg());
        return 2;
    }

    struct hy_model *m = NULL;
    struct hy_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    struct hy_gen_request req = {0};
    struct gen_ctx g = {0};
    int rc = 2; /* a bad flag value or input file (the model's included); 1 once generation runs */
    enum hy_compute_dtype cd;
    enum hy_dtype kv_dtype;
    hy_sampling_params_init(&sp);
    if (hy_cli_check_reasoning_effort(effort, chat))
        goto fail;
    if (tools_path && (!chat || prompt_ids)) {
        hy_err_set(prompt_ids ? "--tools needs a text prompt (-p), not --prompt-ids" : "--tools needs --chat");
        goto fail;
    }
    if (tools_path && hy_cli_load_tools(tools_path, &tools))
        goto fail;
    struct hy_spec_config spec;
    hy_spec_config_init(&spec);
    if (hy_cli_spec_resolve(&spec_args, &spec))
        goto fail;
    if (hy_kv_dtype_parse(kvd, &kv_dtype) && hy_err_prefix("--kv-cache-dtype"))
        goto fail;
    if (hy_sampling_params_from_generation_config(model_dir, &sp))
        goto fail;
    if (seen_t)
        sp.temperature = cli.temperature;
    if (seen_p)
        sp.top_p = cli.top_p;
    if (seen_k)
        sp.top_k = cli.top_k;
    if (seen_minp)
        sp.min_p = cli.min_p;
    if (seen_rep)
        sp.repetition_penalty = cli.repetition_penalty;
    if (seen_pres)
        sp.presence_penalty = cli.presence_penalty;
    if (seen_freq)
        sp.frequency_penalty = cli.frequency_penalty;
    if (seen_seed) {
        sp.seed = cli.seed;
        sp.has_seed = 1;
    }
    sp.max_new_tokens = max_tokens;
    sp.ignore_eos = ignore_eos;
    if (hy_sampling_params_validate(&sp))
        goto fail;

    double t0 = hy_time_now();
    if (hy_cli_check_quantization(quantization, model_dir) || hy_cli_parse_dtype(dtype, model_dir, &cd) ||
        hy_cli_load(model_dir, cd, &par, argc, argv, &m))
        goto fail;
    int need_tok = prompt || !print_ids;
    if (need_tok && hy_tokenizer_load_dir(model_dir, &tok))
        goto fail;
    double t_load = hy_time_now() - t0;
    if (prompt_ids) {
        int32_t nn;
        if (hy_args_parse_ids(prompt_ids, &ids, &nn))
            goto fail;
        n = (size_t)nn;
    } else {
        if ((chat && hy_cli_load_chat(model_dir, chat_template, &chat_tpl)) ||
            hy_cli_encode_prompt(tok, chat ? &chat_tpl : NULL, prompt, effort, tools, &ids, &n, &thinking))
            goto fail;
    }
    if (n == 0) {
        hy_err_set("the prompt encodes to no tokens");
        goto fail;
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= m->cfg.vocab_size) {
            hy_err_set("prompt token id %d is outside the model's vocabulary [0, %d)", ids[i], m->cfg.vocab_size);
            goto fail;
        }
    /* The detokenizer sees the prompt first, so the first completion token decodes in context. */
    g.print_text = !print_ids && !tools; /* with tools the text prints once parsed */
    if (tok) {
        hy_detok_init(&g.detok, tok, 1);
        for (size_t i = 0; i < n; i++)
            if (hy_detok_push(&g.detok, ids[i], &g.buf, &g.len, &g.cap) != 0) {
                hy_err_set("prompt token id %d is outside the tokenizer's vocabulary", ids[i]);
                goto fail;
            }
        if (echo)
            emit(&g);
        g.len = 0;
    }
    req.prompt_ids = ids;
    req.n_prompt = n;
    req.params = sp;
    struct hy_gen_opts opts = {1, (int32_t)n, 16, 0, on_token, NULL, &g, kv_dtype, &spec};
    struct hy_gen_stats st;
    rc = 1;
    if (hy_generate(m, &req, 1, &opts, &st))
        goto fail;
    if (tok && hy_detok_flush(&g.detok, &g.buf, &g.len, &g.cap) == 0)
        emit(&g);
    if (tools && !print_ids) {
        struct hy_cli_tool_result tr;
        if (hy_cli_tool_result(tok, req.out_ids, req.n_out, tools, thinking, &tr))
            goto fail;
        char *j = json_dumps(tr.calls, JSON_COMPACT | JSON_ENSURE_ASCII);
        printf("%s\ntool_calls: %s", tr.content, j ? j : "[]");
        free(j);
        hy_cli_tool_result_free(&tr);
    }
    if (print_ids) {
        printf("[");
        for (size_t i = 0; i < req.n_out; i++)
            printf(i ? ",%d" : "%d", req.out_ids[i]);
        printf("]\n");
    } else {
        printf("\n");
    }
    fflush(stdout);
    double tpot = req.n_out > 1 ? (req.t_done - req.t_first_token) / (double)(req.n_out - 1) : 0.0;
    fprintf(stderr,
            "[hyinfer] load %.2f s | prompt %zu tokens, prefill %.1f ms (%.1f tok/s) | TTFT %.1f ms | "
            "%zu new tokens, TPOT %.2f ms (%.1f tok/s) | finish: %s | dtype %s\n",
            t_load, n, st.prefill_seconds * 1e3, st.prefill_seconds > 0 ? st.prefill_tokens / st.prefill_seconds : 0.0,
            req.t_first_token * 1e3, req.n_out, tpot * 1e3, tpot > 0 ? 1.0 / tpot : 0.0,
            req.finish == HY_FINISH_EOS ? "eos" : "length", cd == HY_COMPUTE_F32 ? "float32" : "bfloat16");
    hy_cli_print_spec(stderr, "[hyinfer] ", st.num_speculative_tokens, &st.spec);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "hyinfer generate: %s\n", hy_err_msg());
out:
    free(req.out_ids);
    free(g.buf);
    free(ids);
    json_decref(tools);
    hy_chat_free(&chat_tpl);
    hy_tokenizer_free(tok);
    hy_cli_free_model(m);
    return rc;
}
