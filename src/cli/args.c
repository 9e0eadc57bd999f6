#include "cli/args.h"

#include "base/err.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set_value(const struct hy_arg *a, const char *flag, const char *v)
{
    char *end = NULL;
    errno = 0;
    switch (a->type) {
    case HY_ARG_INT: {
        long x = strtol(v, &end, 10);
        if (!*v || *end || errno || x < INT32_MIN || x > INT32_MAX)
            return hy_err_set("%s: \"%s\" is not an integer", flag, v);
        *(int *)a->dst = (int)x;
        return 0;
    }
    case HY_ARG_U64: {
        if (*v == '-')
            return hy_err_set("%s: \"%s\" must be a non-negative integer", flag, v);
        unsigned long long x = strtoull(v, &end, 10);
        if (!*v || *end || errno)
            return hy_err_set("%s: \"%s\" is not a non-negative integer", flag, v);
        *(uint64_t *)a->dst = (uint64_t)x;
        return 0;
    }
    case HY_ARG_FLOAT: {
        float x = strtof(v, &end);
        if (!*v || *end || errno || !isfinite(x))
            return hy_err_set("%s: \"%s\" is not a number", flag, v);
        *(float *)a->dst = x;
        return 0;
    }
    case HY_ARG_STR:
        *(const char **)a->dst = v;
        return 0;
    case HY_ARG_FLAG:
        break;
    }
    return hy_err_set("%s takes no value", flag);
}

/* The flag part of argv token s ("--name=value" -> "--name") into flag[size]; *eq: the '=' of a
 * "--name=value" token, else NULL. -1 when the name does not fit. */
static int flag_name(const char *s, char *flag, size_t size, const char **eq)
{
    const char *e = strchr(s, '=');
    *eq = e && s[1] == '-' ? e : NULL;
    size_t fl = *eq ? (size_t)(*eq - s) : strlen(s);
    if (fl >= size)
        return -1;
    memcpy(flag, s, fl);
    flag[fl] = '\0';
    return 0;
}

static const struct hy_arg *find_arg(const char *flag, const struct hy_arg *args, int n)
{
    for (int k = 0; k < n; k++)
        if (!strcmp(flag, args[k].name) || (args[k].alias && !strcmp(flag, args[k].alias)))
            return &args[k];
    return NULL;
}

static int is_flag_token(const char *s)
{
    return s[0] == '-' && s[1] != '\0';
}

int hy_args_help_requested(int argc, char **argv, int first, const struct hy_arg *args, int n)
{
    const struct hy_arg *help = find_arg("--help", args, n);
    if (!help || help->type != HY_ARG_FLAG)
        return 0;
    for (int i = first; i < argc; i++) {
        const char *s = argv[i], *eq;
        char flag[128];
        if (!is_flag_token(s) || flag_name(s, flag, sizeof(flag), &eq))
            continue;
        const struct hy_arg *a = find_arg(flag, args, n);
        if (!a)
            continue; /* unknown: an error for hy_args_parse, unless help is asked for */
        if (a == help && !eq)
            return 1;
        if (a->type != HY_ARG_FLAG && !eq)
            i++; /* its value */
    }
    return 0;
}

int hy_args_parse(int argc, char **argv, int first, const struct hy_arg *args, int n, const char **positional,
                  int max_pos, int *n_pos)
{
    *n_pos = 0;
    if (hy_args_help_requested(argc, argv, first, args, n)) {
        const struct hy_arg *help = find_arg("--help", args, n);
        *(int *)help->dst = 1;
        if (help->seen)
            *help->seen = 1;
        return 0;
    }
    for (int i = first; i < argc; i++) {
        const char *s = argv[i];
        if (!is_flag_token(s)) {
            if (*n_pos >= max_pos)
                return hy_err_set("unexpected argument \"%s\" (see --help)", s);
            positional[(*n_pos)++] = s;
            continue;
        }
        char flag[128];
        const char *eq;
        if (flag_name(s, flag, sizeof(flag), &eq))
            return hy_err_set("unknown flag \"%.60s...\" (see --help)", s);
        const struct hy_arg *a = find_arg(flag, args, n);
        if (!a)
            return hy_err_set("unknown flag \"%s\" (see --help)", flag);
        if (a->seen)
            *a->seen = 1;
        if (a->type == HY_ARG_FLAG) {
            if (eq)
                return hy_err_set("%s takes no value", flag);
            *(int *)a->dst = 1;
            continue;
        }
        const char *v;
        if (eq) {
            v = eq + 1;
        } else {
            if (i + 1 >= argc)
                return hy_err_set("%s needs a value", flag);
            v = argv[++i];
        }
        if (set_value(a, flag, v))
            return -1;
    }
    return 0;
}

static void print_usage(FILE *f, const char *usage, const struct hy_arg *args, int n)
{
    fprintf(f, "usage: %s\n", usage);
    for (int k = 0; k < n; k++) {
        char left[64];
        snprintf(left, sizeof(left), "%s%s%s", args[k].alias ? args[k].alias : "", args[k].alias ? ", " : "",
                 args[k].name);
        fprintf(f, "  %-28s %s\n", left, args[k].help ? args[k].help : "");
    }
}

void hy_args_usage(const char *usage, const struct hy_arg *args, int n)
{
    print_usage(stderr, usage, args, n);
}

void hy_args_help(const char *usage, const struct hy_arg *args, int n)
{
    print_usage(stdout, usage, args, n);
    fflush(stdout);
}

int hy_args_parse_ids(const char *s, int32_t **ids, int32_t *n)
{
    *ids = NULL;
    *n = 0;
    size_t cap = 16;
    int32_t *v = malloc(cap * sizeof(int32_t));
    if (!v)
        return hy_err_set("out of memory");
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == '[')
            p++;
        if (*p == ']' || !*p)
            break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX) {
            free(v);
            return hy_err_set("--prompt-ids: \"%s\" is not a comma-separated list of token ids", s);
        }
        if ((size_t)*n == cap) {
            int32_t *nv = realloc(v, cap * 2 * sizeof(int32_t));
            if (!nv) {
                free(v);
                return hy_err_set("out of memory");
            }
            v = nv;
            cap *= 2;
        }
        v[(*n)++] = (int32_t)x;
        p = end;
        while (*p == ' ' || *p == ']')
            p++;
        if (*p == ',')
            p++;
        else if (*p) {
            free(v);
            return hy_err_set("--prompt-ids: \"%s\" is not a comma-separated list of token ids", s);
        }
    }
    if (*n == 0) {
        free(v);
        return hy_err_set("--prompt-ids: empty list");
    }
    *ids = v;
    return 0;
}
