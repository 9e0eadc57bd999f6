/* avx512_emu.h - the avx512 kernels on SIMDe's emulated AVX-512 intrinsics, for the kernel tests on
 * CPUs without AVX-512 (implementation and rationale: avx512_emu.c, linked into every unit test). */
#ifndef HY_TESTS_AVX512_EMU_H
#define HY_TESTS_AVX512_EMU_H

#include "kernels/kernel_table.h"

#include <stdint.h>

/* 1 when the kernel tests add the emulated avx512 level: on CPUs without AVX-512, and on any CPU
 * when HY_TEST_AVX512_EMU=1 (tests/run_tests.sh sets it for the sanitizer runs on AVX-512 hosts, so
 * the code an AVX2-only machine runs is checked there too). */
int hy_test_avx512_emu_wanted(void);

/* Fills *t with the emulated avx512 table (isa HY_ISA_AVX512, name "avx512-emu"; rope / silu /
 * rounding / attention are the real avx2 kernels, as in the real avx512 table). Returns 0, or -1
 * when the CPU lacks AVX2 (the emulation is compiled for AVX2 + FMA + F16C). */
int hy_test_avx512_emu_table(struct hy_kernel_table *t);

/* hy_avx512q_rows / hy_avx512q_widen_rows (kernels/avx512_quant.h) on the emulated intrinsics. */
void emu512_q_rows(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t T, const struct hy_tensor *W, int64_t n0,
                   int64_t nb);
void emu512_q_widen_rows(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst);

/* hy_avx512bf16_panel_routes (kernels/avx512_bf16.h) of the emulated AVX512-BF16 path. */
unsigned long emu512_bf16x_panel_routes(void);

/* hy_avx512bf16_set_vbmi of the emulated path (the emulation has AVX512_VBMI: on by default). */
int emu512_bf16x_set_vbmi(int on);

/* hy_avx512bf16_set_e2m1_order of the emulated path (on by default). */
int emu512_bf16x_set_e2m1_order(int on);

/* hy_avx512bf16_panel of the emulated path. */
void emu512_bf16x_panel(const struct hy_tensor *W, int64_t n0, int64_t nv, uint16_t *panel);

/* hy_avx512_w8a8_dots (kernels/w8a8.h, the AVX512-VNNI kernel) on the emulated intrinsics. */
void emu512_w8a8_dots(int32_t *acc, int64_t lda, const int8_t *q, int64_t T, const struct hy_tensor *W, int64_t n0,
                      int64_t n1);

#endif
