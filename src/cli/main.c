/* main.c - the hyinfer command: subcommand dispatch, the top-level and `bench` usage, `hyinfer info`.
 *
 * Every subcommand (and bench mode) answers --help / -h, wherever it stands among its flags, with
 * its usage on stdout and exit status 0, before anything else is done. Errors go to stderr
 * (exit 2 for bad flags). */
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/launch.h"

#include "base/cpu.h"
#include "base/env.h"
#include "base/err.h"
#include "comm/comm.h"
#include "kernels/kernel_table.h"

#include <omp.h>

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "hyinfer - CPU inference for Tencent Hy3 (hy_v3) and Hy4-preview (hy_v4) MoE models\n"
               "\n"
               "usage: hyinfer <command> [flags]\n"
               "\n"
               "commands:\n"
               "  generate        one prompt: the completion streamed to stdout, stats to stderr\n"
               "  run             offline batch job from a YAML config (cann-recipes-infer schema)\n"
               "  serve           OpenAI-compatible HTTP server (vllm-serve flags)\n"
               "  logits          next-token (and MTP-head) logits of a prompt as JSON\n"
               "  quantize        write an fp8 / mxfp8 / mxfp4 / hybrid checkpoint (round-to-nearest or GPTQ)\n"
               "  info            kernel ISA level in use, CPU features, threads (+ a model's quantization)\n"
               "  bench latency   machine probes, prefill / decode throughput and roofline ratios of a model\n"
               "  bench serve     load a running server: request throughput, TTFT, TPOT\n"
               "  bench quality   top-1 agreement / KL of model A's next-token distributions vs model B's\n"
               "  bench comm      under mpirun: ping-pong and collective latency / bandwidth, alpha and beta fits\n"
               "  help [command]  this text, or the usage and flags of a command\n"
               "\n"
               "Run 'hyinfer <command> --help' (e.g. 'hyinfer generate --help', 'hyinfer bench serve --help')\n"
               "for the usage and every flag of a command. Flags take '--flag value' or '--flag=value';\n"
               "HYINFER_NUM_THREADS sets the default thread count of the commands that run a model.\n");
}

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: hyinfer bench <mode> [flags]\n"
               "\n"
               "modes:\n"
               "  latency   machine probes (read bandwidth, peak FLOP/s), prefill / decode throughput, per-stage\n"
               "            times and roofline ratios of a model\n"
               "  serve     load a running OpenAI-compatible server: request throughput, TTFT, TPOT p50/p99\n"
               "  quality   top-1 agreement, KL divergence and perplexities of model A vs reference model B\n"
               "  comm      under mpirun (2+ ranks): ping-pong, allgather, alltoall and fixed-order all-reduce\n"
               "            times over message sizes, with alpha (latency) / beta (bandwidth) fits\n"
               "\n"
               "Run 'hyinfer bench <mode> --help' for the flags of a mode ('throughput' is not built yet).\n");
}

static int is_help(const char *s)
{
    return !strcmp(s, "--help") || !strcmp(s, "-h");
}

/* `hyinfer bench MODE ...`. Without a mode, --help / -h anywhere prints the mode list. */
static int cmd_bench(int argc, char **argv)
{
    const char *mode = argc >= 3 ? argv[2] : NULL;
    if (mode && !strcmp(mode, "latency"))
        return hy_cmd_bench(argc, argv);
    if (mode && !strcmp(mode, "serve"))
        return hy_cmd_bench_serve(argc, argv);
    if (mode && !strcmp(mode, "quality"))
        return hy_cmd_bench_quality(argc, argv);
    if (mode && !strcmp(mode, "comm"))
        return hy_cmd_bench_comm(argc, argv);
    for (int i = 2; i < argc && argv[i][0] == '-'; i++)
        if (is_help(argv[i])) {
            bench_usage(stdout);
            return 0;
        }
    if (!mode) {
        fprintf(stderr, "hyinfer bench: need a mode: latency, serve, quality or comm (see hyinfer bench --help)\n");
        return 2;
    }
    if (mode[0] == '-')
        fprintf(stderr,
                "hyinfer bench: unknown flag \"%s\" before the mode (hyinfer bench latency|serve|quality|comm "
                "[flags]; see hyinfer bench --help)\n",
                mode);
    else if (!strcmp(mode, "throughput"))
        fprintf(stderr,
                "hyinfer bench: the mode \"throughput\" is not built yet (expected latency, serve, quality or comm)\n");
    else
        fprintf(stderr,
                "hyinfer bench: unknown mode \"%s\" (expected latency, serve, quality or comm; see hyinfer bench "
                "--help)\n",
                mode);
    return 2;
}

/* `hyinfer info [-m DIR]`: the kernel level in use and what the CPU/OS offer (+ the model's quantization). */
static int cmd_info(int argc, char **argv)
{
    const char *model_dir = NULL;
    int help = 0, np;
    const struct hy_arg args[] = {
        {"--model", "-m", HY_ARG_STR, &model_dir, NULL,
         "model directory: also print its quantization groups and tensor counts"},
        {"--help", "-h", HY_ARG_FLAG, &help, NULL, "this help"},
    };
    const int na = (int)(sizeof(args) / sizeof(args[0]));
    const char *use = "hyinfer info [-m MODEL_DIR]\n"
                      "prints isa: (the kernel level in use; HYINFER_ISA=ref|avx2|avx512|amx forces one), cpu: (the\n"
                      "features CPUID and the OS allow) and threads:; with -m, the model's quantization";
    if (hy_args_parse(argc, argv, 2, args, na, NULL, 0, &np)) {
        fprintf(stderr, "hyinfer info: %s\n", hy_err_msg());
        return 2;
    }
    if (help) {
        hy_args_help(use, args, na);
        return 0;
    }
    if (model_dir && !*model_dir) {
        fprintf(stderr, "hyinfer info: -m needs a non-empty model directory\n");
        return 2;
    }
    printf("isa: %s\ncpu: %s\nthreads: %d\n", hy_kernels_active()->name, hy_cpu_caps_string(), omp_get_max_threads());
    return model_dir ? hy_cmd_info_model(model_dir) : 0;
}

static int dispatch(int argc, char **argv)
{
    const char *cmd = argv[1];
    if (!strcmp(cmd, "generate"))
        return hy_cmd_generate(argc, argv);
    if (!strcmp(cmd, "run"))
        return hy_cmd_run(argc, argv);
    if (!strcmp(cmd, "serve"))
        return hy_cmd_serve(argc, argv);
    if (!strcmp(cmd, "logits"))
        return hy_cmd_logits(argc, argv);
    if (!strcmp(cmd, "quantize"))
        return hy_cmd_quantize(argc, argv);
    if (!strcmp(cmd, "info"))
        return cmd_info(argc, argv);
    if (!strcmp(cmd, "bench"))
        return cmd_bench(argc, argv);
    /* One line: the usage text would add a second "hyinfer ..." line to an error report. */
    fprintf(stderr,
            "hyinfer: unknown subcommand \"%s\" (expected generate, run, serve, logits, bench, quantize or info; "
            "see hyinfer --help)\n",
            cmd);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (is_help(argv[1]) || (!strcmp(argv[1], "help") && argc == 2)) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "help")) { /* `hyinfer help CMD [MODE]` = `hyinfer CMD [MODE] --help` */
        static char help_flag[] = "--help";
        if (argc > 4) {
            fprintf(stderr, "hyinfer help: expected a command (and a bench mode), e.g. hyinfer help bench serve\n");
            return 2;
        }
        char *hargv[5] = {argv[0], argv[2], argc > 3 ? argv[3] : help_flag, help_flag, NULL};
        return dispatch(argc > 3 ? 4 : 3, hargv);
    }
    int help = 0; /* --help / -h anywhere: the command prints its usage, whatever the environment holds */
    for (int i = 2; i < argc; i++)
        help |= is_help(argv[i]);
    struct hy_env_params ep; /* a bad HYINFER_* value is refused here, before any work (base/env.h) */
    if (!help && hy_env_params_read(&ep)) {
        fprintf(stderr, "hyinfer: %s\n", hy_err_msg());
        return 2;
    }
    if (!strcmp(argv[1], "__launch-agent")) /* the ssh stand-in of a multi-node job (cli/join.h) */
        return hy_cli_launch_agent(argc, argv);
    if (!help) { /* more ranks than this process without mpirun: start the job (cli/launch.h) */
        const int lrc = hy_cli_launch(argc, argv);
        if (lrc >= 0)
            return lrc;
    }
    if (hy_dist_init(&argc, &argv)) {
        fprintf(stderr, "hyinfer: %s\n", hy_err_msg());
        return 2;
    }
    if (hy_comm_size(hy_dist_world()) > 1 && hy_dist_watchdog_start(hy_env_params()->dist_step_timeout)) {
        fprintf(stderr, "hyinfer: %s\n", hy_err_msg());
        return 2;
    }
    int rc = dispatch(argc, argv);
    if (rc != 0 && hy_comm_size(hy_dist_world()) > 1) /* the other ranks may be waiting for this one */
        hy_dist_abort(rc, "%s %s failed (exit status %d); ending the job", argv[0], argv[1], rc);
    hy_dist_finalize();
    return rc;
}
