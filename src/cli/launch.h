/* launch.h - hyinfer starting its own multi-rank job (docs/distributed.md "Without mpirun").
 *
 * One host: a model command (serve, run, generate, logits) asked for more than one rank (-tp N -dp M,
 * or run --yaml with parallel_config.world_size > 1) but started without mpirun re-executes itself
 * under Open MPI's mpirun with N x M ranks on this host (oversubscribed, root allowed, one line on
 * stderr saying what it starts); the job's exit status is the command's.
 *
 * Several hosts, each running its own command (vLLM's --data-parallel-address / -rpc-port /
 * -start-rank / --headless, or the cann-recipes form --ips A,B,...): the leader (start rank 0, the
 * first address) waits for the other nodes to register on the rpc port, then runs one mpirun over all
 * of them, whose daemons reach the other hosts over those registered connections instead of ssh
 * (join.h). */
#ifndef HY_CLI_LAUNCH_H
#define HY_CLI_LAUNCH_H

/* Called by main before MPI starts. Returns -1 when this process runs the command itself (under
 * mpirun already, one rank, a command that is not a model command, or a bad flag value the
 * command's own parser will report). Otherwise it runs the job (mpirun as a child; SIGINT /
 * SIGTERM go to world rank 0) and returns the job's exit status; on failure it prints the reason on stderr and returns the exit status (2: a bad layout flag or Open MPI
 * missing, 1: a node never joined or dropped out). */
int hy_cli_launch(int argc, char **argv);

/* `hyinfer __launch-agent HOST COMMAND...`: the stand-in for ssh that the leader's mpirun runs
 * (plm_rsh_agent): relays COMMAND to the node registered as HOST and exits with its exit status. */
int hy_cli_launch_agent(int argc, char **argv);

#endif
