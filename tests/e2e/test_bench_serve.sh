#!/usr/bin/env bash
# hyinfer bench serve against a live hyinfer serve: every request completes, the token totals are
# exactly what was asked (ignore_eos, fixed lengths), the JSON has the reported keys, and a bad
# port makes the run fail (exit 1) instead of reporting zeros (JSON: completed 0; table: no table).
set -uo pipefail
cd "${HYINFER_ROOT:-.}"
BIN=build/hyinfer
MODEL=models/hy3-tiny
[ -f "$MODEL/model.safetensors" ] || MODEL="tests/data/hy3-golden-llamacpp/hy3-golden-b"
[ -f "$MODEL/config.json" ] || { echo "FAIL: no model (models/hy3-tiny or tests/data/hy3-golden-llamacpp/hy3-golden-b)"; exit 1; }
W=build/e2e-bench-serve
rm -rf "$W"; mkdir -p "$W"
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" serve "$MODEL" --port "$PORT" --dtype float32 --max-model-len 256 --served-model-name hy3 >"$W/serve.log" 2>&1 &
PID=$!
trap 'kill -9 $PID 2>/dev/null' EXIT
for i in $(seq 1 600); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200 ] && break
  kill -0 $PID 2>/dev/null || { cat "$W/serve.log"; exit 1; }
  sleep 0.1
done
"$BIN" bench serve --port "$PORT" -c 4 --num-prompts 8 --random-input-len 20 --random-output-len 12 --json >"$W/out.json" \
  || { echo "FAIL: bench serve exited non-zero"; cat "$W/out.json"; exit 1; }
/usr/bin/python3 - "$W/out.json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("request_throughput", "output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms",
          "duration_s", "max_concurrency"):
    assert k in d, f"missing {k}"
assert d["completed"] == 8 and d["failed"] == 0, d
assert d["total_input_tokens"] == 8 * 20 and d["total_output_tokens"] == 8 * 12, d
assert d["output_throughput"] > 0 and d["p99_ttft_ms"] >= d["p50_ttft_ms"] > 0 and d["p99_tpot_ms"] >= d["p50_tpot_ms"] > 0, d
print("ok   bench serve JSON:", {k: d[k] for k in ("request_throughput", "output_throughput", "p50_ttft_ms", "p50_tpot_ms")})
PY
"$BIN" bench serve --port 1 --num-prompts 2 --json >"$W/bad.json" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "cannot connect" "$W/bad.json" && echo "ok   unreachable server: exit 1 with the error" \
  || { echo "FAIL: unreachable server gave rc $rc"; cat "$W/bad.json"; exit 1; }
"$BIN" bench serve --port 1 --num-prompts 2 >"$W/bad.txt" 2>"$W/bad.err"
rc=$?
[ $rc = 1 ] && grep -q "all 2 requests failed; the first: .*cannot connect" "$W/bad.err" && ! grep -q "Benchmark Result" "$W/bad.txt" &&
  echo "ok   unreachable server, table form: exit 1, the error and no table of zeros" ||
  { echo "FAIL: unreachable server (table form) gave rc $rc"; cat "$W/bad.txt" "$W/bad.err"; exit 1; }
kill -TERM $PID; wait $PID; rc=$?
trap - EXIT
[ $rc = 0 ] || { echo "FAIL: serve exit $rc on SIGTERM"; exit 1; }
echo "all checks passed"
