/* amx_tiles.h - the AMX tile operations amx.c is written in, and the switch that swaps them.
 *
 * amx.c calls the compiler's tile intrinsics by name: _tile_loadconfig, _tile_release, _tile_zero,
 * _tile_loadd, _tile_stream_loadd, _tile_stored, _tile_dpbf16ps (Intel SDM semantics, palette 1).
 * By default they come from <immintrin.h> and the functions are compiled for amx-tile / amx-bf16.
 * A translation unit that defines HY_AMX_EMU must define those seven names itself (as macros)
 * before it includes amx.c; it then gets the kernel under emu_ names, built for the base ISA, with
 * the ref matmul as fallback and hy_tensor_get widening. Tests use this to run the kernel's logic on
 * a software model of the tiles on machines without AMX; the product never defines HY_AMX_EMU.
 */
#ifndef HY_KERNELS_AMX_TILES_H
#define HY_KERNELS_AMX_TILES_H

#ifdef HY_AMX_EMU
#if !defined(_tile_loadconfig) || !defined(_tile_release) || !defined(_tile_zero) || !defined(_tile_loadd) ||          \
    !defined(_tile_stream_loadd) || !defined(_tile_stored) || !defined(_tile_dpbf16ps)
#error "HY_AMX_EMU: define the seven tile operations (amx_tiles.h) before including kernels/amx.c"
#endif
#define AMX_TARGET
#define AMX_FN(name) emu_##name
#define AMX_FALLBACK hy_ref_matmul
#define AMX_WIDEN NULL
#else
#include <immintrin.h>
#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16")))
#define AMX_FN(name) name
#define AMX_FALLBACK hy_avx512bf16_matmul_bf16x /* AMX CPUs have AVX512_BF16 */
#define AMX_WIDEN hy_avx512q_widen_rows
#endif

#endif
