/* env.c - the HYINFER_* variables (env.h): the only place that reads them. */
#include "base/env.h"

#include "base/cpu.h"
#include "base/err.h"
#include "base/log_level.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Records the first problem of a read (later ones keep it). */
static int bad(int *rc, const char *var, const char *val, const char *allowed)
{
    if (*rc == 0) {
        int ctrl = 0;
        for (const char *c = val; *c; c++)
            ctrl |= (unsigned char)*c < 0x20 || *c == 0x7f;
        if (ctrl)
            hy_err_set("%s: a value with control characters (expected %s)", var, allowed);
        else
            hy_err_set("%s=\"%.64s\"%s: expected %s", var, val, strlen(val) > 64 ? "..." : "", allowed);
    }
    *rc = -1;
    return 0;
}

static const char *get(const char *var)
{
    const char *v = getenv(var);
    return v && *v ? v : NULL;
}

/* A variable with a fixed set of values: *out = values[i] for the names[i] it holds (names end with
 * NULL); unset or empty leaves *out; anything else is recorded as bad. */
static void choice(int *rc, const char *var, const char *const *names, const int *values, const char *allowed, int *out)
{
    const char *v = get(var);
    if (!v)
        return;
    for (int i = 0; names[i]; i++)
        if (!strcmp(v, names[i])) {
            *out = values[i];
            return;
        }
    bad(rc, var, v, allowed);
}

int hy_env_params_read(struct hy_env_params *p)
{
    static const char *const off_on[] = {"0", "1", NULL}, *const act[] = {"f32", "mxint8", NULL},
                             *const rule[] = {"amax", "mse", NULL}, *const fmt[] = {"mmap", "copy", NULL},
                             *const lv[] = {"error", "warn", "info", "debug", NULL};
    static const int v01[] = {0, 1}, v12[] = {1, 2}, lvv[] = {HY_LOG_ERROR, HY_LOG_WARN, HY_LOG_INFO, HY_LOG_DEBUG};
    int rc = 0;
    const char *v;
    memset(p, 0, sizeof(*p));
    p->isa = -1;
    p->kv_fp8_scale_fit = 1;
    p->moe_grouped = 1;
    p->log_level = HY_LOG_INFO;
    p->dist_fault_rank = -1;
    p->dist_step_timeout = HY_ENV_DIST_STEP_TIMEOUT;

    if ((v = get("HYINFER_ISA"))) {
        const int i = hy_isa_parse(v);
        if (i < 0)
            bad(&rc, "HYINFER_ISA", v, "ref, avx2, avx512 or amx");
        else
            p->isa = i;
    }
    choice(&rc, "HYINFER_MXFP4_ACT", act, v01, "f32 (the default) or mxint8", &p->mxfp4_act_mxint8);
    choice(&rc, "HYINFER_KV_FP8_SCALE", rule, v01, "a KV scale rule: mse (the default) or amax", &p->kv_fp8_scale_fit);
    choice(&rc, "HYINFER_LOAD_FORMAT", fmt, v12, "copy (the default) or mmap", &p->load_format);
    choice(&rc, "HYINFER_MOE_GROUPED", off_on, v01, "1 (the default) or 0", &p->moe_grouped);
    if ((v = get("HYINFER_NUM_THREADS"))) {
        char *end;
        const long n = strtol(v, &end, 10);
        if (*end || n < 1 || n > HY_ENV_MAX_THREADS) {
            char allowed[64];
            snprintf(allowed, sizeof(allowed), "an integer in [1, %d]", HY_ENV_MAX_THREADS);
            bad(&rc, "HYINFER_NUM_THREADS", v, allowed);
        } else {
            p->num_threads = (int)n;
        }
    }
    p->root = get("HYINFER_ROOT");
    choice(&rc, "HYINFER_LOG", lv, lvv, "error, warn, info (the default) or debug", &p->log_level);
    if ((v = get("HYINFER_DIST_FAULT"))) {
        /* skip:RANK:N, both decimal digits only */
        const char *r = strncmp(v, "skip:", 5) ? NULL : v + 5, *colon = r ? strchr(r, ':') : NULL;
        long rank = -1;
        long long nth = 0;
        if (colon && colon > r && strspn(r, "0123456789") == (size_t)(colon - r) && colon[1] &&
            strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
            errno = 0;
            rank = strtol(r, NULL, 10);
            nth = strtoll(colon + 1, NULL, 10);
            if (errno || rank > 1000000000L)
                rank = -1;
        }
        if (rank < 0 || nth < 1) {
            bad(&rc, "HYINFER_DIST_FAULT", v, "skip:RANK:N (RANK >= 0, N >= 1) or unset");
        } else {
            p->dist_fault_rank = (int)rank;
            p->dist_fault_nth = nth;
        }
    }
    if ((v = get("HYINFER_DIST_STEP_TIMEOUT"))) {
        char *end;
        errno = 0;
        const double t = strtod(v, &end);
        if (*end || errno || !isfinite(t) || t <= 0)
            bad(&rc, "HYINFER_DIST_STEP_TIMEOUT", v, "a number of seconds > 0 (default 600)");
        else
            p->dist_step_timeout = t;
    }
    return rc;
}

static struct hy_env_params snapshot;
static pthread_once_t snapshot_once = PTHREAD_ONCE_INIT;

static void take_snapshot(void)
{
    hy_env_params_read(&snapshot); /* invalid values take their defaults (env.h) */
}

const struct hy_env_params *hy_env_params(void)
{
    pthread_once(&snapshot_once, take_snapshot);
    return &snapshot;
}
