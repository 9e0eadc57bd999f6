/* fp8_scale.c - the least-squared-error FP8 scale search (fp8_scale.h). */
#include "kernels/fp8_scale.h"

#include "kernels/kernel_table.h"

#include <math.h>

/* 2^(j / 16), j = 0..15, as f32 literals (no libm call, so every build multiplies by the same values). */
static const float start_mult[HY_FP8_FIT_STARTS] = {
    1.000000000e+00f, 1.044273782e+00f, 1.090507733e+00f, 1.138788635e+00f, 1.189207115e+00f, 1.241857812e+00f,
    1.296839555e+00f, 1.354255547e+00f, 1.414213562e+00f, 1.476826146e+00f, 1.542210825e+00f, 1.610490332e+00f,
    1.681792831e+00f, 1.756252160e+00f, 1.834008086e+00f, 1.915206561e+00f,
};

float hy_fp8_scale_amax(const float *x, int64_t n)
{
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        if (a > amax) /* NaN never wins */
            amax = a;
    }
    return amax / 448.0f;
}

float hy_fp8_scale_fit_with(hy_fp8_fit_pass_fn pass, const float *x, int64_t n)
{
    const float s0 = hy_fp8_scale_amax(x, n);
    if (!(s0 > 0.0f) || !isfinite(s0))
        return s0;
    float best_s = s0, best_err = INFINITY, sums[3];
    for (int j = 0; j < HY_FP8_FIT_STARTS; j++) {
        float s = s0 * start_mult[j];
        for (int it = 0; it <= HY_FP8_FIT_REFITS; it++) {
            if (!(s > 0.0f) || !isfinite(s))
                break;
            pass(x, n, s, sums);
            if (sums[0] < best_err) {
                best_err = sums[0];
                best_s = s;
            }
            if (!(sums[2] > 0.0f))
                break;
            s = sums[1] / sums[2];
        }
    }
    return best_s;
}

float hy_fp8_scale_fit(const float *x, int64_t n)
{
    return hy_fp8_scale_fit_with(hy_kernels_active()->fp8_fit_pass, x, n);
}
