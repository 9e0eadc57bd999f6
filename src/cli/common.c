#include "cli/common.h"
#include "engine/spec.h"

#include "base/env.h"
#include "base/err.h"
#include "base/fileio.h"
#include "base/log.h"
#include "comm/comm.h"
#include "kernels/kernel_table.h"
#include "engine/executor.h"
#include "model/place.h"
#include "model/shard.h"
#include "text/chat.h"
#include "text/reasoning.h"
#include "text/toolcall.h"
#include "text/prompt.h"

#include "config/quant_config.h"

#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hy_cli_parse_dtype(const char *s, const char *model_dir, enum hy_compute_dtype *out)
{
    if (s && (!strcmp(s, "float32") || !strcmp(s, "fp32") || !strcmp(s, "f32") || !strcmp(s, "float"))) {
        *out = HY_COMPUTE_F32;
        return 0;
    }
    if (s && (!strcmp(s, "bfloat16") || !strcmp(s, "bf16"))) {
        *out = HY_COMPUTE_BF16;
        return 0;
    }
    if (s && strcmp(s, "auto") != 0)
        return hy_err_set("--dtype \"%s\": expected float32 (f32), bfloat16 (bf16) or auto", s);
    struct hy_checkpoint ck;
    if (hy_checkpoint_open(model_dir, &ck))
        return -1;
    const struct hy_st_tensor *e = hy_checkpoint_find(&ck, "model.embed_tokens.weight");
    *out = e && e->dtype == HY_DTYPE_F32 ? HY_COMPUTE_F32 : HY_COMPUTE_BF16;
    hy_checkpoint_close(&ck);
    return 0;
}

int hy_cli_check_quantization(const char *q, const char *model_dir)
{
    if (!q)
        return 0;
    if (strcmp(q, "ascend") && strcmp(q, "fp8") && strcmp(q, "compressed-tensors"))
        return hy_err_set("--quantization \"%s\": expected ascend, fp8 or compressed-tensors (hyinfer reads the "
                          "method from the checkpoint; the flag confirms it)",
                          q);
    struct hy_quant_config qc;
    if (hy_quant_config_load(model_dir, &qc)) {
        hy_quant_config_free(&qc);
        return -1;
    }
    const char *have = hy_quant_method_name(qc.method);
    const int ok = strcmp(have, q) == 0;
    hy_quant_config_free(&qc);
    if (!ok)
        return hy_err_set("--quantization %s: %s holds %s%s", q, model_dir,
                          strcmp(have, "none") ? have : "an unquantized checkpoint",
                          !strcmp(q, "ascend") ? " (no quant_model_description.json)" : "");
    return 0;
}

int hy_cli_set_threads(int *threads)
{
    if (*threads < 0 || *threads > HY_CLI_MAX_THREADS)
        return hy_err_set("--threads %d: must be in [1, %d] (0 or absent = OpenMP's default)", *threads,
                          HY_CLI_MAX_THREADS);
    if (*threads == 0) {
        struct hy_env_params ep;
        if (hy_env_params_read(&ep))
            return -1;             /* names the variable */
        *threads = ep.num_threads; /* HYINFER_NUM_THREADS, 0 = unset */
    }
    if (*threads > 0)
        omp_set_num_threads(*threads);
    return 0;
}

int hy_cli_encode_prompt(const struct hy_tokenizer *tok, const struct hy_chat *chat, const char *text,
                         const char *reasoning_effort, const json_t *tools, int32_t **ids, size_t *n,
                         int *start_in_reasoning)
{
    *ids = NULL;
    *n = 0;
    if (start_in_reasoning)
        *start_in_reasoning = 0;
    if (!chat)
        return hy_prompt_encode(tok, text, strlen(text), 1, ids, n);
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", text);
    if (!msgs)
        return hy_err_set("prompt is not valid UTF-8 text");
    json_t *kw = json_pack("{s:b}", "add_generation_prompt", 1);
    if (kw && reasoning_effort)
        json_object_set_new(kw, "reasoning_effort", json_string(reasoning_effort));
    char *rendered = kw ? hy_chat_apply(chat, msgs, tools, kw) : NULL;
    json_decref(kw);
    json_decref(msgs);
    if (!rendered)
        return -1;
    if (start_in_reasoning) {
        struct hy_tool_markers mk;
        hy_tool_markers_from_vocab(tok, &mk); /* the think spelling even without tool tokens */
        *start_in_reasoning = hy_reasoning_prompt_open_markers(rendered, strlen(rendered), mk.text[HY_TM_THINK_OPEN],
                                                               mk.text[HY_TM_THINK_CLOSE]);
    }
    int rc = hy_tokenizer_encode(tok, rendered, strlen(rendered), 1, ids, n);
    free(rendered);
    return rc;
}

int hy_cli_load_chat(const char *model_dir, const char *chat_template, struct hy_chat *chat)
{
    if (hy_chat_load(chat, model_dir, chat_template))
        return -1;
    if (!hy_chat_available(chat)) {
        hy_chat_free(chat);
        return hy_err_set("%s: the model has no chat template (no chat_template.jinja, no chat_template in "
                          "tokenizer_config.json): pass --chat-template FILE",
                          model_dir);
    }
    return 0;
}

const char *hy_cli_fmt_bytes(double bytes, char *buf, size_t len)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
    return buf;
}

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

int hy_cli_spec_resolve(const struct hy_cli_spec *s, struct hy_spec_config *out)
{
    if (s->json && hy_spec_config_parse_json(out, s->json))
        return hy_err_prefix("--speculative-config");
    const char *keys[] = {"method", "num_speculative_tokens", "draft_p_min", "gate", "mtp_zero_pos0"};
    const char *vals[] = {s->method, s->k, s->p_min, s->gate, s->zero0};
    for (int i = 0; i < 5; i++)
        if (vals[i] && hy_spec_config_set(out, keys[i], vals[i]))
            return hy_err_prefix("--speculative-config.%s", keys[i]);
    return hy_spec_config_validate(out);
}

void hy_cli_print_spec(FILE *f, const char *prefix, int32_t k, const struct hy_spec_stats *st)
{
    if (k <= 0)
        return;
    const double nd = st->num_drafts ? (double)st->num_drafts : 1.0;
    fprintf(f,
            "%sspec decode: k %d, drafts %llu, draft tokens %llu, accepted %llu (%.1f%%), mean acceptance length %.2f, "
            "per-position acceptance [",
            prefix, k, (unsigned long long)st->num_drafts, (unsigned long long)st->num_draft_tokens,
            (unsigned long long)st->num_accepted_tokens,
            st->num_draft_tokens ? 100.0 * (double)st->num_accepted_tokens / (double)st->num_draft_tokens : 0.0,
            1.0 + (double)st->num_accepted_tokens / nd);
    for (int32_t i = 0; i < k && i < HY_SPEC_MAX_TOKENS; i++)
        fprintf(f, "%s%.3f", i ? ", " : "", (double)st->num_accepted_tokens_per_pos[i] / nd);
    fprintf(f, "], gate: windows on %llu / off %llu (%.1f vs %.1f tok/s), early off %llu, MTP off %llu, drafting %s\n",
            (unsigned long long)st->gate_windows_on, (unsigned long long)st->gate_windows_off, st->rate_on,
            st->rate_off, (unsigned long long)st->gate_early_off, (unsigned long long)st->gate_hard_off,
            st->drafting ? "on" : "off");
}
