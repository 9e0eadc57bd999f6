/* parallel.c - parallel_config sizes: defaults, vLLM flag mapping, checks against the job size. */
#include "config/parallel.h"

#include "base/err.h"

#include <string.h>

void hy_parallel_default(struct hy_parallel_config *p)
{
    memset(p, 0, sizeof(*p));
    p->attn_tp_size = p->dense_tp_size = p->moe_tp_size = p->embed_tp_size = p->lmhead_tp_size = 1;
}

int hy_parallel_from_vllm(struct hy_parallel_config *p, int32_t tp, int32_t dp, int ep)
{
    if (tp < 1 || dp < 1)
        return hy_err_set("--tensor-parallel-size %d / --data-parallel-size %d: both must be >= 1", tp, dp);
    const int32_t w = tp * dp;
    p->world_size = w;
    p->attn_tp_size = p->dense_tp_size = p->embed_tp_size = p->lmhead_tp_size = tp;
    p->moe_tp_size = ep ? 1 : w;
    return 0;
}

int hy_parallel_check(struct hy_parallel_config *p, int32_t world)
{
    if (p->world_size == 0)
        p->world_size = world;
    if (p->world_size != world)
        return hy_err_set("parallel_config: world_size %d but the job has %d rank%s (mpirun -np %d)", p->world_size,
                          world, world == 1 ? "" : "s", p->world_size);
    const char *names[] = {"attn_tp_size", "dense_tp_size", "moe_tp_size", "embed_tp_size", "lmhead_tp_size"};
    const int32_t vals[] = {p->attn_tp_size, p->dense_tp_size, p->moe_tp_size, p->embed_tp_size, p->lmhead_tp_size};
    for (int i = 0; i < 5; i++)
        if (vals[i] < 1 || world % vals[i] != 0)
            return hy_err_set("parallel_config: %s %d does not divide world_size %d", names[i], vals[i], world);
    return 0;
}

enum hy_moe_dispatch hy_parallel_dispatch(const struct hy_parallel_config *p, int32_t num_experts_per_tok)
{
    if (p->moe_dispatch != HY_MOE_DISPATCH_AUTO)
        return p->moe_dispatch;
    const int32_t ep = p->world_size / (p->moe_tp_size > 0 ? p->moe_tp_size : 1);
    if (ep > 1 && p->enable_sp && p->attn_tp_size == ep && num_experts_per_tok > ep)
        return HY_MOE_DISPATCH_AG;
    return HY_MOE_DISPATCH_A2A;
}

int hy_moe_dispatch_parse(const char *s, enum hy_moe_dispatch *out)
{
    if (!strcmp(s, "auto"))
        *out = HY_MOE_DISPATCH_AUTO;
    else if (!strcmp(s, "ag") || !strcmp(s, "allgather_reducescatter"))
        *out = HY_MOE_DISPATCH_AG;
    else if (!strcmp(s, "a2a") || !strcmp(s, "alltoall"))
        *out = HY_MOE_DISPATCH_A2A;
    else
        return hy_err_set("MoE dispatch \"%s\": expected auto, allgather_reducescatter (ag) or alltoall (a2a)", s);
    return 0;
}

const char *hy_moe_dispatch_name(enum hy_moe_dispatch d)
{
    return d == HY_MOE_DISPATCH_AG ? "allgather_reducescatter" : d == HY_MOE_DISPATCH_A2A ? "alltoall" : "auto";
}

int hy_combine_parse(const char *s, int *sum)
{
    if (!strcmp(s, "exact"))
        *sum = 0;
    else if (!strcmp(s, "sum"))
        *sum = 1;
    else
        return hy_err_set("combine mode \"%s\": expected exact or sum", s);
    return 0;
}
