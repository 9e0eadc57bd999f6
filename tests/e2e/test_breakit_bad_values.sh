#!/usr/bin/env bash
# Regression tests from a "break it" pass (bugs found, not yet fixed):
#  1. --threads with an absurd value crashes inside libgomp (stack overflow in GOMP_parallel, exit 139)
#     instead of being rejected with a one-line error (generate, logits, run and serve all take it).
#  2. logits accepts a prompt longer than the model's context (generate and serve reject it).
#  3. bad flag values and bad input files exited 1 on generate / run / logits / quantize (issue 39): now 2.
set -uo pipefail
cd "${HYINFER_ROOT:-.}"
BIN=build/hyinfer
M=models/hy3-tiny
W=build/e2e-breakit
rm -rf "$W"; mkdir -p "$W"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

$BIN generate -m "$M" -p hi -n 2 --threads 100000 >"$W/out" 2>"$W/err"; rc=$?
[ "$rc" -ge 128 ] && fail "generate --threads 100000 crashed (exit $rc)"
[ "$rc" -ne 0 ] && [ "$(wc -l <"$W/err")" -ne 1 ] && fail "generate --threads 100000: expected a one-line error, got: $(cat "$W/err")"

long=$(python3 -c "print('the king ' * 600)")   # ~1200 tokens > max_position_embeddings 1024
$BIN logits -m "$M" -p "$long" --json >"$W/out" 2>"$W/err"; rc=$?
[ "$rc" -eq 0 ] && fail "logits accepted a prompt longer than the model's 1024-token context"
[ "$rc" -ge 128 ] && fail "logits on an over-long prompt crashed (exit $rc)"

# 3. Bad flag values and bad input files exit 2 on every command, with a one-line sentence (issue 39).
printf '[{"type":"function"}]' >"$W/bad_tools.json"
printf 'model_config:\n  model_path: [unclosed\n' >"$W/bad.yaml"
printf 'model_config:\n  model_path: "%s"\ndata_config:\n  apply_chat_template: True\n' "$PWD/models/hy4-tiny" >"$W/ok.yaml"
want2() { # want2 'message piece' -- hyinfer args...
  local want="$1"; shift 2
  "$BIN" "$@" >"$W/out" 2>"$W/err" </dev/null; local rc=$?
  [ "$rc" = 2 ] || fail "$* exited $rc (want 2): $(tail -2 "$W/err")"
  [ "$(grep -c '^hyinfer' "$W/err")" = 1 ] || fail "$*: want one hyinfer line, got: $(cat "$W/err")"
  grep -qF -- "$want" "$W/err" || fail "$*: message lacks \"$want\": $(cat "$W/err")"
}
H4=models/hy4-tiny
want2 "not valid JSON" -- generate -m $H4 -p hi --speculative-config '{'
for cmd in generate logits; do
  want2 '--dtype "foo"' -- $cmd -m $H4 -p hi --dtype foo
  want2 '"zzz"' -- $cmd -m $H4 -p hi --kv-cache-dtype zzz
done
want2 "not valid JSON" -- run --yaml "$W/ok.yaml" --speculative-config '{'
want2 '"zzz"' -- run --yaml "$W/ok.yaml" --kv-cache-dtype zzz
want2 "bad_tools.json" -- run --yaml "$W/ok.yaml" --tools "$W/bad_tools.json"
want2 "bad.yaml" -- run --yaml "$W/bad.yaml"
want2 "bad_tools.json" -- generate -m $H4 --chat -p hi --tools "$W/bad_tools.json"
want2 "nope.json" -- generate -m $H4 --chat -p hi --tools "$W/nope.json"
want2 "--reasoning-effort 'max': choose no_think, low or high" -- generate -m $H4 --chat -p hi --reasoning-effort max
want2 "needs --chat" -- generate -m $H4 -p hi --reasoning-effort low
want2 "num_speculative_tokens=9" -- generate -m $H4 -p hi --speculative-config '{"method":"mtp","num_speculative_tokens":9}'
want2 "--quant-dtype" -- quantize -m $H4 -o "$W/q" --quant-dtype zzz
want2 "nope" -- quantize -m "$W/nope" -o "$W/q" --quant-dtype fp8
want2 "not valid JSON" -- serve $H4 --speculative-config '{'
want2 "--gpu-memory-utilization 0" -- serve $H4 --gpu-memory-utilization 0
want2 "--compilation-config" -- serve $H4 --compilation-config '[1'
want2 "--additional-config" -- serve $H4 --additional-config '"x"'
# --help ranges match the code: num_speculative_tokens 0 (off) .. 8, and 0 is accepted
"$BIN" generate --help | grep -q 'num_speculative_tokens.*0 (off) .. 8' || fail "generate --help: num_speculative_tokens range is not 0 (off) .. 8"
"$BIN" generate -m $H4 -p hi -n 1 --temperature 0 --speculative-config '{"method":"mtp","num_speculative_tokens":0}' >/dev/null 2>"$W/err" ||
  fail "num_speculative_tokens 0 (off) refused: $(cat "$W/err")"

[ "$fails" -eq 0 ] || exit 1
echo "ok"
