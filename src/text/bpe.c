/* bpe.c - the BPE merge loop and the small containers it needs: string arena, string -> id and
 * (id, id) -> merge hash maps, the GPT-2 byte <-> unicode table and UTF-8 helpers.
 *
 * Merge rule (both Hugging Face BPE and tiktoken): repeatedly merge the adjacent symbol pair with
 * the lowest priority, leftmost first on ties. HF priority = index of the merge in `merges`;
 * tiktoken priority = rank of the concatenated token. A binary heap with lazy invalidation keeps
 * this O(n log n) per piece, so long pieces (whitespace runs, CJK runs, SentencePiece segments
 * without a pre-tokenizer) stay cheap.
 */
#include "text/tok_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---------------- arena ---------------- */

struct hy_arena_block {
    struct hy_arena_block *next;
    size_t used, cap;
    char data[];
};

char *hy_arena_dup(struct hy_arena *a, const char *s, size_t n)
{
    struct hy_arena_block *b = a->head;
    if (!b || b->cap - b->used < n + 1) {
        size_t cap = n + 1 > (1u << 20) ? n + 1 : (1u << 20);
        b = malloc(sizeof(*b) + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    char *p = b->data + b->used;
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    b->used += n + 1;
    return p;
}

void hy_arena_free(struct hy_arena *a)
{
    struct hy_arena_block *b = a->head;
    while (b) {
        struct hy_arena_block *nx = b->next;
        free(b);
        b = nx;
    }
    a->head = NULL;
}

/* ---------------- hashing ---------------- */

uint64_t hy_tok_hash(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    for (size_t k = 0; i < n; i++, k++)
        w |= (uint64_t)(unsigned char)s[i] << (8 * k);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 32;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

/* ---------------- string map ---------------- */

int hy_strmap_init(struct hy_strmap *m, size_t expected)
{
    size_t cap = pow2_at_least(expected * 2 + 16);
    m->slots = calloc(cap, sizeof(*m->slots));
    if (!m->slots)
        return -1;
    m->mask = cap - 1;
    m->count = 0;
    return 0;
}

static int strmap_grow(struct hy_strmap *m)
{
    struct hy_strmap old = *m;
    if (hy_strmap_init(m, (old.mask + 1)) != 0) {
        *m = old;
        return -1;
    }
    for (size_t i = 0; i <= old.mask; i++)
        if (old.slots[i].key)
            hy_strmap_put(m, old.slots[i].key, old.slots[i].len, old.slots[i].id);
    free(old.slots);
    return 0;
}

int hy_strmap_put(struct hy_strmap *m, const char *key, size_t len, int32_t id)
{
    if ((m->count + 1) * 2 > m->mask + 1 && strmap_grow(m) != 0)
        return -1;
    size_t i = hy_tok_hash(key, len) & m->mask;
    for (;;) {
        struct hy_strmap_slot *s = &m->slots[i];
        if (!s->key) {
            s->key = key;
            s->len = (uint32_t)len;
            s->id = id;
            m->count++;
            return 0;
        }
        if (s->len == len && memcmp(s->key, key, len) == 0) {
            s->key = key;
            s->id = id;
            return 0;
        }
        i = (i + 1) & m->mask;
    }
}

int32_t hy_strmap_get(const struct hy_strmap *m, const char *key, size_t len)
{
    if (!m->slots)
        return -1;
    size_t i = hy_tok_hash(key, len) & m->mask;
    for (;;) {
        const struct hy_strmap_slot *s = &m->slots[i];
        if (!s->key)
            return -1;
        if (s->len == len && memcmp(s->key, key, len) == 0)
            return s->id;
        i = (i + 1) & m->mask;
    }
}

void hy_strmap_free(struct hy_strmap *m)
{
    free(m->slots);
    m->slots = NULL;
}

/* ---------------- pair map ---------------- */

static uint64_t pair_key(int32_t a, int32_t b)
{
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

static size_t pair_hash(uint64_t k)
{
    k ^= k >> 31;
    k *= 0x9e3779b97f4a7c15ull;
    k ^= k >> 29;
    return (size_t)k;
}

int hy_pairmap_init(struct hy_pairmap *m, size_t expected)
{
    size_t cap = pow2_at_least(expected * 2 + 16);
    m->slots = malloc(cap * sizeof(*m->slots));
    if (!m->slots)
        return -1;
    for (size_t i = 0; i < cap; i++)
        m->slots[i].key = UINT64_MAX;
    m->mask = cap - 1;
    m->count = 0;
    return 0;
}

static int pairmap_grow(struct hy_pairmap *m)
{
    struct hy_pairmap old = *m;
    if (hy_pairmap_init(m, old.mask + 1) != 0) {
        *m = old;
        return -1;
    }
    for (size_t i = 0; i <= old.mask; i++)
        if (old.slots[i].key != UINT64_MAX)
            hy_pairmap_put(m, (int32_t)(old.slots[i].key >> 32), (int32_t)(uint32_t)old.slots[i].key, old.slots[i].prio,
                           old.slots[i].id);
    free(old.slots);
    return 0;
}

int hy_pairmap_put(struct hy_pairmap *m, int32_t a, int32_t b, int32_t prio, int32_t id)
{
    if ((m->count + 1) * 2 > m->mask + 1 && pairmap_grow(m) != 0)
        return -1;
    uint64_t k = pair_key(a, b);
    size_t i = pair_hash(k) & m->mask;
    for (;;) {
        struct hy_pairmap_slot *s = &m->slots[i];
        if (s->key == UINT64_MAX) {
            s->key = k;
            s->prio = prio;
            s->id = id;
            m->count++;
            return 0;
        }
        if (s->key == k) {
            if (prio < s->prio) {
                s->prio = prio;
                s->id = id;
            }
            return 0;
        }
        i = (i + 1) & m->mask;
    }
}

int hy_pairmap_get(const struct hy_pairmap *m, int32_t a, int32_t b, int32_t *prio, int32_t *id)
{
    if (!m->slots)
        return 0;
    uint64_t k = pair_key(a, b);
    size_t i = pair_hash(k) & m->mask;
    for (;;) {
        const struct hy_pairmap_slot *s = &m->slots[i];
        if (s->key == UINT64_MAX)
            return 0;
        if (s->key == k) {
            *prio = s->prio;
            *id = s->id;
            return 1;
        }
        i = (i + 1) & m->mask;
    }
}

void hy_pairmap_free(struct hy_pairmap *m)
{
    free(m->slots);
    m->slots = NULL;
}

/* ---------------- GPT-2 byte <-> unicode ---------------- */

static int printable_byte(unsigned b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

uint32_t hy_bytelevel_cp(uint8_t b)
{
    /* the 68 non-printable bytes take 256, 257, ... in byte order: 0..32, 127..160, 173 */
    if (printable_byte(b))
        return b;
    if (b <= 32)
        return 256u + b;
    if (b >= 127 && b <= 160)
        return 256u + 33u + (b - 127u);
    return 256u + 67u; /* 173 */
}

int hy_bytelevel_byte(uint32_t cp)
{
    if (cp < 256)
        return printable_byte(cp) ? (int)cp : -1;
    uint32_t n = cp - 256;
    if (n <= 32)
        return (int)n;
    if (n <= 66)
        return (int)(127 + n - 33);
    if (n == 67)
        return 173;
    return -1;
}

/* ---------------- UTF-8 ---------------- */

int hy_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        v = c & 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        v = c & 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        v = c & 0x07;
        min = 0x10000;
    } else
        return 0;
    if (n < (size_t)len)
        return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

int hy_utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---------------- scratch ---------------- */

int hy_tok_emit(struct hy_tok_scratch *s, int32_t id)
{
    if (s->n_ids == s->cap_ids) {
        size_t cap = s->cap_ids ? s->cap_ids * 2 : 256;
        int32_t *p = realloc(s->ids, cap * sizeof(*p));
        if (!p)
            return -1;
        s->ids = p;
        s->cap_ids = cap;
    }
    s->ids[s->n_ids++] = id;
    return 0;
}

static int sym_reserve(struct hy_tok_scratch *s, size_t n)
{
    if (n <= s->sym_cap)
        return 0;
    size_t cap = s->sym_cap ? s->sym_cap : 64;
    while (cap < n)
        cap *= 2;
    int32_t *a = realloc(s->sym, cap * sizeof(int32_t));
    if (!a)
        return -1;
    s->sym = a;
    a = realloc(s->prev, cap * sizeof(int32_t));
    if (!a)
        return -1;
    s->prev = a;
    a = realloc(s->next, cap * sizeof(int32_t));
    if (!a)
        return -1;
    s->next = a;
    uint8_t *c = realloc(s->cut, cap);
    if (!c)
        return -1;
    s->cut = c;
    s->sym_cap = cap;
    return 0;
}

/* ---------------- heap of candidate merges ---------------- */

static int heap_less(const struct hy_heap_ent *a, const struct hy_heap_ent *b)
{
    return a->prio < b->prio || (a->prio == b->prio && a->pos < b->pos);
}

static int heap_push(struct hy_tok_scratch *s, struct hy_heap_ent e)
{
    if (s->heap_n == s->heap_cap) {
        size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
        struct hy_heap_ent *p = realloc(s->heap, cap * sizeof(*p));
        if (!p)
            return -1;
        s->heap = p;
        s->heap_cap = cap;
    }
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t par = (i - 1) / 2;
        if (!heap_less(&e, &s->heap[par]))
            break;
        s->heap[i] = s->heap[par];
        i = par;
    }
    s->heap[i] = e;
    return 0;
}

static struct hy_heap_ent heap_pop(struct hy_tok_scratch *s)
{
    struct hy_heap_ent top = s->heap[0];
    struct hy_heap_ent last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct hy_heap_ent *best = &last;
        if (l < n && heap_less(&s->heap[l], best)) {
            m = l;
            best = &s->heap[l];
        }
        if (r < n && heap_less(&s->heap[r], best)) {
            m = r;
        }
        if (m == i)
            break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    if (n > 0)
        s->heap[i] = last;
    return top;
}

static int push_pair(const struct hy_tokenizer *t, struct hy_tok_scratch *s, int32_t i)
{
    if (i < 0)
        return 0;
    int32_t j = s->next[i];
    if (j < 0)
        return 0;
    int32_t prio, id;
    if (!hy_pairmap_get(&t->merges, s->sym[i], s->sym[j], &prio, &id))
        return 0;
    struct hy_heap_ent e = {prio, i, s->sym[i], s->sym[j]};
    return heap_push(s, e);
}

/* ---------------- adjacency of characters inside tokens ---------------- */

/* A "character" of the model space: a byte for byte-level models, else a UTF-8 code point
 * (an invalid byte b counts as 0x110000 + b). */
static uint32_t model_char(const struct hy_tokenizer *t, const unsigned char *u, size_t n, int *len)
{
    if (t->byte_level) {
        *len = 1;
        return u[0];
    }
    uint32_t cp;
    int l = hy_utf8_decode(u, n, &cp);
    if (l == 0) {
        *len = 1;
        return 0x110000u + u[0];
    }
    *len = l;
    return cp;
}

int hy_tok_build_adjacency(struct hy_tokenizer *t)
{
    if (hy_pairmap_init(&t->adjacent, 1024) != 0)
        return -1;
    for (size_t i = 0; i <= t->by_model.mask; i++) {
        const struct hy_strmap_slot *sl = &t->by_model.slots[i];
        if (!sl->key)
            continue;
        const unsigned char *u = (const unsigned char *)sl->key;
        size_t k = 0;
        int l;
        uint32_t prev = model_char(t, u, sl->len, &l);
        for (k = (size_t)l; k < sl->len; k += (size_t)l) {
            uint32_t c = model_char(t, u + k, sl->len - k, &l);
            if (hy_pairmap_put(&t->adjacent, (int32_t)prev, (int32_t)c, 0, 0) != 0)
                return -1;
            prev = c;
        }
    }
    return 0;
}

/* ---------------- one piece ---------------- */

/* Merges symbols [lo, hi) of s->sym and emits the result. */
static int bpe_range(const struct hy_tokenizer *t, struct hy_tok_scratch *s, int32_t lo, int32_t hi)
{
    for (int32_t i = lo; i < hi; i++) {
        s->prev[i] = i > lo ? i - 1 : -1;
        s->next[i] = i + 1 < hi ? i + 1 : -1;
    }
    s->heap_n = 0;
    for (int32_t i = lo; i + 1 < hi; i++)
        if (push_pair(t, s, i) != 0)
            return -1;
    while (s->heap_n > 0) {
        struct hy_heap_ent e = heap_pop(s);
        int32_t i = e.pos;
        if (s->sym[i] != e.left)
            continue;
        int32_t j = s->next[i];
        if (j < 0 || s->sym[j] != e.right)
            continue;
        int32_t prio, id;
        if (!hy_pairmap_get(&t->merges, e.left, e.right, &prio, &id))
            continue;
        s->sym[i] = id;
        s->sym[j] = -1;
        s->next[i] = s->next[j];
        if (s->next[j] >= 0)
            s->prev[s->next[j]] = i;
        if (push_pair(t, s, s->prev[i]) != 0 || push_pair(t, s, i) != 0)
            return -1;
    }
    for (int32_t i = lo; i >= 0; i = s->next[i])
        if (hy_tok_emit(s, s->sym[i]) != 0)
            return -1;
    return 0;
}

#define HY_CUT_MIN 32 /* pieces with more symbols are cut at boundaries no merge can cross */

int hy_tok_bpe_piece(const struct hy_tokenizer *t, struct hy_tok_scratch *s, const char *p, size_t n)
{
    if (n == 0)
        return 0;
    if (t->whole_word_first) {
        int32_t id = hy_strmap_get(&t->by_model, p, n);
        if (id >= 0)
            return hy_tok_emit(s, id);
    }
    if (sym_reserve(s, n) != 0)
        return -1;
    int cutting = n > HY_CUT_MIN && t->adjacent.slots;
    size_t ns = 0;
    const unsigned char *u = (const unsigned char *)p;
    /* A boundary between two characters that both map straight to a vocab symbol is uncrossable
     * when no token holds the two characters next to each other: any merge across it would make
     * such a token. Byte-fallback / unknown symbols never count as safe. */
    uint32_t prev_c = 0;
    int prev_direct = 0;
    if (t->byte_level) {
        for (size_t i = 0; i < n; i++) {
            int32_t id = t->byte_id[u[i]];
            int direct = id >= 0;
            uint8_t cut = 0;
            if (cutting && direct && prev_direct) {
                int32_t pr, x;
                cut = !hy_pairmap_get(&t->adjacent, (int32_t)prev_c, (int32_t)u[i], &pr, &x);
            }
            prev_c = u[i];
            prev_direct = direct;
            if (direct) {
                s->cut[ns] = cut;
                s->sym[ns++] = id;
            } else if (t->unk_id >= 0 && !(t->fuse_unk && ns > 0 && s->sym[ns - 1] == t->unk_id)) {
                s->cut[ns] = 0;
                s->sym[ns++] = t->unk_id;
            }
        }
    } else {
        size_t i = 0;
        while (i < n) {
            int cl;
            uint32_t c = model_char(t, u + i, n - i, &cl);
            int32_t id = hy_strmap_get(&t->by_model, p + i, (size_t)cl);
            int direct = id >= 0;
            uint8_t cut = 0;
            if (cutting && direct && prev_direct) {
                int32_t pr, x;
                cut = !hy_pairmap_get(&t->adjacent, (int32_t)prev_c, (int32_t)c, &pr, &x);
            }
            prev_c = c;
            prev_direct = direct;
            if (direct) {
                s->cut[ns] = cut;
                s->sym[ns++] = id;
            } else {
                int ok = t->byte_fallback;
                for (int k = 0; ok && k < cl; k++)
                    ok = t->fallback_id[u[i + k]] >= 0;
                if (ok) {
                    for (int k = 0; k < cl; k++) {
                        s->cut[ns] = 0;
                        s->sym[ns++] = t->fallback_id[u[i + k]];
                    }
                } else if (t->unk_id >= 0 && !(t->fuse_unk && ns > 0 && s->sym[ns - 1] == t->unk_id)) {
                    s->cut[ns] = 0;
                    s->sym[ns++] = t->unk_id;
                }
            }
            i += (size_t)cl;
        }
    }
    size_t lo = 0;
    for (size_t i = 1; i <= ns; i++) {
        if (i == ns || s->cut[i]) {
            if (bpe_range(t, s, (int32_t)lo, (int32_t)i) != 0)
                return -1;
            lo = i;
        }
    }
    return 0;
}
