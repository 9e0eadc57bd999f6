/* cmd_serve.c - `hyinfer serve MODEL_DIR`: the OpenAI-compatible server with vllm-serve flags. */
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"

#include "base/err.h"
#include "comm/comm.h"
#include "sample/sampler.h"
#include "server/server.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop;

/* SIGTERM / SIGINT: the first drains (hy_server_run), a second exits at once. */
static void on_signal(int sig)
{
    (void)sig;
    if (g_stop)
        _exit(1);
    g_stop = 1;
}

struct serve_load {
    const char *dir;
    struct hy_load_params lp;
    struct hy_parallel_config par;
    int argc;
    char **argv;
};

static int serve_load_model(void *ctx, struct hy_model **m)
{
    struct serve_load *sl = ctx;
    return hy_cli_load_model(sl->dir, &sl->lp, &sl->par, sl->argc, sl->argv, m);
}

/* 1 when argv holds flag (alone or as "flag=..."). */
static int has_flag(int argc, char **argv, const char *flag)
{
    size_t l = strlen(flag);
    for (int i = 2; i < argc; i++)
        if (!strncmp(argv[i], flag, l) && (argv[i][l] == '\0' || argv[i][l] == '='))
            return 1;
    return 0;
}

int hy_cmd_serve(int argc, char **argv)
{
    struct hy_server_config c;
    memset(&c, 0, sizeof(c));
    hy_engine_config_init(&c.engine);
    const char *host = "127.0.0.1", *name = NULL, *api_key = NULL, *dtype = NULL, *model_flag = NULL, *kvd = NULL,
               *quantization = NULL;
    int port = 8000, max_num_seqs = c.engine.max_num_seqs, max_model_len = 0;
    int max_batched = c.engine.max_num_batched_tokens, block_size = c.engine.block_size;
    int prefix_on = 0, prefix_off = 0, max_waiting = c.engine.max_waiting_requests, threads = 0, help = 0;
    uint64_t kv_bytes = 0, max_body = 4u << 20;
    int max_conn = 8192, max_conn_ip = 0, http_timeout = 15, keepalive_timeout = 0, seen_seed = 0, list_flags = 0;
    uint64_t seed = 0;
    float gpu_util = 0;
    const char *compilation = NULL, *additional = NULL;
    float shutdown_timeout = 5;
    struct hy_cli_par par = {0};
    struct hy_cli_spec spec_args = {0};
    int auto_tools = 0;
    const char *tool_parser = NULL, *reasoning_parser = NULL, *chat_template = NULL;
    const struct hy_arg args[] = {
        HY_CLI_PAR_ARGS(par),
        HY_CLI_SPEC_ARGS(spec_args),
        {"--model", "-m", HY_ARG_STR, &model_flag, NULL, "model directory (or give it as the first argument)"},
        {"--host", NULL, HY_ARG_STR, &host, NULL, "address to bind (default 127.0.0.1)"},
        {"--port", NULL, HY_ARG_INT, &port, NULL, "port (default 8000)"},
        {"--served-model-name", NULL, HY_ARG_STR, &name, NULL, "model name in the API (default: MODEL_DIR)"},
        {"--api-key", NULL, HY_ARG_STR, &api_key, NULL, "require 'Authorization: Bearer KEY' on /v1 routes"},
        {"--max-num-seqs", NULL, HY_ARG_INT, &max_num_seqs, NULL, "running requests at once (default 8)"},
        {"--max-model-len", NULL, HY_ARG_INT, &max_model_len, NULL,
         "prompt + output tokens per request (default: the model's max_position_embeddings)"},
        {"--max-num-batched-tokens", NULL, HY_ARG_INT, &max_batched, NULL,
         "tokens per engine step; longer prompts are chunked (default 512)"},
        {"--block-size", NULL, HY_ARG_INT, &block_size, NULL, "tokens per KV block (default 16)"},
        {"--enable-prefix-caching", NULL, HY_ARG_FLAG, &prefix_on, NULL, "reuse cached prompt blocks (default on)"},
        {"--no-enable-prefix-caching", NULL, HY_ARG_FLAG, &prefix_off, NULL, "turn prefix caching off"},
        {"--kv-cache-memory-bytes", NULL, HY_ARG_U64, &kv_bytes, NULL,
         "KV cache budget in bytes (default: 50% of available memory; wins over --gpu-memory-utilization)"},
        {"--gpu-memory-utilization", NULL, HY_ARG_FLOAT, &gpu_util, NULL,
         "F in (0, 1]: weights + KV cache may use F x the machine's memory (or the cgroup limit); the KV cache "
         "gets F x total - weight bytes"},
        {"--seed", NULL, HY_ARG_U64, &seed, &seen_seed,
         "requests without their own seed draw from a generator seeded with N (same start + same request order "
         "= same output; default: fresh seeds)"},
        {"--compilation-config", NULL, HY_ARG_STR, &compilation, NULL,
         "vLLM's JSON (or -O LEVEL): parsed; its keys map to what a CPU does (docs/cli.md)"},
        {"--additional-config", NULL, HY_ARG_STR, &additional, NULL,
         "vLLM-Ascend's JSON (enable_mlapo, ...): parsed; its keys map to what a CPU does (docs/cli.md)"},
        {"--kv-cache-dtype", NULL, HY_ARG_STR, &kvd, NULL,
         "auto (compute dtype) | bf16 | fp8 (fp8_e4m3: about half the bytes of bf16 per token) | fp32"},
        {"--max-waiting-requests", NULL, HY_ARG_INT, &max_waiting, NULL,
         "waiting requests before new ones get HTTP 503 (default 1024)"},
        {"--max-body-bytes", NULL, HY_ARG_U64, &max_body, NULL, "request body limit (default 4 MiB)"},
        {"--enable-auto-tool-choice", NULL, HY_ARG_FLAG, &auto_tools, NULL,
         "accepted as vLLM spells it: Hy3 tool calls are always parsed (tool_choice auto is the default with tools)"},
        {"--tool-call-parser", NULL, HY_ARG_STR, &tool_parser, NULL,
         "hy_v3 (also SGLang's name hunyuan) | hy_v4: <tool_calls> markup -> message.tool_calls (default: the "
         "checkpoint's dialect, read from its vocabulary)"},
        {"--reasoning-parser", NULL, HY_ARG_STR, &reasoning_parser, NULL,
         "hy_v3 | hy_v4 (also hunyuan): <think> text -> reasoning_content, always on"},
        {"--chat-template", NULL, HY_ARG_STR, &chat_template, NULL,
         "chat template file or text (default: the checkpoint's chat_template.jinja, else tokenizer_config.json's)"},
        {"--max-connections", NULL, HY_ARG_INT, &max_conn, NULL,
         "open HTTP connections at once; more are refused (default 8192)"},
        {"--max-connections-per-ip", NULL, HY_ARG_INT, &max_conn_ip, NULL,
         "open connections per client address (default 0: no limit, as vLLM; over a cap a new connection is "
         "refused, /health included)"},
        {"--http-timeout", NULL, HY_ARG_INT, &http_timeout, NULL,
         "seconds a request's header and body may take to arrive after the connection opens, however slowly "
         "they trickle (default 15; waiting for tokens does not count)"},
        {"--keep-alive-timeout", NULL, HY_ARG_INT, &keepalive_timeout, NULL,
         "seconds a kept-alive connection may wait for its next complete request (default 0: --http-timeout)"},
        {"--shutdown-timeout", NULL, HY_ARG_FLOAT, &shutdown_timeout, NULL,
         "on SIGTERM/SIGINT, seconds running requests get to finish before they are aborted (default 5; "
         "0: at once); a second signal exits at once"},
        {"--dtype", NULL, HY_ARG_STR, &dtype, NULL, "float32 | bfloat16 | auto (compute mode)"},
        {"--quantization", "-q", HY_ARG_STR, &quantization, NULL,
         "ascend | fp8 | compressed-tensors: confirms the checkpoint's method (detected from its files)"},
        {"--threads", "-t", HY_ARG_INT, &threads, NULL, "engine worker threads"},
        {"--list-vllm-flags", NULL, HY_ARG_FLAG, &list_flags, NULL,
         "print every vllm serve flag with what hyinfer does with it (Markdown), then exit"},
        {"--help", "-h", HY_ARG_FLAG, &help, NULL, "this help"},
    };
    int n_compat;
    const struct hy_arg_compat *compat = hy_cli_vllm_flags(&n_compat);
    const int na = (int)(sizeof(args) / sizeof(args[0]));
    const char *usage = "hyinfer serve MODEL_DIR [--host 127.0.0.1 --port 8000 --served-model-name NAME ...]";
    const char *pos[1] = {NULL};
    int np = 0;
    if (hy_args_parse_compat(argc, argv, 2, args, na, compat, n_compat, pos, 1, &np)) {
        fprintf(stderr, "hyinfer serve: %s\n", hy_err_msg());
        return 2;
    }
    if (help) {
        hy_args_help(usage, args, na);
        return 0;
    }
    if (list_flags) {
        hy_cli_print_vllm_table(stdout);
        return 0;
    }
    c.model_dir = np ? pos[0] : model_flag;
    if (!c.model_dir) {
        fprintf(stderr, "hyinfer serve: need MODEL_DIR\n");
        hy_args_usage(usage, args, na);
        return 2;
    }
    if (prefix_on && prefix_off) {
        fprintf(stderr, "hyinfer serve: --enable-prefix-caching and --no-enable-prefix-caching contradict\n");
        return 2;
    }
    if (port < 0 || port > 65535 || max_num_seqs < 1 || max_model_len < 0 || max_batched < 1 || block_size < 1 ||
        max_waiting < 0 || max_conn < 1 || max_conn_ip < 0 || http_timeout < 1 || keepalive_timeout < 0 ||
        !(shutdown_timeout >= 0)) {
        fprintf(stderr,
                "hyinfer serve: --port must be 0..65535; --max-num-seqs, --max-num-batched-tokens, "
                "--block-size, --max-connections, --http-timeout >= 1; --max-model-len, "
                "--max-waiting-requests, --max-connections-per-ip, --keep-alive-timeout, --shutdown-timeout >= 0\n");
        return 2;
    }
    if (!(gpu_util >= 0.0f && gpu_util <= 1.0f) ||
        (gpu_util == 0.0f && has_flag(argc, argv, "--gpu-memory-utilization"))) {
        fprintf(stderr, "hyinfer serve: --gpu-memory-utilization %g: must be in (0, 1]\n", (double)gpu_util);
        return 2;
    }
    if (hy_cli_check_json_config("--compilation-config", compilation) ||
        hy_cli_check_json_config("--additional-config", additional)) {
        fprintf(stderr, "hyinfer serve: %s\n", hy_err_msg());
        return 2;
    }
    if (tool_parser && strcmp(tool_parser, "hy_v3") && strcmp(tool_parser, "hunyuan") && strcmp(tool_parser, "hy_v4")) {
        fprintf(stderr, "hyinfer serve: --tool-call-parser %s: not supported (hy_v3, hunyuan or hy_v4)\n", tool_parser);
        return 2;
    }
    if (reasoning_parser && strcmp(reasoning_parser, "hy_v3") && strcmp(reasoning_parser, "hunyuan") &&
        strcmp(reasoning_parser, "hy_v4")) {
        fprintf(stderr, "hyinfer serve: --reasoning-parser %s: not supported (hy_v3, hunyuan or hy_v4)\n",
                reasoning_parser);
        return 2;
    }
    (void)auto_tools;
    if ((hy_kv_dtype_parse(kvd, &c.engine.kv_cache_dtype) && hy_err_prefix("--kv-cache-dtype")) ||
        hy_cli_spec_resolve(&spec_args, &c.engine.spec) || hy_cli_check_quantization(quantization, c.model_dir) ||
        hy_cli_parse_dtype(dtype, c.model_dir, &c.dtype)) {
        fprintf(stderr, "hyinfer serve: %s\n", hy_err_msg());
        return 2;
    }
    if (hy_cli_set_threads(&threads)) {
        fprintf(stderr, "hyinfer serve: %s\n", hy_err_msg());
        return 2;
    }
    c.host = host;
    c.port = port;
    c.served_model_name = name;
    c.api_key = api_key;
    c.chat_template = chat_template;
    c.tool_call_parser = tool_parser && !strcmp(tool_parser, "hunyuan") ? "hy_v3" : tool_parser;
    c.threads = threads;
    c.max_body_bytes = (size_t)max_body;
    c.engine.max_num_seqs = max_num_seqs;
    c.engine.max_model_len = max_model_len;
    c.engine.max_num_batched_tokens = max_batched;
    c.engine.block_size = block_size;
    c.engine.enable_prefix_caching = !prefix_off;
    c.engine.kv_cache_memory_bytes = (size_t)kv_bytes;
    c.engine.gpu_memory_utilization = kv_bytes ? 0.0f : gpu_util; /* vLLM: the byte budget wins */
    if (seen_seed)
        hy_sampler_set_default_seed(seed);
    c.engine.max_waiting_requests = max_waiting;
    c.stop_flag = &g_stop;
    c.max_connections = (unsigned)max_conn;
    c.max_connections_per_ip = (unsigned)max_conn_ip;
    c.http_timeout_s = (unsigned)http_timeout;
    c.keepalive_timeout_s = (unsigned)keepalive_timeout;
    c.shutdown_timeout_s = shutdown_timeout;
    struct serve_load sl = {.dir = c.model_dir, .argc = argc, .argv = argv};
    hy_load_params_default(&sl.lp, c.dtype);
    if (hy_cli_par_resolve(&par, 0, &sl.par)) {
        fprintf(stderr, "hyinfer serve: %s\n", hy_err_msg());
        return 2;
    }
    if (hy_comm_size(hy_dist_world()) > 1) {
        c.load_model = serve_load_model;
        c.load_ctx = &sl;
        if (hy_comm_rank(hy_dist_world()) > 0) { /* a worker rank: no HTTP, runs the leader's steps */
            struct hy_model *m = NULL;
            if (serve_load_model(&sl, &m)) {
                fprintf(stderr, "hyinfer serve: %s\n", hy_err_msg());
                return 2;
            }
            return 0; /* not reached: workers exit in hy_cli_load_model */
        }
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return hy_server_run(&c);
}
