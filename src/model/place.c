/* place.c - weight placement after loading: keep the mmap, or copy into a huge-page arena (place.h). */
#include "model/place.h"
#include "model/shard.h"

#include "base/env.h"
#include "base/err.h"
#include "base/log.h"
#include "base/progress.h"
#include "base/timing.h"
#include "model/model.h"
#include "quant/formats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_SZ ((size_t)2 << 20)
#define COPY_CHUNK ((size_t)16 << 20) /* bytes per copy task (threads take chunks dynamically) */

/* Built-in default: copy, which puts every weight in huge pages where mmap gets them only for the
 * page-cache folios that happen to be 2 MiB; decode is faster for it and the copy costs seconds at
 * load (docs/tuning.md, weight placement). mmap stays one flag away, and copy falls back to mmap when
 * MemAvailable cannot hold the weights. */
#define DEFAULT_FORMAT HY_LOAD_COPY

int hy_load_format_parse(const char *s, enum hy_load_format *out)
{
    if (s && !strcmp(s, "mmap")) {
        *out = HY_LOAD_MMAP;
        return 0;
    }
    if (s && !strcmp(s, "copy")) {
        *out = HY_LOAD_COPY;
        return 0;
    }
    return hy_err_set("load format \"%s\": expected mmap or copy", s ? s : "");
}

const char *hy_load_format_name(enum hy_load_format f)
{
    return f == HY_LOAD_COPY ? "copy" : "mmap";
}

enum hy_load_format hy_load_format_default(void)
{
    const int f = hy_env_params()->load_format; /* HYINFER_LOAD_FORMAT: 0 unset, 1 mmap, 2 copy */
    return f == 1 ? HY_LOAD_MMAP : f == 2 ? HY_LOAD_COPY : DEFAULT_FORMAT;
}

static int64_t proc_field_kb(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    const size_t kl = strlen(key);
    int64_t v = -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            long long kb;
            if (sscanf(line + kl + 1, "%lld", &kb) == 1)
                v = (int64_t)kb * 1024;
            break;
        }
    fclose(f);
    return v;
}

int64_t hy_proc_rss_bytes(void)
{
    return proc_field_kb("/proc/self/status", "VmRSS");
}

int64_t hy_proc_anon_huge_bytes(void)
{
    return proc_field_kb("/proc/self/smaps_rollup", "AnonHugePages");
}

int64_t hy_proc_file_pmd_bytes(void)
{
    return proc_field_kb("/proc/self/smaps_rollup", "FilePmdMapped");
}

/* ---- the set of weight byte ranges ---- */

struct range {
    const char *src; /* start in a checkpoint mapping */
    size_t len;
    size_t dst; /* offset in the arena */
};

struct ranges {
    struct range *r;
    size_t n, cap;
    int oom;
};

static int in_mapping(const struct hy_checkpoint *ck, const char *p, size_t len)
{
    for (size_t f = 0; f < ck->n_files; f++) {
        const char *b = ck->files[f].map.data;
        if (b && p >= b && len <= ck->files[f].map.size && (size_t)(p - b) <= ck->files[f].map.size - len)
            return 1;
    }
    return 0;
}

static void add_range(struct ranges *rs, const struct hy_checkpoint *ck, const void *p, size_t len)
{
    if (!p || !len || !in_mapping(ck, p, len))
        return;
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? rs->cap * 2 : 256;
        struct range *r = realloc(rs->r, cap * sizeof(*r));
        if (!r) {
            rs->oom = 1;
            return;
        }
        rs->r = r;
        rs->cap = cap;
    }
    rs->r[rs->n++] = (struct range){.src = p, .len = len};
}

static void add_tensor(struct ranges *rs, const struct hy_checkpoint *ck, const struct hy_tensor *t)
{
    if (!t->data)
        return;
    add_range(rs, ck, t->data, (size_t)(t->rows * hy_tensor_row_bytes(t)));
    if (t->qscheme == HY_QS_MX32)
        add_range(rs, ck, t->mx_scales, (size_t)(t->rows * ((t->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK)));
}

static int n_layers_of(const struct hy_model *m)
{
    return m->cfg.num_hidden_layers + (m->cfg.num_nextn_predict_layers > 0);
}

/* Calls fn on every weight matrix of the model (the same set as add_*), in use order. */
static void for_each_tensor(struct hy_model *m, void (*fn)(struct hy_tensor *, void *), void *ctx)
{
    fn(&m->embed, ctx);
    for (int L = 0; m->layers && L < n_layers_of(m); L++) {
        struct hy_layer *ly = &m->layers[L];
        struct hy_tensor *ts[] = {&ly->wq, &ly->wk, &ly->wv, &ly->wo, &ly->mlp.gate, &ly->mlp.up, &ly->mlp.down,
                                  &ly->shared.gate, &ly->shared.up, &ly->shared.down, &ly->eh_proj,
                                  /* hy_v4 (absent, data NULL, for other models) */
                                  &ly->q_a, &ly->q_b, &ly->kv_a, &ly->kv_b, &ly->attn_gate, &ly->idx_wq_b, &ly->idx_wk};
        for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++)
            fn(ts[i], ctx);
        for (int64_t e = 0; ly->experts && e < m->cfg.num_experts; e++) {
            fn(&ly->experts[e].gate, ctx);
            fn(&ly->experts[e].up, ctx);
            fn(&ly->experts[e].down, ctx);
        }
    }
    fn(&m->lm_head, ctx);
}

struct collect_ctx {
    struct ranges *rs;
    const struct hy_checkpoint *ck;
};

static void collect_fn(struct hy_tensor *t, void *ctx)
{
    struct collect_ctx *c = ctx;
    add_tensor(c->rs, c->ck, t);
}

static int cmp_src(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->src < y->src ? -1 : x->src > y->src;
}

/* The merged range holding [p, p+len), or NULL. rs sorted by src, disjoint. */
static const struct range *find_range(const struct ranges *rs, const char *p, size_t len)
{
    size_t lo = 0, hi = rs->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rs->r[mid].src <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const struct range *r = &rs->r[lo - 1];
    return (size_t)(p - r->src) <= r->len && len <= r->len - (size_t)(p - r->src) ? r : NULL;
}

struct repoint_ctx {
    const struct ranges *rs;
    char *arena;
};

static const void *moved(const struct repoint_ctx *c, const void *p, size_t len)
{
    if (!p)
        return p;
    const struct range *r = find_range(c->rs, p, len);
    return r ? c->arena + r->dst + (size_t)((const char *)p - r->src) : p;
}

static void repoint_fn(struct hy_tensor *t, void *ctx)
{
    const struct repoint_ctx *c = ctx;
    if (!t->data)
        return;
    t->data = moved(c, t->data, (size_t)(t->rows * hy_tensor_row_bytes(t)));
    if (t->qscheme == HY_QS_MX32)
        t->mx_scales = moved(c, t->mx_scales, (size_t)(t->rows * ((t->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK)));
}

struct chunk {
    const char *src;
    char *dst;
    size_t len;
};

static int copy_into_arena(struct hy_model *m)
{
    struct ranges rs = {0};
    struct collect_ctx cc = {.rs = &rs, .ck = &m->ck};
    for_each_tensor(m, collect_fn, &cc);
    if (rs.oom) {
        free(rs.r);
        return hy_err_set("load: out of memory listing the weight ranges");
    }
    if (rs.n == 0) {
        free(rs.r);
        return 0;
    }
    /* merge overlapping or touching ranges (tied embeddings, fused expert halves, adjacent tensors) */
    qsort(rs.r, rs.n, sizeof(*rs.r), cmp_src);
    size_t w = 0;
    for (size_t i = 1; i < rs.n; i++) {
        struct range *cur = &rs.r[w];
        const char *end = cur->src + cur->len;
        if (rs.r[i].src <= end) {
            const char *e2 = rs.r[i].src + rs.r[i].len;
            if (e2 > end)
                cur->len = (size_t)(e2 - cur->src);
        } else {
            rs.r[++w] = rs.r[i];
        }
    }
    rs.n = w + 1;
    /* arena offsets: each range 64-byte aligned (element alignment <= 64 is kept) */
    size_t total = 0, n_chunks = 0;
    for (size_t i = 0; i < rs.n; i++) {
        rs.r[i].dst = total;
        total = (total + rs.r[i].len + 63) & ~(size_t)63;
        n_chunks += (rs.r[i].len + COPY_CHUNK - 1) / COPY_CHUNK;
    }
    const size_t map_size = ((total + HUGE_SZ - 1) & ~(HUGE_SZ - 1)) + HUGE_SZ;
    char *raw = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    struct chunk *ch = malloc(n_chunks * sizeof(*ch));
    if (raw == MAP_FAILED || !ch) {
        if (raw != MAP_FAILED)
            munmap(raw, map_size);
        free(ch);
        free(rs.r);
        return hy_err_set("load: cannot allocate the %.2f GB weight arena (--load-format copy); mmap would "
                          "not need it",
                          (double)total / 1e9);
    }
    char *arena = (char *)(((uintptr_t)raw + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1));
#ifdef MADV_HUGEPAGE
    madvise(arena, map_size - (size_t)(arena - raw), MADV_HUGEPAGE); /* advisory: failure is harmless */
#endif
    size_t k = 0;
    for (size_t i = 0; i < rs.n; i++)
        for (size_t off = 0; off < rs.r[i].len; off += COPY_CHUNK)
            ch[k++] = (struct chunk){.src = rs.r[i].src + off,
                                     .dst = arena + rs.r[i].dst + off,
                                     .len = rs.r[i].len - off < COPY_CHUNK ? rs.r[i].len - off : COPY_CHUNK};
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    struct hy_progress prog; /* on a terminal: the checkpoint's bytes read so far and the rate */
    hy_progress_begin(&prog, "load: reading the weights", (int64_t)total, HY_PROGRESS_BYTES);
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t c = 0; c < n_chunks; c++) {
        memcpy(ch[c].dst, ch[c].src, ch[c].len);
        hy_progress_add(&prog, (int64_t)ch[c].len);
        /* drop the source pages wholly inside this chunk from the process now, so resident memory
         * does not peak at twice the weights (the mapping is read-only: refaulting is harmless) */
        uintptr_t a = ((uintptr_t)ch[c].src + pg - 1) & ~(pg - 1), b = ((uintptr_t)ch[c].src + ch[c].len) & ~(pg - 1);
        if (b > a)
            madvise((void *)a, b - a, MADV_DONTNEED);
    }
    hy_progress_end(&prog);
    free(ch);
    struct repoint_ctx rc = {.rs = &rs, .arena = arena};
    for_each_tensor(m, repoint_fn, &rc);
    for (size_t f = 0; f < m->ck.n_files; f++) {
        struct hy_st_file *sf = &m->ck.files[f];
        for (size_t t = 0; t < sf->n_tensors; t++)
            sf->tensors[t].data = find_range(&rs, sf->tensors[t].data, sf->tensors[t].nbytes)
                                      ? moved(&rc, sf->tensors[t].data, sf->tensors[t].nbytes)
                                      : NULL;
        hy_file_unmap(&sf->map);
    }
    m->arena = raw;
    m->arena_size = map_size;
    m->place.bytes = (int64_t)total;
    free(rs.r);
    return 0;
}

struct nan_scan_ctx {
    struct hy_tensor **t;
    size_t n, cap;
    int oom;
};

static void nan_collect_fn(struct hy_tensor *t, void *ctx)
{
    struct nan_scan_ctx *c = ctx;
    if (t->dtype != HY_DTYPE_F8_E4M3 || !t->data || c->oom)
        return;
    if (c->n == c->cap) {
        const size_t nc = c->cap ? 2 * c->cap : 256;
        struct hy_tensor **nt = realloc(c->t, nc * sizeof(*nt));
        if (!nt) {
            c->oom = 1;
            return;
        }
        c->t = nt;
        c->cap = nc;
    }
    c->t[c->n++] = t;
}

/* Marks every E4M3 weight free of NaN codes (0x7f / 0xff) or not (tensor.h nan_free). NaN codes are
 * legal E4M3 (they give NaN outputs); knowing there are none lets the kernels drop a per-block test.
 * One pass over the placed bytes, tensors in parallel: after a copy they are in the arena (DRAM); in
 * mmap mode this is the pass that faults the file pages in. Out of memory leaves nan_free = 0 (the
 * kernels then test per block: slower, same results). */
static void scan_nan_free(struct hy_model *m)
{
    struct nan_scan_ctx c = {0};
    const double t0 = hy_time_now();
    for_each_tensor(m, nan_collect_fn, &c);
    int64_t n_free = 0, bytes = 0;
    if (!c.oom) {
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : n_free, bytes)
        for (size_t i = 0; i < c.n; i++) {
            const int64_t nb = c.t[i]->rows * hy_tensor_row_bytes(c.t[i]);
            c.t[i]->nan_free = !hy_e4m3_has_nan(c.t[i]->data, (size_t)nb);
            n_free += c.t[i]->nan_free;
            bytes += nb;
        }
    }
    if (c.n)
        hy_log(HY_LOG_DEBUG, "load: %lld of %zu E4M3 weights free of NaN codes (%.3f GB scanned in %.2f s)",
               (long long)n_free, c.n, (double)bytes / 1e9, hy_time_now() - t0);
    free(c.t);
}

int hy_model_place(struct hy_model *m, enum hy_load_format f)
{
    if (m->arena)
        return 0;
    const int64_t avail = proc_field_kb("/proc/meminfo", "MemAvailable");
    if (f == HY_LOAD_COPY && avail > 0 && (double)m->ck.total_bytes > 0.9 * (double)avail) {
        hy_log_warn("load: %.2f GB of weights do not fit in 90%% of MemAvailable (%.2f GB): weights stay mmapped",
                    (double)m->ck.total_bytes / 1e9, (double)avail / 1e9);
        f = HY_LOAD_MMAP;
    }
    const double t0 = hy_time_now();
    struct hy_placement p = {.format = f, .rss_before = hy_proc_rss_bytes(), .anon_huge = -1, .rss_after = -1};
    m->place = p;
    if (f == HY_LOAD_COPY && copy_into_arena(m)) { /* nothing was moved: the mapping still serves */
        hy_log_warn("%s: weights stay mmapped", hy_err_msg());
        m->place.format = HY_LOAD_MMAP;
    }
    scan_nan_free(m);
    m->place.seconds = hy_time_now() - t0;
    m->place.rss_after = hy_proc_rss_bytes();
    m->place.anon_huge = hy_proc_anon_huge_bytes();
    if (f == HY_LOAD_COPY)
        hy_log(m->place.bytes >= ((int64_t)1 << 30) ? HY_LOG_INFO : HY_LOG_DEBUG,
               "load: copied %.3f GB of weights into a huge-page arena in %.2f s (AnonHugePages %.3f GB, VmRSS "
               "%.3f GB)",
               (double)m->place.bytes / 1e9, m->place.seconds, (double)m->place.anon_huge / 1e9,
               (double)m->place.rss_after / 1e9);
    return 0;
}

void hy_model_place_release(struct hy_model *m)
{
    if (m->arena)
        munmap(m->arena, m->arena_size);
    m->arena = NULL;
    m->arena_size = 0;
}

static void weight_bytes_fn(struct hy_tensor *t, void *ctx)
{
    if (t->data)
        *(int64_t *)ctx += hy_tensor_bytes(t);
}

int64_t hy_model_weight_bytes(const struct hy_model *m)
{
    int64_t b = 0;
    struct hy_tensor lm = m->lm_head, *embed = (struct hy_tensor *)&m->embed;
    for_each_tensor((struct hy_model *)m, weight_bytes_fn, &b);
    if (m->cfg.tie_word_embeddings && lm.data == embed->data && lm.rows == embed->rows)
        b -= hy_tensor_bytes(&lm); /* one table counted twice */
    return b;
}
