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

/* Foreign flags (vLLM's spellings) a command does not implement itself, looked up by
 * hy_args_parse_compat for a flag its own table lacks. */
enum hy_compat_kind {
    HY_COMPAT_IMPL,    /* implemented by the commands that list it in their own table (docs only) */
    HY_COMPAT_NOOP,    /* accepted, consumed, a notice on stderr: it has no effect here */
    HY_COMPAT_REFUSED, /* an error naming the reason */
};

enum hy_compat_vals {
    HY_COMPAT_SWITCH, /* no value; "--no-NAME" is accepted too (argparse's BooleanOptionalAction) */
    HY_COMPAT_ONE,    /* one value */
    HY_COMPAT_MANY,   /* one or more values (argparse nargs='+'): up to the next flag */
    HY_COMPAT_OPT,    /* an optional value (nargs='?'): the next token unless it is a flag */
};

struct hy_arg_compat {
    const char *name;  /* "--enable-lora" */
    const char *alias; /* "-pp" or NULL */
    enum hy_compat_vals vals;
    enum hy_compat_kind kind;
    const char *ok_values; /* NOOP / ONE: "auto,generate": other values are refused; NULL: any value */
    const char *reason;    /* one sentence fragment: why it has no effect / is refused / what it does */
};

/* Parses argv[first..argc) against args[n]. Accepts "--name value" and "--name=value".
 * Returns 0, or -1 with hy_err_msg() naming the unknown flag, missing value or bad number.
 * Positional arguments are collected into positional[] (up to max_pos), else an error.
 * When the table has a "--help" flag and argv asks for it (hy_args_help_requested), only that flag
 * is set and 0 is returned whatever else argv holds: help wins over any other flag or error. */
int hy_args_parse(int argc, char **argv, int first, const struct hy_arg *args, int n, const char **positional,
                  int max_pos, int *n_pos);

/* hy_args_parse, with compat[n_compat] consulted for a flag args lacks: a HY_COMPAT_NOOP one is
 * consumed with its values and prints "notice: FLAG is accepted and has no effect on a CPU: REASON" to
 * stderr (once per flag); a HY_COMPAT_REFUSED one (or a NOOP given a value outside ok_values) is an
 * error "FLAG is not supported by hyinfer: REASON"; a HY_COMPAT_IMPL one reached through its alias is
 * parsed as its long name in args, else it is an unknown flag of this command. As vLLM's parser, it
 * reads '_' as '-' in a flag's name (up to a '.'): --max_model_len is --max-model-len. */
int hy_args_parse_compat(int argc, char **argv, int first, const struct hy_arg *args, int n,
                         const struct hy_arg_compat *compat, int n_compat, const char **positional, int max_pos,
                         int *n_pos);

/* 1 in an MPI rank other than world rank 0 (OMPI_COMM_WORLD_RANK / PMIX_RANK set and not 0): the start-up
 * notices of the compatibility flags are printed once per job, by rank 0; 0 otherwise. */
int hy_args_notices_muted(void);

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
