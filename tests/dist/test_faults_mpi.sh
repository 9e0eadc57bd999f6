#!/usr/bin/env bash
# Failure paths and rank bookkeeping of `hyinfer` under mpirun (hy3-tiny, one thread per rank):
#   (a) ranks started with different settings (MPMD `mpirun -np 1 A : -np 1 B`) all exit non-zero
#       within 20 s naming what differs: generate --dtype float32 vs bfloat16; serve
#       --max-num-batched-tokens 64 vs 32; the same model path holding a different config.json
#       (each rank in its own working directory: "config.json of the model");
#   (f) an idle 2-rank server: the worker rank uses < 10% of a core over 5 s (utime + stime);
#   (b) kill -9 of worker rank 1 while the leader streams a long answer: mpirun exits non-zero
#       within 30 s, the client sees an error or a closed stream, no process of the job remains;
#   (c) HYINFER_DIST_FAULT=skip:1:N (N: half of the collectives of a clean 2-rank generate, whose
#       greedy text must equal one process's) with HYINFER_DIST_STEP_TIMEOUT=3: the job ends
#       non-zero within 30 s, with the fault and the watchdog (or an MPI error) in its output;
#   (d) DP2 + EP (-tp 1 -dp 2 --enable-expert-parallel) serve: one request, then three of very
#       different lengths at once all complete; after SIGTERM the worker's "dummy steps" > 0;
#   (e) a 4-rank EP serve: a streaming client disconnects early, a stop string, max_tokens while a
#       second stream is dropped, then the same greedy answer as before; after SIGTERM to the
#       leader every rank (the leader too) logs "dist: rank R done: ..., log hash H" and all H are equal.
#       Per-request timeouts are not tested: the server has no such request parameter.
# Skipped (77) without mpirun, Open MPI headers, node or the openai package.
source "$(dirname "$0")/lib.sh"
dist_require node
W=build/dist-faults
rm -rf "$W"; mkdir -p "$W"
ABS_BIN=$(pwd)/$BIN

# --- (a) start-up disagreement -----------------------------------------------------------------
# mismatch NAME KEY_REGEX MPIRUN_ARGS...: runs `mpirun MPIRUN_ARGS` (app contexts joined by ":") and wants
# a non-zero exit within 20 s with "ranks disagree on KEY_REGEX" in the output
mismatch() {
  local name=$1 rx=$2; shift 2
  local t0=$SECONDS rc
  MPIEXEC_TIMEOUT=40 timeout -k 5 45 "${MPIRUN[@]}" "$@" >"$W/$name.log" 2>&1
  rc=$?
  local dt=$((SECONDS - t0))
  if [ $rc -ne 0 ] && [ $dt -le 20 ] && grep -Eq "ranks disagree on $rx" "$W/$name.log"; then
    ok "(a) $name: exit $rc after ${dt} s: $(grep -m1 -E "ranks disagree on $rx" "$W/$name.log" | sed 's/^hyinfer[^:]*: //; s/^error: //')"
  else
    bad "(a) $name: exit $rc after ${dt} s, want non-zero within 20 s naming /$rx/:"; grep -v '^-*$' "$W/$name.log" | tail -8 | sed 's/^/    /'
  fi
}
G=(generate -m "$MODEL" -p "Once upon a time" -n 4 -t 1 --temperature 0)
mismatch dtype --dtype -np 1 "$BIN" "${G[@]}" --dtype float32 : -np 1 "$BIN" "${G[@]}" --dtype bfloat16
P=$(free_port)
S=(serve "$MODEL" --port "$P" -t 1 --dtype float32)
mismatch batched --max-num-batched-tokens -np 1 "$BIN" "${S[@]}" --max-num-batched-tokens 64 : \
  -np 1 "$BIN" "${S[@]}" --max-num-batched-tokens 32
[ -z "$(pgrep -f -- "--port $P ")" ] || bad "(a) batched: a serve process with port $P remains"
for h in hA hB; do
  mkdir -p "$W/$h/m"
  for f in "$MODEL"/*; do [ "$(basename "$f")" = config.json ] || ln -s "$(pwd)/$f" "$W/$h/m/"; done
done
cp "$MODEL/config.json" "$W/hA/m/config.json"
sed 's/"rms_norm_eps": *[0-9.e-]*/"rms_norm_eps": 1e-06/' "$MODEL/config.json" >"$W/hB/m/config.json"
cmp -s "$W/hA/m/config.json" "$W/hB/m/config.json" && bad "(a) config: could not make a different config.json"
C=(generate -m m -p "Once upon a time" -n 4 -t 1 --temperature 0 --dtype float32)
mismatch config "config.json of the model" -np 1 -wdir "$W/hA" "$ABS_BIN" "${C[@]}" : -np 1 -wdir "$W/hB" "$ABS_BIN" "${C[@]}"

# --- (f) idle CPU, then (b) kill -9 of a worker mid-stream, on one 2-rank server -----------------
dist_serve kill 2 --dtype float32 --enable-expert-parallel
if wait_healthy kill 60; then
  B="http://127.0.0.1:${PORT[kill]}"
  curl -s "$B/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"hy3","prompt":"Once upon a time","max_tokens":16,"temperature":0}' >"$W/warm.json"
  grep -q '"completion_tokens":16' "$W/warm.json" || bad "(f) warm-up request: $(head -c 300 "$W/warm.json")"
  sleep 0.5
  read -r lead wk <<<"${RANKS[kill]}"
  c0=$(cpu_ticks "$wk"); l0=$(cpu_ticks "$lead"); t0=$(date +%s.%N)
  sleep 5
  c1=$(cpu_ticks "$wk"); l1=$(cpu_ticks "$lead"); t1=$(date +%s.%N)
  hz=$(getconf CLK_TCK)
  pct=$("$PY" -c "print(f'{100*($c1-$c0)/$hz/($t1-$t0):.1f}')")
  lpct=$("$PY" -c "print(f'{100*($l1-$l0)/$hz/($t1-$t0):.1f}')")
  if "$PY" -c "import sys; sys.exit(0 if ($c1-$c0)/$hz < 0.10*($t1-$t0) else 1)"; then
    ok "(f) idle 2-rank server: worker rank used ${pct}% of a core over 5 s (leader ${lpct}%)"
  else
    bad "(f) idle 2-rank server: worker rank used ${pct}% of a core over 5 s (want < 10%; leader ${lpct}%)"
  fi

  rm -f "$W/streaming"
  timeout 60 node tests/dist/serve_client.mjs long "$B" "$W/streaming" >"$W/long.client" 2>&1 &
  CL=$!; ALL_PIDS+=("$CL")
  for _ in $(seq 1 200); do [ -f "$W/streaming" ] && break; kill -0 $CL 2>/dev/null || break; sleep 0.05; done
  if [ ! -f "$W/streaming" ]; then
    bad "(b) the long stream never started: $(cat "$W/long.client")"
  else
    t0=$SECONDS
    kill -9 "$wk"
    wait_exit kill 30
    dt=$((SECONDS - t0))
    wait $CL; crc=$?
    left=$(procs_left kill 10)
    port_left=$(pgrep -f -- "--port ${PORT[kill]} ")
    client=$(tail -1 "$W/long.client")
    if [ "$RC" = timeout ]; then bad "(b) kill -9 rank 1: mpirun still running after 30 s"
    elif [ "$RC" = 0 ]; then bad "(b) kill -9 rank 1: mpirun exited 0"
    else ok "(b) kill -9 rank 1 mid-stream: mpirun exit $RC after ${dt} s"; fi
    note "(b) mpirun says: $(grep -m1 -E 'exited on signal|noticed' "$W/kill.log" | sed 's/^ *//')"
    case "$client" in
      error*|closed*) ok "(b) client: $client" ;;
      *) bad "(b) client (exit $crc) saw the stream complete: $client" ;;
    esac
    [ -z "$left$port_left" ] && ok "(b) no process of the job remains" || bad "(b) processes remain: $left $port_left"
  fi
else
  bad "(f)/(b) 2-rank server not healthy"
fi

# --- (c) a rank skips a collective: the watchdog ------------------------------------------------
GEN=(generate -m "$MODEL" -p "Once upon a time" -n 16 -t 1 --temperature 0 --dtype float32 --enable-expert-parallel)
"$BIN" "${GEN[@]}" >"$W/gen1.out" 2>/dev/null
MPIEXEC_TIMEOUT=60 timeout -k 5 70 "${MPIRUN[@]}" -np 2 "$BIN" "${GEN[@]}" >"$W/gen2.out" 2>"$W/gen2.err"
rc=$?
C2=$(worker_colls "$W/gen2.err" 1)
if [ $rc -eq 0 ] && [ -n "$C2" ] && cmp -s "$W/gen1.out" "$W/gen2.out"; then
  ok "(c) clean 2-rank generate: greedy text equals one process's; worker ran $C2 collectives"
else
  bad "(c) clean 2-rank generate: exit $rc, collectives '${C2}', text equal: $(cmp -s "$W/gen1.out" "$W/gen2.out" && echo yes || echo no)"
  tail -5 "$W/gen2.err" | sed 's/^/    /'
fi
N=$(( ${C2:-400} / 2 ))
t0=$SECONDS
HYINFER_DIST_FAULT=skip:1:$N HYINFER_DIST_STEP_TIMEOUT=3 MPIEXEC_TIMEOUT=60 timeout -k 5 70 \
  "${MPIRUN[@]}" -x HYINFER_DIST_FAULT -x HYINFER_DIST_STEP_TIMEOUT -np 2 "$BIN" "${GEN[@]}" >"$W/fault.log" 2>&1
rc=$?
dt=$((SECONDS - t0))
how=$(grep -m1 -E 'watchdog' "$W/fault.log" || grep -m1 -iE 'MPI_ERR|error' "$W/fault.log")
if [ $rc -ne 0 ] && [ $dt -le 30 ] && grep -q "fault injection: rank 1 skips collective $N" "$W/fault.log" && [ -n "$how" ]; then
  ok "(c) skip:1:$N, deadline 3 s: exit $rc after ${dt} s: $(echo "$how" | sed 's/^hyinfer: //')"
  grep -q watchdog "$W/fault.log" && note "(c) ended by the engine's watchdog ($(grep -c 'watchdog:' "$W/fault.log") rank(s) reported it)" \
    || note "(c) ended by an MPI error, not the watchdog"
else
  bad "(c) skip:1:$N: exit $rc after ${dt} s (want non-zero within 30 s, the fault and watchdog/MPI error logged):"
  grep -v '^-*$' "$W/fault.log" | tail -10 | sed 's/^/    /'
fi

# --- (d) DP2 + EP: idle DP group runs dummy steps ----------------------------------------------
dist_serve dp 2 --dtype float32 -tp 1 -dp 2 --enable-expert-parallel --max-model-len 512
if wait_healthy dp 60; then
  if timeout 120 node tests/dist/serve_client.mjs mixed "http://127.0.0.1:${PORT[dp]}" >"$W/dp.client" 2>&1; then
    ok "(d) DP2+EP: $(grep 'three at once' "$W/dp.client")"
  else
    bad "(d) DP2+EP requests:"; sed 's/^/    /' "$W/dp.client"
  fi
  kill -TERM "${RANKS[dp]%% *}"
  wait_exit dp 30
  d1=$(worker_dummy "$W/dp.log" 1)
  if [ "$RC" = 0 ] && [ "${d1:-0}" -gt 0 ]; then
    ok "(d) SIGTERM to the leader: exit 0; worker: $(worker_done_line "$W/dp.log" 1 | sed 's/^hyinfer: info: //')"
  else
    bad "(d) exit $RC; worker dummy steps '${d1}' (want > 0)"; tail -5 "$W/dp.log" | sed 's/^/    /'
  fi
  left=$(procs_left dp 10); [ -z "$left" ] || bad "(d) processes remain: $left"
else
  bad "(d) DP2+EP server not healthy"
fi

# --- (e) client disconnects and stop strings on 4 ranks: equal collective logs ------------------
dist_serve ep4 4 --dtype float32 --enable-expert-parallel --max-model-len 512
if wait_healthy ep4 60; then
  if timeout 120 node tests/dist/serve_client.mjs events "http://127.0.0.1:${PORT[ep4]}" >"$W/ep4.client" 2>&1; then
    ok "(e) 4-rank EP: $(paste -sd';' "$W/ep4.client" | sed 's/;/; /g')"
  else
    bad "(e) 4-rank EP events:"; sed 's/^/    /' "$W/ep4.client"
  fi
  kill -TERM "${RANKS[ep4]%% *}"
  wait_exit ep4 30
  [ "$RC" = 0 ] || bad "(e) SIGTERM to the leader: exit $RC"
  hashes=""
  for r in 0 1 2 3; do
    h=$(worker_hash "$W/ep4.log" $r)
    if [ -n "$h" ]; then hashes="$hashes $r:$h:$(worker_colls "$W/ep4.log" $r)"
    else bad "(e) rank $r logged no 'dist: rank $r done: ... log hash' line"; fi
  done
  uniq_h=$(echo "$hashes" | tr ' ' '\n' | sed -n 's/^[0-9]*:\([0-9a-f]*\):.*/\1/p' | sort -u | wc -l)
  if [ "$uniq_h" = 1 ]; then ok "(e) all 4 ranks' log hashes equal (rank:hash:collectives):$hashes"
  else bad "(e) log hashes differ (rank:hash:collectives):$hashes"; fi
  left=$(procs_left ep4 10); [ -z "$left" ] || bad "(e) processes remain: $left"
else
  bad "(e) 4-rank EP server not healthy"
fi
dist_finish test_faults_mpi
