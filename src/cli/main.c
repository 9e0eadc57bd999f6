/* main.c - the hyinfer command: subcommand dispatch. */
#include "cli/commands.h"

#include "base/cpu.h"
#include "kernels/kernel_table.h"

#include <omp.h>

#include <stdio.h>
#include <string.h>

static void usage(void)
{
    fprintf(stderr,
            "hyinfer - CPU inference for Tencent Hy3 (hy_v3) MoE models\n\n"
            "usage:\n"
            "  hyinfer generate -m MODEL_DIR -p TEXT [-n 128] [--temperature T --top-p P --top-k K --seed S]\n"
            "                   [--dtype float32|bfloat16] [--chat] [--prompt-ids 1,2,3] [--print-ids] [--echo]\n"
            "  hyinfer run --yaml CONFIG.yaml         offline batch job (cann-recipes-infer YAML schema)\n"
            "  hyinfer serve MODEL_DIR [--host 127.0.0.1 --port 8000 --served-model-name NAME --api-key KEY]\n"
            "                   [--max-num-seqs 8 --max-model-len N --max-num-batched-tokens 512 --block-size 16]\n"
            "                   [--enable-prefix-caching | --no-enable-prefix-caching] [--kv-cache-memory-bytes N]\n"
            "                   [--max-waiting-requests 1024] [--dtype float32|bfloat16] [--threads N]\n"
            "                                         OpenAI-compatible HTTP server\n"
            "  hyinfer bench serve [--host H --port P -c 4 --num-prompts 64 --random-input-len 128\n"
            "                      --random-output-len 64] [--json]   load a running server\n"
            "  hyinfer logits -m MODEL_DIR (-p TEXT | --prompt-ids 1,2,3) [--all-positions] [--mtp] --json\n"
            "  hyinfer bench latency -m MODEL_DIR [--prompt-lens 128,512,2048] [--batch-sizes 1,4,16] [--json]\n"
            "  hyinfer bench quality -m A --ref B [--text FILE] [--positions 1000|all] [--dtype D --ref-dtype D] [--json]\n"
            "                                         top-1 agreement / KL of A's next-token distributions vs B's\n"
            "  hyinfer quantize -m IN -o OUT --quant-dtype fp8|mxfp8|mxfp4|hybrid [--quant-target moe attn-linear mlp]\n"
            "  hyinfer info [-m MODEL_DIR]            kernel ISA level in use, CPU features, threads (+ model quantization)\n\n"
            "  hyinfer SUBCOMMAND --help              flags of a subcommand\n");
}

/* `hyinfer info`: the kernel level in use and what the CPU/OS offer. */
static int cmd_info(void)
{
    printf("isa: %s\ncpu: %s\nthreads: %d\n", hy_kernels_active()->name, hy_cpu_caps_string(),
           omp_get_max_threads());
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage();
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "generate"))
        return hy_cmd_generate(argc, argv);
    if (!strcmp(argv[1], "run"))
        return hy_cmd_run(argc, argv);
    if (!strcmp(argv[1], "bench") && argc >= 3 && !strcmp(argv[2], "serve"))
        return hy_cmd_bench_serve(argc, argv);
    if (!strcmp(argv[1], "bench") && argc >= 3 && !strcmp(argv[2], "quality"))
        return hy_cmd_bench_quality(argc, argv);
    if (!strcmp(argv[1], "serve"))
        return hy_cmd_serve(argc, argv);
    if (!strcmp(argv[1], "info")) {
        int rc = cmd_info();
        if (argc == 4 && (!strcmp(argv[2], "-m") || !strcmp(argv[2], "--model")))
            return hy_cmd_info_model(argv[3]);
        return rc;
    }
    if (!strcmp(argv[1], "quantize"))
        return hy_cmd_quantize(argc, argv);
    if (!strcmp(argv[1], "logits"))
        return hy_cmd_logits(argc, argv);
    if (!strcmp(argv[1], "bench"))
        return hy_cmd_bench(argc, argv);
    /* One line: the usage text would add a second "hyinfer ..." line to an error report. */
    fprintf(stderr,
            "hyinfer: unknown subcommand \"%s\" (expected generate, run, serve, logits, bench, quantize or info; see --help)\n",
            argv[1]);
    return 2;
}
