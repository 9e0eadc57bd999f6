#!/usr/bin/env bash
# Runs the tests of one tier (default: test):
#   check  build, the layout and format checks, the C unit tests (cmocka)            `make check`
#   test   check + the unit tests under ASan+UBSan (on AVX-512 hosts once more with the emulated
#          avx512 level, the code AVX2-only machines run) + golden/e2e/dist scripts + the model goldens on
#          the scalar kernels + the fresh-machine install test + fuzzers                 `make test`
#   emu    the avx512 level's machine code inside the Bochs emulator (3-4 minutes; opt-in,
#          skipped where the CPU has AVX-512)                                        `make test-emu`
# Each test is a program; exit 0 = pass, 77 = skipped, anything else = fail. A cmocka binary that
# exits 0 after skip() in some of its tests ("[  SKIPPED ]" in its log) counts as skipped too.
# Ends with the line "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
TIER="${1:-test}"
case "$TIER" in check|test|emu) ;; *) echo "usage: $0 [check|test|emu]" >&2; exit 2 ;; esac
export HYINFER_ROOT="$PWD"
export PYTHON=/usr/bin/python3
# OpenMP workers sleep instead of spinning between parallel regions: test machines are shared
# and oversubscribed (spinning made 2 threads ~4x slower than 1 under load).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
JOBS=$(nproc 2>/dev/null || echo 2)

pass=0; fail=0; skip=0; failed=()
# free MiB on the repository's file system: printed at the start and with every failure, since a
# full disk (CI machines share theirs) makes unrelated tests fail in confusing ways
disk_free_mib() { df -Pm . 2>/dev/null | awk 'NR == 2 { print $4 }'; }
run_one() {  # name, command...
  local name="$1"; shift
  local log; log="build/test-logs/$(echo "$name" | tr '/ ' '__').log"
  local t0=$SECONDS
  "$@" >"$log" 2>&1
  local rc=$?
  # cmocka exits 0 when tests call skip(); its log then lists them as "[  SKIPPED ] name"
  local skipped=""
  [ $rc -eq 0 ] && skipped=$(sed -n 's/.*\[  SKIPPED \] //p' "$log" | grep -v ' test(s), listed below:$' | sort -u | paste -sd' ')
  if [ $rc -eq 0 ] && [ -n "$skipped" ]; then skip=$((skip+1)); echo "SKIP $name ($((SECONDS-t0))s): cmocka skipped $skipped";
  elif [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS $name ($((SECONDS-t0))s)";
  elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP $name: $(tail -1 "$log")";
  else fail=$((fail+1)); failed+=("$name"); echo "FAIL $name (rc=$rc; disk: $(disk_free_mib) MiB free), last lines of $log:"
    tail -25 "$log" | sed 's/^/    /'; fi
}

finish() {
  [ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
  echo "$pass passed, $fail failed, $skip skipped"
  [ $fail -eq 0 ]
  exit
}

mkdir -p build/test-logs
echo "disk: $(disk_free_mib) MiB free in $PWD (a full run needs about 6 GiB)"
if [ "$TIER" = emu ]; then
  run_one "emu/avx512_in_bochs" bash tests/emu/run_avx512_tests.sh
  finish
fi

make -s -j"$JOBS" all unit || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }

run_one "check/layout" bash scripts/check_layout.sh
run_one "check/format" bash scripts/check_format.sh
for t in build/tests/test_*; do [ -x "$t" ] && run_one "unit/$(basename "$t")" "$t"; done
[ "$TIER" = check ] && finish

if [ "${HYINFER_SKIP_ASAN:-0}" != 1 ]; then
  if make -s -j"$JOBS" asan >build/test-logs/asan-build.log 2>&1; then
    for t in build-asan/tests/test_*; do
      [ -x "$t" ] && run_one "asan/$(basename "$t")" env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$t"
    done
    # AVX-512 hosts: the kernel tests once more with the avx512 level on SIMDe's emulated
    # intrinsics as well (what an AVX2-only machine tests), in the same sanitizer configuration
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
      for t in test_kernels test_kernels_bf16x test_kernels_quant test_fp8_scale; do
        run_one "asan-emu512/$t" env HY_TEST_AVX512_EMU=1 ASAN_OPTIONS=detect_leaks=1 \
          UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "build-asan/tests/$t"
      done
    fi
  else
    fail=$((fail+1)); failed+=("asan-build"); echo "FAIL asan build:"; tail -20 build/test-logs/asan-build.log
  fi
fi

for t in tests/golden/test_* tests/e2e/test_* tests/dist/test_*; do
  [ -f "$t" ] || continue
  case "$t" in
    *.py) run_one "${t#tests/}" "$PYTHON" "$t" ;;
    *.sh) run_one "${t#tests/}" bash "$t" ;;
    *.mjs|*.js)
      if command -v node >/dev/null; then run_one "${t#tests/}" node "$t"
      else run_one "${t#tests/}" bash -c 'echo "node is not installed (Node 20 runs the openai client and reference tokenizers)"; exit 77'; fi ;;
  esac
done

# The model-level golden checks once more on the scalar reference kernels (the default run uses
# the best ISA level the machine has; test_kernels compares every level kernel by kernel).
if [ "$(build/hyinfer info 2>/dev/null | sed -n "s/^isa: //p")" != ref ]; then
  run_one "isa-ref/test_batch_invariance" env HYINFER_ISA=ref build/tests/test_batch_invariance
  run_one "isa-ref/test_llamacpp_golden.py" env HYINFER_ISA=ref "$PYTHON" tests/golden/test_llamacpp_golden.py
  run_one "isa-ref/test_hy3_reference.py" env HYINFER_ISA=ref "$PYTHON" tests/golden/test_hy3_reference.py
fi

# `make run` the first time on a fresh Debian bookworm root (debootstrap minbase + chroot; ~3-5
# minutes; needs the Debian mirror, and root: skipped with exit 77 without it).
if [ "${HYINFER_SKIP_FRESH:-0}" != 1 ]; then
  run_one "fresh/test_fresh_machine" bash tests/fresh/test_fresh_machine.sh
fi

if [ "${HYINFER_SKIP_FUZZ:-0}" != 1 ] && ls tests/fuzz/fuzz_*.c >/dev/null 2>&1; then
  if make -s -j"$JOBS" fuzz >build/test-logs/fuzz-build.log 2>&1; then
    for f in build-fuzz/fuzz_*; do
      n=$(basename "$f"); corpus="tests/fuzz/corpus/${n#fuzz_}"
      mkdir -p "build/fuzz-work/$n"
      [ -d "$corpus" ] || corpus=""
      run_one "fuzz/$n" "$f" -max_total_time="${HYINFER_FUZZ_SECONDS:-20}" -rss_limit_mb=2048 \
        "build/fuzz-work/$n" $corpus
    done
  else
    fail=$((fail+1)); failed+=("fuzz-build"); echo "FAIL fuzz build:"; tail -20 build/test-logs/fuzz-build.log
  fi
fi

finish
