/* avx2_attn.c - AVX2 flash-style attention over a paged KV view (the avx2 hy_attend, attention.h).
 *
 * KV heads outer, the group's query heads inner (GQA): each cached K and V row is read once per
 * chunk of up to 8 query heads (once per group when n_heads / n_kv_heads <= 8). Positions are
 * processed in tiles of ATT_TILE in increasing order with an online softmax: running max m, running
 * denominator l and an fp32 output accumulator o, rescaled by exp(m_old - m_new) per tile. Scores
 * use the same 8-lane FMA dot as hy_avx2_dot_f32. The order of every sum is fixed by n_ctx alone;
 * threads split KV heads only (when not already inside a parallel region the caller opened).
 * hy_avx2_attend_multi (prefill) walks the tiles once for up to ATT_MQ query tokens of one sequence
 * at consecutive positions, each token running exactly its lone-call operations on the tile while
 * the tile's K/V rows are still in L1 (the per-token walk re-reads every row from L2/L3 for each
 * token; docs/tuning.md).
 *
 * FP8 E4M3 views (kv_view.h) are dequantized in registers: 8 bytes become 8 halves whose bit
 * pattern is sign | byte << 7 (an exact f16 of value e4m3 / 256, subnormals included), widened by
 * F16C; the row's scale times 256 is applied once per score (K) or folded into the softmax weight
 * (V), so no dequantized row is ever stored. */
#if defined(__x86_64__)

#include "kernels/avx2_common.h"
#include "kernels/kernel_table.h"

#include <math.h>
#include <string.h>

#define ATT_TILE 32
#define ATT_MAXD 256

/* 8 E4M3 bytes at p as f32 values e4m3(b) / 256 (exact; no NaN: 0x7f reads as 480 / 256). Each
 * byte goes to the high byte of a 16-bit lane (s eeee mmm 0^8); an arithmetic shift right by one
 * and clearing bit 14 give the half s 0 eeee mmm 0^7, i.e. 2^(e-15) (1 + m/8) = e4m3 / 256 (and
 * m 2^-17 = e4m3 / 256 for the subnormals e = 0). */
HY_AVX2_INLINE __m256 load_e4m3_div256(const uint8_t *p)
{
    const __m128i x = _mm_unpacklo_epi8(_mm_setzero_si128(), _mm_loadl_epi64((const __m128i *)p));
    return _mm256_cvtph_ps(_mm_and_si128(_mm_srai_epi16(x, 1), _mm_set1_epi16((short)0xbfff)));
}

/* 8 K/V elements at element offset off: F32 / BF16 widened, or (F8 = 1) E4M3 / 256. */
HY_AVX2_INLINE __m256 load_kv(const int F8, enum hy_dtype dt, const void *base, int64_t off)
{
    return F8 ? load_e4m3_div256((const uint8_t *)base + off) : hy_avx2_load(dt, base, off);
}

/* Attention of NH (constant) query heads sharing KV head g, for NQ query tokens of one sequence:
 * query token i has NH heads at q + i * qs ([NH][D]), attends to the first n_ctx0 + i positions and
 * writes out + i * os ([NH][D]). F8 (constant): the cache is FP8 E4M3. Positions are walked in tiles
 * of ATT_TILE from 0; inside a tile every query token runs exactly the operations a lone call with
 * its own n_ctx runs (the tile grid does not depend on n_ctx), so results are identical to NQ
 * separate calls; the tile's K and V rows are reused from L1 by the following query tokens. */
#define ATT_MQ 8
HY_AVX2_INLINE void attend_heads(const int NH, const int F8, const struct hy_kv_view *kv, int32_t g, const float *q0,
                                 int64_t qs, int nq, const int32_t *block_table, int32_t n_ctx0, float *out0,
                                 int64_t os)
{
    const int64_t D = kv->head_dim, row = (int64_t)kv->n_kv_heads * D;
    const int32_t bs = kv->block_size;
    const enum hy_dtype dt = kv->dtype;
    const float scale = 1.0f / sqrtf((float)D);
    const void *kb = kv->k, *vb = kv->v;
    const int64_t es = (int64_t)hy_dtype_size(dt);
    const int32_t n_ctx = n_ctx0 + nq - 1; /* the longest context */
    float mq[ATT_MQ][8], lq[ATT_MQ][8];
    float oq[ATT_MQ][8][ATT_MAXD] __attribute__((aligned(32)));
    float p[8][ATT_TILE] __attribute__((aligned(32)));  /* scores / weights [head][position] */
    float pt[ATT_TILE][8] __attribute__((aligned(32))); /* the same, [position][head], for NH = 8 */
    int64_t off[ATT_TILE];
    float ks[ATT_TILE], vs[ATT_TILE]; /* F8: per-position score multiplier and V multiplier */
    for (int i = 0; i < nq; i++) {
#pragma GCC unroll 8
        for (int h = 0; h < NH; h++) {
            mq[i][h] = -INFINITY;
            lq[i][h] = 0.0f;
            memset(oq[i][h], 0, (size_t)D * sizeof(float));
        }
    }
    for (int32_t j0 = 0; j0 < n_ctx; j0 += ATT_TILE) {
        const int jn = n_ctx - j0 < ATT_TILE ? n_ctx - j0 : ATT_TILE;
        for (int jj = 0; jj < jn; jj++) {
            const int32_t j = j0 + jj;
            const int64_t slot = (int64_t)block_table[j / bs] * bs + j % bs;
            off[jj] = slot * row + (int64_t)g * D;
            if (F8) {
                ks[jj] = hy_kv_view_k_scale(kv, slot, g) * 256.0f * scale;
                vs[jj] = hy_kv_view_v_scale(kv, slot, g) * 256.0f;
            }
        }
        /* K and V rows are scattered (one head's slice of each slot): request their cache lines
         * ahead so the loads below do not wait on memory one row at a time (this tile's V and, for
         * the first tile, K; the next tile's K) */
        for (int jj = 0; jj < jn; jj++)
            for (int64_t bo = 0; bo < D * es; bo += 64) {
                _mm_prefetch((const char *)vb + off[jj] * es + bo, _MM_HINT_T0);
                if (j0 == 0)
                    _mm_prefetch((const char *)kb + off[jj] * es + bo, _MM_HINT_T0);
            }
        for (int32_t j = j0 + ATT_TILE; j < n_ctx && j < j0 + 2 * ATT_TILE; j++) {
            const int64_t o2 = (((int64_t)block_table[j / bs] * bs + j % bs) * row + (int64_t)g * D) * es;
            for (int64_t bo = 0; bo < D * es; bo += 64)
                _mm_prefetch((const char *)kb + o2 + bo, _MM_HINT_T0);
        }
        for (int i = 0; i < nq; i++) {
            if (n_ctx0 + i <= j0)
                continue;
            const int jn = n_ctx0 + i - j0 < ATT_TILE ? n_ctx0 + i - j0 : ATT_TILE;
            const float *q = q0 + i * qs;
            float *m = mq[i], *l = lq[i];
            float(*o)[ATT_MAXD] = oq[i];
            /* scores p[h][jj] = (q_h . k_j) * scale */
            for (int jj = 0; jj < jn; jj++) {
                __m256 acc[8];
#pragma GCC unroll 8
                for (int h = 0; h < NH; h++)
                    acc[h] = _mm256_setzero_ps();
                for (int64_t d = 0; d < D; d += 8) {
                    const __m256 kv8 = load_kv(F8, dt, kb, off[jj] + d);
#pragma GCC unroll 8
                    for (int h = 0; h < NH; h++)
                        acc[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * D + d), kv8, acc[h]);
                }
                if (NH == 8) { /* 8 horizontal sums at once: lane h of the result = head h's score */
                    const __m256 t0 = _mm256_hadd_ps(acc[0], acc[1]), t1 = _mm256_hadd_ps(acc[2], acc[3]);
                    const __m256 t2 = _mm256_hadd_ps(acc[4], acc[5]), t3 = _mm256_hadd_ps(acc[6], acc[7]);
                    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
                    const __m256 sv =
                        _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
                    _mm256_store_ps(pt[jj], _mm256_mul_ps(sv, _mm256_set1_ps(F8 ? ks[jj] : scale)));
                    continue;
                }
#pragma GCC unroll 8
                for (int h = 0; h < NH; h++)
                    p[h][jj] = hy_avx2_hsum(acc[h]) * (F8 ? ks[jj] : scale);
            }
            /* online softmax update per head */
            float corr[8];
            if (NH == 8) { /* heads in lanes: pt[jj][h] */
                const __m256 mo = _mm256_loadu_ps(m);
                __m256 mt = mo;
                for (int jj = 0; jj < jn; jj++)
                    mt = _mm256_max_ps(mt, _mm256_load_ps(pt[jj]));
                const __m256 cv = hy_avx2_exp(_mm256_sub_ps(mo, mt)); /* 0 on the first tile (m = -inf) */
                __m256 sum = _mm256_setzero_ps();
                for (int jj = 0; jj < jn; jj++) {
                    const __m256 e = hy_avx2_exp(_mm256_sub_ps(_mm256_load_ps(pt[jj]), mt));
                    _mm256_store_ps(pt[jj], e);
                    sum = _mm256_add_ps(sum, e);
                }
                _mm256_storeu_ps(m, mt);
                _mm256_storeu_ps(corr, cv);
                _mm256_storeu_ps(l, _mm256_fmadd_ps(_mm256_loadu_ps(l), cv, sum));
            }
            for (int h = 0; h < NH && NH != 8; h++) {
                float mt = m[h];
                for (int jj = 0; jj < jn; jj++)
                    mt = p[h][jj] > mt ? p[h][jj] : mt;
                corr[h] = expf(m[h] - mt); /* 0 on the first tile (m = -inf) */
                m[h] = mt;
                for (int jj = jn; jj < ATT_TILE; jj++)
                    p[h][jj] = -INFINITY;
                const __m256 mv = _mm256_set1_ps(mt);
                __m256 sum = _mm256_setzero_ps();
                for (int jj = 0; jj < ATT_TILE; jj += 8) {
                    const __m256 e = hy_avx2_exp(_mm256_sub_ps(_mm256_load_ps(&p[h][jj]), mv));
                    _mm256_store_ps(&p[h][jj], e);
                    sum = _mm256_add_ps(sum, e);
                }
                l[h] = l[h] * corr[h] + hy_avx2_hsum(sum);
            }
            if (F8) { /* fold each position's V scale into its weights (l above keeps the plain sum) */
                for (int jj = 0; jj < jn; jj++) {
                    if (NH == 8) {
                        _mm256_store_ps(pt[jj], _mm256_mul_ps(_mm256_load_ps(pt[jj]), _mm256_set1_ps(vs[jj])));
                    } else {
#pragma GCC unroll 8
                        for (int h = 0; h < NH; h++)
                            p[h][jj] *= vs[jj];
                    }
                }
            }
            /* o_h = o_h * corr_h + sum_j p[h][j] v_j, 8 output lanes at a time kept in registers */
            for (int64_t d = 0; d < D; d += 8) {
                __m256 acc[8];
#pragma GCC unroll 8
                for (int h = 0; h < NH; h++)
                    acc[h] = _mm256_mul_ps(_mm256_load_ps(&o[h][d]), _mm256_set1_ps(corr[h]));
                for (int jj = 0; jj < jn; jj++) {
                    const __m256 v8 = load_kv(F8, dt, vb, off[jj] + d);
#pragma GCC unroll 8
                    for (int h = 0; h < NH; h++)
                        acc[h] = _mm256_fmadd_ps(_mm256_set1_ps(NH == 8 ? pt[jj][h] : p[h][jj]), v8, acc[h]);
                }
#pragma GCC unroll 8
                for (int h = 0; h < NH; h++)
                    _mm256_store_ps(&o[h][d], acc[h]);
            }
        }
    }
    for (int i = 0; i < nq; i++) {
        float *out = out0 + i * os;
#pragma GCC unroll 8
        for (int h = 0; h < NH; h++) {
            const __m256 inv = _mm256_set1_ps(1.0f / lq[i][h]);
            for (int64_t d = 0; d < D; d += 8)
                _mm256_storeu_ps(out + h * D + d, _mm256_mul_ps(_mm256_load_ps(&oq[i][h][d]), inv));
        }
    }
}

HY_AVX2_INLINE void attend_kv_head_t(const int F8, const struct hy_kv_view *kv, int32_t g, const float *q, int64_t qs,
                                     int nq, int32_t h0, int32_t nh, const int32_t *block_table, int32_t n_ctx0,
                                     float *out)
{
    const int64_t D = kv->head_dim;
    for (int32_t h = h0; h < h0 + nh;) {
        const int32_t left = h0 + nh - h;
        const float *qh = q + h * D;
        float *oh = out + h * D;
        if (left >= 8) {
            attend_heads(8, F8, kv, g, qh, qs, nq, block_table, n_ctx0, oh, qs);
            h += 8;
        } else if (left >= 4) {
            attend_heads(4, F8, kv, g, qh, qs, nq, block_table, n_ctx0, oh, qs);
            h += 4;
        } else if (left >= 2) {
            attend_heads(2, F8, kv, g, qh, qs, nq, block_table, n_ctx0, oh, qs);
            h += 2;
        } else {
            attend_heads(1, F8, kv, g, qh, qs, nq, block_table, n_ctx0, oh, qs);
            h += 1;
        }
    }
}

/* nq (1..ATT_MQ) query tokens, q / out rows of qs floats, token i over n_ctx0 + i positions. */
static HY_AVX2 void attend_kv_head(const struct hy_kv_view *kv, int32_t g, const float *q, int64_t qs, int nq,
                                   int32_t h0, int32_t nh, const int32_t *block_table, int32_t n_ctx0, float *out)
{
    if (kv->dtype == HY_DTYPE_F8_E4M3)
        attend_kv_head_t(1, kv, g, q, qs, nq, h0, nh, block_table, n_ctx0, out);
    else
        attend_kv_head_t(0, kv, g, q, qs, nq, h0, nh, block_table, n_ctx0, out);
}

void HY_AVX2 hy_avx2_attend(const struct hy_kv_view *kv, const float *q, int32_t n_heads, const int32_t *block_table,
                            int32_t n_ctx, float *scores, float *out)
{
    const int32_t nkv = kv->n_kv_heads, D = kv->head_dim;
    if (D % 8 != 0 || D > ATT_MAXD || n_ctx <= 0 || n_heads % nkv != 0) {
        hy_ref_attend(kv, q, n_heads, block_table, n_ctx, scores, out);
        return;
    }
    const int32_t group = n_heads / nkv;
    const int par = nkv > 1 && (double)n_ctx * (double)n_heads * (double)D >= 65536.0;
    (void)par;
#pragma omp parallel for schedule(dynamic, 1) if (par)
    for (int32_t g = 0; g < nkv; g++)
        attend_kv_head(kv, g, q, (int64_t)n_heads * D, 1, g * group, group, block_table, n_ctx, out);
}

void HY_AVX2 hy_avx2_attend_multi(const struct hy_kv_view *kv, const float *q, int32_t n_q, int32_t n_heads,
                                  const int32_t *block_table, int32_t n_ctx0, float *scores, float *out)
{
    const int32_t nkv = kv->n_kv_heads, D = kv->head_dim;
    const int64_t qs = (int64_t)n_heads * D;
    if (D % 8 != 0 || D > ATT_MAXD || n_ctx0 <= 0 || n_heads % nkv != 0) {
        for (int32_t i = 0; i < n_q; i++)
            hy_ref_attend(kv, q + i * qs, n_heads, block_table, n_ctx0 + i, scores, out + i * qs);
        return;
    }
    const int32_t group = n_heads / nkv;
    for (int32_t i = 0; i < n_q; i += ATT_MQ) {
        const int nq = n_q - i < ATT_MQ ? n_q - i : ATT_MQ;
        for (int32_t g = 0; g < nkv; g++)
            attend_kv_head(kv, g, q + i * qs, qs, nq, g * group, group, block_table, n_ctx0 + i, out + i * qs);
    }
}

/* hy_attn_pv: blocks of PV_M rows of P x 16 columns in 2 * PV_M accumulators; each C row chunk is loaded
 * once per block and used by PV_M rows. Rows of C are taken PV_CHUNK at a time (kept in L2 while every row
 * block passes over them), the accumulators stored to out between chunks: per output the chain is still
 * fma(p_i, c_i, acc) in increasing i from +0, unchanged by the chunking. */
#define PV_M 4
#define PV_CHUNK 64

HY_AVX2_INLINE void pv_block(float *out, int64_t ldo, const float *P, int64_t ldp, const float *C, int64_t ldc,
                             int64_t n, int64_t d, int first)
{
    /* eight named accumulators (an array indexed in a loop would live in memory at -O2) */
    float *o0 = out + d, *o1 = o0 + ldo, *o2 = o1 + ldo, *o3 = o2 + ldo;
    const float *p0 = P, *p1 = P + ldp, *p2 = P + 2 * ldp, *p3 = P + 3 * ldp;
    const __m256 z = _mm256_setzero_ps();
    __m256 a0 = first ? z : _mm256_loadu_ps(o0), b0 = first ? z : _mm256_loadu_ps(o0 + 8);
    __m256 a1 = first ? z : _mm256_loadu_ps(o1), b1 = first ? z : _mm256_loadu_ps(o1 + 8);
    __m256 a2 = first ? z : _mm256_loadu_ps(o2), b2 = first ? z : _mm256_loadu_ps(o2 + 8);
    __m256 a3 = first ? z : _mm256_loadu_ps(o3), b3 = first ? z : _mm256_loadu_ps(o3 + 8);
    for (int64_t i = 0; i < n; i++) {
        const float *c = C + i * ldc + d;
        const __m256 c0 = _mm256_loadu_ps(c), c1 = _mm256_loadu_ps(c + 8);
        __m256 p = _mm256_broadcast_ss(p0 + i);
        a0 = _mm256_fmadd_ps(p, c0, a0);
        b0 = _mm256_fmadd_ps(p, c1, b0);
        p = _mm256_broadcast_ss(p1 + i);
        a1 = _mm256_fmadd_ps(p, c0, a1);
        b1 = _mm256_fmadd_ps(p, c1, b1);
        p = _mm256_broadcast_ss(p2 + i);
        a2 = _mm256_fmadd_ps(p, c0, a2);
        b2 = _mm256_fmadd_ps(p, c1, b2);
        p = _mm256_broadcast_ss(p3 + i);
        a3 = _mm256_fmadd_ps(p, c0, a3);
        b3 = _mm256_fmadd_ps(p, c1, b3);
    }
    _mm256_storeu_ps(o0, a0);
    _mm256_storeu_ps(o0 + 8, b0);
    _mm256_storeu_ps(o1, a1);
    _mm256_storeu_ps(o1 + 8, b1);
    _mm256_storeu_ps(o2, a2);
    _mm256_storeu_ps(o2 + 8, b2);
    _mm256_storeu_ps(o3, a3);
    _mm256_storeu_ps(o3 + 8, b3);
}

HY_AVX2_INLINE void pv_one(float *out, const float *P, const float *C, int64_t ldc, int64_t n, int64_t d, int64_t width,
                           int first)
{
    if (d + 8 <= width) {
        __m256 a = first ? _mm256_setzero_ps() : _mm256_loadu_ps(out + d);
        for (int64_t i = 0; i < n; i++)
            a = _mm256_fmadd_ps(_mm256_broadcast_ss(P + i), _mm256_loadu_ps(C + i * ldc + d), a);
        _mm256_storeu_ps(out + d, a);
        return;
    }
    for (int64_t e = d; e < width; e++) { /* the same fused chain, one lane */
        float a = first ? 0.0f : out[e];
        for (int64_t i = 0; i < n; i++)
            a = fmaf(P[i], C[i * ldc + e], a);
        out[e] = a;
    }
}

void HY_AVX2 hy_avx2_attn_pv(float *out, int64_t ldo, const float *P, int64_t ldp, int64_t m, const float *C,
                             int64_t ldc, int64_t n, int64_t width)
{
    const int64_t w16 = width & ~(int64_t)15, mb = m - m % PV_M;
    if (n <= 0) {
        for (int64_t r = 0; r < m; r++)
            memset(out + r * ldo, 0, (size_t)width * sizeof(float));
        return;
    }
    for (int64_t i0 = 0; i0 < n; i0 += PV_CHUNK) {
        const int64_t ni = n - i0 < PV_CHUNK ? n - i0 : PV_CHUNK;
        const float *Ci = C + i0 * ldc;
        for (int64_t j = 0; j < mb; j += PV_M)
            for (int64_t d = 0; d < w16; d += 16)
                pv_block(out + j * ldo, ldo, P + j * ldp + i0, ldp, Ci, ldc, ni, d, i0 == 0);
        for (int64_t r = 0; r < m; r++)
            for (int64_t d = r < mb ? w16 : 0; d < width; d += 8)
                pv_one(out + r * ldo, P + r * ldp + i0, Ci, ldc, ni, d, width, i0 == 0);
    }
}

#endif /* __x86_64__ */
