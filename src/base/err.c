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
    size_t n = strlen(prefix);
    if (n > HY_ERR_LEN - 3)
        n = HY_ERR_LEN - 3;
    memcpy(err_buf, prefix, n);
    err_buf[n] = ':';
    err_buf[n + 1] = ' ';
    size_t room = HY_ERR_LEN - n - 3, m = strlen(old);
    if (m > room)
        m = room;
    memcpy(err_buf + n + 2, old, m);
    err_buf[n + 2 + m] = '\0';
    return -1;
}

const char *hy_err_msg(void)
{
    return err_buf;
}

void hy_err_clear(void)
{
    err_buf[0] = '\0';
}
