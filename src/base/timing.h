/* timing.h - monotonic wall clock and process memory. */
#ifndef HY_BASE_TIMING_H
#define HY_BASE_TIMING_H

#include <stddef.h>

/* Seconds on a monotonic clock (arbitrary origin). */
double hy_time_now(void);

/* Peak resident set size of this process in bytes (getrusage ru_maxrss). */
size_t hy_peak_rss_bytes(void);

#endif
