/* quantize.c - `hyinfer quantize` library part (quantize.h). */
#include "quantize/quantize.h"

#include "base/err.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/progress.h"
#include "base/timing.h"
#include "config/model_config.h"
#include "config/quant_config.h"
#include "model/safetensors.h"
#include "quantize/calib.h"
#include "quantize/outdir.h"
#include "quant/formats.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_CAP 320

int hy_quant_dtype_parse(const char *s, enum hy_quant_dtype *out)
{
    static const char *names[] = {"fp8", "mxfp8", "mxfp4", "hybrid", "w8a8-dynamic", "w8a8", "w8a8-mix"};
    for (int i = 0; i < 7; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *out = (enum hy_quant_dtype)i;
            return 0;
        }
    return hy_err_set("--quant-dtype \"%s\": expected fp8, mxfp8, mxfp4, hybrid, w8a8-dynamic, w8a8 or w8a8-mix",
                      s ? s : "");
}

/* --quant-target words, in the order they print. */
static const struct {
    const char *name;
    unsigned bit;
} target_words[] = {{"moe", HY_QT_MOE},
                    {"attn-linear", HY_QT_ATTN},
                    {"mlp", HY_QT_MLP},
                    {"lm_head", HY_QT_LM_HEAD},
                    {"embed", HY_QT_EMBED}};
#define N_TARGET_WORDS (sizeof(target_words) / sizeof(target_words[0]))

int hy_quant_target_parse(const char *s, unsigned *bit)
{
    for (size_t i = 0; s && i < N_TARGET_WORDS; i++)
        if (strcmp(s, target_words[i].name) == 0) {
            *bit = target_words[i].bit;
            return 0;
        }
    return hy_err_set("--quant-target \"%s\": expected moe, attn-linear, mlp, lm_head or embed", s ? s : "");
}

void hy_quant_targets_str(unsigned mask, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_TARGET_WORDS && n < cap; i++)
        if (mask & target_words[i].bit) {
            const int w = snprintf(buf + n, cap - n, " %s", target_words[i].name);
            n += w > 0 ? (size_t)w : 0;
        }
}

/* Linear categories of source tensors. */
enum cat {
    CAT_NONE = 0,
    CAT_ATTN,
    CAT_MLP,
    CAT_ROUTED,
    CAT_ROUTED_FUSED_GU,
    CAT_ROUTED_FUSED_DN,
    CAT_SHARED,
    CAT_LM_HEAD,
    CAT_EMBED
};

static int is_proj(const char *s, const char *const *names, int n, const char *suffix)
{
    for (int i = 0; i < n; i++) {
        size_t l = strlen(names[i]);
        if (strncmp(s, names[i], l) == 0 && strcmp(s + l, suffix) == 0)
            return 1;
    }
    return 0;
}

/* Category of a tensor name; *prefix = the length of its layer prefix ("model.layers.N." or, hy_v4's MTP
 * layer, "model.mtp_layers.N."; 0 for lm_head and the embedding). Module = name minus ".weight". hy_v4's
 * attention linears (q_a / q_b / kv_a_proj_with_mqa, o_proj, linear_gate) are attention; its kv_b_proj
 * (absorbed into the latent at load), the indexer, the router, hc_* and the sinks are never quantized. */
static enum cat classify(const char *name, int *prefix)
{
    static const char *const attn[] = {"q_proj",   "k_proj",   "v_proj",      "o_proj",
                                       "q_a_proj", "q_b_proj", "linear_gate", "kv_a_proj_with_mqa"};
    static const char *const mlp[] = {"gate_proj", "up_proj", "down_proj"};
    int L, n = 0;
    *prefix = 0;
    if (strcmp(name, "lm_head.weight") == 0)
        return CAT_LM_HEAD;
    if (strcmp(name, "model.embed_tokens.weight") == 0)
        return CAT_EMBED;
    if ((sscanf(name, "model.layers.%d.%n", &L, &n) != 1 || n == 0) &&
        (sscanf(name, "model.mtp_layers.%d.%n", &L, &n) != 1 || n == 0))
        return CAT_NONE;
    *prefix = n;
    const char *r = name + n;
    if (strncmp(r, "self_attn.", 10) == 0 && is_proj(r + 10, attn, 8, ".weight"))
        return CAT_ATTN;
    if (strcmp(r, "eh_proj.weight") == 0)
        return CAT_ATTN;
    if (strncmp(r, "mlp.", 4) != 0)
        return CAT_NONE;
    r += 4;
    if (is_proj(r, mlp, 3, ".weight"))
        return CAT_MLP;
    if (strcmp(r, "experts.gate_up_proj") == 0)
        return CAT_ROUTED_FUSED_GU;
    if (strcmp(r, "experts.down_proj") == 0)
        return CAT_ROUTED_FUSED_DN;
    if (strncmp(r, "experts.", 8) == 0) {
        int e, k = 0;
        if (sscanf(r + 8, "%d.%n", &e, &k) == 1 && k > 0 && is_proj(r + 8 + k, mlp, 3, ".weight"))
            return CAT_ROUTED;
        return CAT_NONE;
    }
    if (strncmp(r, "shared_mlp.", 11) == 0 && is_proj(r + 11, mlp, 3, ".weight"))
        return CAT_SHARED;
    if (strncmp(r, "shared_experts.", 15) == 0 && is_proj(r + 15, mlp, 3, ".weight"))
        return CAT_SHARED;
    return CAT_NONE;
}

static int cat_targeted(enum cat c, unsigned t)
{
    switch (c) {
    case CAT_ATTN:
        return (t & HY_QT_ATTN) != 0;
    case CAT_MLP:
        return (t & HY_QT_MLP) != 0;
    case CAT_ROUTED:
    case CAT_ROUTED_FUSED_GU:
    case CAT_ROUTED_FUSED_DN:
    case CAT_SHARED:
        return (t & HY_QT_MOE) != 0;
    case CAT_LM_HEAD:
        return (t & HY_QT_LM_HEAD) != 0;
    case CAT_EMBED:
        return (t & HY_QT_EMBED) != 0;
    default:
        return 0;
    }
}

static int cat_routed(enum cat c)
{
    return c == CAT_ROUTED || c == CAT_ROUTED_FUSED_GU || c == CAT_ROUTED_FUSED_DN;
}

static enum hy_qformat format_for(enum hy_quant_dtype d, enum cat c)
{
    const int table = c == CAT_LM_HEAD || c == CAT_EMBED; /* no calibrated input range: dynamic int8 */
    switch (d) {
    case HY_QD_FP8:
        return HY_QF_FP8_TENSOR;
    case HY_QD_MXFP8:
        return HY_QF_MXFP8;
    case HY_QD_MXFP4:
        return HY_QF_MXFP4;
    case HY_QD_HYBRID:
        return cat_routed(c) ? HY_QF_MXFP4 : HY_QF_MXFP8;
    case HY_QD_W8A8_DYN:
        return HY_QF_W8A8_DYN;
    case HY_QD_W8A8: /* vLLM-Ascend's MoE method is dynamic only */
        return cat_routed(c) || table ? HY_QF_W8A8_DYN : HY_QF_W8A8_STATIC;
    case HY_QD_W8A8_MIX: /* DeepSeek's mixed recipe: static attention, dynamic MLPs */
        return c == CAT_ATTN ? HY_QF_W8A8_STATIC : HY_QF_W8A8_DYN;
    }
    return HY_QF_NONE;
}

/* One quantized matrix: rows x cols of src starting at element offset `elem0`. */
struct qmat {
    char module[NAME_CAP]; /* output module name */
    const struct hy_st_tensor *src;
    int64_t elem0, rows, cols;
    enum hy_qformat f;
    float scale;               /* fp8 */
    float *row_scales;         /* w8a8: [rows] */
    float in_scale, in_offset; /* static w8a8: the activation scale and offset */
    int32_t *row_sums;         /* static w8a8: [rows] sum of each row's codes, once its weight is written */
};

/* One header entry of the output, in file order after sorting. */
enum role {
    R_COPY,
    R_QWEIGHT,
    R_QSCALE_MX,
    R_QSCALE_FP8,
    R_QSCALE_ROWS,
    R_ZEROS,
    R_IN_SCALE,  /* static w8a8 input_scale [1] */
    R_IN_OFFSET, /* input_offset [1] */
    R_DEQ_SCALE, /* deq_scale [rows] = in_scale * row_scales */
    R_QUANT_BIAS /* quant_bias [rows] = -in_offset * row_sums */
};
struct entry {
    char name[NAME_CAP];
    const char *dtype;
    int ndim;
    int64_t shape[HY_ST_MAX_DIMS];
    uint64_t nbytes;
    int esize; /* sort key: element size (0: static W8A8's tensors, after every weight) */
    int seq;   /* creation order (stable sort) */
    enum role role;
    const struct hy_st_tensor *src; /* R_COPY */
    struct qmat *q;                 /* quantized roles */
};

struct plan {
    struct entry *e;
    size_t n, cap;
    struct qmat **q;
    size_t nq, capq;
    json_t *ignored;            /* fp8: unquantized linear modules */
    struct hy_calib *calib;     /* static w8a8's activation ranges (hy_calib_ranges run), else NULL */
    int64_t no_range;           /* static w8a8 linears without a range, written dynamic */
    unsigned cats_quantized[2]; /* bitmask of cats quantized as [0] = main group, [1] = mxfp4 group */
    int tied;                   /* tie_word_embeddings: the embedding is the lm_head */
};

static struct entry *add_entry(struct plan *p)
{
    if (p->n == p->cap) {
        size_t nc = p->cap ? 2 * p->cap : 256;
        struct entry *ne = realloc(p->e, nc * sizeof(*ne));
        if (!ne)
            return NULL;
        p->e = ne;
        p->cap = nc;
    }
    struct entry *e = &p->e[p->n];
    memset(e, 0, sizeof(*e));
    e->seq = (int)p->n++;
    return e;
}

static struct qmat *add_q(struct plan *p)
{
    if (p->nq == p->capq) {
        size_t nc = p->capq ? 2 * p->capq : 256;
        struct qmat **nq = realloc(p->q, nc * sizeof(*nq));
        if (!nq)
            return NULL;
        p->q = nq;
        p->capq = nc;
    }
    struct qmat *q = calloc(1, sizeof(*q));
    if (q)
        p->q[p->nq++] = q;
    return q;
}

/* Row r of q's source widened to f32; -1 (with error) on NaN/Inf. */
static int src_row(const struct qmat *q, int64_t r, float *buf)
{
    const size_t es = hy_dtype_size(q->src->dtype);
    const char *p = (const char *)q->src->data + (size_t)(q->elem0 + r * q->cols) * es;
    hy_dtype_to_f32(q->src->dtype, p, buf, (size_t)q->cols);
    for (int64_t k = 0; k < q->cols; k++)
        if (!isfinite(buf[k]))
            return hy_err_set("tensor \"%s\" (%s): element [%lld, %lld] is %g; cannot quantize non-finite weights",
                              q->src->name, q->module, (long long)r, (long long)k, (double)buf[k]);
    return 0;
}

/* Drops the mapped source pages wholly inside [p, p + n) from this process (they are re-read from the
 * file if touched again): keeps the resident set small while a large checkpoint streams through. */
static void drop_pages(const void *p, size_t n)
{
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = ((uintptr_t)p + pg - 1) & ~(pg - 1),
                    b = ((uintptr_t)p + n) & ~(pg - 1);
    if (b > a)
        (void)madvise((void *)a, b - a, MADV_DONTNEED);
}

static void drop_src(const struct qmat *q)
{
    const size_t es = hy_dtype_size(q->src->dtype);
    drop_pages((const char *)q->src->data + (size_t)q->elem0 * es, (size_t)(q->rows * q->cols) * es);
}

/* fp8 per-tensor scale = max|W| / 448 (f32), 1 for an all-zero matrix. */
static int fp8_scale(struct qmat *q)
{
    float *buf = malloc((size_t)q->cols * sizeof(float));
    if (!buf)
        return hy_err_set("out of memory");
    float amax = 0.0f;
    for (int64_t r = 0; r < q->rows; r++) {
        if (src_row(q, r, buf)) {
            free(buf);
            return -1;
        }
        for (int64_t k = 0; k < q->cols; k++)
            if (fabsf(buf[k]) > amax)
                amax = fabsf(buf[k]);
    }
    free(buf);
    drop_src(q);
    q->scale = amax > 0.0f ? amax / 448.0f : 1.0f;
    return 0;
}

/* w8a8 per-row scales s_n = max_k |w_nk| / 127, at least FLT_EPSILON (msModelSlim's min-max rule; the
 * rounding, RTN or GPTQ, computes the same ones from the same rows). */
static int w8a8_scales(struct qmat *q)
{
    float *buf = malloc((size_t)q->cols * sizeof(float));
    q->row_scales = malloc((size_t)q->rows * sizeof(float) + 1);
    if (!buf || !q->row_scales) {
        free(buf);
        return hy_err_set("out of memory");
    }
    for (int64_t r = 0; r < q->rows; r++) {
        if (src_row(q, r, buf)) {
            free(buf);
            return -1;
        }
        q->row_scales[r] = hy_quant_i8_row_scale(buf, q->cols);
    }
    free(buf);
    drop_src(q);
    return 0;
}

/* Static W8A8's activation parameters from the input range [lo, hi] (widened to hold 0), msModelSlim's
 * asymmetric per-tensor min-max rule: s = (hi - lo) / 255 (1 for an all-zero input), o = RNE(-lo / s) - 128. */
static void static_act_params(float lo, float hi, float *scale, float *offset)
{
    lo = lo < 0.0f ? lo : 0.0f;
    hi = hi > 0.0f ? hi : 0.0f;
    const float s = (hi - lo) / 255.0f;
    *scale = s > 0.0f ? s : 1.0f;
    *offset = rintf(-lo / *scale) - 128.0f;
}

/* One F32 / I32 entry of static W8A8 (n elements, shape [n]), sorted after every weight. */
static int add_static_entry(struct plan *p, struct qmat *q, const char *module, const char *leaf, enum role r,
                            int64_t n)
{
    struct entry *e = add_entry(p);
    if (!e)
        return hy_err_set("out of memory");
    snprintf(e->name, sizeof(e->name), "%s.%s", module, leaf);
    e->q = q;
    e->dtype = r == R_QUANT_BIAS ? "I32" : "F32";
    e->ndim = 1;
    e->shape[0] = n;
    e->nbytes = (uint64_t)n * 4;
    e->esize = 0;
    e->role = r;
    return 0;
}

static int plan_quant(struct plan *p, const struct hy_st_tensor *src, const char *module, int64_t elem0, int64_t rows,
                      int64_t cols, enum hy_qformat f)
{
    if (f == HY_QF_MXFP4 && cols % 2)
        return hy_err_set("tensor \"%s\": K = %lld is odd; MXFP4 packs two elements per byte", src->name,
                          (long long)cols);
    float lo = 0.0f, hi = 0.0f;
    if (f == HY_QF_W8A8_STATIC && !(p->calib && hy_calib_get_range(p->calib, module, &lo, &hi))) {
        f = HY_QF_W8A8_DYN; /* no calibration input reached it */
        p->no_range++;
        hy_log_warn("quantize: %s: no calibration input reached it; written W8A8_DYNAMIC", module);
    }
    struct qmat *q = add_q(p);
    struct entry *w = q ? add_entry(p) : NULL;
    if (!w)
        return hy_err_set("out of memory");
    snprintf(q->module, sizeof(q->module), "%s", module);
    q->src = src;
    q->elem0 = elem0;
    q->rows = rows;
    q->cols = cols;
    q->f = f;
    snprintf(w->name, sizeof(w->name), "%s.weight", module);
    w->ndim = 2;
    w->shape[0] = rows;
    w->shape[1] = f == HY_QF_MXFP4 ? cols / 2 : cols;
    const int int8 = hy_qformat_is_int8(f);
    w->dtype = f == HY_QF_MXFP4 ? "U8" : int8 ? "I8" : "F8_E4M3";
    w->nbytes = (uint64_t)(rows * w->shape[1]);
    w->esize = 1;
    w->role = R_QWEIGHT;
    w->q = q;
    if (f == HY_QF_W8A8_STATIC) {
        static_act_params(lo, hi, &q->in_scale, &q->in_offset);
        return w8a8_scales(q) || add_static_entry(p, q, module, "input_scale", R_IN_SCALE, 1) ||
                       add_static_entry(p, q, module, "input_offset", R_IN_OFFSET, 1) ||
                       add_static_entry(p, q, module, "deq_scale", R_DEQ_SCALE, rows) ||
                       add_static_entry(p, q, module, "quant_bias", R_QUANT_BIAS, rows)
                   ? -1
                   : 0;
    }
    struct entry *s = add_entry(p);
    if (!s)
        return hy_err_set("out of memory");
    snprintf(s->name, sizeof(s->name), "%s.weight_scale", module);
    s->q = q;
    if (f == HY_QF_W8A8_DYN) {
        if (w8a8_scales(q))
            return -1;
        const size_t si = (size_t)(s - p->e);
        struct entry *z = add_entry(p); /* may move p->e: s is found again by index */
        if (!z)
            return hy_err_set("out of memory");
        s = &p->e[si];
        snprintf(z->name, sizeof(z->name), "%s.weight_offset", module);
        struct entry *both[2] = {s, z};
        for (int i = 0; i < 2; i++) {
            both[i]->q = q;
            both[i]->dtype = "F32";
            both[i]->ndim = 2;
            both[i]->shape[0] = rows;
            both[i]->shape[1] = 1;
            both[i]->nbytes = (uint64_t)rows * 4;
            both[i]->esize = 4;
            both[i]->role = i ? R_ZEROS : R_QSCALE_ROWS;
        }
    } else if (f == HY_QF_FP8_TENSOR) {
        if (fp8_scale(q))
            return -1;
        s->dtype = "F32";
        s->ndim = 1;
        s->shape[0] = 1;
        s->nbytes = 4;
        s->esize = 4;
        s->role = R_QSCALE_FP8;
    } else {
        s->dtype = "U8";
        s->ndim = 2;
        s->shape[0] = rows;
        s->shape[1] = (cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK;
        s->nbytes = (uint64_t)(rows * s->shape[1]);
        s->esize = 1;
        s->role = R_QSCALE_MX;
    }
    return 0;
}

static int plan_copy(struct plan *p, const struct hy_st_tensor *t)
{
    struct entry *e = add_entry(p);
    if (!e)
        return hy_err_set("out of memory");
    snprintf(e->name, sizeof(e->name), "%s", t->name);
    e->dtype = t->dtype_name;
    e->ndim = t->ndim;
    memcpy(e->shape, t->shape, sizeof(e->shape));
    e->nbytes = t->nbytes;
    e->esize = (int)hy_dtype_size(t->dtype);
    if (e->esize <= 0)
        e->esize = 1;
    e->role = R_COPY;
    e->src = t;
    return 0;
}

static int build_plan(const struct hy_checkpoint *ck, const struct hy_model_config *cfg,
                      const struct hy_quantize_opts *o, struct plan *p)
{
    const int64_t I = cfg->moe_intermediate_size, H = cfg->hidden_size;
    const unsigned tables = o->targets & (HY_QT_LM_HEAD | HY_QT_EMBED);
    p->tied = cfg->tie_word_embeddings;
    if (p->tied && tables && tables != (HY_QT_LM_HEAD | HY_QT_EMBED))
        return hy_err_set("--quant-target %s: this checkpoint ties lm_head to the embedding (tie_word_embeddings), "
                          "so one table is both; give lm_head and embed together",
                          tables == HY_QT_LM_HEAD ? "lm_head" : "embed");
    for (size_t i = 0; i < ck->n_index; i++) {
        const struct hy_st_tensor *t = ck->index[i];
        int plen = 0;
        enum cat c = classify(t->name, &plen);
        const int fused = c == CAT_ROUTED_FUSED_GU || c == CAT_ROUTED_FUSED_DN;
        if (c == CAT_NONE || (fused ? t->ndim != 3 : t->ndim != 2)) {
            if (plan_copy(p, t))
                return -1;
            continue;
        }
        char module[NAME_CAP];
        snprintf(module, sizeof(module), "%.*s", (int)(strlen(t->name) - (fused ? 0 : strlen(".weight"))), t->name);
        if (!cat_targeted(c, o->targets)) {
            if (!fused && c != CAT_LM_HEAD && c != CAT_EMBED && json_array_append_new(p->ignored, json_string(module)))
                return hy_err_set("out of memory");
            if (plan_copy(p, t))
                return -1;
            continue;
        }
        if (!hy_dtype_is_kernel_float(t->dtype))
            return hy_err_set("tensor \"%s\" has dtype %s; quantize reads BF16, F16 or F32 weights (is the input "
                              "already quantized?)",
                              t->name, t->dtype_name);
        enum hy_qformat f = format_for(o->dtype, c);
        p->cats_quantized[f == HY_QF_MXFP4 && o->dtype == HY_QD_HYBRID] |=
            1u << (c == CAT_ROUTED_FUSED_GU || c == CAT_ROUTED_FUSED_DN ? CAT_ROUTED : c);
        if (!fused) {
            if (plan_quant(p, t, module, 0, t->shape[0], t->shape[1], f))
                return -1;
            continue;
        }
        /* fused [E, 2I, H] -> per expert gate/up; [E, H, I] -> per expert down */
        const int64_t E = t->shape[0], R = t->shape[1], C = t->shape[2];
        if (c == CAT_ROUTED_FUSED_GU && (R != 2 * I || C != H))
            return hy_err_set("tensor \"%s\" has shape [%lld, %lld, %lld]; expected [E, 2*%lld, %lld]", t->name,
                              (long long)E, (long long)R, (long long)C, (long long)I, (long long)H);
        if (c == CAT_ROUTED_FUSED_DN && (R != H || C != I))
            return hy_err_set("tensor \"%s\" has shape [%lld, %lld, %lld]; expected [E, %lld, %lld]", t->name,
                              (long long)E, (long long)R, (long long)C, (long long)H, (long long)I);
        for (int64_t e = 0; e < E; e++) {
            char m2[NAME_CAP];
            if (c == CAT_ROUTED_FUSED_GU) {
                snprintf(m2, sizeof(m2), "%.*smlp.experts.%lld.gate_proj", plen, t->name, (long long)e);
                if (plan_quant(p, t, m2, e * R * C, I, C, f))
                    return -1;
                snprintf(m2, sizeof(m2), "%.*smlp.experts.%lld.up_proj", plen, t->name, (long long)e);
                if (plan_quant(p, t, m2, e * R * C + I * C, I, C, f))
                    return -1;
            } else {
                snprintf(m2, sizeof(m2), "%.*smlp.experts.%lld.down_proj", plen, t->name, (long long)e);
                if (plan_quant(p, t, m2, e * R * C, R, C, f))
                    return -1;
            }
        }
    }
    return 0;
}

/* Names in natural order: runs of digits compare as numbers ("layers.2." before "layers.10."), the
 * rest byte by byte; equal numbers with more leading zeros come later. */
static int cmp_natural(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            const char *a0 = a, *b0 = b;
            while (*a0 == '0')
                a0++;
            while (*b0 == '0')
                b0++;
            const char *a1 = a0, *b1 = b0;
            while (isdigit((unsigned char)*a1))
                a1++;
            while (isdigit((unsigned char)*b1))
                b1++;
            if (a1 - a0 != b1 - b0)
                return a1 - a0 < b1 - b0 ? -1 : 1;
            const int c = memcmp(a0, b0, (size_t)(a1 - a0));
            if (c)
                return c;
            if (a0 - a != b0 - b)
                return a0 - a < b0 - b ? -1 : 1;
            a = a1;
            b = b1;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

/* File order: larger elements first (alignment), then by name in natural order, so that decoder layers
 * come in increasing index (GPTQ's calibration passes then move forward through the model, calib.h),
 * a matrix's MX scales right after it (".weight" < ".weight_scale") and the MTP layer (index
 * num_hidden_layers) after the main layers; creation order breaks ties. */
static int cmp_entry(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->esize != y->esize)
        return y->esize - x->esize;
    const int c = cmp_natural(x->name, y->name);
    return c ? c : x->seq - y->seq;
}

/* The last three GPTQ factors, by statistics group: gate/up share one H, and so do k/v (q/k/v without
 * the QK-norm weighting, calib.h); in file order (k, o, q, v; down, gate, up) the sharers come within
 * three matrices of each other. */
#define FACTOR_CACHE 3
struct factor_cache {
    int32_t group[FACTOR_CACHE]; /* hy_calib_get's group of each entry, -1 empty */
    struct hy_gptq_factor f[FACTOR_CACHE];
    int next;
};

static void factor_cache_init(struct factor_cache *c)
{
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < FACTOR_CACHE; i++)
        c->group[i] = -1;
}

static void factor_cache_free(struct factor_cache *c)
{
    for (int i = 0; i < FACTOR_CACHE; i++)
        hy_gptq_factor_free(&c->f[i]);
    factor_cache_init(c);
}

/* The factor of h (K wide, statistics group `group`) from c, computing it on a miss: 0 with *f, 1
 * indefinite, -1 error. Keyed by group, not by h's address: a later calibration pass may reuse it. */
static int cached_factor(struct factor_cache *c, const double *h, int32_t group, int64_t K,
                         const struct hy_gptq_opts *o, const struct hy_gptq_factor **f, int64_t *n_factors)
{
    for (int i = 0; i < FACTOR_CACHE; i++)
        if (c->group[i] == group && c->f[i].K == K) {
            *f = &c->f[i];
            return 0;
        }
    const int slot = c->next;
    hy_gptq_factor_free(&c->f[slot]);
    c->group[slot] = -1;
    const int rc = hy_gptq_factor_init(h, K, o, &c->f[slot]);
    (*n_factors)++;
    if (rc)
        return rc;
    c->group[slot] = group;
    c->next = (slot + 1) % FACTOR_CACHE;
    *f = &c->f[slot];
    return 0;
}

/* GPTQ of q into w / s when o has statistics for it: 0 done, 1 not applicable (round to nearest
 * instead), -1 error. */
static int gptq_mat(const struct qmat *q, const struct hy_quantize_opts *o, uint8_t *w, uint8_t *s,
                    struct hy_quantize_stats *st, struct factor_cache *fc)
{
    int64_t K = 0, tokens = 0;
    int32_t group = -1;
    const double *h = NULL;
    if (o->calib && !o->no_gptq && hy_calib_get(o->calib, q->module, &h, &K, &tokens, &group)) {
        hy_err_prefix("GPTQ statistics of %s", q->module);
        return -1;
    }
    struct hy_gptq_opts go = o->gptq;
    go.mx_scale = o->mx_scale;
    if (!h || o->no_gptq)
        return 1;
    if (K != q->cols)
        return hy_err_set("internal: calibration statistics of %s are %lld wide, the matrix has K = %lld", q->module,
                          (long long)K, (long long)q->cols);
    float *buf = malloc((size_t)(q->rows * q->cols) * sizeof(float));
    if (!buf)
        return hy_err_set("out of memory for %s (%lld x %lld f32)", q->module, (long long)q->rows, (long long)q->cols);
    for (int64_t r = 0; r < q->rows; r++)
        if (src_row(q, r, buf + r * q->cols)) {
            free(buf);
            return -1;
        }
    double obj[2];
    const struct hy_gptq_factor *f = NULL;
    int rc = cached_factor(fc, h, group, K, &go, &f, &st->n_gptq_factors);
    const double *g = NULL;
    int64_t group_rows = 0;
    hy_calib_get_attn(o->calib, q->module, &g, &group_rows);
    if (g && q->rows % group_rows)
        g = NULL;
    if (rc == 0 && g)
        rc = hy_gptq_quantize_coupled(buf, h, f, q->rows, g, group_rows, q->f, q->scale, &go, w, s, obj);
    else if (rc == 0)
        rc = hy_gptq_quantize_factored(buf, h, f, q->rows, q->f, q->scale, &go, w, s, obj);
    st->n_gptq_coupled += rc == 0 && g;
    free(buf);
    if (rc == 0) {
        st->n_gptq++;
        st->gptq_ratio_sum += obj[0] > 0.0 ? obj[1] / obj[0] : 1.0;
        st->n_gptq_few_tokens += tokens < K;
    } else if (rc == 1) {
        st->n_gptq_indefinite++;
        hy_log_warn("quantize: %s: the calibration Hessian stayed indefinite after dampening; round-to-nearest",
                    q->module);
    }
    return rc;
}

/* Scale bytes per row the rounding writes (gptq.h): fp8 none (one per tensor), MX one per block, int8
 * one f32 (equal to q->row_scales, which the file takes). */
static int64_t scale_bytes(const struct qmat *q)
{
    if (q->f == HY_QF_FP8_TENSOR)
        return 0;
    if (hy_qformat_is_int8(q->f))
        return (int64_t)sizeof(float);
    return (q->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK;
}

/* Quantizes q into w (weight bytes) and s (scale bytes): GPTQ when o has statistics for it, else
 * round-to-nearest. */
static int quantize_mat(const struct qmat *q, const struct hy_quantize_opts *o, uint8_t *w, uint8_t *s,
                        struct hy_quantize_stats *st, struct factor_cache *fc)
{
    const int64_t indef = st->n_gptq_indefinite;
    const int g = gptq_mat(q, o, w, s, st, fc);
    if (g <= 0)
        return g;
    if (o->calib && !o->no_gptq && st->n_gptq_indefinite == indef)
        st->n_gptq_rtn++;
    const int64_t rb = q->f == HY_QF_MXFP4 ? q->cols / 2 : q->cols, nb = scale_bytes(q);
    int bad = 0;
    char msg[512] = "";
#pragma omp parallel
    {
        float *buf = malloc((size_t)q->cols * sizeof(float));
        if (!buf) {
#pragma omp atomic write
            bad = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < q->rows; r++) {
            int b;
#pragma omp atomic read
            b = bad;
            if (b || !buf)
                continue;
            if (src_row(q, r, buf)) {
#pragma omp critical
                {
                    if (!bad)
                        snprintf(msg, sizeof(msg), "%s", hy_err_msg());
                    bad = 2;
                }
                continue;
            }
            hy_quant_row_rtn(buf, q->cols, q->f, q->scale, o->mx_scale, w + r * rb,
                             q->f == HY_QF_FP8_TENSOR ? NULL : s + r * nb);
        }
        free(buf);
    }
    if (bad == 2)
        return hy_err_set("%s", msg);
    if (bad)
        return hy_err_set("out of memory");
    return 0;
}

static int write_all(FILE *f, const void *p, size_t n, const char *path)
{
    if (n && fwrite(p, 1, n, f) != n)
        return hy_err_set("%s: write failed: %s", path, strerror(errno));
    return 0;
}

/* Static W8A8: the sum of each row's int8 codes (for quant_bias, written after every weight). */
static int keep_row_sums(struct qmat *q, const uint8_t *codes)
{
    if (!(q->row_sums = malloc((size_t)q->rows * sizeof(int32_t) + 1)))
        return hy_err_set("out of memory");
    for (int64_t r = 0; r < q->rows; r++) {
        int64_t sum = 0;
        for (int64_t k = 0; k < q->cols; k++)
            sum += (int8_t)codes[r * q->cols + k];
        q->row_sums[r] = (int32_t)sum;
    }
    return 0;
}

/* One static W8A8 tensor (e->role R_IN_SCALE ... R_QUANT_BIAS) of e->q, little-endian (x86-64). */
static int write_static(FILE *f, const struct entry *e, const char *path)
{
    const struct qmat *q = e->q;
    if (e->role == R_IN_SCALE || e->role == R_IN_OFFSET)
        return write_all(f, e->role == R_IN_SCALE ? &q->in_scale : &q->in_offset, 4, path);
    if (e->role == R_QUANT_BIAS && !q->row_sums)
        return hy_err_set("internal: quant_bias of %s written before its weight", q->module);
    for (int64_t r = 0; r < q->rows; r++) {
        /* -o * sum fits int32: |o| <= 128, |sum| <= 127 K */
        const int32_t b = e->role == R_QUANT_BIAS ? (int32_t)(-(int64_t)q->in_offset * q->row_sums[r]) : 0;
        const float d = q->in_scale * q->row_scales[r];
        if (write_all(f, e->role == R_QUANT_BIAS ? (const void *)&b : (const void *)&d, 4, path))
            return -1;
    }
    return 0;
}

static int write_safetensors(const char *path, struct plan *p, const struct hy_quantize_opts *qo,
                             struct hy_quantize_stats *st)
{
    qsort(p->e, p->n, sizeof(*p->e), cmp_entry);
    json_t *h = json_object();
    json_t *meta = json_object();
    if (!h || !meta)
        return hy_err_set("out of memory");
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(h, "__metadata__", meta);
    uint64_t off = 0;
    for (size_t i = 0; i < p->n; i++) {
        struct entry *e = &p->e[i];
        json_t *shape = json_array(), *o = json_object(), *offs = json_array();
        for (int d = 0; d < e->ndim; d++)
            json_array_append_new(shape, json_integer(e->shape[d]));
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_array_append_new(offs, json_integer((json_int_t)(off + e->nbytes)));
        json_object_set_new(o, "dtype", json_string(e->dtype));
        json_object_set_new(o, "shape", shape);
        json_object_set_new(o, "data_offsets", offs);
        if (json_object_get(h, e->name)) {
            json_decref(o);
            json_decref(h);
            return hy_err_set("output tensor \"%s\" would be written twice (input has both fused and per-expert "
                              "spellings?)",
                              e->name);
        }
        json_object_set_new(h, e->name, o);
        off += e->nbytes;
    }
    char *hs = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    if (!hs)
        return hy_err_set("out of memory");
    size_t hl = strlen(hs), pad = (8 - hl % 8) % 8;
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(hs);
        return hy_err_set("%s: cannot create: %s", path, strerror(errno));
    }
    setvbuf(f, NULL, _IOFBF, 1 << 22);
    uint64_t hlen = hl + pad;
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(hlen >> (8 * i));
    int rc = write_all(f, le, 8, path) || write_all(f, hs, hl, path) || write_all(f, "        ", pad, path);
    free(hs);
    uint8_t *wbuf = NULL, *sbuf = NULL;
    const struct qmat *have = NULL; /* q whose scales are in sbuf */
    struct factor_cache fc;
    factor_cache_init(&fc);
    if (!rc && qo->calib) { /* calibration passes in the order the matrices are written */
        const char **order = malloc((p->n ? p->n : 1) * sizeof(*order));
        int32_t n = 0;
        if (!order)
            rc = hy_err_set("out of memory");
        for (size_t i = 0; order && i < p->n; i++)
            if (p->e[i].role == R_QWEIGHT)
                order[n++] = p->e[i].q->module;
        if (order && hy_calib_plan(qo->calib, order, n))
            rc = -1;
        free(order);
    }
    struct hy_progress prog; /* on a terminal: output bytes written, the tensor at work */
    hy_progress_begin(&prog, "quantize", (int64_t)off, HY_PROGRESS_BYTES);
    for (size_t i = 0; !rc && i < p->n; i++) {
        struct entry *e = &p->e[i];
        hy_progress_add(&prog, i ? (int64_t)p->e[i - 1].nbytes : 0); /* the one before is written */
        hy_progress_label(&prog, e->name);
        if (e->role == R_COPY) {
            for (uint64_t o = 0; !rc && o < e->nbytes; o += (64u << 20)) { /* 64 MiB at a time */
                const uint64_t n = e->nbytes - o < (64u << 20) ? e->nbytes - o : (64u << 20);
                rc = write_all(f, (const char *)e->src->data + o, n, path);
                drop_pages((const char *)e->src->data + o, n);
            }
        } else if (e->role == R_QSCALE_FP8) {
            rc = write_all(f, &e->q->scale, 4, path); /* little-endian host (x86-64) */
        } else if (e->role == R_QSCALE_ROWS) {
            rc = write_all(f, e->q->row_scales, e->nbytes, path);
        } else if (e->role >= R_IN_SCALE) {
            rc = write_static(f, e, path);
        } else if (e->role == R_ZEROS) {
            static const uint8_t zeros[4096];
            for (uint64_t o = 0; !rc && o < e->nbytes; o += sizeof(zeros))
                rc = write_all(f, zeros, e->nbytes - o < sizeof(zeros) ? e->nbytes - o : sizeof(zeros), path);
        } else if (e->role == R_QWEIGHT) {
            struct qmat *q = e->q;
            const uint64_t ns = (uint64_t)(q->rows * scale_bytes(q));
            free(wbuf);
            free(sbuf);
            wbuf = malloc(e->nbytes ? e->nbytes : 1);
            sbuf = malloc(ns ? ns : 1);
            if (!wbuf || !sbuf) {
                rc = hy_err_set("out of memory");
                break;
            }
            rc = quantize_mat(q, qo, wbuf, sbuf, st, &fc) || write_all(f, wbuf, e->nbytes, path) ||
                 (q->f == HY_QF_W8A8_STATIC && keep_row_sums(q, wbuf));
            drop_src(q);
            have = q;
        } else { /* R_QSCALE_MX: follows its weight (stable sort, same size class) */
            if (have != e->q) {
                rc = hy_err_set("internal: scale of %s written before its weight", e->q->module);
                break;
            }
            rc = write_all(f, sbuf, e->nbytes, path);
        }
    }
    hy_progress_end(&prog);
    free(wbuf);
    free(sbuf);
    factor_cache_free(&fc);
    if (fclose(f) && !rc)
        rc = hy_err_set("%s: close failed: %s", path, strerror(errno));
    st->bytes_out = 8 + hlen + off;
    return rc ? -1 : 0;
}

/* ---- config.json --------------------------------------------------------------------------- */

static json_t *mx_args(int bits, int dynamic)
{
    return json_pack("{s:s, s:i, s:s, s:i, s:b, s:b}", "type", "float", "num_bits", bits, "strategy", "group",
                     "group_size", HY_MX_BLOCK, "symmetric", 1, "dynamic", dynamic);
}

/* Regex targets of the categories in mask. */
static json_t *targets_for(unsigned mask)
{
    json_t *t = json_array();
    if (mask & (1u << CAT_ATTN)) {
        json_array_append_new(t, json_string("re:.*\\.self_attn\\.(q|k|v|o)_proj$"));
        json_array_append_new(t, json_string("re:.*\\.eh_proj$"));
        json_array_append_new(t,
                              json_string("re:.*\\.self_attn\\.(q_a_proj|q_b_proj|kv_a_proj_with_mqa|linear_gate)$"));
    }
    if (mask & (1u << CAT_MLP))
        json_array_append_new(t, json_string("re:.*\\.layers\\.\\d+\\.mlp\\.(gate|up|down)_proj$"));
    if (mask & (1u << CAT_ROUTED))
        json_array_append_new(t, json_string("re:.*\\.mlp\\.experts\\.\\d+\\.(gate|up|down)_proj$"));
    if (mask & (1u << CAT_SHARED))
        json_array_append_new(t, json_string("re:.*\\.mlp\\.(shared_mlp|shared_experts)\\.(gate|up|down)_proj$"));
    if (mask & (1u << CAT_LM_HEAD))
        json_array_append_new(t, json_string("lm_head"));
    if (mask & (1u << CAT_EMBED))
        json_array_append_new(t, json_string("model.embed_tokens"));
    return t;
}

static json_t *make_qconfig(const struct hy_quantize_opts *o, struct plan *p)
{
    const unsigned all = p->cats_quantized[0] | p->cats_quantized[1];
    /* lm_head is named in the ignore list unless quantized (tied: it is the embedding) */
    const int lm_plain = !(all & (1u << (p->tied ? CAT_EMBED : CAT_LM_HEAD)));
    if (o->dtype == HY_QD_FP8) {
        json_t *ign = json_array();
        if (lm_plain)
            json_array_append_new(ign, json_string("lm_head"));
        if (!(all & (1u << CAT_EMBED)))
            json_array_append_new(ign, json_string("model.embed_tokens"));
        json_array_extend(ign, p->ignored);
        return json_pack("{s:s, s:s, s:o}", "quant_method", "fp8", "activation_scheme", "dynamic", "ignored_layers",
                         ign);
    }
    json_t *groups = json_object();
    int gi = 0;
    for (int k = 1; k >= 0; k--) { /* the mxfp4 group (hybrid's routed experts) first */
        unsigned mask = p->cats_quantized[k];
        if (!mask)
            continue;
        const int bits = (k == 1 || o->dtype == HY_QD_MXFP4) ? 4 : 8;
        char name[16];
        snprintf(name, sizeof(name), "group_%d", gi++);
        json_object_set_new(groups, name,
                            json_pack("{s:o, s:o, s:o}", "targets", targets_for(mask), "weights", mx_args(bits, 0),
                                      "input_activations", mx_args(8, 1)));
    }
    json_t *ign = json_array();
    if (lm_plain)
        json_array_append_new(ign, json_string("lm_head"));
    return json_pack("{s:s, s:s, s:s, s:o, s:o}", "quant_method", "compressed-tensors", "format", "float-quantized",
                     "quantization_status", "compressed", "config_groups", groups, "ignore", ign);
}

/* ---- files ----------------------------------------------------------------------------------- */

#define ASCEND_SHARD "quant_model_weights-00001-of-00001.safetensors"

/* msModelSlim V1's side files next to the shard: the index and quant_model_description.json. */
static int write_ascend_files(const char *dir, const struct plan *p, uint64_t total, enum hy_quant_dtype dtype)
{
    json_t *wm = json_object(), *desc = json_object();
    if (!wm || !desc) {
        json_decref(wm);
        json_decref(desc);
        return hy_err_set("out of memory");
    }
    /* w8a8-mix: "W8A8_DYNAMIC", as msModelSlim's DeepSeek mixed script writes it */
    json_object_set_new(desc, "model_quant_type", json_string(dtype == HY_QD_W8A8 ? "W8A8" : "W8A8_DYNAMIC"));
    json_object_set_new(desc, "version", json_string("1.0.0"));
    json_object_set_new(desc, "group_size", json_integer(0));
    for (size_t i = 0; i < p->n; i++) {
        json_object_set_new(wm, p->e[i].name, json_string(ASCEND_SHARD));
        const struct entry *e = &p->e[i];
        json_object_set_new(desc, e->name,
                            json_string(e->role == R_COPY              ? "FLOAT"
                                        : e->q->f == HY_QF_W8A8_STATIC ? "W8A8"
                                                                       : "W8A8_DYNAMIC"));
    }
    json_t *index = json_pack("{s:{s:I}, s:o}", "metadata", "total_size", (json_int_t)total, "weight_map", wm);
    char *ip = hy_path_join(dir, "quant_model_weights.safetensors.index.json"),
         *dp = hy_path_join(dir, HY_ASCEND_DESCRIPTION);
    int rc = 0;
    if (!index || !ip || !dp || json_dump_file(index, ip, JSON_INDENT(2)) || json_dump_file(desc, dp, JSON_INDENT(2)))
        rc = hy_err_set("%s: cannot write the index / %s", dir, HY_ASCEND_DESCRIPTION);
    json_decref(index);
    json_decref(desc);
    free(ip);
    free(dp);
    return rc;
}

int hy_quantize_model(const char *in_dir, const char *out_dir, const struct hy_quantize_opts *o,
                      struct hy_quantize_stats *st)
{
    const double t0 = hy_time_now();
    memset(st, 0, sizeof(*st));
    if (!o->targets)
        return hy_err_set("no --quant-target given");
    int out_exists;
    if (hy_quantize_check_out_dir(out_dir, &out_exists))
        return -1;
    struct hy_model_config cfg;
    if (hy_model_config_load(in_dir, &cfg) || hy_quantize_check_out_not_in(in_dir, out_dir))
        return -1;
    char *cfg_path = hy_path_join(in_dir, "config.json");
    json_error_t je;
    json_t *root = cfg_path ? json_load_file(cfg_path, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (!root) {
        int r = hy_err_set("%s: cannot read: %s", cfg_path ? cfg_path : in_dir, cfg_path ? je.text : "out of memory");
        free(cfg_path);
        return r;
    }
    struct hy_checkpoint ck;
    memset(&ck, 0, sizeof(ck));
    struct plan p;
    memset(&p, 0, sizeof(p));
    char *tmp = NULL, *path = NULL;
    int rc = -1, made_tmp = 0;
    if (json_object_get(root, "quantization_config")) {
        hy_err_set("%s already has a quantization_config: quantize reads an unquantized (BF16/F16/F32) checkpoint",
                   cfg_path);
        goto out;
    }
    if (hy_checkpoint_open(in_dir, &ck))
        goto out;
    st->bytes_in = ck.total_bytes;
    if (!(p.ignored = json_array())) {
        hy_err_set("out of memory");
        goto out;
    }
    const int ascend = o->dtype == HY_QD_W8A8_DYN || o->dtype == HY_QD_W8A8 || o->dtype == HY_QD_W8A8_MIX;
    if (o->dtype == HY_QD_W8A8 || o->dtype == HY_QD_W8A8_MIX) { /* activation ranges first (calib.h) */
        if (!o->calib) {
            hy_err_set("--quant-dtype %s needs --calib-data: static W8A8 takes each linear's activation scale and "
                       "offset from the range of its inputs over calibration text",
                       o->dtype == HY_QD_W8A8 ? "w8a8" : "w8a8-mix");
            goto out;
        }
        if (hy_calib_ranges(o->calib)) {
            hy_err_prefix("activation ranges");
            goto out;
        }
        p.calib = o->calib;
    }
    if (build_plan(&ck, &cfg, o, &p))
        goto out;
    st->n_static_no_range = p.no_range;
    for (size_t i = 0; i < p.nq; i++)
        st->n_quant[p.q[i]->f]++;
    for (size_t i = 0; i < p.n; i++)
        st->n_copied += p.e[i].role == R_COPY;
    size_t tl = strlen(out_dir) + 32;
    tmp = malloc(tl);
    if (!tmp) {
        hy_err_set("out of memory");
        goto out;
    }
    {
        size_t ol = strlen(out_dir);
        while (ol > 1 && out_dir[ol - 1] == '/')
            ol--;
        snprintf(tmp, tl, "%.*s.tmp-%ld", (int)ol, out_dir, (long)getpid());
    }
    if (mkdir(tmp, 0755) != 0) {
        hy_err_set("%s: cannot create the temporary output directory: %s", tmp, strerror(errno));
        goto out;
    }
    made_tmp = 1;
    path = hy_path_join(tmp, ascend ? ASCEND_SHARD : "model.safetensors");
    if (!path || write_safetensors(path, &p, o, st) || (ascend && write_ascend_files(tmp, &p, st->bytes_out, o->dtype)))
        goto out;
    free(path);
    path = hy_path_join(tmp, "config.json");
    json_t *qc = ascend ? NULL : make_qconfig(o, &p); /* the V1 saver leaves config.json without one */
    if (!path || (!ascend && (!qc || json_object_set_new(root, "quantization_config", qc))) ||
        json_dump_file(root, path, JSON_INDENT(2)) != 0) {
        hy_err_set("%s: cannot write", path ? path : "config.json");
        goto out;
    }
    if (hy_quantize_copy_other_files(in_dir, tmp, &st->n_files))
        goto out;
    if (out_exists && rmdir(out_dir) != 0) {
        hy_err_set("%s: cannot replace the empty directory: %s", out_dir, strerror(errno));
        goto out;
    }
    if (rename(tmp, out_dir) != 0) {
        hy_err_set("cannot rename %s to %s: %s", tmp, out_dir, strerror(errno));
        goto out;
    }
    made_tmp = 0;
    rc = 0;
    st->seconds = hy_time_now() - t0;
out:
    if (made_tmp)
        hy_quantize_remove_tmp(tmp);
    for (size_t i = 0; i < p.nq; i++) {
        free(p.q[i]->row_scales);
        free(p.q[i]->row_sums);
        free(p.q[i]);
    }
    free(p.q);
    free(p.e);
    json_decref(p.ignored);
    json_decref(root);
    hy_checkpoint_close(&ck);
    free(cfg_path);
    free(tmp);
    free(path);
    return rc;
}
