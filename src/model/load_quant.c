/* load_quant.c - plain / fp8 / mxfp8 / mxfp4 binding of linear weights (load_quant.h). */
#include "model/load_quant.h"

#include "base/err.h"
#include "base/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

/* A copy of the [n] values of t (F32 / BF16 / F16) as f32, owned by qc; NULL with hy_err_msg() otherwise. */
static float *owned_f32(struct hy_quant_config *qc, const struct hy_st_tensor *t, int64_t n)
{
    if (!hy_dtype_is_kernel_float(t->dtype)) {
        hy_err_set("tensor \"%s\" has dtype %s; expected F32, BF16 or F16", t->name, t->dtype_name);
        return NULL;
    }
    float *v = malloc((size_t)n * sizeof(float) + 1);
    if (!v || hy_quant_config_own(qc, v)) {
        hy_err_set("out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        v[i] = read_float(t, i);
    return v;
}

/* t is [n] or [n, 1]. */
static int is_vector(const struct hy_st_tensor *t, int64_t n)
{
    return (t->ndim == 1 && t->shape[0] == n) || (t->ndim == 2 && t->shape[0] == n && t->shape[1] == 1);
}

static const struct hy_st_tensor *need(const struct hy_checkpoint *ck, const char *module, const char *suffix,
                                       const char *type)
{
    char n[NAME_LEN];
    const struct hy_st_tensor *t = find2(ck, n, module, suffix);
    if (!t)
        hy_err_set("tensor \"%s\" is missing: module \"%s\" is %s (%s)", n, module, type, HY_ASCEND_DESCRIPTION);
    return t;
}

/* An Ascend W8A8 linear (specs/ascend_w8a8.md §2): int8 weight [rows, cols] in [-127, 127] and its scales. */
static int bind_w8a8(struct hy_quant_config *qc, const struct hy_checkpoint *ck, const char *module, int f,
                     const struct hy_st_tensor *w, int64_t rows, int64_t cols, struct hy_tensor *out)
{
    const int dyn = f == HY_QF_W8A8_DYN;
    const char *type = dyn ? "W8A8_DYNAMIC" : "W8A8";
    const int64_t want[2] = {rows, cols};
    if (w->dtype != HY_DTYPE_I8)
        return hy_err_set("tensor \"%s\" has dtype %s but %s makes module \"%s\" %s, stored as I8", w->name,
                          w->dtype_name, HY_ASCEND_DESCRIPTION, module, type);
    if (check_shape(w, want, 2, "config.json"))
        return -1;
    const int8_t *q = w->data, *bad = memchr(q, 0x80, (size_t)(rows * cols));
    if (bad)
        return hy_err_set("tensor \"%s\": element %lld is -128; symmetric int8 weights lie in [-127, 127] (the "
                          "int8 kernels rely on it)",
                          w->name, (long long)(bad - q));
    char bn[NAME_LEN];
    if (find2(ck, bn, module, ".bias"))
        return hy_err_set("tensor \"%s\": a linear bias is not supported (Hy models have none)", bn);
    struct hy_tensor t = {.dtype = HY_DTYPE_I8, .rows = rows, .cols = cols, .data = w->data};
    if (dyn) {
        const struct hy_st_tensor *s = need(ck, module, ".weight_scale", type);
        if (!s)
            return -1;
        if (!is_vector(s, rows))
            return hy_err_set("tensor \"%s\" must have shape [%lld, 1] (one scale per output row)", s->name,
                              (long long)rows);
        float *sw = owned_f32(qc, s, rows);
        if (!sw)
            return -1;
        for (int64_t i = 0; i < rows; i++)
            if (!isfinite(sw[i]) || sw[i] < 0.0f)
                return hy_err_set("tensor \"%s\": row %lld scale is %g; must be finite and >= 0", s->name, (long long)i,
                                  (double)sw[i]);
        const struct hy_st_tensor *o = find2(ck, bn, module, ".weight_offset");
        if (o) { /* msModelSlim writes zeros; vLLM-Ascend never reads it, so a non-zero one would be lost */
            if (!is_vector(o, rows))
                return hy_err_set("tensor \"%s\" must have shape [%lld, 1]", o->name, (long long)rows);
            const float *ov = owned_f32(qc, o, rows);
            if (!ov)
                return -1;
            for (int64_t i = 0; i < rows; i++)
                if (ov[i] != 0.0f)
                    return hy_err_set("tensor \"%s\": row %lld offset is %g; W8A8_DYNAMIC weights are symmetric "
                                      "(zero offsets)",
                                      o->name, (long long)i, (double)ov[i]);
        }
        t.qscheme = HY_QS_W8A8_DYN;
        t.row_scale = sw;
    } else {
        const struct hy_st_tensor *is = need(ck, module, ".input_scale", type),
                                  *io = is ? need(ck, module, ".input_offset", type) : NULL,
                                  *ds = io ? need(ck, module, ".deq_scale", type) : NULL,
                                  *qb = ds ? need(ck, module, ".quant_bias", type) : NULL;
        if (!qb)
            return -1;
        if (numel(is) != 1 || numel(io) != 1)
            return hy_err_set("tensors \"%s\" / \"%s\" must have one element each (per-tensor activation "
                              "quantization)",
                              is->name, io->name);
        const float *sv = owned_f32(qc, is, 1), *ov = sv ? owned_f32(qc, io, 1) : NULL;
        if (!ov)
            return -1;
        if (!isfinite(sv[0]) || !(sv[0] > 0.0f) || ov[0] != rintf(ov[0]) || fabsf(ov[0]) > 255.0f)
            return hy_err_set("module \"%s\": input_scale %g must be finite and > 0 and input_offset %g an "
                              "integer in [-255, 255]",
                              module, (double)sv[0], (double)ov[0]);
        if (!is_vector(ds, rows) || !is_vector(qb, rows))
            return hy_err_set("tensors \"%s\" / \"%s\" must have %lld elements (one per output row)", ds->name,
                              qb->name, (long long)rows);
        if (qb->dtype != HY_DTYPE_I32)
            return hy_err_set("tensor \"%s\" has dtype %s; quant_bias must be I32", qb->name, qb->dtype_name);
        float *deq = NULL;
        if (ds->dtype == HY_DTYPE_I64) { /* the fp32 bit pattern in the low 32 bits (msModelSlim deqscale.py) */
            deq = malloc((size_t)rows * sizeof(float) + 1);
            if (!deq || hy_quant_config_own(qc, deq))
                return hy_err_set("out of memory");
            for (int64_t i = 0; i < rows; i++) {
                int64_t b;
                memcpy(&b, (const char *)ds->data + 8 * i, 8);
                const uint32_t u = (uint32_t)(uint64_t)b;
                memcpy(&deq[i], &u, 4);
            }
        } else if (!(deq = owned_f32(qc, ds, rows))) {
            return hy_err_set("tensor \"%s\" has dtype %s; deq_scale must be F32 or I64 (fp32 bits)", ds->name,
                              ds->dtype_name);
        }
        for (int64_t i = 0; i < rows; i++)
            if (!isfinite(deq[i]) || deq[i] < 0.0f)
                return hy_err_set("tensor \"%s\": row %lld deq_scale is %g; must be finite and >= 0", ds->name,
                                  (long long)i, (double)deq[i]);
        int32_t *bias = malloc((size_t)rows * sizeof(int32_t) + 1);
        if (!bias || hy_quant_config_own(qc, bias))
            return hy_err_set("out of memory");
        memcpy(bias, qb->data, (size_t)rows * sizeof(int32_t));
        t.qscheme = HY_QS_W8A8_STATIC;
        t.row_scale = deq;
        t.row_bias = bias;
        t.in_scale = sv[0];
        t.in_offset = ov[0];
    }
    *out = t;
    return 0;
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
    if (g == HY_QGROUP_UNDESCRIBED) {
        if (!hy_dtype_is_kernel_float(w->dtype))
            return hy_err_set("tensor \"%s\" (%s) has no entry in %s; only float tensors may be left out (they "
                              "load as FLOAT)",
                              w->name, w->dtype_name, HY_ASCEND_DESCRIPTION);
        hy_log_info("%s: not in %s; loaded as FLOAT (%s)", w->name, HY_ASCEND_DESCRIPTION, w->dtype_name);
        g = -1;
    }
    if (f == HY_QF_FP8_TENSOR && lenient && hy_dtype_is_kernel_float(w->dtype) && !s) {
        hy_log_info("%s: %s weight of a layer the fp8 config covers; loaded unquantized (MTP layer)", w->name,
                    w->dtype_name);
        f = HY_QF_NONE;
        g = -1;
    }
    if (hy_qformat_is_int8(f)) {
        if (stack)
            return hy_err_set("tensor \"%s\": stacked experts in an Ascend W8A8 checkpoint (msModelSlim writes "
                              "mlp.experts.<e>.<proj> per expert)",
                              wn);
        if (bind_w8a8(qc, ck, module, f, w, rows, cols, out))
            return -1;
        qc->groups[g].n_tensors++;
        return 0;
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
    if (t->row_scale)
        s.row_scale = t->row_scale + r0;
    if (t->row_bias)
        s.row_bias = t->row_bias + r0;
    return s;
}

static int in_checkpoint(const char *tensor, const char *type, void *ctx)
{
    (void)type;
    if (hy_checkpoint_find(ctx, tensor))
        return 0;
    return hy_err_set("%s lists tensor \"%s\", which the checkpoint does not have", HY_ASCEND_DESCRIPTION, tensor);
}

int hy_qload_check_description(const struct hy_quant_config *qc, const struct hy_checkpoint *ck)
{
    if (qc->method != HY_QM_ASCEND)
        return 0;
    if (hy_quant_ascend_foreach(qc, in_checkpoint, (void *)ck))
        return -1;
    int64_t undescribed = 0;
    for (size_t i = 0; i < ck->n_index; i++) {
        const struct hy_st_tensor *t = ck->index[i];
        const char *type = hy_quant_ascend_type(qc, t->name);
        if (!type && !hy_dtype_is_kernel_float(t->dtype))
            return hy_err_set("tensor \"%s\" (%s) has no entry in %s", t->name, t->dtype_name, HY_ASCEND_DESCRIPTION);
        undescribed += !type;
        if (type && !strcmp(type, "FLOAT") && !hy_dtype_is_kernel_float(t->dtype))
            return hy_err_set("tensor \"%s\" is FLOAT in %s but stored as %s", t->name, HY_ASCEND_DESCRIPTION,
                              t->dtype_name);
    }
    if (undescribed)
        hy_log_info("%s: %lld float tensors have no entry; they load as FLOAT", HY_ASCEND_DESCRIPTION,
                    (long long)undescribed);
    return 0;
}
