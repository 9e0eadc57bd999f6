/* tokenizer.h - byte-level BPE tokenizers: Hugging Face tokenizer.json and tiktoken files.
 *
 * One struct serves both sources. Encoding: added/special tokens are matched as whole tokens
 * first (when allowed), the remaining text is pre-tokenized (PCRE2 regex splits, UTF + UCP, JIT)
 * and each piece is BPE-merged by rank. Decoding maps ids back to raw bytes (ByteLevel surface
 * mapping undone, SentencePiece-style "▁" / <0xNN> byte-fallback undone for Llama-family files).
 *
 * tokenizer.json support (anything else is refused with an error naming the file and the type):
 *   model       BPE: vocab, merges ("a b" or ["a","b"]), byte_fallback, unk_token, fuse_unk,
 *               ignore_merges; merge priority = position in merges, ties leftmost.
 *   normalizer  null, Sequence, Prepend, Replace (String pattern).
 *   pre_tokenizer null, Sequence, Split (Regex/String; Removed, Isolated, MergedWithPrevious,
 *               MergedWithNext, Contiguous; invert), ByteLevel (add_prefix_space, use_regex =
 *               GPT-2 pattern), Metaspace (replacement, prepend_scheme, split), Digits.
 *   decoder     null, Sequence, ByteLevel, Replace (String), ByteFallback, Fuse, Strip, Metaspace.
 *   added_tokens matched on the raw text, leftmost-longest, lstrip/rstrip honored ("normalized"
 *               and "single_word" are ignored).
 *   post_processor TemplateProcessing: a leading SpecialToken in "single" is the BOS.
 * tiktoken: "base64 rank" lines, rank = id; merge = the adjacent pair whose concatenation has the
 * lowest rank; a piece that is itself a token stays whole. Loaded tokenizers are read-only, so one
 * can be shared by threads.
 */
#ifndef HY_TEXT_TOKENIZER_H
#define HY_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

struct hy_tokenizer;

/* Loads the tokenizer of a model directory: tokenizer.json when present, else hy.tiktoken (or
 * any *.tiktoken) with tokenizer_config.json (pat_str, added_tokens_decoder, add_bos_token).
 * Returns 0 and *out, or -1 with hy_err_msg() naming the file and problem. Free with hy_tokenizer_free. */
int hy_tokenizer_load_dir(const char *model_dir, struct hy_tokenizer **out);

/* Loads a Hugging Face tokenizer.json (BPE model; pre-tokenizers Split / Sequence / ByteLevel /
 * Metaspace-style normalizers; added_tokens). Returns 0 or -1 with hy_err_msg(). */
int hy_tokenizer_load_json(const char *tokenizer_json_path, struct hy_tokenizer **out);

/* Loads a tiktoken rank file ("base64(bytes) rank" lines). tokenizer_config_path may be NULL;
 * when given, its "pat_str" is the split regex and "added_tokens_decoder" gives special tokens.
 * Returns 0 or -1 with hy_err_msg(). */
int hy_tokenizer_load_tiktoken(const char *tiktoken_path, const char *tokenizer_config_path, struct hy_tokenizer **out);

/* Like hy_tokenizer_load_json, from `len` bytes of JSON in memory (need not be NUL-terminated);
 * `name` stands for the file in error messages. Returns 0 or -1 with hy_err_msg(). */
int hy_tokenizer_load_json_mem(const char *data, size_t len, const char *name, struct hy_tokenizer **out);

void hy_tokenizer_free(struct hy_tokenizer *tok);

/* Encodes `len` bytes of UTF-8 `text` (need not be NUL-terminated). With allow_special != 0,
 * every added token string in the text becomes its id (leftmost, longest match first, as HF
 * `tokenizers` does); with allow_special == 0 the ones marked special (control tokens) are encoded
 * as plain text while non-special added tokens (e.g. "<think>") are still matched, like HF with
 * split_special_tokens=True and tiktoken's encode_ordinary. Never adds BOS/EOS (see hy_tokenizer_add_bos). Invalid UTF-8 is encoded byte-wise, never
 * rejected. On success *ids is a malloc'd array of *n_ids ids (caller frees; may be NULL when
 * *n_ids == 0). Returns 0, or -1 on OOM / regex failure with hy_err_msg(). */
int hy_tokenizer_encode(const struct hy_tokenizer *tok, const char *text, size_t len, int allow_special, int32_t **ids,
                        size_t *n_ids);

/* The raw bytes token `id` stands for (what it contributes to decoded text; special tokens give
 * their literal text; an id inside the range that no token uses gives "" with *len 0). Returns
 * NULL for an id outside [0, hy_tokenizer_vocab_size). The pointer
 * stays valid for the tokenizer's lifetime; *len gets the byte count. */
const char *hy_tokenizer_token_bytes(const struct hy_tokenizer *tok, int32_t id, size_t *len);

/* Decodes ids into a malloc'd NUL-terminated string (raw bytes; may hold partial UTF-8 at the
 * end). Special tokens are included when skip_special == 0. Returns NULL on a bad id or OOM. */
char *hy_tokenizer_decode(const struct hy_tokenizer *tok, const int32_t *ids, size_t n, int skip_special);

/* Same as hy_tokenizer_decode, and *out_len gets the byte count (text may contain NUL bytes). */
char *hy_tokenizer_decode_len(const struct hy_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                              size_t *out_len);

/* Number of leading spaces the decoder drops from the start of decoded text (SentencePiece-style
 * Strip / Metaspace decoders: 1; byte-level and tiktoken: 0). */
int hy_tokenizer_strip_leading(const struct hy_tokenizer *tok);

/* Largest id + 1 (ordinary + added tokens). */
int32_t hy_tokenizer_vocab_size(const struct hy_tokenizer *tok);

/* Id of the exact token string (ordinary or added), or -1. The string is the vocabulary's own
 * spelling: GPT-2 surface form for byte-level tokenizer.json files (e.g. "\u0120the" = "Ġthe"),
 * "▁"-form for SentencePiece-style ones, raw bytes for tiktoken files. */
int32_t hy_tokenizer_token_to_id(const struct hy_tokenizer *tok, const char *token);

/* Number of added tokens (tokenizer.json "added_tokens", tiktoken special tokens). */
int hy_tokenizer_added_count(const struct hy_tokenizer *tok);

/* The i-th added token (0 <= i < count; order unspecified): its text (not NUL-terminated, *len
 * bytes, owned by tok) and *id. NULL when i is out of range. */
const char *hy_tokenizer_added_token(const struct hy_tokenizer *tok, int i, size_t *len, int32_t *id);

/* 1 if id is an added token marked special (control token), else 0. */
int hy_tokenizer_is_special(const struct hy_tokenizer *tok, int32_t id);

/* BOS policy from tokenizer_config.json / tokenizer.json post_processor: the id to prepend to
 * a raw prompt, or -1 when the tokenizer does not add one. */
int32_t hy_tokenizer_add_bos(const struct hy_tokenizer *tok);

/* Incremental (streaming-safe) detokenizer: emits only complete UTF-8 sequences; an incomplete
 * tail is held until the bytes that complete it arrive (or flushed at the end, invalid bytes as
 * U+FFFD). For SentencePiece-style tokenizers the leading-space rule of the first token applies. */
struct hy_detok {
    const struct hy_tokenizer *tok;
    int skip_special; /* don't emit special tokens' text */
    char pending[8];  /* held bytes of an incomplete UTF-8 sequence */
    size_t n_pending;
    int n_emitted;  /* tokens pushed so far */
    int strip_left; /* leading spaces still to drop (SentencePiece Strip decoder) */
};

void hy_detok_init(struct hy_detok *d, const struct hy_tokenizer *tok, int skip_special);

/* Appends the text that token `id` completes to *out (a malloc'd, growing buffer with *out_len
 * bytes used and *out_cap allocated; *out may start NULL). Returns 0, or -1 on a bad id / OOM. */
int hy_detok_push(struct hy_detok *d, int32_t id, char **out, size_t *out_len, size_t *out_cap);

/* Flushes held bytes (as U+FFFD replacement characters) into *out. Returns 0 or -1 on OOM. */
int hy_detok_flush(struct hy_detok *d, char **out, size_t *out_len, size_t *out_cap);

#endif
