#!/usr/bin/env bash
# Regression tests from a "break it" pass (bugs found, not yet fixed):
#  1. --threads with an absurd value crashes inside libgomp (stack overflow in GOMP_parallel, exit 139)
#     instead of being rejected with a one-line error (generate, logits, run and serve all take it).
#  2. logits accepts a prompt longer than the model's context (generate and serve reject it).
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

[ "$fails" -eq 0 ] || exit 1
echo "ok"
