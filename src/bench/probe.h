/* probe.h - machine probes for `hyinfer bench`: CPU units, memory read bandwidth, peak FLOP/s.
 *
 * The probes give the denominators of the roofline ratios (DESIGN.md §6): decode is compared with
 * the measured read bandwidth, prefill with the measured peak of the best matrix unit present.
 * Units are detected from CPUID *and* OS state (XGETBV; for AMX also arch_prctl permission).
 */
#ifndef HY_BENCH_PROBE_H
#define HY_BENCH_PROBE_H

#include <stddef.h>

struct hy_cpu_units {
    int avx2_fma;    /* AVX2 + FMA3, OS saves YMM state */
    int avx512f;     /* AVX-512F, OS saves ZMM/opmask state */
    int avx512_bf16; /* AVX-512-BF16 (vdpbf16ps) */
    int avx512_vnni; /* AVX512-VNNI (vpdpbusd) with AVX-512BW/VL */
    int amx_bf16;    /* AMX-TILE + AMX-BF16 in CPUID, XCR0 tile state on, and tile permission granted */
    int amx_cpuid;   /* AMX-BF16 in CPUID (even if the OS refused tile permission) */
    char brand[64];  /* CPUID brand string ("" when unavailable) */
};

/* Fills *u from CPUID/XGETBV and requests AMX tile permission (ARCH_REQ_XCOMP_PERM) when the CPU
 * has AMX. Never fails: units it cannot confirm are 0. */
void hy_bench_cpu_detect(struct hy_cpu_units *u);

/* Read-only memory bandwidth: all OpenMP threads sum disjoint parts of a `bytes` buffer (2 MiB
 * aligned, advised MADV_HUGEPAGE like the weight arena, touched once beforehand); best of `reps` passes. *gbs = bytes / best seconds / 1e9, *best_s the best pass.
 * bytes is rounded down to a multiple of 4 KiB (at least 1 MiB). Returns 0, or -1 with hy_err_msg()
 * when the buffer cannot be allocated. */
int hy_bench_mem_bw(size_t bytes, int reps, double *gbs, double *best_s);

/* Peak FLOP/s of one unit on all OpenMP threads (independent accumulators, no memory traffic),
 * best of 3 runs of at least min_s seconds each. unit: "fma" (AVX2 FMA fp32, 16 flop/instr),
 * "avx512" (AVX-512F FMA fp32, 32 flop/instr), "avx512bf16" (vdpbf16ps, 64 flop/instr), "amx"
 * (AMX-BF16 tdpbf16ps 16x16x32, 16384 flop/instr); int8 units (integer multiply-adds counted as 2 ops, as
 * the W8A8 kernels' GFLOP-equivalents): "avx2_i8" (vpmaddubsw + vpmaddwd + vpaddd, 64 ops per three
 * instructions, the AVX2 W8A8 kernel's chain), "avx512vnni" (vpdpbusd, 128 ops/instr). Returns GFLOP/s
 * (GOP/s for the int8 units), or 0 when the unit is absent
 * (see struct hy_cpu_units) or unknown. *flops / *secs receive the best run's raw figures. */
double hy_bench_peak_gflops(const struct hy_cpu_units *u, const char *unit, double min_s, double *flops, double *secs);

#endif
