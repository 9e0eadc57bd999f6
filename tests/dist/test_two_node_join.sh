#!/usr/bin/env bash
# Nodes started one by one, each with its own command, joining into one job (src/cli/join.h), on two
# "hosts": network namespaces A (10.203.0.1) and B (10.203.0.2) joined by a veth pair, each with its
# own hostname (the namespace setup of test_two_hosts.sh). No mpirun and no ssh are given: node 1
# (the leader) runs mpirun itself, whose daemon on B is started over B's registered connection.
#   - vLLM's two node scripts (the Hy4 guide's, every flag but --quantization ascend, scaled to -tp 2
#     -dp 2 = 4 ranks, 2 per host, on hy3-tiny in float32, MTP 3 drafts): node 1 `serve ... --data-parallel-size 2 --data-parallel-size-local 1
#     --data-parallel-address 10.203.0.1 --data-parallel-rpc-port 12890`, node 2 the same plus
#     `--headless --data-parallel-start-rank 1`: two greedy requests at once answer exactly like one
#     process; the start-up time (leader start -> first /health 200) is printed; SIGTERM to node 1
#     ends both nodes with 0 and leaves no process in either namespace;
#   - node 2 killed while the job runs: node 1 exits non-zero naming node-hyB;
#   - the cann-recipes form: the same `run --yaml` (world_size 4) with `--ips 10.203.0.1,10.203.0.2`
#     on both nodes, each finding its index from its own address: the completions equal one process's;
#   - node 2 never started: node 1 exits 1 within --dist-join-timeout (5 s) + 5 s, naming the missing
#     node (--data-parallel-start-rank 1).
# Skipped (77) without root, ip netns, veth or mpirun.
source "$(dirname "$0")/lib.sh"
dist_require
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root (network namespaces)"; exit 77; }
command -v ip >/dev/null || { echo "skip: no ip (iproute2)"; exit 77; }
unset OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_rmaps_base_oversubscribe
W=build/dist-two-node-join
rm -rf "$W"; mkdir -p "$W"
ROOT=$(pwd)
A=10.203.0.1; B=10.203.0.2
two_netns hyj $A $B
# on_node NS HOSTNAME CMD...: CMD inside namespace NS, with its own hostname when UTS namespaces work
if unshare --uts true 2>/dev/null; then
  on_node() { local ns=$1 hn=$2; shift 2; ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$hn" "$@"; }
else
  on_node() { local ns=$1; shift 2; ip netns exec "$ns" "$@"; }
fi
in_a() { ip netns exec "$NSA" "$@"; }
code_a() { in_a curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$1/health"; }
# alive PID...: the ones still running
alive() { local p out=""; for p in "$@"; do kill -0 "$p" 2>/dev/null && out="$out $p"; done; echo "${out# }"; }
# wait_gone SECONDS PID...: waits until none runs; 0 when so
wait_gone() { local t_end=$((SECONDS + $1)); shift; while [ -n "$(alive "$@")" ] && [ $SECONDS -lt $t_end ]; do sleep 0.1; done; [ -z "$(alive "$@")" ]; }
ns_left() { echo "$(ip netns pids "$NSA" | paste -sd' ') $(ip netns pids "$NSB" | paste -sd' ')" | sed 's/^ *//;s/ *$//'; }

# The Hy4 guide's two node scripts with `hyinfer serve` for `vllm serve`, the addresses substituted and
# scaled to 4 ranks (-tp 16 -> 2); on hy3-tiny (Hy4-preview refuses attention-DP groups, docs/hy4.md)
# without --quantization ascend (not a W8A8 checkpoint), in float32 so the answers can be compared.
GUIDE=(--max-num-seqs 8 --max-model-len 512 --max-num-batched-tokens 512 --enable-expert-parallel --trust-remote-code
       --gpu-memory-utilization 0.92 --seed 1024 --compilation-config '{"cudagraph_mode": "FULL_DECODE_ONLY"}'
       --speculative-config '{"method": "mtp","num_speculative_tokens": 3}'
       --additional-config '{"enable_mlapo": true, "enable_fused_mc2": 1, "ascend_compilation_config": {"enable_npugraph_ex": true}}')
NODE=(serve "$ROOT/$MODEL" --host 127.0.0.1 --port 8000 --tensor-parallel-size 2 --served-model-name hy3 "${GUIDE[@]}"
      --data-parallel-size 2 --data-parallel-size-local 1 --data-parallel-address $A --data-parallel-rpc-port 12890
      --dtype float32 --dist-join-timeout 30)
NODE2=("${NODE[@]}" --headless --data-parallel-start-rank 1)

REQS=('{"model":"hy3","messages":[{"role":"user","content":"Tell me a short story about a cat."}],"max_tokens":32,"temperature":0,"ignore_eos":true}'
      '{"model":"hy3","prompt":"Once upon a time","max_tokens":32,"temperature":0,"ignore_eos":true}')
PATHS=(/v1/chat/completions /v1/completions)

# --- reference: one process ------------------------------------------------------------------------
dist_serve one 0 --dtype float32 "${GUIDE[@]}"
if wait_healthy one 60; then two_netns_ask here "${PORT[one]}" one; kill -TERM "${RANKS[one]}"; wait_exit one 20
else bad "one-process server not healthy"; fi

# --- vLLM's form: two node scripts ----------------------------------------------------------------
t0=$(date +%s%N)
on_node "$NSA" node-hyA timeout -k 5 "$JOB_LIMIT" "$ROOT/$BIN" "${NODE[@]}" >"$W/node1.log" 2>&1 &
N1=$!; ALL_PIDS+=("$N1")
sleep 1
on_node "$NSB" node-hyB timeout -k 5 "$JOB_LIMIT" "$ROOT/$BIN" "${NODE2[@]}" >"$W/node2.log" 2>&1 &
N2=$!; ALL_PIDS+=("$N2")
code=000; t_end=$((SECONDS + 60))
while [ $SECONDS -lt $t_end ] && kill -0 $N1 2>/dev/null; do code=$(code_a 8000); [ "$code" = 200 ] && break; sleep 0.05; done
if [ "$code" = 200 ]; then
  up=$((($(date +%s%N) - t0) / 1000000))
  ok "two nodes joined into one 4-rank job: /health 200 $((up / 1000)).$((up % 1000 / 100)) s after node 1 started (node 2 started 1 s later)"
  two_netns_ask a 8000 two
  for i in 0 1; do
    if cmp -s "$W/one.$i.txt" "$W/two.$i.txt" && ! grep -q '^bad' "$W/one.$i.txt"; then
      ok "2 nodes x 2 ranks, ${PATHS[$i]}: equal to one process: $(head -c 80 "$W/two.$i.txt")..."
    else
      bad "2 nodes, ${PATHS[$i]}: $(cat "$W/two.$i.txt") vs one process: $(cat "$W/one.$i.txt")"
    fi
  done
  grep -q "node node-hyB ($B) joined with ranks 2-3" "$W/node1.log" && ok "node 1 logged node-hyB ($B) joining with ranks 2-3" \
    || bad "no 'node node-hyB ($B) joined with ranks 2-3' line in node 1's log"
  n=$(grep -c "dist: rank [0-3]/4 holds" "$W/node1.log")
  [ "$n" = 4 ] && ok "4 ranks loaded their shards" || bad "$n of 4 ranks logged their shard"
  lead="" # the hyinfer started on node 1 (not a rank: no OMPI_COMM_WORLD_RANK)
  for p in $(proc_tree $N1); do tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -q "^$ROOT/$BIN serve" &&
    ! tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=' && { lead=$p; break; }; done
  kill -TERM "$lead"
  if wait_gone 30 $N1 $N2; then
    wait $N1; r1=$?; wait $N2; r2=$?
    [ $r1 = 0 ] && [ $r2 = 0 ] && ok "SIGTERM to node 1 (pid $lead): both nodes exit 0" || bad "after SIGTERM: node 1 exit $r1, node 2 exit $r2"
  else
    bad "nodes still running 30 s after SIGTERM to node 1: $(alive $N1 $N2)"
  fi
  sleep 0.5
  left=$(ns_left); [ -z "$left" ] && ok "no process left in either namespace" || bad "processes left in the namespaces: $left"
else
  bad "the two nodes never served (codes: $code)"; tail -8 "$W/node1.log" | sed 's/^/    1| /'; tail -4 "$W/node2.log" | sed 's/^/    2| /'
fi

# --- node 2 dropping out ---------------------------------------------------------------------------
on_node "$NSA" node-hyA timeout -k 5 "$JOB_LIMIT" "$ROOT/$BIN" "${NODE[@]}" --data-parallel-rpc-port 12892 >"$W/drop1.log" 2>&1 &
N1=$!; ALL_PIDS+=("$N1")
on_node "$NSB" node-hyB timeout -k 5 "$JOB_LIMIT" "$ROOT/$BIN" "${NODE2[@]}" --data-parallel-rpc-port 12892 >"$W/drop2.log" 2>&1 &
N2=$!; ALL_PIDS+=("$N2")
code=000; t_end=$((SECONDS + 60))
while [ $SECONDS -lt $t_end ] && kill -0 $N1 2>/dev/null; do code=$(code_a 8000); [ "$code" = 200 ] && break; sleep 0.1; done
if [ "$code" = 200 ]; then
  f=""; for p in $(proc_tree $N2); do tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -q "^$ROOT/$BIN serve" && { f=$p; break; }; done
  t1=$SECONDS
  kill -9 "$f"
  if wait_gone 30 $N1; then
    wait $N1; r1=$?
    msg=$(grep -m1 -E "dropped out|lost communication" "$W/drop1.log")
    [ $r1 != 0 ] && grep -q "node node-hyB ($B, ranks 2-3) dropped out" "$W/drop1.log" \
      && ok "node 2 killed: node 1 exit $r1 after $((SECONDS - t1)) s: $(grep -m1 'dropped out' "$W/drop1.log" | cut -c1-100)" \
      || bad "node 2 killed: node 1 exit $r1, message: ${msg:-none}"
  else
    bad "node 1 still running 30 s after node 2 was killed"
  fi
  wait_gone 10 $N2
  sleep 0.5
  left=$(ns_left); [ -z "$left" ] && ok "no process left after the drop-out" || bad "processes left after the drop-out: $left"
else
  bad "drop-out case: the job never served"; tail -5 "$W/drop1.log" | sed 's/^/    /'
fi

# --- the cann-recipes form: the same command on both nodes ---------------------------------------
mk_yaml() { # mk_yaml WORLD OUT JSON
  sed -e "s|model_path: .*|model_path: \"$ROOT/$MODEL\"|" -e 's|dtype: "bfloat16"|dtype: "float32"|' \
      -e "s|world_size: 4 .*|world_size: $1|" -e 's|max_new_tokens: 64|max_new_tokens: 12|' -e 's|batch_size: 8|batch_size: 2|' \
      -e "/^model_config:/a\\  output_path: \"$3\"" configs/recipe-4ranks.yaml >"$2"
}
mk_yaml 4 "$W/r4.yaml" "$ROOT/$W/recipe4.json"
sed -e 's/world_size: 4/world_size: 1/' -e 's/_tp_size: 2/_tp_size: 1/' -e 's/enable_sp: True/enable_sp: False/' "$W/r4.yaml" |
  sed "s|recipe4.json|recipe1.json|" >"$W/r1.yaml"
timeout 90 "$BIN" run --yaml "$W/r1.yaml" -t 1 >"$W/r1.out" 2>"$W/r1.err" || bad "run world_size 1 failed: $(tail -2 "$W/r1.err")"
RUN=(run --yaml "$ROOT/$W/r4.yaml" --ips "$A,$B" --data-parallel-rpc-port 12891 --dist-join-timeout 30)
t0=$SECONDS
on_node "$NSA" node-hyA timeout -k 5 120 "$ROOT/$BIN" "${RUN[@]}" >"$W/recipe1.log" 2>&1 &
R1=$!; ALL_PIDS+=("$R1")
on_node "$NSB" node-hyB timeout -k 5 120 "$ROOT/$BIN" "${RUN[@]}" >"$W/recipe2.log" 2>&1 &
R2=$!; ALL_PIDS+=("$R2")
wait $R1; r1=$?; wait $R2; r2=$?
if [ $r1 = 0 ] && [ $r2 = 0 ] && [ -s "$W/recipe1.json" ] && cmp -s "$W/recipe1.json" "$W/recipe4.json"; then
  ok "cann-recipes form (--ips $A,$B, the same run --yaml on both, world_size 4) in $((SECONDS - t0)) s: completions equal one process's"
else
  bad "cann-recipes form: exits $r1 / $r2; json $(wc -c <"$W/recipe4.json" 2>/dev/null) vs $(wc -c <"$W/recipe1.json" 2>/dev/null) bytes"
  tail -5 "$W/recipe1.log" | sed 's/^/    1| /'; tail -3 "$W/recipe2.log" | sed 's/^/    2| /'
fi
grep -q "joining the leader at $A:12891" "$W/recipe2.log" && ok "node 2 found its index (1) from its own address" \
  || bad "node 2 did not act as node 1 of --ips: $(head -2 "$W/recipe2.log")"

# --- node 2 never started ----------------------------------------------------------------------
t0=$SECONDS
on_node "$NSA" node-hyA timeout -k 5 60 "$ROOT/$BIN" "${NODE[@]}" --dist-join-timeout 5 >"$W/alone.log" 2>&1
rc=$?
dt=$((SECONDS - t0))
msg=$(grep -m1 "never joined" "$W/alone.log")
if [ $rc != 0 ] && [ $dt -le 10 ] && [[ "$msg" == *"--data-parallel-start-rank 1"* ]]; then
  ok "node 2 never started: node 1 exit $rc after $dt s: ${msg#hyinfer: }"
else
  bad "node 2 never started: exit $rc after $dt s, message: ${msg:-$(tail -2 "$W/alone.log")}"
fi
dist_finish test_two_node_join
