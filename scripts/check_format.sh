#!/usr/bin/env bash
# Checks that the C sources follow .clang-format (clang-format --dry-run): src/, tests/, tools/,
# experiments/. Prints the files that differ and how to fix them; exit 1 if any. `--fix` rewrites them.
set -uo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check_format: clang-format not found (make test-deps installs it)"; exit 77; }
mapfile -t files < <(
  find src tests tools experiments -name '*.[ch]' -not -path '*/node_modules/*' 2>/dev/null | sort)
if [ "${1:-}" = --fix ]; then clang-format -i "${files[@]}"; exit 0; fi
bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) differ from .clang-format:"; printf '  %s\n' "${bad[@]}"
  echo "  fix: bash scripts/check_format.sh --fix   (see: clang-format --dry-run FILE)"
  exit 1
fi
echo "check_format: ${#files[@]} files follow .clang-format"
