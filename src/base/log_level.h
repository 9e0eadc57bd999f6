/* log_level.h - the levels of base/log.h, on their own so that the environment table (env.c, which
 * log.c reads its level from) can name them without including the logger. */
#ifndef HY_BASE_LOG_LEVEL_H
#define HY_BASE_LOG_LEVEL_H

enum hy_log_level { HY_LOG_ERROR = 0, HY_LOG_WARN, HY_LOG_INFO, HY_LOG_DEBUG };

#endif
