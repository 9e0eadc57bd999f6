/* scratch.h - the per-thread scratch buffers of the quantized kernels (internal to src/kernels):
 * activation copies prepared once per call (avx2_quant.c: the raw FP8 scheme's scaled rows;
 * avx2_w4a8.c: the MXINT8 activations), kept between calls so the MoE pass's many small band calls
 * do not allocate. */
#ifndef HY_KERNELS_SCRATCH_H
#define HY_KERNELS_SCRATCH_H

#include <stddef.h>
#include <stdlib.h>

struct hy_scratch {
    void *p;
    size_t cap; /* bytes */
};

/* s->p with room for n bytes, 64-byte aligned. Grown on demand (rounded up to 4 KiB; the old
 * contents are not kept, and cap changes whenever p does), never shrunk; NULL when out of memory
 * (then cap is 0). Declare s _Thread_local: one buffer per calling thread, freed never (reachable
 * until exit). */
static inline void *hy_scratch_get(struct hy_scratch *s, size_t n)
{
    if (n <= s->cap)
        return s->p;
    free(s->p);
    n = (n + 4095) & ~(size_t)4095;
    s->p = aligned_alloc(64, n);
    s->cap = s->p ? n : 0;
    return s->p;
}

#endif
