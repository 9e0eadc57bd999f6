#!/usr/bin/env bash
# MTP speculative decoding from the command line (fp32, models/hy3-tiny): `generate` with the JSON and
# the dotted --speculative-config forms prints the same ids as without and reports the drafts;
# live acceptance equals a teacher-forced replay through `hyinfer logits --mtp`;
# `run --yaml` with model_config.next_n gives the same completions as next_n 0 and reports acceptance;
# start-up errors: k out of range, another method, bad JSON, a checkpoint without the MTP layer, one
# with an MTP tensor missing (named in the error, never a half-loaded layer), next_n out of range.
set -euo pipefail
cd "${HYINFER_ROOT:-.}"
BIN=$PWD/build/hyinfer
PY=${PYTHON:-/usr/bin/python3}
TINY="$(cd models/hy3-tiny && pwd)"
GOLD="$(cd tests/data/hy3-golden-llamacpp/hy3-golden-b && pwd)"
W=$PWD/build/e2e-spec
rm -rf "$W"; mkdir -p "$W"
fail() { echo "FAIL: $*"; exit 1; }

gen() { $BIN generate -m "$TINY" -p "ROMEO:" -n 40 --temperature 0 --dtype float32 --print-ids -t 1 "$@"; }
gen >"$W/off.ids" 2>"$W/off.err" || { cat "$W/off.err"; fail "generate off"; }
grep -q "spec decode" "$W/off.err" && fail "a spec line without speculative decoding"
for k in 1 2 3; do
  gen --speculative-config "{\"method\":\"mtp\",\"num_speculative_tokens\":$k,\"draft_p_min\":0,\"gate\":\"off\"}" \
    >"$W/k$k.ids" 2>"$W/k$k.err" || { cat "$W/k$k.err"; fail "generate k=$k"; }
  cmp -s "$W/off.ids" "$W/k$k.ids" || fail "k=$k: ids differ from decoding without drafts"
  grep -q "spec decode: k $k, drafts [1-9]" "$W/k$k.err" || { cat "$W/k$k.err"; fail "k=$k: no spec report"; }
done
gen --speculative-config.method mtp --speculative-config.num_speculative_tokens 2 >"$W/dot.ids" 2>"$W/dot.err" ||
  { cat "$W/dot.err"; fail "dotted form"; }
cmp -s "$W/off.ids" "$W/dot.ids" || fail "dotted form: ids differ"
grep -q "spec decode: k 2" "$W/dot.err" || fail "dotted form: no spec report"

# live acceptance == replay through `hyinfer logits --mtp` (k = 1, teacher-forced: the MTP argmax of row
# r is token r + 2; a round at row r moves on by 2 tokens when accepted, 1 otherwise; none for the last)
ids="128167,3442,6903,25"
$BIN generate -m "$TINY" --prompt-ids "$ids" -n 24 --ignore-eos --temperature 0 --dtype float32 --print-ids -t 1 \
  --speculative-config '{"method":"mtp","num_speculative_tokens":1,"draft_p_min":0,"gate":"off"}' \
  >"$W/live.ids" 2>"$W/live.err" || { cat "$W/live.err"; fail "generate for the replay"; }
all="$ids,$(tr -d '[] \n' <"$W/live.ids")"
$BIN logits -m "$TINY" --prompt-ids "$all" --mtp --dtype float32 -t 1 --json >"$W/replay.json" 2>/dev/null ||
  fail "logits --mtp for the replay"
"$PY" - "$W/replay.json" "$W/live.err" 4 <<'PY' || fail "live acceptance differs from the replay"
import json, re, sys
d = json.load(open(sys.argv[1]))
seq, n_prompt = d["prompt_ids"], int(sys.argv[3])
arg = [max(range(len(row)), key=row.__getitem__) for row in d["mtp_logits"]]
drafts = accepted = 0
r = n_prompt - 1
while r + 3 < len(seq):
    drafts += 1
    ok = arg[r] == seq[r + 2]
    accepted += ok
    r += 2 if ok else 1
m = re.search(r"drafts (\d+), draft tokens \d+, accepted (\d+)", open(sys.argv[2]).read())
live = (int(m.group(1)), int(m.group(2)))
print("replay: drafts %d accepted %d; live: drafts %d accepted %d" % (drafts, accepted, *live))
sys.exit(0 if (drafts, accepted) == live and accepted > 0 else 1)
PY

# run --yaml with next_n
cat > "$W/prompts.json" <<'JSON'
["ROMEO:", "JULIET:\nO Romeo, Romeo!", "KING HENRY VI:\n", "First Citizen:\nBefore we proceed any further, hear me speak."]
JSON
write_yaml() {  # file, next_n
  cat > "$1" <<YAML
model_config:
  model_name: "hy3-tiny"
  model_path: "$TINY"
  dtype: "float32"
  next_n: $2
data_config:
  dataset: "default"
  dataset_path: "$W/prompts.json"
parallel_config:
  world_size: 1
scheduler_config:
  max_new_tokens: 24
  batch_size: 4
  max_prefill_tokens: 64
  block_size: 4
sampling:
  temperature: 0
YAML
}
write_yaml "$W/n0.yaml" 0
write_yaml "$W/n2.yaml" 2
$BIN run --yaml "$W/n0.yaml" -t 1 >"$W/n0.out" 2>"$W/n0.err" || { cat "$W/n0.err"; fail "run next_n 0"; }
$BIN run --yaml "$W/n2.yaml" -t 1 --speculative-config.gate off --speculative-config.draft_p_min 0 \
  >"$W/n2.out" 2>"$W/n2.err" || { cat "$W/n2.err"; fail "run next_n 2"; }
cmp -s "$W/n0.out" "$W/n2.out" || fail "run: completions differ with next_n 2"
grep -q "^spec decode: k 2, drafts [1-9]" "$W/n2.err" || { cat "$W/n2.err"; fail "run report lacks the spec line"; }

# start-up errors
expect_err() {  # pattern, command...
  local pat="$1"; shift
  if "$@" >"$W/e.out" 2>"$W/e.err"; then fail "accepted: $*"; fi
  grep -q -- "$pat" "$W/e.err" || { cat "$W/e.err"; fail "error for '$*' lacks '$pat'"; }
}
expect_err "num_speculative_tokens" gen --speculative-config '{"method":"mtp","num_speculative_tokens":9}'
expect_err "eagle" gen --speculative-config '{"method":"eagle","num_speculative_tokens":1}'
expect_err "not valid JSON" gen --speculative-config '{"method":"mtp",'
expect_err "unknown key" gen --speculative-config '{"method":"mtp","num_speculative_tokens":1,"k":2}'
expect_err "num_speculative_tokens" gen --speculative-config.num_speculative_tokens two
write_yaml "$W/n9.yaml" 9
expect_err "model_config.next_n" $BIN run --yaml "$W/n9.yaml"

# checkpoints: without the MTP layer (no eh_proj: loads, refuses drafting), with one MTP tensor missing
mk_ckpt() {  # out dir, tensor names to drop...
  local out="$1"; shift
  mkdir -p "$out"
  cp "$GOLD"/*.json "$out/"
  "$PY" - "$GOLD/model.safetensors" "$out/model.safetensors" "$@" <<'PY'
import sys
sys.path.insert(0, "tools/ref")
import safetensors_np as st
src, dst, drop = sys.argv[1], sys.argv[2], set(sys.argv[3:])
t = st.load(src, widen_bf16=False)
missing = drop - set(t)
assert not missing, missing
st.save(dst, {k: v for k, v in t.items() if k not in drop})
PY
}
L=$(grep -o '"num_hidden_layers": *[0-9]*' "$GOLD/config.json" | grep -o '[0-9]*$')
mk_ckpt "$W/no-mtp" $("$PY" -c "
import sys; sys.path.insert(0, 'tools/ref'); import safetensors_np as st
print(' '.join(k for k in st.load('$GOLD/model.safetensors', widen_bf16=False) if k.startswith('model.layers.$L.')))")
mk_ckpt "$W/half-mtp" "model.layers.$L.enorm.weight"
ggen() { $BIN generate -m "$1" --prompt-ids 471,5,6,7 -n 4 --temperature 0 --dtype float32 -t 1 "${@:2}"; }
ggen "$W/no-mtp" >/dev/null 2>"$W/nm.err" || { cat "$W/nm.err"; fail "a checkpoint without MTP must still generate"; }
expect_err "MTP layer" ggen "$W/no-mtp" --speculative-config '{"method":"mtp","num_speculative_tokens":1}'
expect_err "model.layers.$L.enorm.weight" ggen "$W/half-mtp" --speculative-config '{"method":"mtp","num_speculative_tokens":1}'
echo "PASS: speculative decoding CLI (generate k=1..3 + dotted form, live acceptance == logits --mtp replay, run next_n, start-up errors)"
