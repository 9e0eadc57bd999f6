#!/usr/bin/env bash
# Checks that includes between src/ folders run one way (DESIGN: each folder includes only folders
# listed before it). Prints every include that points back up; exit 1 if any.
set -uo pipefail
cd "$(dirname "$0")/.."
ORDER=(base quant kernels dist cache config model sample sched text engine quantize bench server cli)
rank() { local i; for i in "${!ORDER[@]}"; do [ "${ORDER[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
bad=0
for d in src/*/; do
  d=$(basename "$d"); rd=$(rank "$d")
  if [ "$rd" -lt 0 ]; then echo "check_layout: src/$d is not in the layout order (scripts/check_layout.sh)"; bad=1; continue; fi
  while IFS=: read -r file line inc; do
    t=$(sed -n 's/^#include "\([a-z_0-9]*\)\/.*/\1/p' <<<"$inc")
    [ -z "$t" ] && continue
    rt=$(rank "$t")
    if [ "$rt" -lt 0 ] || [ "$rt" -gt "$rd" ]; then
      echo "check_layout: $file:$line: $inc (src/$d may include only: ${ORDER[*]:0:$((rd + 1))})"; bad=1
    fi
  done < <(grep -n '^#include "' src/"$d"/*.[ch] /dev/null)
done
[ $bad -eq 0 ] && echo "check_layout: includes run one way (${ORDER[*]})"
exit $bad
