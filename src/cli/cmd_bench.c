/* cmd_bench.c - `hyinfer bench latency`: machine probes (read bandwidth, peak FLOP/s), prefill and
 * decode throughput on a model, per-stage time breakdown, and the roofline ratios of DESIGN.md §6.
 *
 * Under mpirun (`mpirun -np N hyinfer bench latency -m DIR [-tp ..] [--enable-expert-parallel] ...`, the
 * layout flags of HY_CLI_PAR_ARGS) the model is sharded (hy_cli_load_model): world rank 0 runs the
 * bench and drives every forward step, the other ranks execute them (engine/executor.h) and never come
 * back here. The probes run on rank 0 only, and the bytes counted are rank 0's shard. Each prefill and
 * decode phase then also reports rank 0's collectives (comm/comm.h hy_dist_stats, the difference
 * between snapshots taken around the timed forward calls, so the process's counters and log hash are
 * left alone): calls / bytes / seconds per kind per step and per layer (/ num_hidden_layers), the
 * communication share of the step time and the overlap of the non-blocking exchanges (hidden_sec /
 * posted_sec).
 *
 * Every ratio is measured in the same run as its denominator; each decode run's roofline takes the larger
 * of two read-bandwidth probes run just before and just after it (the top-level mem_bw_gbs, probed once
 * at the start, stays the machine figure). Bytes and FLOPs are counted from the
 * loaded tensors and the experts the router actually selected (src/bench/account.h). Progress goes
 * to stderr; the table (or, with --json, one JSON object) to stdout.
 */
#include "cli/args.h"
#include "cli/bench_spec.h"
#include "cli/commands.h"
#include "cli/common.h"

#include "base/err.h"
#include "base/progress.h"
#include "engine/executor.h"
#include "model/shard.h"
#include "base/timing.h"
#include "bench/account.h"
#include "bench/latency.h"
#include "bench/probe.h"
#include "comm/comm.h"
#include "kernels/kernel_table.h"

#include <errno.h>
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST 16

static const char *const STAGE_NAMES[HY_STAGE_COUNT] = {"attention", "router",  "routed_experts", "shared_expert",
                                                        "dense_mlp", "lm_head", "other"};

static int parse_list(const char *flag, const char *s, int32_t *out, int *n)
{
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v <= 0 || v > (1 << 24) || *n >= MAX_LIST || (*end && *end != ','))
            return hy_err_set("%s: \"%s\" is not a comma-separated list of positive integers (at most %d)", flag, s,
                              MAX_LIST);
        out[(*n)++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (*n == 0)
        return hy_err_set("%s: empty list", flag);
    return 0;
}

static int parse_bytes(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double mul = 1.0;
    if (*end == 'K' || *end == 'k')
        mul = 1024.0;
    else if (*end == 'M' || *end == 'm')
        mul = 1024.0 * 1024.0;
    else if (*end == 'G' || *end == 'g')
        mul = 1024.0 * 1024.0 * 1024.0;
    if (mul != 1.0)
        end++;
    if (end == s || errno || *end || !(v > 0.0) || v * mul > 1e13)
        return hy_err_set("--bw-bytes: \"%s\" is not a size like 2G, 64M or 1048576", s);
    *out = (size_t)(v * mul);
    return 0;
}

static json_t *stages_json(const double *stage)
{
    json_t *o = json_object();
    double tot = 0.0;
    for (int i = 0; i < HY_STAGE_COUNT; i++) {
        json_object_set_new(o, STAGE_NAMES[i], json_real(stage[i]));
        tot += stage[i];
    }
    json_object_set_new(o, "total", json_real(tot));
    return o;
}

static void print_stages(const char *label, const double *stage)
{
    double tot = 0.0;
    for (int i = 0; i < HY_STAGE_COUNT; i++)
        tot += stage[i];
    printf("  %-18s", label);
    for (int i = 0; i < HY_STAGE_COUNT; i++)
        printf(" %s %.4f s (%.0f%%)%s", STAGE_NAMES[i], stage[i], tot > 0 ? 100.0 * stage[i] / tot : 0.0,
               i + 1 < HY_STAGE_COUNT ? "," : "");
    printf("\n");
}

static double ratio(double a, double b)
{
    return b > 0.0 ? a / b : 0.0;
}

/* Seconds of c summed over the kinds. */
static double comm_seconds(const struct hy_bench_comm_phase *c)
{
    double t = 0.0;
    for (int k = 0; k < HY_COLL_COUNT; k++)
        t += c->sec[k];
    return t;
}

/* The "comm" object of one phase: c was accumulated over `steps` forward calls of step_s seconds each
 * (the mean); per_layer divides the per-step figures by `layers`. */
static json_t *comm_json(const struct hy_bench_comm_phase *c, int steps, double step_s, int layers)
{
    const double inv = steps > 0 ? 1.0 / steps : 0.0, per_l = layers > 0 ? 1.0 / layers : 0.0;
    json_t *o = json_object(), *ps = json_object(), *pl = json_object();
    int64_t calls = 0, bytes = 0;
    for (int k = 0; k < HY_COLL_COUNT; k++) {
        calls += c->calls[k];
        bytes += c->bytes[k];
        if (!c->calls[k])
            continue;
        json_object_set_new(ps, hy_coll_name((enum hy_coll)k),
                            json_pack("{s:f, s:f, s:f}", "calls", c->calls[k] * inv, "bytes", c->bytes[k] * inv,
                                      "seconds", c->sec[k] * inv));
        json_object_set_new(pl, hy_coll_name((enum hy_coll)k),
                            json_pack("{s:f, s:f, s:f}", "calls", c->calls[k] * inv * per_l, "bytes",
                                      c->bytes[k] * inv * per_l, "seconds", c->sec[k] * inv * per_l));
    }
    const double sec = comm_seconds(c) * inv;
    json_object_set_new(o, "steps", json_integer(steps));
    json_object_set_new(o, "layers", json_integer(layers));
    json_object_set_new(o, "per_step", ps);
    json_object_set_new(o, "per_layer", pl);
    json_object_set_new(o, "calls_per_step", json_real(calls * inv));
    json_object_set_new(o, "bytes_per_step", json_real(bytes * inv));
    json_object_set_new(o, "seconds_per_step", json_real(sec));
    json_object_set_new(o, "share_of_step", json_real(ratio(sec, step_s)));
    json_object_set_new(o, "nonblocking_posted_seconds_per_step", json_real(c->posted_sec * inv));
    json_object_set_new(o, "nonblocking_hidden_seconds_per_step", json_real(c->hidden_sec * inv));
    json_object_set_new(o, "overlap_fraction", json_real(ratio(c->hidden_sec, c->posted_sec)));
    return o;
}

/* The table rows of one phase's collectives: one per kind used, then the total with the share of the
 * step and the non-blocking overlap. */
static void print_comm(const char *label, const struct hy_bench_comm_phase *c, int steps, double step_s, int layers)
{
    const double inv = steps > 0 ? 1.0 / steps : 0.0, per_l = layers > 0 ? 1.0 / layers : 0.0;
    char b1[32], b2[32];
    for (int k = 0; k < HY_COLL_COUNT; k++) {
        if (!c->calls[k])
            continue;
        printf("  %-16s %-10s %10.1f %12s %10.3f %9.2f %12s %10.1f\n", label, hy_coll_name((enum hy_coll)k),
               c->calls[k] * inv, hy_cli_fmt_bytes(c->bytes[k] * inv, b1, sizeof(b1)), 1e3 * c->sec[k] * inv,
               c->calls[k] * inv * per_l, hy_cli_fmt_bytes(c->bytes[k] * inv * per_l, b2, sizeof(b2)),
               1e6 * c->sec[k] * inv * per_l);
        label = "";
    }
    const double sec = comm_seconds(c) * inv;
    printf("  %-16s %-10s %10s %12s %10.3f %9s %12s %10.1f   %.1f%% of the %.4f s step; overlap %.2f (%.3f of %.3f "
           "ms posted hidden)\n",
           label, "total", "", "", 1e3 * sec, "", "", 1e6 * sec * per_l, 100.0 * ratio(sec, step_s), step_s,
           ratio(c->hidden_sec, c->posted_sec), 1e3 * c->hidden_sec * inv, 1e3 * c->posted_sec * inv);
}

/* The layer count of the published model whose per-layer shapes cfg has (the bench models of
 * tools/make/make_bench_model.py: a few layers of a real model's shapes): 80 for Hy3 295B-A21B, 78 for
 * Hy4-preview; 0 (no projection) for any other shapes, e.g. the toy test models. */
static int full_model_layers(const struct hy_model_config *cfg)
{
    if (cfg->arch == HY_ARCH_HY_V3 && cfg->hidden_size == 4096 && cfg->num_attention_heads == 64 &&
        cfg->num_key_value_heads == 8 && cfg->head_dim == 128 && cfg->moe_intermediate_size == 1536)
        return 80;
    if (cfg->arch == HY_ARCH_HY_V4 && cfg->hidden_size == 6144 && cfg->num_attention_heads == 64)
        return 78;
    return 0;
}

int hy_cmd_bench(int argc, char **argv)
{
    const char *model_dir = NULL, *quantization = NULL, *plens_s = "128,512,2048", *batches_s = "1,4,16",
               *dtype = "bfloat16", *bw_s = "2G", *json_out = NULL, *kvd = NULL, *load_fmt = NULL, *fill_s = "prefill";
    int steps = 16, ctx0 = 16, threads = 0, json = 0, help = 0, bw_reps = 5, seed = 1, proj_layers = 0, proj_dense = -1,
        skip_model = 0;
    float flop_s = 0.25f;
    struct hy_cli_par par = {0};
    struct hy_cli_spec spec_args = {0};
    const struct hy_arg args[] = {
        HY_CLI_PAR_ARGS(par),
        HY_CLI_SPEC_ARGS(spec_args),
        {"--model", "-m", HY_ARG_STR, &model_dir, NULL, "model directory (Hugging Face layout)"},
        {"--prompt-lens", NULL, HY_ARG_STR, &plens_s, NULL, "prefill prompt lengths (default 128,512,2048)"},
        {"--batch-sizes", NULL, HY_ARG_STR, &batches_s, NULL, "decode batch sizes (default 1,4,16)"},
        {"--decode-steps", NULL, HY_ARG_INT, &steps, NULL, "timed decode steps per batch size (default 16)"},
        {"--decode-context", NULL, HY_ARG_INT, &ctx0, NULL, "context tokens per sequence before decode (16)"},
        {"--context-fill", NULL, HY_ARG_STR, &fill_s, NULL,
         "prefill (default): the context is a timed-apart prefill of random tokens | synthetic: its cache rows are "
         "filled with random values (decode at long contexts without the prefill; timings only)"},
        {"--bw-bytes", NULL, HY_ARG_STR, &bw_s, NULL, "bandwidth probe buffer, e.g. 2G (default), 64M"},
        {"--bw-reps", NULL, HY_ARG_INT, &bw_reps, NULL, "bandwidth probe passes, best taken (default 5)"},
        {"--flop-seconds", NULL, HY_ARG_FLOAT, &flop_s, NULL, "minimum seconds per peak-FLOP run (0.25)"},
        {"--threads", "-t", HY_ARG_INT, &threads, NULL, "worker threads (default: all / HYINFER_NUM_THREADS)"},
        {"--dtype", NULL, HY_ARG_STR, &dtype, NULL, "bfloat16 (default) | float32 compute mode"},
        {"--quantization", "-q", HY_ARG_STR, &quantization, NULL,
         "ascend | fp8 | compressed-tensors: confirms the checkpoint's method (detected from its files)"},
        {"--kv-cache-dtype", NULL, HY_ARG_STR, &kvd, NULL, "auto (compute dtype) | bf16 | fp8 | fp32"},
        {"--load-format", NULL, HY_ARG_STR, &load_fmt, NULL,
         "mmap | copy: weights in the file mapping or copied to a huge-page arena (default: HYINFER_LOAD_FORMAT, else "
         "copy)"},
        {"--seed", NULL, HY_ARG_INT, &seed, NULL, "random token ids seed (default 1)"},
        {"--project-layers", NULL, HY_ARG_INT, &proj_layers, NULL,
         "layers of the full model the batch-1 step is projected to (default: 80 for a model with Hy3's layer "
         "shapes, 78 with Hy4-preview's, else no projection)"},
        {"--project-dense", NULL, HY_ARG_INT, &proj_dense, NULL, "dense layers of the full model (default 1)"},
        {"--probes-only", NULL, HY_ARG_FLAG, &skip_model, NULL, "only the bandwidth and FLOP probes"},
        {"--json", NULL, HY_ARG_FLAG, &json, NULL, "print one JSON object instead of the table"},
        {"--json-out", NULL, HY_ARG_STR, &json_out, NULL, "also write the JSON object to this file"},
        {"--help", "-h", HY_ARG_FLAG, &help, NULL, "this help"},
    };
    const int na = (int)(sizeof(args) / sizeof(args[0]));
    const char *usage =
        "hyinfer bench latency -m DIR [--prompt-lens 128,512,2048] [--batch-sizes 1,4,16] "
        "[--decode-steps 16] [--bw-bytes 2G] [--threads N] [--dtype bfloat16] [--json] [--json-out FILE]\n"
        "under mpirun (mpirun -np N hyinfer bench latency -m DIR -tp N --enable-expert-parallel ...): rank 0 runs the\n"
        "bench on the sharded model and also reports its collectives per phase (docs/distributed.md)";
    int np; /* argv[2] is "latency": main.c dispatches the modes and answers a missing or unknown one */
    if (hy_args_parse(argc, argv, 3, args, na, NULL, 0, &np)) {
        fprintf(stderr, "hyinfer bench: %s\n", hy_err_msg());
        return 2;
    }
    if (help) {
        hy_args_help(usage, args, na);
        return 0;
    }
    int32_t plens[MAX_LIST], batches[MAX_LIST];
    struct hy_progress phases = {0}; /* on a terminal: which prefill / decode run is under way */
    int n_plens = 0, n_batches = 0;
    size_t bw_bytes = 0;
    if ((!model_dir && !skip_model) || steps < 1 || ctx0 < 0 || bw_reps < 1 || !(flop_s > 0.0f) || proj_layers < 0 ||
        proj_dense < -1 || (proj_layers > 0 && proj_dense > proj_layers)) {
        fprintf(
            stderr,
            "hyinfer bench: need -m DIR, --decode-steps >= 1, --decode-context >= 0, --bw-reps >= 1, "
            "--flop-seconds > 0, --project-layers >= 0 (0: by the shapes), 0 <= --project-dense <= --project-layers\n");
        hy_args_usage(usage, args, na);
        return 2;
    }
    const int synthetic = strcmp(fill_s, "synthetic") == 0;
    if (!synthetic && strcmp(fill_s, "prefill") != 0) {
        fprintf(stderr, "hyinfer bench: --context-fill must be prefill or synthetic, not '%s'\n", fill_s);
        return 2;
    }
    if (parse_list("--prompt-lens", plens_s, plens, &n_plens) ||
        parse_list("--batch-sizes", batches_s, batches, &n_batches) || parse_bytes(bw_s, &bw_bytes)) {
        fprintf(stderr, "hyinfer bench: %s\n", hy_err_msg());
        return 2;
    }
    enum hy_dtype kv_dtype;
    struct hy_spec_config spec;
    hy_spec_config_init(&spec);
    if (hy_cli_set_threads(&threads) || (hy_kv_dtype_parse(kvd, &kv_dtype) && hy_err_prefix("--kv-cache-dtype")) ||
        hy_cli_spec_resolve(&spec_args, &spec)) {
        fprintf(stderr, "hyinfer bench: %s\n", hy_err_msg());
        return 2;
    }
    enum hy_load_format lf = hy_load_format_default();
    if (load_fmt && hy_load_format_parse(load_fmt, &lf)) {
        fprintf(stderr, "hyinfer bench: --load-format: %s\n", hy_err_msg());
        return 2;
    }
    const int world = hy_comm_size(hy_dist_world()), rank = hy_comm_rank(hy_dist_world());
    if (synthetic && world > 1) { /* each rank holds its own shard of the cache: rank 0 cannot fill the others' */
        if (rank == 0)
            fprintf(stderr, "hyinfer bench: --context-fill synthetic runs on one process only (not under mpirun)\n");
        return 2;
    }
    if (skip_model && rank > 0) /* the probes run on rank 0 only */
        return 0;
    FILE *jf = NULL; /* opened now so a bad path fails before a long run, not after (rank 0: the one that writes) */
    if (rank == 0 && json_out && !(jf = fopen(json_out, "w"))) {
        fprintf(stderr, "hyinfer bench: --json-out %s: cannot create the file\n", json_out);
        return 2;
    }
    const int nthreads = omp_get_max_threads();

    /* ---- the model, loaded first so that a bad directory fails before the probes ---- */
    struct hy_model *m = NULL;
    struct hy_bench_prefill pre[MAX_LIST];
    struct hy_bench_decode dec[MAX_LIST];
    memset(pre, 0, sizeof(pre));
    memset(dec, 0, sizeof(dec));
    int rc = 1;
    enum hy_compute_dtype cd = HY_COMPUTE_BF16;
    struct hy_parallel_config pl; /* the layout (borrowed by the model: lives until the end) */
    hy_parallel_default(&pl);
    if (skip_model)
        n_plens = n_batches = 0;
    else {
        struct hy_load_params lp;
        if (hy_cli_check_quantization(quantization, model_dir) || hy_cli_parse_dtype(dtype, model_dir, &cd))
            goto fail;
        hy_load_params_default(&lp, cd);
        lp.format = lf;
        /* under mpirun only world rank 0 returns from hy_cli_load_model; the others run its steps */
        if (hy_cli_par_resolve(&par, 0, &pl) || hy_cli_load_model(model_dir, &lp, &pl, argc, argv, &m) ||
            hy_model_prof_enable(m, 1))
            goto fail;
    }

    /* ---- machine probes ---- */
    struct hy_cpu_units cu;
    hy_bench_cpu_detect(&cu);
    const char *kernel_isa = hy_kernels_active()->name;
    fprintf(stderr, "bench: %s, %d threads; units: avx2_fma=%d avx512f=%d avx512_bf16=%d amx_bf16=%d%s; kernels: %s\n",
            cu.brand[0] ? cu.brand : "unknown CPU", nthreads, cu.avx2_fma, cu.avx512f, cu.avx512_bf16, cu.amx_bf16,
            cu.amx_cpuid && !cu.amx_bf16 ? " (AMX in CPUID but tile permission refused)" : "", kernel_isa);
    double bw_gbs = 0.0, bw_s_best = 0.0;
    if (hy_bench_mem_bw(bw_bytes, bw_reps, &bw_gbs, &bw_s_best))
        goto fail;
    fprintf(stderr, "bench: read bandwidth %.2f GB/s (%zu bytes, best of %d: %.4f s)\n", bw_gbs, bw_bytes, bw_reps,
            bw_s_best);
    /* float units (the peak prefill is compared with), then int8 units (W8A8 models' integer dots) */
    enum { N_FLOAT_UNITS = 4, N_UNITS = 6 };
    static const char *const units[N_UNITS] = {"fma", "avx512", "avx512bf16", "amx", "avx2_i8", "avx512vnni"};
    double unit_gf[N_UNITS], unit_flops[N_UNITS], unit_secs[N_UNITS], peak = 0.0, i8_peak = 0.0;
    const char *peak_unit = "none", *i8_unit = "none";
    for (int i = 0; i < N_UNITS; i++) {
        unit_gf[i] = hy_bench_peak_gflops(&cu, units[i], flop_s, &unit_flops[i], &unit_secs[i]);
        if (unit_gf[i] > 0.0)
            fprintf(stderr, "bench: peak %-10s %.1f %s\n", units[i], unit_gf[i],
                    i < N_FLOAT_UNITS ? "GFLOP/s" : "GOP/s (int8)");
        double *best = i < N_FLOAT_UNITS ? &peak : &i8_peak;
        if (unit_gf[i] > *best) {
            *best = unit_gf[i];
            *(i < N_FLOAT_UNITS ? &peak_unit : &i8_unit) = units[i];
        }
    }

    /* ---- model runs ---- */
    int64_t rss_loaded = -1;
    if (m) {
        double t0 = hy_time_now();
        hy_bench_prefault_weights(m);
        fprintf(stderr, "bench: loaded %s (%.2f GB of weights, load %.1f s, prefault %.1f s)\n", model_dir,
                (double)m->ck.total_bytes / 1e9, m->load_seconds, hy_time_now() - t0);
        rss_loaded = hy_proc_rss_bytes();
        fprintf(stderr,
                "bench: load format %s (%.2f GB copied in %.2f s), VmRSS %.2f GB, AnonHugePages %.2f GB, "
                "FilePmdMapped %.2f GB\n",
                hy_load_format_name(m->place.format), (double)m->place.bytes / 1e9, m->place.seconds,
                (double)rss_loaded / 1e9, (double)hy_proc_anon_huge_bytes() / 1e9,
                (double)hy_proc_file_pmd_bytes() / 1e9);
    }
    if (m) { /* the activations (and under mpirun the staging buffers) sized and touched before timing */
        int32_t max_t = 1, max_ctx = 1;
        for (int i = 0; i < n_plens; i++)
            max_t = plens[i] > max_t ? plens[i] : max_t;
        for (int i = 0; i < n_batches; i++) {
            const int32_t pre_t = batches[i] * (ctx0 > 1 && !synthetic ? ctx0 : 1);
            max_t = pre_t > max_t ? pre_t : max_t;
            max_ctx = ctx0 + steps + 1 > max_ctx ? ctx0 + steps + 1 : max_ctx;
        }
        max_ctx = max_t > max_ctx ? max_t : max_ctx;
        struct hy_executor ex;
        hy_executor_init(&ex, m);
        if (hy_executor_reserve(&ex, max_t, max_ctx))
            goto fail;
    }
    hy_progress_begin(&phases, "bench phases", n_plens + n_batches, HY_PROGRESS_ITEMS);
    for (int i = 0; i < n_plens; i++) {
        char what[64];
        snprintf(what, sizeof(what), "prefill %d tokens", plens[i]);
        hy_progress_phase(&phases, i, what);
        if (hy_bench_run_prefill(m, kv_dtype, plens[i], (uint64_t)seed + (uint64_t)i, &pre[i]))
            goto fail;
        hy_progress_clear(&phases);
        fprintf(stderr, "bench: prefill %d tokens: %.3f s, %.2f tokens/s, %.1f GFLOP/s\n", plens[i], pre[i].secs,
                plens[i] / pre[i].secs, pre[i].flops.total / pre[i].secs / 1e9);
    }
    for (int i = 0; i < n_batches; i++) {
        double before = 0.0, after = 0.0, unused;
        char what[64];
        snprintf(what, sizeof(what), "decode batch %d (%d steps)", batches[i], steps);
        hy_progress_phase(&phases, n_plens + i, what);
        if (hy_bench_mem_bw(bw_bytes, bw_reps, &before, &unused) ||
            hy_bench_run_decode(m, kv_dtype, batches[i], ctx0, synthetic, steps, (uint64_t)seed + 100 + (uint64_t)i,
                                &dec[i]) ||
            hy_bench_mem_bw(bw_bytes, bw_reps, &after, &unused))
            goto fail;
        dec[i].bw_before_gbs = before;
        dec[i].bw_after_gbs = after;
        dec[i].bw_gbs = before > after ? before : after;
        hy_progress_clear(&phases);
        fprintf(stderr,
                "bench: decode batch %d: %.4f s/step, %.2f tokens/s, %.3f GB weights/step (read bandwidth %.2f GB/s "
                "before, %.2f after)\n",
                batches[i], dec[i].step_s, dec[i].tokens_per_s, dec[i].bytes.weights / 1e9, before, after);
    }

    hy_progress_clear(&phases); /* each phase printed its own line: no final one */
    phases.active = 0;
    /* ---- ratios ---- */
    const struct hy_bench_decode *d1 = NULL, *dmax = NULL;
    for (int i = 0; i < n_batches; i++) {
        if (dec[i].batch == 1 && !d1)
            d1 = &dec[i];
        if (!dmax || dec[i].batch > dmax->batch)
            dmax = &dec[i];
    }
    const struct hy_bench_prefill *p512 = NULL;
    for (int i = 0; i < n_plens; i++) /* the 512-token prefill, else the length closest to 512 */
        if (!p512 || abs(pre[i].len - 512) < abs(p512->len - 512))
            p512 = &pre[i];
    const double dec_frac = d1 ? ratio(d1->bytes.weights / d1->step_s, d1->bw_gbs * 1e9) : 0.0;
    const double pre_frac = p512 ? ratio(p512->flops.total / p512->secs, peak * 1e9) : 0.0;
    const int w8a8 = m && m->quant.method == HY_QM_ASCEND; /* its linears' prefill work is int8 */
    const double pre_i8_frac = p512 ? ratio(p512->flops.total / p512->secs, i8_peak * 1e9) : 0.0;
    if (m && proj_layers == 0)
        proj_layers = full_model_layers(&m->cfg);
    if (proj_dense < 0)
        proj_dense = proj_layers > 0 ? 1 : 0;
    double proj_ms = 0.0, moe_layer_s = 0.0, dense_layer_s = 0.0;
    int n_moe = 0, n_dense = 0;
    if (m)
        for (int L = 0; L < m->cfg.num_hidden_layers; L++)
            m->layers[L].is_moe ? n_moe++ : n_dense++;
    if (d1 && m && proj_layers > 0) {
        const double *s = d1->stage;
        const double attn_layer = s[HY_STAGE_ATTENTION] / m->cfg.num_hidden_layers;
        moe_layer_s = n_moe ? attn_layer + (s[HY_STAGE_ROUTER] + s[HY_STAGE_ROUTED] + s[HY_STAGE_SHARED]) / n_moe : 0.0;
        dense_layer_s = n_dense ? attn_layer + s[HY_STAGE_DENSE_MLP] / n_dense : 0.0;
        proj_ms = 1e3 * (d1->step_s + (proj_layers - proj_dense - n_moe) * moe_layer_s +
                         (proj_dense - n_dense) * dense_layer_s);
    }
    const char *proj_formula = "step_s(batch 1) + (project_layers - project_dense - moe_layers) * moe_layer_s + "
                               "(project_dense - dense_layers) * dense_layer_s; moe_layer_s = attention/layers + "
                               "(router + routed_experts + shared_expert)/moe_layers, dense_layer_s = "
                               "attention/layers + dense_mlp/dense_layers (per-step stage seconds, batch 1)";
    const double big_roof_s = dmax ? dmax->bytes.weights / (dmax->bw_gbs * 1e9) : 0.0;
    const int n_layers = m ? m->cfg.num_hidden_layers : 0;
    const enum hy_moe_dispatch dispatch =
        m && m->dist ? m->dist->dispatch : hy_parallel_dispatch(&pl, m ? m->cfg.num_experts_per_tok : 1);

    {
        json_t *o = json_object(), *cpu = json_object(), *ul = json_array(), *pg = json_object();
        json_object_set_new(cpu, "brand", json_string(cu.brand));
        const int have[N_UNITS] = {cu.avx2_fma, cu.avx512f, cu.avx512_bf16, cu.amx_bf16, cu.avx2_fma, cu.avx512_vnni};
        for (int i = 0; i < N_UNITS; i++) {
            if (have[i])
                json_array_append_new(ul, json_string(units[i]));
            if (unit_gf[i] > 0.0)
                json_object_set_new(pg, units[i],
                                    json_pack("{s:f, s:f, s:f}", "gflops", unit_gf[i], "flops", unit_flops[i],
                                              "seconds", unit_secs[i]));
        }
        json_object_set_new(cpu, "units", ul);
        json_object_set_new(cpu, "amx_in_cpuid", json_boolean(cu.amx_cpuid));
        json_object_set_new(o, "cpu", cpu);
        json_object_set_new(o, "threads", json_integer(nthreads));
        json_object_set_new(o, "kernel_isa", json_string(kernel_isa));
        json_object_set_new(o, "mem_bw_gbs", json_real(bw_gbs));
        json_object_set_new(
            o, "mem_bw_probe",
            json_pack("{s:I, s:i, s:f}", "bytes", (json_int_t)bw_bytes, "reps", bw_reps, "best_seconds", bw_s_best));
        json_object_set_new(o, "peak_gflops", json_real(peak));
        json_object_set_new(o, "peak_unit", json_string(peak_unit));
        json_object_set_new(o, "peak_by_unit", pg);
        json_object_set_new(o, "int8_peak_gops", json_real(i8_peak));
        json_object_set_new(o, "int8_peak_unit", json_string(i8_unit));
        if (world > 1)
            json_object_set_new(o, "parallel",
                                json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:s}", "world_size", world,
                                          "attn_tp_size", pl.attn_tp_size, "dense_tp_size", pl.dense_tp_size,
                                          "moe_tp_size", pl.moe_tp_size, "moe_ep", world / pl.moe_tp_size,
                                          "embed_tp_size", pl.embed_tp_size, "lmhead_tp_size", pl.lmhead_tp_size,
                                          "combine", pl.combine_sum ? "sum" : "exact", "dispatch",
                                          hy_moe_dispatch_name(dispatch)));
        if (world > 1 && m) /* model.weight_bytes is the whole checkpoint; this is rank 0's shard */
            json_object_set_new(json_object_get(o, "parallel"), "rank0_weight_bytes",
                                json_integer((json_int_t)hy_model_weight_bytes(m)));
        if (m) {
            json_object_set_new(o, "model",
                                json_pack("{s:s, s:s, s:f, s:i, s:i, s:i, s:s}", "dir", model_dir, "dtype",
                                          cd == HY_COMPUTE_BF16 ? "bfloat16" : "float32", "weight_bytes",
                                          (double)m->ck.total_bytes, "layers", m->cfg.num_hidden_layers, "moe_layers",
                                          n_moe, "experts", m->cfg.num_experts, "kv_cache_dtype",
                                          hy_kv_dtype_name(hy_model_kv_dtype(m, kv_dtype))));
            json_object_set_new(o, "load",
                                json_pack("{s:s, s:I, s:f, s:f, s:I, s:I}", "format",
                                          hy_load_format_name(m->place.format), "copied_bytes",
                                          (json_int_t)m->place.bytes, "copy_seconds", m->place.seconds, "load_seconds",
                                          m->load_seconds, "vm_rss_bytes", (json_int_t)rss_loaded, "anon_huge_bytes",
                                          (json_int_t)hy_proc_anon_huge_bytes()));
            json_object_set_new(json_object_get(o, "load"), "file_pmd_mapped_bytes",
                                json_integer((json_int_t)hy_proc_file_pmd_bytes()));
        }
        json_t *ptps = json_object(), *pdet = json_object();
        for (int i = 0; i < n_plens; i++) {
            char k[16];
            snprintf(k, sizeof(k), "%d", pre[i].len);
            const struct hy_bench_flops *f = &pre[i].flops;
            json_object_set_new(ptps, k, json_real(pre[i].len / pre[i].secs));
            json_t *d =
                json_pack("{s:f, s:f, s:f, s:f}", "seconds", pre[i].secs, "tokens_per_s", pre[i].len / pre[i].secs,
                          "flops", f->total, "gflops_per_s", f->total / pre[i].secs / 1e9);
            json_object_set_new(d, "flops_by_part",
                                json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "attn_proj", f->attn_proj, "attn_core",
                                          f->attn_core, "dense_mlp", f->dense_mlp, "router", f->router,
                                          "routed_experts", f->routed, "shared_expert", f->shared, "lm_head",
                                          f->lm_head));
            json_object_set_new(d, "distinct_experts", json_integer(pre[i].distinct_experts));
            json_object_set_new(d, "stages", stages_json(pre[i].stage));
            if (world > 1)
                json_object_set_new(d, "comm", comm_json(&pre[i].comm, 1, pre[i].secs, n_layers));
            json_object_set_new(pdet, k, d);
        }
        json_object_set_new(o, "prefill_tokens_per_s", ptps);
        json_object_set_new(o, "prefill", pdet);
        json_t *dtps = json_object(), *ddet = json_object();
        for (int i = 0; i < n_batches; i++) {
            char k[16];
            snprintf(k, sizeof(k), "%d", dec[i].batch);
            const struct hy_bench_bytes *b = &dec[i].bytes;
            json_object_set_new(dtps, k, json_real(dec[i].tokens_per_s));
            json_t *d =
                json_pack("{s:f, s:f, s:i, s:f, s:f, s:f, s:f}", "step_s", dec[i].step_s, "tokens_per_s",
                          dec[i].tokens_per_s, "steps", dec[i].steps, "weight_bytes_per_step", b->weights,
                          "kv_bytes_per_step", b->kv_read, "roofline_step_s", b->weights / (dec[i].bw_gbs * 1e9),
                          "achieved_weight_gbs", b->weights / dec[i].step_s / 1e9);
            json_object_set_new(d, "context_tokens", json_integer(ctx0));
            json_object_set_new(d, "context_fill", json_string(synthetic ? "synthetic" : "prefill"));
            json_object_set_new(d, "mem_bw_gbs", json_real(dec[i].bw_gbs));
            json_object_set_new(d, "mem_bw_gbs_before", json_real(dec[i].bw_before_gbs));
            json_object_set_new(d, "mem_bw_gbs_after", json_real(dec[i].bw_after_gbs));
            json_object_set_new(d, "bytes_by_part",
                                json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "embed", b->embed, "attn",
                                          b->attn, "dense_mlp", b->dense_mlp, "router", b->router, "routed_experts",
                                          b->routed, "shared_expert", b->shared, "norms", b->norms, "lm_head",
                                          b->lm_head));
            json_object_set_new(d, "distinct_experts_per_step", json_real((double)b->distinct_experts / dec[i].steps));
            json_object_set_new(d, "stages", stages_json(dec[i].stage));
            if (world > 1)
                json_object_set_new(d, "comm", comm_json(&dec[i].comm, dec[i].steps, dec[i].step_s, n_layers));
            json_object_set_new(ddet, k, d);
        }
        json_object_set_new(o, "decode_tokens_per_s", dtps);
        json_object_set_new(o, "decode", ddet);
        json_object_set_new(o, "decode_roofline_fraction", json_real(dec_frac));
        json_object_set_new(o, "prefill_peak_fraction", json_real(pre_frac));
        if (w8a8)
            json_object_set_new(o, "prefill_int8_peak_fraction", json_real(pre_i8_frac));
        json_object_set_new(o, "prefill_peak_fraction_len", json_integer(p512 ? p512->len : 0));
        if (dmax) {
            json_object_set_new(
                o, "batch_scaling",
                json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f}", "batch", dmax->batch, "step_s", dmax->step_s,
                          "weight_bytes_per_step", dmax->bytes.weights, "roofline_step_s", big_roof_s,
                          "step_over_roofline", ratio(dmax->step_s, big_roof_s), "tokens_per_s_over_batch1",
                          d1 ? ratio(dmax->tokens_per_s, d1->tokens_per_s) : 0.0, "distinct_experts_per_step",
                          (double)dmax->bytes.distinct_experts / dmax->steps));
        }
        if (proj_layers > 0) { /* absent for a model of other shapes without --project-layers */
            json_object_set_new(o, "projected_full_model_ms_per_token", json_real(proj_ms));
            json_object_set_new(o, "projection",
                                json_pack("{s:i, s:i, s:f, s:f, s:s}", "layers", proj_layers, "dense_layers",
                                          proj_dense, "moe_layer_s", moe_layer_s, "dense_layer_s", dense_layer_s,
                                          "formula", proj_formula));
        }
        if (m && spec.num_speculative_tokens > 0 && json) { /* the table run prints it after the table */
            json_t *sj = NULL;
            if (hy_bench_spec_run(m, kv_dtype, &spec, batches, n_batches, ctx0, steps, (uint64_t)seed, proj_layers,
                                  proj_dense, 0, &sj)) {
                json_decref(o);
                goto fail;
            }
            json_object_set_new(o, "speculative", sj);
        }
        char *txt = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
        json_decref(o);
        if (!txt) {
            hy_err_set("bench: cannot format the JSON output");
            goto fail;
        }
        if (json)
            printf("%s\n", txt);
        if (jf) {
            int bad = fprintf(jf, "%s\n", txt) < 0;
            if (fclose(jf))
                bad = 1;
            jf = NULL;
            if (bad) {
                free(txt);
                hy_err_set("--json-out %s: cannot write the file", json_out);
                goto fail;
            }
        }
        free(txt);
    }
    if (!json) {
        char b1[32];
        printf("hyinfer bench latency  (%s, %d threads)\n", cu.brand[0] ? cu.brand : "unknown CPU", nthreads);
        printf("units present: avx2_fma=%d avx512f=%d avx512_bf16=%d amx_bf16=%d; kernels: %s (HYINFER_ISA)\n",
               cu.avx2_fma, cu.avx512f, cu.avx512_bf16, cu.amx_bf16, kernel_isa);
        printf("\nmachine\n");
        printf("  read bandwidth     %8.2f GB/s   (%s buffer, best of %d passes: %.4f s)\n", bw_gbs,
               hy_cli_fmt_bytes((double)bw_bytes, b1, sizeof(b1)), bw_reps, bw_s_best);
        for (int i = 0; i < N_UNITS; i++)
            if (unit_gf[i] > 0.0)
                printf("  peak %-12s  %8.1f %s (%.3g %s in %.4f s)%s\n", units[i], unit_gf[i],
                       i < N_FLOAT_UNITS ? "GFLOP/s" : "GOP/s  ", unit_flops[i], i < N_FLOAT_UNITS ? "FLOP" : "int8 op",
                       unit_secs[i],
                       !strcmp(units[i], peak_unit) ? "  <- peak used"
                       : !strcmp(units[i], i8_unit) ? (w8a8 ? "  <- int8 peak (W8A8 model)" : "  <- int8 peak")
                                                    : "");
        if (m)
            printf("\nmodel %s  (%s, %d layers: %d dense + %d MoE, %d experts top-%d)\n", model_dir,
                   cd == HY_COMPUTE_BF16 ? "bfloat16" : "float32", m->cfg.num_hidden_layers, n_dense, n_moe,
                   m->cfg.num_experts, m->cfg.num_experts_per_tok);
        if (n_plens) {
            printf("\nprefill (one sequence, fresh KV cache, logits of the last row)\n");
            printf("  %7s %10s %12s %14s %10s %9s\n", "tokens", "seconds", "tokens/s", "FLOP", "GFLOP/s", "of peak");
            for (int i = 0; i < n_plens; i++)
                printf("  %7d %10.3f %12.2f %14.4g %10.2f %9.4f\n", pre[i].len, pre[i].secs, pre[i].len / pre[i].secs,
                       pre[i].flops.total, pre[i].flops.total / pre[i].secs / 1e9,
                       ratio(pre[i].flops.total / pre[i].secs, peak * 1e9));
        }
        if (n_batches) {
            printf("\ndecode (%d timed steps after a %d-token %s per sequence)\n", steps, ctx0,
                   synthetic ? "synthetic context" : "prefill");
            printf("  %5s %10s %11s %14s %12s %9s %10s %16s %9s\n", "batch", "step s", "tokens/s", "weight B/step",
                   "KV B/step", "experts", "GB/s", "bw before/after", "of bw");
            for (int i = 0; i < n_batches; i++)
                printf("  %5d %10.4f %11.3f %14.4g %12.4g %9.1f %10.3f %7.2f/%-8.2f %9.4f\n", dec[i].batch,
                       dec[i].step_s, dec[i].tokens_per_s, dec[i].bytes.weights, dec[i].bytes.kv_read,
                       (double)dec[i].bytes.distinct_experts / dec[i].steps, dec[i].bytes.weights / dec[i].step_s / 1e9,
                       dec[i].bw_before_gbs, dec[i].bw_after_gbs,
                       ratio(dec[i].bytes.weights / dec[i].step_s, dec[i].bw_gbs * 1e9));
        }
        if (n_plens || n_batches) {
            printf("\nstage breakdown (seconds per call; decode: per step)\n");
            char lab[48];
            for (int i = 0; i < n_batches; i++) {
                snprintf(lab, sizeof(lab), "decode batch %d", dec[i].batch);
                print_stages(lab, dec[i].stage);
            }
            for (int i = 0; i < n_plens; i++) {
                snprintf(lab, sizeof(lab), "prefill %d", pre[i].len);
                print_stages(lab, pre[i].stage);
            }
            if (world > 1) {
                printf("\ncollectives of rank 0 (world %d: attn_tp %d, dense_tp %d, moe_tp %d = EP %d, embed_tp %d, "
                       "lmhead_tp %d; combine %s, dispatch %s; per layer = per step / %d layers)\n",
                       world, pl.attn_tp_size, pl.dense_tp_size, pl.moe_tp_size, world / pl.moe_tp_size,
                       pl.embed_tp_size, pl.lmhead_tp_size, pl.combine_sum ? "sum" : "exact",
                       hy_moe_dispatch_name(dispatch), n_layers);
                printf("  %-16s %-10s %10s %12s %10s %9s %12s %10s\n", "phase", "kind", "calls/step", "bytes/step",
                       "ms/step", "calls/lyr", "bytes/lyr", "us/lyr");
                for (int i = 0; i < n_plens; i++) {
                    snprintf(lab, sizeof(lab), "prefill %d", pre[i].len);
                    print_comm(lab, &pre[i].comm, 1, pre[i].secs, n_layers);
                }
                for (int i = 0; i < n_batches; i++) {
                    snprintf(lab, sizeof(lab), "decode batch %d", dec[i].batch);
                    print_comm(lab, &dec[i].comm, dec[i].steps, dec[i].step_s, n_layers);
                }
            }
            printf("\nratios\n");
            if (d1)
                printf("  decode_roofline_fraction     %.4f  = (%.4g B / %.4f s) / %.4g B/s (the larger of the probes "
                       "just before and after the batch-1 run)\n",
                       dec_frac, d1->bytes.weights, d1->step_s, d1->bw_gbs * 1e9);
            if (p512)
                printf("  prefill_peak_fraction        %.4f  = (%.4g FLOP / %.3f s) / %.4g FLOP/s (%s, %d tokens)\n",
                       pre_frac, p512->flops.total, p512->secs, peak * 1e9, peak_unit, p512->len);
            if (p512 && w8a8)
                printf("  prefill_int8_peak_fraction   %.4f  = (%.4g FLOP / %.3f s) / %.4g int8 op/s (%s; the W8A8 "
                       "linears' multiply-adds run as int8 dots)\n",
                       pre_i8_frac, p512->flops.total, p512->secs, i8_peak * 1e9, i8_unit);
            if (dmax)
                printf("  batch %d step / roofline     %.3f  = %.4f s / (%.4g B / %.4g B/s = %.4f s); "
                       "tokens/s vs batch 1: %.2fx; distinct experts/step %.1f\n",
                       dmax->batch, ratio(dmax->step_s, big_roof_s), dmax->step_s, dmax->bytes.weights,
                       dmax->bw_gbs * 1e9, big_roof_s, d1 ? ratio(dmax->tokens_per_s, d1->tokens_per_s) : 0.0,
                       (double)dmax->bytes.distinct_experts / dmax->steps);
            if (d1 && proj_layers > 0)
                printf("  projected_full_model_ms/tok  %.1f ms  (%d layers of these shapes; moe_layer %.4f s, "
                       "dense_layer %.4f s)\n    = %s\n",
                       proj_ms, proj_layers, moe_layer_s, dense_layer_s, proj_formula);
            else if (d1)
                printf("  projected_full_model_ms/tok  not projected: hidden_size %d is neither Hy3's (4096) nor "
                       "Hy4-preview's (6144); --project-layers N projects to N layers of these shapes\n",
                       m->cfg.hidden_size);
            json_t *sj = NULL;
            if (m && spec.num_speculative_tokens > 0) {
                fflush(stdout);
                if (hy_bench_spec_run(m, kv_dtype, &spec, batches, n_batches, ctx0, steps, (uint64_t)seed, proj_layers,
                                      proj_dense, 1, &sj))
                    goto fail;
                json_decref(sj);
            }
        }
    }
    rc = 0;
    goto out;
fail:
    hy_progress_clear(&phases);
    fprintf(stderr, "hyinfer bench: %s\n", hy_err_msg());
out:
    if (jf)
        fclose(jf);
    if (m) {
        hy_model_prof_enable(m, 0);
        hy_cli_free_model(m);
    }
    return rc;
}
