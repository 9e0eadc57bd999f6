#!/bin/sh
# nsrsh.sh - a stand-in for ssh as Open MPI's launch agent (mpirun --mca plm_rsh_agent), used by
# tests/dist/test_two_hosts.sh: mpirun calls it as `nsrsh.sh HOST COMMAND...` to start its daemon
# (orted) on HOST; here every remote "host" is the network namespace $HY_NSRSH_NETNS on this machine,
# and with HY_NSRSH_HOSTNAME set the command runs in its own UTS namespace with that hostname (so Open
# MPI sees two nodes with different names, and the shared-memory transport stays within one).
# Not a test itself.
host=$1
shift
[ -n "${HY_NSRSH_NETNS:-}" ] || { echo "nsrsh.sh: HY_NSRSH_NETNS is not set (host $host)" >&2; exit 1; }
if [ -n "${HY_NSRSH_HOSTNAME:-}" ]; then
  exec ip netns exec "$HY_NSRSH_NETNS" unshare --uts sh -c 'hostname "$1" && exec sh -c "$2"' sh "$HY_NSRSH_HOSTNAME" "$*"
fi
exec ip netns exec "$HY_NSRSH_NETNS" sh -c "$*"
