#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define HY_ERR_LEN 1024

static _Thread_local char err_buf[HY_ERR_LEN];

int hy_err_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof(err_buf), fmt, ap);
    va_end(ap);
    return -1;
}

int hy_err_prefix(const char *fmt, ...)
{
    char prefix[HY_ERR_LEN];
    char old[HY_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err_buf, sizeof(old));
    snprintf(err_buf, sizeof(err_buf), "%s: %s", prefix, old);
    return -1;
}

const char *hy_err_msg(void) { return err_buf; }

void hy_err_clear(void) { err_buf[0] = '\0'; }
