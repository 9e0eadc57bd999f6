/* cpu.c - CPUID / XGETBV / arch_prctl feature detection (see cpu.h). */
#include "base/cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define HY_X86 1
#endif

static struct hy_cpu_caps caps;
static pthread_once_t caps_once = PTHREAD_ONCE_INIT;
static char caps_str[256];

#ifdef HY_X86
static unsigned long long xgetbv0(void)
{
    unsigned int eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

/* Asks Linux for permission to use AMX tile data (needed before the first ldtilecfg). */
static int request_amx_permission(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    const int ARCH_GET_XCOMP_PERM = 0x1022, ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
    unsigned long bitmask = 0;
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
        return 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &bitmask) != 0)
        return 0;
    return (bitmask & (1ul << XFEATURE_XTILEDATA)) != 0;
#else
    return 0;
#endif
}
#endif

static void detect(void)
{
    memset(&caps, 0, sizeof(caps));
#ifdef HY_X86
    unsigned int a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        goto done;
    const unsigned int max_leaf = a;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        goto done;
    const int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    caps.fma = (c >> 12) & 1;
    caps.f16c = (c >> 29) & 1;
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    caps.os_ymm = avx && (xcr0 & 0x6) == 0x6;
    caps.os_zmm = caps.os_ymm && (xcr0 & 0xe0) == 0xe0;
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        caps.avx2 = (b >> 5) & 1;
        caps.avx512f = (b >> 16) & 1;
        caps.avx512bw = (b >> 30) & 1;
        caps.avx512vl = (b >> 31) & 1;
        caps.avx512vbmi = (c >> 1) & 1;
        caps.avx512vnni = (c >> 11) & 1;
        caps.amx_bf16 = (d >> 22) & 1;
        caps.amx_tile = (d >> 24) & 1;
        const unsigned int max_sub = a;
        if (max_sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            caps.avx512bf16 = (a >> 5) & 1;
        }
    }
    if (caps.amx_tile && (xcr0 & 0x60000ull) == 0x60000ull)
        caps.os_amx = request_amx_permission();
done:
#endif
    snprintf(caps_str, sizeof(caps_str), "%s%s%s%s%s%s%s%s%s%s%s%s%s", caps.avx2 ? "avx2 " : "", caps.fma ? "fma " : "",
             caps.f16c ? "f16c " : "", caps.avx512f ? "avx512f " : "", caps.avx512bw ? "avx512bw " : "",
             caps.avx512vl ? "avx512vl " : "", caps.avx512bf16 ? "avx512bf16 " : "",
             caps.avx512vbmi ? "avx512vbmi " : "", caps.avx512vnni ? "avx512vnni " : "",
             caps.amx_tile ? "amx-tile " : "", caps.amx_bf16 ? "amx-bf16 " : "", caps.os_zmm ? "os-zmm " : "",
             caps.os_amx ? "os-amx " : "");
    size_t n = strlen(caps_str);
    if (n && caps_str[n - 1] == ' ')
        caps_str[n - 1] = 0;
}

const struct hy_cpu_caps *hy_cpu_caps(void)
{
    pthread_once(&caps_once, detect);
    return &caps;
}

const char *hy_cpu_caps_string(void)
{
    pthread_once(&caps_once, detect);
    return caps_str;
}

int hy_cpu_supports(enum hy_isa isa)
{
    const struct hy_cpu_caps *k = hy_cpu_caps();
    const int avx2 = k->avx2 && k->fma && k->f16c && k->os_ymm;
    const int avx512 = avx2 && k->avx512f && k->avx512bw && k->avx512vl && k->os_zmm;
    switch (isa) {
    case HY_ISA_REF:
        return 1;
    case HY_ISA_AVX2:
        return avx2;
    case HY_ISA_AVX512:
        return avx512;
    case HY_ISA_AMX:
        return avx512 && k->avx512bf16 && k->amx_tile && k->amx_bf16 && k->os_amx; /* decode: vdpbf16ps */
    default:
        return 0;
    }
}

static const char *const isa_names[HY_ISA_COUNT] = {"ref", "avx2", "avx512", "amx"};

const char *hy_isa_name(enum hy_isa isa)
{
    return (unsigned)isa < HY_ISA_COUNT ? isa_names[isa] : "?";
}

int hy_isa_parse(const char *name)
{
    for (int i = 0; i < HY_ISA_COUNT; i++)
        if (name && !strcmp(name, isa_names[i]))
            return i;
    return -1;
}
