/* kv_scales.c - the model's KV cache dtype choice and the checkpoint's static FP8 V scales
 * (spec §5.2 / §5.3: `model.layers.L.self_attn.v_cache.scale`, F32 [n_kv_heads] or [1], in the
 * checkpoint itself or in a side file kv_cache_scales.safetensors in the model directory), or an
 * Ascend checkpoint's C8 int8 KV scales mapped onto them (c8_v_scales). */
#include "model/model.h"

#include "model/arch.h"

#include "model/shard.h"

#include "base/err.h"
#include "base/fileio.h"
#include "base/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KV_SCALES_FILE "kv_cache_scales.safetensors"

static int32_t cache_layers(const struct hy_model *m)
{
    return hy_arch_cache_layers(&m->cfg);
}

static const struct hy_st_tensor *find_in_file(const struct hy_st_file *f, const char *name)
{
    for (size_t i = 0; f && i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

/* One scale tensor -> out[nkv] (a single value is broadcast to every head). */
static int read_scale(const struct hy_st_tensor *t, const char *where, int32_t nkv, float *out)
{
    int64_t numel = 1;
    for (int i = 0; i < t->ndim; i++)
        numel *= t->shape[i];
    if (t->dtype != HY_DTYPE_F32 && t->dtype != HY_DTYPE_BF16 && t->dtype != HY_DTYPE_F16)
        return hy_err_set("%s: tensor \"%s\": dtype %s is not a float type (expected F32)", where, t->name,
                          t->dtype_name);
    if (numel != 1 && numel != nkv)
        return hy_err_set("%s: tensor \"%s\" has %lld elements; expected 1 (per tensor) or %d (per kv head)", where,
                          t->name, (long long)numel, nkv);
    float tmp[1];
    float *dst = numel == 1 ? tmp : out;
    if (hy_dtype_to_f32(t->dtype, t->data, dst, (size_t)numel))
        return hy_err_set("%s: tensor \"%s\": cannot read dtype %s", where, t->name, t->dtype_name);
    if (numel == 1)
        for (int32_t g = 0; g < nkv; g++)
            out[g] = tmp[0];
    for (int32_t g = 0; g < nkv; g++)
        if (!(out[g] > 0.0f) || !isfinite(out[g]))
            return hy_err_set("%s: tensor \"%s\": scale %g (head %d) must be finite and > 0", where, t->name,
                              (double)out[g], numel == 1 ? 0 : g);
    return 0;
}

/* Ascend C8 (msModelSlim's KV int8, `kv_cache_type: C8`, specs/ascend_w8a8.md §1-2): per layer
 * `self_attn.{k,v}_proj.kv_cache_scale` / `kv_cache_offset` (F32 / BF16 / F16; one value, one per KV head,
 * or one per channel [n_kv_heads * head_dim], any trailing 1s), asymmetric int8 x = (q - offset) * scale
 * with q in [-128, 127]. hyinfer keeps no int8 KV cache: C8 maps onto the FP8 E4M3 cache, V with a static
 * per-head scale = the largest |x| head h's channels can represent / 448 (the int8 grid's range fits E4M3's),
 * K with the FP8 cache's dynamic per-(token, head) scales (finer than C8's static ones; its K scales are
 * checked and not used). out[h] for layer L; 1 when the layer has no C8 V scales (its V is dynamic), 0 set,
 * -1 error. */
static int c8_v_scales(const struct hy_model *m, int32_t L, float *out)
{
    const int32_t nkv = m->cfg.num_key_value_heads, hd = m->cfg.head_dim;
    const struct hy_st_tensor *t[4];
    static const char *const leaf[4] = {"k_proj.kv_cache_scale", "k_proj.kv_cache_offset", "v_proj.kv_cache_scale",
                                        "v_proj.kv_cache_offset"};
    int found = 0;
    for (int i = 0; i < 4; i++) {
        char name[160];
        snprintf(name, sizeof(name), "model.layers.%d.self_attn.%s", L, leaf[i]);
        t[i] = hy_checkpoint_find(&m->ck, name);
        found += t[i] != NULL;
    }
    if (!found)
        return 1;
    float *v[4] = {NULL, NULL, NULL, NULL};
    int64_t n[4];
    int rc = 0;
    for (int i = 0; i < 4 && !rc; i++) {
        if (!t[i]) {
            rc = hy_err_set("layer %d has C8 KV scales but no self_attn.%s", L, leaf[i]);
            break;
        }
        n[i] = 1;
        for (int d = 0; d < t[i]->ndim; d++)
            n[i] *= t[i]->shape[d];
        if (n[i] != 1 && n[i] != nkv && n[i] != (int64_t)nkv * hd) {
            rc = hy_err_set("tensor \"%s\" has %lld elements; C8 scales are per tensor (1), per KV head (%d) or per "
                            "channel (%d)",
                            t[i]->name, (long long)n[i], nkv, nkv * hd);
            break;
        }
        if (!(v[i] = malloc((size_t)n[i] * sizeof(float))) ||
            hy_dtype_to_f32(t[i]->dtype, t[i]->data, v[i], (size_t)n[i])) {
            rc = hy_err_set("tensor \"%s\": cannot read dtype %s as float", t[i]->name, t[i]->dtype_name);
            break;
        }
        for (int64_t j = 0; j < n[i]; j++)
            if (!isfinite(v[i][j]) || (!(i & 1) && !(v[i][j] > 0.0f))) {
                rc = hy_err_set("tensor \"%s\": element %lld is %g; C8 scales must be finite and > 0, offsets finite",
                                t[i]->name, (long long)j, (double)v[i][j]);
                break;
            }
    }
    for (int32_t h = 0; !rc && h < nkv; h++) { /* V: the head's largest representable |x| */
        float amax = 0.0f;
        for (int32_t c = 0; c < hd; c++) {
            const int64_t ch = (int64_t)h * hd + c;
            const float s = v[2][n[2] == 1 ? 0 : n[2] == nkv ? h : ch], o = v[3][n[3] == 1 ? 0 : n[3] == nkv ? h : ch];
            const float lo = fabsf((-128.0f - o) * s), hi = fabsf((127.0f - o) * s);
            amax = fmaxf(amax, fmaxf(lo, hi));
        }
        out[h] = amax / 448.0f;
    }
    for (int i = 0; i < 4; i++)
        free(v[i]);
    return rc ? -1 : 0;
}

int hy_model_load_kv_scales(struct hy_model *m, const char *model_dir)
{
    if (m->quant.kv_c8 && m->cfg.arch == HY_ARCH_HY_V4)
        return hy_err_set("%s: C8 KV scales on hy_v4 (its MLA latent cache) are not supported", model_dir);
    const int32_t nl = cache_layers(m), nkv = m->cfg.num_key_value_heads;
    struct hy_st_file side;
    int have_side = 0, rc = -1;
    memset(&side, 0, sizeof(side));
    char *side_path = hy_path_join(model_dir, KV_SCALES_FILE);
    if (!side_path)
        return hy_err_set("out of memory");
    if (hy_file_exists(side_path)) {
        if (hy_st_open(side_path, &side))
            goto out;
        have_side = 1;
    }
    m->v_cache_scale = calloc((size_t)nl, sizeof(float *));
    if (!m->v_cache_scale) {
        hy_err_set("out of memory");
        goto out;
    }
    m->n_v_cache_scales = 0;
    for (int32_t L = 0; L < nl; L++) {
        char name[128];
        snprintf(name, sizeof(name), "model.layers.%d.self_attn.v_cache.scale", L);
        const struct hy_st_tensor *t = hy_checkpoint_find(&m->ck, name);
        const char *where = model_dir;
        if (!t && have_side) {
            t = find_in_file(&side, name);
            where = side_path;
        }
        if (!t && m->quant.kv_c8) {
            float *s = malloc((size_t)nkv * sizeof(float));
            const int c = s ? c8_v_scales(m, L, s) : hy_err_set("out of memory");
            if (c == 0) {
                m->v_cache_scale[L] = s;
                m->n_v_cache_scales++;
                continue;
            }
            free(s);
            if (c < 0) {
                hy_err_prefix("%s", model_dir);
                goto out;
            }
        }
        if (!t)
            continue;
        m->v_cache_scale[L] = malloc((size_t)nkv * sizeof(float));
        if (!m->v_cache_scale[L]) {
            hy_err_set("out of memory");
            goto out;
        }
        if (read_scale(t, where, nkv, m->v_cache_scale[L]))
            goto out;
        m->n_v_cache_scales++;
    }
    if (m->n_v_cache_scales)
        hy_log_debug("%s: static FP8 V cache scales for %d of %d layers", model_dir, m->n_v_cache_scales, nl);
    rc = 0;
out:
    if (have_side)
        hy_st_file_free(&side);
    free(side_path);
    return rc;
}

void hy_model_free_kv_scales(struct hy_model *m)
{
    if (m->v_cache_scale)
        for (int32_t L = 0; L < cache_layers(m); L++)
            free(m->v_cache_scale[L]);
    free(m->v_cache_scale);
    m->v_cache_scale = NULL;
    m->n_v_cache_scales = 0;
}

enum hy_dtype hy_model_kv_dtype(const struct hy_model *m, enum hy_dtype want)
{
    if (want == HY_DTYPE_F32 || want == HY_DTYPE_BF16 || want == HY_DTYPE_F8_E4M3)
        return want;
    if (m->quant.kv_c8) /* auto on a C8 checkpoint: its quantized KV cache, as FP8 (c8_v_scales) */
        return HY_DTYPE_F8_E4M3;
    return m->compute == HY_COMPUTE_F32 ? HY_DTYPE_F32 : HY_DTYPE_BF16;
}

size_t hy_model_kv_token_bytes(const struct hy_model *m, enum hy_dtype kv_dtype)
{
    return m->arch->kv_token_bytes(m, hy_model_kv_dtype(m, kv_dtype));
}

int hy_model_kv_cache_init_dtype(const struct hy_model *m, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks,
                                 enum hy_dtype kv_dtype)
{
    return m->arch->kv_init(m, kv, block_size, n_blocks, hy_model_kv_dtype(m, kv_dtype));
}
