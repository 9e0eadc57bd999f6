#!/usr/bin/env bash
# hyinfer serve error handling with curl: each bad request gets its HTTP code and an OpenAI error
# body {"error": {"message", "type", "param", "code"}} whose message names the problem; --api-key
# guards /v1 (401 without / with a wrong key) while /health and /metrics stay public (the 503 that
# /health gives while the model loads is not asserted: the test models load in milliseconds);
# bad start-up (port in use, KV budget too small, unknown flag) exits non-zero with a message;
# SIGINT exits 0.
set -uo pipefail
cd "${HYINFER_ROOT:-.}"
BIN=build/hyinfer
MODEL=models/hy3-tiny
[ -f "$MODEL/model.safetensors" ] || MODEL="tests/data/hy3-golden-llamacpp/hy3-golden-b"
[ -f "$MODEL/config.json" ] || { echo "FAIL: no model (models/hy3-tiny or tests/data/hy3-golden-llamacpp/hy3-golden-b)"; exit 1; }
command -v curl >/dev/null || { echo "skip: curl missing"; exit 77; }
W=build/e2e-serve-errors
rm -rf "$W"; mkdir -p "$W"
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
B="http://127.0.0.1:$PORT"
"$BIN" serve "$MODEL" --port "$PORT" --dtype float32 --max-model-len 128 --served-model-name hy3 \
  --api-key sekret --max-body-bytes 65536 >"$W/serve.log" 2>&1 &
PID=$!
trap 'kill -9 $PID 2>/dev/null' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails+1)); }
for i in $(seq 1 600); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$B/health") && [ "$code" = 200 ] && break
  kill -0 $PID 2>/dev/null || { cat "$W/serve.log"; echo "server died"; exit 1; }
  sleep 0.1
done
[ "$code" = 200 ] || { echo "server never healthy"; exit 1; }

AUTH=(-H "Authorization: Bearer sekret")
# expect CODE MESSAGE_REGEX PATH [curl args...]
expect() {
  local want="$1" rx="$2" path="$3"; shift 3
  local code
  code=$(curl -s -o "$W/body" -w '%{http_code}' "$B$path" "$@")
  local msg
  msg=$(/usr/bin/python3 -c 'import json,sys
try:
  e=json.load(open(sys.argv[1]))["error"]; assert set(e)>={"message","type","param","code"}; print(e["message"])
except Exception as x: print("NOT-AN-OPENAI-ERROR:", open(sys.argv[1]).read()[:200])' "$W/body")
  if [ "$code" = "$want" ] && echo "$msg" | grep -Eq "$rx"; then ok "$want $path: $msg"
  else bad "$path: want $want /$rx/, got $code: $msg"; fi
}
J=(-H "Content-Type: application/json" "${AUTH[@]}")
M='"messages":[{"role":"user","content":"hi"}]'
expect 400 "Invalid JSON" /v1/chat/completions "${J[@]}" -d '{"messages": [}'
expect 400 "JSON object" /v1/chat/completions "${J[@]}" -d '[1,2,3]'
expect 400 "messages.*empty" /v1/chat/completions "${J[@]}" -d '{"messages":[]}'
expect 400 "messages.*required" /v1/chat/completions "${J[@]}" -d '{}'
expect 400 "temperature.*number" /v1/chat/completions "${J[@]}" -d "{$M,\"temperature\":\"hot\"}"
expect 400 "top_p" /v1/chat/completions "${J[@]}" -d "{$M,\"top_p\":7}"
expect 400 "max_tokens.*at least 1" /v1/chat/completions "${J[@]}" -d "{$M,\"max_tokens\":0}"
expect 400 "max_tokens.*too large.*maximum context length is 128" /v1/chat/completions "${J[@]}" -d "{$M,\"max_tokens\":100000}"
expect 400 "presence_penalty" /v1/chat/completions "${J[@]}" -d "{$M,\"presence_penalty\":9}"
expect 400 "'n'" /v1/chat/completions "${J[@]}" -d "{$M,\"n\":0}"
expect 400 "stop" /v1/chat/completions "${J[@]}" -d "{$M,\"stop\":{\"a\":1}}"
expect 400 "reasoning_effort" /v1/chat/completions "${J[@]}" -d "{$M,\"chat_template_kwargs\":{\"reasoning_effort\":\"max\"}}"
expect 400 "stream_options" /v1/chat/completions "${J[@]}" -d "{$M,\"stream_options\":{\"include_usage\":true}}"
expect 400 "prompt.*empty" /v1/completions "${J[@]}" -d '{"prompt":""}'
expect 400 "prompt.*empty" /v1/completions "${J[@]}" -d '{"prompt":[]}'
expect 400 "out of vocabulary" /v1/completions "${J[@]}" -d '{"prompt":[1,2,99999999]}'
expect 400 "out of vocabulary" /v1/completions "${J[@]}" -d '{"prompt":[-5]}'
expect 400 "out of vocabulary" /v1/completions "${J[@]}" -d '{"prompt":"x","stop_token_ids":[99999999]}'
LONG=$(/usr/bin/python3 -c 'print(" ".join(["word"]*300))')
expect 400 "Input length [0-9]+ exceeds the model's maximum context length 128" /v1/completions "${J[@]}" -d "{\"prompt\":\"$LONG\"}"
expect 400 "This model's maximum context length is 128 tokens. However, you requested [0-9]+ tokens" \
  /v1/completions "${J[@]}" -d '{"prompt":"hello","max_tokens":127}'
expect 404 "model .nope. does not exist" /v1/chat/completions "${J[@]}" -d "{$M,\"model\":\"nope\"}"
expect 401 "API key" /v1/chat/completions -H "Content-Type: application/json" -d "{$M}"
expect 401 "API key" /v1/models -H "Authorization: Bearer wrong"
expect 413 "too large" /v1/completions "${J[@]}" --data-binary @<(/usr/bin/python3 -c 'print("{\"prompt\":\"" + "a"*70000 + "\"}")')
expect 404 "Not found" /v1/nothing "${AUTH[@]}"
expect 405 "not allowed" /v1/chat/completions "${AUTH[@]}"
code=$(curl -s -o /dev/null -w '%{http_code}' "$B/health"); [ "$code" = 200 ] && ok "/health public" || bad "/health $code"
code=$(curl -s -o "$W/m" -w '%{http_code}' "$B/metrics"); [ "$code" = 200 ] && grep -q '^hyinfer:request_errors_total' "$W/m" \
  && ok "/metrics public" || bad "/metrics $code"
code=$(curl -s -o "$W/ok" -w '%{http_code}' "$B/v1/completions" "${J[@]}" -d '{"prompt":"hello","max_tokens":3}')
[ "$code" = 200 ] && grep -q '"completion_tokens":3' "$W/ok" && ok "valid request with the key works" || bad "valid request: $code $(cat "$W/ok")"
code=$(curl -s -o /dev/null -w '%{http_code}' "$B/v1/models" "${AUTH[@]}"); [ "$code" = 200 ] && ok "/v1/models with key" || bad "/v1/models $code"

# start-up errors: the port is taken; a KV budget that cannot hold one max_model_len sequence
"$BIN" serve "$MODEL" --port "$PORT" --dtype float32 --max-model-len 128 >"$W/dup.log" 2>&1
rc=$?; [ $rc = 1 ] && grep -q "cannot listen" "$W/dup.log" && ok "port in use: exit 1 with a message" || bad "port in use: rc $rc $(cat "$W/dup.log")"
P2=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" serve "$MODEL" --port "$P2" --dtype float32 --max-model-len 4096 --kv-cache-memory-bytes 1000 >"$W/kv.log" 2>&1
rc=$?; [ $rc = 1 ] && grep -q "max_model_len 4096" "$W/kv.log" && ok "KV budget too small: exit 1 naming max_model_len" || bad "small KV: rc $rc $(cat "$W/kv.log")"
"$BIN" serve "$MODEL" --bogus-flag 1 >"$W/flag.log" 2>&1
rc=$?; [ $rc = 2 ] && grep -q "bogus" "$W/flag.log" && ok "unknown flag: exit 2 naming it" || bad "unknown flag: rc $rc"

kill -INT $PID
for i in $(seq 1 100); do kill -0 $PID 2>/dev/null || break; sleep 0.1; done
wait $PID; rc=$?
[ $rc = 0 ] && ok "SIGINT: exit 0" || bad "SIGINT: exit $rc"
trap - EXIT
[ $fails = 0 ] && echo "all checks passed" || { echo "$fails check(s) failed"; tail -5 "$W/serve.log"; exit 1; }
