/* amx_emu.h - a software model of the AMX tile instructions src/kernels/amx.c uses, so its logic
 * (tile configuration, strides, packing, tails, the order of the tile operations) runs and is
 * checked against the scalar ref on machines without AMX. Test code only: tests/unit/test_kernels_amx.c
 * includes it, then src/kernels/amx.c with HY_AMX_EMU, which takes these tile operations instead of
 * the real intrinsics (src/kernels/amx_tiles.h).
 *
 * Semantics follow the Intel SDM (vol. 2, "TILELOADD", "TILESTORED", "TILEZERO", "TDPBF16PS",
 * "LDTILECFG"; palette 1: 8 tiles of up to 16 rows x 64 bytes):
 * - ldtilecfg: 64-byte config, byte 0 palette (must be 1), byte 1 start_row (must be 0 here),
 *   bytes 2..15 reserved 0, colsb[i] at 16 + 2i (u16), rows[i] at 48 + i; a used tile must have
 *   1..16 rows and 4..64 colsb (multiple of 4 for TDPBF16PS operands). All tiles are zeroed.
 * - tileloadd t, [base + stride]: row r (r < rows[t]) reads colsb[t] bytes at base + r*stride;
 *   the rest of the tile is zeroed. tilestored writes rows[t] rows of colsb[t] bytes.
 * - tdpbf16ps c, a, b: for m < rows[c], k < colsb[a]/4, n < colsb[c]/4 (in that loop order)
 *     c[m].f32[n] += bf16(a[m].bf16[2k]) * bf16(b[k].bf16[2n]);
 *     c[m].f32[n] += bf16(a[m].bf16[2k+1]) * bf16(b[k].bf16[2n+1]);
 *   with bf16 denormal inputs treated as zero (DAZ) and denormal results flushed to zero (FTZ);
 *   shapes must agree: rows[a] == rows[c], colsb[b] == colsb[c], rows[b] == colsb[a]/4.
 * A violated rule (unconfigured use, bad shape, tile index > 7) aborts the test with a message,
 * as the hardware would fault (#UD / #GP). Tile state is per thread, like the hardware's.
 */
#ifndef HY_TESTS_AMX_EMU_H
#define HY_TESTS_AMX_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct amx_emu_state {
    int configured;
    uint8_t rows[8];
    uint16_t colsb[8];
    uint8_t data[8][16][64];
};
static __thread struct amx_emu_state amx_emu;

static inline void amx_emu_die(const char *what, int t)
{
    fprintf(stderr, "amx_emu: %s (tile %d)\n", what, t);
    abort();
}

static inline void amx_emu_check(int t)
{
    if (!amx_emu.configured)
        amx_emu_die("tile instruction before ldtilecfg", t);
    if (t < 0 || t > 7 || amx_emu.rows[t] == 0 || amx_emu.colsb[t] == 0)
        amx_emu_die("tile not configured", t);
}

static inline void amx_emu_loadconfig(const void *cfg)
{
    const uint8_t *c = cfg;
    if (c[0] != 1 || c[1] != 0)
        amx_emu_die("palette must be 1 and start_row 0", -1);
    for (int i = 2; i < 16; i++)
        if (c[i])
            amx_emu_die("reserved config bytes must be 0", -1);
    memset(&amx_emu, 0, sizeof(amx_emu));
    for (int t = 0; t < 8; t++) {
        uint16_t cb;
        memcpy(&cb, c + 16 + 2 * t, 2);
        amx_emu.colsb[t] = cb;
        amx_emu.rows[t] = c[48 + t];
        if ((cb == 0) != (amx_emu.rows[t] == 0) || cb > 64 || amx_emu.rows[t] > 16)
            amx_emu_die("bad tile shape in config", t);
    }
    amx_emu.configured = 1;
}

static inline void amx_emu_release(void)
{
    memset(&amx_emu, 0, sizeof(amx_emu));
}

static inline void amx_emu_zero(int t)
{
    amx_emu_check(t);
    memset(amx_emu.data[t], 0, sizeof(amx_emu.data[t]));
}

static inline void amx_emu_loadd(int t, const void *base, long stride)
{
    amx_emu_check(t);
    memset(amx_emu.data[t], 0, sizeof(amx_emu.data[t]));
    for (int r = 0; r < amx_emu.rows[t]; r++)
        memcpy(amx_emu.data[t][r], (const uint8_t *)base + (long)r * stride, amx_emu.colsb[t]);
}

static inline void amx_emu_stored(int t, void *base, long stride)
{
    amx_emu_check(t);
    for (int r = 0; r < amx_emu.rows[t]; r++)
        memcpy((uint8_t *)base + (long)r * stride, amx_emu.data[t][r], amx_emu.colsb[t]);
}

static inline float amx_emu_bf16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    uint32_t u = (uint32_t)h << 16;
    if ((u & 0x7f800000u) == 0) /* DAZ */
        u &= 0x80000000u;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float amx_emu_ftz(float f)
{
    return fpclassify(f) == FP_SUBNORMAL ? copysignf(0.0f, f) : f;
}

static inline void amx_emu_dpbf16ps(int c, int a, int b)
{
    amx_emu_check(c);
    amx_emu_check(a);
    amx_emu_check(b);
    if (amx_emu.rows[a] != amx_emu.rows[c] || amx_emu.colsb[b] != amx_emu.colsb[c] ||
        amx_emu.rows[b] * 4 != amx_emu.colsb[a] || amx_emu.colsb[a] % 4 || amx_emu.colsb[c] % 4)
        amx_emu_die("tdpbf16ps shapes do not agree", c);
    for (int m = 0; m < amx_emu.rows[c]; m++) {
        float tmp[16];
        memcpy(tmp, amx_emu.data[c][m], sizeof(tmp));
        for (int k = 0; k < amx_emu.colsb[a] / 4; k++)
            for (int n = 0; n < amx_emu.colsb[c] / 4; n++) {
                tmp[n] = amx_emu_ftz(tmp[n] + amx_emu_bf16(&amx_emu.data[a][m][4 * k]) *
                                                  amx_emu_bf16(&amx_emu.data[b][k][4 * n]));
                tmp[n] = amx_emu_ftz(tmp[n] + amx_emu_bf16(&amx_emu.data[a][m][4 * k + 2]) *
                                                  amx_emu_bf16(&amx_emu.data[b][k][4 * n + 2]));
            }
        memset(amx_emu.data[c][m], 0, 64);
        memcpy(amx_emu.data[c][m], tmp, (size_t)amx_emu.colsb[c]);
    }
}

/* The intrinsic names amx.c uses. */
#define _tile_loadconfig(cfg) amx_emu_loadconfig(cfg)
#define _tile_release() amx_emu_release()
#define _tile_zero(t) amx_emu_zero(t)
#define _tile_loadd(t, base, stride) amx_emu_loadd((t), (base), (long)(stride))
#define _tile_stream_loadd(t, base, stride) amx_emu_loadd((t), (base), (long)(stride))
#define _tile_stored(t, base, stride) amx_emu_stored((t), (base), (long)(stride))
#define _tile_dpbf16ps(c, a, b) amx_emu_dpbf16ps((c), (a), (b))

#endif
