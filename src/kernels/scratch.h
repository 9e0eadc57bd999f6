/* scratch.h - per-thread scratch buffers of the kernels (internal to src/kernels): activation copies,
 * weight panels and accumulators prepared once per call (avx2_quant.c: the raw FP8 scheme's scaled
 * rows; avx2_w4a8.c: the MXINT8 activations; the GEMM paths' panels), kept between calls so that
 * no matmul allocates per call. */
#ifndef HY_KERNELS_SCRATCH_H
#define HY_KERNELS_SCRATCH_H

#include <stddef.h>

struct hy_scratch {
    void *p;
    size_t cap;   /* bytes */
    int enrolled; /* the calling thread frees p when it exits (scratch.c) */
};

/* s->p with room for n bytes, 64-byte aligned. Grown on demand (rounded up to 4 KiB; the old
 * contents are not kept, and cap changes whenever p does), never shrunk; NULL when out of memory
 * (then cap is 0). Declare s _Thread_local: one buffer per calling thread, freed when that thread
 * exits (a pthread key destructor; the main thread's stays reachable until the process ends). */
void *hy_scratch_get(struct hy_scratch *s, size_t n);

#endif
