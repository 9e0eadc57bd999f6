#include "base/log.h"

#include "base/env.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int log_level = -1; /* -1: not yet read from the environment */

static enum hy_log_level level_from_env(void)
{
    struct hy_env_params p; /* read now, not the snapshot: logging must not fix the others' timing */
    hy_env_params_read(&p);
    return (enum hy_log_level)p.log_level;
}

void hy_log_set_level(enum hy_log_level lvl)
{
    log_level = (int)lvl;
}

enum hy_log_level hy_log_get_level(void)
{
    if (log_level < 0)
        log_level = (int)level_from_env();
    return (enum hy_log_level)log_level;
}

void hy_log(enum hy_log_level lvl, const char *fmt, ...)
{
    static const char *tag[] = {"error", "warning", "info", "debug"};
    if ((int)lvl > (int)hy_log_get_level())
        return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "hyinfer: %s: %s\n", tag[lvl], buf);
}
