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
#define MAX_REPS 1000
#define MAX_RANKS 4096
#define INNER_BYTES (1 << 20) /* a repetition runs about this many bytes of back-to-back calls */

enum op { OP_PINGPONG, OP_ALLGATHER, OP_ALLTOALL, OP_ALLREDUCE, OP_COUNT };

static const char *const OP_NAMES[OP_COUNT] = {"pingpong", "allgather", "alltoall", "allreduce"};
static const char *const OP_BYTES[OP_COUNT] = {
    "message size, one way (ranks 0 and 1)", "gathered result every rank holds",
    "bytes each rank sends (a part to every rank)", "fp32 vector length (alltoallv + rank-order sum + allgatherv)"};

/* The buffers and communicators of one run. */
struct bench {
    struct hy_comm *world, *pair; /* pair: ranks 0 and 1 (NULL elsewhere), owned */
    int rank, size;
    uint8_t *send, *recv; /* [cap] bytes each */
    float *mine;          /* allreduce: this rank's slice of the sum */
    size_t cap;
    size_t *c1, *c2, *c3; /* [size] byte counts */
};

/* [lo, lo + n) of part i of `total` bytes split into `parts` contiguous parts: base + one more for the
 * first (total mod parts) parts (the engine's hy_shard_part splits at floor(total * i / parts) instead). */
static void part(size_t total, int parts, int i, size_t *lo, size_t *n)
{
    const size_t base = total / (size_t)parts, rem = total % (size_t)parts, ii = (size_t)i;
    *lo = ii * base + (ii < rem ? ii : rem);
    *n = base + (ii < rem ? 1 : 0);
}

/* "8", "64K", "16M", "1G" (binary multiples, at most 1G: MPI counts are ints) into *out bytes; 0 or -1
 * with hy_err_msg(). */
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

/* One call of operation `op` on `bytes`. Returns 0 or -1 with hy_err_msg(). */
static int run_op(struct bench *b, enum op op, size_t bytes)
{
    const int n = b->size, me = b->rank;
    size_t lo, w, my_lo, my_w;
    switch (op) {
    case OP_PINGPONG:
        if (!b->pair)
            return 0;
        return hy_comm_bcast(b->pair, b->send, bytes, 0) || hy_comm_bcast(b->pair, b->send, bytes, 1) ? -1 : 0;
    case OP_ALLGATHER:
        for (int r = 0; r < n; r++) {
            part(bytes, n, r, &lo, &w);
            b->c1[r] = w;
        }
        return hy_comm_allgatherv(b->world, b->send, b->recv, b->c1);
    case OP_ALLTOALL:
        part(bytes, n, me, &my_lo, &my_w);
        for (int r = 0; r < n; r++) {
            part(bytes, n, r, &lo, &w);
            b->c1[r] = w;
            b->c2[r] = my_w;
        }
        return hy_comm_alltoallv(b->world, b->send, b->c1, b->recv, b->c2);
    case OP_ALLREDUCE: {
        const size_t nf = bytes / sizeof(float) > 0 ? bytes / sizeof(float) : 1;
        part(nf, n, me, &my_lo, &my_w);
        for (int r = 0; r < n; r++) {
            part(nf, n, r, &lo, &w);
            b->c1[r] = w * sizeof(float);
            b->c2[r] = my_w * sizeof(float);
            b->c3[r] = b->c1[r];
        }
        if (hy_comm_alltoallv(b->world, b->send, b->c1, b->recv, b->c2))
            return -1;
        const float *recv = (const float *)b->recv;
        memcpy(b->mine, recv, my_w * sizeof(float));
        for (int r = 1; r < n; r++)
            for (size_t i = 0; i < my_w; i++)
                b->mine[i] += recv[(size_t)r * my_w + i];
        return hy_comm_allgatherv(b->world, b->mine, b->recv, b->c3);
    }
    default:
        return hy_err_set("bench comm: unknown operation %d", (int)op);
    }
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Seconds per call of `op` on `bytes`: the median over reps of the slowest rank's repetition / inner
 * (pingpong: / 2, one way). Collective over the world. Returns 0 or -1 with hy_err_msg(). */
static int measure(struct bench *b, enum op op, size_t bytes, int warmup, int reps, int max_inner, double *sec)
{
    int64_t ns[MAX_REPS];
    size_t inner_z = INNER_BYTES / bytes;
    const int inner = inner_z < 1 ? 1 : inner_z > (size_t)max_inner ? max_inner : (int)inner_z;
    for (int i = 0; i < warmup; i++)
        if (run_op(b, op, bytes))
            return -1;
    for (int k = 0; k < reps; k++) {
        if (hy_comm_barrier(b->world))
            return -1;
        const double t0 = hy_time_now();
        for (int i = 0; i < inner; i++)
            if (run_op(b, op, bytes))
                return -1;
        ns[k] = (int64_t)((hy_time_now() - t0) * 1e9);
    }
    if (hy_comm_allreduce_max_i64(b->world, ns, reps))
        return -1;
    qsort(ns, (size_t)reps, sizeof(ns[0]), cmp_i64);
    const double med = reps % 2 ? (double)ns[reps / 2] : 0.5 * ((double)ns[reps / 2 - 1] + (double)ns[reps / 2]);
    *sec = med * 1e-9 / inner / (op == OP_PINGPONG ? 2.0 : 1.0);
    return 0;
}

struct fit {
    double alpha_us, beta_gbs; /* beta_gbs 0: no bandwidth term could be fitted */
    double rms_rel;            /* root mean square of (model - measured) / measured */
};

/* Weighted least squares of t[i] = α + x[i] / β with weights 1 / t[i]² over n points; α < 0 is
 * clamped to 0 (then β alone is fitted). t in seconds, x in bytes. */
static struct fit fit_alpha_beta(const double *x, const double *t, int n)
{
    double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
    for (int i = 0; i < n; i++) {
        if (!(t[i] > 0.0))
            continue;
        const double w = 1.0 / (t[i] * t[i]);
        sw += w;
        sx += w * x[i];
        sxx += w * x[i] * x[i];
        st += w * t[i];
        sxt += w * x[i] * t[i];
    }
    double a = 0.0, s = 0.0; /* t = a + s * x, s = 1 / β */
    const double det = sw * sxx - sx * sx;
    if (det > 0.0) {
        a = (sxx * st - sx * sxt) / det;
        s = (sw * sxt - sx * st) / det;
    }
    if (a < 0.0 || det <= 0.0) {
        a = 0.0;
        s = sxx > 0.0 ? sxt / sxx : 0.0;
    }
    if (s < 0.0) { /* time falls with size: latency only */
        s = 0.0;
        a = sw > 0.0 ? st / sw : 0.0;
    }
    struct fit f = {a * 1e6, s > 0.0 ? 1e-9 / s : 0.0, 0.0};
    int m = 0;
    for (int i = 0; i < n; i++)
        if (t[i] > 0.0) {
            const double e = (a + s * x[i] - t[i]) / t[i];
            f.rms_rel += e * e;
            m++;
        }
    f.rms_rel = m ? sqrt(f.rms_rel / m) : 0.0;
    return f;
}

/* Number of distinct host names over the world (one allgather of 64-byte names). -1 on failure. */
static int count_hosts(struct bench *b)
{
    enum { HN = 64 };
    char name[HN];
    memset(name, 0, sizeof(name));
    if (gethostname(name, sizeof(name) - 1))
        snprintf(name, sizeof(name), "unknown");
    char *all = calloc((size_t)b->size, HN);
    if (!all) {
        hy_err_set("bench comm: out of memory");
        return -1;
    }
    if (hy_comm_allgather(b->world, name, HN, all)) {
        free(all);
        return -1;
    }
    int hosts = 0;
    for (int r = 0; r < b->size; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = !memcmp(all + (size_t)q * HN, all + (size_t)r * HN, HN);
        hosts += !seen;
    }
    free(all);
    return hosts;
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
    if (reps < 1 || reps > MAX_REPS || warmup < 0 || max_inner < 1 || min_b > max_b) {
        if (rank == 0) {
            fprintf(stderr,
                    "hyinfer bench comm: need 1 <= --reps <= %d, --warmup >= 0, --max-inner >= 1 and "
                    "--min-bytes <= --max-bytes\n",
                    MAX_REPS);
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
    if (size > MAX_RANKS) {
        if (rank == 0)
            fprintf(stderr, "hyinfer bench comm: at most %d ranks\n", MAX_RANKS);
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

    struct bench b;
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
    static double sec[OP_COUNT][MAX_SIZES];
    struct fit fits[OP_COUNT];
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
    if ((hosts = count_hosts(&b)) < 0)
        goto fail;
    if (rank == 0)
        fprintf(stderr, "bench comm: %d ranks on %d host%s, %d sizes from %zu to %zu bytes, median of %d\n", size,
                hosts, hosts == 1 ? "" : "s", ns, sizes[0], sizes[ns - 1], reps);
    for (int op = 0; op < OP_COUNT; op++) {
        double x[MAX_SIZES];
        for (int i = 0; i < ns; i++) {
            if (measure(&b, (enum op)op, sizes[i], warmup, reps, max_inner, &sec[op][i]))
                goto fail;
            x[i] = (double)sizes[i];
        }
        fits[op] = fit_alpha_beta(x, sec[op], ns);
        if (rank == 0)
            fprintf(stderr, "bench comm: %-9s alpha %.2f us, beta %.3f GB/s\n", OP_NAMES[op], fits[op].alpha_us,
                    fits[op].beta_gbs);
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
        for (int op = 0; op < OP_COUNT; op++) {
            json_t *d = json_object(), *us = json_array();
            for (int i = 0; i < ns; i++)
                json_array_append_new(us, json_real(sec[op][i] * 1e6));
            json_object_set_new(d, "bytes", json_string(OP_BYTES[op]));
            json_object_set_new(d, "us", us);
            json_object_set_new(d, "alpha_us", json_real(fits[op].alpha_us));
            json_object_set_new(d, "beta_gbs", json_real(fits[op].beta_gbs));
            json_object_set_new(d, "fit_rms_rel_err", json_real(fits[op].rms_rel));
            json_object_set_new(ops, OP_NAMES[op], d);
        }
        json_object_set_new(o, "ops", ops);
        /* the point-to-point figures, what tools/dist_projection.py reads */
        json_object_set_new(o, "alpha_us", json_real(fits[OP_PINGPONG].alpha_us));
        json_object_set_new(o, "beta_gbs", json_real(fits[OP_PINGPONG].beta_gbs));
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
        for (int op = 0; op < OP_COUNT; op++)
            printf(" %12s", OP_NAMES[op]);
        printf("   (microseconds per call)\n");
        for (int i = 0; i < ns; i++) {
            printf("  %10zu", sizes[i]);
            for (int op = 0; op < OP_COUNT; op++)
                printf(" %12.2f", sec[op][i] * 1e6);
            printf("\n");
        }
        printf("\nfit t = alpha + bytes / beta (least squares on the relative error)\n");
        for (int op = 0; op < OP_COUNT; op++)
            printf("  %-10s alpha %9.2f us   beta %9.3f GB/s   rms rel err %.3f   bytes = %s\n", OP_NAMES[op],
                   fits[op].alpha_us, fits[op].beta_gbs, fits[op].rms_rel, OP_BYTES[op]);
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
