/* launch.c - the model commands starting their own mpirun job (launch.h): the layout read from the
 * command line (or the run YAML), the mpirun command line for this host, or the node's part of a
 * multi-node job (join.c). */
#include "cli/launch.h"
#include "cli/join.h"

#include "base/env.h"
#include "base/log.h"
#include "comm/comm.h"
#include "config/run_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_RPC_PORT 29550   /* vLLM's --data-parallel-rpc-port default */
#define DEFAULT_JOIN_TIMEOUT 300 /* seconds */
#define MAX_IPS 64

/* The value of flag `name` (or its short form) in argv[2..]: "--x V" or "--x=V" (the last one
 * given); NULL when absent. */
static const char *flag_value(int argc, char **argv, const char *name, const char *shrt)
{
    const char *v = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        for (int k = 0; k < 2; k++) {
            const char *f = k ? shrt : name;
            const size_t fl = f ? strlen(f) : 0;
            if (!f || strncmp(a, f, fl))
                continue;
            if (a[fl] == '=')
                v = a + fl + 1;
            else if (!a[fl] && i + 1 < argc)
                v = argv[i + 1];
        }
    }
    return v;
}

static int flag_given(int argc, char **argv, const char *name)
{
    const size_t l = strlen(name);
    for (int i = 2; i < argc; i++)
        if (!strncmp(argv[i], name, l) && (!argv[i][l] || argv[i][l] == '='))
            return 1;
    return 0;
}

/* A non-negative int up to 65535, or dflt when v is NULL; -1 when v is not one (the command's own
 * parser reports it). */
static int int_value(const char *v, int dflt)
{
    if (!v)
        return dflt;
    char *end;
    errno = 0;
    const long n = strtol(v, &end, 10);
    return (*v && !*end && !errno && n >= 0 && n <= 65535) ? (int)n : -1;
}

/* The CPUs this process may run on (its affinity mask: a container's or taskset's limit). */
static int usable_cpus(void)
{
    cpu_set_t set;
    if (!sched_getaffinity(0, sizeof(set), &set)) {
        const int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* 1 when `prog` is an executable file on PATH. */
static int on_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    char buf[PATH_MAX];
    while (*path) {
        const char *c = strchr(path, ':');
        const size_t len = c ? (size_t)(c - path) : strlen(path);
        snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, len ? path : ".", prog);
        if (!access(buf, X_OK))
            return 1;
        path += len + (c ? 1 : 0);
    }
    return 0;
}

/* This host's environment for its ranks: HYINFER_NUM_THREADS = CPUs / ranks here (at least 1; not
 * when the user set it or gave -t), OMP_WAIT_POLICY=PASSIVE (unless set) and, as root, Open MPI's
 * run-as-root consent. */
static void set_rank_env(int argc, char **argv, int ranks_here)
{
    char v[16];
    const int per = usable_cpus() / (ranks_here > 0 ? ranks_here : 1);
    snprintf(v, sizeof(v), "%d", per > 0 ? per : 1);
    if (!hy_env_params()->num_threads && !flag_value(argc, argv, "--threads", "-t"))
        setenv("HYINFER_NUM_THREADS", v, 1);
    if (!getenv("OMP_WAIT_POLICY")) /* oversubscribed ranks must not spin on each other's cores */
        setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    if (getuid() == 0) {
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
}

static int no_mpi(const char *why)
{
    fprintf(stderr,
            "hyinfer: %s needs Open MPI, but %s. In the repository, `make mpi` installs it (libopenmpi-dev, "
            "openmpi-bin) and rebuilds\n",
            why, hy_dist_built_with_mpi() ? "mpirun is not on PATH" : "this hyinfer was built without it");
    return 2;
}

/* mpirun's argv under construction (NULL-terminated), with room for the formatted values. */
struct margv {
    char *v[384];
    int n;
    char bufs[8][PATH_MAX + 32];
    int nb;
};

static void push(struct margv *m, const char *s)
{
    if (m->n < (int)(sizeof(m->v) / sizeof(m->v[0])) - 1)
        m->v[m->n++] = (char *)s;
    m->v[m->n] = NULL;
}

static const char *keep(struct margv *m, const char *a, const char *b)
{
    char *s = m->bufs[m->nb < 7 ? m->nb++ : 7];
    snprintf(s, sizeof(m->bufs[0]), "%s%s", a, b);
    return s;
}

/* --mca PARAM VALUE, unless the user set OMPI_MCA_PARAM (theirs wins). */
static void push_mca(struct margv *m, const char *param, const char *value)
{
    char env[128];
    snprintf(env, sizeof(env), "OMPI_MCA_%s", param);
    if (getenv(env))
        return;
    push(m, "--mca");
    push(m, param);
    push(m, value);
}

static void print_line(const char *what, char **v)
{
    fprintf(stderr, "hyinfer: %s:", what);
    for (int i = 0; v[i]; i++)
        fprintf(stderr, strpbrk(v[i], " \t\"'$;&|") ? " '%s'" : " %s", v[i]);
    fprintf(stderr, "\n");
    fflush(stderr);
}

/* The world size this command line asks for (1 = nothing to launch), with *tp_out the TP size; -1
 * when a layout flag's value is bad (the command reports it). */
static int wanted_world(int argc, char **argv, int *tp_out)
{
    const char *tv = flag_value(argc, argv, "--tensor-parallel-size", "-tp");
    const char *dv = flag_value(argc, argv, "--data-parallel-size", "-dp");
    const int tp = int_value(tv, 1), dp = int_value(dv, 1);
    if (tp < 1 || dp < 1)
        return -1;
    *tp_out = tp;
    if (tv || dv)
        return tp * dp;
    const char *yaml = !strcmp(argv[1], "run") ? flag_value(argc, argv, "--yaml", NULL) : NULL;
    if (!yaml)
        return 1;
    struct hy_run_config cfg;
    const enum hy_log_level lvl = hy_log_get_level();
    hy_log_set_level(HY_LOG_ERROR); /* its warnings are `run`'s to print, once */
    const int bad = hy_run_config_load(yaml, &cfg);
    hy_log_set_level(lvl);
    if (bad) { /* `run` says what is wrong */
        hy_run_config_free(&cfg);
        return -1;
    }
    const int w = cfg.world_size;
    *tp_out = cfg.attn_tp_size > 0 ? cfg.attn_tp_size : 1;
    hy_run_config_free(&cfg);
    return w;
}

static int is_model_command(int argc, char **argv)
{
    const char *c = argv[1];
    return !strcmp(c, "serve") || !strcmp(c, "run") || !strcmp(c, "generate") || !strcmp(c, "logits") ||
           (!strcmp(c, "bench") && argc > 2 && !strcmp(argv[2], "latency"));
}

/* The leader's address as dotted IPv4 (a host name is resolved) into out[INET_ADDRSTRLEN]. Returns
 * 0, or -1 with a message on stderr. */
static int leader_ipv4(const char *flag, const char *name, char *out)
{
    struct in_addr a;
    if (inet_pton(AF_INET, name, &a) == 1) {
        snprintf(out, INET_ADDRSTRLEN, "%s", name);
        return 0;
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    const int e = getaddrinfo(name, NULL, &hints, &res);
    if (e || !res) {
        fprintf(stderr, "hyinfer: %s %s: not an IPv4 address, and the name does not resolve (%s)\n", flag, name,
                gai_strerror(e));
        return -1;
    }
    inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out, INET_ADDRSTRLEN);
    freeaddrinfo(res);
    return 0;
}

/* Splits a host list ("A,B" or "A B") into ips[] (pointers into buf). Returns the count. */
static int split_ips(const char *list, char *buf, size_t cap, char **ips)
{
    snprintf(buf, cap, "%s", list);
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r(buf, ", \t", &save); s && n < MAX_IPS; s = strtok_r(NULL, ", \t", &save))
        ips[n++] = s;
    return n;
}

int hy_cli_launch(int argc, char **argv)
{
    if (argc < 3 || !is_model_command(argc, argv) || hy_dist_launcher_var())
        return -1;
    int tp = 1;
    const int world = wanted_world(argc, argv, &tp);
    if (world <= 1)
        return -1;
    if (getenv("HYINFER_LAUNCHED")) { /* a re-executed hyinfer that mpirun did not mark: never loop */
        fprintf(stderr, "hyinfer: started by hyinfer's own mpirun, but no Open MPI variable "
                        "(OMPI_COMM_WORLD_SIZE) is set; is `mpirun` Open MPI's?\n");
        return 2;
    }
    const int dp = int_value(flag_value(argc, argv, "--data-parallel-size", "-dp"), 1);
    const int dp_local = int_value(flag_value(argc, argv, "--data-parallel-size-local", NULL), 0);
    const int dp_start = int_value(flag_value(argc, argv, "--data-parallel-start-rank", NULL), 0);
    const int rpc = int_value(flag_value(argc, argv, "--data-parallel-rpc-port", NULL), DEFAULT_RPC_PORT);
    const int tmo = int_value(flag_value(argc, argv, "--dist-join-timeout", NULL), DEFAULT_JOIN_TIMEOUT);
    const int node_rank = int_value(flag_value(argc, argv, "--node-rank", NULL), -2);
    const char *addr = flag_value(argc, argv, "--data-parallel-address", NULL);
    const char *ips_flag = flag_value(argc, argv, "--ips", NULL);
    const int headless = flag_given(argc, argv, "--headless");
    if (dp < 1 || dp_local < 0 || dp_start < 0 || rpc < 1 || tmo < 1 || node_rank == -1)
        return -1; /* a bad value: the command's parser names it */

    struct hy_join_plan plan = {.port = rpc, .timeout = tmo, .world = world, .ranks = world};
    char ipbuf[4096], *ips[MAX_IPS];
    const int nips = ips_flag ? split_ips(ips_flag, ipbuf, sizeof(ipbuf), ips) : 0;
    int multi = 0;
    if (nips > 1) { /* the cann-recipes form: the same command on every node */
        if (world % nips) {
            fprintf(stderr, "hyinfer: --ips lists %d hosts, but the job's %d ranks do not divide among them\n", nips,
                    world);
            return 2;
        }
        int idx = node_rank;
        for (int i = 0; i < nips && idx < 0; i++)
            if (hy_cli_join_local_addr(ips[i], NULL))
                idx = i;
        if (idx < 0 || idx >= nips) {
            fprintf(stderr, "hyinfer: --ips %s: %s (give --node-rank N: 0 = the first address, the leader)\n", ips_flag,
                    idx < 0 ? "none of these addresses is on this host" : "--node-rank is not an index of the list");
            return 2;
        }
        plan.address = ips[0];
        plan.ranks = world / nips;
        plan.start = idx * plan.ranks;
        plan.what = "--ips";
        plan.start_unit = plan.ranks;
        plan.ips = ips;
        plan.nips = nips;
        multi = 1;
    } else if (dp_local && dp_local < dp) { /* vLLM's form: one command per node */
        static char leader[INET_ADDRSTRLEN];
        if (!addr) {
            fprintf(stderr,
                    "hyinfer: --data-parallel-size-local %d below --data-parallel-size %d is one node of several: "
                    "it needs --data-parallel-address (the leader's address)\n",
                    dp_local, dp);
            return 2;
        }
        if (leader_ipv4("--data-parallel-address", addr, leader))
            return 2;
        addr = leader;
        if (dp_start + dp_local > dp) {
            fprintf(stderr,
                    "hyinfer: --data-parallel-start-rank %d + --data-parallel-size-local %d exceed "
                    "--data-parallel-size %d\n",
                    dp_start, dp_local, dp);
            return 2;
        }
        if (headless != (dp_start > 0)) {
            fprintf(stderr, "hyinfer: %s\n",
                    headless ? "--headless needs --data-parallel-start-rank >= 1 (DP rank 0 is the node that serves)"
                             : "a node with --data-parallel-start-rank >= 1 runs no API server: add --headless");
            return 2;
        }
        plan.address = addr;
        plan.ranks = tp * dp_local;
        plan.start = tp * dp_start;
        plan.what = "--data-parallel-start-rank";
        plan.start_unit = tp;
        multi = 1;
    }
    if (!hy_dist_built_with_mpi() || !on_path("mpirun"))
        return no_mpi(multi ? "a job over several hosts" : "more than one rank");

    char self[PATH_MAX];
    const ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (sl <= 0) {
        fprintf(stderr, "hyinfer: cannot find its own executable (/proc/self/exe): %s\n", strerror(errno));
        return 2;
    }
    self[sl] = 0;
    set_rank_env(argc, argv, plan.ranks);
    setenv("HYINFER_LAUNCHED", "1", 1);
    char layout[64];
    snprintf(layout, sizeof(layout), "tp=%d world=%d", tp, world);
    plan.layout = layout;
    if (multi && plan.start > 0)
        return hy_cli_join_follow(&plan);

    static struct margv m;
    char np[16];
    snprintf(np, sizeof(np), "%d", world);
    const int cpus = usable_cpus();
    push(&m, "mpirun");
    push(&m, "-np");
    push(&m, np);
    push(&m, "--oversubscribe");
    push(&m, "--stdin"); /* no command reads stdin; mpirun runs in its own process group */
    push(&m, "none");
    if (getuid() == 0)
        push(&m, "--allow-run-as-root");
    push(&m, "--bind-to"); /* one core per rank only when that is exactly what this host has per rank */
    push(&m, plan.ranks <= cpus && cpus / plan.ranks == 1 ? "core" : "none");
    int hosts_at = -1;
    if (multi) {
        char cidr[48];
        push(&m, "--host");
        hosts_at = m.n;
        push(&m, "(hosts)");
        push_mca(&m, "plm_rsh_agent", keep(&m, self, " __launch-agent"));
        push_mca(&m, "plm_rsh_no_tree_spawn", "1");
        push_mca(&m, "pml", "ob1");
        push_mca(&m, "btl", "self,vader,tcp");
        if (hy_cli_join_local_addr(plan.address, cidr)) { /* the network the nodes were told to meet on */
            push_mca(&m, "oob_tcp_if_include", keep(&m, cidr, ""));
            push_mca(&m, "btl_tcp_if_include", keep(&m, cidr, ""));
        }
        push(&m, "-x");
        push(&m, "HYINFER_LAUNCHED");
    } else {
        push_mca(&m, "pml", "ob1");
        push_mca(&m, "btl", "self,vader");
    }
    push(&m, self);
    for (int i = 1; i < argc; i++)
        push(&m, argv[i]);
    if (multi)
        return hy_cli_join_lead(&plan, m.v, hosts_at);
    const char *nt = getenv("HYINFER_NUM_THREADS");
    char what[160];
    snprintf(what, sizeof(what), "starting %d ranks on this host (%d CPUs; threads per rank: %s)", world, cpus,
             flag_value(argc, argv, "--threads", "-t") ? "-t"
             : nt                                      ? nt
                                                       : "OpenMP's default");
    print_line(what, m.v);
    return hy_cli_join_run(m.v);
}

int hy_cli_launch_agent(int argc, char **argv)
{
    return hy_cli_join_agent(argc, argv);
}
