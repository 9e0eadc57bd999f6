/* e4m3_decode_bench.c - micro-benchmark of the AVX512_VBMI byte-table E4M3 decode-and-dot of the
 * AVX512_BF16 decode tiles (vline in src/kernels/avx512_bf16.c), standalone (not a test): what the MXFP8
 * exponent rebase costs over per-tensor FP8, and two ways to broadcast the rebase.
 *
 *  pt:   per-tensor (no rebase): per 64 codes of a row two vpermt2b look up the low and high bytes of
 *        bf16(e4m3(code & 0x7f)), a vpternlogd ors the sign in, two vpermt2b interleave them into words,
 *        two vdpbf16ps.
 *  mx-w: MXFP8 as before f74c590: each block's (s - 127) << 7 computed in a general register and
 *        broadcast by vpbroadcastw (a shuffle-port op), added to the nonzero codes' words under a mask.
 *  mx-d: MXFP8 as the engine does now: the same value from a 256-entry table of 32-bit words by
 *        vpbroadcastd from memory (a load). Outputs must equal mx-w's bitwise (exits 1 otherwise).
 *
 * One core, 64 rows of K = 4096 resident in L2, 4-row tiles, best of 300 alternating runs; prints ns per
 * 32 codes and GB/s of weight bytes (codes + MX scales).
 * Build: gcc -O2 -std=c11 -D_GNU_SOURCE experiments/e4m3_decode_bench.c -lm -o build/e4m3_decode_bench
 * Run:   build/e4m3_decode_bench   (needs AVX512F/BW/BF16/VBMI) */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TGT __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vbmi")))

enum { K = 4096, ROWS = 64, NR = 4 };

static uint8_t codes[ROWS][K] __attribute__((aligned(64)));
static uint8_t scales[ROWS][K / 32];
static uint16_t xb[K] __attribute__((aligned(64)));
static uint8_t vb_tab[4][64] __attribute__((aligned(64))); /* low bytes of codes 0..127, then high bytes */
static uint8_t vb_il[2][64] __attribute__((aligned(64)));  /* word k of half h: low byte 32h + k, high byte */
static uint32_t off32[256];                                /* ((s - 127) << 7) mod 2^16 in both words */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float e4m3(uint8_t b)
{
    const int e = (b >> 3) & 15, m = b & 7;
    const float v = e ? ldexpf(1.0f + m / 8.0f, e - 7) : ldexpf(m / 8.0f, -6);
    return b & 0x80 ? -v : v;
}

static uint16_t to_bf16(float f) /* round to nearest even; no NaNs here */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* MX: 0 per-tensor, 1 vpbroadcastw of a computed short, 2 vpbroadcastd from off32. */
#define DOT(NAME, MX)                                                                                                  \
    TGT static void NAME(float *y)                                                                                     \
    {                                                                                                                  \
        __m512i tab[4], il[2];                                                                                         \
        for (int i = 0; i < 4; i++)                                                                                    \
            tab[i] = _mm512_load_si512(vb_tab[i]);                                                                     \
        il[0] = _mm512_load_si512(vb_il[0]);                                                                           \
        il[1] = _mm512_load_si512(vb_il[1]);                                                                           \
        for (int n = 0; n < ROWS; n += NR) {                                                                           \
            __m512 acc[NR];                                                                                            \
            for (int j = 0; j < NR; j++)                                                                               \
                acc[j] = _mm512_setzero_ps();                                                                          \
            for (int c = 0; c < K / 32; c += 2) {                                                                      \
                const __m512bh x0 = (__m512bh)_mm512_load_si512(xb + 32 * c);                                          \
                const __m512bh x1 = (__m512bh)_mm512_load_si512(xb + 32 * c + 32);                                     \
                _Pragma("GCC unroll 4") for (int j = 0; j < NR; j++)                                                   \
                {                                                                                                      \
                    const __m512i b = _mm512_load_si512(codes[n + j] + 32 * c);                                        \
                    const __m512i lo = _mm512_permutex2var_epi8(tab[0], b, tab[1]);                                    \
                    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(tab[2], b, tab[3]), b,       \
                                                                 _mm512_set1_epi8((char)0x80), 0xF8);                  \
                    __m512i w0 = _mm512_permutex2var_epi8(lo, il[0], hi);                                              \
                    __m512i w1 = _mm512_permutex2var_epi8(lo, il[1], hi);                                              \
                    if (MX) {                                                                                          \
                        const __mmask64 nz = _mm512_test_epi8_mask(b, _mm512_set1_epi8(0x7F));                         \
                        const uint8_t s0 = scales[n + j][c], s1 = scales[n + j][c + 1];                                \
                        const __m512i o0 = MX == 1 ? _mm512_set1_epi16((short)((s0 - 127) * 128))                      \
                                                   : _mm512_set1_epi32((int)off32[s0]);                                \
                        const __m512i o1 = MX == 1 ? _mm512_set1_epi16((short)((s1 - 127) * 128))                      \
                                                   : _mm512_set1_epi32((int)off32[s1]);                                \
                        w0 = _mm512_mask_add_epi16(w0, (__mmask32)nz, w0, o0);                                         \
                        w1 = _mm512_mask_add_epi16(w1, (__mmask32)(nz >> 32), w1, o1);                                 \
                    }                                                                                                  \
                    acc[j] = _mm512_dpbf16_ps(acc[j], x0, (__m512bh)w0);                                               \
                    acc[j] = _mm512_dpbf16_ps(acc[j], x1, (__m512bh)w1);                                               \
                }                                                                                                      \
            }                                                                                                          \
            for (int j = 0; j < NR; j++)                                                                               \
                y[n + j] = _mm512_reduce_add_ps(acc[j]);                                                               \
        }                                                                                                              \
    }

DOT(dot_pt, 0)
DOT(dot_mxw, 1)
DOT(dot_mxd, 2)

int main(void)
{
    if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512vbmi")) {
        fprintf(stderr, "e4m3_decode_bench: needs AVX512_BF16 and AVX512_VBMI\n");
        return 1;
    }
    for (int m = 0; m < 128; m++) {
        const uint16_t v = to_bf16(e4m3((uint8_t)m));
        vb_tab[m >> 6][m & 63] = (uint8_t)(v & 0xFF);
        vb_tab[2 + (m >> 6)][m & 63] = (uint8_t)(v >> 8);
    }
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 32; k++) {
            vb_il[h][2 * k] = (uint8_t)(32 * h + k);
            vb_il[h][2 * k + 1] = (uint8_t)(64 + 32 * h + k);
        }
    for (int s = 0; s < 256; s++) {
        const uint32_t o = (uint16_t)((s - 127) * 128);
        off32[s] = o | o << 16;
    }
    uint64_t st = 88172645463325252ull;
    for (int n = 0; n < ROWS; n++) {
        for (int i = 0; i < K; i++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            codes[n][i] = (st & 0x7f) == 0x7f ? 0x7e : (uint8_t)st; /* no NaN codes */
        }
        for (int b = 0; b < K / 32; b++)
            scales[n][b] = (uint8_t)(120 + (st >> (b % 60)) % 8);
    }
    for (int k = 0; k < K; k++)
        xb[k] = to_bf16(sinf((float)k));
    void (*fn[3])(float *) = {dot_pt, dot_mxw, dot_mxd};
    static const char *const name[3] = {"pt", "mx-w", "mx-d"};
    float y[3][ROWS];
    double best[3] = {1e30, 1e30, 1e30};
    for (int r = 0; r < 300; r++)
        for (int v = 0; v < 3; v++) {
            const double t0 = now();
            fn[v](y[v]);
            const double t = now() - t0;
            best[v] = t < best[v] ? t : best[v];
        }
    if (memcmp(y[1], y[2], sizeof(y[1]))) {
        fprintf(stderr, "e4m3_decode_bench: mx-w and mx-d differ\n");
        return 1;
    }
    for (int v = 0; v < 3; v++)
        printf("%-5s %.3f ns / 32 codes (%.1f GB/s)\n", name[v], best[v] * 32 / ((double)ROWS * K) * 1e9,
               (double)ROWS * (K + (v ? K / 32 : 0)) / best[v] / 1e9);
    return 0;
}
