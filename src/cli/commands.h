/* commands.h - the hyinfer subcommands; each returns the process exit status. */
#ifndef HY_CLI_COMMANDS_H
#define HY_CLI_COMMANDS_H

int hy_cmd_generate(int argc, char **argv);      /* hyinfer generate -m DIR -p TEXT ... */
int hy_cmd_logits(int argc, char **argv);        /* hyinfer logits -m DIR --prompt-ids ... --json */
int hy_cmd_run(int argc, char **argv);           /* hyinfer run --yaml FILE */
int hy_cmd_bench(int argc, char **argv);         /* hyinfer bench latency -m DIR ... [--json] */
int hy_cmd_serve(int argc, char **argv);         /* hyinfer serve MODEL_DIR [--port 8000 ...] */
int hy_cmd_bench_serve(int argc, char **argv);   /* hyinfer bench serve [--port 8000 -c 4 ...] */
int hy_cmd_bench_quality(int argc, char **argv); /* hyinfer bench quality -m A --ref B [--json] */
int hy_cmd_bench_comm(int argc, char **argv);    /* mpirun -np N hyinfer bench comm [--json] */

int hy_cmd_quantize(int argc, char **argv);   /* hyinfer quantize -m IN -o OUT --quant-dtype ... */
int hy_cmd_info_model(const char *model_dir); /* hyinfer info -m DIR: the model's quantization */

#endif
