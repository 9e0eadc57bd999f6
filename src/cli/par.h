/* par.h - the multi-rank side of the model commands: vLLM's layout flags, the start-up agreement
 * between ranks, loading a model shard per rank and the workers' loop. */
#ifndef HY_CLI_PAR_H
#define HY_CLI_PAR_H

#include "cli/args.h"
#include "config/parallel.h"
#include "model/model.h"

/* The multi-rank flags every model command takes (vLLM's names; docs/distributed.md). */
struct hy_cli_par {
    int tp, dp, ep;                   /* --tensor-parallel-size, --data-parallel-size, --enable-expert-parallel */
    int dp_local, dp_start, headless; /* this node's part of a multi-node job (cli/launch.h) */
    const char *dp_address;
    int rpc_port, join_timeout, node_rank; /* --data-parallel-rpc-port, --dist-join-timeout, --node-rank */
    const char *ips;                       /* --ips: the cann-recipes host list */
    const char *combine;                   /* --tp-combine exact|sum */
    const char *dispatch;                  /* --all2all-backend auto|allgather_reducescatter|alltoall */
    int given;                             /* any of the layout flags was given */
};

/* clang-format off */
#define HY_CLI_PAR_ARGS(p) \
    {"--tensor-parallel-size", "-tp", HY_ARG_INT, &(p).tp, &(p).given, \
     "ranks splitting attention heads, dense MLP, vocabulary (TP x DP ranks: started by hyinfer without mpirun)"}, \
    {"--data-parallel-size", "-dp", HY_ARG_INT, &(p).dp, &(p).given, \
     "attention data-parallel groups, each with its own sequences and KV cache (default 1)"}, \
    {"--enable-expert-parallel", NULL, HY_ARG_FLAG, &(p).ep, &(p).given, \
     "routed experts spread over all ranks (else each expert is split over all ranks)"}, \
    {"--tp-combine", NULL, HY_ARG_STR, &(p).combine, NULL, \
     "exact (default: gathers; logits bitwise equal to 1 rank) | sum (partials added in rank order)"}, \
    {"--all2all-backend", NULL, HY_ARG_STR, &(p).dispatch, NULL, \
     "MoE exchange: auto (the recipe's rule) | allgather_reducescatter | alltoall"}, \
    {"--data-parallel-size-local", NULL, HY_ARG_INT, &(p).dp_local, NULL, \
     "DP groups on this node; below --data-parallel-size the nodes join into one job (docs/distributed.md)"}, \
    {"--data-parallel-start-rank", NULL, HY_ARG_INT, &(p).dp_start, NULL, \
     "this node's first DP group (0 = the leader, which serves HTTP; others need --headless)"}, \
    {"--data-parallel-address", NULL, HY_ARG_STR, &(p).dp_address, NULL, \
     "the leader's address: it listens there on --data-parallel-rpc-port for the other nodes"}, \
    {"--data-parallel-rpc-port", NULL, HY_ARG_INT, &(p).rpc_port, NULL, \
     "the port the nodes meet on (default 29550)"}, \
    {"--headless", NULL, HY_ARG_FLAG, &(p).headless, NULL, \
     "a node without the API server (its ranks join the leader's job)"}, \
    {"--ips", NULL, HY_ARG_STR, &(p).ips, NULL, \
     "cann-recipes form: every node's address, the leader first (A,B,...); the same command on each node"}, \
    {"--node-rank", NULL, HY_ARG_INT, &(p).node_rank, NULL, \
     "with --ips: this node's index in the list (default: the listed address this host has)"}, \
    {"--dist-join-timeout", NULL, HY_ARG_INT, &(p).join_timeout, NULL, \
     "seconds the nodes wait for each other at start-up (default 300)"}
/* clang-format on */

/* The layout for the job's world size: from the flags of p; with from_yaml = 1 and no layout flag
 * given, *out already holds the YAML's parallel_config and is only checked (and the combine / dispatch
 * flags applied). One rank: everything 1. Returns 0, or -1 with hy_err_msg() naming the flag or key. */
int hy_cli_par_resolve(const struct hy_cli_par *p, int from_yaml, struct hy_parallel_config *out);

/* Loads the model for a command: in one process, hy_model_load_ex. Under mpirun (world > 1): every
 * rank first agrees on the command line and the model's config.json (hy_dist_agree; a mismatch
 * returns -1 naming the flag on every rank), loads its shard (a rank that fails ends the job with
 * MPI_Abort and its reason) and waits for all; world rank 0 then returns 0 with *m, while the other
 * ranks run the leader's steps (hy_executor_worker_run) and exit the process when it is done.
 * Release *m with hy_cli_free_model. */
int hy_cli_load_model(const char *model_dir, struct hy_load_params *lp, const struct hy_parallel_config *par, int argc,
                      char **argv, struct hy_model **m);

/* Ends the job on every rank (under mpirun the workers return from their loop: hy_executor_exit),
 * then frees m. m may be NULL. */
void hy_cli_free_model(struct hy_model *m);

/* hy_cli_load_model with the default load parameters for compute dtype cd and the layout of p. */
int hy_cli_load(const char *model_dir, enum hy_compute_dtype cd, const struct hy_cli_par *p, int argc, char **argv,
                struct hy_model **m);

/* 0 in a one-rank process; else -1 with hy_err_msg() saying `what` does not run under mpirun. */
int hy_cli_single_rank(const char *what);

#endif
