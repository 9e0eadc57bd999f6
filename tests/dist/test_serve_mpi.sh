#!/usr/bin/env bash
# `hyinfer serve` under mpirun answers exactly like one process (hy3-tiny, float32, greedy):
#   - servers: 1 plain process; mpirun -np 2 --enable-expert-parallel (attention TP2 + EP2);
#     mpirun -np 4 -tp 2 -dp 2 --enable-expert-parallel with --max-num-batched-tokens 32 (prompts
#     are chunked), prefix caching on (the default) and a KV cache small enough that requests get
#     preempted (vllm:num_preemptions_total > 0);
#   - /health answers 503 while the ranks load their shards, then 200 (the multi-rank servers must
#     show the 503; codes are polled every 50 ms);
#   - the same greedy chat and completion requests through the npm openai client
#     (tests/dist/serve_client.mjs suite): one alone, then ten at once, streamed and not, two of them
#     sharing a ~150-token prefix, then a prefix-cache hit; every text, finish_reason and usage of
#     the multi-rank servers equals the one-process server's;
#   - shutdown: SIGTERM to mpirun (-np 2) and SIGTERM to the leader rank (-np 4): each job exits
#     (the status is printed; the leader path must give 0), the workers log their "done" line, and
#     no process of the job remains.
# Skipped (77) without mpirun, Open MPI headers, node or the openai package.
source "$(dirname "$0")/lib.sh"
dist_require node
W=build/dist-serve
rm -rf "$W"; mkdir -p "$W"

# KV budget of the -np 4 server: 24 blocks of 16 tokens at its per-token bytes (one KV head per rank
# at TP2): room for max_model_len 256 plus a little, so ten concurrent requests preempt.
# Started one at a time, so each start-up is polled from its first moment.
for s in one ep2 tp2dp2; do
  case $s in
    one) dist_serve one 0 --dtype float32 --max-model-len 256 ;;
    ep2) dist_serve ep2 2 --dtype float32 --max-model-len 256 --enable-expert-parallel ;;
    tp2dp2) dist_serve tp2dp2 4 --dtype float32 --max-model-len 256 -tp 2 -dp 2 --enable-expert-parallel \
      --max-num-batched-tokens 32 --kv-cache-memory-bytes 491520 ;;
  esac
  wait_healthy "$s" 90 || { bad "$s: not healthy"; dist_finish test_serve_mpi; }
  note "$s: /health codes seen: ${HEALTH[$s]}; pids ${RANKS[$s]}"
done
for s in ep2 tp2dp2; do
  if [[ " ${HEALTH[$s]} " =~ " 503 ".*"200 " ]]; then ok "$s: /health 503 while loading, then 200"
  else bad "$s: /health codes ${HEALTH[$s]} (expected 503 before 200)"; fi
done
grep -m1 "kv cache:" "$W/tp2dp2.log" | sed 's/^/     tp2dp2 /'

for s in one ep2 tp2dp2; do
  t0=$SECONDS
  if node tests/dist/serve_client.mjs suite "http://127.0.0.1:${PORT[$s]}" "$W/$s.json" >"$W/$s.client" 2>&1; then
    ok "$s: request suite ($((SECONDS - t0)) s): $(tail -1 "$W/$s.client")"
  else
    bad "$s: request suite failed:"; sed 's/^/    /' "$W/$s.client"
  fi
done
for s in ep2 tp2dp2; do
  if node tests/dist/serve_client.mjs compare "$W/one.json" "$W/$s.json" >"$W/$s.cmp" 2>&1; then
    ok "$s: outputs equal the one-process server's: $(tail -1 "$W/$s.cmp")"
  else
    bad "$s: outputs differ from the one-process server's:"; sed 's/^/    /' "$W/$s.cmp"
  fi
done
pre=$(curl -s "http://127.0.0.1:${PORT[tp2dp2]}/metrics" | sed -n 's/^vllm:num_preemptions_total{[^}]*} //p')
if [ "${pre:-0}" != 0 ]; then ok "tp2dp2: the small KV cache preempted ${pre} time(s) (prefill chunked at 32 tokens)"
else bad "tp2dp2: no preemption (vllm:num_preemptions_total '${pre}'): the test no longer covers it"; fi

# shutdown: -np 2 by SIGTERM to mpirun (what a process manager does), -np 4 by SIGTERM to the leader
kill -TERM "${MPI[ep2]}"
wait_exit ep2 30; rc=$RC
left=$(procs_left ep2 10)
if [ "$rc" = timeout ]; then bad "ep2: SIGTERM to mpirun: still running after 30 s"
elif [ -n "$left" ]; then bad "ep2: SIGTERM to mpirun: processes left: $left"
else ok "ep2: SIGTERM to mpirun: exit status $rc, no process left"; fi
grep -q "serve: stopped" "$W/ep2.log" && note "ep2: leader logged 'serve: stopped'" || note "ep2: leader did not log 'serve: stopped'"
worker_done_line "$W/ep2.log" 1 >/dev/null && note "ep2: $(worker_done_line "$W/ep2.log" 1 | sed 's/^hyinfer: info: //')" \
  || note "ep2: worker rank 1 did not log its done line (killed by mpirun?)"

lead=${RANKS[tp2dp2]%% *}
kill -TERM "$lead"
wait_exit tp2dp2 30; rc=$RC
left=$(procs_left tp2dp2 10)
if [ "$rc" = 0 ] && [ -z "$left" ]; then ok "tp2dp2: SIGTERM to the leader: exit status 0, no process left"
else bad "tp2dp2: SIGTERM to the leader: exit status $rc, processes left: '${left}'"; tail -8 "$W/tp2dp2.log" | sed 's/^/    /'; fi
for r in 1 2 3; do
  if worker_done_line "$W/tp2dp2.log" $r >/dev/null; then note "tp2dp2: $(worker_done_line "$W/tp2dp2.log" $r | sed 's/^hyinfer: info: //')"
  else bad "tp2dp2: worker rank $r logged no done line"; fi
done

kill -TERM "${RANKS[one]}"
wait_exit one 30; rc=$RC
[ "$rc" = 0 ] && ok "one: SIGTERM: exit 0" || bad "one: SIGTERM: exit status $rc"
dist_finish test_serve_mpi
