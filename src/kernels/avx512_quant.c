/* avx512_quant.c - AVX-512 matmul kernels for FP8 / MXFP8 / MXFP4 weights (avx512_quant.h).
 *
 * Decode tiles (up to 4 tokens x 4 rows): each 32-element block of a row is widened in registers
 * (two 16-lane vectors, elements in increasing k) and fed to the tile's chains; each row's bytes
 * are prefetched PF_ROWS rows ahead. Prefill panels (avx512.c) use the same block decoder.
 * Exactness (checked in tests/unit/test_kernels_quant.c against hy_tensor_get):
 * - E4M3: b sign-extended, << 20, & 0x87F00000 = f32 bits of v(b) * 2^-120 exactly (sign at 31,
 *   the 7 magnitude bits at 20..26); times c = scale * 2^120 (exact power-of-two rescaling) that is
 *   one rounding of v * scale, as hy_tensor_get. c is not finite for MX bytes 135..254 and
 *   per-tensor scales >= 2^8: those blocks are widened by hy_tensor_get. NaN codes 0x7f / 0xff are
 *   detected per 32 bytes; a tile with one is recomputed scalar-widened (exact NaN propagation);
 *   tensors the loader found free of NaN codes (nan_free) skip the test.
 * - E2M1: e2m1(n) * 2^(s-127) (or * scale) by one multiply of the looked-up value, as hy_tensor_get.
 */
#if defined(__x86_64__)

#include "kernels/avx512_quant.h"

#include "kernels/avx2_quant.h"
#include "kernels/avx512_common.h"
#include "kernels/kernel_table.h"
#include "kernels/task_rows.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

enum { Q_E4M3 = 0, Q_E2M1 = 1 };

static float tab_e8m0[256];     /* 2^(s-127); NaN at 255 */
static float tab_e8m0_120[256]; /* 2^(s-127+120) for s < 135, NaN at 255 (others unused: scalar route) */
static float tab_e2m1[16] __attribute__((aligned(64))); /* the 16 E2M1 values */
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static void tab_init(void)
{
    for (int s = 0; s < 256; s++) {
        tab_e8m0[s] = hy_e8m0_to_f32((uint8_t)s);
        tab_e8m0_120[s] = s < 135 || s == 255 ? hy_e8m0_to_f32((uint8_t)s) * 0x1p120f : 0.0f;
    }
    for (int n = 0; n < 16; n++)
        tab_e2m1[n] = hy_e2m1_to_f32((uint8_t)n);
}

#ifndef PF_ROWS
#define PF_ROWS 4 /* prefetch distance in rows (as avx2_quant.c; not tuned on AVX-512 hardware) */
#endif

/* What a call needs to address rows and scales. */
struct qw {
    const struct hy_tensor *W;
    const uint8_t *data, *scales;
    int64_t K, row_bytes, n_sb, pf;
    float cscale; /* non-MX multiplier (E4M3: scale * 2^120) */
    int scalar;   /* non-MX E4M3 whose scale * 2^120 overflows: every block scalar */
    int fold;     /* 1: the raw scheme (E4M3 values * 2^-120; cscale applied to x by the caller) */
};

/* fold: 1 to take the raw scheme where the tensor allows it (hy_avx2q_fold_scale), 0 for exact values. */
static void qw_init(struct qw *q, const struct hy_tensor *W, int fold)
{
    pthread_once(&tab_once, tab_init);
    q->W = W;
    q->data = W->data;
    q->scales = W->mx_scales;
    q->K = W->cols;
    q->row_bytes = hy_tensor_row_bytes(W);
    q->n_sb = (W->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK;
    q->pf = PF_ROWS * q->row_bytes;
    const float s = W->qscheme == HY_QS_PER_TENSOR ? W->scale : 1.0f;
    q->cscale = W->dtype == HY_DTYPE_F8_E4M3 ? s * 0x1p120f : s;
    q->scalar = W->dtype == HY_DTYPE_F8_E4M3 && isfinite(s) && !isfinite(q->cscale);
    q->fold = fold && W->dtype == HY_DTYPE_F8_E4M3 && W->qscheme != HY_QS_MX32 && !q->scalar;
}

int hy_avx512q_supported(const struct hy_tensor *W)
{
    return hy_avx2q_supported(W);
}

/* 32 E4M3 bytes at p -> w[0], w[1] = elements 0-15, 16-31 as v * 2^-120, times c when MUL; with CHK,
 * NaN-code bytes or-ed into *nan. */
HY_AVX512_INLINE void dec32_e4m3(const int MUL, const int CHK, const uint8_t *p, __m512 c, __m512 w[2], __mmask32 *nan)
{
    const __m512i m = _mm512_set1_epi32((int)0x87F00000u);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 16 * h)));
        w[h] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(v, 20), m));
        if (MUL)
            w[h] = _mm512_mul_ps(w[h], c);
    }
    if (CHK)
        *nan |= hy_avx512_e4m3_nan32(p);
}

/* 16 bytes at p = 32 E2M1 codes (element 2j in the low nibble of byte j) -> w[0], w[1] = elements
 * 0-15, 16-31, each e2m1 value times c: the 16 products e2m1(n) * c are formed once per block and
 * looked up (the same roundings as multiplying after the lookup), and vpermps reads only bits 0-3
 * of each index, so the even elements' high nibbles need no mask. */
HY_AVX512_INLINE void dec32_e2m1(const uint8_t *p, __m512 c, __m512 w[2])
{
    /* dword j of lane L (element 4L + i) <- byte (4L + i) >> 1 = 2L + (i >> 1) (+ 8 for w[1]) */
    const __m512i sel0 = _mm512_set_epi8(-1, -1, -1, 7, -1, -1, -1, 7, -1, -1, -1, 6, -1, -1, -1, 6, /* lane 3 */
                                         -1, -1, -1, 5, -1, -1, -1, 5, -1, -1, -1, 4, -1, -1, -1, 4, /* lane 2 */
                                         -1, -1, -1, 3, -1, -1, -1, 3, -1, -1, -1, 2, -1, -1, -1, 2, /* lane 1 */
                                         -1, -1, -1, 1, -1, -1, -1, 1, -1, -1, -1, 0, -1, -1, -1, 0);
    const __m512i sel1 = _mm512_add_epi32(sel0, _mm512_set1_epi32(8));
    const __m512i sh = _mm512_set_epi32(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0); /* odd element: high nibble */
    const __m512 lutc = _mm512_mul_ps(_mm512_load_ps(tab_e2m1), c);
    const __m512i t = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p));
    const __m512i i0 = _mm512_srlv_epi32(_mm512_shuffle_epi8(t, sel0), sh);
    const __m512i i1 = _mm512_srlv_epi32(_mm512_shuffle_epi8(t, sel1), sh);
    w[0] = _mm512_permutexvar_ps(i0, lutc);
    w[1] = _mm512_permutexvar_ps(i1, lutc);
}

/* Elements [k0, k0+n) of row r (n <= 32) to tmp[0..32), zero-padded: exact (hy_tensor_get), or in
 * the raw scheme (q->fold) e4m3 * 2^-120 (exact too: E4M3 subnormals land on f32 subnormals). */
static void widen_scalar(const struct qw *q, int64_t r, int64_t k0, int64_t n, float *tmp)
{
    for (int64_t i = 0; i < 32; i++)
        tmp[i] = i >= n    ? 0.0f
                 : q->fold ? hy_e4m3_to_f32(q->data[r * q->row_bytes + k0 + i]) * 0x1p-120f
                           : hy_tensor_get(q->W, r, k0 + i);
}

/* The multiplier of the block at k of row r, and whether the block must be widened scalar. */
HY_AVX512_INLINE __m512 block_scale(const int E, const int MX, const struct qw *q, int64_t r, int64_t k, int *scalar)
{
    if (!MX) {
        *scalar = E == Q_E4M3 && q->scalar;
        return _mm512_set1_ps(q->cscale);
    }
    const uint8_t s = q->scales[r * q->n_sb + (k >> 5)];
    *scalar = E == Q_E4M3 && s >= 135 && s != 255;
    return _mm512_set1_ps(E == Q_E4M3 ? tab_e8m0_120[s] : tab_e8m0[s]);
}

/* The full block at k of row r into w[2]: exact values, or raw ones under q->fold; E4M3 NaN codes and
 * overflowing scales scalar. */
HY_AVX512_INLINE void block(const int E, const int MX, const struct qw *q, int64_t r, int64_t k, __m512 w[2])
{
    const uint8_t *row = q->data + r * q->row_bytes;
    int scalar;
    const __m512 c = block_scale(E, MX, q, r, k, &scalar);
    if (!scalar && E == Q_E4M3) {
        __mmask32 nan = 0;
        if (MX || !q->fold)
            dec32_e4m3(1, 1, row + k, c, w, &nan);
        else
            dec32_e4m3(0, 1, row + k, c, w, &nan);
        scalar = nan != 0;
    } else if (!scalar)
        dec32_e2m1(row + k / 2, c, w);
    if (scalar) {
        float tmp[32];
        widen_scalar(q, r, k, 32, tmp);
        w[0] = _mm512_loadu_ps(tmp);
        w[1] = _mm512_loadu_ps(tmp + 16);
    }
}

/* Decode chains for tiles with a scalar-widened block somewhere (every block through widen_scalar;
 * same values, same chain as tile()). */
static HY_AVX512 void tile_slow(int mr, int nr, const struct qw *q, const float *x, int64_t ldx, int64_t n0, float *y,
                                int64_t ldy)
{
    __m512 acc[4][4];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            acc[i][j] = _mm512_setzero_ps();
    const int64_t K = q->K;
    for (int64_t k = 0; k < K; k += 32) {
        const int64_t n = K - k < 32 ? K - k : 32;
        for (int j = 0; j < nr; j++) {
            float tmp[32];
            widen_scalar(q, n0 + j, k, n, tmp);
            for (int64_t c = 0; c * 16 < n; c++) {
                const int64_t kc = k + 16 * c;
                const __m512 wv = _mm512_loadu_ps(tmp + 16 * c);
                for (int i = 0; i < mr; i++)
                    acc[i][j] =
                        _mm512_fmadd_ps(hy_avx512_load_tail(HY_DTYPE_F32, x + i * ldx, kc, K - kc), wv, acc[i][j]);
            }
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            y[i * ldy + j] = hy_avx512_hsum(acc[i][j]);
}

/* 1 if the tile of nr rows from n0 needs tile_slow from the start (E4M3 scales overflowing: an MX
 * scale byte in 135..254). The rows' scale bytes are contiguous (a byte loop here cost about a fifth
 * of an MXFP8 decode tile at K = 4096; the avx2 scan takes 32 at a time). */
static int tile_needs_slow(const int E, const int MX, const struct qw *q, int64_t n0, int nr)
{
    if (E != Q_E4M3)
        return 0;
    if (!MX)
        return q->scalar;
    return hy_avx2q_mx_scales_overflow(q->scales + n0 * q->n_sb, (int64_t)nr * q->n_sb);
}

/* y[i*ldy + j] = x row i (stride ldx) . W row n0+j, i < MR <= 4, j < NR <= 4. The caller routed
 * tiles with overflowing scales to tile_slow; returns 1 (results not stored) if an E4M3 NaN code
 * was seen. */
HY_AVX512_INLINE int tile(const int E, const int MX, const int FOLD, const int CHK, const int MR, const int NR,
                          const struct qw *q, const float *x, int64_t ldx, int64_t n0, float *y, int64_t ldy)
{
    const int64_t K = q->K, K32 = K & ~(int64_t)31;
    const uint8_t *rp[4], *sp[4];
#pragma GCC unroll 4
    for (int j = 0; j < NR; j++) {
        rp[j] = q->data + (n0 + j) * q->row_bytes;
        sp[j] = MX ? q->scales + (n0 + j) * q->n_sb : NULL;
    }
    const float *tab = E == Q_E4M3 ? tab_e8m0_120 : tab_e8m0;
    const __m512 cs = _mm512_set1_ps(q->cscale);
    __mmask32 nan = 0;
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            acc[i][j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K32; k += 32) {
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            __m512 w[2];
            if ((k & (E == Q_E4M3 ? 63 : 127)) == 0) /* one prefetch per 64 bytes of the row */
                _mm_prefetch((const char *)rp[j] + (E == Q_E4M3 ? k : k / 2) + q->pf, _MM_HINT_T0);
            const __m512 c = MX ? _mm512_set1_ps(tab[sp[j][k >> 5]]) : cs;
            if (E == Q_E4M3)
                dec32_e4m3(!FOLD, CHK, rp[j] + k, c, w, &nan); /* FOLD: raw values, x arrives times cscale */
            else
                dec32_e2m1(rp[j] + k / 2, c, w);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
                for (int i = 0; i < MR; i++)
                    acc[i][j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i * ldx + k + 16 * h), w[h], acc[i][j]);
        }
    }
    if (nan)
        return 1;
    if (K32 < K) { /* the last K % 32 elements: scalar-widened, zero-padded chunks of 16 */
        float tmp[4][32];
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            widen_scalar(q, n0 + j, K32, K - K32, tmp[j]);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const int64_t kc = K32 + 16 * h;
            if (kc >= K)
                break;
            __m512 xv[4];
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                xv[i] = hy_avx512_load_tail(HY_DTYPE_F32, x + i * ldx, kc, K - kc);
#pragma GCC unroll 4
            for (int j = 0; j < NR; j++)
#pragma GCC unroll 4
                for (int i = 0; i < MR; i++)
                    acc[i][j] = _mm512_fmadd_ps(xv[i], _mm512_loadu_ps(tmp[j] + 16 * h), acc[i][j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            y[i * ldy + j] = hy_avx512_hsum(acc[i][j]);
    return 0;
}

#define Q_CASES(E, MX, FOLD, CHK, MR)                                                                                  \
    case (MR)*8 + 1:                                                                                                   \
        nan = tile(E, MX, FOLD, CHK, MR, 1, q, x, ldx, n0, y, ldy);                                                    \
        break;                                                                                                         \
    case (MR)*8 + 2:                                                                                                   \
        nan = tile(E, MX, FOLD, CHK, MR, 2, q, x, ldx, n0, y, ldy);                                                    \
        break;                                                                                                         \
    case (MR)*8 + 3:                                                                                                   \
        nan = tile(E, MX, FOLD, CHK, MR, 3, q, x, ldx, n0, y, ldy);                                                    \
        break;                                                                                                         \
    case (MR)*8 + 4:                                                                                                   \
        nan = tile(E, MX, FOLD, CHK, MR, 4, q, x, ldx, n0, y, ldy);                                                    \
        break;

/* FOLD: the raw scheme (q->fold must match); CHK: test E4M3 blocks for NaN codes (0 for tensors the
 * loader marked nan_free). */
#define DEF_Q_TILE(NAME, E, MX, FOLD, CHK)                                                                             \
    static HY_AVX512 void NAME(int mr, int nr, const struct qw *q, const float *x, int64_t ldx, int64_t n0, float *y,  \
                               int64_t ldy)                                                                            \
    {                                                                                                                  \
        if (tile_needs_slow(E, MX, q, n0, nr)) {                                                                       \
            tile_slow(mr, nr, q, x, ldx, n0, y, ldy);                                                                  \
            return;                                                                                                    \
        }                                                                                                              \
        int nan = 0;                                                                                                   \
        switch (mr * 8 + nr) {                                                                                         \
            Q_CASES(E, MX, FOLD, CHK, 1)                                                                               \
            Q_CASES(E, MX, FOLD, CHK, 2)                                                                               \
            Q_CASES(E, MX, FOLD, CHK, 3)                                                                               \
            Q_CASES(E, MX, FOLD, CHK, 4)                                                                               \
        default:                                                                                                       \
            break;                                                                                                     \
        }                                                                                                              \
        if (nan) /* an E4M3 NaN code: the scalar route gives the exact NaN results */                                  \
            tile_slow(mr, nr, q, x, ldx, n0, y, ldy);                                                                  \
    }

DEF_Q_TILE(tile_e4m3_t, Q_E4M3, 0, 0, 1)    /* per-tensor, exact values, NaN test */
DEF_Q_TILE(tile_e4m3_t_nf, Q_E4M3, 0, 0, 0) /* per-tensor, exact values, checked NaN-free at load */
DEF_Q_TILE(tile_e4m3_tr, Q_E4M3, 0, 1, 1)   /* per-tensor, raw scheme */
DEF_Q_TILE(tile_e4m3_tr_nf, Q_E4M3, 0, 1, 0)
DEF_Q_TILE(tile_e4m3_mx, Q_E4M3, 1, 0, 1) /* MXFP8 */
DEF_Q_TILE(tile_e4m3_mx_nf, Q_E4M3, 1, 0, 0)
DEF_Q_TILE(tile_e2m1_t, Q_E2M1, 0, 0, 0)  /* FP4, one scale */
DEF_Q_TILE(tile_e2m1_mx, Q_E2M1, 1, 0, 0) /* MXFP4 */

typedef void (*q_tile_fn)(int, int, const struct qw *, const float *, int64_t, int64_t, float *, int64_t);

static q_tile_fn q_tile_for(const struct qw *q)
{
    const int mx = q->W->qscheme == HY_QS_MX32, nf = q->W->nan_free;
    if (q->W->dtype != HY_DTYPE_F8_E4M3)
        return mx ? tile_e2m1_mx : tile_e2m1_t;
    if (mx)
        return nf ? tile_e4m3_mx_nf : tile_e4m3_mx;
    if (q->fold)
        return nf ? tile_e4m3_tr_nf : tile_e4m3_tr;
    return nf ? tile_e4m3_t_nf : tile_e4m3_t;
}

/* Per-call state: the exact and raw-scheme views of W and, in the raw scheme, the scaled activations
 * with their per-token ok flags (NULL xs / ok: every token exact). */
struct qcall {
    struct qw qe, qf;
    q_tile_fn fe, ff;
    float *xs;
    uint8_t *ok; /* after the rows, in the same buffer (hy_avx2q_scaled_rows) */
};

static void qcall_init(struct qcall *c, const struct hy_tensor *W, const float *x, int64_t ldx, int64_t T)
{
    qw_init(&c->qe, W, 0);
    qw_init(&c->qf, W, 1);
    c->fe = q_tile_for(&c->qe);
    c->ff = q_tile_for(&c->qf);
    c->xs = NULL;
    c->ok = NULL;
    if (c->qf.fold) /* out of memory: NULL, every token exact (T-invariance holds while memory lasts) */
        c->xs = hy_avx2q_scaled_rows(x, ldx, T, W->cols, c->qf.cscale, &c->ok);
}

/* Rows [n0, n0+nr) (nr <= 4) for every token: runs of up to 4 consecutive tokens of one scheme per
 * tile, raw (qf, scaled xs) where ok[t], else exact (qe, x). */
static void rows_tiles(const struct qcall *c, const float *x, int64_t ldx, int64_t T, int64_t n0, int nr, float *y,
                       int64_t ldy)
{
    for (int64_t t = 0; t < T;) {
        const int raw = c->ok && c->ok[t];
        int mt = 1;
        while (mt < 4 && t + mt < T && (c->ok && c->ok[t + mt]) == raw)
            mt++;
        if (raw)
            c->ff(mt, nr, &c->qf, c->xs + t * c->qf.K, c->qf.K, n0, y + t * ldy, ldy);
        else
            c->fe(mt, nr, &c->qe, x + t * ldx, ldx, n0, y + t * ldy, ldy);
        t += mt;
    }
}

void hy_avx512q_rows(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t T, const struct hy_tensor *W,
                     int64_t n0, int64_t nb)
{
    struct qcall c;
    qcall_init(&c, W, x, ldx, T);
    for (int64_t j = 0; j < nb; j += 4)
        rows_tiles(&c, x, ldx, T, n0 + j, (int)(nb - j < 4 ? nb - j : 4), y + j, ldy);
}

void hy_avx512q_gemv(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    struct qcall c;
    qcall_init(&c, W, x, W->cols, T);
    const int64_t N = W->rows, K = W->cols, groups = (N + 3) / 4;
    const int par = (double)N * (double)K * (double)T > 65536.0;
    (void)par;
    /* dynamic tasks (task_rows.h): a thread that loses its core on a shared machine does not hold up
     * the step; which thread computes a row never changes its result */
    const int64_t task_groups = hy_task_groups(W);
#pragma omp parallel for schedule(dynamic, task_groups) if (par)
    for (int64_t g = 0; g < groups; g++)
        rows_tiles(&c, x, K, T, g * 4, (int)(N - g * 4 < 4 ? N - g * 4 : 4), y + g * 4, N);
}

/* Widens the first K32 (a multiple of 32) elements of row r to f32 at d; one instance per format. */
#define DEF_WIDEN(NAME, E, MX)                                                                                         \
    static HY_AVX512 void NAME(const struct qw *q, int64_t r, int64_t K32, float *d)                                   \
    {                                                                                                                  \
        for (int64_t k = 0; k < K32; k += 32) {                                                                        \
            __m512 w[2];                                                                                               \
            block(E, MX, q, r, k, w);                                                                                  \
            _mm512_storeu_ps(d + k, w[0]);                                                                             \
            _mm512_storeu_ps(d + k + 16, w[1]);                                                                        \
        }                                                                                                              \
    }

DEF_WIDEN(widen_e4m3_t, Q_E4M3, 0)
DEF_WIDEN(widen_e4m3_mx, Q_E4M3, 1)
DEF_WIDEN(widen_e2m1_t, Q_E2M1, 0)
DEF_WIDEN(widen_e2m1_mx, Q_E2M1, 1)

static void widen_rows_scheme(const struct hy_tensor *W, int fold, int64_t n0, int64_t nb, int64_t ldw, float *dst)
{
    struct qw q;
    qw_init(&q, W, fold);
    const int mx = W->qscheme == HY_QS_MX32;
    void (*fn)(const struct qw *, int64_t, int64_t, float *) =
        W->dtype == HY_DTYPE_F8_E4M3 ? (mx ? widen_e4m3_mx : widen_e4m3_t) : (mx ? widen_e2m1_mx : widen_e2m1_t);
    const int64_t K = W->cols, K32 = K & ~(int64_t)31, Kp = (K + 15) & ~(int64_t)15;
    for (int64_t r = 0; r < nb; r++) {
        float *d = dst + r * ldw;
        fn(&q, n0 + r, K32, d);
        if (K32 < K) {
            float tmp[32];
            widen_scalar(&q, n0 + r, K32, K - K32, tmp);
            memcpy(d + K32, tmp, (size_t)(Kp - K32) * sizeof(float));
        }
    }
}

void hy_avx512q_widen_rows(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst)
{
    widen_rows_scheme(W, 0, n0, nb, ldw, dst);
}

void hy_avx512q_widen_rows_raw(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst)
{
    widen_rows_scheme(W, 1, n0, nb, ldw, dst);
}

#endif /* __x86_64__ */
