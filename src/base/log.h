/* log.h - leveled logging to stderr. Level from HYINFER_LOG (error|warn|info|debug), default info. */
#ifndef HY_BASE_LOG_H
#define HY_BASE_LOG_H

#include "base/err.h"
#include "base/log_level.h"

void hy_log_set_level(enum hy_log_level lvl);
enum hy_log_level hy_log_get_level(void);
void hy_log(enum hy_log_level lvl, const char *fmt, ...) HY_PRINTF(2, 3);

#define hy_log_error(...) hy_log(HY_LOG_ERROR, __VA_ARGS__)
#define hy_log_warn(...) hy_log(HY_LOG_WARN, __VA_ARGS__)
#define hy_log_info(...) hy_log(HY_LOG_INFO, __VA_ARGS__)
#define hy_log_debug(...) hy_log(HY_LOG_DEBUG, __VA_ARGS__)

#endif
