/* cmd_bench_comm.c - `mpirun -np N hyinfer bench comm`: latency and bandwidth of the job's transport
 * through the engine's own communicator (comm/comm.h), and the α (µs) / β (GB/s) of
 * t = α + bytes / β fitted per collective.
 *
 * Four operations, each over the message sizes --min-bytes × 4^k up to --max-bytes (default 8 B ... 16 MiB):
 *  - pingpong:  ranks 0 and 1 (a two-rank communicator split off the world) send `bytes` one way and
 *               back (a broadcast from 0, then one from 1: with two ranks each is one message); the time
 *               is half the round trip. The other ranks only join the barriers.
 *  - allgather: hy_comm_allgatherv over the world; `bytes` = the gathered result every rank holds,
 *               each rank contributing a near-equal contiguous part.
 *  - alltoall:  hy_comm_alltoallv; `bytes` = what each rank sends in all (a near-equal part to every
 *               rank, itself included), and about as much is received.
 *  - allreduce: the engine's fixed-order float sum (model/exchange.c hy_exchange_sum_rows, rebuilt here
 *               from hy_comm_* calls): an alltoallv hands each rank its slice of every rank's vector,
 *               the slices are added in rank order, an allgatherv puts the sum together; `bytes` = the
 *               vector length (fp32).
 * One measurement: --warmup untimed calls, then --reps repetitions, each a world barrier followed by
 * `inner` back-to-back calls timed on every rank (inner = 1 MiB / bytes clamped to [1, --max-inner],
 * the same on every rank); a repetition's time is the slowest rank's (one integer max-reduction after
 * the loop) divided by inner, and the figure is the median over the repetitions. The fit is least
 * squares on the relative error (weights 1 / t²) so the small sizes weigh as much as the large ones;
 * an α that comes out negative is clamped to 0 and β refitted.
 *
 * Rank 0 prints the table (or, with --json, one JSON object; --json-out writes it to a file too); one
 * rank is refused (there is nothing to measure). Exit status 0, or 2 for bad flags or one rank; a
 * failure once the ranks have started measuring (out of memory, an unwritable --json-out) ends the
 * whole job through hy_dist_abort, since the other ranks would wait in the next collective.
 */
#include "cli/args.h"
#include "cli/commands.h"

#include "base/err.h"
#include "base/timing.h"
#include "bench/comm_fit.h"
#include "comm/comm.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZES 32

static int parse_size(const char *flag, const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ull << 10;
    else if (*end == 'M' || *end == 'm')
        mul = 1ull << 20;
    else if (*end == 'G' || *end == 'g')
        mul = 1ull << 30;
    if (mul != 1)
        end++;
    if (end == s || *end || errno || s[0] == '-' || v == 0 || v > (1ull << 30) / mul)
        return hy_err_set("%s: \"%s\" is not a size from 1 to 1G like 8, 64K or 16M", flag, s);
    *out = (size_t)(v * mul);
    return 0;
}

static const char *env_or_null(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static json_t *json_str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

int hy_cmd_bench_comm(int argc, char **argv)
{
    const char *min_s = "8", *max_s = "16M", *json_out = NULL;
    int reps = 20, warmup = 3, max_inner = 16, json = 0, help = 0;
    const struct hy_arg args[] = {
        {"--min-bytes", NULL, HY_ARG_STR, &min_s, NULL, "smallest message (default 8)"},
        {"--max-bytes", NULL, HY_ARG_STR, &max_s, NULL, "largest message (default 16M); sizes go x4 from the smallest"},
        {"--reps", "-r", HY_ARG_INT, &reps, NULL, "timed repetitions per size, median taken (default 20)"},
        {"--warmup", NULL, HY_ARG_INT, &warmup, NULL, "untimed calls before each size (default 3)"},
        {"--max-inner", NULL, HY_ARG_INT, &max_inner, NULL,
         "most back-to-back calls in one repetition (default 16; 1 MiB / size, at least 1)"},
        {"--json", NULL, HY_ARG_FLAG, &json, NULL, "print one JSON object instead of the table"},
        {"--json-out", NULL, HY_ARG_STR, &json_out, NULL, "also write the JSON object to this file"},
        {"--help", "-h", HY_ARG_FLAG, &help, NULL, "this help"},
    };
    const int na = (int)(sizeof(args) / sizeof(args[0]));
    const char *usage =
        "mpirun -np N hyinfer bench comm [--min-bytes 8] [--max-bytes 16M] [--reps 20] [--warmup 3] [--json]\n"
        "ping-pong between ranks 0 and 1, allgather, alltoall and the engine's fixed-order all-reduce over the\n"
        "job's ranks (N >= 2), and alpha (us) / beta (GB/s) of t = alpha + bytes / beta fitted per operation";
    struct hy_comm *world = hy_dist_world();
    const int rank = hy_comm_rank(world), size = hy_comm_size(world);
    int np; /* argv[2] is "comm" */
    if (hy_args_parse(argc, argv, 3, args, na, NULL, 0, &np)) {
        if (rank == 0)
            fprintf(stderr, "hyinfer bench comm: %s\n", hy_err_msg());
        return 2;
    }
    if (help) {
        if (rank == 0)
            hy_args_help(usage, args, na);
        return 0;
    }
    size_t min_b = 0, max_b = 0;
    if (parse_size("--min-bytes", min_s, &min_b) || parse_size("--max-bytes", max_s, &max_b)) {
        if (rank == 0)
            fprintf(stderr, "hyinfer bench comm: %s\n", hy_err_msg());
        return 2;
    }
    if (reps < 1 || reps > HY_BENCH_COMM_MAX_REPS || warmup < 0 || max_inner < 1 || min_b > max_b) {
        if (rank == 0) {
            fprintf(stderr,
                    "hyinfer bench comm: need 1 <= --reps <= %d, --warmup >= 0, --max-inner >= 1 and "
                    "--min-bytes <= --max-bytes\n",
                    HY_BENCH_COMM_MAX_REPS);
            hy_args_usage(usage, args, na);
        }
        return 2;
    }
    if (size < 2) {
        fprintf(stderr,
                "hyinfer bench comm: needs at least 2 ranks and this process is alone (%s); run it under "
                "mpirun, e.g. mpirun -np 2 %s bench comm\n",
                hy_dist_mpi() ? "mpirun -np 1" : "not started by mpirun", argv[0]);
        return 2;
    }
    if (size > HY_BENCH_COMM_MAX_RANKS) {
        if (rank == 0)
            fprintf(stderr, "hyinfer bench comm: at most %d ranks\n", HY_BENCH_COMM_MAX_RANKS);
        return 2;
    }
    size_t sizes[MAX_SIZES];
    int ns = 0;
    for (size_t s = min_b; s <= max_b && ns < MAX_SIZES - 1; s *= 4) {
        sizes[ns++] = s;
        if (s > max_b / 4)
            break;
    }
    if (sizes[ns - 1] != max_b)
        sizes[ns++] = max_b;

    FILE *jf = NULL; /* rank 0 only, opened now so a bad path fails before the run */
    if (rank == 0 && json_out && !(jf = fopen(json_out, "w"))) {
        hy_dist_abort(2, "hyinfer bench comm: --json-out %s: cannot create the file", json_out); /* ends all */
    }

    struct hy_bench_comm b;
    memset(&b, 0, sizeof(b));
    b.world = world;
    b.rank = rank;
    b.size = size;
    b.cap = max_b + 8 * (size_t)size + 64;
    int rc = 1;
    b.send = malloc(b.cap);
    b.recv = malloc(b.cap);
    b.mine = malloc(b.cap);
    b.c1 = calloc((size_t)size, sizeof(size_t));
    b.c2 = calloc((size_t)size, sizeof(size_t));
    b.c3 = calloc((size_t)size, sizeof(size_t));
    static double sec[HY_COMM_OP_COUNT][MAX_SIZES];
    struct hy_bench_comm_fit fits[HY_COMM_OP_COUNT];
    struct hy_comm *pair = NULL;
    int hosts = 0;
    if (!b.send || !b.recv || !b.mine || !b.c1 || !b.c2 || !b.c3) {
        hy_err_set("bench comm: out of memory for %zu-byte buffers", b.cap);
        hy_dist_abort(1, "hyinfer bench comm: %s", hy_err_msg()); /* the other ranks would wait forever */
    }
    for (size_t i = 0; i < b.cap / sizeof(float); i++) /* finite values for the sums */
        ((float *)b.send)[i] = (float)((i + (size_t)rank) % 251) * 0.01f;
    if (hy_comm_split(world, rank < 2 ? 0 : 1, rank, &pair))
        goto fail;
    b.pair = rank < 2 ? pair : NULL;
    if ((hosts = hy_bench_comm_hosts(&b)) < 0)
        goto fail;
    if (rank == 0)
        fprintf(stderr, "bench comm: %d ranks on %d host%s, %d sizes from %zu to %zu bytes, median of %d\n", size,
                hosts, hosts == 1 ? "" : "s", ns, sizes[0], sizes[ns - 1], reps);
    for (int op = 0; op < HY_COMM_OP_COUNT; op++) {
        double x[MAX_SIZES];
        for (int i = 0; i < ns; i++) {
            if (hy_bench_comm_measure(&b, (enum hy_bench_comm_op)op, sizes[i], warmup, reps, max_inner, &sec[op][i]))
                goto fail;
            x[i] = (double)sizes[i];
        }
        fits[op] = hy_bench_comm_fit_alpha_beta(x, sec[op], ns);
        if (rank == 0)
            fprintf(stderr, "bench comm: %-9s alpha %.2f us, beta %.3f GB/s\n", hy_bench_comm_op_names[op],
                    fits[op].alpha_us, fits[op].beta_gbs);
    }
    if (rank != 0) {
        rc = 0;
        goto out;
    }

    const char *btl = env_or_null("OMPI_MCA_btl"), *pml = env_or_null("OMPI_MCA_pml");
    {
        json_t *o = json_object(), *jsz = json_array(), *ops = json_object();
        json_object_set_new(o, "ranks", json_integer(size));
        json_object_set_new(o, "hosts", json_integer(hosts));
        json_object_set_new(o, "btl", json_str_or_null(btl));
        json_object_set_new(o, "pml", json_str_or_null(pml));
        json_object_set_new(o, "reps", json_integer(reps));
        json_object_set_new(o, "warmup", json_integer(warmup));
        json_object_set_new(o, "max_inner", json_integer(max_inner));
        for (int i = 0; i < ns; i++)
            json_array_append_new(jsz, json_integer((json_int_t)sizes[i]));
        json_object_set_new(o, "sizes", jsz);
        for (int op = 0; op < HY_COMM_OP_COUNT; op++) {
            json_t *d = json_object(), *us = json_array();
            for (int i = 0; i < ns; i++)
                json_array_append_new(us, json_real(sec[op][i] * 1e6));
            json_object_set_new(d, "bytes", json_string(hy_bench_comm_op_bytes[op]));
            json_object_set_new(d, "us", us);
            json_object_set_new(d, "alpha_us", json_real(fits[op].alpha_us));
            json_object_set_new(d, "beta_gbs", json_real(fits[op].beta_gbs));
            json_object_set_new(d, "fit_rms_rel_err", json_real(fits[op].rms_rel));
            json_object_set_new(ops, hy_bench_comm_op_names[op], d);
        }
        json_object_set_new(o, "ops", ops);
        /* the point-to-point figures, what tools/dist_projection.py reads */
        json_object_set_new(o, "alpha_us", json_real(fits[HY_COMM_OP_PINGPONG].alpha_us));
        json_object_set_new(o, "beta_gbs", json_real(fits[HY_COMM_OP_PINGPONG].beta_gbs));
        json_object_set_new(o, "fit",
                            json_string("t = alpha + bytes / beta, least squares on the relative error (weights "
                                        "1/t^2), alpha clamped >= 0; t = median over reps of the slowest rank"));
        char *txt = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
        json_decref(o);
        if (!txt) {
            hy_err_set("bench comm: cannot format the JSON output");
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
        printf("hyinfer bench comm  (%d ranks on %d host%s, btl %s, pml %s; median of %d repetitions after %d "
               "warm-up calls)\n\n",
               size, hosts, hosts == 1 ? "" : "s", btl ? btl : "(Open MPI's choice)", pml ? pml : "(default)", reps,
               warmup);
        printf("  %10s", "bytes");
        for (int op = 0; op < HY_COMM_OP_COUNT; op++)
            printf(" %12s", hy_bench_comm_op_names[op]);
        printf("   (microseconds per call)\n");
        for (int i = 0; i < ns; i++) {
            printf("  %10zu", sizes[i]);
            for (int op = 0; op < HY_COMM_OP_COUNT; op++)
                printf(" %12.2f", sec[op][i] * 1e6);
            printf("\n");
        }
        printf("\nfit t = alpha + bytes / beta (least squares on the relative error)\n");
        for (int op = 0; op < HY_COMM_OP_COUNT; op++)
            printf("  %-10s alpha %9.2f us   beta %9.3f GB/s   rms rel err %.3f   bytes = %s\n",
                   hy_bench_comm_op_names[op], fits[op].alpha_us, fits[op].beta_gbs, fits[op].rms_rel,
                   hy_bench_comm_op_bytes[op]);
    }
    rc = 0;
    goto out;
fail: /* the other ranks would wait in the next collective: end the job */
    hy_dist_abort(1, "hyinfer bench comm: %s", hy_err_msg());
out:
    if (jf)
        fclose(jf);
    hy_comm_free(pair);
    free(b.send);
    free(b.recv);
    free(b.mine);
    free(b.c1);
    free(b.c2);
    free(b.c3);
    return rc;
}
