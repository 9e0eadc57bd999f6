/* prompt.c - prompt text to ids with the tokenizer's BOS (prompt.h). */
#include "text/prompt.h"

#include "base/err.h"

#include <stdlib.h>
#include <string.h>

int hy_prompt_encode(const struct hy_tokenizer *tok, const char *text, size_t len, int add_bos, int32_t **ids,
                     size_t *n)
{
    int32_t *raw = NULL;
    size_t nr = 0;
    if (hy_tokenizer_encode(tok, text, len, 1, &raw, &nr))
        return -1;
    const int32_t bos = add_bos ? hy_tokenizer_add_bos(tok) : -1;
    if (bos < 0) {
        *ids = raw;
        *n = nr;
        return 0;
    }
    int32_t *out = malloc((nr + 1) * sizeof(int32_t));
    if (!out) {
        free(raw);
        return hy_err_set("out of memory encoding a prompt of %zu tokens", nr + 1);
    }
    out[0] = bos;
    if (nr)
        memcpy(out + 1, raw, nr * sizeof(int32_t));
    free(raw);
    *ids = out;
    *n = nr + 1;
    return 0;
}
