/* commands.h - the hyinfer subcommands; each returns the process exit status. */
#ifndef HY_CLI_COMMANDS_H
#define HY_CLI_COMMANDS_H

int hy_cmd_generate(int argc, char **argv);  /* hyinfer generate -m DIR -p TEXT ... */
int hy_cmd_logits(int argc, char **argv);    /* hyinfer logits -m DIR --prompt-ids ... --json */
int hy_cmd_run(int argc, char **argv);       /* hyinfer run --yaml FILE */

#endif
