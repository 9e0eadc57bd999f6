/* util.h - the small helpers the bench drivers share: the seeded generator of their random token ids and
 * the comparison their medians and percentiles sort with. Header-only. */
#ifndef HY_BENCH_UTIL_H
#define HY_BENCH_UTIL_H

#include <stdint.h>

/* xorshift64: advances *s (nonzero) and returns the new state. */
static inline uint64_t hy_bench_xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* qsort comparison of doubles, ascending. */
static inline int hy_bench_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
