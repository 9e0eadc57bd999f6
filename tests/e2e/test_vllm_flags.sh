#!/usr/bin/env bash
# Every `vllm serve` flag is accounted for (issue 39 item 4): `hyinfer serve --list-vllm-flags` prints
# the one table (src/cli/common.c) and docs/cli.md holds the same text (and `run --list-yaml-keys` the
# YAML key table); every flag the table calls a no-op is given once and must print its one-line notice
# and get past flag parsing (the run then stops at the missing model directory, exit 2); every refused
# flag must exit 2 naming the flag and its reason before anything loads. Also: --no-FLAG of a switch,
# a value outside a no-op's accepted list, -O3, the table on generate and run, and --help listing none
# of the compatibility rows; --gpu-memory-utilization's budget rule on models/hy4-tiny. Seconds.
set -uo pipefail
cd "${HYINFER_ROOT:-.}"
BIN=build/hyinfer
[ -x "$BIN" ] || { echo "skip: $BIN is not built"; exit 77; }
W=build/e2e-vllm-flags
rm -rf "$W"; mkdir -p "$W"
fails=0
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
NOPE="$W/no-such-model"

# the docs hold the binary's tables, between the markers
"$BIN" serve --list-vllm-flags >"$W/flags.md" || bad "serve --list-vllm-flags failed"
"$BIN" run --list-yaml-keys >"$W/keys.md" || bad "run --list-yaml-keys failed"
section() { sed -n "/<!-- $1:begin -->/,/<!-- $1:end -->/p" docs/cli.md | sed '1d;$d'; }
diff <(section vllm-flags) "$W/flags.md" >"$W/flags.diff" ||
  bad "docs/cli.md's vLLM flag table differs from serve --list-vllm-flags (regenerate it): $(head -5 "$W/flags.diff")"
diff <(section yaml-keys) "$W/keys.md" >"$W/keys.diff" ||
  bad "docs/cli.md's YAML key table differs from run --list-yaml-keys (regenerate it): $(head -5 "$W/keys.diff")"

# rows: | `--flag` [`-a`] | kind [(only `a,b`)] | reason |
n_noop=0; n_ref=0
while IFS=$'\x1f' read -r flag kind ok reason; do
  val=(); [ -n "$ok" ] && val=("${ok%%,*}")
  # a value for the flags that take one: the table does not say, so give one when the parser asks
  "$BIN" serve "$NOPE" "$flag" "${val[@]}" >"$W/out" 2>"$W/err" </dev/null; rc=$?
  if grep -q "needs a value" "$W/err"; then
    [ ${#val[@]} = 0 ] && val=(1)
    "$BIN" serve "$NOPE" "$flag" "${val[@]}" >"$W/out" 2>"$W/err" </dev/null; rc=$?
  fi
  case "$kind" in
  no-op)
    n_noop=$((n_noop + 1))
    [ "$rc" = 2 ] || bad "$flag: exit $rc (want 2 at the missing model)"
    grep -qxF "notice: $flag is accepted and has no effect on a CPU: $reason" "$W/err" ||
      bad "$flag: no notice line: $(cat "$W/err")"
    grep -q "no-such-model" "$W/err" || bad "$flag: the run did not get past the flags: $(cat "$W/err")" ;;
  refused)
    n_ref=$((n_ref + 1))
    [ "$rc" = 2 ] || bad "$flag: exit $rc (want 2)"
    grep -qF "hyinfer serve: $flag is not supported by hyinfer: $reason" "$W/err" ||
      bad "$flag: message: $(cat "$W/err")" ;;
  esac
done < <(/usr/bin/python3 - "$W/flags.md" <<'PY'
import re, sys
for line in open(sys.argv[1]):
    m = re.match(r"\| `(--[^`]+)`(?: `[^`]+`)? \| (implemented|no-op|refused)(?: \(only `([^`]+)`\))? \| (.*) \|$", line.rstrip("\n"))
    if m and m.group(2) != "implemented":
        print("\x1f".join([m.group(1), m.group(2), m.group(3) or "", m.group(4).replace("\\|", "|")]))
PY
)
echo "exercised $n_noop no-op and $n_ref refused flags"
[ "$n_noop" -gt 50 ] && [ "$n_ref" -gt 50 ] || bad "too few rows parsed from the table ($n_noop no-op, $n_ref refused)"
head -1 "$W/flags.md" | grep -q "$n_noop accepted as no-ops.*$n_ref refused" || bad "the counts line disagrees: $(head -1 "$W/flags.md")"

one() { # one WANT_RC 'stderr piece' -- args...
  local want="$1" piece="$2"; shift 3
  "$BIN" "$@" >"$W/out" 2>"$W/err" </dev/null; local rc=$?
  [ "$rc" = "$want" ] || bad "$*: exit $rc (want $want): $(cat "$W/err")"
  grep -qF -- "$piece" "$W/err" || bad "$*: stderr lacks \"$piece\": $(cat "$W/err")"
}
one 2 "notice: --no-enable-lora is accepted" -- serve "$NOPE" --no-enable-lora
one 2 "notice: --no-enforce-eager is accepted" -- serve "$NOPE" --no-enforce-eager --enforce-eager
one 2 "--runner pooling is not supported by hyinfer (accepted: auto,generate)" -- serve "$NOPE" --runner pooling
one 2 "--pipeline-parallel-size 2 is not supported" -- serve "$NOPE" -pp 2
one 2 "notice: --compilation-config 3 is accepted" -- serve "$NOPE" -O3
one 2 "notice: --compilation-config 3 is accepted" -- serve "$NOPE" -O 3
one 2 "warning: --compilation-config: unknown keys, ignored: bogus_key" -- serve "$NOPE" --compilation-config '{"level":3,"bogus_key":1}'
one 2 "--compilation-config '{' is not valid JSON" -- serve "$NOPE" --compilation-config '{'
one 2 "notice: --trust-remote-code is accepted" -- generate -m "$NOPE" -p hi --trust-remote-code
one 2 "--enable-lora is not supported by hyinfer" -- run --yaml "$W/none.yaml" --enable-lora
one 2 'unknown flag "--port"' -- generate -m "$NOPE" -p hi --port 1
one 2 "--cudagraph-capture-sizes" -- serve "$NOPE" --cudagraph-capture-sizes 1 2 4 --enable-lora
one 2 "notice: --enforce-eager is accepted" -- serve "$NOPE" --enforce_eager
one 2 'unknown flag "--max-model-lenx"' -- serve "$NOPE" --max_model_lenx 5
one 2 "--max-model-len" -- serve "$NOPE" --max_model_len notanumber
"$BIN" serve --help | grep -q -- "--enable-lora" && bad "serve --help lists a refused flag"
# --gpu-memory-utilization sizes the KV cache (F x memory - weights); too small names the numbers, and
# --kv-cache-memory-bytes wins when both are given (vLLM's rule). These two load models/hy4-tiny.
if [ -f models/hy4-tiny/model.safetensors ]; then
  timeout 60 "$BIN" serve models/hy4-tiny --port 0 --gpu-memory-utilization 0.00001 --max-model-len 4096 >"$W/out" 2>"$W/err"
  rc=$?
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || bad "--gpu-memory-utilization 0.00001 started (exit $rc)"
  grep -q "gpu-memory-utilization 1e-05 leaves .* bytes of weights), but one max_model_len 4096 sequence needs" "$W/err" ||
    bad "--gpu-memory-utilization too small: $(cat "$W/err")"
  "$BIN" serve models/hy4-tiny --port 0 --gpu-memory-utilization 0.00001 --kv-cache-memory-bytes 100000000 >"$W/out" 2>"$W/err" &
  spid=$!
  for _ in $(seq 1 100); do grep -q "kv cache:" "$W/err" && break; kill -0 $spid 2>/dev/null || break; sleep 0.1; done
  kill $spid 2>/dev/null; wait $spid 2>/dev/null
  grep -q "kv cache: .*95.4 MiB" "$W/err" || bad "--kv-cache-memory-bytes did not win over --gpu-memory-utilization: $(cat "$W/err")"
fi
[ "$fails" = 0 ] || exit 1
echo "ok: every vllm serve flag accounted for"
