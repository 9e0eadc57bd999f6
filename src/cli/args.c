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

int hy_args_parse(int argc, char **argv, int first, const struct hy_arg *args, int n, const char **positional,
                  int max_pos, int *n_pos)
{
    *n_pos = 0;
    for (int i = first; i < argc; i++) {
        const char *s = argv[i];
        if (s[0] != '-' || s[1] == '\0') {
            if (*n_pos >= max_pos)
                return hy_err_set("unexpected argument \"%s\"", s);
            positional[(*n_pos)++] = s;
            continue;
        }
        char flag[128];
        const char *eq = strchr(s, '=');
        size_t fl = eq && s[1] == '-' ? (size_t)(eq - s) : strlen(s);
        if (fl >= sizeof(flag))
            return hy_err_set("unknown flag \"%.60s...\"", s);
        memcpy(flag, s, fl);
        flag[fl] = '\0';
        const struct hy_arg *a = NULL;
        for (int k = 0; k < n && !a; k++)
            if (!strcmp(flag, args[k].name) || (args[k].alias && !strcmp(flag, args[k].alias)))
                a = &args[k];
        if (!a)
            return hy_err_set("unknown flag \"%s\" (see --help)", flag);
        if (a->seen)
            *a->seen = 1;
        if (a->type == HY_ARG_FLAG) {
            if (eq && s[1] == '-')
                return hy_err_set("%s takes no value", flag);
            *(int *)a->dst = 1;
            continue;
        }
        const char *v;
        if (eq && s[1] == '-') {
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

void hy_args_usage(const char *usage, const struct hy_arg *args, int n)
{
    fprintf(stderr, "usage: %s\n", usage);
    for (int k = 0; k < n; k++) {
        char left[64];
        snprintf(left, sizeof(left), "%s%s%s", args[k].alias ? args[k].alias : "", args[k].alias ? ", " : "",
                 args[k].name);
        fprintf(stderr, "  %-28s %s\n", left, args[k].help ? args[k].help : "");
    }
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
