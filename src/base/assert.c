/* assert.c - the failure path of HY_ASSERT (assert.h). */
#include "base/assert.h"

#include <stdio.h>
#include <stdlib.h>

_Noreturn void hy_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "hyinfer: assertion failed: %s (%s:%d)\n", expr, file, line);
    fflush(stderr);
    abort();
}
