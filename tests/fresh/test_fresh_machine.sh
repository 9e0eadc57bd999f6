#!/usr/bin/env bash
# A newcomer's first screen on a fresh Debian bookworm machine: a minimal bookworm root
# (debootstrap --variant=minbase: no make, git, curl or compiler), the repository as a clone source
# (/root/hyinfer.git, a shallow bare clone of HEAD), and the README's first-screen shell blocks run as
# written inside it with chroot, as root: the blocks marked "tests/fresh/test_fresh_machine.sh runs"
# in README.md, extracted here (so README and test cannot drift), REPO_URL replaced by the clone source.
# They install git/make/curl, clone, `make run` (whose own install step, scripts/install_deps.sh run,
# has to bring the compiler and libraries), `make install`, then the quick start (generate, generate
# with tools, serve + curl). The test passes when the script exits 0, make run printed its report,
# and the server answered the curl with a chat completion.
#   Exit 0 pass, 1 fail, 77 skip (not root, or HYINFER_SKIP_FRESH=1).
#   HYINFER_FRESH_ROOT   where the root goes (default build/fresh-root; wiped first, removed on pass)
#   HYINFER_FRESH_KEEP=1 keep the root after a pass too (it is always kept after a failure)
#   HYINFER_FRESH_TIMEOUT seconds for the README phase (default 900)
# Mounts: debootstrap and the README phase run in private mount namespaces (unshare), so the proc,
# sysfs, devpts and tmpfs mounts they need inside the root (never a bind of the host's /dev) are never
# visible on the host (a `grep -r`, `find` or `make clean` from the repository root does not walk
# into them) and vanish with the last process inside, even if this script is killed with SIGKILL.
# The README phase also gets its own PID namespace: when it ends, nothing it started (the quick
# start's server) survives. Every exit path still kills what runs in the root and unmounts anything
# mounted below it on the host before any rm -rf (rm -rf --one-file-system besides), and a stale root
# from an earlier run is wiped so.
# The apt mirror comes from this machine's own apt sources (none: the test fails saying so).
# Takes ~4-6 minutes on 2 cores with a fast mirror (debootstrap ~1-1.5 min, apt ~30-60 s, the
# build ~1 min, the run and quick start ~10-30 s, removing the root ~5-30 s); prints each phase's time.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
REPO="$PWD"

skip() { echo "SKIP: $*"; exit 77; }
fail() { FINAL="FAIL: $*"; exit 1; }
[ "${HYINFER_SKIP_FRESH:-0}" = 1 ] && skip "HYINFER_SKIP_FRESH=1"
[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, mount, chroot)"

SUITE=bookworm
ROOT="${HYINFER_FRESH_ROOT:-$REPO/build/fresh-root}"
case "$ROOT" in /*) ;; *) ROOT="$REPO/$ROOT" ;; esac
ROOT="$(realpath -m "$ROOT")"
case "$ROOT" in /|/bin|/boot|/dev|/etc|/home|/lib*|/proc|/root|/run|/sbin|/sys|/tmp|/usr|/var|"$REPO")
  echo "FAIL: refusing to use $ROOT as the fresh root"; exit 1 ;; esac
LOGDIR="$(dirname "$ROOT")"
mkdir -p "$LOGDIR"
DBS_LOG="$ROOT.debootstrap.log"
RUN_LOG="$ROOT.readme.log"

T_START=$SECONDS
phase_t0=$SECONDS
phases=()
phase_end() {  # name: records how long the phase took
  local s=$((SECONDS - phase_t0))
  phases+=("$(printf '%-26s %4ds' "$1" "$s")")
  echo "== $1: ${s}s"
  phase_t0=$SECONDS
}
print_phases() {
  echo "== phases (wall time):"
  local p; for p in "${phases[@]}"; do echo "   $p"; done
  echo "   $(printf '%-26s %4ds' total $((SECONDS - T_START)))"
}

# ---- mounts: every mount at or below $ROOT, deepest first ----
mounts_under_root() {
  # /proc/self/mountinfo field 5 is the mount point (spaces etc. octal-escaped; ours have none).
  awk -v r="$ROOT" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
kill_root_procs() {  # processes left running inside the root (only this test starts any there)
  local p pid r n=0
  for p in /proc/[0-9]*; do
    r="$(readlink "$p/root" 2>/dev/null)"
    [ "$r" = "$ROOT" ] || [ "$r" = "$ROOT (deleted)" ] || continue
    pid="${p#/proc/}"; kill -KILL "$pid" 2>/dev/null && n=$((n + 1))
  done
  [ $n -eq 0 ] || { echo "cleanup: killed $n processes left running in the root"; sleep 1; }
}
unmount_all() {
  local m n=0
  while [ -n "$(mounts_under_root)" ] && [ $n -lt 5 ]; do
    kill_root_procs
    for m in $(mounts_under_root); do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || echo "cleanup: cannot unmount $m"
    done
    n=$((n + 1))
  done
  if [ -n "$(mounts_under_root)" ]; then
    echo "cleanup: STILL MOUNTED under $ROOT:"; mounts_under_root | sed 's/^/    /'
    return 1
  fi
  return 0
}
wipe_root() {
  [ -e "$ROOT" ] || return 0
  kill_root_procs
  unmount_all || { echo "FAIL: will not rm -rf $ROOT while something is mounted below it"; return 1; }
  # --one-file-system: even a mount that appeared meanwhile is never descended into.
  rm -rf --one-file-system "$ROOT"
}
RESULT=1
BG_PID=
FINAL=
on_exit() {
  local rc=$? t0=$SECONDS
  trap - EXIT INT TERM HUP
  if [ -n "${BG_PID:-}" ] && kill -TERM "$BG_PID" 2>/dev/null; then  # debootstrap or make run, interrupted
    kill_root_procs
    local _; for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$BG_PID" 2>/dev/null || break; sleep 1; done
  fi
  unmount_all || rc=1
  if [ "$RESULT" -eq 0 ] && [ "${HYINFER_FRESH_KEEP:-0}" != 1 ]; then
    wipe_root || rc=1
    echo "== cleanup (unmount, rm -rf the root): $((SECONDS - t0))s"
  elif [ -d "$ROOT" ]; then
    echo "(kept the root at $ROOT; nothing is mounted in it; it is wiped on the next run)"
  fi
  # A skip or a pass prints its verdict last.
  [ -n "${FINAL:-}" ] && echo "$FINAL"
  exit "$rc"
}
trap on_exit EXIT
trap 'echo "interrupted (SIGINT)"; exit 130' INT
trap 'echo "interrupted (SIGTERM)"; exit 143' TERM
trap 'echo "interrupted (SIGHUP)"; exit 129' HUP

# One run at a time on this root (several engineers may run the test suite at once).
exec 9>"$ROOT.lock"
flock -w 1800 9 || fail "another run holds $ROOT.lock"

# ---- phase 1: debootstrap on the host ----
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "installing debootstrap on the host"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; } ||
    fail "cannot install debootstrap"
fi
phase_end "host: debootstrap present"

# ---- the host's Debian mirrors (main archive, security) ----
# deb822 paragraphs (/etc/apt/sources.list.d/*.sources) and one-line entries (*.list).
mirror_for() {  # suite -> first URI that serves it
  local suite="$1" f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$suite" 'BEGIN { RS = ""; FS = "\n" }
      { uri = ""; ok = 0; deb = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^Types:/ && $i ~ /[ \t]deb([ \t]|$)/) deb = 1
          if ($i ~ /^URIs:/) { split($i, u, /[ \t]+/); uri = u[2] }
          if ($i ~ /^Suites:/) { n = split($i, w, /[ \t]+/); for (j = 2; j <= n; j++) if (w[j] == s) ok = 1 }
        }
        if (deb && ok && uri != "") { print uri; exit } }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -E 's/\[[^]]*\]//' "$f" | awk -v s="$suite" '$1 == "deb" && $3 == s { print $2; exit }'
  done
}
# Only the machine's own apt configuration names the mirrors: the repository names no package host.
MIRROR="$(mirror_for "$SUITE" | head -1)"
SEC_MIRROR="$(mirror_for "$SUITE-security" | head -1)"
[ -n "$MIRROR" ] || fail "no apt source for $SUITE in /etc/apt/sources.list or /etc/apt/sources.list.d/ (a 'deb URI $SUITE main' line or a deb822 paragraph): the test takes its mirror from there"
echo "mirror: $MIRROR (security: ${SEC_MIRROR:-none configured on this machine})"

# ---- phase 2: a fresh minimal root ----
wipe_root || fail "could not wipe the stale root $ROOT"
phase_end "wipe stale root"
mkdir -p "$(dirname "$ROOT")"
# minbase only: git, make and curl come from the README's first line, the compiler, pkg-config and
# the libraries from the Makefile's own install step.
# Its /proc and /sys mounts in the target stay inside a private mount namespace; --pdeathsig: it
# stops if this script dies without its trap (SIGKILL).
# A failed download (a mirror's hiccup) gets one more try on a wiped root after 30 s; the free
# disk is printed with a failure, since a full disk fails the downloads the same way.
for attempt in 1 2; do
  setpriv --pdeathsig TERM unshare --mount --propagation private -- \
    debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" >"$DBS_LOG" 2>&1 9>&- &
  BG_PID=$!; wait $BG_PID; dbs_rc=$?; BG_PID=
  [ $dbs_rc -eq 0 ] && break
  echo "debootstrap (try $attempt) exited $dbs_rc; $(df -Pm "$(dirname "$ROOT")" | awk 'NR == 2 { print $4 }') MiB free;" \
    "last lines of $DBS_LOG:"
  tail -30 "$DBS_LOG" | sed 's/^/    /'
  if [ $attempt -eq 1 ] && grep -q "Couldn't download" "$DBS_LOG"; then
    wipe_root || fail "could not wipe the root after a failed debootstrap"
    sleep 30
    continue
  fi
  fail "debootstrap exited $dbs_rc"
done
phase_end "debootstrap minbase"

# What a fresh bookworm install's apt sources look like (the main archive, updates, security), on
# the host's mirrors.
rm -f "$ROOT/etc/apt/sources.list"
cat >"$ROOT/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
[ -z "$SEC_MIRROR" ] || cat >>"$ROOT/etc/apt/sources.list.d/debian.sources" <<EOF

Types: deb
URIs: $SEC_MIRROR
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
# The package lists debootstrap leaves behind are dropped: the install step must fetch its own.
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin
mkdir -p "$ROOT/var/lib/apt/lists/partial"
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
# A chroot, not a booted machine: package scripts must not start daemons in it.
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"; chmod 755 "$ROOT/usr/sbin/policy-rc.d"

for p in gcc cc pkg-config make git curl; do
  if chroot "$ROOT" /bin/sh -c "command -v $p" >/dev/null 2>&1; then
    fail "the fresh root already has $p: the test would not prove that make run installs it"
  fi
done

# ---- phase 3: the repository, as committed, and the README's first-screen commands ----
if ! git clone -q --bare --depth 1 "file://$REPO" "$ROOT/root/hyinfer.git" 2>"$ROOT.clone.err"; then
  fail "git clone --bare --depth 1 of $REPO failed: $(cat "$ROOT.clone.err")"
fi
echo "repository: $(git -C "$REPO" rev-parse --short HEAD) -> /root/hyinfer.git ($(du -sh "$ROOT/root/hyinfer.git" | cut -f1))"
# the fenced blocks that follow a "<!-- tests/fresh/test_fresh_machine.sh runs ... -->" line
SCRIPT="$ROOT/root/first-screen.sh"
{
  echo "set -ex"
  awk '/^<!-- tests\/fresh\/test_fresh_machine.sh runs/ { want = 1; next }
       want && /^```/ { if (inside) { inside = 0; want = 0 } else inside = 1; next }
       inside { print }' "$REPO/README.md" | sed 's|REPO_URL|/root/hyinfer.git|g'
  echo 'kill $(jobs -p) 2>/dev/null; wait; echo "first screen: done"'  # the quick start's server
} >"$SCRIPT"
n_cmds=$(grep -vc '^\(set -ex\|kill .*\)$' "$SCRIPT")
grep -q "make run" "$SCRIPT" && grep -q "git clone" "$SCRIPT" && grep -q "curl" "$SCRIPT" ||
  fail "README.md's marked blocks lack git clone / make run / curl; extracted:$(sed 's/^/ | /' "$SCRIPT")"
echo "README first screen: $n_cmds commands:"; sed -n '2,$p' "$SCRIPT" | sed 's/^/   $ /'
phase_end "clone source + README commands"

# ---- phase 4: make run, once ----
# What apt and the build need inside (and a fresh machine has): /proc, /sys (read-only), /dev/pts,
# /dev/shm; debootstrap made the static nodes in /dev (null, zero, random, urandom, tty, ...).
# In a private mount namespace and a new PID namespace: see the top of this file.
echo "running README's first screen in the fresh root (log: $RUN_LOG)"
# In the background, and waited for, so that a signal to this script runs its trap at once (the trap
# kills what runs in the root); --pdeathsig: if this script dies without its trap (SIGKILL), timeout
# gets SIGTERM and ends make run. Each line of output is stamped with the seconds since the start.
setpriv --pdeathsig TERM timeout -k 10 "${HYINFER_FRESH_TIMEOUT:-900}" \
  unshare --mount --propagation private --pid --fork --kill-child -- /bin/bash -c '
    set -e; r="$1"
    mount -t proc proc "$r/proc"
    mount -t sysfs -o ro sysfs "$r/sys"
    mkdir -p "$r/dev/pts" "$r/dev/shm"
    mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$r/dev/pts"
    mount -t tmpfs -o mode=1777,size=1g tmpfs "$r/dev/shm"
    set +e
    chroot "$r" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      /bin/bash -c "cd /root && bash /root/first-screen.sh" 2>&1 |
      while IFS= read -r line || [ -n "$line" ]; do printf "[%4ds] %s\n" $SECONDS "$line"; done
    exit "${PIPESTATUS[0]}"' _ "$ROOT" </dev/null >"$RUN_LOG" 2>&1 9>&- &
BG_PID=$!; wait $BG_PID; run_rc=$?; BG_PID=
phase_end "README first screen (chroot)"
kill_root_procs
unmount_all || fail "could not unmount everything under $ROOT"

# Where the time went: the README's apt line, make run's install step / build / run, the quick start.
awk '
  function ts(l) { sub(/^\[ */, "", l); sub(/s\].*/, "", l); return l + 0 }
  !c && /^\[ *[0-9]+s\] \+ git clone/ { c = ts($0) }
  !m && /^\[ *[0-9]+s\] \+ make run/ { m = ts($0) }
  m && !b && /^\[ *[0-9]+s\] (gcc|cc) / { b = ts($0) }
  !r && /^\[ *[0-9]+s\] \.\/build\/hyinfer run / { r = ts($0) }
  !i && /^\[ *[0-9]+s\] \+ make install/ { i = ts($0) }
  !q && /^\[ *[0-9]+s\] \+ hyinfer / { q = ts($0) }
  { e = ts($0) }
  function row(name, v) { printf "   %-26s %4ds\n", name, v }
  END { if (c) row("  apt-get git make curl", c)
        if (m && b) row("  make run: install_deps", b - m)
        if (b && r) row("  make run: build", r - b)
        if (r && i) row("  make run: hyinfer run", i - r)
        if (q) row("  quick start", e - q) }' "$RUN_LOG" >"$ROOT.split" 2>/dev/null
while IFS= read -r l; do phases+=("${l#   }"); done <"$ROOT.split"
rm -f "$ROOT.split"

missing=""
grep -q '==================== hyinfer run report ====================' "$RUN_LOG" && grep -q 'peak RSS' "$RUN_LOG" ||
  missing="$missing; make run printed no run report"
grep -q '^\[ *[0-9]*s\] \[hyinfer\] load ' "$RUN_LOG" || missing="$missing; generate printed no stats line"
grep -q '"object": *"chat.completion"' "$RUN_LOG" || missing="$missing; the curl got no chat completion"
grep -q 'first screen: done' "$RUN_LOG" || missing="$missing; the script did not reach its end"
if [ "$run_rc" -eq 0 ] && [ -z "$missing" ]; then
  print_phases
  echo "== README's first screen on a fresh $SUITE root (tail of $RUN_LOG):"
  tail -16 "$RUN_LOG"
  RESULT=0
  FINAL="PASS: README's first screen works as written on a fresh Debian $SUITE (minbase)"
  exit 0
fi
print_phases
if [ "$run_rc" -eq 124 ] || [ "$run_rc" -eq 137 ]; then why="timed out after ${HYINFER_FRESH_TIMEOUT:-900}s"
elif [ "$run_rc" -ne 0 ]; then why="exited $run_rc"
else why="exited 0 but${missing#;}"; fi
echo "== last lines of $RUN_LOG:"
tail -40 "$RUN_LOG"
fail "README's first screen on a fresh $SUITE root $why"
