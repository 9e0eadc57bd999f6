#!/usr/bin/env bash
# Installs what building, running and testing hyinfer needs, only what is missing.
# Debian packages via apt (needs root), npm packages for the test tooling locally in tests/js.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS="build-essential pkg-config libpcre2-dev libjansson-dev libyaml-dev libcmocka-dev libmicrohttpd-dev
  clang libclang-rt-14-dev python3-numpy python3-jinja2 python3-regex curl libsimde-dev"
missing=()
for p in $APT_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps: apt-get install ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm test tooling (reference tokenizers, later the openai client), pinned in tests/js/package.json.
if [ -f tests/js/package.json ] && { [ ! -d tests/js/node_modules ] || [ tests/js/package.json -nt tests/js/node_modules/.package-lock.json ]; }; then
  if command -v npm >/dev/null 2>&1; then
    echo "install_deps: npm install in tests/js"
    (cd tests/js && npm install --no-audit --no-fund --loglevel=error)
  else
    echo "install_deps: npm not found; tests that need the npm reference tokenizer will be skipped" >&2
  fi
fi
