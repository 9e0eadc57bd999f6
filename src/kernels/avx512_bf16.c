/* avx512_bf16.c - hy_matmul_bf16x on AVX512-BF16 dot products (vdpbf16ps), the avx512 level's
 * matmul_bf16x and matmul_rows_bf16x where the CPU has AVX512_BF16 (Cooper Lake, Sapphire Rapids and
 * later, Zen 4 and 5), and the amx level's for decode-sized calls.
 *
 * The chain (one per output, whatever the path): x (bf16 values by contract) as bf16 rows of
 * Kp = round_up(K, 32) elements; the weight row as its exact bf16 values (BF16 itself; FP8 / MXFP8 /
 * MXFP4 dequantized, bf16_panel.h; a per-tensor scale left out); acc = dpbf16(acc, x[k..k+32],
 * w[k..k+32]) over the 32-element chunks in increasing k (lane j adds the products of elements 2j and
 * 2j+1 of each chunk), zeros past K, then hy_avx512_hsum, times the per-tensor scale. BF16 weights
 * split it in two at chunk h = K / 32 / 2 (split_of): one acc over chunks [0, h), another over the
 * rest, added lane by lane before the hsum (so a T = 1 row runs two streams and two chains). Products of bf16
 * values are exact in fp32; results differ from hy_matmul's f32 chain in rounding order only (and
 * vdpbf16ps flushes denormals). Two paths compute it, bitwise alike:
 * - prefill (T >= HY_BF16X_MIN_T): each thread takes blocks of 16 weight rows, read in place (BF16,
 *   K % 32 == 0) or written to a zero-padded bf16 panel (FP8 / MX decoded by the decode tiles'
 *   decoders below; rows outside their range widened by hy_avx512q_widen_rows, then hy_f32_to_bf16:
 *   the same words), and runs 3 tokens x 8 rows register tiles over it, in blocks of 63 tokens
 *   and of 64 chunks of K; between K blocks the tiles' accumulators are stored and reloaded whole,
 *   so every lane's order is the chain's;
 * - decode (T < HY_BF16X_MIN_T, and matmul_rows_bf16x for any T): 4 tokens x 4 rows register tiles
 *   decode each 32-element chunk of a weight row in registers to the same bf16 words:
 *   E4M3: sign-extended to words; (w << 4) & 0x07F0 puts exponent and mantissa at bits 4..10, and
 *   adding (s - 7) << 7 (s = the E8M0 scale byte, 127 for unscaled / per-tensor FP8) rebases the
 *   exponent, exact for normal codes when 7 <= s <= 246 (the bf16 exponent field stays in 1..254);
 *   codes with exponent 0 (zeros, subnormals) are looked up (vpermw) in an 8-entry table of
 *   bf16(m * 2^-9 * 2^(s-127)), the panel's values; the sign is or-ed last. E4M3 tensors marked
 *   nan_free, on CPUs with AVX512_VBMI (Sapphire Rapids and later, Zen 4 and 5; not Cooper Lake),
 *   take byte tables instead, 64 codes per step: vpermi2b looks up the low and the high bytes of the
 *   bf16 values of the codes' 7 magnitude bits in two 128-entry tables, the sign is or-ed into the
 *   high bytes, and two vpermt2b interleave the bytes into the same 32-word vectors (5 vector
 *   instructions per 64 codes instead of 7 per 32: docs/tuning.md); MXFP8
 *   then adds (s - 127) << 7 to the nonzero words, exact for 10 <= s <= 246 (a 4-row group with a
 *   scale byte in 7..9 takes the rebase above, whole);
 *   E2M1: byte j to dword j (vpmovzxbd), its low nibble to word 2j and high nibble to word 2j+1, looked
 *   up (vpermw) in a 16-entry table of e2m1(n) * 2^(s-127) per scale byte: the panel's values for
 *   every s. By default E2M1 weights run in the E2M1 order instead (e2m1_order: x and the panels hold
 *   each full 64-element group's even elements first, then its odd ones, so lane j adds elements
 *   4j, 4j+2 and then 4j+1, 4j+3): the tiles take 64 codes per step as two nibble vectors from one
 *   vpmovzxbw, looked up in one table of both blocks' values (eo_pair). Groups of rows that hold an MXFP8 scale byte outside [7, 246] or an E4M3 NaN code
 *   (tensors not marked nan_free) are computed from a bf16 panel of their rows (the prefill route);
 *   the last K % 32 elements of quantized rows are decoded scalar (hy_tensor_get, hy_f32_to_bf16), as
 *   the panel does.
 * So results do not depend on T, on the path, on how rows are split into calls, or on the thread
 * count. F32 / F16 weights take hy_avx512_matmul (the f32 chain), as does everything when memory for
 * the bf16 copy of x cannot be had. HYINFER_MXFP4_ACT=mxint8 routes MXFP4 weights to the W4A8 kernel
 * (w4a8.h) for every T.
 */
#if defined(__x86_64__)

#include "kernels/avx512_bf16.h"

#include "base/assert.h"
#include "base/cpu.h"
#include "kernels/avx512_common.h"
#include "kernels/avx512_quant.h"
#include "kernels/bf16_panel.h"
#include "kernels/kernel_table.h"
#include "kernels/scratch.h"
#include "kernels/task_rows.h"
#include "kernels/w4a8.h"

/* Per-thread buffers of hy_avx512bf16_matmul_bf16x, kept between calls (no allocation per call): the
 * bf16 copy of x (calling thread) and each thread's weight panel, widened row and tile accumulators. */
static _Thread_local struct hy_scratch xb_buf, panel_buf, wrow_buf, acc_buf;

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define HY_BF16_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HY_BF16_SANITIZED 1
#endif
#endif

/* Tests: the emulated intrinsics are large, and sanitizer builds instrument every access; there the
 * per-chunk body stays one function per instance so the file compiles in reasonable time. */
#ifdef HY_AVX512_SIMDE
#define BF16_TARGET
#define BF16_INLINE static inline __attribute__((always_inline))
#define BF16_CHUNK static __attribute__((noinline))
#define VB_TARGET
#define VB_INLINE BF16_INLINE
#define VB_CHUNK BF16_CHUNK
#else
#define VB_TARGET_STR HY_AVX512_TARGET ",avx512bf16,avx512vbmi" /* the E4M3 byte-table tiles only */
#ifdef HY_BF16_SANITIZED
#define BF16_CHUNK static __attribute__((noinline, target(HY_AVX512_TARGET ",avx512bf16")))
#define VB_CHUNK static __attribute__((noinline, target(VB_TARGET_STR)))
#else
#define BF16_CHUNK BF16_INLINE
#define VB_CHUNK VB_INLINE
#endif
#define BF16_TARGET __attribute__((target(HY_AVX512_TARGET ",avx512bf16")))
#define BF16_INLINE static inline __attribute__((always_inline, target(HY_AVX512_TARGET ",avx512bf16")))
#define VB_TARGET __attribute__((target(VB_TARGET_STR)))
#define VB_INLINE static inline __attribute__((always_inline, target(VB_TARGET_STR)))
#endif

/* ---- x as bf16 rows ---- */

/* xb[t * Kp + k] = hy_f32_to_bf16(x[t * ldx + k]) for k < K, 0 for K <= k < Kp (Kp % 32 == 0), bitwise
 * as the scalar rule (round to nearest even; NaN keeps its top bits and is made quiet). */
static BF16_TARGET void x_to_bf16(const float *x, int64_t ldx, int64_t T, int64_t K, uint16_t *xb, int64_t Kp)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000), one = _mm512_set1_epi32(1),
                  bias = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
    const int64_t K16 = K & ~(int64_t)15;
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * ldx;
        uint16_t *d = xb + t * Kp;
        for (int64_t k = 0; k < K16; k += 16) {
            const __m512i u = _mm512_loadu_si512((const void *)(xr + k));
            const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, absm), inf);
            const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
            __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
            r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), quiet);
            _mm256_storeu_si256((__m256i *)(d + k), _mm512_cvtepi32_epi16(r));
        }
        for (int64_t k = K16; k < K; k++)
            d[k] = hy_f32_to_bf16(xr[k]);
        memset(d + K, 0, (size_t)(Kp - K) * sizeof(uint16_t));
    }
}

/* The E2M1 order of a bf16 row (MXFP4 and FP4 weights, and x against them): in every full 64-element
 * group g < K / 64, the group's 32 even elements first, then its 32 odd ones; the rest (a last odd
 * 32-element chunk, the K % 32 tail, the zero padding) stays in place. Decode tiles then decode 64 codes
 * as two nibble vectors without interleaving them (dtile_e2m1_eo); prefill panels take the same order,
 * so both run the same dpbf16 sequence per output. Rows r < n of stride ld, K elements, in place. */
static BF16_TARGET void e2m1_order(uint16_t *row, int64_t ld, int64_t n, int64_t K)
{
    const __m512i ev = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26, 24,
                                        22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0),
                  od = _mm512_add_epi16(ev, _mm512_set1_epi16(1));
    for (int64_t r = 0; r < n; r++)
        for (int64_t k = 0; k + 64 <= K; k += 64) {
            uint16_t *p = row + r * ld + k;
            const __m512i a = _mm512_loadu_si512((const void *)p), b = _mm512_loadu_si512((const void *)(p + 32));
            _mm512_storeu_si512((void *)p, _mm512_permutex2var_epi16(a, ev, b));
            _mm512_storeu_si512((void *)(p + 32), _mm512_permutex2var_epi16(a, od, b));
        }
}

/* ---- the chain over bf16 rows (prefill panels, and the decode path's panel fallback) ---- */

/* The chunk at which an output's chain splits in two, 0 for none. BF16 weights: h = K / 32 / 2, so chunks
 * [0, h) run in one chain and chunks [h, kc) (the K % 32 tail included) in another, joined by one vaddps
 * (first + second) before the hsum. The T = 1 path (rows_bf16_t1) runs the two at once: two read streams
 * and two dependency chains per row instead of one (README "Decode speed"); the tiles and panels run
 * them one after the other. Quantized formats: no split (their 4-row tiles keep 4 chains in flight). */
static int64_t split_of(const struct hy_tensor *W)
{
    return W->dtype == HY_DTYPE_BF16 ? W->cols / 32 / 2 : 0;
}

/* acc[i][j] = 0 for the tile's outputs. */
BF16_INLINE void tile_zero(const int MR, const int NR, __m512 acc[4][4])
{
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            acc[i][j] = _mm512_setzero_ps();
}

/* part = acc, then acc = 0: the first chain of a split tile set aside (split_of). */
BF16_INLINE void tile_move(const int MR, const int NR, __m512 part[4][4], __m512 acc[4][4])
{
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            part[i][j] = acc[i][j];
            acc[i][j] = _mm512_setzero_ps();
        }
}

/* acc = part + acc: the two chains of a split output joined, lane by lane, before its hsum. */
BF16_INLINE void tile_join(const int MR, const int NR, __m512 part[4][4], __m512 acc[4][4])
{
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            acc[i][j] = _mm512_add_ps(part[i][j], acc[i][j]);
}

/* ---- prefill tiles: weight rows read as bf16 (in place or from a panel) ---- */

#define PF_MR 3   /* tokens per prefill register tile (3 x 8: 24 accumulators) */
#define PF_NR 8   /* weight rows per prefill register tile */
#define PF_NB 16  /* weight rows per prefill block (a task; the most dp_panel_rows takes) */
#define PF_TB 63  /* tokens per block of x rows (a multiple of PF_MR) */
#define PF_KCB 64 /* chunks per K block: a tile group's weight rows stay in L1 while the token groups pass */

/* Accumulators kept between K blocks: per token of a PF_TB block and row of a PF_NB block, one for
 * the running chain and one for a split output's first chain. */
#define PF_BUF_VECS (2 * PF_TB * PF_NB)

/* acc[i][j] = dpbf16 over chunks [c0, c1) of x row i and w row j, for i < MR (<= PF_MR), j < NR (<= PF_NR). */
BF16_INLINE void dp_span(const int MR, const int NR, const uint16_t *x, int64_t ldx, const uint16_t *w, int64_t ldw,
                         int64_t c0, int64_t c1, __m512 acc[PF_MR][PF_NR])
{
    for (int64_t c = c0; c < c1; c++) {
        __m512bh xv[PF_MR];
#pragma GCC unroll 3
        for (int i = 0; i < MR; i++)
            xv[i] = (__m512bh)_mm512_loadu_si512((const void *)(x + i * ldx + 32 * c));
#pragma GCC unroll 8
        for (int j = 0; j < NR; j++) {
            const __m512bh wv = (__m512bh)_mm512_loadu_si512((const void *)(w + j * ldw + 32 * c));
#pragma GCC unroll 3
            for (int i = 0; i < MR; i++)
                acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv[i], wv);
        }
    }
}

enum { PF_TO_ACC, PF_TO_PART, PF_TO_Y, PF_TO_Y_JOIN }; /* where a tile's K block leaves its accumulators */

/* Chunks [c0, c1) of the chains of x rows i < MR and w rows j < NR: the accumulators start at zero, or
 * (cont) at ab[i*ldb + j]; they end in ab, in pb (a split output's first chain), or as
 * y[i*ldy + j] = hsum(acc) * oscale, after pb + acc lane by lane for PF_TO_Y_JOIN. Stored and
 * reloaded accumulators keep every lane's order, so a chain cut into K blocks is bitwise one chain. */
BF16_INLINE void dp_tile(const int MR, const int NR, const uint16_t *x, int64_t ldx, const uint16_t *w, int64_t ldw,
                         int64_t c0, int64_t c1, int cont, int to, __m512 *ab, __m512 *pb, int64_t ldb, float oscale,
                         float *y, int64_t ldy)
{
    __m512 acc[PF_MR][PF_NR];
#pragma GCC unroll 3
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
        for (int j = 0; j < NR; j++)
            acc[i][j] = cont ? ab[i * ldb + j] : _mm512_setzero_ps();
    dp_span(MR, NR, x, ldx, w, ldw, c0, c1, acc);
#pragma GCC unroll 3
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
        for (int j = 0; j < NR; j++) {
            if (to == PF_TO_ACC)
                ab[i * ldb + j] = acc[i][j];
            else if (to == PF_TO_PART)
                pb[i * ldb + j] = acc[i][j];
            else
                y[i * ldy + j] =
                    hy_avx512_hsum(to == PF_TO_Y_JOIN ? _mm512_add_ps(pb[i * ldb + j], acc[i][j]) : acc[i][j]) * oscale;
        }
}

#define BF_CASE(MR, NR)                                                                                                \
    case (MR)*16 + (NR):                                                                                               \
        dp_tile(MR, NR, x, ldx, w, ldw, c0, c1, cont, to, ab, pb, ldb, oscale, y, ldy);                                \
        break;
#define BF_CASES(MR)                                                                                                   \
    BF_CASE(MR, 1)                                                                                                     \
    BF_CASE(MR, 2) BF_CASE(MR, 3) BF_CASE(MR, 4) BF_CASE(MR, 5) BF_CASE(MR, 6) BF_CASE(MR, 7) BF_CASE(MR, 8)

static BF16_TARGET void dp_tile_fn(int mr, int nr, const uint16_t *x, int64_t ldx, const uint16_t *w, int64_t ldw,
                                   int64_t c0, int64_t c1, int cont, int to, __m512 *ab, __m512 *pb, int64_t ldb,
                                   float oscale, float *y, int64_t ldy)
{
    switch (mr * 16 + nr) {
        BF_CASES(1)
        BF_CASES(2)
        BF_CASES(3)
    default:
        break;
    }
}

/* y rows t < T (stride ldy), outputs j < nr (<= PF_NB) over the panel rows (stride Kp); h: split_of;
 * buf: PF_BUF_VECS vectors, 64-byte aligned. Blocks of PF_TB tokens; within one, each K block of each
 * group of PF_NR weight rows meets every token group in turn, so those rows stay in L1 while the
 * block's x rows pass (docs/tuning.md). */
static void dp_panel_rows(const uint16_t *xb, int64_t Kp, int64_t T, const uint16_t *wp, int64_t nr, int64_t h,
                          int64_t kc, float oscale, float *y, int64_t ldy, __m512 *buf)
{
    HY_ASSERT(nr <= PF_NB);
    __m512 *const ab = buf, *const pb = buf + PF_TB * PF_NB;
    for (int64_t t0 = 0; t0 < T; t0 += PF_TB) {
        const int64_t t1 = T - t0 < PF_TB ? T : t0 + PF_TB;
        for (int64_t c0 = 0; c0 < kc;) {
            /* the block [c0, c1) lies within one chain: [0, h) or [h, kc) */
            const int64_t end = c0 < h ? h : kc, c1 = end - c0 < PF_KCB ? end : c0 + PF_KCB;
            const int cont = c0 != 0 && c0 != h;
            const int to = c1 < end ? PF_TO_ACC : end == h ? PF_TO_PART : h > 0 ? PF_TO_Y_JOIN : PF_TO_Y;
            for (int64_t j = 0; j < nr; j += PF_NR)
                for (int64_t t = t0; t < t1; t += PF_MR) {
                    const int64_t slot = (t - t0) * PF_NB + j;
                    dp_tile_fn((int)(t1 - t < PF_MR ? t1 - t : PF_MR), (int)(nr - j < PF_NR ? nr - j : PF_NR),
                               xb + t * Kp, Kp, wp + j * Kp, Kp, c0, c1, cont, to, ab + slot, pb + slot, PF_NB, oscale,
                               y + t * ldy + j, ldy);
                }
            c0 = c1;
        }
    }
}

/* ---- decode tiles: weights decoded to bf16 in registers ---- */

enum { F_BF16 = 0, F_E4M3, F_E4M3_MX, F_E2M1, F_E2M1_MX };

#define E4M3_S_MIN 7 /* MXFP8 scale bytes whose normal codes decode exactly (see top) */
#define E4M3_S_MAX 246
#define S_ONE 127 /* the scale byte of 2^0: unscaled and per-tensor formats */

static uint16_t dq_tab_e2m1[256][32] __attribute__((aligned(64))); /* bf16(e2m1(n & 15) * 2^(s-127)) */
static uint16_t dq_tab_sub[256][32] __attribute__((aligned(64)));  /* bf16(e4m3(m) * 2^(s-127)), m < 8; 0 after */
static uint16_t dq_tab_off[256][32] __attribute__((aligned(64)));  /* (s - 7) << 7, the E4M3 exponent rebase */
/* The byte-table decoder's tables: vb_tab[0..1] the low bytes of bf16(e4m3(m)) for m = 0..127 (64 per
 * vector), vb_tab[2..3] the high bytes; vb_il[h] interleaves low and high bytes of codes 32h..32h+31
 * into words (byte 2k from the first operand's k + 32h, byte 2k+1 from the second's). MXFP8 adds
 * (s - 127) << 7 (mod 2^16) to those words, exact for every nonzero code when VB_S_MIN <= s <=
 * E4M3_S_MAX (2^-9, the smallest, keeps bf16 exponent field s - 9 >= 1). */
#define VB_S_MIN 10
static uint8_t vb_tab[4][64] __attribute__((aligned(64)));
static uint8_t vb_il[2][64] __attribute__((aligned(64)));
static uint32_t vb_off[256]; /* ((s - 127) << 7) mod 2^16 in both words: vpbroadcastd from memory, no shuffle */
static int vbmi_ok, vbmi_on; /* the CPU has AVX512_VBMI; its tiles are in use (hy_avx512bf16_set_vbmi) */
static int e2m1_eo_on = 1;   /* E2M1 weights in the E2M1 order (hy_avx512bf16_set_e2m1_order) */
static pthread_once_t dq_tab_once = PTHREAD_ONCE_INIT;

static void dq_tab_init(void)
{
    for (int s = 0; s < 256; s++) {
        const float f = hy_e8m0_to_f32((uint8_t)s);
        for (int i = 0; i < 32; i++) {
            dq_tab_e2m1[s][i] = hy_f32_to_bf16(hy_e2m1_to_f32((uint8_t)(i & 15)) * f);
            dq_tab_sub[s][i] = i < 8 ? hy_f32_to_bf16(hy_e4m3_to_f32((uint8_t)i) * f) : 0;
            dq_tab_off[s][i] = s >= E4M3_S_MIN && s <= E4M3_S_MAX ? (uint16_t)((s - 7) << 7) : 0;
        }
    }
    for (int m = 0; m < 128; m++) {
        const uint16_t v = hy_f32_to_bf16(hy_e4m3_to_f32((uint8_t)m)); /* m = 127: NaN, never looked up */
        vb_tab[m >> 6][m & 63] = (uint8_t)(v & 0xFF);
        vb_tab[2 + (m >> 6)][m & 63] = (uint8_t)(v >> 8);
    }
    for (int s = 0; s < 256; s++) {
        const uint32_t o = (uint16_t)((s - 127) * 128);
        vb_off[s] = o | o << 16;
    }
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 32; k++) {
            vb_il[h][2 * k] = (uint8_t)(32 * h + k);
            vb_il[h][2 * k + 1] = (uint8_t)(64 + 32 * h + k);
        }
#ifdef HY_AVX512_SIMDE
    vbmi_ok = 1; /* the emulation has every instruction */
#else
    vbmi_ok = hy_cpu_caps()->avx512vbmi;
#endif
    vbmi_on = vbmi_ok;
}

int hy_avx512bf16_set_vbmi(int on)
{
    pthread_once(&dq_tab_once, dq_tab_init);
    return __atomic_exchange_n(&vbmi_on, on && vbmi_ok, __ATOMIC_RELAXED);
}

int hy_avx512bf16_set_e2m1_order(int on)
{
    return __atomic_exchange_n(&e2m1_eo_on, on != 0, __ATOMIC_RELAXED);
}

/* What a call needs to address rows and scales. */
struct dq {
    struct hy_tensor bare; /* W without its per-tensor scale (the scalar tail's values) */
    const uint8_t *data, *scales;
    int64_t K, row_bytes, n_sb, kf, kc, pf, h; /* h: split_of */
    float oscale;
    int eo; /* E2M1 weights, x and panels in the E2M1 order (e2m1_order) */
};

static int fmt_of(const struct hy_tensor *W)
{
    const int mx = W->qscheme == HY_QS_MX32;
    if (W->dtype == HY_DTYPE_BF16)
        return F_BF16;
    if (W->dtype == HY_DTYPE_F8_E4M3)
        return mx ? F_E4M3_MX : F_E4M3;
    return mx ? F_E2M1_MX : F_E2M1;
}

static void dq_init(struct dq *q, const struct hy_tensor *W)
{
    pthread_once(&dq_tab_once, dq_tab_init);
    q->bare = hy_bf16_bare(W);
    q->data = W->data;
    q->scales = W->mx_scales;
    q->K = W->cols;
    q->row_bytes = hy_tensor_row_bytes(W);
    q->n_sb = (W->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK;
    q->kf = W->cols / 32;
    q->kc = (W->cols + 31) / 32;
    q->h = split_of(W);
    q->pf = 4 * q->row_bytes; /* prefetch 4 rows ahead (the next tile's rows), as avx512_quant.c */
    q->oscale = hy_bf16_out_scale(W);
    q->eo = W->dtype == HY_DTYPE_F4_E2M1 && __atomic_load_n(&e2m1_eo_on, __ATOMIC_RELAXED);
}

/* 32 E4M3 codes at p -> their bf16 values times 2^(s-127): off = dq_tab_off[s], sub = dq_tab_sub[s]
 * (branch-free, docs/tuning.md). */
BF16_INLINE __m512i dec_e4m3(const uint8_t *p, __m512i off, __m512i sub)
{
    const __m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p));
    __m512i v = _mm512_and_si512(_mm512_slli_epi16(w, 4), _mm512_set1_epi16(0x07F0));
    const __mmask32 normal = _mm512_test_epi16_mask(w, _mm512_set1_epi16(0x78));
    v = _mm512_mask_add_epi16(v, normal, v, off);
    v = _mm512_mask_permutexvar_epi16(v, (__mmask32)~normal, w, sub);               /* exponent 0: index = mantissa */
    return _mm512_ternarylogic_epi32(v, w, _mm512_set1_epi16((short)0x8000), 0xF8); /* v | (w & 0x8000) */
}

/* 16 bytes at p = 32 E2M1 codes (element 2j in the low nibble of byte j) -> their bf16 values from tab. */
BF16_INLINE __m512i dec_e2m1(const uint8_t *p, __m512i tab)
{
    const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    /* dword j = byte j | byte j << 12, masked to the nibbles at bits 0..3 (word 2j) and 16..19 (word 2j+1) */
    const __m512i i = _mm512_ternarylogic_epi32(d, _mm512_slli_epi32(d, 12), _mm512_set1_epi32(0x000F000F), 0xA8);
    return _mm512_permutexvar_epi16(i, tab);
}

/* The last K % 32 elements of row r as bf16 (scalar: the panel's values), zero-padded to 32. */
static void tail_bf16(const struct dq *q, int64_t r, uint16_t *tmp)
{
    const int64_t k0 = q->kf * 32;
    for (int64_t i = 0; i < 32; i++)
        tmp[i] = k0 + i < q->K ? hy_f32_to_bf16(hy_tensor_get(&q->bare, r, k0 + i)) : 0;
}

/* 1 if the MXFP8 scale bytes of rows [n0, n0+nr) all lie in [s_min, E4M3_S_MAX]. */
BF16_INLINE int mx8_scales_ok(const struct dq *q, int64_t n0, int nr, int s_min)
{
    const uint8_t *s = q->scales + n0 * q->n_sb;
    const int64_t n = (int64_t)nr * q->n_sb;
    const __m512i lo = _mm512_set1_epi8((char)s_min), span = _mm512_set1_epi8((char)(E4M3_S_MAX - s_min));
    for (int64_t i = 0; i < n; i += 64) {
        const __mmask64 m = n - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n - i)) - 1);
        const __m512i v = _mm512_maskz_loadu_epi8(m, (const void *)(s + i));
        if (_mm512_cmpgt_epu8_mask(_mm512_sub_epi8(v, lo), span) & m) /* below the range wraps around */
            return 0;
    }
    return 1;
}

/* Chunk c (32 elements) of the tile: each row's weights decoded to bf16, one dpbf16 per output. r0 / s0:
 * the first row's data and scales, rb / ns their row strides; *nan gets E4M3 NaN codes (CHK). */
BF16_CHUNK void dchunk(const int F, const int CHK, const int MR, const int NR, const uint8_t *r0, int64_t rb,
                       const uint8_t *s0, int64_t ns, const uint16_t *xb, int64_t ldx, int64_t c, __m512 acc[4][4],
                       __mmask32 *nan)
{
    __m512bh xv[4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
        xv[i] = (__m512bh)_mm512_loadu_si512((const void *)(xb + i * ldx + 32 * c));
#pragma GCC unroll 4
    for (int j = 0; j < NR; j++) {
        const uint8_t *r = r0 + j * rb;
        __m512i wv;
        if (F == F_BF16)
            wv = _mm512_loadu_si512((const void *)(r + 64 * c));
        else if (F == F_E4M3 || F == F_E4M3_MX) {
            const int s = F == F_E4M3_MX ? s0[j * ns + c] : S_ONE;
            wv = dec_e4m3(r + 32 * c, _mm512_load_si512((const void *)dq_tab_off[s]),
                          _mm512_load_si512((const void *)dq_tab_sub[s]));
            if (CHK)
                *nan |= hy_avx512_e4m3_nan32(r + 32 * c);
        } else
            wv = dec_e2m1(r + 16 * c,
                          _mm512_load_si512((const void *)dq_tab_e2m1[F == F_E2M1_MX ? s0[j * ns + c] : S_ONE]));
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv[i], (__m512bh)wv);
    }
}

/* The tile's last K % 32 elements (F's tail), then y[i*ldy + j] = hsum(acc[i][j]) * the per-tensor scale;
 * part: the first chains of a split tile (q->h > 0, BF16), joined to acc after the tail, else NULL. */
BF16_INLINE void tile_end(const int F, const int MR, const int NR, const struct dq *q, const uint16_t *xb, int64_t ldx,
                          int64_t n0, __m512 part[4][4], __m512 acc[4][4], float *y, int64_t ldy)
{
    const int64_t rb = q->row_bytes, kf = q->kf;
    const uint8_t *r0 = q->data + n0 * rb;
    if (kf < q->kc) { /* the last K % 32 elements */
        __m512bh xv[4];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            xv[i] = (__m512bh)_mm512_loadu_si512((const void *)(xb + i * ldx + 32 * kf));
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++) {
            __m512i wv;
            if (F == F_BF16)
                wv = _mm512_maskz_loadu_epi16((__mmask32)((1u << (q->K - 32 * kf)) - 1u),
                                              (const void *)(r0 + j * rb + 64 * kf));
            else {
                uint16_t tmp[32] __attribute__((aligned(64)));
                tail_bf16(q, n0 + j, tmp);
                wv = _mm512_load_si512((const void *)tmp);
            }
#pragma GCC unroll 4
            for (int i = 0; i < MR; i++)
                acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv[i], (__m512bh)wv);
        }
    }
    if (part)
        tile_join(MR, NR, part, acc);
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            y[i * ldy + j] = hy_avx512_hsum(acc[i][j]) * q->oscale;
}

/* Chunks per 64 bytes of a row of format F. */
BF16_INLINE int cpl_of(const int F)
{
    return F == F_BF16 ? 1 : F == F_E4M3 || F == F_E4M3_MX ? 2 : 4;
}

/* One 64-byte line of each of the tile's rows, starting at chunk c: prefetch 4 rows ahead, then the line's
 * cpl_of(F) chunks. */
BF16_INLINE void dline(const int F, const int CHK, const int MR, const int NR, const struct dq *q, const uint16_t *xb,
                       int64_t ldx, int64_t n0, int64_t c, __m512 acc[4][4], __mmask32 *nan)
{
    const int CPL = cpl_of(F);
    const int64_t rb = q->row_bytes, ns = q->n_sb;
    const uint8_t *r0 = q->data + n0 * rb, *s0 = q->scales ? q->scales + n0 * ns : NULL;
#pragma GCC unroll 4
    for (int j = 0; j < NR; j++)
        _mm_prefetch((const char *)r0 + j * rb + c * (64 / CPL) + q->pf, _MM_HINT_T0);
#pragma GCC unroll 4
    for (int u = 0; u < CPL; u++)
        dchunk(F, CHK, MR, NR, r0, rb, s0, ns, xb, ldx, c + u, acc, nan);
}

/* Chunks [c0, c1) of the tile into acc, in order: whole lines (dline; the first one peeled off the loop, as in
 * rows_bf16_t1: faster, README), then the chunks left over one by one. */
BF16_INLINE void dspan(const int F, const int CHK, const int MR, const int NR, const struct dq *q, const uint16_t *xb,
                       int64_t ldx, int64_t n0, int64_t c0, int64_t c1, __m512 acc[4][4], __mmask32 *nan)
{
    const int CPL = cpl_of(F);
    const int64_t rb = q->row_bytes, ns = q->n_sb;
    const uint8_t *r0 = q->data + n0 * rb, *s0 = q->scales ? q->scales + n0 * ns : NULL;
    int64_t c = c0;
    if (c + CPL <= c1) {
        dline(F, CHK, MR, NR, q, xb, ldx, n0, c, acc, nan);
        c += CPL;
    }
    for (; c + CPL <= c1; c += CPL)
        dline(F, CHK, MR, NR, q, xb, ldx, n0, c, acc, nan);
    for (; c < c1; c++)
        dchunk(F, CHK, MR, NR, r0, rb, s0, ns, xb, ldx, c, acc, nan);
}

/* y[i*ldy + j] = chain(x row i, W row n0+j), i < MR, j < NR (<= 4); xb rows of stride ldx (bf16, Kp).
 * F: format; CHK: test E4M3 chunks for NaN codes. Returns 1 (nothing stored) if a NaN code was seen or
 * an MXFP8 scale byte of the rows lies outside [E4M3_S_MIN, E4M3_S_MAX]: the caller takes the panel route. */
BF16_INLINE int dtile(const int F, const int CHK, const int MR, const int NR, const struct dq *q, const uint16_t *xb,
                      int64_t ldx, int64_t n0, float *y, int64_t ldy)
{
    if (F == F_E4M3_MX && !mx8_scales_ok(q, n0, NR, E4M3_S_MIN))
        return 1;
    const int64_t h = F == F_BF16 ? q->h : 0; /* split_of */
    __mmask32 nan = 0;
    __m512 acc[4][4], part[4][4];
    tile_zero(MR, NR, acc);
    if (h > 0) { /* the first chain of each output */
        dspan(F, CHK, MR, NR, q, xb, ldx, n0, 0, h, acc, &nan);
        tile_move(MR, NR, part, acc);
    }
    dspan(F, CHK, MR, NR, q, xb, ldx, n0, h, q->kf, acc, &nan);
    if (CHK && nan)
        return 1;
    tile_end(F, MR, NR, q, xb, ldx, n0, h > 0 ? part : NULL, acc, y, ldy);
    return 0;
}

/* Chunks c and c + 1 of the tile's NaN-free E4M3 rows (one 64-byte step of each row) by the byte tables
 * (vb_tab, vb_il in tab[0..3], il[0..1]); MX: each chunk's nonzero words get (s - 127) << 7 added
 * (s in [VB_S_MIN, E4M3_S_MAX], scales s0 with row stride ns). The words dec_e4m3 gives, so
 * the same dpbf16 sequence per output as two dchunk calls. */
VB_CHUNK void vline(const int MX, const int MR, const int NR, const uint8_t *r0, int64_t rb, const uint8_t *s0,
                    int64_t ns, const uint16_t *xb, int64_t ldx, int64_t c, const __m512i tab[4], const __m512i il[2],
                    __m512 acc[4][4])
{
    __m512bh x0[4], x1[4];
    for (int i = MR; i < 4; i++) /* never read (no code for constant MR; quiets -Wmaybe-uninitialized) */
        x0[i] = x1[i] = (__m512bh)_mm512_setzero_si512();
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        x0[i] = (__m512bh)_mm512_loadu_si512((const void *)(xb + i * ldx + 32 * c));
        x1[i] = (__m512bh)_mm512_loadu_si512((const void *)(xb + i * ldx + 32 * c + 32));
    }
#pragma GCC unroll 4
    for (int j = 0; j < NR; j++) {
        const __m512i b = _mm512_loadu_si512((const void *)(r0 + j * rb + 32 * c));
        const __m512i lo = _mm512_permutex2var_epi8(tab[0], b, tab[1]); /* index: the code's low 7 bits */
        const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(tab[2], b, tab[3]), b,
                                                     _mm512_set1_epi8((char)0x80), 0xF8); /* | sign */
        __m512i w0 = _mm512_permutex2var_epi8(lo, il[0], hi), w1 = _mm512_permutex2var_epi8(lo, il[1], hi);
        if (MX) { /* the exponent rebase of the nonzero codes: stays in 1..254 for s in range, sign untouched */
            const __mmask64 nz = _mm512_test_epi8_mask(b, _mm512_set1_epi8(0x7F));
            w0 = _mm512_mask_add_epi16(w0, (__mmask32)nz, w0, _mm512_set1_epi32((int)vb_off[s0[j * ns + c]]));
            w1 = _mm512_mask_add_epi16(w1, (__mmask32)(nz >> 32), w1,
                                       _mm512_set1_epi32((int)vb_off[s0[j * ns + c + 1]]));
        }
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) {
            acc[i][j] = _mm512_dpbf16_ps(acc[i][j], x0[i], (__m512bh)w0);
            acc[i][j] = _mm512_dpbf16_ps(acc[i][j], x1[i], (__m512bh)w1);
        }
    }
}

/* dtile(F, 0, ...) for F = F_E4M3 / F_E4M3_MX through vline: 64 codes of a row per step (the last odd
 * chunk by dchunk). MX groups with a scale byte below VB_S_MIN go to dtile (which sends those outside
 * [E4M3_S_MIN, E4M3_S_MAX] to the panel route). */
VB_INLINE int dtile_vb(const int F, const int CHK, const int MR, const int NR, const struct dq *q, const uint16_t *xb,
                       int64_t ldx, int64_t n0, float *y, int64_t ldy)
{
    (void)CHK;
    const int MX = F == F_E4M3_MX;
    if (MX && !mx8_scales_ok(q, n0, NR, VB_S_MIN))
        return dtile(F_E4M3_MX, 0, MR, NR, q, xb, ldx, n0, y, ldy);
    const int64_t rb = q->row_bytes, ns = q->n_sb, kf = q->kf;
    const uint8_t *r0 = q->data + n0 * rb, *s0 = MX ? q->scales + n0 * ns : NULL;
    __m512i tab[4], il[2];
    for (int i = 0; i < 4; i++)
        tab[i] = _mm512_load_si512((const void *)vb_tab[i]);
    il[0] = _mm512_load_si512((const void *)vb_il[0]);
    il[1] = _mm512_load_si512((const void *)vb_il[1]);
    __mmask32 nan = 0;
    __m512 acc[4][4];
    tile_zero(MR, NR, acc);
    int64_t c = 0;
    if (kf >= 2) { /* the first step peeled off the loop, as in rows_bf16_t1 (faster, README) */
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            _mm_prefetch((const char *)r0 + j * rb + q->pf, _MM_HINT_T0);
        vline(MX, MR, NR, r0, rb, s0, ns, xb, ldx, 0, tab, il, acc);
        c = 2;
    }
    for (; c + 2 <= kf; c += 2) {
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            _mm_prefetch((const char *)r0 + j * rb + 32 * c + q->pf, _MM_HINT_T0);
        vline(MX, MR, NR, r0, rb, s0, ns, xb, ldx, c, tab, il, acc);
    }
    if (c < kf)
        dchunk(F, 0, MR, NR, r0, rb, s0, ns, xb, ldx, c, acc, &nan);
    tile_end(F, MR, NR, q, xb, ldx, n0, NULL, acc, y, ldy);
    return 0;
}

/* Chunks c and c + 1 (64 codes, 32 bytes of each row) of the tile's E2M1 rows against x in the E2M1
 * order (e2m1_order): word i of the bytes' vpmovzxbw holds element 2i of the group in its low nibble and
 * 2i + 1 in its high one; both nibble vectors index one table with chunk c's 16 scaled values in words
 * 0..15 and chunk c + 1's in 16..31 (index bit 4 set in words 16..31, which hold chunk c + 1's bytes).
 * Scales s0[j * ns + c], s0[j * ns + c + 1] (MX) or 2^0. About 5 vector instructions per 32 codes
 * against dec_e2m1's 7 (experiments/e2m1_decode_bench.c). */
BF16_CHUNK void eo_pair(const int MX, const int MR, const int NR, const uint8_t *r0, int64_t rb, const uint8_t *s0,
                        int64_t ns, const uint16_t *xb, int64_t ldx, int64_t c, __m512 acc[4][4])
{
    __m512bh x0[4], x1[4];
    for (int i = MR; i < 4; i++) /* never read (no code for constant MR; quiets -Wmaybe-uninitialized) */
        x0[i] = x1[i] = (__m512bh)_mm512_setzero_si512();
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
        x0[i] = (__m512bh)_mm512_loadu_si512((const void *)(xb + i * ldx + 32 * c));
        x1[i] = (__m512bh)_mm512_loadu_si512((const void *)(xb + i * ldx + 32 * c + 32));
    }
    const __m512i low = _mm512_set1_epi16(0x000F),
                  up = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(16), 1);
#pragma GCC unroll 4
    for (int j = 0; j < NR; j++) {
        const __m512i b = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(r0 + j * rb + 16 * c)));
        const int sa = MX ? s0[j * ns + c] : S_ONE, sb = MX ? s0[j * ns + c + 1] : S_ONE;
        const __m256i ta = _mm256_load_si256((const __m256i *)dq_tab_e2m1[sa]); /* words 0..15: codes 0..15 */
        const __m512i tab =
            _mm512_inserti64x4(_mm512_castsi256_si512(ta), _mm256_load_si256((const __m256i *)dq_tab_e2m1[sb]), 1);
        const __m512i lo = _mm512_ternarylogic_epi32(b, low, up, 0xEA); /* (b & 15) | up */
        const __m512i hi = _mm512_or_si512(_mm512_srli_epi16(b, 4), up);
        const __m512bh we = (__m512bh)_mm512_permutexvar_epi16(lo, tab);
        const __m512bh wo = (__m512bh)_mm512_permutexvar_epi16(hi, tab);
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) {
            acc[i][j] = _mm512_dpbf16_ps(acc[i][j], x0[i], we);
            acc[i][j] = _mm512_dpbf16_ps(acc[i][j], x1[i], wo);
        }
    }
}

/* dtile for F = F_E2M1 / F_E2M1_MX with xb in the E2M1 order: 64 codes of a row per step (eo_pair), a
 * last odd chunk by dchunk, the K % 32 tail by tile_end (both in natural order there). Never fails. */
BF16_INLINE int dtile_eo(const int F, const int CHK, const int MR, const int NR, const struct dq *q, const uint16_t *xb,
                         int64_t ldx, int64_t n0, float *y, int64_t ldy)
{
    (void)CHK;
    const int MX = F == F_E2M1_MX;
    const int64_t rb = q->row_bytes, ns = q->n_sb, kf = q->kf;
    const uint8_t *r0 = q->data + n0 * rb, *s0 = MX ? q->scales + n0 * ns : NULL;
    __mmask32 nan = 0;
    __m512 acc[4][4];
    tile_zero(MR, NR, acc);
    int64_t c = 0;
    if (kf >= 4) { /* the first line peeled off the loop, as in rows_bf16_t1 (faster, README) */
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            _mm_prefetch((const char *)r0 + j * rb + q->pf, _MM_HINT_T0);
        eo_pair(MX, MR, NR, r0, rb, s0, ns, xb, ldx, 0, acc);
        eo_pair(MX, MR, NR, r0, rb, s0, ns, xb, ldx, 2, acc);
        c = 4;
    }
    for (; c + 4 <= kf; c += 4) { /* one 64-byte line of each row: prefetch 4 rows ahead, then two pairs */
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            _mm_prefetch((const char *)r0 + j * rb + 16 * c + q->pf, _MM_HINT_T0);
        eo_pair(MX, MR, NR, r0, rb, s0, ns, xb, ldx, c, acc);
        eo_pair(MX, MR, NR, r0, rb, s0, ns, xb, ldx, c + 2, acc);
    }
    if (c + 2 <= kf) {
        eo_pair(MX, MR, NR, r0, rb, s0, ns, xb, ldx, c, acc);
        c += 2;
    }
    if (c < kf)
        dchunk(F, 0, MR, NR, r0, rb, s0, ns, xb, ldx, c, acc, &nan);
    tile_end(F, MR, NR, q, xb, ldx, n0, NULL, acc, y, ldy);
    return 0;
}

#define D_CASES(FN, F, CHK, MR)                                                                                        \
    case (MR)*8 + 1:                                                                                                   \
        return FN(F, CHK, MR, 1, q, xb, ldx, n0, y, ldy);                                                              \
    case (MR)*8 + 2:                                                                                                   \
        return FN(F, CHK, MR, 2, q, xb, ldx, n0, y, ldy);                                                              \
    case (MR)*8 + 3:                                                                                                   \
        return FN(F, CHK, MR, 3, q, xb, ldx, n0, y, ldy);                                                              \
    case (MR)*8 + 4:                                                                                                   \
        return FN(F, CHK, MR, 4, q, xb, ldx, n0, y, ldy);

#define DEF_DTILE(NAME, TARGET, FN, F, CHK)                                                                            \
    static TARGET int NAME(int mr, int nr, const struct dq *q, const uint16_t *xb, int64_t ldx, int64_t n0, float *y,  \
                           int64_t ldy)                                                                                \
    {                                                                                                                  \
        switch (mr * 8 + nr) {                                                                                         \
            D_CASES(FN, F, CHK, 1)                                                                                     \
            D_CASES(FN, F, CHK, 2)                                                                                     \
            D_CASES(FN, F, CHK, 3)                                                                                     \
            D_CASES(FN, F, CHK, 4)                                                                                     \
        default:                                                                                                       \
            return 0;                                                                                                  \
        }                                                                                                              \
    }

DEF_DTILE(dtile_bf16, BF16_TARGET, dtile, F_BF16, 0)
DEF_DTILE(dtile_e4m3, BF16_TARGET, dtile, F_E4M3, 1)       /* FP8 (per-tensor or unscaled), NaN test */
DEF_DTILE(dtile_e4m3_nf, BF16_TARGET, dtile, F_E4M3, 0)    /* checked NaN-free at load */
DEF_DTILE(dtile_e4m3_vb, VB_TARGET, dtile_vb, F_E4M3, 0)   /* the same, AVX512_VBMI byte tables */
DEF_DTILE(dtile_e4m3_mx, BF16_TARGET, dtile, F_E4M3_MX, 1) /* MXFP8 */
DEF_DTILE(dtile_e4m3_mx_nf, BF16_TARGET, dtile, F_E4M3_MX, 0)
DEF_DTILE(dtile_e4m3_mx_vb, VB_TARGET, dtile_vb, F_E4M3_MX, 0)
DEF_DTILE(dtile_e2m1, BF16_TARGET, dtile, F_E2M1, 0)       /* FP4 (per-tensor or unscaled), natural order */
DEF_DTILE(dtile_e2m1_mx, BF16_TARGET, dtile, F_E2M1_MX, 0) /* MXFP4, natural order */
DEF_DTILE(dtile_e2m1_eo, BF16_TARGET, dtile_eo, F_E2M1, 0) /* the same in the E2M1 order */
DEF_DTILE(dtile_e2m1_mx_eo, BF16_TARGET, dtile_eo, F_E2M1_MX, 0)

typedef int (*dtile_fn)(int, int, const struct dq *, const uint16_t *, int64_t, int64_t, float *, int64_t);

/* The decode tile of W's format; eo: E2M1 weights in the E2M1 order (q->eo). */
static dtile_fn dtile_for(const struct hy_tensor *W, int eo)
{
    const int nf = W->nan_free;
    switch (fmt_of(W)) {
    case F_BF16:
        return dtile_bf16;
    case F_E4M3:
        if (nf && __atomic_load_n(&vbmi_on, __ATOMIC_RELAXED))
            return dtile_e4m3_vb;
        return nf ? dtile_e4m3_nf : dtile_e4m3;
    case F_E4M3_MX:
        if (nf && __atomic_load_n(&vbmi_on, __ATOMIC_RELAXED))
            return dtile_e4m3_mx_vb;
        return nf ? dtile_e4m3_mx_nf : dtile_e4m3_mx;
    case F_E2M1:
        return eo ? dtile_e2m1_eo : dtile_e2m1;
    default:
        return eo ? dtile_e2m1_mx_eo : dtile_e2m1_mx;
    }
}

/* Per-thread bf16 panel of up to 4 weight rows (and the f32 row the widening writes into). */
static _Thread_local struct hy_scratch panel_scratch;

static unsigned long panel_routes; /* decode groups computed through a panel (tests: which route ran) */

unsigned long hy_avx512bf16_panel_routes(void)
{
    return __atomic_load_n(&panel_routes, __ATOMIC_RELAXED);
}

/* Outputs [n0, n0+nr) (nr <= 4) for T tokens through a bf16 panel of the rows (the prefill route).
 * Returns -1 when memory for the panel cannot be had. */
static int panel_group(const struct hy_tensor *W, const struct dq *q, const uint16_t *xb, int64_t Kp, int64_t T,
                       int64_t n0, int nr, float *y, int64_t ldy)
{
    __atomic_fetch_add(&panel_routes, 1, __ATOMIC_RELAXED);
    __m512 *buf = hy_scratch_get(&panel_scratch, PF_BUF_VECS * sizeof(__m512) + (size_t)(4 * Kp) * sizeof(uint16_t) +
                                                     (size_t)(Kp + 16) * sizeof(float) + 64);
    if (!buf)
        return -1;
    uint16_t *panel = (uint16_t *)(buf + PF_BUF_VECS);
    float *wrow = (float *)(panel + 4 * Kp);
    hy_bf16_panel(W, n0, nr, nr, Kp, panel, wrow, hy_avx512q_widen_rows);
    if (q->eo) /* xb is in the E2M1 order too */
        e2m1_order(panel, Kp, nr, q->K);
    dp_panel_rows(xb, Kp, T, panel, nr, q->h, q->kc, q->oscale, y, ldy, buf);
    return 0;
}

/* Outputs [n0, n0+nr) (nr <= 4) for T tokens (x f32 rows of stride K, xb their bf16 copy): decode tiles
 * of up to 4 tokens, or the panel route for rows with out-of-range MXFP8 scales or NaN codes; the f32
 * chain when memory for the panel cannot be had. */
static void rows_group(const struct hy_tensor *W, const struct dq *q, dtile_fn fn, const float *x, const uint16_t *xb,
                       int64_t Kp, int64_t T, int64_t n0, int nr, float *y, int64_t ldy)
{
    for (int64_t t = 0; t < T; t += 4)
        if (fn((int)(T - t < 4 ? T - t : 4), nr, q, xb + t * Kp, Kp, n0, y + t * ldy, ldy)) {
            if (panel_group(W, q, xb, Kp, T, n0, nr, y, ldy)) /* every token by the panel */
                hy_avx512_matmul_rows(y, ldy, x, T, W, n0, n0 + nr);
            return;
        }
}

/* acc = dpbf16(acc, 32 bf16 of x at xp, 32 bf16 weights at wp): one chunk of a chain. */
#define DP_CHUNK(acc, xp, wp)                                                                                          \
    (acc) = _mm512_dpbf16_ps((acc), (__m512bh)_mm512_loadu_si512((const void *)(xp)),                                  \
                             (__m512bh)_mm512_loadu_si512((const void *)(wp)))

/* y[n - n0] = row n of BF16 W times one token's xb (T = 1), rows n0 <= n < n1 one after another, each
 * row's two chains (split_of: chunks [0, h) and [h, kf)) at once: two read streams and two dependency
 * chains per row, where the 4-row tiles read 4 rows' streams at once and pay a call per tile (README
 * "Decode speed"). The first chunk of both chains comes before the loop: gcc 12's code for the loop
 * starting at chunk 0 reads markedly slower (docs/tuning.md). The quantized decode tiles peel their
 * first step the same way. Per output the
 * chain of dtile(F_BF16, 0, 1, 1, ...): each chain's vdpbf16ps in order from zero, tile_end's K % 32
 * tail on the second, the join, hsum times the output scale, so the values are bitwise the tiles'. */
static BF16_TARGET void rows_bf16_t1(const struct dq *q, const uint16_t *xb, int64_t n0, int64_t n1, float *y)
{
    const int64_t rb = q->row_bytes, kf = q->kf, h = q->h;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *r = q->data + n * rb;
        __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps();
        if (h > 0) {
            DP_CHUNK(a, xb, r);
            DP_CHUNK(b, xb + 32 * h, r + 64 * h);
        }
#pragma GCC unroll 2
        for (int64_t c = 1; c < h; c++) { /* chunk c of the first chain, chunk h + c of the second */
            DP_CHUNK(a, xb + 32 * c, r + 64 * c);
            DP_CHUNK(b, xb + 32 * (h + c), r + 64 * (h + c));
        }
        for (int64_t c = 2 * h; c < kf; c++) /* the second chain's last chunk when kf is odd; all when h = 0 */
            DP_CHUNK(b, xb + 32 * c, r + 64 * c);
        __m512 acc[4][4], part[4][4];
        acc[0][0] = b;
        part[0][0] = a;
        tile_end(F_BF16, 1, 1, q, xb, 0, n, h > 0 ? part : NULL, acc, y + (n - n0), 1);
    }
}

/* 1 when a call takes rows_bf16_t1: BF16 weights, one token. */
static int one_row_path(const struct hy_tensor *W, int64_t T)
{
    return T == 1 && fmt_of(W) == F_BF16;
}

/* Per-thread bf16 copy of x for matmul_rows_bf16x calls (kept between calls: the MoE pass makes many). */
static _Thread_local struct hy_scratch x_scratch;

void hy_avx512bf16_matmul_rows_bf16x(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W,
                                     int64_t n0, int64_t n1)
{
    if (hy_w4a8_on(W) || !hy_bf16_form(W)) {
        hy_avx512_matmul_rows(y, ldy, x, T, W, n0, n1);
        return;
    }
    if (n1 <= n0 || T <= 0)
        return;
    const int64_t K = W->cols, Kp = (K + 31) / 32 * 32;
    uint16_t *xb = hy_scratch_get(&x_scratch, (size_t)(T * Kp) * sizeof(uint16_t));
    if (!xb) { /* out of memory: the f32 chain */
        hy_avx512_matmul_rows(y, ldy, x, T, W, n0, n1);
        return;
    }
    struct dq q;
    dq_init(&q, W);
    x_to_bf16(x, K, T, K, xb, Kp);
    if (q.eo)
        e2m1_order(xb, Kp, T, K);
    if (one_row_path(W, T)) {
        rows_bf16_t1(&q, xb, n0, n1, y);
        return;
    }
    const dtile_fn fn = dtile_for(W, q.eo);
    for (int64_t n = n0; n < n1; n += 4) {
        const int nr = (int)(n1 - n < 4 ? n1 - n : 4);
        rows_group(W, &q, fn, x, xb, Kp, T, n, nr, y + (n - n0), ldy);
    }
}

/* Rows [n0, n0+nv) of W (FP8 / MXFP8 / MXFP4 / FP4) as bf16 panel rows of stride ldp = 32 * q->kc: the
 * values hy_bf16_panel writes, decoded by the decode tiles' decoders (a few instructions per 32 codes
 * instead of widening through f32); a row with an MXFP8 scale byte outside [E4M3_S_MIN, E4M3_S_MAX] or
 * an E4M3 NaN code (tensors not marked nan_free) is written by hy_bf16_panel. Natural element order. */
static BF16_TARGET void panel_rows(const struct hy_tensor *W, const struct dq *q, int64_t n0, int64_t nv, int64_t ldp,
                                   uint16_t *panel, float *wrow)
{
    const int F = fmt_of(W);
    HY_ASSERT(ldp == 32 * q->kc);
    if (F == F_BF16) { /* rows not in place (K % 32 != 0) */
        hy_bf16_panel(W, n0, nv, nv, ldp, panel, wrow, hy_avx512q_widen_rows);
        return;
    }
    const int e4m3 = F == F_E4M3 || F == F_E4M3_MX, chk = e4m3 && !W->nan_free;
    for (int64_t r = 0; r < nv; r++) {
        const int64_t n = n0 + r;
        uint16_t *d = panel + r * ldp;
        const uint8_t *row = q->data + n * q->row_bytes, *sb = q->scales ? q->scales + n * q->n_sb : NULL;
        int slow = F == F_E4M3_MX && !mx8_scales_ok(q, n, 1, E4M3_S_MIN);
        __mmask32 nan = 0;
        for (int64_t c = 0; c < q->kf && !slow; c++) {
            __m512i v;
            if (e4m3) {
                const int s = F == F_E4M3_MX ? sb[c] : S_ONE;
                v = dec_e4m3(row + 32 * c, _mm512_load_si512((const void *)dq_tab_off[s]),
                             _mm512_load_si512((const void *)dq_tab_sub[s]));
                if (chk)
                    nan |= hy_avx512_e4m3_nan32(row + 32 * c);
            } else
                v = dec_e2m1(row + 16 * c,
                             _mm512_load_si512((const void *)dq_tab_e2m1[F == F_E2M1_MX ? sb[c] : S_ONE]));
            _mm512_storeu_si512((void *)(d + 32 * c), v);
        }
        if (slow || nan)
            hy_bf16_panel(W, n, 1, 1, ldp, d, wrow, hy_avx512q_widen_rows);
        else if (q->kf < q->kc) /* the last K % 32 elements, zero-padded to ldp */
            tail_bf16(q, n, d + 32 * q->kf);
    }
}

void hy_avx512bf16_panel(const struct hy_tensor *W, int64_t n0, int64_t nv, uint16_t *panel)
{
    struct dq q;
    dq_init(&q, W);
    float *wrow = malloc((size_t)(32 * q.kc + 16) * sizeof(float));
    HY_ASSERT(wrow);
    panel_rows(W, &q, n0, nv, 32 * q.kc, panel, wrow);
    free(wrow);
}

/* Decode-sized calls: x converted once, groups of 4 rows over the threads. */
static void matmul_decode(float *y, const float *x, int64_t T, const struct hy_tensor *W, const uint16_t *xb,
                          int64_t Kp, int eo)
{
    struct dq q;
    dq_init(&q, W);
    q.eo = eo; /* the order the caller gave xb */
    const dtile_fn fn = dtile_for(W, eo);
    const int64_t N = W->rows, groups = (N + 3) / 4;
    const int par = (double)N * (double)W->cols * (double)T > 65536.0;
    (void)par;
    /* dynamic tasks (task_rows.h): a thread that loses its core on a shared machine does not hold up
     * the step; which thread computes a row never changes its result */
    const int64_t task_groups = hy_task_groups(W);
    if (one_row_path(W, T)) { /* the same tasks, one row at a time */
        const int64_t task = 4 * task_groups, n_tasks = (N + task - 1) / task;
#pragma omp parallel for schedule(dynamic, 1) if (par)
        for (int64_t i = 0; i < n_tasks; i++)
            rows_bf16_t1(&q, xb, i * task, (i + 1) * task < N ? (i + 1) * task : N, y + i * task);
        return;
    }
#pragma omp parallel for schedule(dynamic, task_groups) if (par)
    for (int64_t g = 0; g < groups; g++) {
        const int64_t n0 = g * 4;
        const int nr = (int)(N - n0 < 4 ? N - n0 : 4);
        rows_group(W, &q, fn, x, xb, Kp, T, n0, nr, y + n0, N);
    }
}

void hy_avx512bf16_matmul_bf16x(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    if (hy_w4a8_on(W) || !hy_bf16_form(W)) {
        hy_avx512_matmul(y, x, T, W);
        return;
    }
    const int64_t N = W->rows, K = W->cols, kc = (K + 31) / 32, Kp = kc * 32, blocks = (N + PF_NB - 1) / PF_NB;
    uint16_t *xb = hy_scratch_get(&xb_buf, (size_t)(T * Kp) * sizeof(uint16_t));
    if (!xb) {
        hy_avx512_matmul(y, x, T, W);
        return;
    }
    x_to_bf16(x, K, T, K, xb, Kp);
    const int e2m1 = W->dtype == HY_DTYPE_F4_E2M1 && __atomic_load_n(&e2m1_eo_on, __ATOMIC_RELAXED);
    if (e2m1) /* decode tiles and panels in the E2M1 order */
        e2m1_order(xb, Kp, T, K);
    if (T < HY_BF16X_MIN_T) {
        matmul_decode(y, x, T, W, xb, Kp, e2m1);
        return;
    }
    const int in_place = hy_bf16_in_place(W);
    struct dq q;
    dq_init(&q, W);
    const int64_t h = split_of(W);
    const float oscale = hy_bf16_out_scale(W);
    int failed = 0;
#pragma omp parallel if (blocks > 1)
    {
        __m512 *acc = hy_scratch_get(&acc_buf, PF_BUF_VECS * sizeof(__m512));
        uint16_t *panel = in_place ? NULL : hy_scratch_get(&panel_buf, (size_t)(PF_NB * Kp) * sizeof(uint16_t));
        float *wrow = in_place ? NULL : hy_scratch_get(&wrow_buf, (size_t)(Kp + 16) * sizeof(float));
        const int ok = acc && (in_place || (panel && wrow));
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t n0 = b * PF_NB, nv = N - n0 < PF_NB ? N - n0 : PF_NB;
            if (!ok) {
#pragma omp atomic write
                failed = 1;
                continue;
            }
            const uint16_t *wp = (const uint16_t *)W->data + n0 * K;
            if (!in_place) {
                panel_rows(W, &q, n0, nv, Kp, panel, wrow);
                if (e2m1)
                    e2m1_order(panel, Kp, nv, K);
                wp = panel;
            }
            dp_panel_rows(xb, Kp, T, wp, nv, h, kc, oscale, y + n0, N, acc);
        }
    }
    if (failed) /* out of memory on a thread: the whole call on the f32 path (one order per call) */
        hy_avx512_matmul(y, x, T, W);
}

#endif /* __x86_64__ */
