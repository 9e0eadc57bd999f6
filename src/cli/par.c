#include "cli/par.h"
#include "cli/common.h"

#include "base/env.h"
#include "base/err.h"
#include "base/fileio.h"
#include "base/log.h"
#include "comm/comm.h"
#include "engine/executor.h"
#include "kernels/kernel_table.h"
#include "model/place.h"
#include "model/shard.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hy_cli_par_resolve(const struct hy_cli_par *p, int from_yaml, struct hy_parallel_config *out)
{
    const int world = hy_comm_size(hy_dist_world());
    if (!from_yaml || p->given) {
        const int sp = from_yaml ? out->enable_sp : 0;
        struct hy_parallel_config d;
        hy_parallel_default(&d);
        *out = d;
        out->enable_sp = sp;
        const int dp = p->dp > 0 ? p->dp : 1, tp = p->tp > 0 ? p->tp : world / dp;
        if ((p->tp < 0 || p->dp < 0) || tp < 1)
            return hy_err_set("--tensor-parallel-size %d / --data-parallel-size %d: need sizes >= 1 with TP x DP = "
                              "the mpirun rank count %d",
                              p->tp, p->dp, world);
        if (hy_parallel_from_vllm(out, tp, dp, p->ep))
            return -1;
        if (tp * dp != world)
            return hy_err_set("--tensor-parallel-size %d x --data-parallel-size %d = %d, but the job has %d rank%s "
                              "(mpirun -np %d)",
                              tp, dp, tp * dp, world, world == 1 ? "" : "s", tp * dp);
    }
    if ((p->combine && hy_combine_parse(p->combine, &out->combine_sum) && hy_err_prefix("--tp-combine")) ||
        (p->dispatch && hy_moe_dispatch_parse(p->dispatch, &out->moe_dispatch) && hy_err_prefix("--all2all-backend")))
        return -1;
    return hy_parallel_check(out, world);
}

int hy_cli_single_rank(const char *what)
{
    const int n = hy_comm_size(hy_dist_world());
    return n == 1 ? 0
                  : hy_err_set("%s runs in one process; it was started with %d ranks (use serve, run, generate, "
                               "logits, bench latency or bench comm under mpirun)",
                               what, n);
}

/* The (key, value) pairs every rank must share: each flag of the command line with its value,
 * the positional arguments, the model's config.json bytes and the layout. */
static int agree_on_start(const char *model_dir, const struct hy_parallel_config *par, int argc, char **argv)
{
    enum { MAX_KEYS = 128 };
    const char *keys[MAX_KEYS], *vals[MAX_KEYS];
    char kbuf[MAX_KEYS][64], vbuf[MAX_KEYS][64];
    int n = 0;
    for (int i = 1; i < argc && n < MAX_KEYS - 6; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && a[1]) {
            const char *eq = strchr(a, '=');
            const size_t kl = eq ? (size_t)(eq - a) : strlen(a);
            snprintf(kbuf[n], sizeof(kbuf[n]), "%.*s", (int)kl, a);
            const char *v = eq ? eq + 1 : (i + 1 < argc && argv[i + 1][0] != '-') ? argv[++i] : "(set)";
            keys[n] = kbuf[n];
            vals[n++] = v;
        } else {
            snprintf(kbuf[n], sizeof(kbuf[n]), "argument %d", i);
            keys[n] = kbuf[n];
            vals[n++] = a;
        }
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/config.json", model_dir);
    size_t len = 0;
    char *cfg = NULL;
    if (hy_file_read_all(path, &cfg, &len))
        cfg = NULL;
    keys[n] = "config.json of the model";
    vals[n++] = cfg ? cfg : "(unreadable)";
    snprintf(vbuf[0], sizeof(vbuf[0]), "%d/%d/%d/%d/%d/%d/%d/%d", par->world_size, par->attn_tp_size,
             par->dense_tp_size, par->moe_tp_size, par->embed_tp_size, par->lmhead_tp_size, par->combine_sum,
             (int)par->moe_dispatch);
    keys[n] = "parallel layout";
    vals[n++] = vbuf[0];
    /* what changes the numbers every rank computes for itself (the router picks experts from them):
     * the kernel level in use (hosts with different CPUs: set HYINFER_ISA to one level everywhere) */
    keys[n] = "kernel level (HYINFER_ISA)";
    vals[n++] = hy_kernels_active()->name;
    keys[n] = "HYINFER_MXFP4_ACT";
    vals[n++] = hy_env_params()->mxfp4_act_mxint8 ? "mxint8" : "f32";
    keys[n] = "HYINFER_KV_FP8_SCALE";
    vals[n++] = hy_env_params()->kv_fp8_scale_fit ? "mse" : "amax";
    int rc = hy_dist_agree(hy_dist_world(), n, keys, vals);
    free(cfg);
    return rc;
}

int hy_cli_load_model(const char *model_dir, struct hy_load_params *lp, const struct hy_parallel_config *par, int argc,
                      char **argv, struct hy_model **m)
{
    struct hy_comm *w = hy_dist_world();
    const int n = hy_comm_size(w), r = hy_comm_rank(w);
    if (n == 1)
        return hy_model_load_ex(model_dir, lp, m);
    if (agree_on_start(model_dir, par, argc, argv))
        return -1;
    lp->comm = w;
    lp->par = par;
    if (hy_model_load_ex(model_dir, lp, m))
        hy_dist_abort(1, "rank %d cannot load its shard: %s", r, hy_err_msg());
    hy_comm_barrier(w); /* every rank has its shard */
    char b1[32], b2[32];
    hy_log_info("dist: rank %d/%d holds %s of weights, resident %s", r, n,
                hy_cli_fmt_bytes((double)hy_model_weight_bytes(*m), b1, sizeof(b1)),
                hy_cli_fmt_bytes((double)hy_proc_rss_bytes(), b2, sizeof(b2)));
    if (r == 0)
        return 0;
    signal(SIGINT, SIG_IGN); /* the leader decides when the job ends (mpirun forwards signals to all) */
    signal(SIGTERM, SIG_IGN);
    struct hy_executor ex;
    hy_executor_init(&ex, *m);
    if (hy_executor_worker_run(&ex))
        hy_dist_abort(1, "rank %d: %s", r, hy_err_msg());
    hy_model_free(*m);
    hy_dist_finalize();
    exit(0);
}

void hy_cli_free_model(struct hy_model *m)
{
    if (!m)
        return;
    struct hy_executor ex;
    hy_executor_init(&ex, m);
    hy_executor_exit(&ex);
    hy_model_free(m);
}

int hy_cli_load(const char *model_dir, enum hy_compute_dtype cd, const struct hy_cli_par *p, int argc, char **argv,
                struct hy_model **m)
{
    struct hy_load_params lp;
    struct hy_parallel_config par;
    hy_load_params_default(&lp, cd);
    if (hy_cli_par_resolve(p, 0, &par))
        return -1;
    return hy_cli_load_model(model_dir, &lp, &par, argc, argv, m);
}
