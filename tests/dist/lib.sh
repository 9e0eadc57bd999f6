# lib.sh - sourced by the tests/dist/test_*.sh scripts that run `hyinfer` under Open MPI's mpirun
# (not a test itself). Provides: the skip/fail checks, the oversubscribed shared-memory mpirun
# command line, servers started in the background with their rank pids recorded, /health polling,
# log parsing and a clean-up trap that ends every process a test started (by pid, nothing else).
#
# Servers: dist_serve NAME NP ARGS... starts `mpirun -np NP build/hyinfer serve models/hy3-tiny
# --port P ARGS...` (NP = 0: one plain process, no mpirun) with its log in $W/NAME.log; afterwards
# ${PID[NAME]} is the launched pid (timeout's, around mpirun), ${MPI[NAME]} the mpirun pid,
# ${PORT[NAME]} the port, ${HEALTH[NAME]} the /health codes seen while polling and, once healthy,
# ${RANKS[NAME]} the rank pids in rank order ("pid0 pid1 ...").
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BIN=build/hyinfer
MODEL=models/hy3-tiny
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

dist_require() {  # skip (77) without mpirun / Open MPI headers / node (when $1 = node); fail without a build
  command -v mpirun >/dev/null || { echo "skip: mpirun not found (openmpi-bin)"; exit 77; }
  pkg-config --exists ompi-c 2>/dev/null || { echo "skip: Open MPI headers not found (libopenmpi-dev): hyinfer is one-rank only"; exit 77; }
  command -v curl >/dev/null || { echo "skip: curl missing"; exit 77; }
  if [ "${1:-}" = node ]; then
    command -v node >/dev/null || { echo "skip: node is not installed"; exit 77; }
    [ -f tests/js/node_modules/openai/index.mjs ] || { echo "skip: tests/js/node_modules/openai missing (npm install in tests/js)"; exit 77; }
  fi
  [ -x "$BIN" ] || { echo "FAIL: $BIN not built (make build/hyinfer)"; exit 1; }
  [ -f "$MODEL/model.safetensors" ] || { echo "FAIL: no model ($MODEL)"; exit 1; }
}

[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export HYINFER_LOG=info OMP_WAIT_POLICY=PASSIVE
unset HYINFER_DIST_FAULT HYINFER_DIST_STEP_TIMEOUT HYINFER_NUM_THREADS
MPIRUN=(mpirun --oversubscribe --mca pml ob1 --mca btl self,vader)
JOB_LIMIT="${HYINFER_DIST_JOB_LIMIT:-150}" # seconds any one mpirun job may live (MPIEXEC_TIMEOUT)

fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
note() { echo "     $*"; }

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

declare -A PID MPI PORT HEALTH RANKS
ALL_PIDS=() # everything started here (launchers, mpirun, ranks): the trap ends what is still ours

# 1 when pid is alive, not a zombie and runs one of our binaries (pids are not reused blindly)
ours_alive() {
  local p=$1 st
  [ -r "/proc/$p/stat" ] || return 1
  st=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1)
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ] || return 1
  tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -Eq 'hyinfer|mpirun|orted|timeout|node'
}

# pid and all its descendants (children first found, then theirs)
proc_tree() {
  local p c
  for p in "$@"; do
    echo "$p"
    for c in $(pgrep -P "$p" 2>/dev/null); do proc_tree "$c"; done
  done
}

dist_cleanup() {
  local p all
  [ ${#ALL_PIDS[@]} -gt 0 ] || return 0
  all=$(proc_tree "${ALL_PIDS[@]}" | sort -un)
  for p in $all; do ours_alive "$p" && kill -STOP "$p" 2>/dev/null; done # no re-spawning while we kill
  for p in $all; do ours_alive "$p" && kill -9 "$p" 2>/dev/null; done
  for p in $all; do kill -CONT "$p" 2>/dev/null; done
  return 0
}
trap 'dist_cleanup' EXIT
trap 'exit 130' INT TERM

# mpirun's direct children that run hyinfer, in world-rank order (OMPI_COMM_WORLD_RANK)
rank_pids() {
  local mp=$1 p r out=()
  for p in $(pgrep -P "$mp"); do
    r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ -n "$r" ] && out[$r]=$p
  done
  echo "${out[*]}"
}

# dist_serve NAME NP ARGS...: starts a server (NP 0 = plain process) in the background
dist_serve() {
  local name=$1 np=$2; shift 2
  local port; port=$(free_port)
  PORT[$name]=$port
  if [ "$np" -eq 0 ]; then
    timeout -k 5 "$JOB_LIMIT" "$BIN" serve "$MODEL" --port "$port" --served-model-name hy3 -t 1 "$@" \
      >"$W/$name.log" 2>&1 &
    PID[$name]=$!
    MPI[$name]=""
  else
    MPIEXEC_TIMEOUT=$JOB_LIMIT timeout -k 5 $((JOB_LIMIT + 10)) "${MPIRUN[@]}" -np "$np" \
      "$BIN" serve "$MODEL" --port "$port" --served-model-name hy3 -t 1 "$@" >"$W/$name.log" 2>&1 &
    PID[$name]=$!
    MPI[$name]=""
  fi
  ALL_PIDS+=("${PID[$name]}")
}

# wait_healthy NAME [SECONDS]: polls /health every 50 ms until 200; records the codes seen
# (000 = not listening yet) and the rank pids. Returns 1 when the job died or never got healthy.
wait_healthy() {
  local name=$1 limit=${2:-60} code seen="" i
  local t_end=$((SECONDS + limit))
  while [ $SECONDS -lt $t_end ]; do
    if [ -z "${MPI[$name]}" ]; then
      MPI[$name]=$(pgrep -P "${PID[$name]}" | head -1)
      [ -n "${MPI[$name]}" ] && ALL_PIDS+=("${MPI[$name]}")
    fi
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:${PORT[$name]}/health")
    case " $seen " in *" $code "*) ;; *) seen="$seen $code" ;; esac
    [ "$code" = 200 ] && break
    kill -0 "${PID[$name]}" 2>/dev/null || break
    sleep 0.05
  done
  HEALTH[$name]="${seen# }"
  [ "$code" = 200 ] || { echo "server $name never healthy (codes: ${HEALTH[$name]}); log:"; tail -20 "$W/$name.log" | sed 's/^/    /'; return 1; }
  if [ -n "${MPI[$name]}" ] && tr '\0' ' ' <"/proc/${MPI[$name]}/cmdline" | grep -q mpirun; then
    RANKS[$name]=$(rank_pids "${MPI[$name]}")
    for i in ${RANKS[$name]}; do ALL_PIDS+=("$i"); done
  else
    RANKS[$name]=${MPI[$name]} # one plain process: timeout's child is hyinfer itself
  fi
  return 0
}

# wait_exit NAME SECONDS: waits for the launcher (call it in the main shell, not in $(...)); sets
# RC to its exit status, or to "timeout" when it is still running after SECONDS
wait_exit() {
  local name=$1 t_end=$((SECONDS + $2))
  while kill -0 "${PID[$name]}" 2>/dev/null && [ $SECONDS -lt $t_end ]; do sleep 0.1; done
  if kill -0 "${PID[$name]}" 2>/dev/null; then RC=timeout; return; fi
  wait "${PID[$name]}" 2>/dev/null
  RC=$?
}

# procs_left NAME SECONDS: the job's recorded pids still alive (zombies excluded) after waiting
procs_left() {
  local name=$1 t_end=$((SECONDS + $2)) p left
  while :; do
    left=""
    for p in ${PID[$name]} ${MPI[$name]} ${RANKS[$name]:-}; do ours_alive "$p" && left="$left $p"; done
    [ -z "$left" ] || [ $SECONDS -ge $t_end ] && break
    sleep 0.1
  done
  echo "${left# }"
}

# worker_*  LOG RANK: fields of "dist: rank R done: N collectives, log hash H, S steps, dummy steps D"
# (every rank logs it when the job ends; the "S steps" field only in newer builds)
worker_done_line() { grep -m1 "dist: rank $2 done:" "$1"; }
worker_hash() { worker_done_line "$1" "$2" | sed -n 's/.*log hash \([0-9a-f]*\).*/\1/p'; }
worker_dummy() { worker_done_line "$1" "$2" | sed -n 's/.*dummy steps \([0-9]*\).*/\1/p'; }
worker_steps() { worker_done_line "$1" "$2" | sed -n 's/.*, \([0-9]*\) steps,.*/\1/p'; }
worker_colls() { worker_done_line "$1" "$2" | sed -n 's/.*done: \([0-9]*\) collectives.*/\1/p'; }

# cpu_ticks PID: utime + stime in clock ticks
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }

# two_netns PREFIX ADDR_A ADDR_B: two "hosts" on this machine: network namespaces NSA / NSB
# (PREFIX"A"$$ / PREFIX"B"$$) joined by a veth pair VA / VB with ADDR_A/24 and ADDR_B/24, loopback up;
# the EXIT trap then runs dist_cleanup and two_netns_cleanup (kills what runs in them, deletes them).
# Exits 77 (skip) when the namespaces or the veth pair cannot be made; their errors go under $W.
two_netns() {
  NSA="${1}A$$"; NSB="${1}B$$"; VA="${1}a$$"; VB="${1}b$$"
  trap 'dist_cleanup; two_netns_cleanup' EXIT
  if ! { ip netns add "$NSA" && ip netns add "$NSB"; } 2>"$W/netns.err"; then
    echo "skip: cannot create network namespaces: $(cat "$W/netns.err")"; exit 77
  fi
  if ! { ip link add "$VA" type veth peer name "$VB" && ip link set "$VA" netns "$NSA" &&
         ip link set "$VB" netns "$NSB" && ip -n "$NSA" addr add "$2/24" dev "$VA" &&
         ip -n "$NSB" addr add "$3/24" dev "$VB" && ip -n "$NSA" link set "$VA" up &&
         ip -n "$NSB" link set "$VB" up && ip -n "$NSA" link set lo up && ip -n "$NSB" link set lo up; } 2>"$W/veth.err"; then
    echo "skip: cannot join the namespaces with a veth pair: $(cat "$W/veth.err")"; exit 77
  fi
}
# two_netns_ask WHERE PORT TAG: the two requests PATHS[i] / REQS[i] (i = 0, 1) sent at once to
# 127.0.0.1:PORT, from namespace NSA (WHERE a) or from here; each answer's [content or text,
# finish_reason] as JSON in $W/TAG.i.txt ("bad response: ..." when it is not a completion).
two_netns_ask() {
  local where=$1 port=$2 tag=$3 i pids=() pre=()
  [ "$where" = a ] && pre=(ip netns exec "$NSA")
  for i in 0 1; do
    "${pre[@]}" curl -s --max-time 60 "http://127.0.0.1:$port${PATHS[$i]}" -H 'Content-Type: application/json' \
      -d "${REQS[$i]}" >"$W/$tag.$i.json" &
    pids+=($!)
  done
  wait "${pids[@]}"
  for i in 0 1; do
    "$PY" -c 'import json,sys
c=json.load(open(sys.argv[1]))["choices"][0]
print(json.dumps([c.get("message",{}).get("content", c.get("text")), c["finish_reason"]]))' "$W/$tag.$i.json" \
      >"$W/$tag.$i.txt" 2>/dev/null || echo "bad response: $(head -c 300 "$W/$tag.$i.json")" >"$W/$tag.$i.txt"
  done
}
two_netns_cleanup() {
  local ns p
  for ns in "$NSA" "$NSB"; do
    ip netns list 2>/dev/null | grep -qw "$ns" || continue
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  sleep 0.2
  for ns in "$NSA" "$NSB"; do ip netns del "$ns" 2>/dev/null; done
  ip link del "$VA" 2>/dev/null
  return 0
}

dist_finish() {
  local name=$1
  if [ $fails -eq 0 ]; then echo "$name: all checks passed ($SECONDS s)"; exit 0; fi
  echo "$name: $fails check(s) failed ($SECONDS s)"
  exit 1
}
