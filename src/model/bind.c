/* bind.c - the generic tensor binders the architectures' binders (load_v3.c, load_v4.c) are made of
 * (bind.h): tensors found by name, checked against the shapes config.json implies, viewed or widened;
 * SwiGLU MLPs, MoE blocks (fused or per-expert experts, router, shared expert) and the RoPE table. */
#include "model/bind.h"

#include "model/load_quant.h"

#include "base/err.h"
#include "base/log.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct hy_st_tensor *hy_bind_find_fmt(const struct hy_model *m, char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, NAME_LEN, fmt, ap);
    va_end(ap);
    return hy_checkpoint_find(&m->ck, name);
}

static int check_shape(const struct hy_st_tensor *t, int ndim, const int64_t *shape)
{
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = t->shape[i] == shape[i];
    if (ok)
        return 0;
    char got[128] = "", want[128] = "";
    for (int i = 0; i < t->ndim; i++)
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    for (int i = 0; i < ndim; i++)
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%lld", i ? ", " : "", (long long)shape[i]);
    return hy_err_set("tensor \"%s\" has shape [%s] but config.json implies [%s]", t->name, got, want);
}

static int check_float_dtype(const struct hy_st_tensor *t)
{
    if (hy_dtype_is_kernel_float(t->dtype))
        return 0;
    return hy_err_set("unsupported dtype %s for tensor \"%s\" (supported: BF16, F16, F32)", t->dtype_name, t->name);
}

/* A [rows, cols] matrix by name; missing -> error. */
int hy_bind_matrix(const struct hy_model *m, const char *name, int64_t rows, int64_t cols, struct hy_tensor *out)
{
    const struct hy_st_tensor *t = hy_checkpoint_find(&m->ck, name);
    if (!t)
        return hy_err_set("tensor \"%s\" is missing from the checkpoint", name);
    int64_t shape[2] = {rows, cols};
    if (check_float_dtype(t) || check_shape(t, 2, shape))
        return -1;
    out->dtype = t->dtype;
    out->rows = rows;
    out->cols = cols;
    out->data = t->data;
    return 0;
}

int hy_bind_table(struct hy_model *m, const char *module, int64_t rows, int64_t cols, struct hy_tensor *out)
{
    char wn[NAME_LEN], sn[NAME_LEN];
    snprintf(wn, sizeof(wn), "%s.weight", module);
    snprintf(sn, sizeof(sn), "%s.weight_scale", module);
    const struct hy_st_tensor *w = hy_checkpoint_find(&m->ck, wn);
    if (w && hy_dtype_is_kernel_float(w->dtype) && !hy_checkpoint_find(&m->ck, sn))
        return hy_bind_matrix(m, wn, rows, cols, out);
    return hy_qload_linear(&m->quant, &m->ck, module, rows, cols, 0, out);
}

/* A [n] vector (or [rows, cols] when cols > 0) widened to a malloc'd f32 copy. */
int hy_bind_f32(const struct hy_st_tensor *t, int64_t rows, int64_t cols, float **out)
{
    int64_t shape[2] = {rows, cols};
    if (check_float_dtype(t) || check_shape(t, cols > 0 ? 2 : 1, shape))
        return -1;
    size_t n = (size_t)rows * (size_t)(cols > 0 ? cols : 1);
    *out = malloc(n * sizeof(float));
    if (!*out)
        return hy_err_set("out of memory");
    hy_dtype_to_f32(t->dtype, t->data, *out, n);
    return 0;
}

int hy_bind_vec(const struct hy_model *m, const char *name, int64_t n, float **out)
{
    const struct hy_st_tensor *t = hy_checkpoint_find(&m->ck, name);
    if (!t)
        return hy_err_set("tensor \"%s\" is missing from the checkpoint", name);
    return hy_bind_f32(t, n, 0, out);
}

/* A linear weight by module name (without ".weight"): plain or quantized as quantization_config says. */
int hy_bind_linear(struct hy_model *m, int L, const char *module, int64_t rows, int64_t cols, struct hy_tensor *out)
{
    return hy_qload_linear(&m->quant, &m->ck, module, rows, cols, L == m->cfg.num_hidden_layers, out);
}

int hy_bind_mlp(struct hy_model *m, int L, const char *prefix, int64_t width, struct hy_expert *e)
{
    const int64_t H = m->cfg.hidden_size;
    char n[NAME_LEN];
    snprintf(n, sizeof(n), "%s.gate_proj", prefix);
    if (hy_bind_linear(m, L, n, width, H, &e->gate))
        return -1;
    snprintf(n, sizeof(n), "%s.up_proj", prefix);
    if (hy_bind_linear(m, L, n, width, H, &e->up))
        return -1;
    snprintf(n, sizeof(n), "%s.down_proj", prefix);
    return hy_bind_linear(m, L, n, H, width, &e->down);
}

/* Fused experts: gate_up_proj [E, 2I, H] (rows 0..I-1 gate, I..2I-1 up) and down_proj [E, H, I],
 * plain or quantized (load_quant.h: scales "<name>_scale"). */
static int bind_fused_experts(struct hy_model *m, int L, const char *lp, struct hy_layer *ly,
                              const struct hy_st_tensor *gu)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t E = c->num_experts, I = c->moe_intermediate_size, H = c->hidden_size;
    const int lenient = L == c->num_hidden_layers;
    char n[NAME_LEN];
    const struct hy_st_tensor *dn = hy_bind_find_fmt(m, n, "%s.mlp.experts.down_proj", lp);
    if (!dn)
        return hy_err_set("tensor \"%s\" is missing (fused experts need gate_up_proj and down_proj)", n);
    struct hy_tensor *tmp = malloc((size_t)E * sizeof(*tmp));
    if (!tmp)
        return hy_err_set("out of memory");
    int rc = -1;
    if (hy_qload_stack(&m->quant, &m->ck, gu->name, E, 2 * I, H, lenient, tmp))
        goto out;
    for (int64_t e = 0; e < E; e++) {
        ly->experts[e].gate = hy_tensor_rows(&tmp[e], 0, I);
        ly->experts[e].up = hy_tensor_rows(&tmp[e], I, I);
    }
    if (hy_qload_stack(&m->quant, &m->ck, dn->name, E, H, I, lenient, tmp))
        goto out;
    for (int64_t e = 0; e < E; e++)
        ly->experts[e].down = tmp[e];
    rc = 0;
out:
    free(tmp);
    return rc;
}

int hy_bind_moe(struct hy_model *m, int L, const char *lp, struct hy_layer *ly)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t E = c->num_experts, I = c->moe_intermediate_size, H = c->hidden_size;
    char n[NAME_LEN];
    const struct hy_st_tensor *t = hy_bind_find_fmt(m, n, "%s.mlp.router.gate.weight", lp);
    if (!t)
        t = hy_bind_find_fmt(m, n, "%s.mlp.gate.weight", lp);
    if (!t)
        return hy_err_set("%s is MoE but neither mlp.router.gate.weight nor mlp.gate.weight exists", lp);
    if (hy_bind_f32(t, E, H, &ly->router))
        return -1;
    t = hy_bind_find_fmt(m, n, "%s.mlp.expert_bias", lp);
    if (!t)
        t = hy_bind_find_fmt(m, n, "%s.mlp.e_score_correction_bias", lp);
    if (!t) /* hy_v4 (and DeepSeek-style) spelling: the bias lives on the router module */
        t = hy_bind_find_fmt(m, n, "%s.mlp.gate.e_score_correction_bias", lp);
    if (t) {
        if (hy_bind_f32(t, E, 0, &ly->expert_bias))
            return -1;
    } else if (!(ly->expert_bias = calloc((size_t)E, sizeof(float)))) {
        return hy_err_set("out of memory");
    }
    ly->experts = calloc((size_t)E, sizeof(*ly->experts));
    if (!ly->experts)
        return hy_err_set("out of memory");
    const struct hy_st_tensor *gu = hy_bind_find_fmt(m, n, "%s.mlp.experts.gate_up_proj", lp);
    if (gu) {
        if (bind_fused_experts(m, L, lp, ly, gu))
            return -1;
    } else {
        for (int e = 0; e < E; e++) {
            char prefix[NAME_LEN];
            snprintf(prefix, sizeof(prefix), "%s.mlp.experts.%d", lp, e);
            if (hy_bind_mlp(m, L, prefix, I, &ly->experts[e]))
                return -1;
        }
    }
    if (c->num_shared_experts > 0) {
        const int64_t W = I * c->num_shared_experts;
        char prefix[NAME_LEN / 2]; /* + ".gate_proj.weight" fits n */
        snprintf(prefix, sizeof(prefix), "%s.mlp.shared_mlp", lp);
        snprintf(n, sizeof(n), "%s.gate_proj.weight", prefix);
        if (!hy_checkpoint_find(&m->ck, n))
            snprintf(prefix, sizeof(prefix), "%s.mlp.shared_experts", lp);
        if (hy_bind_mlp(m, L, prefix, W, &ly->shared))
            return -1;
    }
    return 0;
}

int hy_bind_inv_freq(struct hy_model *m)
{
    const struct hy_model_config *c = &m->cfg;
    const int64_t half = c->head_dim / 2;
    m->inv_freq = malloc((size_t)half * sizeof(float));
    if (!m->inv_freq)
        return hy_err_set("out of memory");
    for (int64_t i = 0; i < half; i++)
        m->inv_freq[i] = (float)(1.0 / pow(c->rope_theta, (double)(2 * i) / (double)c->head_dim));
    return 0;
}
