#!/usr/bin/env bash
# hyinfer starting its own multi-rank job on one host, without mpirun (src/cli/launch.h), as root on
# a small machine with none of Open MPI's root / oversubscription variables set:
#   - generate -tp 2 (greedy, float32): the completion equals one process's, and the one launch line
#     names mpirun -np 2;
#   - logits -tp 2 --json: byte-identical to one process's;
#   - serve -tp 2: a greedy chat and a completion equal one process's; SIGTERM to the hyinfer that was
#     started ends the job with exit status 0 and leaves no process;
#   - run --yaml with parallel_config.world_size 2 (configs/default.yaml cut down): the completions
#     file equals the world_size 1 run's;
#   - bench latency -tp 2 runs on 2 ranks; mistakes in the multi-node flags exit 2 with a sentence;
#   - without mpirun on PATH: exit 2 and the message says what to install.
# Skipped (77) without mpirun / Open MPI headers.
source "$(dirname "$0")/lib.sh"
dist_require
unset OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_rmaps_base_oversubscribe
W=build/dist-self-launch
rm -rf "$W"; mkdir -p "$W"
ROOT=$(pwd)

# --- generate and logits -------------------------------------------------------------------------
G=(generate -m "$MODEL" -p "Once upon a time there was a little cat" -n 24 --temperature 0 --dtype float32)
timeout 60 "$BIN" "${G[@]}" -t 1 >"$W/gen1.txt" 2>"$W/gen1.err" || bad "one-process generate failed: $(tail -2 "$W/gen1.err")"
t0=$SECONDS
timeout 60 "$BIN" "${G[@]}" -tp 2 >"$W/gen2.txt" 2>"$W/gen2.err"
rc=$?
if [ $rc = 0 ] && [ -s "$W/gen1.txt" ] && cmp -s "$W/gen1.txt" "$W/gen2.txt"; then
  ok "generate -tp 2 without mpirun ($((SECONDS - t0)) s): equal to one process: $(head -c 60 "$W/gen2.txt" | tr '\n' ' ')"
else
  bad "generate -tp 2: exit $rc, '$(head -c 80 "$W/gen2.txt")' vs '$(head -c 80 "$W/gen1.txt")'"; tail -5 "$W/gen2.err" | sed 's/^/    /'
fi
line=$(grep -c '^hyinfer: starting 2 ranks on this host .*: mpirun -np 2 ' "$W/gen2.err")
[ "$line" = 1 ] && ok "one launch line: $(grep -m1 '^hyinfer: starting' "$W/gen2.err" | cut -c1-110)..." \
  || bad "expected one 'hyinfer: starting 2 ranks on this host' line, saw $line"
grep -q "dist: rank 1/2" "$W/gen2.err" && ok "rank 1 of 2 ran" || bad "no rank 1/2 in the log"

L=(logits -m "$MODEL" -p "The quick brown fox" --dtype float32 --json -t 1)
timeout 60 "$BIN" "${L[@]}" >"$W/log1.json" 2>/dev/null
timeout 60 "$BIN" "${L[@]}" -tp 2 >"$W/log2.json" 2>"$W/log2.err"
rc=$?
[ $rc = 0 ] && [ -s "$W/log1.json" ] && cmp -s "$W/log1.json" "$W/log2.json" && ok "logits -tp 2 --json: byte-identical to one process" \
  || bad "logits -tp 2: exit $rc, outputs differ or empty"

# --- serve -----------------------------------------------------------------------------------------
REQS=('{"model":"hy3","messages":[{"role":"user","content":"Tell me a short story about a cat."}],"max_tokens":24,"temperature":0}'
      '{"model":"hy3","prompt":"Once upon a time","max_tokens":24,"temperature":0}')
PATHS=(/v1/chat/completions /v1/completions)
ask() { # ask NAME: both requests, one after the other; the texts in $W/NAME.i.txt
  local i
  for i in 0 1; do
    curl -s --max-time 30 "http://127.0.0.1:${PORT[$1]}${PATHS[$i]}" -H 'Content-Type: application/json' -d "${REQS[$i]}" |
      "$PY" -c 'import json,sys
c=json.load(sys.stdin)["choices"][0]
print(json.dumps([c.get("message",{}).get("content", c.get("text")), c["finish_reason"]]))' >"$W/$1.$i.txt" 2>/dev/null ||
      echo "bad response" >"$W/$1.$i.txt"
  done
}
dist_serve one 0 --dtype float32 --max-model-len 256
if wait_healthy one 60; then ask one; kill -TERM "${RANKS[one]}"; wait_exit one 20; else bad "one-process server not healthy"; fi

port=$(free_port); PORT[two]=$port
t0=$SECONDS
timeout -k 5 "$JOB_LIMIT" "$BIN" serve "$MODEL" --port "$port" --served-model-name hy3 --dtype float32 --max-model-len 256 \
  -tp 2 >"$W/two.log" 2>&1 &
PID[two]=$!; MPI[two]=""; ALL_PIDS+=("${PID[two]}")
if wait_healthy two 60; then
  note "serve -tp 2 healthy after $((SECONDS - t0)) s"
  ask two
  for i in 0 1; do
    if cmp -s "$W/one.$i.txt" "$W/two.$i.txt" && ! grep -q '^bad' "$W/one.$i.txt"; then
      ok "serve -tp 2 without mpirun, ${PATHS[$i]}: equal to one process: $(head -c 80 "$W/two.$i.txt")..."
    else
      bad "serve -tp 2, ${PATHS[$i]}: $(cat "$W/two.$i.txt") vs one process: $(cat "$W/one.$i.txt")"
    fi
  done
  launcher=$(pgrep -P "${PID[two]}" | head -1) # timeout's child: the hyinfer that was started
  tree=$(proc_tree "$launcher" | paste -sd' ')
  kill -TERM "$launcher"
  wait_exit two 30
  [ "$RC" = 0 ] && ok "SIGTERM to the started hyinfer: the job ended with exit status 0" || bad "exit status after SIGTERM: $RC"
  sleep 0.3
  left=""; for p in $tree; do ours_alive "$p" && left="$left $p"; done
  [ -z "$left" ] && ok "no process of the job left (was: $tree)" || bad "processes left:$left"
else
  bad "serve -tp 2 never healthy"
fi

# --- run --yaml with world_size 2 --------------------------------------------------------------
mk_yaml() { # mk_yaml WORLD OUT
  sed -e "s|model_path: .*|model_path: \"$ROOT/$MODEL\"|" -e 's|dtype: "bfloat16"|dtype: "float32"|' \
      -e "s|world_size: 1|world_size: $1|" -e 's|max_new_tokens: 64|max_new_tokens: 12|' -e 's|batch_size: 8|batch_size: 2|' \
      -e "/^model_config:/a\\  output_path: \"$ROOT/$W/run$1.json\"" configs/default.yaml >"$2"
}
mk_yaml 1 "$W/w1.yaml"; mk_yaml 2 "$W/w2.yaml"
timeout 90 "$BIN" run --yaml "$W/w1.yaml" -t 1 >"$W/run1.out" 2>"$W/run1.err" || bad "run world_size 1 failed: $(tail -2 "$W/run1.err")"
t0=$SECONDS
timeout 90 "$BIN" run --yaml "$W/w2.yaml" >"$W/run2.out" 2>"$W/run2.err"
rc=$?
if [ $rc = 0 ] && [ -s "$W/run1.json" ] && cmp -s "$W/run1.json" "$W/run2.json" && grep -q 'starting 2 ranks' "$W/run2.err"; then
  ok "run --yaml world_size 2 without mpirun ($((SECONDS - t0)) s): completions equal to world_size 1"
else
  bad "run --yaml world_size 2: exit $rc; files $(wc -c <"$W/run1.json" 2>/dev/null) / $(wc -c <"$W/run2.json" 2>/dev/null) bytes"; tail -4 "$W/run2.err" | sed 's/^/    /'
fi

# --- bench latency -tp 2, and the multi-node flags' mistakes (exit 2, a sentence each) --------------
timeout 90 "$BIN" bench latency -m "$MODEL" -tp 2 --prompt-lens 16 --batch-sizes 1 --decode-steps 2 >"$W/bl.out" 2>"$W/bl.err"
rc=$?
[ $rc = 0 ] && grep -q 'starting 2 ranks' "$W/bl.err" && grep -q 'dist: rank 1 done' "$W/bl.err" \
  && ok "bench latency -tp 2 without mpirun ran on 2 ranks" || bad "bench latency -tp 2: exit $rc: $(tail -2 "$W/bl.err")"
check2() { # check2 WHAT EXPECTED-TEXT FLAGS...: exit 2 with the text in the message
  local what=$1 want=$2; shift 2
  timeout 20 "$BIN" generate -m "$MODEL" -p hi -n 2 "$@" >/dev/null 2>"$W/e.err"
  local rc=$?
  [ $rc = 2 ] && grep -qF -- "$want" "$W/e.err" && ok "$what: exit 2: $(head -1 "$W/e.err" | cut -c1-110)" \
    || bad "$what: exit $rc: $(head -2 "$W/e.err")"
}
check2 "--data-parallel-size-local without an address" "needs --data-parallel-address" -dp 2 --data-parallel-size-local 1
check2 "--headless on start rank 0" "--headless needs --data-parallel-start-rank" -dp 2 --data-parallel-size-local 1 \
  --data-parallel-address 127.0.0.1 --headless
check2 "start rank past the DP size" "exceed --data-parallel-size 2" -dp 2 --data-parallel-size-local 1 \
  --data-parallel-address 127.0.0.1 --headless --data-parallel-start-rank 2
check2 "--ips naming no address of this host" "none of these addresses is on this host" -tp 2 --ips 192.0.2.77,192.0.2.78
check2 "an address that does not resolve" "does not resolve" -dp 2 --data-parallel-size-local 1 \
  --data-parallel-address no-such-host.invalid

# --- no mpirun ------------------------------------------------------------------------------------
mkdir -p "$W/emptypath"
PATH="$ROOT/$W/emptypath" "$ROOT/$BIN" generate -m "$MODEL" -p hi -n 2 -tp 2 >/dev/null 2>"$W/nompi.err"
rc=$?
[ $rc = 2 ] && grep -q '`make mpi` installs it' "$W/nompi.err" \
  && ok "without mpirun on PATH: exit 2: $(cut -c1-120 "$W/nompi.err")" || bad "without mpirun: exit $rc: $(cat "$W/nompi.err")"
dist_finish test_self_launch
