/* calib.c - GPTQ calibration statistics from the forward pass (conventions: calib.h). */
#include "quantize/calib.h"

#include "base/err.h"
#include "base/timing.h"
#include "cache/kv_cache.h"
#include "kernels/kernel_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Queries per calibration window that q_proj's attention statistics sample (hy_calib_attn_g_add's stride
 * seq_len / ATTN_QUERIES): hy3-tiny fp8, whole tail, C = 192: 8 per window 0.9826 / KL 0.00127, 32 per
 * window 0.9824 / 0.00120 (64 windows). */
#define ATTN_QUERIES 16
#define RANGE_PASS (-2) /* run_pass of hy_calib_ranges */

/* Growing arrays of the set-up pass. */
struct builder {
    struct hy_calib *c;
    int32_t cap_acc, cap_names;
    const char *mtp_prefix; /* the MTP layer's name prefix when not model.layers.<n_main>. */
    int32_t n_main;         /* num_hidden_layers */
};

/* Room for one more element in *arr (n used, *cap allocated, es bytes each): 0, or -1 out of memory. */
static int reserve(void **arr, int32_t n, int32_t *cap, size_t es)
{
    if (n < *cap)
        return 0;
    const int32_t nc = *cap ? 2 * *cap : 64;
    void *na = realloc(*arr, (size_t)nc * es);
    if (!na)
        return -1;
    *arr = na;
    *cap = nc;
    return 0;
}

static int new_acc(struct builder *b, const struct hy_tensor *w, int L)
{
    struct hy_calib *c = b->c;
    if (reserve((void **)&c->acc, c->n_acc, &b->cap_acc, sizeof(*c->acc)))
        return -1;
    c->acc[c->n_acc] = (struct hy_calib_acc){.w = w, .K = w->cols, .pass = -1, .layer = L};
    return c->n_acc++;
}

static int add_name(struct builder *b, int acc, const char *fmt, int L, int e, const char *leaf)
{
    struct hy_calib *c = b->c;
    if (reserve((void **)&c->names, c->n_names, &b->cap_names, sizeof(*c->names)))
        return -1;
    struct hy_calib_name *n = &c->names[c->n_names++];
    char mid[64];
    snprintf(mid, sizeof(mid), fmt, e);
    if (b->mtp_prefix && L == b->n_main) /* hy_v4 names its MTP layer model.mtp_layers.0 */
        snprintf(n->module, sizeof(n->module), "%s%s%s", b->mtp_prefix, mid, leaf);
    else
        snprintf(n->module, sizeof(n->module), "model.layers.%d.%s%s", L, mid, leaf);
    n->acc = acc;
    return 0;
}

/* gate/up (shared input) and down of one SwiGLU MLP; prefix like "mlp." or "mlp.experts.%d."; routed: a
 * routed expert's groups, their tokens weighted by the squared routing weight. */
static int add_mlp(struct builder *b, const struct hy_expert *x, int L, const char *prefix, int e, int routed)
{
    if (!x->gate.data || x->gate.rows == 0)
        return 0;
    const int gu = new_acc(b, &x->gate, L);
    if (gu < 0 || add_name(b, gu, prefix, L, e, "gate_proj") || add_name(b, gu, prefix, L, e, "up_proj"))
        return -1;
    const int dn = new_acc(b, &x->down, L);
    if (dn < 0 || add_name(b, dn, prefix, L, e, "down_proj"))
        return -1;
    b->c->acc[gu].routed = b->c->acc[dn].routed = routed;
    return 0;
}

/* Hy3's attention linears: q/k/v share their input; with split (HY_CALIB_QK_NORM in a QK-norm layer)
 * q_proj takes its own, weighted group (observed through wq) and k/v_proj one observed through wk. */
static int add_gqa(struct builder *b, const struct hy_layer *ly, int L, int split, int n_heads)
{
    const int qkv = new_acc(b, split ? &ly->wk : &ly->wq, L), q = !split || qkv < 0 ? qkv : new_acc(b, &ly->wq, L);
    const int o = q < 0 ? -1 : new_acc(b, &ly->wo, L);
    if (o < 0 || add_name(b, q, "self_attn.", L, 0, "q_proj") || add_name(b, qkv, "self_attn.", L, 0, "k_proj") ||
        add_name(b, qkv, "self_attn.", L, 0, "v_proj") || add_name(b, o, "self_attn.", L, 0, "o_proj"))
        return -1;
    if (split)
        b->c->acc[q].qk_heads = n_heads;
    return 0;
}

/* hy_v4's attention linears (hy_v4.c): q_a_proj, kv_a_proj_with_mqa and linear_gate read the
 * attention input (one group, observed through q_a), q_b_proj the normed q latent, o_proj the heads'
 * output; the indexer, kv_b_proj and the sinks are never quantized. */
static int add_mla(struct builder *b, const struct hy_layer *ly, int L)
{
    if (!ly->q_a.data)
        return 0;
    const int in = new_acc(b, &ly->q_a, L), qb = in < 0 ? -1 : new_acc(b, &ly->q_b, L),
              o = qb < 0 ? -1 : new_acc(b, &ly->wo, L);
    return o < 0 || add_name(b, in, "self_attn.", L, 0, "q_a_proj") ||
                   add_name(b, in, "self_attn.", L, 0, "kv_a_proj_with_mqa") ||
                   (ly->attn_gate.data && add_name(b, in, "self_attn.", L, 0, "linear_gate")) ||
                   add_name(b, qb, "self_attn.", L, 0, "q_b_proj") || add_name(b, o, "self_attn.", L, 0, "o_proj")
               ? -1
               : 0;
}

static int cmp_acc(const void *a, const void *b)
{
    const uintptr_t x = (uintptr_t)((const struct hy_calib_acc *)a)->w,
                    y = (uintptr_t)((const struct hy_calib_acc *)b)->w;
    return x < y ? -1 : x > y;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct hy_calib_name *)a)->module, ((const struct hy_calib_name *)b)->module);
}

static struct hy_calib_acc *find_acc(const struct hy_calib *c, const char *module);

int hy_calib_init(struct hy_calib *c, const struct hy_model *m, uint64_t max_bytes, unsigned weighting)
{
    memset(c, 0, sizeof(*c));
    c->cur_pass = -1;
    c->resid_layer = -1;
    const int v4 = m->cfg.arch == HY_ARCH_HY_V4;
    struct builder b = {.c = c, .mtp_prefix = v4 ? "model.mtp_layers.0." : NULL, .n_main = m->cfg.num_hidden_layers};
    const int n_layers = m->cfg.num_hidden_layers + (m->has_mtp ? 1 : 0);
    for (int L = 0; L < n_layers; L++) {
        const struct hy_layer *ly = &m->layers[L];
        if (v4 ? add_mla(&b, ly, L)
               : add_gqa(&b, ly, L, (weighting & HY_CALIB_QK_NORM) && ly->q_norm, m->cfg.num_attention_heads))
            goto oom;
        if (ly->eh_proj.data) {
            const int eh = new_acc(&b, &ly->eh_proj, L);
            if (eh < 0 || add_name(&b, eh, "", L, 0, "eh_proj"))
                goto oom;
        }
        if (!ly->is_moe) {
            if (add_mlp(&b, &ly->mlp, L, "mlp.", 0, 0))
                goto oom;
            continue;
        }
        for (int e = 0; e < m->cfg.num_experts; e++)
            if (add_mlp(&b, &ly->experts[e], L, "mlp.experts.%d.", e, !!(weighting & HY_CALIB_ROUTING)))
                goto oom;
        if (add_mlp(&b, &ly->shared, L, "mlp.shared_mlp.", 0, 0))
            goto oom;
    }
    /* the observer's lookup is by weight pointer, the quantizer's by module name: sort both, keeping
     * the name -> accumulator links through the pointer */
    const struct hy_tensor **wof = malloc((size_t)c->n_names * sizeof(*wof) + 1);
    if (!wof)
        goto oom;
    for (int32_t i = 0; i < c->n_names; i++)
        wof[i] = c->acc[c->names[i].acc].w;
    qsort(c->acc, (size_t)c->n_acc, sizeof(*c->acc), cmp_acc);
    for (int32_t i = 0; i < c->n_names; i++) {
        const struct hy_calib_acc key = {.w = wof[i]};
        const struct hy_calib_acc *a = bsearch(&key, c->acc, (size_t)c->n_acc, sizeof(*c->acc), cmp_acc);
        c->names[i].acc = (int32_t)(a - c->acc);
    }
    free(wof);
    qsort(c->names, (size_t)c->n_names, sizeof(*c->names), cmp_name);
    c->max_bytes = max_bytes;
    c->stash_layer = -1;
    if (weighting & HY_CALIB_ATTN) {
        if (!(c->attn = calloc((size_t)n_layers, sizeof(*c->attn))))
            goto oom;
        c->n_attn = n_layers;
        for (int L = 0; L < n_layers; L++) {
            char name[96];
            snprintf(name, sizeof(name), "model.layers.%d.self_attn.q_proj", L);
            const struct hy_calib_acc *a = find_acc(c, name);
            c->attn[L] = (struct hy_calib_attn_stat){
                .wq = &m->layers[L].wq, .wk = &m->layers[L].wk, .acc = a ? (int32_t)(a - c->acc) : -1};
        }
    }
    return 0;
oom:
    hy_calib_free(c);
    return hy_err_set("GPTQ calibration: out of memory");
}

static uint64_t acc_bytes(const struct hy_calib_acc *a)
{
    return (uint64_t)(a->K * a->K) * sizeof(double);
}

void hy_calib_qk_weights(const float *q, int64_t T, int64_t n_heads, int64_t head_dim, float eps, double *w)
{
    for (int64_t t = 0; t < T; t++) {
        double acc = 0.0;
        for (int64_t h = 0; h < n_heads; h++) {
            const float *qh = q + (t * n_heads + h) * head_dim;
            double ss = 0.0;
            for (int64_t d = 0; d < head_dim; d++)
                ss += (double)qh[d] * qh[d];
            acc += 1.0 / (ss / (double)head_dim + (double)eps);
        }
        w[t] = acc / (double)n_heads;
    }
}

void hy_calib_routing_weights(const float *route_w, int64_t T, double *w)
{
    for (int64_t t = 0; t < T; t++)
        w[t] = (double)route_w[t] * (double)route_w[t];
}

void hy_calib_weighted_gram_add(double *g, int64_t K, const float *x, int64_t T, const double *w, float *xs,
                                double *pack)
{
    for (int64_t t = 0; t < T; t++) {
        const double r = sqrt(w[t]);
        for (int64_t i = 0; i < K; i++)
            xs[t * K + i] = (float)(r * x[t * K + i]);
    }
    hy_calib_gram_add(g, K, xs, T, pack);
}

/* The routing weights of the routed expert whose linears are observed next (model.h observe_route). */
static void observe_route(void *ctx, const float *w, int64_t n)
{
    struct hy_calib *c = ctx;
    c->route_w = w;
    c->route_n = n;
}

/* hy_calib_ranges' observer: W's group's input range widened by x [T, K]. */
static void observe_range(struct hy_calib *c, const struct hy_tensor *W, const float *x, int64_t T)
{
    const struct hy_calib_acc key = {.w = W};
    struct hy_calib_acc *a = bsearch(&key, c->acc, (size_t)c->n_acc, sizeof(*c->acc), cmp_acc);
    if (!a || T <= 0)
        return;
    float lo = a->range_rows ? a->x_min : x[0], hi = a->range_rows ? a->x_max : x[0];
    for (int64_t i = 0; i < T * a->K; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    a->x_min = lo;
    a->x_max = hi;
    a->range_rows += T;
}

/* The observer: the resident accumulator of W (if any) += x^T x (lower triangle; mirrored when the
 * run ends); a q_proj group's rows weighted by hy_calib_qk_weights of y = W x (W is q_proj itself), a
 * routed expert's by its squared routing weights. */
static void observe(void *ctx, const struct hy_tensor *W, const float *x, const float *y, int64_t T)
{
    struct hy_calib *c = ctx;
    if (c->ranges) {
        observe_range(c, W, x, T);
        return;
    }
    for (int32_t L = 0; L < c->n_attn && T > 0; L++) { /* q_proj's output kept until k_proj's comes */
        struct hy_calib_attn_stat *s = &c->attn[L];
        if (!s->g || (W != s->wq && W != s->wk))
            continue;
        if (W == s->wq && T <= c->seq_len) {
            memcpy(c->q_stash, y, (size_t)(T * W->rows) * sizeof(float));
            c->stash_layer = L;
            c->stash_T = T;
        } else if (W == s->wk && c->stash_layer == L && c->stash_T == T) {
            const struct hy_model_config *mc = &c->m->cfg;
            const struct hy_layer *ly = &c->m->layers[L];
            const struct hy_calib_attn_shape sh = {
                mc->num_attention_heads,        mc->num_key_value_heads, mc->head_dim,   ly->q_norm,
                ly->q_norm ? ly->k_norm : NULL, mc->rms_norm_eps,        c->m->inv_freq, mc->rope_interleaved};
            if (hy_calib_attn_g_add(s->g, c->q_stash, y, T, &sh, c->attn_stride) == 0)
                s->windows++;
            else /* G unchanged; run_pass fails the pass with this error after the window */
                c->obs_failed = 1;
            c->stash_layer = -1;
        }
        break;
    }
    const struct hy_calib_acc key = {.w = W};
    struct hy_calib_acc *a = bsearch(&key, c->acc, (size_t)c->n_acc, sizeof(*c->acc), cmp_acc);
    if (!a || !a->g || T <= 0) /* not a quantizable linear, or not in the resident pass */
        return;
    /* run_pass sized wt_buf for seq_len tokens; T <= seq_len (MTP: one fewer; an expert: its share) */
    double *w = c->wt_buf;
    float *xs = (float *)(w + c->seq_len);
    if (a->qk_heads > 0) {
        hy_calib_qk_weights(y, T, a->qk_heads, W->rows / a->qk_heads, c->m->cfg.rms_norm_eps, w);
        hy_calib_weighted_gram_add(a->g, a->K, x, T, w, xs, c->pack);
    } else if (a->routed && c->route_w && c->route_n == T) {
        hy_calib_routing_weights(c->route_w, T, w);
        hy_calib_weighted_gram_add(a->g, a->K, x, T, w, xs, c->pack);
    } else {
        hy_calib_gram_add(a->g, a->K, x, T, c->pack);
    }
    a->n += T;
}

int hy_calib_bind(struct hy_calib *c, struct hy_model *m, const int32_t *ids, int64_t n_ids, int32_t bos,
                  int32_t samples, int32_t seq_len)
{
    const int32_t V = m->cfg.vocab_size;
    if (seq_len < 2 || seq_len > m->cfg.max_position_embeddings)
        return hy_err_set("calibration sequence length %d: must be in [2, %d] (max_position_embeddings)", seq_len,
                          m->cfg.max_position_embeddings);
    if (samples < 1)
        return hy_err_set("calibration samples %d: must be >= 1", samples);
    const int64_t per = bos >= 0 ? seq_len - 1 : seq_len;
    if (n_ids < per)
        return hy_err_set("calibration text has %lld tokens; one window of %d needs %lld", (long long)n_ids, seq_len,
                          (long long)per);
    for (int64_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return hy_err_set("calibration token %lld has id %d, outside the vocabulary [0, %d)", (long long)i, ids[i],
                              V);
    if ((int64_t)samples > n_ids / per)
        samples = (int32_t)(n_ids / per);
    const int64_t used = (int64_t)samples * per;
    free(c->ids);
    c->ids = malloc((size_t)used * sizeof(int32_t));
    if (!c->ids)
        return hy_err_set("calibration: out of memory for %lld token ids", (long long)used);
    memcpy(c->ids, ids, (size_t)used * sizeof(int32_t));
    c->m = m;
    c->bos = bos;
    c->samples = samples;
    c->seq_len = seq_len;
    return 0;
}

/* The module name's accumulator, or NULL (`shared_experts` is read as `shared_mlp`). */
static struct hy_calib_acc *find_acc(const struct hy_calib *c, const char *module)
{
    char canon[96];
    const char *alt = strstr(module, ".shared_experts.");
    if (alt && snprintf(canon, sizeof(canon), "%.*s.shared_mlp.%s", (int)(alt - module), module,
                        alt + strlen(".shared_experts.")) < (int)sizeof(canon))
        module = canon;
    struct hy_calib_name key;
    if (snprintf(key.module, sizeof(key.module), "%s", module) >= (int)sizeof(key.module))
        return NULL;
    const struct hy_calib_name *n = bsearch(&key, c->names, (size_t)c->n_names, sizeof(*c->names), cmp_name);
    return n ? &c->acc[n->acc] : NULL;
}

int hy_calib_plan(struct hy_calib *c, const char *const *modules, int32_t n)
{
    /* A pass may only end where no group of it is asked for again later (file order asks for q/k/v
     * around o_proj: k, o, q, v), else the next request would run the finished pass again. So the
     * requests are cut into clusters, runs [i, end] that no group's requests cross, and whole clusters
     * go into passes. */
    int32_t *last = malloc(((size_t)c->n_acc + 1) * sizeof(int32_t));
    if (!last)
        return hy_err_set("GPTQ calibration: out of memory");
    for (int32_t i = 0; i < c->n_acc; i++) {
        c->acc[i].pass = -1;
        last[i] = -1;
    }
    for (int32_t i = 0; i < n; i++) {
        const struct hy_calib_acc *a = find_acc(c, modules[i]);
        if (a)
            last[a - c->acc] = i;
    }
    uint64_t cur = 0;
    int rc = 0;
    c->n_passes = 0;
    c->pass_bytes_max = 0;
    c->planned = 0;
    c->planned_bytes = 0;
    for (int32_t i = 0; i < n && !rc;) {
        /* the cluster starting at i: its groups not yet planned, and their bytes */
        int32_t end = i;
        uint64_t bytes = 0;
        for (int32_t j = i; j <= end; j++) {
            const struct hy_calib_acc *a = find_acc(c, modules[j]);
            if (!a || a->pass >= 0)
                continue;
            if (last[a - c->acc] > end)
                end = last[a - c->acc];
            if (last[a - c->acc] >= 0) { /* first time seen in this cluster: counted once */
                bytes += acc_bytes(a);
                last[a - c->acc] = -1 - last[a - c->acc];
            }
        }
        if (bytes > c->max_bytes) {
            rc = hy_err_set("GPTQ calibration needs %.3g GiB at once for the input statistics of %s%s%s (K x K f64 "
                            "per input group), more than the %.3g GiB allowed (--calib-memory-gib; default: half of "
                            "physical memory); quantize without --calib-data (round-to-nearest) or raise the limit",
                            (double)bytes / 1073741824.0, modules[i], end > i ? " through " : "",
                            end > i ? modules[end] : "", (double)c->max_bytes / 1073741824.0);
            break;
        }
        if (bytes > 0 && (c->n_passes == 0 || cur + bytes > c->max_bytes)) {
            c->n_passes++;
            cur = 0;
        }
        for (int32_t j = i; j <= end; j++) {
            struct hy_calib_acc *a = find_acc(c, modules[j]);
            if (!a || a->pass >= 0)
                continue;
            a->pass = c->n_passes - 1;
            last[a - c->acc] = -1 - last[a - c->acc]; /* restore */
            c->planned++;
            c->planned_bytes += acc_bytes(a);
        }
        cur += bytes;
        if (cur > c->pass_bytes_max)
            c->pass_bytes_max = cur;
        i = end + 1;
    }
    free(last);
    return rc;
}

/* The first and last layer pass p observes (the MTP layer's index is num_hidden_layers); INT32_MAX and
 * -1 for a pass without groups. */
static void pass_layers(const struct hy_calib *c, int32_t p, int32_t *first, int32_t *last)
{
    *first = INT32_MAX;
    *last = -1;
    for (int32_t i = 0; i < c->n_acc; i++)
        if (c->acc[i].pass == p) {
            if (c->acc[i].layer < *first)
                *first = c->acc[i].layer;
            if (c->acc[i].layer > *last)
                *last = c->acc[i].layer;
        }
}

/* Frees the resident pass's statistics (and the observer's scratch, if a pass stopped while running). */
static void drop_pass(struct hy_calib *c)
{
    for (int32_t i = 0; i < c->n_acc; i++) {
        free(c->acc[i].g);
        c->acc[i].g = NULL;
        c->acc[i].n = 0;
    }
    free(c->pack);
    c->pack = NULL;
    free(c->wt_buf);
    c->wt_buf = NULL;
    for (int32_t L = 0; L < c->n_attn; L++) {
        free(c->attn[L].g);
        c->attn[L].g = NULL;
        c->attn[L].windows = 0;
    }
    free(c->q_stash);
    c->q_stash = NULL;
    c->stash_layer = -1;
    c->route_w = NULL;
    c->route_n = 0;
    c->obs_failed = 0;
    c->cur_pass = -1;
}

/* g = the mean (sum / n), its lower triangle mirrored, in MEAN_TILE-square tiles so that both the row
 * and the column writes stay in cache. */
#define MEAN_TILE 32
static void finish_mean(struct hy_calib_acc *a)
{
    const int64_t K = a->K, nblk = (K + MEAN_TILE - 1) / MEAN_TILE;
    const double inv = a->n ? 1.0 / (double)a->n : 0.0;
    double *g = a->g;
#pragma omp parallel for schedule(dynamic, 1) if (K >= 1024)
    for (int64_t b = nblk - 1; b >= 0; b--)
        for (int64_t cb = 0; cb <= b; cb++)
            for (int64_t r = b * MEAN_TILE; r < (b + 1) * MEAN_TILE && r < K; r++)
                for (int64_t j = cb * MEAN_TILE; j < (cb + 1) * MEAN_TILE && j <= r; j++) {
                    g[r * K + j] *= inv;
                    g[j * K + r] = g[r * K + j];
                }
}

/* 1 when a forward may start at layer L from the stream alone: hy_v4's shared-indexer layers reuse the
 * key selection of the full layer before them (hy_v4.c), which lives in the forward's scratch. */
static int resumable(const struct hy_model *m, int32_t L)
{
    const struct hy_model_config *c = &m->cfg;
    return c->arch != HY_ARCH_HY_V4 || c->v4.index_topk <= 0 || c->v4.indexer_full[L];
}

/* Collects the statistics of pass p: every calibration window through the model (and MTP), observing
 * p's groups only; then each g becomes the mean. 0, or -1 (its statistics freed). */
static int run_pass(struct hy_calib *c, int32_t p)
{
    struct hy_model *m = c->m;
    drop_pass(c);
    if (!m)
        return hy_err_set("internal: calibration statistics asked for before hy_calib_bind");
    int64_t max_k = 0;
    for (int32_t i = 0; i < c->n_acc; i++) {
        if (c->acc[i].pass != p)
            continue;
        if (!(c->acc[i].g = calloc((size_t)(c->acc[i].K * c->acc[i].K), sizeof(double)))) {
            drop_pass(c);
            return hy_err_set("GPTQ calibration: out of memory for pass %d's statistics", p + 1);
        }
        if (c->acc[i].K > max_k)
            max_k = c->acc[i].K;
    }
    if (!(c->pack = malloc(hy_calib_gram_scratch(max_k) * sizeof(double)))) {
        drop_pass(c);
        return hy_err_set("GPTQ calibration: out of memory for pass %d's input chunk", p + 1);
    }
    int64_t wt_k = 0; /* the widest weighted group: seq_len f64 weights, then seq_len rows of the weighted x */
    for (int32_t i = 0; i < c->n_acc; i++)
        if (c->acc[i].pass == p && (c->acc[i].qk_heads > 0 || c->acc[i].routed) && c->acc[i].K > wt_k)
            wt_k = c->acc[i].K;
    if (wt_k && !(c->wt_buf = malloc((size_t)c->seq_len * (sizeof(double) + (size_t)wt_k * sizeof(float))))) {
        drop_pass(c);
        return hy_err_set("GPTQ calibration: out of memory for pass %d's token weighting scratch", p + 1);
    }
    const struct hy_model_config *mc = &m->cfg;
    const int64_t qw = (int64_t)mc->num_attention_heads * mc->head_dim;
    for (int32_t L = 0; L < c->n_attn; L++) {
        struct hy_calib_attn_stat *s = &c->attn[L];
        if (s->acc < 0 || c->acc[s->acc].pass != p || s->wq->rows != qw ||
            s->wk->rows != (int64_t)mc->num_key_value_heads * mc->head_dim)
            continue;
        if (!(s->g = calloc((size_t)(qw * mc->head_dim), sizeof(double))) ||
            (!c->q_stash && !(c->q_stash = malloc((size_t)(c->seq_len * qw) * sizeof(float))))) {
            drop_pass(c);
            return hy_err_set("GPTQ calibration: out of memory for pass %d's attention statistics", p + 1);
        }
    }
    c->attn_stride = c->seq_len / ATTN_QUERIES > 1 ? c->seq_len / ATTN_QUERIES : 1;
    /* layers [start, end) of the main model run (end = all of them when the pass has MTP groups), from
     * the checkpoint when it is at or before the pass's first layer; the stream entering the next
     * pass's first layer is saved on the way (save < 0: not needed, or behind start) */
    const int32_t n_layers = m->cfg.num_hidden_layers;
    int32_t first, last, next_first, next_last;
    pass_layers(c, p, &first, &last);
    pass_layers(c, p + 1, &next_first, &next_last);
    if (p == RANGE_PASS) { /* every layer and MTP; no checkpoint kept */
        first = 0;
        last = n_layers;
        next_last = -1;
    }
    const int run_mtp = m->has_mtp && last >= n_layers;
    const int32_t start = c->resid && c->resid_layer >= 0 && c->resid_layer <= first ? c->resid_layer : 0,
                  end = run_mtp ? n_layers : last + 1;
    int32_t save = next_last >= 0 ? next_first : -1;
    if (save > end)
        save = end;
    while (save > 0 && save < n_layers && !resumable(m, save))
        save--;
    if (save < start)
        save = -1;
    const double t0 = hy_time_now();
    const int32_t seq_len = c->seq_len;
    const size_t stream = (size_t)seq_len * (size_t)hy_model_stream_width(m); /* floats of one window's stream */
    if (save >= 0 && !c->resid && !(c->resid = malloc((size_t)c->samples * stream * sizeof(float)))) {
        drop_pass(c);
        return hy_err_set("GPTQ calibration: out of memory for the hidden-state checkpoint (%.1f MiB)",
                          (double)c->samples * (double)stream * 4.0 / 1048576.0);
    }
    if (save >= 0)
        c->resid_layer = -1; /* rewritten window by window below */
    const int64_t per = c->bos >= 0 ? seq_len - 1 : seq_len;
    const int32_t bs = 16, nb = (seq_len + bs - 1) / bs;
    int32_t *win = malloc((size_t)seq_len * sizeof(int32_t)), *pos = malloc((size_t)seq_len * sizeof(int32_t));
    int32_t *seq = calloc((size_t)seq_len, sizeof(int32_t)), *table = malloc((size_t)nb * sizeof(int32_t));
    int64_t *slots = malloc((size_t)seq_len * sizeof(int64_t));
    float *hid = malloc(stream * sizeof(float)), *x = malloc(stream * sizeof(float));
    struct hy_kv_cache kv;
    int rc = -1, kv_ok = 0;
    if (!win || !pos || !seq || !table || !slots || !hid || !x) {
        hy_err_set("calibration: out of memory");
        goto out;
    }
    if (hy_model_kv_cache_init(m, &kv, bs, nb))
        goto out;
    kv_ok = 1;
    for (int32_t i = 0; i < nb; i++)
        table[i] = i;
    for (int32_t i = 0; i < seq_len; i++) {
        pos[i] = i;
        slots[i] = i;
    }
    const int32_t *tables[1] = {table};
    m->observe = observe;
    m->observe_route = observe_route;
    m->observe_ctx = c;
    c->ranges = p == RANGE_PASS;
    for (int32_t w = 0; w < c->samples; w++) {
        int32_t len = 0;
        if (c->bos >= 0)
            win[len++] = c->bos;
        for (int64_t i = (int64_t)w * per; len < seq_len; i++)
            win[len++] = c->ids[i];
        const struct hy_batch bt = {len, win, pos, slots, seq, tables, 0, NULL, 0};
        float *ck = c->resid ? c->resid + (size_t)w * stream : NULL;
        if (start > 0)
            memcpy(x, ck, stream * sizeof(float));
        int frc = 0;
        if (save >= 0) {
            frc = hy_model_forward_layers(m, &kv, &bt, x, start, save, NULL);
            if (!frc)
                memcpy(ck, x, stream * sizeof(float));
        }
        if (!frc)
            frc = hy_model_forward_layers(m, &kv, &bt, x, save >= 0 ? save : start, end, run_mtp ? hid : NULL);
        if (frc || c->obs_failed) {
            hy_err_prefix("calibration window %d", w);
            goto out;
        }
        if (run_mtp) { /* MTP row p: token p + 1 with the main model's hidden state p (spec §4.1) */
            const struct hy_batch bm = {len - 1, win + 1, pos, slots, seq, tables, 0, NULL, 0};
            if (hy_model_forward_mtp(m, &kv, &bm, hid, NULL, NULL) || c->obs_failed) {
                hy_err_prefix("calibration window %d (MTP)", w);
                goto out;
            }
        }
    }
    for (int32_t i = 0; i < c->n_acc; i++)
        if (c->acc[i].g)
            finish_mean(&c->acc[i]);
    if (p == RANGE_PASS) {
        c->ranges_run = 1;
    } else {
        c->cur_pass = p;
        c->passes_run++;
        c->layers_run += end - start + run_mtp;
    }
    if (save >= 0)
        c->resid_layer = save;
    rc = 0;
out:
    m->observe = NULL;
    m->observe_route = NULL;
    m->observe_ctx = NULL;
    c->ranges = 0;
    free(c->pack);
    c->pack = NULL;
    free(c->wt_buf);
    c->wt_buf = NULL;
    if (kv_ok)
        hy_kv_cache_free(&kv);
    free(win);
    free(pos);
    free(seq);
    free(table);
    free(slots);
    free(hid);
    free(x);
    if (rc)
        drop_pass(c);
    c->seconds += hy_time_now() - t0;
    return rc;
}

int hy_calib_get(struct hy_calib *c, const char *module, const double **h, int64_t *K, int64_t *rows, int32_t *group)
{
    *h = NULL;
    struct hy_calib_acc *a = find_acc(c, module);
    if (!a || a->pass < 0)
        return 0;
    if (a->pass != c->cur_pass && run_pass(c, a->pass))
        return -1;
    if (a->n == 0)
        return 0;
    if (K)
        *K = a->K;
    if (rows)
        *rows = a->n;
    if (group)
        *group = (int32_t)(a - c->acc);
    *h = a->g;
    return 0;
}

void hy_calib_get_attn(const struct hy_calib *c, const char *module, const double **g, int64_t *group_rows)
{
    *g = NULL;
    int L = -1, n = 0;
    if (sscanf(module, "model.layers.%d.self_attn.q_proj%n", &L, &n) != 1 || module[n] != '\0' || L < 0 ||
        L >= c->n_attn || !c->attn[L].g || c->attn[L].windows == 0)
        return;
    *g = c->attn[L].g;
    *group_rows = c->m->cfg.head_dim;
}

int hy_calib_ranges(struct hy_calib *c)
{
    for (int32_t i = 0; i < c->n_acc; i++)
        c->acc[i].range_rows = 0;
    return run_pass(c, RANGE_PASS);
}

int hy_calib_get_range(const struct hy_calib *c, const char *module, float *lo, float *hi)
{
    const struct hy_calib_acc *a = find_acc(c, module);
    if (!a || a->range_rows == 0 || !isfinite(a->x_min) || !isfinite(a->x_max)) /* a NaN first element stays */
        return 0;
    *lo = a->x_min;
    *hi = a->x_max;
    return 1;
}

void hy_calib_free(struct hy_calib *c)
{
    drop_pass(c);
    free(c->attn);
    for (int32_t i = 0; i < c->n_acc; i++)
        free(c->acc[i].g);
    free(c->ids);
    free(c->resid);
    free(c->acc);
    free(c->names);
    memset(c, 0, sizeof(*c));
}
