/* avx512_probe: report the CPU's AVX-512 related CPUID bits and XCR0, then
 * check a few AVX-512 intrinsics against scalar C.  Each check runs only if
 * CPUID (and XCR0) say the subset is usable, so the binary runs anywhere.
 * Exit status: 0 all checks that ran passed, 1 any FAIL.
 *   avx512_probe            probe + checks
 *   avx512_probe spin N     also run an N-iteration scalar loop (speed test)
 *   avx512_probe spin512 N  also run N iterations of 4 independent _mm512_fmadd_ps chains
 *   avx512_probe force      run every check even if CPUID says no (SIGILL -> NOTIMPL)
 * Build (baseline code, AVX-512 only inside target() functions):
 *   gcc -O2 -static -o avx512_probe avx512_probe.c -lm
 * Run on a host without AVX-512:  tests/emu/bochs_run.sh build/emu/avx512_probe */
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static unsigned l1c, l7b, l7c, l7d, l71a; /* CPUID words we look at */
static uint64_t xcr0;
static int fails, force;
static sigjmp_buf ill_jmp;
static void on_sigill(int sig)
{
    (void)sig;
    siglongjmp(ill_jmp, 1);
}

static int bit(unsigned w, int b)
{
    return (w >> b) & 1;
}

static void check(const char *name, int usable, int (*fn)(void))
{
    if (!usable && !force) {
        printf("SKIP %s (not advertised)\n", name);
        return;
    }
    if (sigsetjmp(ill_jmp, 1)) { /* only reachable with "force": executed an unsupported insn */
        printf("%s %s (SIGILL)\n", usable ? "FAIL" : "NOTIMPL", name);
        if (usable)
            fails++;
        return;
    }
    int ok = fn();
    printf("%s %s\n", ok ? "PASS" : "FAIL", name);
    if (!ok)
        fails++;
}

/* ---- AVX-512F: FMA, masked load near an unmapped page, zero-extend, reduce ---- */
__attribute__((target("avx512f"))) static int t_fmadd(void)
{
    float a[16], b[16], c[16], r[16];
    for (int i = 0; i < 16; i++) {
        a[i] = 1.5f + i * 0.37f;
        b[i] = -2.25f + i * 0.11f;
        c[i] = 1e-3f * i;
    }
    _mm512_storeu_ps(r, _mm512_fmadd_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(b), _mm512_loadu_ps(c)));
    for (int i = 0; i < 16; i++)
        if (r[i] != fmaf(a[i], b[i], c[i]))
            return 0;
    return 1;
}

__attribute__((target("avx512f"))) static int t_maskz_load(void)
{
    /* 8 floats at the end of a page, next page PROT_NONE: masked-off lanes must not fault. */
    long pg = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m + pg, pg, PROT_NONE))
        return 0;
    float *p = (float *)(m + pg) - 8;
    for (int i = 0; i < 8; i++)
        p[i] = (float)(i + 1);
    float r[16];
    _mm512_storeu_ps(r, _mm512_maskz_loadu_ps((__mmask16)0x00A5, p)); /* lanes 0,2,5,7 */
    int ok = 1;
    for (int i = 0; i < 16; i++)
        ok &= r[i] == ((0xA5 >> i) & 1 ? (float)(i + 1) : 0.0f);
    munmap(m, 2 * pg);
    return ok;
}

__attribute__((target("avx512f"))) static int t_cvtepu16(void)
{
    uint16_t in[16];
    uint32_t out[16];
    for (int i = 0; i < 16; i++)
        in[i] = (uint16_t)(0xFFFF - i * 4099);
    _mm512_storeu_si512(out, _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)in)));
    for (int i = 0; i < 16; i++)
        if (out[i] != in[i])
            return 0;
    return 1;
}

__attribute__((target("avx512f"))) static int t_reduce(void)
{
    float a[16];
    float s = 0;
    for (int i = 0; i < 16; i++) {
        a[i] = (float)(i * i);
        s += a[i];
    } /* exact in float */
    return _mm512_reduce_add_ps(_mm512_loadu_ps(a)) == s && _mm512_reduce_max_ps(_mm512_loadu_ps(a)) == 225.0f;
}

/* ---- AVX-512BW: u8*s8 pair-add (int8 dot building block), byte compare mask ---- */
__attribute__((target("avx512f,avx512bw"))) static int t_bw(void)
{
    uint8_t a[64];
    int8_t b[64];
    int16_t r[32];
    for (int i = 0; i < 64; i++) {
        a[i] = (uint8_t)(i * 7 + 200);
        b[i] = (int8_t)(i * 5 - 100);
    }
    __m512i va = _mm512_loadu_si512(a), vb = _mm512_loadu_si512(b);
    _mm512_storeu_si512(r, _mm512_maddubs_epi16(va, vb));
    for (int i = 0; i < 32; i++) {
        int v = a[2 * i] * b[2 * i] + a[2 * i + 1] * b[2 * i + 1];
        v = v > 32767 ? 32767 : v < -32768 ? -32768 : v; /* saturating */
        if (r[i] != v)
            return 0;
    }
    uint64_t m = _mm512_cmpgt_epu8_mask(va, _mm512_set1_epi8((char)128)), e = 0;
    for (int i = 0; i < 64; i++)
        e |= (uint64_t)(a[i] > 128) << i;
    return m == e;
}

/* ---- AVX-512VL: 256-bit masked op with EVEX encoding ---- */
__attribute__((target("avx512f,avx512vl"))) static int t_vl(void)
{
    float a[8], b[8], r[8];
    for (int i = 0; i < 8; i++) {
        a[i] = i * 1.25f;
        b[i] = 10.0f - i;
    }
    _mm256_storeu_ps(r, _mm256_maskz_add_ps((__mmask8)0x5A, _mm256_loadu_ps(a), _mm256_loadu_ps(b)));
    for (int i = 0; i < 8; i++)
        if (r[i] != ((0x5A >> i) & 1 ? a[i] + b[i] : 0.0f))
            return 0;
    return 1;
}

/* ---- AVX-512DQ: int64 -> double ---- */
__attribute__((target("avx512f,avx512dq"))) static int t_dq(void)
{
    int64_t a[8];
    double r[8];
    for (int i = 0; i < 8; i++)
        a[i] = (int64_t)(i - 4) * 123456789012LL;
    _mm512_storeu_pd(r, _mm512_cvtepi64_pd(_mm512_loadu_si512(a)));
    for (int i = 0; i < 8; i++)
        if (r[i] != (double)a[i])
            return 0;
    return 1;
}

/* ---- AVX-512VBMI: full 64-byte permute ---- */
__attribute__((target("avx512f,avx512vbmi"))) static int t_vbmi(void)
{
    uint8_t idx[64], tab[64], r[64];
    for (int i = 0; i < 64; i++) {
        idx[i] = (uint8_t)((i * 37 + 11) & 0xFF);
        tab[i] = (uint8_t)(255 - 3 * i);
    }
    _mm512_storeu_si512(r, _mm512_permutexvar_epi8(_mm512_loadu_si512(idx), _mm512_loadu_si512(tab)));
    for (int i = 0; i < 64; i++)
        if (r[i] != tab[idx[i] & 63])
            return 0;
    return 1;
}

/* ---- AVX512_VNNI: u8*s8 dot product accumulate into int32 ---- */
__attribute__((target("avx512f,avx512vnni"))) static int t_vnni(void)
{
    uint8_t a[64];
    int8_t b[64];
    int32_t acc[16], r[16];
    for (int i = 0; i < 64; i++) {
        a[i] = (uint8_t)(i * 13 + 1);
        b[i] = (int8_t)(i * 3 - 90);
    }
    for (int i = 0; i < 16; i++)
        acc[i] = i * 1000 - 5000;
    _mm512_storeu_si512(r, _mm512_dpbusd_epi32(_mm512_loadu_si512(acc), _mm512_loadu_si512(a), _mm512_loadu_si512(b)));
    for (int i = 0; i < 16; i++) {
        int32_t v = acc[i];
        for (int k = 0; k < 4; k++)
            v += a[4 * i + k] * b[4 * i + k];
        if (r[i] != v)
            return 0;
    }
    return 1;
}

/* ---- AVX512_BF16: bf16 pair dot product into fp32 ---- */
__attribute__((target("avx512f,avx512bf16"))) static int t_bf16(void)
{
    float a[32], b[32], acc[16], r[16];
    for (int i = 0; i < 32; i++) {
        a[i] = (float)(i - 16);
        b[i] = 0.5f * i;
    } /* exact in bf16 */
    for (int i = 0; i < 16; i++)
        acc[i] = (float)i;
    __m512bh va = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + 16), _mm512_loadu_ps(a));
    __m512bh vb = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(b + 16), _mm512_loadu_ps(b));
    _mm512_storeu_ps(r, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), va, vb));
    for (int i = 0; i < 16; i++)
        if (r[i] != acc[i] + a[2 * i] * b[2 * i] + a[2 * i + 1] * b[2 * i + 1])
            return 0;
    return 1;
}

__attribute__((target("avx512f"))) static float spin512(unsigned long n)
{
    __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
    __m512 x0 = a, x1 = _mm512_set1_ps(1.1f), x2 = _mm512_set1_ps(1.2f), x3 = _mm512_set1_ps(1.3f);
    for (unsigned long i = 0; i < n; i++) { /* 4 vfmadd + 3 loop insns per iteration */
        x0 = _mm512_fmadd_ps(x0, b, c);
        x1 = _mm512_fmadd_ps(x1, b, c);
        x2 = _mm512_fmadd_ps(x2, b, c);
        x3 = _mm512_fmadd_ps(x3, b, c);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(x0, x1), _mm512_add_ps(x2, x3)));
}

/* ---- emulator sanity: libc memmove/memcpy (rep movsb paths) vs a byte loop ---- */
static int t_memmove(void)
{
    static uint8_t buf[1 << 16], ref[1 << 16];
    static const size_t lens[] = {0, 1, 7, 31, 32, 63, 64, 255, 256, 2047, 2048, 2113, 4095, 4096, 8191, 20000};
    static const long shifts[] = {-4096, -65, -8, -1, 1, 3, 64, 4097};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
        for (size_t si = 0; si < sizeof shifts / sizeof *shifts; si++) {
            size_t n = lens[li], src = 24000;
            size_t dst = (size_t)((long)src + shifts[si]);
            for (size_t i = 0; i < sizeof buf; i++)
                buf[i] = ref[i] = (uint8_t)(i * 131 + 7);
            memmove(buf + dst, buf + src, n);
            if (dst < src)
                for (size_t i = 0; i < n; i++)
                    ref[dst + i] = ref[src + i];
            else
                for (size_t i = n; i-- > 0;)
                    ref[dst + i] = ref[src + i];
            if (memcmp(buf, ref, sizeof buf)) {
                printf("  memmove mismatch n=%zu shift=%ld\n", n, shifts[si]);
                return 0;
            }
        }
    return 1;
}

int main(int argc, char **argv)
{
    unsigned a, b, c, d, max7 = 0;
    force = argc > 1 && !strcmp(argv[1], "force");
    signal(SIGILL, on_sigill);
    __cpuid(0, a, b, c, d);
    unsigned maxleaf = a;
    char vendor[13];
    memcpy(vendor, &b, 4);
    memcpy(vendor + 4, &d, 4);
    memcpy(vendor + 8, &c, 4);
    vendor[12] = 0;
    __cpuid(1, a, b, l1c, d);
    if (maxleaf >= 7) {
        __cpuid_count(7, 0, max7, l7b, l7c, l7d);
    }
    if (maxleaf >= 7 && max7 >= 1) {
        __cpuid_count(7, 1, l71a, b, c, d);
    }
    if (bit(l1c, 27)) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((uint64_t)hi << 32) | lo;
    }
    char brand[49] = "";
    __cpuid(0x80000000, a, b, c, d);
    if (a >= 0x80000004)
        for (unsigned i = 0; i < 3; i++)
            __cpuid(0x80000002 + i, *(unsigned *)(brand + 16 * i), *(unsigned *)(brand + 16 * i + 4),
                    *(unsigned *)(brand + 16 * i + 8), *(unsigned *)(brand + 16 * i + 12));
    printf("cpu: %s \"%s\"\n", vendor, brand);
    printf("cpuid: 1.ecx=%08x 7.0.ebx=%08x 7.0.ecx=%08x 7.0.edx=%08x 7.1.eax=%08x xcr0=%#llx\n", l1c, l7b, l7c, l7d,
           l71a, (unsigned long long)xcr0);
    static const struct {
        const char *n;
        unsigned *w;
        int b;
    } F[] = {{"osxsave", &l1c, 27},
             {"avx", &l1c, 28},
             {"fma", &l1c, 12},
             {"f16c", &l1c, 29},
             {"avx2", &l7b, 5},
             {"avx512f", &l7b, 16},
             {"avx512dq", &l7b, 17},
             {"avx512ifma", &l7b, 21},
             {"avx512cd", &l7b, 28},
             {"avx512bw", &l7b, 30},
             {"avx512vl", &l7b, 31},
             {"avx512vbmi", &l7c, 1},
             {"avx512vbmi2", &l7c, 6},
             {"gfni", &l7c, 8},
             {"vaes", &l7c, 9},
             {"vpclmulqdq", &l7c, 10},
             {"avx512_vnni", &l7c, 11},
             {"avx512_bitalg", &l7c, 12},
             {"avx512_vpopcntdq", &l7c, 14},
             {"avx512_vp2intersect", &l7d, 8},
             {"avx512_fp16", &l7d, 23},
             {"amx_bf16", &l7d, 22},
             {"amx_tile", &l7d, 24},
             {"amx_int8", &l7d, 25},
             {"avx_vnni", &l71a, 4},
             {"avx512_bf16", &l71a, 5}};
    printf("features:");
    for (size_t i = 0; i < sizeof F / sizeof *F; i++)
        if (bit(*F[i].w, F[i].b))
            printf(" %s", F[i].n);
    printf("\nmissing: ");
    for (size_t i = 0; i < sizeof F / sizeof *F; i++)
        if (!bit(*F[i].w, F[i].b))
            printf(" %s", F[i].n);
    printf("\n");

    /* OS must enable opmask+ZMM state (XCR0 bits 5,6,7) as well as SSE/AVX (1,2). */
    int os512 = bit(l1c, 27) && (xcr0 & 0xE6) == 0xE6;
    int f = os512 && bit(l7b, 16);
    check("avx512f _mm512_fmadd_ps", f, t_fmadd);
    check("avx512f _mm512_maskz_loadu_ps (fault suppression)", f, t_maskz_load);
    check("avx512f _mm512_cvtepu16_epi32", f, t_cvtepu16);
    check("avx512f _mm512_reduce_add_ps/max_ps", f, t_reduce);
    check("avx512bw _mm512_maddubs_epi16/cmpgt_epu8_mask", f && bit(l7b, 30), t_bw);
    check("avx512vl _mm256_maskz_add_ps", f && bit(l7b, 31), t_vl);
    check("avx512dq _mm512_cvtepi64_pd", f && bit(l7b, 17), t_dq);
    check("avx512vbmi _mm512_permutexvar_epi8", f && bit(l7c, 1), t_vbmi);
    check("avx512_vnni _mm512_dpbusd_epi32", f && bit(l7c, 11), t_vnni);
    check("avx512_bf16 _mm512_dpbf16_ps", f && bit(l71a, 5), t_bf16);
    check("libc memmove overlap/sizes", 1, t_memmove);

    if (argc > 2 && !strcmp(argv[1], "spin")) { /* 5 instructions per iteration (lea, add, add, cmp, jne) */
        unsigned long n = strtoul(argv[2], NULL, 0), x = 1;
        for (unsigned long i = 0; i < n; i++) {
            x = x * 3 + i;
            __asm__ volatile("" : "+r"(x));
        }
        printf("spin: %lu iterations done (x=%lu)\n", n, x & 0xFFFF);
    }
    if (argc > 2 && !strcmp(argv[1], "spin512") && f)
        printf("spin512: %lu iterations done (sum=%.3f)\n", strtoul(argv[2], NULL, 0),
               spin512(strtoul(argv[2], NULL, 0)));
    printf("%s: %d failure(s)\n", fails ? "FAIL" : "PASS", fails);
    return fails ? 1 : 0;
}
