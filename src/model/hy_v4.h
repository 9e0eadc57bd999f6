/* hy_v4.h - what hy_v4.c (the Hy4-preview layers) exposes beyond its table in arch.h. */
#ifndef HY_MODEL_HY_V4_H
#define HY_MODEL_HY_V4_H

#include <stdint.h>

/* Keys the indexer scores per pass (default and maximum 4096; n clamped to [1, 4096]). Process-wide, for
 * tests: the scores, hence the logits, must not depend on it. */
void hy_v4_set_index_chunk(int32_t n);

#endif
