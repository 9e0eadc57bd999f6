/* hy_v4.c - the Hy4-preview (`hy_v4`) layers over the paged MLA cache (spec hy4_architecture.md).
 *
 * Batch-first like Hy3: every token writes its cache rows at its slot, then attends to its own sequence
 * through the block table. Per layer (§2): HC-pre over the hc_mult residual streams (kept in fp32, as
 * llama.cpp does), RMSNorm, gated MLA with sinks (absorbed form, §6.4) over the keys the lightning
 * indexer selects (§7; `full` layers select, `shared` layers reuse the previous full layer's sets of the
 * same pass), HC-post; the same around the dense MLP (layer 0) or the MoE (clamped routed experts).
 * The MTP layer is a plain pre-norm block with its own cache layer and indexer (§11.2).
 *
 * Cache rows (cache/kv_cache.h, hy_kv_cache_init_mla): K = [RMSNorm'd latent c (r_kv); RoPE'd k_pe (d_r)]
 * per layer, V = the indexer key (d_I, after LayerNorm and RoPE) on full layers.
 *
 * Per-token math never depends on the rest of the batch: the linears are hy_matmul's fixed chains, the
 * indexer scores, top-k and the softmax loop over one token's own keys in position order, so fp32
 * logits are batch- and chunk-invariant. Top-k ties: the earlier position wins.
 */
#include "model/arch.h"
#include "model/hy_v4.h"
#include "model/layers.h"
#include "model/load_quant.h"

#include "base/err.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Indexer keys scored per pass (bounds the gather buffer whatever the context length); tests lower it. */
#define IDX_CHUNK 4096
static int32_t idx_chunk = IDX_CHUNK;

void hy_v4_set_index_chunk(int32_t n)
{
    idx_chunk = n < 1 ? 1 : n > IDX_CHUNK ? IDX_CHUNK : n;
}

struct hy_v4_scratch {
    float *mix;     /* [T, 2C] HC logits */
    float *post;    /* [T, C] HC post gates */
    float *hc_y;    /* [T, H] HC-pre output */
    float *cq;      /* [T, r_q] */
    float *qf;      /* [T, nh*(d_n+d_r)] */
    float *kva;     /* [T, r_kv+d_r] the cache row being written */
    float *qa;      /* [T, nh, r_kv+d_r] absorbed queries: W_UK^T q_nope, then q_pe */
    float *qn;      /* [T, d_n] one head's q_nope */
    float *qt;      /* [T, r_kv] one head's absorbed q */
    float *obar;    /* [nh, T, r_kv] latent attention outputs, head-major */
    float *oh;      /* [T, d_v] one head's up-projected output */
    float *att;     /* [T, nh*d_v] */
    float *gate;    /* [T, nh*d_v] */
    float *iq;      /* [T, H_I*d_I] indexer queries */
    float *ik;      /* [T, d_I] indexer keys */
    float *iw;      /* [T, H_I] indexer head weights */
    int32_t *sel;   /* [T, kmax] selected key positions, ascending */
    int32_t *n_sel; /* [T] */
    float *score;   /* [max_ctx] one token's indexer scores */
    int32_t *heap;  /* [kmax] top-k heap */
    float *keys;    /* [kmax, r_kv+d_r] one token's selected keys (f32) */
    float *lg;      /* [nh, kmax] one token's attention logits, then probabilities */
    void *ikeys;    /* [IDX_CHUNK, d_I] indexer keys as stored (cache dtype) */
    float *isc;     /* [H_I, IDX_CHUNK] per-head indexer scores */
    int64_t kmax;   /* max keys per token: index_topk, or max_ctx without an indexer (or when larger) */
    int32_t max_ctx;
};

static void v4_scratch_free(void *p)
{
    struct hy_v4_scratch *v = p;
    if (!v)
        return;
    float *fs[] = {v->mix, v->post, v->hc_y, v->cq, v->qf, v->kva,   v->qa,   v->qn, v->qt,    v->obar, v->oh,
                   v->att, v->gate, v->iq,   v->ik, v->iw, v->score, v->keys, v->lg, v->ikeys, v->isc};
    for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
        free(fs[i]);
    free(v->sel);
    free(v->n_sel);
    free(v->heap);
    free(v);
}

static void *v4_scratch_new(const struct hy_model *m, int64_t T, int32_t max_ctx)
{
    const struct hy_model_config *c = &m->cfg;
    const struct hy_v4_config *v = &c->v4;
    struct hy_v4_scratch *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    const int64_t H = c->hidden_size, C = v->hc_mult, nh = c->num_attention_heads, dn = v->qk_nope_head_dim,
                  dr = v->qk_rope_head_dim, rkv = v->kv_lora_rank, dv = v->v_head_dim,
                  HI = v->index_n_heads > 0 ? v->index_n_heads : 1, dI = v->index_head_dim > 0 ? v->index_head_dim : 1;
    s->kmax = v->index_topk > 0 && v->index_topk < max_ctx ? v->index_topk : max_ctx;
    s->max_ctx = max_ctx;
    const size_t f = sizeof(float);
    s->mix = malloc((size_t)(T * 2 * C) * f);
    s->post = malloc((size_t)(T * C) * f);
    s->hc_y = malloc((size_t)(T * H) * f);
    s->cq = malloc((size_t)(T * v->q_lora_rank) * f);
    s->qf = malloc((size_t)(T * nh * (dn + dr)) * f);
    s->kva = malloc((size_t)(T * (rkv + dr)) * f);
    s->qa = malloc((size_t)(T * nh * (rkv + dr)) * f);
    s->qn = malloc((size_t)(T * dn) * f);
    s->qt = malloc((size_t)(T * rkv) * f);
    s->obar = malloc((size_t)(nh * T * rkv) * f);
    s->oh = malloc((size_t)(T * dv) * f);
    s->att = malloc((size_t)(T * nh * dv) * f);
    s->gate = malloc((size_t)(T * nh * dv) * f);
    s->iq = malloc((size_t)(T * HI * dI) * f);
    s->ik = malloc((size_t)(T * dI) * f);
    s->iw = malloc((size_t)(T * HI) * f);
    s->sel = malloc((size_t)(T * s->kmax) * sizeof(int32_t));
    s->n_sel = malloc((size_t)T * sizeof(int32_t));
    s->score = malloc((size_t)max_ctx * f);
    s->heap = malloc((size_t)s->kmax * sizeof(int32_t));
    s->keys = malloc((size_t)s->kmax * (size_t)(rkv + dr) * f);
    s->lg = malloc((size_t)nh * (size_t)s->kmax * f);
    s->ikeys = malloc((size_t)IDX_CHUNK * (size_t)dI * f);
    s->isc = malloc((size_t)HI * IDX_CHUNK * f);
    if (!s->mix || !s->post || !s->hc_y || !s->cq || !s->qf || !s->kva || !s->qa || !s->qn || !s->qt || !s->obar ||
        !s->oh || !s->att || !s->gate || !s->iq || !s->ik || !s->iw || !s->sel || !s->n_sel || !s->score || !s->heap ||
        !s->keys || !s->lg || !s->ikeys || !s->isc) {
        v4_scratch_free(s);
        return NULL;
    }
    return s;
}

static float sigmoidf(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

static struct hy_tensor f32_matrix(const float *data, int64_t rows, int64_t cols)
{
    struct hy_tensor t = {.dtype = HY_DTYPE_F32, .rows = rows, .cols = cols, .data = data};
    return t;
}

/* --- hyper-connections (spec §4) --------------------------------------------------------------------- */

/* mix[T, n] = (fn . X_t) / rms(X_t) for the flat C*H streams of every token (unweighted RMS, eps). */
static void hc_mix(const struct hy_model *m, const float *X, int64_t T, const float *fn, int64_t n, float *mix)
{
    const int64_t CH = (int64_t)m->cfg.v4.hc_mult * m->cfg.hidden_size;
    const struct hy_tensor F = f32_matrix(fn, n, CH);
    hy_matmul(mix, X, T, &F);
    for (int64_t t = 0; t < T; t++) {
        double ss = 0.0;
        for (int64_t i = 0; i < CH; i++)
            ss += (double)X[t * CH + i] * X[t * CH + i];
        const float r = (float)(1.0 / sqrt(ss / (double)CH + (double)m->cfg.rms_norm_eps));
        for (int64_t j = 0; j < n; j++)
            mix[t * n + j] *= r;
    }
}

/* y[H] = sum_i g[i] X_i over the C streams X [C, H] of one token. */
static void streams_sum(const float *X, const float *g, int64_t C, int64_t H, float *y)
{
    memset(y, 0, (size_t)H * sizeof(float));
    for (int64_t i = 0; i < C; i++)
        for (int64_t d = 0; d < H; d++)
            y[d] += g[i] * X[i * H + d];
}

/* HC-pre of site `site` (0 attention, 1 MLP): y[T, H] = sum_i a_i X_i, post gates into v->post. */
static void hc_pre(const struct hy_model *m, const struct hy_layer *ly, int site, const float *X, int64_t T,
                   struct hy_v4_scratch *v, float *y)
{
    const struct hy_v4_config *c4 = &m->cfg.v4;
    const int64_t C = c4->hc_mult, H = m->cfg.hidden_size;
    hc_mix(m, X, T, ly->hc_fn[site], 2 * C, v->mix);
    const float *b = ly->hc_base[site], s0 = ly->hc_scale[site][0], s1 = ly->hc_scale[site][1];
    for (int64_t t = 0; t < T; t++) {
        const float *mx = v->mix + t * 2 * C;
        float a[64];
        for (int64_t i = 0; i < C; i++) {
            a[i] = sigmoidf(mx[i] * s0 + b[i]) + c4->hc_eps;
            v->post[t * C + i] = c4->hc_magnitude * sigmoidf(mx[C + i] * s1 + b[C + i]) + c4->hc_eps;
        }
        streams_sum(X + t * C * H, a, C, H, y + t * H);
    }
}

/* HC-post: X_i += p_i f for every stream (spec §4.3). */
static void hc_post(const struct hy_model *m, float *X, int64_t T, const float *f, const float *post)
{
    const int64_t C = m->cfg.v4.hc_mult, H = m->cfg.hidden_size;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < C; i++) {
            const float p = post[t * C + i];
            float *xi = X + (t * C + i) * H;
            for (int64_t d = 0; d < H; d++)
                xi[d] += p * f[t * H + d];
        }
}

static void hc_head(const struct hy_model *m, const float *X, int64_t T, struct hy_forward_scratch *s, float *h)
{
    const struct hy_v4_config *c4 = &m->cfg.v4;
    const int64_t C = c4->hc_mult, H = m->cfg.hidden_size;
    struct hy_v4_scratch *v = s->arch;
    hc_mix(m, X, T, m->hc_head_fn, C, v->mix);
    for (int64_t t = 0; t < T; t++) {
        float g[64];
        for (int64_t i = 0; i < C; i++)
            g[i] = sigmoidf(v->mix[t * C + i] * m->hc_head_scale[0] + m->hc_head_base[i]) + c4->hc_eps;
        streams_sum(X + t * C * H, g, C, H, h + t * H);
    }
}

/* --- cache rows ------------------------------------------------------------------------------------- */

static int64_t slot_of(const struct hy_batch *b, int64_t t, int32_t pos, int32_t bs)
{
    return (int64_t)b->block_tables[b->seq_ids[t]][pos / bs] * bs + pos % bs;
}

static void row_put(enum hy_dtype dt, void *base, int64_t slot, int64_t w, const float *x)
{
    if (dt == HY_DTYPE_F32) {
        memcpy((float *)base + slot * w, x, (size_t)w * sizeof(float));
    } else {
        uint16_t *r = (uint16_t *)base + slot * w;
        for (int64_t i = 0; i < w; i++)
            r[i] = hy_f32_to_bf16(x[i]);
    }
}

static void row_get(enum hy_dtype dt, const void *base, int64_t slot, int64_t w, float *x)
{
    hy_dtype_to_f32(dt, (const char *)base + slot * w * (int64_t)hy_dtype_size(dt), x, (size_t)w);
}

/* --- the lightning indexer (spec §7) ------------------------------------------------------------------- */

/* heap[0..n) is a min-heap of positions by (score, -position): the root is the weakest kept key. */
static int weaker(const float *score, int32_t a, int32_t b)
{
    return score[a] < score[b] || (score[a] == score[b] && a > b);
}

static void sift_down(int32_t *heap, int64_t n, int64_t i, const float *score)
{
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && weaker(score, heap[l], heap[w]))
            w = l;
        if (r < n && weaker(score, heap[r], heap[w]))
            w = r;
        if (w == i)
            return;
        const int32_t tmp = heap[i];
        heap[i] = heap[w];
        heap[w] = tmp;
        i = w;
    }
}

static int cmp_i32(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* sel[0..k) = the k positions of score[0..n) with the largest scores (ties: the earlier position), ascending. */
static int64_t top_k(const float *score, int64_t n, int64_t k, int32_t *heap, int32_t *sel)
{
    if (n <= k) {
        for (int64_t i = 0; i < n; i++)
            sel[i] = (int32_t)i;
        return n;
    }
    for (int64_t i = 0; i < k; i++)
        heap[i] = (int32_t)i;
    for (int64_t i = k / 2 - 1; i >= 0; i--)
        sift_down(heap, k, i, score);
    for (int64_t i = k; i < n; i++)
        if (weaker(score, heap[0], (int32_t)i)) {
            heap[0] = (int32_t)i;
            sift_down(heap, k, 0, score);
        }
    memcpy(sel, heap, (size_t)k * sizeof(int32_t));
    qsort(sel, (size_t)k, sizeof(int32_t), cmp_i32);
    return k;
}

/* LayerNorm (mean-centred, with bias) of each of T rows of width d, in place. */
static void layernorm_rows(float *x, int64_t T, int64_t d, const float *w, const float *b, float eps)
{
    for (int64_t t = 0; t < T; t++) {
        float *r = x + t * d;
        double mu = 0.0, var = 0.0;
        for (int64_t i = 0; i < d; i++)
            mu += r[i];
        mu /= (double)d;
        for (int64_t i = 0; i < d; i++)
            var += ((double)r[i] - mu) * ((double)r[i] - mu);
        const double inv = 1.0 / sqrt(var / (double)d + (double)eps);
        for (int64_t i = 0; i < d; i++)
            r[i] = (float)(((double)r[i] - mu) * inv) * w[i] + b[i];
    }
}

/* Indexer keys of the batch into the cache (V rows of this layer), then every token's top-k set of key
 * positions into v->sel / v->n_sel (all causal keys while the sequence has at most index_topk). */
static void indexer(const struct hy_model *m, const struct hy_layer *ly, const struct hy_kv_view *view,
                    const struct hy_batch *b, const float *u, struct hy_v4_scratch *v)
{
    const struct hy_model_config *c = &m->cfg;
    const struct hy_v4_config *c4 = &c->v4;
    const int64_t T = b->n_tokens, H = c->hidden_size, HI = c4->index_n_heads, dI = c4->index_head_dim,
                  dr = c4->qk_rope_head_dim;
    linear(m, v->iq, v->cq, T, &ly->idx_wq_b);
    linear(m, v->ik, u, T, &ly->idx_wk);
    const struct hy_tensor Wi = f32_matrix(ly->idx_weights, HI, H);
    hy_matmul(v->iw, u, T, &Wi);
    layernorm_rows(v->ik, T, dI, ly->idx_k_norm_w, ly->idx_k_norm_b, c->rms_norm_eps);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t j = 0; j < HI; j++)
            hy_rope(v->iq + (t * HI + j) * dI + (dI - dr), 1, dr, b->positions[t], m->inv_freq, 1);
        hy_rope(v->ik + t * dI + (dI - dr), 1, dr, b->positions[t], m->inv_freq, 1);
        row_put(view->dtype, view->v, b->slot_mapping[t], dI, v->ik + t * dI);
    }
    const float scale = 1.0f / sqrtf((float)(HI * dI));
    const size_t rb = (size_t)dI * hy_dtype_size(view->dtype);
    for (int64_t t = 0; t < T; t++) {
        const int32_t n = b->positions[t] + 1;
        int32_t *sel = v->sel + t * v->kmax;
        if (n <= c4->index_topk) {
            for (int32_t s = 0; s < n; s++)
                sel[s] = s;
            v->n_sel[t] = n;
            continue;
        }
        /* scores of idx_chunk keys at a time: the keys gathered as stored, S[HI, nb] = q_j . k_s (hy_matmul's
         * chain, as hy_dot_f32), then the ReLU'd heads weighted in head order */
        for (int32_t s0 = 0; s0 < n; s0 += idx_chunk) {
            const int32_t nb = n - s0 < idx_chunk ? n - s0 : idx_chunk;
#pragma omp parallel for schedule(static) if (nb >= 256)
            for (int32_t s = 0; s < nb; s++)
                memcpy((char *)v->ikeys + (size_t)s * rb,
                       (const char *)view->v + (size_t)slot_of(b, t, s0 + s, view->block_size) * rb, rb);
            const struct hy_tensor K = {.dtype = view->dtype, .rows = nb, .cols = dI, .data = v->ikeys};
            hy_matmul(v->isc, v->iq + t * HI * dI, HI, &K);
            const int64_t sb = 512; /* score[s] = sum over heads in order of w_j * relu(S[j, s]), rows of S in turn */
#pragma omp parallel for schedule(static) if (nb >= 2 * sb)
            for (int64_t b0 = 0; b0 < nb; b0 += sb) {
                const int64_t b1 = nb - b0 < sb ? nb : b0 + sb;
                float *sc = v->score + s0;
                for (int64_t s = b0; s < b1; s++)
                    sc[s] = 0.0f;
                for (int64_t j = 0; j < HI; j++) {
                    const float w = v->iw[t * HI + j], *S = v->isc + j * nb;
                    for (int64_t s = b0; s < b1; s++)
                        sc[s] += S[s] > 0.0f ? w * S[s] : 0.0f;
                }
                for (int64_t s = b0; s < b1; s++)
                    sc[s] *= scale;
            }
        }
        v->n_sel[t] = (int32_t)top_k(v->score, n, c4->index_topk, v->heap, sel);
    }
}

/* Every causal key, for models without an indexer (index_topk 0: dense MLA). */
static void select_all(const struct hy_batch *b, struct hy_v4_scratch *v)
{
    for (int64_t t = 0; t < b->n_tokens; t++) {
        const int32_t n = b->positions[t] + 1;
        for (int32_t s = 0; s < n; s++)
            v->sel[t * v->kmax + s] = s;
        v->n_sel[t] = n;
    }
}

/* --- gated MLA with sinks (spec §6) ----------------------------------------------------------------------- */

/* out[T, H] = o_proj( MLA(u) * sigmoid(linear_gate u) ) for the T tokens of b, u [T, H] normed. Writes the
 * layer's cache rows (and, with has_indexer, the indexer keys and a new selection); without one the
 * selection of the previous full layer in v->sel is used. */
static void mla(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b, const float *u,
                int has_indexer, struct hy_forward_scratch *s, float *out)
{
    const struct hy_model_config *c = &m->cfg;
    const struct hy_v4_config *c4 = &c->v4;
    const struct hy_layer *ly = &m->layers[L];
    struct hy_v4_scratch *v = s->arch;
    const int64_t T = b->n_tokens, nh = m->attn_heads, dn = c4->qk_nope_head_dim, dr = c4->qk_rope_head_dim,
                  dqk = dn + dr, rkv = c4->kv_lora_rank, kw = rkv + dr, dv = c4->v_head_dim, rq = c4->q_lora_rank;
    linear(m, v->cq, u, T, &ly->q_a);
    hy_rmsnorm(v->cq, v->cq, ly->q_a_norm, T, rq, c->rms_norm_eps);
    maybe_round(m, v->cq, T * rq);
    linear(m, v->qf, v->cq, T, &ly->q_b);
    linear(m, v->kva, u, T, &ly->kv_a);
    maybe_round(m, v->qf, T * nh * dqk);
    const struct hy_kv_view view = hy_kv_cache_view(kv, L);
    for (int64_t t = 0; t < T; t++) {
        float *row = v->kva + t * kw;
        hy_rmsnorm(row, row, ly->kv_a_norm, 1, rkv, c->rms_norm_eps);
        hy_rope(row + rkv, 1, dr, b->positions[t], m->inv_freq, 1);
        for (int64_t h = 0; h < nh; h++)
            hy_rope(v->qf + t * nh * dqk + h * dqk + dn, 1, dr, b->positions[t], m->inv_freq, 1);
        maybe_round(m, row, kw);
        row_put(view.dtype, view.k, b->slot_mapping[t], kw, row);
    }
    if (has_indexer)
        indexer(m, ly, &view, b, u, v);
    else if (c4->index_topk <= 0)
        select_all(b, v);
    /* absorbed queries: qa[t, h] = [W_UK^h^T q_nope ; q_pe] (spec §6.4) */
    for (int64_t h = 0; h < nh; h++) {
        for (int64_t t = 0; t < T; t++)
            memcpy(v->qn + t * dn, v->qf + t * nh * dqk + h * dqk, (size_t)dn * sizeof(float));
        const struct hy_tensor Wk = f32_matrix(ly->w_uk_t + h * rkv * dn, rkv, dn);
        hy_matmul(v->qt, v->qn, T, &Wk);
        for (int64_t t = 0; t < T; t++) {
            float *qa = v->qa + (t * nh + h) * kw;
            memcpy(qa, v->qt + t * rkv, (size_t)rkv * sizeof(float));
            memcpy(qa + rkv, v->qf + t * nh * dqk + h * dqk + dn, (size_t)dr * sizeof(float));
        }
    }
    /* per token: its selected rows gathered as f32 keys [n, kw]; logits [nh, n] = qa . key (hy_matmul's
     * chain); softmax with the sink per head; obar_h = sum_i p_hi c_i (hy_attn_pv, heads split over threads) */
    const float tau = 1.0f / sqrtf((float)dqk);
    for (int64_t t = 0; t < T; t++) {
        const int64_t n = v->n_sel[t];
        const int32_t *sel = v->sel + t * v->kmax;
        float *lg = v->lg;
#pragma omp parallel for schedule(static) if (n >= 64)
        for (int64_t i = 0; i < n; i++)
            row_get(view.dtype, view.k, slot_of(b, t, sel[i], view.block_size), kw, v->keys + i * kw);
        const struct hy_tensor K = f32_matrix(v->keys, n, kw);
        hy_matmul(lg, v->qa + t * nh * kw, nh, &K);
#pragma omp parallel for schedule(static) if (n * nh >= 4096)
        for (int64_t h = 0; h < nh; h++) {
            float *l = lg + h * n;
            const float sink = ly->sink ? ly->sink[h] : -INFINITY;
            float mx = sink;
            for (int64_t i = 0; i < n; i++) {
                l[i] *= tau;
                if (l[i] > mx)
                    mx = l[i];
            }
            float den = ly->sink ? expf(sink - mx) : 0.0f;
            for (int64_t i = 0; i < n; i++) {
                l[i] = expf(l[i] - mx);
                den += l[i];
            }
            for (int64_t i = 0; i < n; i++)
                l[i] /= den;
        }
        /* heads per task, a multiple of 4, one task per thread (hy_attn_pv's outputs do not depend on the split) */
        const int64_t nthr = omp_get_max_threads(), hb = ((nh + nthr - 1) / nthr + 3) / 4 * 4;
#pragma omp parallel for schedule(dynamic, 1) if (n * nh >= 4096)
        for (int64_t h0 = 0; h0 < nh; h0 += hb)
            hy_attn_pv(v->obar + (h0 * T + t) * rkv, T * rkv, lg + h0 * n, n, nh - h0 < hb ? nh - h0 : hb, v->keys, kw,
                       n, rkv);
    }
    /* o_h = W_UV^h obar_h, head-major rows of att; the sigmoid gate; o_proj */
    for (int64_t h = 0; h < nh; h++) {
        const struct hy_tensor Wv = hy_tensor_rows(&ly->kv_b, h * (dn + dv) + dn, dv);
        hy_matmul(v->oh, v->obar + h * T * rkv, T, &Wv);
        for (int64_t t = 0; t < T; t++)
            memcpy(v->att + t * nh * dv + h * dv, v->oh + t * dv, (size_t)dv * sizeof(float));
    }
    maybe_round(m, v->att, T * nh * dv);
    if (ly->attn_gate.data) {
        linear(m, v->gate, u, T, &ly->attn_gate);
        for (int64_t i = 0; i < T * nh * dv; i++)
            v->att[i] *= sigmoidf(v->gate[i]);
        maybe_round(m, v->att, T * nh * dv);
    }
    m->shard_ops->attn_out(m, &ly->wo, v->att, T, c->num_attention_heads * dv, s, out);
    maybe_round(m, out, T * c->hidden_size);
}

/* The dense MLP or the MoE of layer ly on normed rows u [T, H] -> s->y [T, H]. */
static void ffn(const struct hy_model *m, const struct hy_layer *ly, const float *u, int64_t T,
                struct hy_forward_scratch *s)
{
    if (ly->is_moe)
        hy_layers_moe(m, ly, u, T, s);
    else
        hy_layers_ffn(m, &ly->mlp, u, T, m->cfg.intermediate_size, s->ff_a, s->ff_b, s->y);
}

static void v4_layer(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b, float *X,
                     struct hy_forward_scratch *s)
{
    const struct hy_model_config *c = &m->cfg;
    const struct hy_layer *ly = &m->layers[L];
    struct hy_v4_scratch *v = s->arch;
    const int64_t T = b->n_tokens, H = c->hidden_size;
    struct hy_model_prof *prof = prof_of(m);
    double t0 = prof_start(prof);
    hc_pre(m, ly, 0, X, T, v, v->hc_y);
    hy_rmsnorm(s->a, v->hc_y, ly->input_norm, T, H, c->rms_norm_eps);
    maybe_round(m, s->a, T * H);
    mla(m, kv, L, b, s->a, c->v4.index_topk > 0 && c->v4.indexer_full[L], s, s->tmp);
    hc_post(m, X, T, s->tmp, v->post);
    prof_stop(prof, HY_STAGE_ATTENTION, t0);
    hc_pre(m, ly, 1, X, T, v, v->hc_y);
    hy_rmsnorm(s->a, v->hc_y, ly->post_norm, T, H, c->rms_norm_eps);
    maybe_round(m, s->a, T * H);
    t0 = prof_start(prof);
    ffn(m, ly, s->a, T, s);
    if (!ly->is_moe)
        prof_stop(prof, HY_STAGE_DENSE_MLP, t0);
    hc_post(m, X, T, s->y, v->post);
}

static void plain_block(const struct hy_model *m, struct hy_kv_cache *kv, int L, const struct hy_batch *b, float *x,
                        struct hy_forward_scratch *s)
{
    const struct hy_model_config *c = &m->cfg;
    const struct hy_layer *ly = &m->layers[L];
    const int64_t T = b->n_tokens, H = c->hidden_size;
    hy_rmsnorm(s->a, x, ly->input_norm, T, H, c->rms_norm_eps);
    maybe_round(m, s->a, T * H);
    mla(m, kv, L, b, s->a, c->v4.index_topk > 0 && c->v4.indexer_full[L], s, s->tmp);
    for (int64_t i = 0; i < T * H; i++)
        x[i] += s->tmp[i];
    maybe_round(m, x, T * H);
    hy_rmsnorm(s->a, x, ly->post_norm, T, H, c->rms_norm_eps);
    maybe_round(m, s->a, T * H);
    ffn(m, ly, s->a, T, s);
    for (int64_t i = 0; i < T * H; i++)
        x[i] += s->y[i];
    maybe_round(m, x, T * H);
}

static void v4_embed(const struct hy_model *m, const struct hy_batch *b, float *x, struct hy_forward_scratch *s)
{
    const int64_t T = b->n_tokens, H = m->cfg.hidden_size, C = m->cfg.v4.hc_mult;
    hy_layers_embed(m, b->token_ids, T, s->ff_x); /* hc_mult copies of the embedding (spec §2) */
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < C; i++)
            memcpy(x + (t * C + i) * H, s->ff_x + t * H, (size_t)H * sizeof(float));
}

static const float *v4_head(const struct hy_model *m, const float *x, int64_t T, struct hy_forward_scratch *s)
{
    hc_head(m, x, T, s, s->ff_x);
    return s->ff_x;
}

static int64_t v4_streams(const struct hy_model_config *c)
{
    return c->v4.hc_mult;
}

/* The cache (spec hy4_architecture.md §8): the latent + rope key on every layer, the indexer key on full
 * layers. Every rank keeps the whole latent cache (its heads all read it: shard.c). */
static int32_t indexer_layers(const struct hy_model *m)
{
    int32_t n = 0;
    for (int32_t l = 0; m->cfg.v4.index_topk > 0 && l < hy_arch_cache_layers(&m->cfg); l++)
        n += m->cfg.v4.indexer_full[l];
    return n;
}

static size_t v4_kv_token_bytes(const struct hy_model *m, enum hy_dtype dt)
{
    const struct hy_v4_config *v = &m->cfg.v4;
    return hy_kv_cache_token_bytes_mla(hy_arch_cache_layers(&m->cfg), v->kv_lora_rank + v->qk_rope_head_dim,
                                       indexer_layers(m), v->index_head_dim, dt);
}

static int v4_kv_init(const struct hy_model *m, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks,
                      enum hy_dtype dt)
{
    const struct hy_v4_config *v = &m->cfg.v4;
    const int32_t nl = hy_arch_cache_layers(&m->cfg);
    uint8_t has_v[HY_MAX_LAYERS + 1];
    for (int32_t l = 0; l < nl; l++)
        has_v[l] = v->index_topk > 0 && v->indexer_full[l];
    return hy_kv_cache_init_mla(kv, nl, v->kv_lora_rank + v->qk_rope_head_dim, v->index_head_dim, has_v, block_size,
                                n_blocks, dt);
}

const struct hy_arch_ops hy_v4_arch = {
    .name = "hy_v4",
    .bind = hy_v4_bind_all,
    .streams = v4_streams,
    .scratch_new = v4_scratch_new,
    .scratch_free = v4_scratch_free,
    .embed = v4_embed,
    .layer = v4_layer,
    .head = v4_head,
    .kv_token_bytes = v4_kv_token_bytes,
    .kv_init = v4_kv_init,
    .mtp_block = plain_block,
};
