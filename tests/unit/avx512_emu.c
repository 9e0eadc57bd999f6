/* avx512_emu.c - the avx512 kernels (src/kernels/avx512.c, avx512_quant.c) compiled against SIMDe's
 * portable AVX-512 intrinsics (Debian libsimde-dev), so the kernel tests check their logic (chains,
 * masks, tails, decoding, tiling) against ref on CPUs without AVX-512. Test code only.
 *
 * The emulated table's matmul_bf16x is the AVX512_BF16 path (avx512_bf16.c), the variant the real
 * table takes on CPUs with AVX512_BF16; its matmul is the f32 path.
 * Compiled once (Makefile) and linked into every unit test; interface in avx512_emu.h. The emulated
 * functions are the kernels' sources renamed emu512_* (no clash with the library's real ones).
 *
 * SIMDe 0.7.4 lacks eleven of the intrinsics the kernels use; they are defined below from the Intel
 * intrinsics guide's element-wise descriptions (masked loads read only the selected elements, as the
 * hardware does, so ASan sees the same accesses).
 */
#include "unit/avx512_emu.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi" /* SIMDe passes 64-byte vectors by value: an ABI note only */

#include <immintrin.h>
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include "base/cpu.h"
#include "kernels/kernel_table.h"
#include "quant/dtype.h"

#include <stdlib.h>
#include <string.h>

int hy_test_avx512_emu_wanted(void)
{
    const char *e = getenv("HY_TEST_AVX512_EMU");
    return !hy_cpu_supports(HY_ISA_AVX512) || (e && !strcmp(e, "1"));
}

/* SIMDe 0.7.4's portable _mm512_test_epi16_mask builds the mask with `!!(a & b) << i` in int, which
 * is undefined for lane 31 (UBSan: "left shift of 1 by 31 places cannot be represented in type
 * 'int'"); this one shifts in the mask's own unsigned type. */
static inline __mmask32 emu_test_epi16_mask(__m512i a, __m512i b)
{
    uint16_t x[32], y[32];
    memcpy(x, &a, 64);
    memcpy(y, &b, 64);
    __mmask32 r = 0;
    for (int i = 0; i < 32; i++)
        r |= (__mmask32)((x[i] & y[i]) != 0) << i;
    return r;
}

/* SIMDe also computes integer lanes in signed vector arithmetic (`a_.i8 - b_.i8`, `a_.i16 << imm`),
 * where wrap-around and shifts of negative values are undefined in C and UBSan stops the test; the
 * hardware wraps. These do the lane arithmetic in unsigned types (the same bits). */
#define EMU_LANES(name, T, n, expr)                                                                                    \
    static inline __m512i name(__m512i a, __m512i b)                                                                   \
    {                                                                                                                  \
        T x[n], y[n];                                                                                                  \
        memcpy(x, &a, 64);                                                                                             \
        memcpy(y, &b, 64);                                                                                             \
        for (int i = 0; i < n; i++)                                                                                    \
            x[i] = (T)(expr);                                                                                          \
        memcpy(&a, x, 64);                                                                                             \
        return a;                                                                                                      \
    }
EMU_LANES(emu_sub_epi8, uint8_t, 64, x[i] - y[i])
EMU_LANES(emu_add_epi16, uint16_t, 32, x[i] + y[i])
EMU_LANES(emu_add_epi32, uint32_t, 16, x[i] + y[i])

static inline __m512i emu_mask_add_epi16(__m512i src, __mmask32 k, __m512i a, __m512i b)
{
    uint16_t s[32], x[32], y[32];
    memcpy(s, &src, 64);
    memcpy(x, &a, 64);
    memcpy(y, &b, 64);
    for (int i = 0; i < 32; i++)
        if ((k >> i) & 1u)
            s[i] = (uint16_t)(x[i] + y[i]);
    memcpy(&src, s, 64);
    return src;
}

static inline __m512i emu_slli_epi16(__m512i a, unsigned imm)
{
    uint16_t x[32];
    memcpy(x, &a, 64);
    for (int i = 0; i < 32; i++)
        x[i] = imm > 15 ? 0 : (uint16_t)(x[i] << imm);
    memcpy(&a, x, 64);
    return a;
}

static inline __m512i emu_slli_epi32(__m512i a, unsigned imm)
{
    uint32_t x[16];
    memcpy(x, &a, 64);
    for (int i = 0; i < 16; i++)
        x[i] = imm > 31 ? 0 : x[i] << imm;
    memcpy(&a, x, 64);
    return a;
}

static inline __m512i emu_cvtepi8_epi32(__m128i a)
{
    int8_t in[16];
    int32_t out[16];
    memcpy(in, &a, 16);
    for (int i = 0; i < 16; i++)
        out[i] = in[i];
    __m512i r;
    memcpy(&r, out, 64);
    return r;
}

static inline __m512i emu_cvtepu8_epi32(__m128i a)
{
    uint8_t in[16];
    int32_t out[16];
    memcpy(in, &a, 16);
    for (int i = 0; i < 16; i++)
        out[i] = in[i];
    __m512i r;
    memcpy(&r, out, 64);
    return r;
}

static inline __m512i emu_cvtepu8_epi16(__m256i a)
{
    uint8_t in[32];
    uint16_t out[32];
    memcpy(in, &a, 32);
    for (int i = 0; i < 32; i++)
        out[i] = in[i];
    __m512i r;
    memcpy(&r, out, 64);
    return r;
}

static inline __m512i emu_cvtepu16_epi32(__m256i a)
{
    uint16_t in[16];
    uint32_t out[16];
    memcpy(in, &a, 32);
    for (int i = 0; i < 16; i++)
        out[i] = in[i];
    __m512i r;
    memcpy(&r, out, 64);
    return r;
}

static inline __m512 emu_cvtph_ps(__m256i a)
{
    uint16_t in[16];
    float out[16];
    memcpy(in, &a, 32);
    for (int i = 0; i < 16; i++)
        out[i] = hy_f16_to_f32(in[i]);
    __m512 r;
    memcpy(&r, out, 64);
    return r;
}

static inline __m256i emu_maskz_loadu_epi16(__mmask16 k, const void *p)
{
    uint16_t out[16];
    for (int i = 0; i < 16; i++)
        out[i] = (k >> i) & 1 ? ((const uint16_t *)p)[i] : 0;
    __m256i r;
    memcpy(&r, out, 32);
    return r;
}

static inline __m256i emu_cvtepi32_epi16(__m512i a)
{
    int32_t in[16];
    int16_t out[16];
    memcpy(in, &a, 64);
    for (int i = 0; i < 16; i++)
        out[i] = (int16_t)in[i]; /* truncation, as vpmovdw */
    __m256i r;
    memcpy(&r, out, 32);
    return r;
}

static inline __m512i emu512_maskz_loadu_epi16(__mmask32 k, const void *p)
{
    uint16_t out[32];
    for (int i = 0; i < 32; i++)
        out[i] = (k >> i) & 1 ? ((const uint16_t *)p)[i] : 0;
    __m512i r;
    memcpy(&r, out, 64);
    return r;
}

static inline __m512i emu512_maskz_loadu_epi8(__mmask64 k, const void *p)
{
    uint8_t out[64];
    for (int i = 0; i < 64; i++)
        out[i] = (k >> i) & 1 ? ((const uint8_t *)p)[i] : 0;
    __m512i r;
    memcpy(&r, out, 64);
    return r;
}

static inline __m512 emu_maskz_loadu_ps(__mmask16 k, const void *p)
{
    float out[16];
    for (int i = 0; i < 16; i++)
        out[i] = (k >> i) & 1 ? ((const float *)p)[i] : 0.0f;
    __m512 r;
    memcpy(&r, out, 64);
    return r;
}

static inline __mmask32 emu_cmpeq_epi8_mask(__m256i a, __m256i b)
{
    uint8_t x[32], y[32];
    memcpy(x, &a, 32);
    memcpy(y, &b, 32);
    __mmask32 m = 0;
    for (int i = 0; i < 32; i++)
        m |= (__mmask32)(x[i] == y[i]) << i;
    return m;
}

#undef _mm512_sub_epi8 /* SIMDe's aliases of the functions replaced above */
#undef _mm512_add_epi16
#undef _mm512_add_epi32
#undef _mm512_mask_add_epi16
#undef _mm512_slli_epi16
#undef _mm512_slli_epi32
#define _mm512_sub_epi8 emu_sub_epi8
#define _mm512_add_epi16 emu_add_epi16
#define _mm512_add_epi32 emu_add_epi32
#define _mm512_mask_add_epi16 emu_mask_add_epi16
#define _mm512_slli_epi16 emu_slli_epi16
#define _mm512_slli_epi32 emu_slli_epi32
#undef _mm512_test_epi16_mask /* SIMDe's alias */
#define _mm512_test_epi16_mask emu_test_epi16_mask
#define _mm512_cvtepi8_epi32 emu_cvtepi8_epi32
#define _mm512_cvtepu8_epi32 emu_cvtepu8_epi32
#define _mm512_cvtepu8_epi16 emu_cvtepu8_epi16
#define _mm512_cvtepi32_epi16 emu_cvtepi32_epi16
#define _mm512_cvtepu16_epi32 emu_cvtepu16_epi32
#define _mm512_cvtph_ps emu_cvtph_ps
#define _mm256_maskz_loadu_epi16 emu_maskz_loadu_epi16
#define _mm512_maskz_loadu_ps emu_maskz_loadu_ps
#define _mm512_maskz_loadu_epi16 emu512_maskz_loadu_epi16
#define _mm512_maskz_loadu_epi8 emu512_maskz_loadu_epi8
#define _mm256_cmpeq_epi8_mask emu_cmpeq_epi8_mask

/* The kernels' public names, renamed (declared first: the sources call some before defining them). */
#define hy_avx512_matmul emu512_matmul
#define hy_avx512_matmul_rows emu512_matmul_rows
#define hy_avx512_dot_f32 emu512_dot_f32
#define hy_avx512_rmsnorm emu512_rmsnorm
#define hy_avx512_widen_rows emu512_widen_rows
#define hy_avx512q_supported emu512_q_supported
#define hy_avx512q_rows emu512_q_rows
#define hy_avx512q_widen_rows emu512_q_widen_rows
#define hy_avx512q_widen_rows_raw emu512_q_widen_rows_raw
#define hy_avx512q_gemv emu512_q_gemv
#define hy_avx512bf16_matmul_bf16x emu512_bf16x
#define hy_avx512bf16_matmul_rows_bf16x emu512_rows_bf16x
#define hy_avx512bf16_panel_routes emu512_bf16x_panel_routes
#define hy_avx512bf16_set_vbmi emu512_bf16x_set_vbmi
#define hy_avx512bf16_set_e2m1_order emu512_bf16x_set_e2m1_order
#define hy_avx512bf16_panel emu512_bf16x_panel
void emu512_bf16x(float *y, const float *x, int64_t T, const struct hy_tensor *W);
void emu512_rows_bf16x(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                       int64_t n1);
unsigned long emu512_bf16x_panel_routes(void);
int emu512_bf16x_set_vbmi(int on);
int emu512_bf16x_set_e2m1_order(int on);
void emu512_bf16x_panel(const struct hy_tensor *W, int64_t n0, int64_t nv, uint16_t *panel);
void emu512_matmul(float *y, const float *x, int64_t T, const struct hy_tensor *W);
void emu512_matmul_rows(float *y, int64_t ldy, const float *x, int64_t T, const struct hy_tensor *W, int64_t n0,
                        int64_t n1);
float emu512_dot_f32(const float *a, const float *b, int64_t n);
void emu512_rmsnorm(float *y, const float *x, const float *w, int64_t T, int64_t d, float eps);
void emu512_widen_rows(const struct hy_tensor *W, int64_t n0, int64_t nb, int64_t ldw, float *dst);
int emu512_q_supported(const struct hy_tensor *W);

#define HY_AVX512_SIMDE 1
#include "kernels/avx512.c"
#define tile tile_q /* both files have a static tile(); here they share one translation unit */
#include "kernels/avx512_quant.c"
#undef tile
#include "kernels/avx512_bf16.c"
#define hy_avx512_w8a8_dots emu512_w8a8_dots
#include "kernels/avx512_w8a8.c"

#pragma GCC diagnostic pop
#pragma GCC pop_options

int hy_test_avx512_emu_table(struct hy_kernel_table *t)
{
    if (!hy_cpu_supports(HY_ISA_AVX2))
        return -1;
    const struct hy_kernel_table e = {
        .isa = HY_ISA_AVX512,
        .name = "avx512-emu",
        .matmul = emu512_matmul,
        .matmul_bf16x = emu512_bf16x, /* the AVX512_BF16 path (vdpbf16ps emulated) */
        .matmul_rows = emu512_matmul_rows,
        .matmul_rows_bf16x = emu512_rows_bf16x, /* its decode tiles */
        .dot_f32 = emu512_dot_f32,
        .rmsnorm = emu512_rmsnorm,
        .rope = hy_avx2_rope,
        .silu_mul = hy_avx2_silu_mul,
        .round_bf16 = hy_avx2_round_bf16,
        .attend = hy_avx2_attend,
        .attn_pv = hy_avx2_attn_pv,
        .fp8_fit_pass = hy_avx2_fp8_fit_pass,
        .fp8_encode = hy_avx2_fp8_encode,
        .dot_f64 = hy_avx2_dot_f64,
        .gemm_sub_f64 = hy_avx2_gemm_sub_f64,
        .gemm_tn_acc_f64 = hy_avx2_gemm_tn_acc_f64,
    };
    *t = e;
    return 0;
}
