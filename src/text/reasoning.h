/* reasoning.h - splits Hy3 output text into reasoning_content and content.
 *
 * Text between "<think:opensource>" and "</think:opensource>" is reasoning; the rest is content.
 * Marker text never reaches either output (a stray opening marker inside reasoning or a stray
 * closing marker inside content is dropped). Text that could be the start of a marker is held
 * back until it is decided. When the chat prompt ends inside an open think block
 * (reasoning_effort low/high), start_in_reasoning = 1.
 */
#ifndef HY_TEXT_REASONING_H
#define HY_TEXT_REASONING_H

#include "base/sbuf.h"

#define HY_THINK_OPEN "<think:opensource>"
#define HY_THINK_CLOSE "</think:opensource>"

struct hy_reasoning {
    int in_reasoning;
    struct hy_sbuf held;
    const char *markers[2]; /* open, close (borrowed) */
};

/* Hy3 spelling (HY_THINK_OPEN / HY_THINK_CLOSE). */
void hy_reasoning_init(struct hy_reasoning *r, int start_in_reasoning);

/* Other spellings (e.g. Hy3-preview's "<think>" / "</think>", discovered from the vocabulary);
 * the strings are borrowed and must outlive r. */
void hy_reasoning_init_markers(struct hy_reasoning *r, int start_in_reasoning, const char *open, const char *close);

/* Feeds len bytes, appending decided text to *content / *reasoning. Returns 0 or -1 on OOM. */
int hy_reasoning_feed(struct hy_reasoning *r, const char *text, size_t len, struct hy_sbuf *content,
                      struct hy_sbuf *reasoning);

/* End of output: held text (an unfinished marker prefix) goes to the current side. 0 or -1. */
int hy_reasoning_flush(struct hy_reasoning *r, struct hy_sbuf *content, struct hy_sbuf *reasoning);

/* 1 if the prompt text (len bytes) ends inside an open think block: its last "<think:opensource>"
 * comes after its last "</think:opensource>". */
int hy_reasoning_prompt_open(const char *prompt, size_t len);

void hy_reasoning_free(struct hy_reasoning *r);

#endif
