/* e2m1_decode_bench.c - micro-benchmark of two MXFP4 (E2M1 + E8M0) decode-and-dot schemes for the
 * AVX512_BF16 decode tiles, standalone (not a test; the engine's tiles take the second scheme, dtile_eo
 * in src/kernels/avx512_bf16.c, unless hy_avx512bf16_set_e2m1_order(0)).
 *
 *  cur: src/kernels/avx512_bf16.c's dec_e2m1 per 32 codes: vpmovzxbd of 16 bytes, a shift and a
 *       vpternlogd put nibble 2j / 2j+1 in word 2j / 2j+1, vpermw looks the words up in the 32-word
 *       table of the block's scale byte, one vdpbf16ps against x in natural order.
 *  eo:  per 64 codes (two MX blocks): vpmovzxbw of 32 bytes (word i = byte i), the low nibbles
 *       (elements 0, 2, .., 62) and high nibbles (1, 3, .., 63) as two index vectors with bit 4 set in
 *       the upper 16 words, one table holding block 0's 16 values then block 1's (two 32-byte loads),
 *       two vpermw, two vdpbf16ps against x stored even elements first, then odd, per 64 (x is
 *       converted once per call, so the permutation is free). About 5 vector instructions per 32
 *       codes against 7. Each output's dpbf16 sequence changes (lane i sums elements 4i, 4i+2, then
 *       4i+1, 4i+3), so the engine's prefill panels take the same order to keep the bfloat16 mode's
 *       results independent of T (test_kernels_bf16x checks that bitwise).
 *
 * One core, 64 rows of K = 4096 resident in L2, 4-row tiles, best of 400 alternating runs; prints ns
 * per 32 codes and GB/s of weight bytes (codes + scales), and the largest relative difference of the
 * two schemes' outputs (rounding order only).
 * Build: gcc -O2 -std=c11 -D_GNU_SOURCE experiments/e2m1_decode_bench.c -lm -o build/e2m1_decode_bench
 * Run:   build/e2m1_decode_bench   (needs AVX512F/BW/DQ/BF16) */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TGT __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

enum { K = 4096, ROWS = 64, NR = 4 };

static uint16_t tab[256][32] __attribute__((aligned(64))); /* bf16(e2m1(i & 15) * 2^(s - 127)) */
static uint8_t codes[ROWS][K / 2] __attribute__((aligned(64)));
static uint8_t scales[ROWS][K / 32];
static uint16_t xb[K] __attribute__((aligned(64)));  /* x as bf16, natural order */
static uint16_t xeo[K] __attribute__((aligned(64))); /* per 64: the 32 even elements, then the 32 odd */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint16_t to_bf16(float f) /* round to nearest even; no NaNs here */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

TGT static void dot_cur(float *y)
{
    const __m512i nib = _mm512_set1_epi32(0x000F000F);
    for (int n = 0; n < ROWS; n += NR) {
        __m512 acc[NR];
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            acc[j] = _mm512_setzero_ps();
        for (int c = 0; c < K / 32; c++) {
            const __m512bh x = (__m512bh)_mm512_load_si512(xb + 32 * c);
#pragma GCC unroll 4 /* acc[] in registers, as in the engine's tiles (a rolled loop spills it to memory) */
            for (int j = 0; j < NR; j++) {
                const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(codes[n + j] + 16 * c)));
                const __m512i i = _mm512_ternarylogic_epi32(d, _mm512_slli_epi32(d, 12), nib, 0xA8);
                const __m512i w = _mm512_permutexvar_epi16(i, _mm512_load_si512(tab[scales[n + j][c]]));
                acc[j] = _mm512_dpbf16_ps(acc[j], x, (__m512bh)w);
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            y[n + j] = _mm512_reduce_add_ps(acc[j]);
    }
}

TGT static void dot_eo(float *y)
{
    const __m512i low = _mm512_set1_epi16(0x000F);
    const __m512i up = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(16), 1); /* bit 4, words 16..31 */
    for (int n = 0; n < ROWS; n += NR) {
        __m512 acc[NR];
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            acc[j] = _mm512_setzero_ps();
        for (int c = 0; c < K / 64; c++) {
            const __m512bh xe = (__m512bh)_mm512_load_si512(xeo + 64 * c);
            const __m512bh xo = (__m512bh)_mm512_load_si512(xeo + 64 * c + 32);
#pragma GCC unroll 4
            for (int j = 0; j < NR; j++) {
                const __m512i w = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(codes[n + j] + 32 * c)));
                const __m256i t0 = _mm256_load_si256((const __m256i *)tab[scales[n + j][2 * c]]);
                const __m256i t1 = _mm256_load_si256((const __m256i *)tab[scales[n + j][2 * c + 1]]);
                const __m512i t = _mm512_inserti64x4(_mm512_castsi256_si512(t0), t1, 1);
                const __m512i lo = _mm512_ternarylogic_epi32(w, low, up, 0xEA); /* (w & 0xF) | up */
                const __m512i hi = _mm512_or_si512(_mm512_srli_epi16(w, 4), up);
                acc[j] = _mm512_dpbf16_ps(acc[j], xe, (__m512bh)_mm512_permutexvar_epi16(lo, t));
                acc[j] = _mm512_dpbf16_ps(acc[j], xo, (__m512bh)_mm512_permutexvar_epi16(hi, t));
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < NR; j++)
            y[n + j] = _mm512_reduce_add_ps(acc[j]);
    }
}

int main(void)
{
    if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512bw")) {
        fprintf(stderr, "e2m1_decode_bench: needs AVX512_BF16 and AVX512BW\n");
        return 1;
    }
    static const float e2m1[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -.5f, -1, -1.5f, -2, -3, -4, -6};
    for (int s = 0; s < 256; s++)
        for (int i = 0; i < 32; i++)
            tab[s][i] = to_bf16(e2m1[i & 15] * ldexpf(1.0f, s - 127));
    uint64_t st = 88172645463325252ull;
    for (int n = 0; n < ROWS; n++) {
        for (int i = 0; i < K / 2; i++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            codes[n][i] = (uint8_t)st;
        }
        for (int b = 0; b < K / 32; b++)
            scales[n][b] = (uint8_t)(120 + (st >> (b % 60)) % 8);
    }
    for (int k = 0; k < K; k++)
        xb[k] = to_bf16(sinf((float)k) * ldexpf(1.0f, k % 9 - 4));
    for (int c = 0; c < K / 64; c++)
        for (int i = 0; i < 32; i++) {
            xeo[64 * c + i] = xb[64 * c + 2 * i];
            xeo[64 * c + 32 + i] = xb[64 * c + 2 * i + 1];
        }
    float y1[ROWS], y2[ROWS];
    dot_cur(y1);
    dot_eo(y2);
    double md = 0;
    for (int n = 0; n < ROWS; n++) {
        const double d = fabs((double)y1[n] - y2[n]) / (fabs((double)y1[n]) + 1e-3);
        md = d > md ? d : md;
    }
    double tc = 1e30, te = 1e30;
    for (int r = 0; r < 400; r++) {
        const double t0 = now();
        dot_cur(y1);
        const double t1 = now();
        dot_eo(y2);
        const double t2 = now();
        tc = t1 - t0 < tc ? t1 - t0 : tc;
        te = t2 - t1 < te ? t2 - t1 : te;
    }
    const double per32 = 32.0 / ((double)ROWS * K) * 1e9, bytes = (double)ROWS * (K / 2 + K / 32);
    printf("max relative difference %.3g\n", md);
    printf("cur %.3f ns / 32 codes (%.1f GB/s)  eo %.3f ns / 32 codes (%.1f GB/s)  cur / eo %.2f\n", tc * per32,
           bytes / tc / 1e9, te * per32, bytes / te / 1e9, tc / te);
    return 0;
}
