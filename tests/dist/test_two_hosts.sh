#!/usr/bin/env bash
# Two "hosts" on one machine: network namespaces A (10.201.0.1/24) and B (10.201.0.2/24) joined by a
# veth pair, each with its own hostname (unshare --uts; without it: --mca btl self,tcp only, as both
# would share /dev/shm names). mpirun runs inside A with --host 10.201.0.1:2,10.201.0.2:2 and starts
# B's daemon through tests/dist/nsrsh.sh (ip netns exec B) instead of ssh; out-of-band and MPI
# traffic between the hosts go over TCP on 10.201.0.0/24 (shared memory within a host).
#   - logits --dtype float32 --all-positions --json --enable-expert-parallel on 2+2 ranks: the JSON
#     is byte-identical (md5) to one process's, and the ranks ran on both hostnames;
#   - serve on 2+2 ranks (-tp 2 -dp 2 --enable-expert-parallel: a DP group per host, experts and
#     vocabulary across both): two greedy requests at once answer exactly like a one-process server,
#     one in each DP group (each group ran steps with tokens of its own);
#     SIGTERM to the leader ends the job with 0 and no process is left in either namespace.
# The namespaces are created and deleted here (trap). Skipped (77) without root, ip netns, veth or
# mpirun.
source "$(dirname "$0")/lib.sh"
dist_require
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root (network namespaces)"; exit 77; }
command -v ip >/dev/null || { echo "skip: no ip (iproute2)"; exit 77; }
W=build/dist-two-hosts
rm -rf "$W"; mkdir -p "$W"
ROOT=$(pwd)
two_netns hy 10.201.0.1 10.201.0.2
if unshare --uts true 2>/dev/null; then
  UTS=1; BTL=self,vader,tcp
  export HY_NSRSH_HOSTNAME=node-hyB
else
  UTS=0; BTL=self,tcp
  unset HY_NSRSH_HOSTNAME
fi
export HY_NSRSH_NETNS=$NSB
note "namespaces $NSA / $NSB; own hostnames: $([ $UTS = 1 ] && echo yes || echo no); btl $BTL"

MPI2H=(mpirun --host 10.201.0.1:2,10.201.0.2:2 --mca plm_rsh_agent "$ROOT/tests/dist/nsrsh.sh"
       --mca oob_tcp_if_include 10.201.0.0/24 --mca btl_tcp_if_include 10.201.0.0/24
       --mca pml ob1 --mca btl "$BTL" --mca mpi_yield_when_idle 1 -np 4)
# "${IN_A[@]}" CMD...: runs CMD inside namespace A (with hostname node-hyA when UTS namespaces work)
if [ $UTS = 1 ]; then IN_A=(ip netns exec "$NSA" unshare --uts sh -c 'hostname node-hyA && exec "$@"' sh)
else IN_A=(ip netns exec "$NSA"); fi

# --- logits: bitwise equal to one process ------------------------------------------------------
L=(logits -m "$ROOT/$MODEL" -p "Once upon a time there was a little cat who lived by the sea" --dtype float32
   --all-positions --json -t 1)
"$BIN" "${L[@]}" >"$W/logits1.json" 2>"$W/logits1.err" || bad "one-process logits failed: $(tail -2 "$W/logits1.err")"
t0=$SECONDS
MPIEXEC_TIMEOUT=60 timeout -k 5 70 "${IN_A[@]}" "${MPI2H[@]}" --report-bindings "$ROOT/$BIN" "${L[@]}" --enable-expert-parallel \
  >"$W/logits4.json" 2>"$W/logits4.err"
rc=$?
m1=$(md5sum <"$W/logits1.json" | cut -c1-32); m4=$(md5sum <"$W/logits4.json" | cut -c1-32)
if [ $rc -eq 0 ] && [ "$m1" = "$m4" ] && [ -s "$W/logits1.json" ]; then
  ok "logits on 2+2 ranks across the namespaces ($((SECONDS - t0)) s): md5 $m4 == one process's"
else
  bad "logits on 2+2 ranks: exit $rc, md5 $m4 vs one process $m1"; grep -v '^-*$' "$W/logits4.err" | tail -8 | sed 's/^/    /'
fi
if [ $UTS = 1 ]; then
  hosts=$(grep -o 'node-hy[AB]' "$W/logits4.err" | sort | uniq -c | paste -sd' ')
  [[ "$hosts" == *node-hyA* && "$hosts" == *node-hyB* ]] && ok "ranks bound on both hosts: $hosts" \
    || bad "mpirun did not report ranks on node-hyA and node-hyB: '$hosts'"
fi
nh=$(grep -c "dist: rank [0-3] done:" "$W/logits4.err")
[ "$nh" = 4 ] && [ "$(sed -n 's/.*log hash \([0-9a-f]*\).*/\1/p' "$W/logits4.err" | sort -u | wc -l)" = 1 ] \
  && ok "4 ranks logged the same collective log hash" || bad "log hash lines: $nh, hashes differ or missing"

# --- serve on 2+2 ranks vs one process ---------------------------------------------------------
# ignore_eos: both run 48 steps, so the two (sent by two curl processes) surely overlap in the server
REQS=('{"model":"hy3","messages":[{"role":"user","content":"Tell me a short story about a cat."}],"max_tokens":48,"temperature":0,"ignore_eos":true}'
      '{"model":"hy3","prompt":"Once upon a time","max_tokens":48,"temperature":0,"ignore_eos":true}')
PATHS=(/v1/chat/completions /v1/completions)
# health WHERE PORT PID: polls /health until 200 (1) or the launcher died / 60 s (0)
health() {
  local where=$1 port=$2 pid=$3 code t_end=$((SECONDS + 60))
  while [ $SECONDS -lt $t_end ]; do
    if [ "$where" = a ]; then code=$(ip netns exec "$NSA" curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/health")
    else code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/health"); fi
    [ "$code" = 200 ] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

dist_serve one 0 --dtype float32 --max-model-len 256
if wait_healthy one 60; then
  two_netns_ask here "${PORT[one]}" one
  kill -TERM "${RANKS[one]}"; wait_exit one 20
else
  bad "one-process server not healthy"
fi

SPORT=8000 # namespace A is fresh: its ports are free
MPIEXEC_TIMEOUT=$JOB_LIMIT timeout -k 5 $((JOB_LIMIT + 10)) "${IN_A[@]}" "${MPI2H[@]}" "$ROOT/$BIN" serve "$ROOT/$MODEL" \
  --port $SPORT --served-model-name hy3 -t 1 --dtype float32 --max-model-len 256 -tp 2 -dp 2 --enable-expert-parallel \
  >"$W/serve4.log" 2>&1 &
SP=$!; ALL_PIDS+=("$SP")
t0=$SECONDS
if health a $SPORT $SP; then
  note "serve 2+2 healthy after $((SECONDS - t0)) s"
  t0=$SECONDS
  two_netns_ask a $SPORT four
  note "requests answered in $((SECONDS - t0)) s"
  t0=$SECONDS
  for i in 0 1; do
    if cmp -s "$W/one.$i.txt" "$W/four.$i.txt" && ! grep -q '^bad' "$W/one.$i.txt"; then
      ok "serve 2+2 ranks, ${PATHS[$i]}: equal to one process: $(head -c 100 "$W/four.$i.txt")..."
    else
      bad "serve 2+2 ranks, ${PATHS[$i]}: $(cat "$W/four.$i.txt") vs one process: $(cat "$W/one.$i.txt")"
    fi
  done
  lead=$(ip netns pids "$NSA" | while read -r p; do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=0 && echo "$p"; done | head -1)
  [ -n "$lead" ] && kill -TERM "$lead"
  t_end=$((SECONDS + 30))
  while kill -0 $SP 2>/dev/null && [ $SECONDS -lt $t_end ]; do sleep 0.1; done
  if kill -0 $SP 2>/dev/null; then bad "serve 2+2: still running 30 s after SIGTERM to the leader"
  else
    wait $SP; rc=$?
    [ $rc = 0 ] && ok "serve 2+2: SIGTERM to the leader (pid ${lead:-?}): exit 0 after $((SECONDS - t0)) s" || bad "serve 2+2: exit $rc after SIGTERM"
  fi
  sleep 0.5
  left="$(ip netns pids "$NSA" | paste -sd' ') $(ip netns pids "$NSB" | paste -sd' ')"
  [ -z "${left// /}" ] && ok "no process left in either namespace" || bad "processes left in the namespaces: $left"
  grep "dist: rank [0-3] done:" "$W/serve4.log" | sed 's/^hyinfer: info: /     /'
  busy=0 # each DP group (ranks 0-1 on A, 2-3 on B) computed tokens of its own in some step
  for r in 0 2; do
    st=$(worker_steps "$W/serve4.log" $r); du=$(worker_dummy "$W/serve4.log" $r)
    [ -n "$st" ] && [ -n "$du" ] && [ "$du" -lt "$st" ] && busy=$((busy + 1))
  done
  [ $busy = 2 ] && ok "both DP groups (one per host) ran the requests' tokens (the least busy group takes a new sequence)" \
    || bad "a DP group ran only dummy steps: the two concurrent requests were not spread over the hosts"
else
  bad "serve on 2+2 ranks never healthy:"; grep -v '^-*$' "$W/serve4.log" | tail -10 | sed 's/^/    /'
fi
dist_finish test_two_hosts
