/* load.c - binds checkpoint tensors to struct hy_model (both Hy3 spellings, spec §3). */
#include "model/model.h"

#include "model/arch.h"
#include "model/load_quant.h"
#include "model/shard.h"

#include "base/env.h"
#include "base/err.h"
#include "base/log.h"
#include "base/timing.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hy_load_params_default(struct hy_load_params *p, enum hy_compute_dtype compute)
{
    p->compute = compute;
    p->format = hy_load_format_default();
    p->moe_grouped = hy_env_params()->moe_grouped;
    p->comm = NULL;
    p->par = NULL;
}

int hy_model_load(const char *model_dir, enum hy_compute_dtype compute, struct hy_model **out)
{
    struct hy_load_params p;
    hy_load_params_default(&p, compute);
    return hy_model_load_ex(model_dir, &p, out);
}

int hy_model_load_ex(const char *model_dir, const struct hy_load_params *lp, struct hy_model **out)
{
    double t0 = hy_time_now();
    *out = NULL;
    struct hy_model *m = calloc(1, sizeof(*m));
    if (!m)
        return hy_err_set("out of memory");
    m->compute = lp->compute;
    m->moe_per_expert = !lp->moe_grouped;
    if (hy_model_config_load(model_dir, &m->cfg) || hy_quant_config_load(model_dir, &m->quant) ||
        hy_checkpoint_open(model_dir, &m->ck))
        goto fail;
    m->arch = hy_arch_of(&m->cfg);
    if (hy_qload_check_description(&m->quant, &m->ck) || m->arch->bind(m)) {
        hy_err_prefix("%s", model_dir);
        goto fail;
    }
    if (hy_model_load_kv_scales(m, model_dir))
        goto fail;
    if (lp->comm && hy_comm_size(lp->comm) > 1 && hy_model_shard(m, lp->comm, lp->par)) {
        hy_err_prefix("%s", model_dir);
        goto fail;
    }
    m->shard_ops = m->dist ? &hy_shard_mpi_ops : &hy_layers_local_ops;
    m->attn_heads = m->dist ? m->dist->nh : m->cfg.num_attention_heads;
    m->attn_kv_heads = m->dist ? m->dist->nkv : m->cfg.num_key_value_heads;
    if (hy_model_place(m, lp->format))
        goto fail;
    m->load_seconds = hy_time_now() - t0;
    *out = m;
    return 0;
fail:
    hy_model_free(m);
    return -1;
}

static void free_layer(struct hy_layer *ly)
{
    free(ly->input_norm);
    free(ly->post_norm);
    free(ly->q_norm);
    free(ly->k_norm);
    free(ly->router);
    free(ly->expert_bias);
    free(ly->experts);
    free(ly->enorm);
    free(ly->hnorm);
    free(ly->final_norm);
    free(ly->q_a_norm);
    free(ly->kv_a_norm);
    free(ly->w_uk_t);
    free(ly->sink);
    free(ly->idx_k_norm_w);
    free(ly->idx_k_norm_b);
    free(ly->idx_weights);
    for (int i = 0; i < 2; i++) {
        free(ly->hc_fn[i]);
        free(ly->hc_base[i]);
        free(ly->hc_scale[i]);
    }
}

void hy_model_free(struct hy_model *m)
{
    if (!m)
        return;
    hy_model_shard_free(m);
    if (m->layers) {
        int n_layers = m->cfg.num_hidden_layers + (m->cfg.num_nextn_predict_layers > 0);
        for (int L = 0; L < n_layers; L++)
            free_layer(&m->layers[L]);
    }
    free(m->layers);
    hy_model_free_kv_scales(m);
    free(m->prof.expert_hits);
    hy_model_release_scratch(m);
    free(m->final_norm);
    free(m->inv_freq);
    free(m->hc_head_fn);
    free(m->hc_head_base);
    free(m->hc_head_scale);
    hy_checkpoint_close(&m->ck);
    hy_quant_config_free(&m->quant);
    hy_model_place_release(m);
    free(m);
}

int hy_model_kv_cache_init(const struct hy_model *m, struct hy_kv_cache *kv, int32_t block_size, int32_t n_blocks)
{
    return hy_model_kv_cache_init_dtype(m, kv, block_size, n_blocks, HY_DTYPE_UNKNOWN);
}
