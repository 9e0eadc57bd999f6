/* prompt.h - a prompt text to token ids, as every entry point (server, CLI) encodes it. */
#ifndef HY_TEXT_PROMPT_H
#define HY_TEXT_PROMPT_H

#include "text/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

/* Encodes text[len] (bytes; special-token text becomes its special id, as hy_tokenizer_encode with
 * allow_special = 1) and, when add_bos is set and the tokenizer adds a BOS
 * (hy_tokenizer_add_bos >= 0), puts that BOS first. On success *ids is a malloc'd array of *n ids
 * (the caller frees it; *ids may be NULL when *n is 0) and 0 is returned; -1 with hy_err_msg() on
 * out of memory or an encoding error, *ids untouched. */
int hy_prompt_encode(const struct hy_tokenizer *tok, const char *text, size_t len, int add_bos, int32_t **ids,
                     size_t *n);

#endif
