#!/usr/bin/env bash
# Checks the layout of src/ (DESIGN §3):
#  1. includes between folders run one way: each folder includes only folders listed before it;
#  2. no cycle of includes between the files of one folder (x.c includes y.h while y.c, directly or
#     through more files, includes x.h);
#  3. no cycle of calls between the files of one folder (x.o uses a function y.o defines and back),
#     read from the objects of $BUILD (default build/) when they are there; src/kernels is exempt (its
#     dispatch table names every level and the levels fall back to ref through it), its cycles listed.
# Prints every offence and the cycle counts; exit 1 if any.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ORDER=(base quant kernels comm cache config model sample sched text engine quantize bench server cli)
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

# Cycles in the "a b" edges on stdin: tsort reports each loop it breaks ("tsort: -: input contains a
# loop:" then its files). Prints one line per loop; the loop count goes to $loop_count.
loops() { # $1: folder, $2: what the edges are
  local out
  out=$(tsort 2>&1 >/dev/null | awk '/input contains a loop/ {if (l != "") print l; l = ""; next}
                                       /^tsort: / {sub(/^tsort: /, ""); l = l (l == "" ? "" : " -> ") $0}
                                       END {if (l != "") print l}')
  loop_count=0
  [ -z "$out" ] && return
  loop_count=$(wc -l <<<"$out")
  while read -r l; do echo "check_layout: src/$1: $2 in a cycle: $l"; done <<<"$out"
}
CALLS_EXEMPT=" kernels " # rooms whose call cycles are listed, not failed
inc_cycles=0 call_cycles=0 call_bad=0 objs=0
for dir in src/*/; do
  d=$(basename "$dir")
  # 2. x -> y when x.c includes "d/y.h" and y.c exists (y another file of this folder)
  edges=$(for f in "$dir"*.c; do
            x=$(basename "$f" .c)
            sed -n "s/^#include \"$d\/\([a-z_0-9]*\)\.h\".*/\1/p" "$f" | while read -r y; do
              [ "$y" != "$x" ] && [ -f "$dir$y.c" ] && echo "$x $y"
            done
          done | sort -u)
  if [ -n "$edges" ]; then
    loops "$d" "includes" <<<"$edges"; inc_cycles=$((inc_cycles + loop_count))
  fi
  # 3. x -> y when x.o has an undefined symbol that y.o defines
  ls "$BUILD/$dir"*.o >/dev/null 2>&1 || continue
  objs=1
  edges=$(for o in "$BUILD/$dir"*.o; do
            x=$(basename "$o" .o)
            nm "$o" 2>/dev/null | awk -v x="$x" '$2 ~ /^[TDBR]$/ {print "D", x, $3} $1 == "U" {print "U", x, $2}'
          done | awk '$1 == "D" {def[$3] = $2; next} {use[++n] = $2 " " $3}
                      END {for (i = 1; i <= n; i++) {split(use[i], a, " "); if ((a[2] in def) && def[a[2]] != a[1]) print a[1], def[a[2]]}}' |
          sort -u)
  if [ -n "$edges" ]; then
    loops "$d" "calls" <<<"$edges"; call_cycles=$((call_cycles + loop_count))
    [[ "$CALLS_EXEMPT" == *" $d "* ]] || call_bad=$((call_bad + loop_count))
  fi
done
if [ $objs -eq 1 ]; then
  echo "check_layout: $inc_cycles include cycles between the files of a folder; $call_cycles call cycles (objects of $BUILD/), $call_bad of them outside src/kernels (must be none)"
else
  echo "check_layout: $inc_cycles include cycles between the files of a folder; no objects in $BUILD/, calls not checked"
fi
[ $inc_cycles -gt 0 ] || [ $call_bad -gt 0 ] && bad=1
exit $bad
