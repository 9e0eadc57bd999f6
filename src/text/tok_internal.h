/* tok_internal.h - the tokenizer's private data structures, shared by tokenizer.c (loading,
 * public API), bpe.c (hash maps, merge loop), pretok.c (normalizers, pre-tokenizers, regex) and
 * detok.c (incremental decoding). Not part of the public API.
 */
#ifndef HY_TEXT_TOK_INTERNAL_H
#define HY_TEXT_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

/* ---- string arena: stable pointers, freed all at once ---- */
struct hy_arena_block;
struct hy_arena {
    struct hy_arena_block *head;
};
/* Copies n bytes (plus a NUL) into the arena; NULL on OOM. */
char *hy_arena_dup(struct hy_arena *a, const char *s, size_t n);
void hy_arena_free(struct hy_arena *a);

/* ---- byte string -> id hash map (keys point into the arena / token table) ---- */
struct hy_strmap_slot {
    const char *key;
    uint32_t len;
    int32_t id;
};
struct hy_strmap {
    struct hy_strmap_slot *slots;
    size_t mask, count;
};
int hy_strmap_init(struct hy_strmap *m, size_t expected);                        /* 0 / -1 OOM */
int hy_strmap_put(struct hy_strmap *m, const char *key, size_t len, int32_t id); /* replaces */
int32_t hy_strmap_get(const struct hy_strmap *m, const char *key, size_t len);   /* -1 if absent */
void hy_strmap_free(struct hy_strmap *m);

/* ---- (left id, right id) -> (priority, merged id) hash map ---- */
struct hy_pairmap_slot {
    uint64_t key; /* UINT64_MAX = empty */
    int32_t prio;
    int32_t id;
};
struct hy_pairmap {
    struct hy_pairmap_slot *slots;
    size_t mask, count;
};
int hy_pairmap_init(struct hy_pairmap *m, size_t expected);
/* Inserts unless the pair is already present with a lower priority (first/best merge wins). */
int hy_pairmap_put(struct hy_pairmap *m, int32_t a, int32_t b, int32_t prio, int32_t id);
/* Returns 1 and fills *prio / *id when present, else 0. */
int hy_pairmap_get(const struct hy_pairmap *m, int32_t a, int32_t b, int32_t *prio, int32_t *id);
void hy_pairmap_free(struct hy_pairmap *m);

uint64_t hy_tok_hash(const char *s, size_t n);

/* ---- normalizers, pre-tokenizers, decoders ---- */
enum hy_norm_kind { HY_NORM_PREPEND, HY_NORM_REPLACE };
struct hy_norm_step {
    int kind;
    char *pattern;
    size_t pattern_len; /* REPLACE: literal */
    char *content;
    size_t content_len; /* PREPEND: prefix; REPLACE: replacement */
};

enum hy_split_behavior {
    HY_SPLIT_REMOVED,
    HY_SPLIT_ISOLATED,
    HY_SPLIT_MERGED_PREV,
    HY_SPLIT_MERGED_NEXT,
    HY_SPLIT_CONTIGUOUS,
    HY_SPLIT_KEEP_MATCHES /* tiktoken: only matches survive */
};
enum hy_pt_kind { HY_PT_SPLIT, HY_PT_BYTELEVEL, HY_PT_METASPACE };
struct hy_pt_step {
    int kind;
    pcre2_code *re; /* SPLIT with a regex, BYTELEVEL with use_regex (GPT-2 pattern) */
    char *lit;      /* SPLIT with a literal String pattern */
    size_t lit_len;
    int behavior; /* enum hy_split_behavior */
    int invert;
    int add_prefix_space; /* BYTELEVEL */
    char replacement[8];  /* METASPACE: UTF-8 of the replacement char */
    int prepend;          /* METASPACE: 0 never, 1 always, 2 first */
    int split;            /* METASPACE */
};

/* One token: its model-space form (vocab key) and the raw bytes it decodes to. */
struct hy_tok_entry {
    const char *surf; /* NULL = unused id */
    const char *bytes;
    uint32_t surf_len, bytes_len;
    uint8_t added, special;
};

struct hy_added {
    const char *text;
    uint32_t len;
    int32_t id;
    uint8_t special, lstrip, rstrip;
};

struct hy_tokenizer {
    struct hy_arena arena;
    struct hy_tok_entry *tok;  /* [n_vocab] */
    int32_t n_vocab;           /* largest id + 1 */
    struct hy_strmap by_surf;  /* surface form (and added token text) -> id */
    struct hy_strmap by_model; /* model-space key used by BPE: raw bytes for byte-level */
    struct hy_pairmap merges;
    struct hy_pairmap adjacent; /* (char, char) pairs adjacent inside some multi-char token */
    int32_t byte_id[256];       /* byte-level: id of each single byte; -1 none */
    int32_t fallback_id[256];   /* byte_fallback: id of <0xNN>; -1 none */
    int byte_level;             /* BPE input is raw bytes (ByteLevel / tiktoken) */
    int byte_fallback;
    int whole_word_first; /* ignore_merges / tiktoken: whole piece in vocab wins */
    int32_t unk_id;
    int fuse_unk;
    int is_tiktoken;   /* loaded from a tiktoken file */
    int32_t bos_id;    /* hy_tokenizer_add_bos */
    int strip_leading; /* decoder: drop this many leading spaces of output */
    struct hy_norm_step *norm;
    int n_norm;
    struct hy_pt_step *pt;
    int n_pt;
    struct hy_added *added;
    int n_added;              /* sorted by first byte, then longest first */
    int32_t added_first[257]; /* index range in `added` per first byte */
};

/* pretok.c: compiles a regex with UTF|UCP (+MATCH_INVALID_UTF) and JITs it. NULL + hy_err_msg(). */
pcre2_code *hy_tok_regex_compile(const char *pattern, size_t len);

/* Growable list of pieces (pointer + length), used by the encoder. */
struct hy_piece {
    const char *p;
    size_t n;
    int first;
};
struct hy_pieces {
    struct hy_piece *v;
    size_t n, cap;
};
int hy_pieces_push(struct hy_pieces *l, const char *p, size_t n, int first);

/* Scratch state of one encode call (per thread; the tokenizer itself stays read-only). */
struct hy_tok_scratch {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
    struct hy_arena arena; /* strings made by normalizers / prefix spaces */
    struct hy_pieces a, b;
    struct hy_seg {
        size_t st, en;
        int m;
    } * segs; /* one split's match / non-match list */
    size_t seg_cap;
    /* BPE work arrays */
    int32_t *sym, *prev, *next;
    uint8_t *cut; /* cut[i]: no merge can cross the boundary before symbol i */
    size_t sym_cap;
    struct hy_heap_ent {
        int32_t prio, pos, left, right;
    } * heap;
    size_t heap_n, heap_cap;
    /* output */
    int32_t *ids;
    size_t n_ids, cap_ids;
};
int hy_tok_scratch_init(struct hy_tok_scratch *s);
void hy_tok_scratch_free(struct hy_tok_scratch *s);
int hy_tok_emit(struct hy_tok_scratch *s, int32_t id);

/* pretok.c: normalizes one segment and pre-tokenizes it into s->a (pieces). first: the segment
 * starts the input (Metaspace prepend_scheme "first"). Returns 0 / -1. */
int hy_tok_pretokenize(const struct hy_tokenizer *t, struct hy_tok_scratch *s, const char *text, size_t len, int first);

/* bpe.c: records which characters occur next to each other inside tokens (used to cut long
 * pieces where no merge can ever cross: exact, and keeps the merge heap small). 0 / -1 OOM. */
int hy_tok_build_adjacency(struct hy_tokenizer *t);

/* bpe.c: BPE-encodes one piece, appending ids to s->ids. Returns 0 / -1 (OOM). */
int hy_tok_bpe_piece(const struct hy_tokenizer *t, struct hy_tok_scratch *s, const char *p, size_t n);

/* GPT-2 byte <-> unicode table: code point for byte b; inverse: byte for a code point or -1. */
uint32_t hy_bytelevel_cp(uint8_t b);
int hy_bytelevel_byte(uint32_t cp);

/* UTF-8 helpers. Decodes one code point at s (n bytes available): returns its length (1..4) and
 * *cp, or 0 when s does not start a valid complete sequence. */
int hy_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
int hy_utf8_encode(uint32_t cp, char *out);

#endif
