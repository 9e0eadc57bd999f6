/* reasoning.h - splits Hy3 / Hy4 output text into reasoning_content and content.
 *
 * Text between the open and close think markers ("<think:opensource>" / "</think:opensource>" by
 * default; "<think SUF>" / "</think SUF>" with the checkpoint's suffix, see hy_tool_markers) is
 * reasoning; the rest is content. Marker text never reaches either output (a stray opening marker
 * inside reasoning - e.g. the model echoing the prompt's start tag - or a stray closing marker
 * inside content is dropped). Text that could be the start of a marker is held back until it is
 * decided. When the chat prompt ends inside an open think block (Hy3 reasoning_effort low/high; Hy4
 * thinking, its default, whose generation prompt ends with "<think SUF>"), start_in_reasoning = 1:
 * output without any marker is then all reasoning (content empty) and "r</think SUF>c" splits into
 * r and c. Hy4's no_think prompt ends with "<think SUF></think SUF>": start_in_reasoning = 0.
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

/* 1 if the prompt text (len bytes) ends inside an open think block: its last `open` marker comes
 * after its last `close` marker (0 when either marker is NULL or ""). */
int hy_reasoning_prompt_open_markers(const char *prompt, size_t len, const char *open, const char *close);

/* The same with the Hy3 spelling (HY_THINK_OPEN / HY_THINK_CLOSE). */
int hy_reasoning_prompt_open(const char *prompt, size_t len);

void hy_reasoning_free(struct hy_reasoning *r);

#endif
