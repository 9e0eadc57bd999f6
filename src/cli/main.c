/* main.c - the hyinfer command: subcommand dispatch. */
#include "cli/commands.h"

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
            "  hyinfer logits -m MODEL_DIR (-p TEXT | --prompt-ids 1,2,3) [--all-positions] [--mtp] --json\n\n"
            "  hyinfer SUBCOMMAND --help              flags of a subcommand\n");
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
    if (!strcmp(argv[1], "logits"))
        return hy_cmd_logits(argc, argv);
    /* One line: the usage text would add a second "hyinfer ..." line to an error report. */
    fprintf(stderr, "hyinfer: unknown subcommand \"%s\" (expected generate, run or logits; see --help)\n", argv[1]);
    return 2;
}
