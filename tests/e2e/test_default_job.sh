#!/usr/bin/env bash
# The main job (`make run` = hyinfer run --yaml configs/default.yaml) on the bundled models/hy3-tiny:
# exits 0 without warnings, prints one completion per default prompt, the full report, and the
# greedy completions are English words from the training corpus's vocabulary (a trained model,
# not noise): at least 70% of generated word tokens occur in tinyshakespeare.
set -euo pipefail
cd "${HYINFER_ROOT:-.}"
out=build/e2e-default-job; mkdir -p "$out"
build/hyinfer run --yaml configs/default.yaml >"$out/stdout" 2>"$out/stderr" || { cat "$out/stderr"; exit 1; }
if grep -qi "warning" "$out/stderr"; then echo "unexpected warning:"; cat "$out/stderr"; exit 1; fi
n_prompts=$(python3 -c "import json; print(len(json.load(open('data/prompts_default.json'))))")
n_done=$(grep -c '^--- completion' "$out/stdout")
[ "$n_done" = "$n_prompts" ] || { echo "expected $n_prompts completions, got $n_done"; exit 1; }
for k in "load time" "prefill" "TTFT" "TPOT" "decode" "throughput" "peak RSS"; do
  grep -q "^$k" "$out/stderr" || { echo "report lacks '$k'"; cat "$out/stderr"; exit 1; }
done
python3 - "$out/stdout" "tests/data/corpora/tinyshakespeare.txt" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
corpus = set(re.findall(r"[a-z']+", open(sys.argv[2], encoding="utf-8").read().lower()))
comps = re.findall(r"^--- completion.*?---\n(.*?)(?=^=== \[|\Z)", text, re.S | re.M)
words = [w for c in comps for w in re.findall(r"[a-z']+", c.lower())]
known = sum(w in corpus for w in words)
print(f"{len(comps)} completions, {len(words)} words, {known / max(1, len(words)):.1%} in the corpus vocabulary")
sys.exit(0 if words and known / len(words) >= 0.7 else 1)
PY
