#!/usr/bin/env bash
# --help / -h of every hyinfer subcommand and bench mode, and the errors around them. Each command
#   - answers --help and -h (also given among other flags, before or after them, and as `hyinfer
#     help CMD`) with exit status 0, a line starting with "usage:" on stdout and nothing on stderr,
#     without doing anything else: the other arguments name a model, config and server that do not
#     exist, so loading, reading or connecting would fail (and serve would not return);
#   - rejects an unknown flag with a non-zero status (not a signal, not a hang), nothing on stdout
#     and a stderr line naming the flag.
# `hyinfer --help` lists every subcommand; an unknown subcommand and a missing command are errors.
# Needs only build/hyinfer (no model); a second or two.
set -uo pipefail
cd "${HYINFER_ROOT:-.}"
BIN="${HYINFER_BIN:-build/hyinfer}"
W=build/e2e-cli-help
[ -x "$BIN" ] || { echo "skip: $BIN is not built"; exit 77; }
rm -rf "$W"; mkdir -p "$W"
NOMODEL="$W/no-such-model"   # never created
OUTDIR="$W/quant-out"        # must not appear: quantize --help writes nothing

failures=0; cases=0
bad() { echo "FAIL [$1]: $2"; failures=$((failures + 1)); }

# run NAME args...: runs hyinfer (10 s limit, no stdin) into $W/NAME.{out,err}, sets $rc
run() {
  local name="$1"; shift
  cases=$((cases + 1))
  timeout 10 "$BIN" "$@" >"$W/$name.out" 2>"$W/$name.err" </dev/null
  rc=$?
}

# help_ok NAME args...: exit 0, a "usage:" line on stdout, empty stderr
help_ok() {
  local name="$1"; shift
  run "$name" "$@"
  local out="$W/$name.out" err="$W/$name.err"
  if [ $rc -eq 124 ]; then bad "$name" "timed out (hyinfer $*)"; return; fi
  if [ $rc -ne 0 ]; then bad "$name" "exit status $rc (hyinfer $*); stderr: $(head -3 "$err")"; return; fi
  if [ -s "$err" ]; then bad "$name" "stderr not empty (hyinfer $*): $(head -3 "$err")"; return; fi
  if ! grep -qi '^usage:' "$out"; then bad "$name" "no 'usage:' line on stdout (hyinfer $*): $(head -3 "$out")"; return; fi
  echo "ok   [$name] hyinfer $*: $(grep -i -m1 '^usage:' "$out")"
}

# error_ok NAME 'substr1|substr2' args...: non-zero exit (no signal, no hang), empty stdout, every
# '|'-separated piece in stderr
error_ok() {
  local name="$1" want="$2"; shift 2
  local line="$*"
  run "$name" "$@"
  local out="$W/$name.out" err="$W/$name.err"
  if [ $rc -eq 0 ]; then bad "$name" "exit status 0 (hyinfer $line)"; return; fi
  if [ $rc -eq 124 ]; then bad "$name" "timed out (hyinfer $line)"; return; fi
  if [ $rc -ge 126 ]; then bad "$name" "exit status $rc (signal $((rc - 128))?) (hyinfer $line)"; return; fi
  if [ -s "$out" ]; then bad "$name" "stdout not empty (hyinfer $line): $(head -c 200 "$out")"; return; fi
  local IFS='|' piece before=$failures
  for piece in $want; do
    grep -qF -- "$piece" "$err" || bad "$name" "stderr lacks \"$piece\" (hyinfer $line): $(head -3 "$err")"
  done
  [ $failures -eq $before ] && echo "ok   [$name] hyinfer $line -> rc=$rc: $(head -1 "$err")"
}

# Each command (bench modes as two words) with arguments that would make it do real work.
declare -A ARGS=(
  [generate]="-m $NOMODEL -p hi -n 2"
  [run]="--yaml $W/no-such.yaml"
  [serve]="$NOMODEL --port 0"
  [logits]="-m $NOMODEL --prompt-ids 1,2 --json"
  [quantize]="-m $NOMODEL -o $OUTDIR --quant-dtype fp8"
  [info]="-m $NOMODEL"
  [bench]=""
  [bench latency]="-m $NOMODEL --prompt-lens 8 --batch-sizes 1"
  [bench serve]="--host 127.0.0.1 --port 1 --num-prompts 1"
  [bench quality]="-m $NOMODEL --ref $NOMODEL"
  [bench comm]="--max-bytes 1K --reps 2 --json-out $W/comm.json"
)
CMDS=(generate run serve logits quantize info bench "bench latency" "bench serve" "bench quality" "bench comm")

# ---- the top level ------------------------------------------------------------------------
help_ok top_help --help
help_ok top_h -h
help_ok top_help_word help
for c in generate run serve logits quantize info "bench latency" "bench serve" "bench quality" "bench comm"; do
  grep -q "^  $c " "$W/top_help.out" || bad top_help_lists "hyinfer --help does not list \"$c\""
done
grep -q 'hyinfer <command> --help' "$W/top_help.out" || bad top_help_points "hyinfer --help does not point to 'hyinfer <command> --help'"
error_ok top_no_args 'usage:' # no command: the usage on stderr, exit 2
error_ok unknown_cmd 'unknown subcommand|no-such-cmd' no-such-cmd
error_ok unknown_cmd_flags 'unknown subcommand|no-such-cmd' no-such-cmd --help
error_ok help_unknown_cmd 'unknown subcommand|no-such-cmd' help no-such-cmd

# ---- every command --------------------------------------------------------------------------
for c in "${CMDS[@]}"; do
  n=${c// /_}
  read -r -a cmd <<<"$c"
  read -r -a extra <<<"${ARGS[$c]}"
  help_ok "${n}_help" "${cmd[@]}" --help
  help_ok "${n}_h" "${cmd[@]}" -h
  help_ok "${n}_help_word" help "${cmd[@]}"
  if [ ${#extra[@]} -gt 0 ]; then
    help_ok "${n}_help_last" "${cmd[@]}" "${extra[@]}" --help
    help_ok "${n}_h_first" "${cmd[@]}" -h "${extra[@]}"
  fi
  help_ok "${n}_help_unknown" "${cmd[@]}" --no-such-flag --help
  error_ok "${n}_unknown_flag" '--no-such-flag' "${cmd[@]}" --no-such-flag
  [ ${#extra[@]} -gt 0 ] && error_ok "${n}_unknown_flag_args" '--no-such-flag' "${cmd[@]}" "${extra[@]}" --no-such-flag
done
[ -e "$OUTDIR" ] && bad quantize_help_wrote "quantize --help created $OUTDIR"
[ -e "$W/comm.json" ] && bad bench_comm_help_wrote "bench comm --help created $W/comm.json"
# bench comm measures between ranks: one process (no mpirun) is refused with a message saying so
error_ok bench_comm_one_rank 'at least 2 ranks|mpirun' bench comm --max-bytes 1K
# a flag's value is not taken for --help: this prompt is the text "--help" (and the model is missing)
error_ok help_as_value "$NOMODEL" generate -m "$NOMODEL" -p --help
error_ok bench_no_mode 'mode' bench
error_ok bench_unknown_mode 'unknown mode|no-such-mode' bench no-such-mode

# `bench throughput`: not built yet, so a clear error; once it exists, it answers --help like the others
if timeout 10 "$BIN" bench throughput --help >/dev/null 2>&1; then
  help_ok bench_throughput_help bench throughput --help
  help_ok bench_throughput_h bench throughput -h
  error_ok bench_throughput_unknown_flag '--no-such-flag' bench throughput --no-such-flag
else
  error_ok bench_throughput 'throughput' bench throughput --help
fi

echo "$cases cases, $failures failed"
[ $failures -eq 0 ]
