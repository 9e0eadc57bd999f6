/* cpu.h - x86-64 CPU feature detection (CPUID + OS state permission) and the ISA level the kernels use.
 *
 * A feature counts as usable only if the CPU reports it (CPUID) AND the OS saves its register state:
 * XGETBV/XCR0 bits 1-2 (XMM/YMM) for AVX2/FMA/F16C, bits 5-7 (opmask, ZMM_Hi256, Hi16_ZMM) for
 * AVX-512, and for AMX the XTILECFG/XTILEDATA bits 17-18 plus a granted
 * arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) request (Linux >= 5.16).
 */
#ifndef HY_BASE_CPU_H
#define HY_BASE_CPU_H

/* Immutable after the first hy_cpu_caps() call. Each field is 0 or 1. */
struct hy_cpu_caps {
    int avx2, fma, f16c; /* CPUID bits */
    int avx512f, avx512bw, avx512vl, avx512bf16, avx512vbmi, avx512vnni;
    int amx_tile, amx_bf16;
    int os_ymm; /* XCR0: SSE + AVX state enabled */
    int os_zmm; /* XCR0: opmask + ZMM state enabled */
    int os_amx; /* XCR0 tile bits + arch_prctl permission granted */
};

/* Kernel ISA levels, ordered: a higher level needs everything a lower one does. */
enum hy_isa {
    HY_ISA_REF = 0, /* portable scalar C (src/kernels/ref.c), the oracle */
    HY_ISA_AVX2,    /* AVX2 + FMA + F16C */
    HY_ISA_AVX512,  /* AVX-512 F/BW/VL (+BF16) */
    HY_ISA_AMX,     /* AMX-TILE + AMX-BF16 on top of AVX-512 with AVX512_BF16 */
    HY_ISA_COUNT
};

/* The capabilities of this CPU + OS, detected once (thread-safe). Never NULL. */
const struct hy_cpu_caps *hy_cpu_caps(void);

/* 1 if CPU and OS support everything level `isa` needs (not whether kernels exist for it). */
int hy_cpu_supports(enum hy_isa isa);

/* "ref", "avx2", "avx512", "amx" ("?" out of range). */
const char *hy_isa_name(enum hy_isa isa);

/* Parses a level name as above; returns -1 for an unknown name. */
int hy_isa_parse(const char *name);

/* One line "avx2 fma f16c ..." naming the usable features (static storage). */
const char *hy_cpu_caps_string(void);

#endif
