/* join.c - nodes joining into one mpirun job over the rpc port (join.h).
 *
 * Wire: text lines over TCP. Follower -> leader: "HYINFER-JOIN 1 START RANKS NAME LAYOUT..." once;
 * leader -> follower: "OK" when every node is there, or "REFUSE message"; then "EXEC command" (the
 * orted command line) and, at the end, "DONE status"; follower -> leader: "EXIT status" when the
 * daemon ended. The agent (a child of the leader's mpirun) reaches the leader over an abstract unix
 * socket named by HYINFER_JOIN_RELAY: "HOST\nCOMMAND\n", answered "EXIT status". */
#include "cli/join.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_NODES 64
#define LINE_CAP 16384

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int hy_cli_join_local_addr(const char *addr, char *cidr)
{
    struct in_addr want;
    struct ifaddrs *ifs = NULL;
    if (!addr || inet_pton(AF_INET, addr, &want) != 1 || getifaddrs(&ifs))
        return 0;
    int found = 0;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        const struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
        if (a.s_addr != want.s_addr)
            continue;
        found = 1;
        if (cidr && i->ifa_netmask) {
            const uint32_t mask = ntohl(((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr);
            const struct in_addr net = {htonl(ntohl(a.s_addr) & mask)};
            char nb[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &net, nb, sizeof(nb));
            snprintf(cidr, 48, "%s/%d", nb, __builtin_popcount(mask));
        } else if (cidr) {
            snprintf(cidr, 48, "%s/32", addr);
        }
    }
    freeifaddrs(ifs);
    return found;
}

/* ---- lines over a socket ---------------------------------------------------------------------- */

struct conn {
    int fd;
    char buf[LINE_CAP];
    int len;
};

static int send_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int send_line(int fd, const char *fmt, ...)
{
    char b[LINE_CAP];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof(b) - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof(b) - 1)
        return -1;
    b[n++] = '\n';
    for (int off = 0; off < n;) {
        const ssize_t w = send(fd, b + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (int)w;
    }
    return 0;
}

/* The next complete line of c into out (without '\n'), reading once from the socket first when
 * do_read (call it when poll says readable). Returns 1 with a line, 0 when none is complete yet, -1
 * on EOF / error / a line longer than LINE_CAP. */
static int take_line(struct conn *c, char *out, size_t cap, int do_read)
{
    char *nl = memchr(c->buf, '\n', (size_t)c->len);
    if (!nl && do_read) {
        if (c->len >= LINE_CAP - 1)
            return -1;
        const ssize_t r = recv(c->fd, c->buf + c->len, (size_t)(LINE_CAP - 1 - c->len), 0);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            return 0;
        if (r <= 0)
            return -1;
        c->len += (int)r;
        nl = memchr(c->buf, '\n', (size_t)c->len);
    }
    if (!nl)
        return 0;
    const size_t l = (size_t)(nl - c->buf);
    snprintf(out, cap, "%.*s", (int)l, c->buf);
    memmove(c->buf, nl + 1, (size_t)c->len - l - 1);
    c->len -= (int)l + 1;
    return 1;
}

/* Waits up to sec for one line on c. 1 = a line, 0 = timeout, -1 = EOF. */
static int wait_line(struct conn *c, char *out, size_t cap, double sec)
{
    const double end = now_s() + sec;
    int r = take_line(c, out, cap, 0);
    while (!r) {
        const double left = end - now_s();
        if (left <= 0)
            return 0;
        struct pollfd p = {c->fd, POLLIN, 0};
        const int n = poll(&p, 1, left > 1e6 ? 1000000000 : (int)(left * 1000) + 1);
        if (n < 0 && errno != EINTR)
            return -1;
        if (n > 0)
            r = take_line(c, out, cap, 1);
    }
    return r;
}

static int relay_addr(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    const size_t n = strlen(name);
    if (n + 1 >= sizeof(sa->sun_path))
        return -1;
    memcpy(sa->sun_path + 1, name, n); /* abstract: nothing on disk to clean up */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    return 0;
}

static volatile sig_atomic_t got_signal;
static void on_signal(int sig)
{
    got_signal = sig;
}

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---- mpirun as a child ------------------------------------------------------------------------- */

/* The pid of world rank 0 among mpirun's children (OMPI_COMM_WORLD_RANK=0 in its environment), or
 * 0 when it is not (yet) running on this host. */
static pid_t find_rank0(pid_t mpirun)
{
    DIR *d = opendir("/proc");
    pid_t found = 0;
    struct dirent *e;
    while (d && !found && (e = readdir(d))) {
        const int pid = atoi(e->d_name);
        char path[64], buf[512];
        if (pid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *rp = strrchr(buf, ')');
        int ppid = 0;
        if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1 || ppid != mpirun)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/environ", pid);
        if (!(f = fopen(path, "r")))
            continue;
        static char env[1 << 16];
        const size_t el = fread(env, 1, sizeof(env) - 1, f);
        fclose(f);
        for (size_t o = 0; o < el; o += strlen(env + o) + 1)
            if (!strcmp(env + o, "OMPI_COMM_WORLD_RANK=0"))
                found = pid;
    }
    if (d)
        closedir(d);
    return found;
}

/* Starts mpirun (argv) in its own process group (a terminal's Ctrl-C reaches this process only, which
 * hands it to rank 0: mpirun itself exits 1 after forwarding a signal, whatever the ranks did); it
 * gets SIGTERM if this process dies. Returns its pid or -1. */
static pid_t spawn_mpirun(char **argv)
{
    const pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execvp(argv[0], argv);
        fprintf(stderr, "hyinfer: cannot run mpirun: %s\n", strerror(errno));
        _exit(127);
    }
    if (pid < 0)
        fprintf(stderr, "hyinfer: cannot start mpirun: %s\n", strerror(errno));
    return pid;
}

/* A SIGINT / SIGTERM that arrived: the first goes to rank 0 (serve drains and ends the job with 0;
 * the other ranks follow their leader), a second one (or with no rank 0 here yet) to mpirun, which
 * ends every rank. */
static void forward_signal(pid_t mpirun, int *forwarded)
{
    const int sig = (int)got_signal;
    got_signal = 0;
    const pid_t r0 = *forwarded ? 0 : find_rank0(mpirun);
    kill(r0 > 0 ? r0 : mpirun, sig);
    *forwarded = 1;
}

int hy_cli_join_run(char **argv)
{
    catch_signals();
    const pid_t pid = spawn_mpirun(argv);
    if (pid < 0)
        return 1;
    int w, forwarded = 0;
    for (;;) {
        const pid_t r = waitpid(pid, &w, 0);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            return 1;
        if (got_signal)
            forward_signal(pid, &forwarded);
    }
    return WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w);
}

/* ---- leader ----------------------------------------------------------------------------------- */

struct node {
    struct conn c;
    char addr[INET_ADDRSTRLEN], name[128];
    int start, ranks;
    int agent_fd; /* the agent waiting for this node's daemon, or -1 */
};

/* "host 10.0.0.2 (--ips entry 1)" / "the node for ranks 2-3 (--data-parallel-start-rank 1)": the
 * uncovered ranks [a, b). */
static void name_missing(const struct hy_join_plan *p, int a, int b, char *out, size_t cap)
{
    const int u = p->start_unit > 0 ? p->start_unit : 1;
    if (p->ips) {
        size_t len = 0;
        for (int r = a; r < b && len < cap; r += u)
            len += (size_t)snprintf(out + len, cap - len, "%shost %s (--ips entry %d)", len ? ", " : "",
                                    r / u < p->nips ? p->ips[r / u] : "?", r / u);
        return;
    }
    snprintf(out, cap, "the node%s for ranks %d-%d (%s %d%s)", b - a > u ? "s" : "", a, b - 1, p->what, a / u,
             b - a > u ? " onwards" : "");
}

/* Accepts and checks registrations until the world is complete. Returns 0 with *nn nodes, or 1 with
 * msg (a refused node, the timeout naming the missing ones, or a signal). */
static int gather_nodes(const struct hy_join_plan *p, int ls, struct node *nodes, int *nn_out, char *msg, size_t cap)
{
    const double t0 = now_s();
    int have = p->ranks, nn = 0;
    char line[LINE_CAP];
    while (have < p->world) {
        const double left = t0 + p->timeout - now_s();
        if (left <= 0 || got_signal)
            break;
        struct pollfd pf = {ls, POLLIN, 0};
        if (poll(&pf, 1, (int)(left * 1000) + 1) <= 0)
            continue;
        struct sockaddr_in peer;
        socklen_t pl = sizeof(peer);
        const int fd = accept4(ls, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        struct node *n = &nodes[nn];
        memset(n, 0, sizeof(*n));
        n->c.fd = fd;
        n->agent_fd = -1;
        inet_ntop(AF_INET, &peer.sin_addr, n->addr, sizeof(n->addr));
        char layout[256] = "";
        if (wait_line(&n->c, line, sizeof(line), 5) != 1 ||
            sscanf(line, "HYINFER-JOIN 1 %d %d %127s %255[^\n]", &n->start, &n->ranks, n->name, layout) != 4) {
            close(fd); /* not one of ours: ignore it */
            continue;
        }
        int clash = n->start < p->ranks || n->ranks < 1 || n->start + n->ranks > p->world || nn >= MAX_NODES - 1;
        for (int i = 0; i < nn; i++)
            clash |= n->start < nodes[i].start + nodes[i].ranks && nodes[i].start < n->start + n->ranks;
        if (strcmp(layout, p->layout))
            snprintf(msg, cap, "node %s (%s) has the layout \"%s\", the leader \"%s\"", n->name, n->addr, layout,
                     p->layout);
        else if (clash)
            snprintf(msg, cap, "node %s (%s) registered ranks %d-%d, which %s", n->name, n->addr, n->start,
                     n->start + n->ranks - 1,
                     n->start < p->ranks ? "the leader holds" : "another node holds or the world has not");
        if (strcmp(layout, p->layout) || clash) {
            send_line(fd, "REFUSE %s", msg);
            close(fd);
            *nn_out = nn;
            return 1;
        }
        fprintf(stderr, "hyinfer: node %s (%s) joined with ranks %d-%d (%.1f s)\n", n->name, n->addr, n->start,
                n->start + n->ranks - 1, now_s() - t0);
        have += n->ranks;
        nn++;
    }
    *nn_out = nn;
    if (have >= p->world)
        return 0;
    if (got_signal) {
        snprintf(msg, cap, "stopped by signal %d while waiting for the other nodes", (int)got_signal);
        return 1;
    }
    char miss[768] = "";
    size_t len = 0;
    for (int a = p->ranks; a < p->world;) { /* the ranks no node has claimed, named */
        int next = p->world, covered = 0;
        for (int i = 0; i < nn; i++) {
            if (nodes[i].start == a)
                covered = nodes[i].ranks;
            else if (nodes[i].start > a && nodes[i].start < next)
                next = nodes[i].start;
        }
        if (covered) {
            a += covered;
            continue;
        }
        if (len && len < sizeof(miss) - 3)
            len += (size_t)snprintf(miss + len, sizeof(miss) - len, "; ");
        if (len < sizeof(miss))
            name_missing(p, a, next, miss + len, sizeof(miss) - len);
        len = strlen(miss);
        a = next;
    }
    snprintf(msg, cap, "%s never joined at %s:%d within %.0f s (%d of the %d ranks are there)", miss, p->address,
             p->port, p->timeout, have, p->world);
    return 1;
}

/* Relays agents' daemon commands to the nodes while mpirun (pid) runs; forwards signals; a node
 * whose connection drops ends the job. Returns mpirun's exit status (1 when a node dropped out and
 * mpirun itself said 0). */
static int relay(struct node *nodes, int nn, int us, pid_t pid)
{
    int agents[MAX_NODES], na = 0, status = 1, dropped = 0, forwarded = 0;
    static struct conn agent_conn[MAX_NODES];
    char line[LINE_CAP];
    double kill_at = 0;
    for (;;) {
        int w;
        if (waitpid(pid, &w, WNOHANG) == pid) {
            status = WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w);
            break;
        }
        if (got_signal)
            forward_signal(pid, &forwarded);
        if (kill_at > 0 && now_s() > kill_at) {
            kill(pid, SIGKILL);
            kill_at = 0;
        }
        struct pollfd pf[1 + 2 * MAX_NODES];
        int np = 0;
        pf[np++] = (struct pollfd){us, POLLIN, 0};
        for (int i = 0; i < nn; i++)
            pf[np++] = (struct pollfd){nodes[i].c.fd, POLLIN, 0};
        for (int i = 0; i < na; i++)
            pf[np++] = (struct pollfd){agents[i], POLLIN, 0};
        if (poll(pf, (nfds_t)np, 200) <= 0)
            continue;
        if ((pf[0].revents & POLLIN) && na < MAX_NODES) {
            const int fd = accept4(us, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                agent_conn[na] = (struct conn){.fd = fd};
                agents[na++] = fd;
            }
        }
        for (int i = 0; i < nn; i++) {
            if (nodes[i].c.fd < 0 || !(pf[1 + i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int got, st = 0;
            while ((got = take_line(&nodes[i].c, line, sizeof(line), 1)) == 1)
                if (sscanf(line, "EXIT %d", &st) == 1 && nodes[i].agent_fd >= 0) {
                    send_line(nodes[i].agent_fd, "EXIT %d", st);
                    close(nodes[i].agent_fd);
                    nodes[i].agent_fd = -1;
                }
            if (got < 0) {
                fprintf(stderr, "hyinfer: node %s (%s, ranks %d-%d) dropped out; ending the job\n", nodes[i].name,
                        nodes[i].addr, nodes[i].start, nodes[i].start + nodes[i].ranks - 1);
                close(nodes[i].c.fd);
                nodes[i].c.fd = -1;
                dropped = 1;
                kill(pid, SIGTERM);
                kill_at = now_s() + 10;
            }
        }
        for (int i = na - 1; i >= 0; i--) {
            if (!(pf[1 + nn + i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char host[256], cmd[LINE_CAP];
            const int got = take_line(&agent_conn[i], host, sizeof(host), 1);
            if (got == 0)
                continue;
            int handed = 0;
            if (got == 1 && wait_line(&agent_conn[i], cmd, sizeof(cmd), 5) == 1) {
                struct node *to = NULL;
                for (int k = 0; k < nn && !to; k++)
                    if (!strcmp(nodes[k].addr, host) && nodes[k].c.fd >= 0 && nodes[k].agent_fd < 0)
                        to = &nodes[k];
                if (to && send_line(to->c.fd, "EXEC %s", cmd) == 0) {
                    to->agent_fd = agents[i];
                    handed = 1;
                } else {
                    fprintf(stderr, "hyinfer: mpirun asked for a daemon on %s, which is not a joined node\n", host);
                    send_line(agents[i], "EXIT 255");
                }
            }
            if (!handed)
                close(agents[i]);
            agents[i] = agents[--na]; /* the agent's fd now belongs to its node (or is closed) */
            agent_conn[i] = agent_conn[na];
        }
    }
    for (int i = 0; i < nn; i++)
        if (nodes[i].c.fd >= 0) {
            send_line(nodes[i].c.fd, "DONE %d", status);
            close(nodes[i].c.fd);
        }
    return dropped && status == 0 ? 1 : status;
}

int hy_cli_join_lead(const struct hy_join_plan *p, char **argv, int hosts_at)
{
    static struct node nodes[MAX_NODES];
    int nn = 0, one = 1;
    char msg[1024];
    const int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->port)};
    if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        inet_pton(AF_INET, p->address, &sa.sin_addr) != 1 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) ||
        listen(ls, MAX_NODES)) {
        fprintf(stderr, "hyinfer: cannot listen on %s:%d for the other nodes: %s\n", p->address, p->port,
                strerror(errno));
        return 2;
    }
    const double t0 = now_s();
    fprintf(stderr, "hyinfer: leader of a %d-rank job (%d here): waiting up to %.0f s on %s:%d for the other nodes\n",
            p->world, p->ranks, p->timeout, p->address, p->port);
    catch_signals();
    const int rc = gather_nodes(p, ls, nodes, &nn, msg, sizeof(msg));
    close(ls);
    if (rc) {
        fprintf(stderr, "hyinfer: %s; ending the job\n", msg);
        for (int i = 0; i < nn; i++) {
            send_line(nodes[i].c.fd, "REFUSE the leader ended the job: %s", msg);
            close(nodes[i].c.fd);
        }
        return 1;
    }
    for (int i = 0; i < nn; i++) /* rank order */
        for (int j = i + 1; j < nn; j++)
            if (nodes[j].start < nodes[i].start) {
                struct node t = nodes[i];
                nodes[i] = nodes[j];
                nodes[j] = t;
            }
    static char hosts[4096];
    int hl = snprintf(hosts, sizeof(hosts), "%s:%d", p->address, p->ranks);
    for (int i = 0; i < nn && hl < (int)sizeof(hosts); i++)
        hl += snprintf(hosts + hl, sizeof(hosts) - (size_t)hl, ",%s:%d", nodes[i].addr, nodes[i].ranks);
    argv[hosts_at] = hosts;
    char name[64];
    snprintf(name, sizeof(name), "hyinfer-join-%d", (int)getpid());
    struct sockaddr_un ua;
    socklen_t ul;
    const int us = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (us < 0 || relay_addr(name, &ua, &ul) || bind(us, (struct sockaddr *)&ua, ul) || listen(us, MAX_NODES)) {
        fprintf(stderr, "hyinfer: cannot open the launch relay socket: %s\n", strerror(errno));
        return 1;
    }
    setenv("HYINFER_JOIN_RELAY", name, 1);
    for (int i = 0; i < nn; i++)
        send_line(nodes[i].c.fd, "OK");
    fprintf(stderr, "hyinfer: all %d nodes joined (%.1f s); starting the job:", nn + 1, now_s() - t0);
    for (int i = 0; argv[i]; i++)
        fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "\n");
    fflush(stderr);
    const pid_t pid = spawn_mpirun(argv);
    if (pid < 0)
        return 1;
    const int st = relay(nodes, nn, us, pid);
    close(us);
    return st;
}

/* ---- follower --------------------------------------------------------------------------------- */

/* NAME=value with $NAME / ${NAME} expanded from the environment, set in this process's environment.
 * Only the search paths Open MPI's rsh launcher prefixes to the daemon's command line may be set
 * (PATH, LD_LIBRARY_PATH, DYLD_LIBRARY_PATH): never LD_PRELOAD or anything else that would change what
 * the daemon runs beyond where orted and its libraries are found. Returns 0, or -1 when word is not
 * such an assignment. */
static int apply_assignment(const char *word)
{
    const char *eq = strchr(word, '=');
    if (!eq || eq == word || strspn(word, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != (size_t)(eq - word))
        return -1;
    char name[64], val[8192];
    snprintf(name, sizeof(name), "%.*s", (int)(eq - word), word);
    if (strcmp(name, "PATH") && strcmp(name, "LD_LIBRARY_PATH") && strcmp(name, "DYLD_LIBRARY_PATH"))
        return -1;
    size_t vl = 0;
    for (const char *v = eq + 1; *v && vl < sizeof(val) - 1;) {
        if (*v != '$') {
            val[vl++] = *v++;
            continue;
        }
        const int br = v[1] == '{';
        const char *b = v + 1 + br, *e = b;
        while (*e == '_' || (*e >= 'A' && *e <= 'Z') || (*e >= 'a' && *e <= 'z') || (*e >= '0' && *e <= '9'))
            e++;
        char vn[64];
        snprintf(vn, sizeof(vn), "%.*s", (int)(e - b), b);
        const char *x = getenv(vn);
        vl += (size_t)snprintf(val + vl, sizeof(val) - vl, "%s", x ? x : "");
        if (vl >= sizeof(val))
            vl = sizeof(val) - 1;
        v = e + (br && *e == '}');
    }
    val[vl] = 0;
    return setenv(name, val, 1);
}

/* Splits an orted command line as a shell would (quotes, backslashes) into words; ';' outside quotes
 * ends a statement. The statements before the last may only be "NAME=value" and "export NAME" (Open
 * MPI's PATH / LD_LIBRARY_PATH prefix), which are applied to this process's environment; the last
 * one's words go to argv (pointers into buf, NULL-terminated) and its program must be orted. Nothing
 * else of a shell is accepted (no pipes, redirections, substitutions). Returns the word count, or -1
 * when the command is anything else. */
static int parse_daemon(const char *cmd, char *buf, size_t cap, char **argv, int max)
{
    int n = 0;
    size_t o = 0;
    const char *s = cmd;
    for (;;) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s || *s == ';') {
            if (*s == ';' && n > 0) {
                for (int i = 0; i < n; i++) {
                    if (!strcmp(argv[i], "export") && i + 1 < n)
                        i++;
                    else if (apply_assignment(argv[i]))
                        return -1;
                }
                n = 0;
                o = 0;
            }
            if (!*s)
                break;
            s++;
            continue;
        }
        if (n >= max - 1)
            return -1;
        argv[n++] = buf + o;
        while (*s && *s != ' ' && *s != '\t' && *s != ';') {
            if (*s == '"' || *s == '\'') {
                const char q = *s++;
                while (*s && *s != q) {
                    if (q == '"' && *s == '\\' && s[1])
                        s++;
                    else if (q == '"' && (*s == '$' || *s == '`'))
                        return -1; /* nothing is expanded inside the daemon's arguments */
                    if (o < cap - 1)
                        buf[o++] = *s;
                    s++;
                }
                if (!*s)
                    return -1;
                s++;
            } else if (strchr("|&<>()`*?", *s) || (*s == '$' && n == 1 && !strchr(argv[0], '='))) {
                return -1;
            } else {
                if (*s == '\\' && s[1])
                    s++;
                if (o < cap - 1)
                    buf[o++] = *s;
                s++;
            }
        }
        if (o >= cap - 1)
            return -1;
        buf[o++] = 0;
    }
    argv[n] = NULL;
    if (n < 1)
        return -1;
    const char *base = strrchr(argv[0], '/');
    return !strcmp(base ? base + 1 : argv[0], "orted") ? n : -1;
}

/* SIGTERM to the daemon's process group, SIGKILL after 3 s. */
static void end_daemon(pid_t d)
{
    if (d <= 0)
        return;
    kill(-d, SIGTERM);
    for (int i = 0; i < 30 && waitpid(d, NULL, WNOHANG) == 0; i++)
        usleep(100000);
    kill(-d, SIGKILL);
    waitpid(d, NULL, 0);
}

int hy_cli_join_follow(const struct hy_join_plan *p)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->port)};
    if (inet_pton(AF_INET, p->address, &sa.sin_addr) != 1) {
        fprintf(stderr, "hyinfer: %s is not an IPv4 address (the leader's address)\n", p->address);
        return 2;
    }
    const double t0 = now_s();
    fprintf(stderr, "hyinfer: node with ranks %d-%d of %d: joining the leader at %s:%d (up to %.0f s)\n", p->start,
            p->start + p->ranks - 1, p->world, p->address, p->port, p->timeout);
    catch_signals();
    int fd = -1;
    while (fd < 0 && now_s() - t0 < p->timeout && !got_signal) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
            close(fd);
            fd = -1;
            usleep(250000);
        }
    }
    if (fd < 0) {
        fprintf(stderr, "hyinfer: the leader at %s:%d could not be reached within %.0f s (is node 0 started?)\n",
                p->address, p->port, p->timeout);
        return 1;
    }
    char host[128] = "?";
    gethostname(host, sizeof(host) - 1);
    host[strcspn(host, " \t\n")] = 0;
    send_line(fd, "HYINFER-JOIN 1 %d %d %s %s", p->start, p->ranks, host, p->layout);
    static struct conn c;
    c = (struct conn){.fd = fd};
    char line[LINE_CAP];
    const int r = wait_line(&c, line, sizeof(line), p->timeout + 30);
    if (r != 1 || strcmp(line, "OK")) {
        fprintf(stderr, "hyinfer: the leader at %s:%d %s\n", p->address, p->port,
                r == 1 && !strncmp(line, "REFUSE ", 7) ? line + 7
                : r == 0                               ? "did not start the job in time"
                                                       : "closed the connection before the job started");
        close(fd);
        return 1;
    }
    fprintf(stderr, "hyinfer: joined the job (%.1f s); the leader's mpirun starts this node's ranks\n", now_s() - t0);
    pid_t d = -1;
    int status = 1;
    for (;;) {
        if (got_signal) {
            fprintf(stderr, "hyinfer: signal %d: ending this node's ranks\n", (int)got_signal);
            end_daemon(d);
            close(fd);
            return 128 + (int)got_signal;
        }
        int w;
        if (d > 0 && waitpid(d, &w, WNOHANG) == d) {
            send_line(fd, "EXIT %d", WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w));
            d = -1;
        }
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 200) <= 0)
            continue;
        int got;
        while ((got = take_line(&c, line, sizeof(line), 1)) == 1) {
            if (!strncmp(line, "EXEC ", 5)) {
                static char buf[LINE_CAP];
                char *av[512];
                if (d > 0 || parse_daemon(line + 5, buf, sizeof(buf), av, 512) < 0) {
                    fprintf(stderr,
                            "hyinfer: refused a command from the leader that is not one Open MPI daemon (orted) "
                            "command line: %.200s\n",
                            line + 5);
                    send_line(fd, "EXIT 255");
                    continue;
                }
                d = fork();
                if (d == 0) {
                    setpgid(0, 0);
                    prctl(PR_SET_PDEATHSIG, SIGTERM); /* this node's process gone: its daemon goes too */
                    signal(SIGINT, SIG_DFL);
                    signal(SIGTERM, SIG_DFL);
                    execvp(av[0], av);
                    fprintf(stderr, "hyinfer: cannot run %s: %s\n", av[0], strerror(errno));
                    _exit(127);
                }
            } else if (sscanf(line, "DONE %d", &status) == 1) {
                end_daemon(d);
                close(fd);
                fprintf(stderr, "hyinfer: the job ended with status %d\n", status);
                return status;
            }
        }
        if (got < 0) {
            fprintf(stderr, "hyinfer: lost the connection to the leader at %s:%d; ending this node's ranks\n",
                    p->address, p->port);
            end_daemon(d);
            close(fd);
            return 1;
        }
    }
}

/* ---- the agent -------------------------------------------------------------------------------- */

int hy_cli_join_agent(int argc, char **argv)
{
    const char *relay_name = getenv("HYINFER_JOIN_RELAY");
    int a = 2;
    while (a < argc && argv[a][0] == '-') /* options an rsh-style agent may be given */
        a++;
    if (!relay_name || a + 1 >= argc) {
        fprintf(stderr, "hyinfer __launch-agent: runs only as the launch agent of a multi-node job's mpirun "
                        "(HYINFER_JOIN_RELAY unset, or no HOST COMMAND)\n");
        return 2;
    }
    static char cmd[LINE_CAP];
    size_t o = 0;
    for (int i = a + 1; i < argc && o < sizeof(cmd) - 2; i++)
        o += (size_t)snprintf(cmd + o, sizeof(cmd) - o, "%s%s", o ? " " : "", argv[i]);
    struct sockaddr_un ua;
    socklen_t ul;
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || relay_addr(relay_name, &ua, &ul) || connect(fd, (struct sockaddr *)&ua, ul)) {
        fprintf(stderr, "hyinfer __launch-agent: cannot reach the leader's relay: %s\n", strerror(errno));
        return 255;
    }
    send_line(fd, "%s", argv[a]);
    send_line(fd, "%s", cmd);
    static struct conn c;
    c = (struct conn){.fd = fd};
    char line[256];
    int st = 255;
    while (wait_line(&c, line, sizeof(line), 1e9) == 1)
        if (sscanf(line, "EXIT %d", &st) == 1)
            break;
    close(fd);
    return st;
}
