/* amx.c - AMX-BF16 matmul for the bf16 compute mode: hy_matmul_bf16x at the amx level.
 *
 * y[T, N] = x[T, K] . W^T with x holding bf16-representable values (the bf16 mode rounds every
 * matmul input, model/forward.c) and W BF16, or FP8 E4M3 / MXFP8 / MXFP4 (hy_avx2q_supported
 * formats) whose dequantized values are bf16-representable up to a scale applied to the outputs.
 * Products bf16 x bf16 are exact in fp32; TDPBF16PS accumulates them in fp32 in the hardware's order
 * (16x16x32 tiles, Intel SDM), with denormal inputs and results flushed to zero. So results differ
 * from hy_matmul's fixed chain in rounding order only, and a row's value depends on which 16-token
 * tile it falls in only through that order: hy_matmul_bf16x is not batch-invariant, which is why
 * the fp32 mode (the golden and invariance mode) never calls it.
 *
 * Layout: W is the A operand in its own row-major layout (16 weight rows x 32 k per tile, stride K
 * bf16), so weights need no repacking at load: full 32-row blocks of BF16 weights with K % 32 == 0
 * are read in place; other blocks (ragged N or K, quantized weights) are first written to a per-thread
 * zero-padded bf16 panel of 32 rows x round_up(K, 32) (FP8 / MX dequantized there: e4m3 and e2m1
 * values times powers of two are exact in bf16; a per-tensor scale multiplies the outputs). x is
 * packed once per call into B tiles (16 k-pairs x 16 tokens x 2 bf16, "VNNI" order), zero-padded to
 * 32 tokens and 32 k. Each thread takes 32-row blocks of W; per 32 tokens, 2x2 C tiles (32 rows x
 * 32 tokens, fp32) accumulate over the k chunks in passes of AMX_KB chunks (parked in memory between
 * passes), then are written transposed into y.
 * Tiles: C 0-3, A 4-5, B 6-7, every tile 16 rows x 64 bytes (palette 1).
 *
 * Smaller T (decode, T < HY_AMX_MIN_T), formats without a bf16 form (F32, F16) and, under the opt-in
 * HYINFER_MXFP4_ACT=mxint8, MXFP4 weights take the avx512 level's AVX512-BF16 matmul (avx512_bf16.c:
 * vdpbf16ps decode tiles; F32 / F16 the f32 chain; the W4A8 kernel). Compiled with HY_AMX_EMU (tests
 * only, amx_tiles.h), the tile instructions are the includer's software model, the fallback is the
 * ref matmul and quantized panels are widened by hy_tensor_get, so the whole logic runs and is tested
 * on machines without AMX.
 */
#if defined(__x86_64__)

#include "kernels/amx.h"

#include "kernels/avx512_bf16.h"
#include "kernels/avx512_quant.h"
#include "kernels/bf16_panel.h"
#include "kernels/kernel_table.h"
#include "kernels/w4a8.h"
#include "kernels/scratch.h"

/* Per-thread buffers, kept between calls (no allocation per call): packed x (calling thread), each
 * thread's weight panel, widened row and C accumulators. */
static _Thread_local struct hy_scratch xb_buf, panel_buf, wrow_buf, cacc_buf;

#include <stdlib.h>
#include <string.h>

#include "kernels/amx_tiles.h" /* the tile operations: intrinsics, or a test's model (HY_AMX_EMU) */

/* GCC's tile intrinsics are asm statements without memory operands or clobbers: this barrier
 * keeps the compiler from moving panel / packing stores past a tile load, or reads of a stored C
 * tile before the store. */
#define AMX_BARRIER() __asm__ __volatile__("" ::: "memory")

/* Palette 1, every tile 16 rows x 64 bytes (LDTILECFG's 64-byte format). */
static const struct {
    uint8_t palette_id, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) tile_cfg = {
    .palette_id = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

/* Tile configuration on / off for the calling thread (separate functions: OpenMP's outlined region
 * bodies do not carry the caller's target attribute). */
static AMX_TARGET void tiles_on(void)
{
    _tile_loadconfig(&tile_cfg);
}

static AMX_TARGET void tiles_off(void)
{
    _tile_release();
}

/* x [T, K] f32 -> B tiles xb[tb][kc][kk][t][2] (bf16, RNE: exact for bf16-representable x),
 * tb < Tp/16, kc < Kc, zero past T and K. */
static void pack_x(const float *x, int64_t T, int64_t K, int64_t Tp, int64_t Kc, uint32_t *xb)
{
    const int64_t nTb = Tp / 16;
#pragma omp parallel for schedule(static) if (T * K > 65536)
    for (int64_t tb = 0; tb < nTb; tb++)
        for (int64_t kc = 0; kc < Kc; kc++) {
            uint32_t *blk = xb + (tb * Kc + kc) * 256;
            for (int64_t kk = 0; kk < 16; kk++)
                for (int64_t i = 0; i < 16; i++) {
                    const int64_t t = tb * 16 + i, k = kc * 32 + 2 * kk;
                    uint32_t lo = 0, hi = 0;
                    if (t < T && k < K)
                        lo = hy_f32_to_bf16(x[t * K + k]);
                    if (t < T && k + 1 < K)
                        hi = hy_f32_to_bf16(x[t * K + k + 1]);
                    blk[kk * 16 + i] = lo | hi << 16;
                }
        }
}

/* k chunks (of 32) per pass over the tokens: the B tiles of one pass over all tokens (Tp x 256
 * bf16: 256 KiB at 512 tokens) and the block's A slice (32 x 256 bf16, 16 KiB) stay in L2 / L1 while
 * the C tiles of every 32-token pair are parked in cacc between passes. Not tuned on AMX hardware. */
#define AMX_KB 8

/* One 32-row block: a0 = its first row (bf16, row stride lda bytes), all Tp tokens. cacc: Tp * 32
 * floats (the parked C tiles, 4 per token pair). Writes y rows [n0, n0 + nv) times oscale. */
static AMX_TARGET void block_rows(const uint8_t *a0, int64_t lda, const uint32_t *xb, int64_t Tp, int64_t Kc, int64_t T,
                                  int64_t N, int64_t n0, int64_t nv, float oscale, float *cacc, float *y)
{
    const uint8_t *a1 = a0 + 16 * lda;
    for (int64_t kb0 = 0; kb0 < Kc; kb0 += AMX_KB) {
        const int64_t kb1 = Kc - kb0 < AMX_KB ? Kc : kb0 + AMX_KB;
        for (int64_t t0 = 0; t0 < Tp; t0 += 32) {
            float *c = cacc + t0 * 32;
            const uint8_t *b0 = (const uint8_t *)(xb + (t0 / 16) * Kc * 256), *b1 = b0 + Kc * 1024;
            if (kb0 == 0) {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
            } else {
                _tile_loadd(0, c, 64);
                _tile_loadd(1, c + 256, 64);
                _tile_loadd(2, c + 512, 64);
                _tile_loadd(3, c + 768, 64);
            }
            for (int64_t kc = kb0; kc < kb1; kc++) {
                _tile_loadd(4, a0 + kc * 64, lda);
                _tile_loadd(5, a1 + kc * 64, lda);
                _tile_loadd(6, b0 + kc * 1024, 64);
                _tile_loadd(7, b1 + kc * 1024, 64);
                _tile_dpbf16ps(0, 4, 6); /* rows  0-15, tokens  0-15 */
                _tile_dpbf16ps(1, 4, 7); /* rows  0-15, tokens 16-31 */
                _tile_dpbf16ps(2, 5, 6); /* rows 16-31, tokens  0-15 */
                _tile_dpbf16ps(3, 5, 7); /* rows 16-31, tokens 16-31 */
            }
            _tile_stored(0, c, 64);
            _tile_stored(1, c + 256, 64);
            _tile_stored(2, c + 512, 64);
            _tile_stored(3, c + 768, 64);
        }
    }
    AMX_BARRIER();
    for (int64_t t0 = 0; t0 < Tp; t0 += 32)
        for (int q = 0; q < 4; q++) { /* C tile q: rows 16*(q/2).., tokens 16*(q%2).. */
            const float *cb = cacc + t0 * 32 + q * 256;
            for (int64_t m = 0; m < 16; m++) {
                const int64_t n = n0 + 16 * (q / 2) + m;
                if (n - n0 >= nv)
                    break;
                for (int64_t i = 0; i < 16; i++) {
                    const int64_t t = t0 + 16 * (q % 2) + i;
                    if (t < T)
                        y[t * N + n] = cb[m * 16 + i] * oscale;
                }
            }
        }
}

void AMX_FN(hy_amx_matmul_bf16x)(float *y, const float *x, int64_t T, const struct hy_tensor *W)
{
    if (T < HY_AMX_MIN_T || !hy_bf16_form(W) || hy_w4a8_on(W)) {
        AMX_FALLBACK(y, x, T, W); /* (the opt-in W4A8 MXFP4 path for every T, as the avx512 level) */
        return;
    }
    const int64_t N = W->rows, K = W->cols, Kc = (K + 31) / 32, Kp = Kc * 32, Tp = (T + 31) & ~(int64_t)31;
    uint32_t *xb = hy_scratch_get(&xb_buf, (size_t)(Tp * Kp) * sizeof(uint16_t));
    if (!xb) { /* out of memory: the vector path */
        AMX_FALLBACK(y, x, T, W);
        return;
    }
    pack_x(x, T, K, Tp, Kc, xb);
    AMX_BARRIER();
    const int in_place = hy_bf16_in_place(W);
    const float oscale = hy_bf16_out_scale(W);
    const int64_t blocks = (N + 31) / 32;
    int failed = 0;
#pragma omp parallel if (blocks > 1)
    {
        uint16_t *panel = hy_scratch_get(&panel_buf, (size_t)(32 * Kp) * sizeof(uint16_t));
        float *wrow = hy_scratch_get(&wrow_buf, (size_t)(Kp + 16) * sizeof(float));
        float *cacc = hy_scratch_get(&cacc_buf, (size_t)(Tp * 32) * sizeof(float));
        const int ok = panel && wrow && cacc;
        if (ok)
            tiles_on();
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t n0 = b * 32, nv = N - n0 < 32 ? N - n0 : 32;
            if (!ok) { /* out of memory on this thread: its blocks through the vector kernels */
#pragma omp atomic write
                failed = 1;
                continue;
            }
            if (in_place && nv == 32) {
                block_rows((const uint8_t *)W->data + n0 * K * 2, K * 2, xb, Tp, Kc, T, N, n0, nv, oscale, cacc, y);
                continue;
            }
            hy_bf16_panel(W, n0, nv, 32, Kp, panel, wrow, AMX_WIDEN);
            AMX_BARRIER();
            block_rows((const uint8_t *)panel, Kp * 2, xb, Tp, Kc, T, N, n0, nv, oscale, cacc, y);
        }
        if (ok)
            tiles_off();
    }
    if (failed) /* rare: recompute everything on the vector path (one consistent order per call) */
        AMX_FALLBACK(y, x, T, W);
}

#endif /* __x86_64__ */
