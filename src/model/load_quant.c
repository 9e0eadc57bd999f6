/* load_quant.c - plain / fp8 / mxfp8 / mxfp4 binding of linear weights (load_quant.h). */
#include "model/load_quant.h"

#include "base/err.h"
#include "base/log.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NAME_LEN 320

static void shape_str(const int64_t *s, int n, char *buf, size_t cap)
{
    buf[0] = 0;
    for (int i = 0; i < n; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%lld", i ? ", " : "", (long long)s[i]);
}

/* t has shape lead[0..nlead) + {a, b}. */
static int check_shape(const struct hy_st_tensor *t, const int64_t *want, int n, const char *why)
{
    int ok = t->ndim == n;
    for (int i = 0; ok && i < n; i++)
        ok = t->shape[i] == want[i];
    if (ok)
        return 0;
    char g[128], w[128];
    shape_str(t->shape, t->ndim, g, sizeof(g));
    shape_str(want, n, w, sizeof(w));
    return hy_err_set("tensor \"%s\" has shape [%s] but %s implies [%s]", t->name, g, why, w);
}

static int64_t numel(const struct hy_st_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

static float read_float(const struct hy_st_tensor *t, int64_t i)
{
    float v = 0.0f;
    const char *p = t->data;
    if (t->dtype == HY_DTYPE_F32) {
        memcpy(&v, p + 4 * i, 4);
    } else {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        v = t->dtype == HY_DTYPE_BF16 ? hy_bf16_to_f32(h) : hy_f16_to_f32(h);
    }
    return v;
}

/* Weight-scale value checks of fp8 per-tensor scales s[n]. */
static int check_fp8_scales(const struct hy_st_tensor *s, int64_t n, const char *kind, int positive)
{
    if (!hy_dtype_is_kernel_float(s->dtype))
        return hy_err_set("tensor \"%s\" has dtype %s; an fp8 %s must be F32, BF16 or F16", s->name, s->dtype_name,
                          kind);
    for (int64_t i = 0; i < n; i++) {
        float v = read_float(s, i);
        if (!isfinite(v) || v < 0.0f || (positive && v == 0.0f))
            return hy_err_set("tensor \"%s\"%s is %g; an fp8 %s must be finite and %s", s->name,
                              n > 1 ? " has an element that" : "", (double)v, kind, positive ? "> 0" : ">= 0");
    }
    return 0;
}

static int check_e8m0(const struct hy_st_tensor *s, int64_t rows_total, int64_t nb)
{
    if (s->dtype != HY_DTYPE_U8 && s->dtype != HY_DTYPE_F8_E8M0)
        return hy_err_set("tensor \"%s\" has dtype %s; an MX weight_scale must be U8 or F8_E8M0 (E8M0 exponents)",
                          s->name, s->dtype_name);
    const uint8_t *p = s->data, *hit = memchr(p, 255, (size_t)(rows_total * nb));
    if (hit) {
        int64_t i = hit - p;
        return hy_err_set("tensor \"%s\": E8M0 byte 255 (NaN scale) at row %lld, block %lld", s->name,
                          (long long)(i / nb), (long long)(i % nb));
    }
    return 0;
}

static const struct hy_st_tensor *find2(const struct hy_checkpoint *ck, char *buf, const char *a, const char *b)
{
    snprintf(buf, NAME_LEN, "%s%s", a, b);
    return hy_checkpoint_find(ck, buf);
}

/* The common binder: E = 0 for a plain matrix (names M.weight / M.weight_scale), E > 0 for a stack
 * (names M / M_scale, leading dim E). */
static int bind(struct hy_quant_config *qc, const struct hy_checkpoint *ck, const char *module, int64_t E, int64_t rows,
                int64_t cols, int lenient, struct hy_tensor *out)
{
    char wn[NAME_LEN], sn[NAME_LEN], in[NAME_LEN];
    const int stack = E > 0;
    const int64_t ne = stack ? E : 1;
    int g = -1;
    int f = hy_quant_config_lookup(qc, module, &g);
    if (f < 0)
        return -1;
    const struct hy_st_tensor *w = find2(ck, wn, module, stack ? "" : ".weight");
    if (f == HY_QF_MXFP4 && !stack) {
        char pn[NAME_LEN];
        const struct hy_st_tensor *wp = find2(ck, pn, module, ".weight_packed");
        if (w && wp)
            return hy_err_set("tensors \"%s\" and \"%s\" both exist: an MXFP4 module stores its packed weight "
                              "under one of the two names",
                              wn, pn);
        if (!w && wp) {
            w = wp;
            memcpy(wn, pn, sizeof(wn));
        }
    }
    const struct hy_st_tensor *s = find2(ck, sn, module, stack ? "_scale" : ".weight_scale");
    const struct hy_st_tensor *is = stack ? NULL : find2(ck, in, module, ".input_scale");
    if (!w) {
        find2(ck, wn, module, stack ? "" : ".weight");
        return hy_err_set("tensor \"%s\" is missing from the checkpoint", wn);
    }
    if (f == HY_QF_FP8_TENSOR && lenient && hy_dtype_is_kernel_float(w->dtype) && !s) {
        hy_log_info("%s: %s weight of a layer the fp8 config covers; loaded unquantized (MTP layer)", w->name,
                    w->dtype_name);
        f = HY_QF_NONE;
        g = -1;
    }
    int64_t want[3];
    int nd = 0;
    if (stack)
        want[nd++] = E;
    want[nd++] = rows;
    want[nd++] = cols;
    const char *cfg_name = hy_quant_method_name(qc->method);
    struct hy_tensor t = {.rows = rows, .cols = cols, .data = w->data, .qscheme = HY_QS_NONE};
    if (f == HY_QF_NONE) {
        if (!hy_dtype_is_kernel_float(w->dtype)) {
            if (qc->method == HY_QM_NONE)
                return hy_err_set("unsupported dtype %s for tensor \"%s\" (supported: BF16, F16, F32; config.json "
                                  "has no quantization_config)",
                                  w->dtype_name, w->name);
            return hy_err_set("unsupported dtype %s for tensor \"%s\": quantization_config (%s) leaves module "
                              "\"%s\" unquantized (ignored or not targeted)",
                              w->dtype_name, w->name, cfg_name, module);
        }
        if (s)
            return hy_err_set("tensor \"%s\" exists but quantization_config (%s) leaves module \"%s\" unquantized",
                              s->name, qc->method == HY_QM_NONE ? "absent" : cfg_name, module);
        if (check_shape(w, want, nd, "config.json"))
            return -1;
        t.dtype = w->dtype;
    } else {
        const char *fn = hy_qformat_name((enum hy_qformat)f);
        const int fp4 = f == HY_QF_MXFP4;
        if (fp4 ? w->dtype != HY_DTYPE_U8 : w->dtype != HY_DTYPE_F8_E4M3)
            return hy_err_set("tensor \"%s\" has dtype %s but quantization_config (%s) makes module \"%s\" %s, "
                              "stored as %s",
                              w->name, w->dtype_name, cfg_name, module, fn, fp4 ? "U8" : "F8_E4M3");
        if (fp4 && cols % 2)
            return hy_err_set("tensor \"%s\": K = %lld is odd; MXFP4 packs two elements per byte", w->name,
                              (long long)cols);
        if (fp4)
            want[nd - 1] = cols / 2;
        if (check_shape(w, want, nd, fp4 ? "config.json (MXFP4: [N, K/2])" : "config.json"))
            return -1;
        if (!s)
            return hy_err_set("tensor \"%s\" is missing: module \"%s\" is %s (quantization_config) and needs "
                              "its scale",
                              sn, module, fn);
        t.dtype = fp4 ? HY_DTYPE_F4_E2M1 : HY_DTYPE_F8_E4M3;
        if (f == HY_QF_FP8_TENSOR) {
            if (numel(s) != ne || (stack && !(s->ndim == 1 || (s->ndim == 2 && s->shape[1] == 1))))
                return hy_err_set("tensor \"%s\" has %lld elements; an fp8 per-tensor weight_scale has %s", s->name,
                                  (long long)numel(s), stack ? "one per expert ([E] or [E, 1])" : "one");
            if (check_fp8_scales(s, ne, "weight_scale", 0))
                return -1;
            if (is && (numel(is) != 1 || check_fp8_scales(is, 1, "input_scale", 1)))
                return numel(is) != 1 ? hy_err_set("tensor \"%s\" has %lld elements; input_scale must have one",
                                                   is->name, (long long)numel(is))
                                      : -1;
            t.qscheme = HY_QS_PER_TENSOR;
        } else {
            const int64_t nb = (cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK;
            int64_t sw[3];
            int sd = 0;
            if (stack)
                sw[sd++] = E;
            sw[sd++] = rows;
            sw[sd++] = nb;
            if (check_shape(s, sw, sd, "an MX weight_scale ([N, ceil(K/32)])") || check_e8m0(s, ne * rows, nb))
                return -1;
            t.qscheme = HY_QS_MX32;
            t.mx_scales = s->data;
        }
    }
    const int64_t rb = hy_tensor_row_bytes(&t), nb = (cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK;
    for (int64_t e = 0; e < ne; e++) {
        out[e] = t;
        out[e].data = (const char *)w->data + (size_t)(e * rows * rb);
        if (t.qscheme == HY_QS_MX32)
            out[e].mx_scales = t.mx_scales + (size_t)(e * rows * nb);
        if (t.qscheme == HY_QS_PER_TENSOR)
            out[e].scale = read_float(s, e);
        /* nan_free is found after placement, in parallel over the placed bytes (place.c) */
        out[e].nan_free = 0;
    }
    if (g >= 0)
        qc->groups[g].n_tensors++;
    else
        qc->n_plain++;
    return 0;
}

int hy_qload_linear(struct hy_quant_config *qc, const struct hy_checkpoint *ck, const char *module, int64_t rows,
                    int64_t cols, int lenient, struct hy_tensor *out)
{
    return bind(qc, ck, module, 0, rows, cols, lenient, out);
}

int hy_qload_stack(struct hy_quant_config *qc, const struct hy_checkpoint *ck, const char *name, int64_t E,
                   int64_t rows, int64_t cols, int lenient, struct hy_tensor *out)
{
    if (E <= 0)
        return hy_err_set("tensor \"%s\": expert count must be > 0", name);
    return bind(qc, ck, name, E, rows, cols, lenient, out);
}

struct hy_tensor hy_tensor_rows(const struct hy_tensor *t, int64_t r0, int64_t n)
{
    struct hy_tensor s = *t;
    s.rows = n;
    s.data = (const char *)t->data + (size_t)(r0 * hy_tensor_row_bytes(t));
    if (t->qscheme == HY_QS_MX32)
        s.mx_scales = t->mx_scales + (size_t)(r0 * ((t->cols + HY_MX_BLOCK - 1) / HY_MX_BLOCK));
    return s;
}

int hy_qload_check_unquantized(const struct hy_checkpoint *ck, const char *name, const char *what)
{
    const struct hy_st_tensor *w = hy_checkpoint_find(ck, name);
    char sn[NAME_LEN];
    size_t n = strlen(name);
    const char *suf = ".weight";
    if (n > strlen(suf) && strcmp(name + n - strlen(suf), suf) == 0)
        n -= strlen(suf);
    snprintf(sn, sizeof(sn), "%.*s.weight_scale", (int)n, name);
    const struct hy_st_tensor *s = hy_checkpoint_find(ck, sn);
    if (w && !hy_dtype_is_kernel_float(w->dtype))
        return hy_err_set("unsupported dtype %s for tensor \"%s\" (supported: BF16, F16, F32; a quantized %s is "
                          "not supported)",
                          w->dtype_name, name, what);
    if (s)
        return hy_err_set("tensor \"%s\" exists: a quantized %s is not supported (keep it BF16/F16/F32)", sn, what);
    return 0;
}
