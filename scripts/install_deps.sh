#!/usr/bin/env bash
# Installs what hyinfer needs, only what is missing (Debian bookworm, as root or with sudo).
#   install_deps.sh run    what building and running need (`make run`, `make deps`)
#   install_deps.sh mpi    that plus Open MPI (`make mpi`: multi-rank runs)
#   install_deps.sh test   that plus the test tooling (`make test`): cmocka, clang, SIMDe, Python
#                          packages, Open MPI (the multi-rank tests; the build uses it where present),
#                          and the npm packages pinned in tests/js/package.json
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-run}"
case "$mode" in run|mpi|test) ;; *) echo "usage: $0 run|mpi|test" >&2; exit 2 ;; esac

RUN_PKGS="make gcc libc6-dev pkg-config libpcre2-dev libjansson-dev libyaml-dev libmicrohttpd-dev"
TEST_PKGS="libcmocka-dev clang libclang-rt-14-dev python3 python3-numpy python3-jinja2 python3-regex
  curl libsimde-dev clang-format debootstrap libopenmpi-dev openmpi-bin"
MPI_PKGS="libopenmpi-dev openmpi-bin"
want="$RUN_PKGS"
[ "$mode" = mpi ] && want="$RUN_PKGS $MPI_PKGS"
[ "$mode" = test ] && want="$RUN_PKGS $TEST_PKGS"

missing=()
for p in $want; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "install_deps: ${missing[*]} missing; run this as root or install sudo" >&2; exit 1; }
    SUDO="sudo"
  fi
  # Package lists may be stale or absent on a fresh machine: refresh them first. apt's own
  # progress lines (Get:, Setting up) show, one per package, so nothing is silent for long.
  echo "install_deps: apt-get update (the package lists)"
  $SUDO apt-get update -q | { grep -v '^\(Hit\|Ign\|Reading\)' || true; }
  echo "install_deps: apt-get install ${missing[*]} (a minute or two on a fresh machine)"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" |
    { grep -E '^(Get:|Setting up|E:)' || true; } ||
    { echo "install_deps: apt-get install ${missing[*]} failed (see apt's message above)" >&2; exit 1; }
fi

[ "$mode" = test ] || exit 0
# npm test tooling (reference tokenizers, the openai client), pinned in tests/js/package.json.
if [ -f tests/js/package.json ] && { [ ! -d tests/js/node_modules ] || [ tests/js/package.json -nt tests/js/node_modules/.package-lock.json ]; }; then
  if command -v npm >/dev/null 2>&1; then
    echo "install_deps: npm install in tests/js"
    (cd tests/js && npm install --no-audit --no-fund --loglevel=error)
  else
    echo "install_deps: npm not found; tests that need the npm packages will be skipped" >&2
  fi
fi
