#!/usr/bin/env bash
# src/comm/comm.c across ranks under Open MPI's mpirun (tests/dist/comm_mpi_test.c):
#   - every collective, split, dup, the non-blocking ones, bcast_idle, equal log hashes and
#     hy_dist_agree catching a rank-dependent value, at -np 2 and -np 4;
#   - the hang path: HYINFER_DIST_FAULT=skip:1:3 makes rank 1 skip a collective and the watchdog
#     (HYINFER_DIST_STEP_TIMEOUT=2) ends the job with a non-zero status and "watchdog" in its output,
#     within 20 s.
# Skipped (77) without mpirun or without libopenmpi-dev (then the build is the one-rank stub).
# Oversubscribed shared-memory transport (ob1 + vader), so it runs on a 2-core machine.
set -uo pipefail
cd "$(dirname "$0")/../.."
command -v mpirun >/dev/null || { echo "mpirun not found (openmpi-bin; make test-deps installs it)"; exit 77; }
pkg-config --exists ompi-c 2>/dev/null || { echo "Open MPI headers not found (libopenmpi-dev): dist is the one-rank stub"; exit 77; }
BUILD="${BUILD:-build}"
BIN="$BUILD/tests/comm_mpi_test"
make -s BUILD="$BUILD" "$BIN" || { echo "FAIL: building $BIN"; exit 1; }

W="$BUILD/dist-test"
rm -rf "$W"; mkdir -p "$W"
export MPIEXEC_TIMEOUT="${MPIEXEC_TIMEOUT:-60}"
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset HYINFER_DIST_FAULT HYINFER_DIST_STEP_TIMEOUT
MPIRUN=(mpirun --oversubscribe --mca pml ob1 --mca btl self,vader)

failures=0
bad() { echo "FAIL [$1]: $2"; failures=$((failures + 1)); }

for np in 2 4; do
  log="$W/np$np.log"
  "${MPIRUN[@]}" -np "$np" "$BIN" >"$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] || ! grep -q "comm_mpi_test: $np ranks ok" "$log"; then
    bad "np=$np" "exit status $rc; last lines:"; tail -20 "$log" | sed 's/^/    /'
  else
    echo "ok: np=$np: $(grep 'ranks ok' "$log")"
  fi
done

# The hang: rank 1 skips its 3rd collective; rank 0 waits in its last step until the watchdog fires.
log="$W/hang.log"
t0=$SECONDS
HYINFER_DIST_FAULT=skip:1:3 HYINFER_DIST_STEP_TIMEOUT=2 \
  timeout 30 "${MPIRUN[@]}" -x HYINFER_DIST_FAULT -x HYINFER_DIST_STEP_TIMEOUT -np 2 "$BIN" hang >"$log" 2>&1
rc=$?
dt=$((SECONDS - t0))
if [ $rc -eq 0 ]; then
  bad hang "mpirun exited 0 (the fault did not hang a rank?)"; tail -20 "$log" | sed 's/^/    /'
elif [ $dt -ge 20 ]; then
  bad hang "mpirun took ${dt} s (rc=$rc), expected the watchdog to end it within 20 s"; tail -20 "$log" | sed 's/^/    /'
elif ! grep -q "watchdog: step exceeded 2.0 s deadline" "$log"; then
  bad hang "no watchdog message (rc=$rc); last lines:"; tail -20 "$log" | sed 's/^/    /'
elif ! grep -q "fault injection: rank 1 skips collective 3" "$log"; then
  bad hang "no fault injection message (rc=$rc)"; tail -20 "$log" | sed 's/^/    /'
else
  echo "ok: hang: rc=$rc after ${dt} s: $(grep -m1 'watchdog' "$log")"
fi

[ $failures -eq 0 ] && echo "test_comm_mpi: all passed"
[ $failures -eq 0 ]
