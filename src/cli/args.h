/* args.h - table-driven command-line flag parsing for the hyinfer subcommands. */
#ifndef HY_CLI_ARGS_H
#define HY_CLI_ARGS_H

#include <stdint.h>

enum hy_arg_type { HY_ARG_FLAG, HY_ARG_INT, HY_ARG_FLOAT, HY_ARG_STR, HY_ARG_U64 };

struct hy_arg {
    const char *name;  /* "--max-tokens" */
    const char *alias; /* "-n" or NULL */
    enum hy_arg_type type;
    void *dst; /* int* (FLAG/INT), float*, const char**, uint64_t* */
    int *seen; /* optional: set to 1 when given */
    const char *help;
};

/* Parses argv[first..argc) against args[n]. Accepts "--name value" and "--name=value".
 * Returns 0, or -1 with hy_err_msg() naming the unknown flag, missing value or bad number.
 * Positional arguments are collected into positional[] (up to max_pos), else an error.
 * When the table has a "--help" flag and argv asks for it (hy_args_help_requested), only that flag
 * is set and 0 is returned whatever else argv holds: help wins over any other flag or error. */
int hy_args_parse(int argc, char **argv, int first, const struct hy_arg *args, int n, const char **positional,
                  int max_pos, int *n_pos);

/* 1 when argv[first..argc) holds the table's "--help" flag (or its alias) as a flag: walked as
 * hy_args_parse walks it, so a flag's value ("-p --help") is not taken for it; unknown flags are
 * stepped over. 0 otherwise, or when the table has no "--help" flag. */
int hy_args_help_requested(int argc, char **argv, int first, const struct hy_arg *args, int n);

/* Prints "usage: <usage>" and the flag table to stderr (after an error). */
void hy_args_usage(const char *usage, const struct hy_arg *args, int n);

/* The same to stdout: the answer to --help. */
void hy_args_help(const char *usage, const struct hy_arg *args, int n);

/* Parses "1,2,3" into a malloc'd int32 array. Returns 0 or -1 with hy_err_msg(). */
int hy_args_parse_ids(const char *s, int32_t **ids, int32_t *n);

#endif
