/* join.h - nodes started one by one joining into one mpirun job (docs/distributed.md "Several
 * hosts, one command each").
 *
 * The leader (start rank 0) listens on ADDRESS:PORT (TCP); every other node connects, registers its
 * start rank, its rank count and its layout, and keeps the connection. When the ranks of all nodes add
 * up to the world, the leader runs ONE mpirun over all the hosts (the followers by the address their
 * connection came from) whose launch agent is `hyinfer __launch-agent`: instead of ssh, the agent
 * hands Open MPI's daemon command line (orted) to the leader, which sends it over the node's
 * registered connection; the follower runs it (an orted command only, from that connection only, no
 * shell) and reports its exit status. Failure handling is mpirun's (a lost daemon ends the job) plus:
 * a node that has not registered within the timeout, or whose connection drops, ends the job with a
 * message naming it; a follower whose leader goes away ends its daemon and exits 1. */
#ifndef HY_CLI_JOIN_H
#define HY_CLI_JOIN_H

/* What one node knows about the job (from its own command line). */
struct hy_join_plan {
    const char *address; /* the leader's address (dotted IPv4) */
    int port;            /* the rpc port */
    double timeout;      /* seconds to wait for every node (leader) / for the leader (follower) */
    int world;           /* ranks of the whole job */
    int start;           /* this node's first world rank (0 on the leader) */
    int ranks;           /* ranks on this node */
    const char *layout;  /* "tp=T world=W": every node must have the same */
    const char *what;    /* how a node is named in messages: "--data-parallel-start-rank" or "--ips" */
    int start_unit;      /* start ranks are given in units of this many ranks (TP for vLLM's DP ranks) */
    char **ips;          /* the cann-recipes form: the host list (NULL in vLLM's form) */
    int nips;
};

/* The leader: waits for every node, then runs argv (mpirun's, NULL-terminated) with argv[hosts_at]
 * replaced by the "A:n,B:m" host list in rank order, relays the daemons' launch commands and forwards
 * SIGINT / SIGTERM to mpirun. Returns mpirun's exit status, 2 when it cannot listen, or 1 with a
 * message on stderr (a node never registered, registered twice or with another layout, or dropped
 * out). */
int hy_cli_join_lead(const struct hy_join_plan *p, char **argv, int hosts_at);

/* One host: runs mpirun (argv, NULL-terminated) as a child in its own process group and waits for it;
 * the first SIGINT / SIGTERM goes to world rank 0 (a second to mpirun). Returns mpirun's exit status
 * (128 + N when it died of signal N), 1 when it cannot start. */
int hy_cli_join_run(char **argv);

/* A follower: registers with the leader (retrying until p->timeout), runs the daemon command it is
 * sent and returns the job's status (1 with a message when the leader is unreachable, refuses it or
 * goes away; 128 + N after signal N). */
int hy_cli_join_follow(const struct hy_join_plan *p);

/* `hyinfer __launch-agent HOST COMMAND...` (see launch.h). Returns the daemon's exit status, 255
 * when the relay is unreachable, 2 outside a leader's mpirun. */
int hy_cli_join_agent(int argc, char **argv);

/* 1 when addr (dotted IPv4) is an address of one of this host's interfaces, else 0; *cidr (when not
 * NULL, 48 bytes) gets its subnet ("10.0.0.0/24"). */
int hy_cli_join_local_addr(const char *addr, char *cidr);

#endif
