#!/usr/bin/env bash
# The Hy4-preview deployment guide's single-node command line, verbatim, with `hyinfer serve` in place
# of `vllm serve` (issue 39 item 1):
#
#   vllm serve /path/to/Hy4-preview-w8a8 --host 127.0.0.1 --port 8000 --tensor-parallel-size 16 \
#     --served-model-name hy4 --max-num-seqs 8 --max-model-len 512 --max-num-batched-tokens 512 \
#     --enable-expert-parallel --trust-remote-code --quantization ascend --gpu-memory-utilization 0.92 \
#     --seed 1024 --compilation-config '{"cudagraph_mode": "FULL_DECODE_ONLY"}' \
#     --speculative-config '{"method": "mtp","num_speculative_tokens": 3}' \
#     --additional-config '{"enable_mlapo": true, "enable_fused_mc2": 1, "ascend_compilation_config": {"enable_npugraph_ex": true}}'
#
# Substituted: the model path (a W8A8_DYNAMIC copy of models/hy4-tiny made here with `hyinfer quantize
# --quant-dtype w8a8-dynamic`, the Ascend layout the guide's checkpoint has: docs/ascend-w8a8.md), the
# port (a free one), and the scale: --tensor-parallel-size 16 becomes 2 (HYINFER_GUIDE_TP), because 16
# ranks of even the tiny model oversubscribe a 2-core machine 8-fold; `-tp 2` without mpirun starts its 2
# ranks itself (1 rank where the build or the machine has no Open MPI). Every other flag is the guide's. A chat request, a tools request and a request under MTP
# (k = 3, the guide's) are answered; the start-up notices name the no-op flags and keys; the same
# --seed and request order give the same sampled text after a restart.
set -uo pipefail
cd "${HYINFER_ROOT:-.}"
BIN=build/hyinfer
SRC=models/hy4-tiny
if command -v mpirun >/dev/null && ldd "$BIN" 2>/dev/null | grep -q libmpi; then TP="${HYINFER_GUIDE_TP:-2}"
else TP="${HYINFER_GUIDE_TP:-1}"; echo "note: no Open MPI here: the guide's command runs on 1 rank"; fi
[ -x "$BIN" ] || { echo "skip: $BIN is not built"; exit 77; }
[ -f "$SRC/model.safetensors" ] || { echo "skip: $SRC missing"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl missing"; exit 77; }
W=build/e2e-guide
rm -rf "$W"; mkdir -p "$W"
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

"$BIN" quantize -m "$SRC" -o "$W/Hy4-preview-w8a8" --quant-dtype w8a8-dynamic >"$W/quantize.log" 2>&1 ||
  { cat "$W/quantize.log"; echo "FAIL: quantize"; exit 1; }
[ -f "$W/Hy4-preview-w8a8/quant_model_description.json" ] || { echo "FAIL: no quant_model_description.json"; exit 1; }

PID=
start() { # start LOG: the guide's command line
  PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  B="http://127.0.0.1:$PORT"
  "$BIN" serve "$W/Hy4-preview-w8a8" --host 127.0.0.1 --port "$PORT" --tensor-parallel-size "$TP" --served-model-name hy4 \
    --max-num-seqs 8 --max-model-len 512 --max-num-batched-tokens 512 --enable-expert-parallel --trust-remote-code \
    --quantization ascend --gpu-memory-utilization 0.92 --seed 1024 \
    --compilation-config '{"cudagraph_mode": "FULL_DECODE_ONLY"}' \
    --speculative-config '{"method": "mtp","num_speculative_tokens": 3}' \
    --additional-config '{"enable_mlapo": true, "enable_fused_mc2": 1, "ascend_compilation_config": {"enable_npugraph_ex": true}}' \
    >"$1" 2>&1 &
  PID=$!
  local code=
  for _ in $(seq 1 600); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$B/health") && [ "$code" = 200 ] && return 0
    kill -0 $PID 2>/dev/null || { cat "$1"; echo "FAIL: the guide's command exited"; exit 1; }
    sleep 0.1
  done
  cat "$1"; echo "FAIL: server never healthy"; exit 1
}
stop() { kill $PID 2>/dev/null; wait $PID 2>/dev/null; PID=; }
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null' EXIT

start "$W/serve1.log"
for want in "notice: --trust-remote-code is accepted" "notice: --compilation-config cudagraph_mode" \
  "notice: --additional-config enable_mlapo" "notice: --additional-config enable_fused_mc2" \
  "notice: --additional-config ascend_compilation_config.enable_npugraph_ex"; do
  grep -qF -- "$want" "$W/serve1.log" && ok "start-up: $want" || bad "start-up log lacks \"$want\": $(head -20 "$W/serve1.log")"
done
n=$(grep -c "notice: --trust-remote-code" "$W/serve1.log")
[ "$n" = 1 ] && ok "one notice per flag, whatever the ranks" || bad "--trust-remote-code notice printed $n times (tp $TP)"
grep -q "warning: .*unknown keys" "$W/serve1.log" && bad "the guide's JSON keys got an unknown-key warning: $(grep warning "$W/serve1.log")"

post() { curl -s -m 120 "$B/v1/chat/completions" -H 'Content-Type: application/json' -d "$1"; }
chat='{"model":"hy4","messages":[{"role":"user","content":"Write one sentence about the sea."}],"max_tokens":24,"temperature":0.8}'
r=$(post "$chat")
echo "$r" | /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["choices"][0]["message"]["role"]=="assistant"; assert r["usage"]["completion_tokens"]>0' &&
  ok "chat answered" || bad "chat: $r"
first=$(echo "$r" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["message"]["content"])')

# one small tool: the Hy4 template's tool preamble alone is long for the tiny tokenizer, and the guide's
# --max-model-len is 512 (examples/tools.json is exercised by test_generate_cli.sh)
tools='{"model":"hy4","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"max_tokens":24,"temperature":0}'
r=$(post "$tools")
echo "$r" | /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); c=r["choices"][0]; assert c["finish_reason"] in ("tool_calls","stop","length"); m=c["message"]; assert m.get("tool_calls") or m.get("content") is not None' &&
  ok "tools request answered ($(echo "$r" | /usr/bin/python3 -c 'import json,sys; c=json.load(sys.stdin)["choices"][0]; print(c["finish_reason"], [t["function"]["name"] for t in c["message"].get("tool_calls") or []])'))" ||
  bad "tools: $r"

greedy='{"model":"hy4","messages":[{"role":"user","content":"Count from one to ten."}],"max_tokens":48,"temperature":0}'
r=$(post "$greedy")
echo "$r" | /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["usage"]["completion_tokens"]>0' && ok "request under MTP answered" || bad "MTP request: $r"
m=$(curl -s "$B/metrics")
echo "$m" | grep -q '^vllm:spec_decode_num_draft_tokens_total' && ok "/metrics has the MTP counters (k = 3)" ||
  bad "no spec decode counters on /metrics: MTP is not on"
stop

# --seed 1024: the same start and the same request order give the same sampled text
start "$W/serve2.log"
again=$(post "$chat" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["message"]["content"])')
[ "$again" = "$first" ] && ok "--seed: same start + same order, same sampled text" || bad "--seed: '$first' then '$again'"
stop

[ "$fails" = 0 ] || exit 1
echo "ok: the guide's command line (tp $TP)"
