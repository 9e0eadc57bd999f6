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

static const struct hy_arg_compat *find_compat(const char *flag, const struct hy_arg_compat *c, int n, int *negated,
                                               int *by_alias)
{
    *negated = 0;
    *by_alias = 0;
    for (int k = 0; k < n; k++) {
        if (!strcmp(flag, c[k].name))
            return &c[k];
        if (c[k].alias && !strcmp(flag, c[k].alias)) {
            *by_alias = 1;
            return &c[k];
        }
        if (c[k].vals == HY_COMPAT_SWITCH && !strncmp(flag, "--no-", 5) && !strcmp(flag + 5, c[k].name + 2)) {
            *negated = 1;
            return &c[k];
        }
    }
    return NULL;
}

/* 1 when value v is one of the comma-separated list ok. */
static int value_ok(const char *ok, const char *v)
{
    size_t lv = strlen(v);
    for (const char *p = ok; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == lv && !strncmp(p, v, l))
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

int hy_args_notices_muted(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r)
        r = getenv("PMIX_RANK");
    return r && strcmp(r, "0") != 0;
}

/* Handles compat flag c given as token argv[*i] (flag name `flag`, '=' value eq): consumes its
 * values, prints the notice or sets the error. */
static int take_compat(int argc, char **argv, int *i, const char *flag, const char *eq, const struct hy_arg_compat *c,
                       int negated, unsigned char *noticed)
{
    const char *v = eq ? eq + 1 : NULL;
    const char *name = negated ? flag : c->name; /* "-pp" is named --pipeline-parallel-size */
    if (c->vals == HY_COMPAT_SWITCH || negated) {
        if (eq)
            return hy_err_set("%s takes no value", flag);
    } else if (c->vals == HY_COMPAT_ONE || (c->vals == HY_COMPAT_MANY && !eq)) {
        if (!eq) {
            if (*i + 1 >= argc)
                return hy_err_set("%s needs a value", flag);
            v = argv[++*i];
        }
        if (c->vals == HY_COMPAT_MANY)
            while (*i + 1 < argc && !is_flag_token(argv[*i + 1]))
                ++*i; /* nargs='+': the rest up to the next flag */
    } else if (c->vals == HY_COMPAT_OPT && !eq && *i + 1 < argc && !is_flag_token(argv[*i + 1])) {
        v = argv[++*i];
    }
    if (c->kind == HY_COMPAT_REFUSED && !negated)
        return hy_err_set("%s is not supported by hyinfer: %s", name, c->reason);
    if (c->ok_values && v && !value_ok(c->ok_values, v))
        return hy_err_set("%s %s is not supported by hyinfer (accepted: %s): %s", name, v, c->ok_values, c->reason);
    if (!*noticed && !hy_args_notices_muted()) {
        fprintf(stderr, "notice: %s is accepted and has no effect on a CPU: %s\n", name,
                negated && c->kind == HY_COMPAT_REFUSED ? "that is hyinfer's only mode" : c->reason);
        *noticed = 1;
    }
    return 0;
}

int hy_args_parse_compat(int argc, char **argv, int first, const struct hy_arg *args, int n,
                         const struct hy_arg_compat *compat, int n_compat, const char **positional, int max_pos,
                         int *n_pos)
{
    *n_pos = 0;
    if (hy_args_help_requested(argc, argv, first, args, n)) {
        const struct hy_arg *help = find_arg("--help", args, n);
        *(int *)help->dst = 1;
        if (help->seen)
            *help->seen = 1;
        return 0;
    }
    unsigned char noticed[512] = {0};
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
        if (compat && flag[0] == '-' && flag[1] == '-')
            for (char *p = flag + 2; *p && *p != '.'; p++)
                if (*p == '_')
                    *p = '-'; /* vLLM's parser takes --max_model_len for --max-model-len */
        const struct hy_arg *a = find_arg(flag, args, n);
        if (!a && compat) {
            int negated, by_alias;
            const struct hy_arg_compat *c = find_compat(flag, compat, n_compat, &negated, &by_alias);
            if (c && c->kind != HY_COMPAT_IMPL) {
                const int k = (int)(c - compat);
                if (take_compat(argc, argv, &i, flag, eq, c, negated, k < 512 ? &noticed[k] : &noticed[511]))
                    return -1;
                continue;
            }
            if (c && by_alias)
                a = find_arg(c->name, args, n);
            for (int k = 0; !c && k < n_compat; k++) { /* "-O3": a short alias with its value attached */
                const char *al = compat[k].alias;
                if (compat[k].kind == HY_COMPAT_IMPL && al && strlen(al) == 2 && !strncmp(s, al, 2) && s[2] >= '0' &&
                    s[2] <= '9' && (a = find_arg(compat[k].name, args, n))) {
                    if (a->seen)
                        *a->seen = 1;
                    if (a->type == HY_ARG_FLAG || set_value(a, compat[k].name, s + 2))
                        return a->type == HY_ARG_FLAG ? hy_err_set("%s takes no value", al) : -1;
                    break;
                }
            }
            if (a && s[1] != '-' && strlen(s) > 2 && s[2] >= '0' && s[2] <= '9' && !find_arg(flag, args, n))
                continue; /* the "-O3" form, taken above */
        }
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

int hy_args_parse(int argc, char **argv, int first, const struct hy_arg *args, int n, const char **positional,
                  int max_pos, int *n_pos)
{
    return hy_args_parse_compat(argc, argv, first, args, n, NULL, 0, positional, max_pos, n_pos);
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
