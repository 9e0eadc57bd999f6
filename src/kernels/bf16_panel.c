/* bf16_panel.c - bf16 operand panels of weights (bf16_panel.h). */
#include "kernels/bf16_panel.h"

#include "kernels/avx2_quant.h"
#include "quant/dtype.h"

#include <string.h>

int hy_bf16_form(const struct hy_tensor *W)
{
    if (W->qscheme == HY_QS_NONE && W->dtype == HY_DTYPE_BF16)
        return 1;
    return (W->dtype == HY_DTYPE_F8_E4M3 || W->dtype == HY_DTYPE_F4_E2M1) && hy_avx2q_supported(W);
}

int hy_bf16_in_place(const struct hy_tensor *W)
{
    return W->qscheme == HY_QS_NONE && W->dtype == HY_DTYPE_BF16 && W->cols % 32 == 0;
}

float hy_bf16_out_scale(const struct hy_tensor *W)
{
    return W->qscheme == HY_QS_PER_TENSOR ? W->scale : 1.0f;
}

struct hy_tensor hy_bf16_bare(const struct hy_tensor *W)
{
    struct hy_tensor bare = *W;
    if (bare.qscheme == HY_QS_PER_TENSOR) {
        bare.qscheme = HY_QS_NONE;
        bare.scale = 1.0f;
    }
    return bare;
}

void hy_bf16_panel(const struct hy_tensor *W, int64_t n0, int64_t nv, int64_t rows, int64_t ldp, uint16_t *panel,
                   float *wrow, hy_widen_fn widen)
{
    const int64_t K = W->cols;
    const struct hy_tensor bare = hy_bf16_bare(W);
    for (int64_t r = 0; r < rows; r++) {
        uint16_t *d = panel + r * ldp;
        if (r >= nv) {
            memset(d, 0, (size_t)ldp * sizeof(uint16_t));
            continue;
        }
        if (W->dtype == HY_DTYPE_BF16)
            memcpy(d, (const uint16_t *)W->data + (n0 + r) * K, (size_t)K * sizeof(uint16_t));
        else {
            if (widen)
                widen(&bare, n0 + r, 1, ldp + 16, wrow);
            else
                for (int64_t k = 0; k < K; k++)
                    wrow[k] = hy_tensor_get(&bare, n0 + r, k);
            for (int64_t k = 0; k < K; k++)
                d[k] = hy_f32_to_bf16(wrow[k]);
        }
        memset(d + K, 0, (size_t)(ldp - K) * sizeof(uint16_t));
    }
}
