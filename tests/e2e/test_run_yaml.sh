#!/usr/bin/env bash
# hyinfer run --yaml end to end on hy3-golden-b: batched + chunked-prefill greedy completions in
# fp32 mode equal one-at-a-time `hyinfer generate` output; LongBench jsonl with middle truncation;
# apply_chat_template; output_path JSON; the report lines.
set -euo pipefail
cd "${HYINFER_ROOT:-.}"
BIN=$PWD/build/hyinfer
MODEL="$(cd tests/data/hy3-golden-llamacpp/hy3-golden-b && pwd)"
W=$PWD/build/e2e-run
rm -rf "$W"; mkdir -p "$W"
fail() { echo "FAIL: $*"; exit 1; }

cat > "$W/prompts.json" <<'JSON'
["KING RICHARD III:", "O, what a rogue and peasant slave am I", "the crown", "Hark! who knocks?", "BRUTUS:\nBe patient till the last."]
JSON
write_yaml() {  # file, batch_size, max_prefill_tokens, extra data_config lines
  cat > "$1" <<YAML
model_config:
  model_name: "golden-b"
  model_path: "$MODEL"
  dtype: "float32"
data_config:
  dataset: "default"
  dataset_path: "$W/prompts.json"
$4
parallel_config:
  world_size: 1
scheduler_config:
  max_new_tokens: 10
  batch_size: $2
  max_prefill_tokens: $3
  block_size: 4
sampling:
  temperature: 0
YAML
}
write_yaml "$W/a.yaml" 4 64 "  input_truncated_len: 0"
sed -i "s|^  model_name: \"golden-b\"|  model_name: \"golden-b\"\n  output_path: \"$W/a.json\"|" "$W/a.yaml"
$BIN run --yaml "$W/a.yaml" >"$W/a.out" 2>"$W/a.err" || { cat "$W/a.err"; fail "run a"; }
for k in "load time" "prefill" "TTFT" "TPOT" "decode" "peak RSS"; do grep -q "$k" "$W/a.err" || fail "report lacks $k"; done
grep -q "max batch 4" "$W/a.err" || fail "batch of 4 never formed: $(grep decode "$W/a.err")"

# chunked prefill (3-token chunks) and batch 2 must give the same text
write_yaml "$W/b.yaml" 2 3 "  input_truncated_len: 0"
sed -i "s|^  model_name: \"golden-b\"|  model_name: \"golden-b\"\n  output_path: \"$W/b.json\"|" "$W/b.yaml"
$BIN run --yaml "$W/b.yaml" >"$W/b.out" 2>"$W/b.err" || { cat "$W/b.err"; fail "run b"; }

python3 - "$W" "$BIN" "$MODEL" <<'PY'
import json, subprocess, sys
w, bin_, model = sys.argv[1:]
a = json.load(open(f"{w}/a.json")); b = json.load(open(f"{w}/b.json"))
prompts = json.load(open(f"{w}/prompts.json"))
assert len(a) == len(prompts) == len(b), (len(a), len(b))
for i, p in enumerate(prompts):
    assert a[i]["prompt"] == p and 1 <= a[i]["completion_tokens"] <= 10, a[i]
    one = subprocess.run([bin_, "generate", "-m", model, "-p", p, "-n", "10", "--temperature", "0",
                          "--dtype", "float32"], capture_output=True, text=True, check=True).stdout
    assert one.endswith("\n"), repr(one)
    assert a[i]["completion"] == one[:-1], (i, a[i]["completion"], one)
    assert b[i]["completion"] == a[i]["completion"], (i, b[i], a[i])
print("batched/chunked completions equal single-request greedy output for", len(prompts), "prompts")
PY

# LongBench jsonl + middle truncation to 24 tokens
cat > "$W/lb.jsonl" <<'JSON'
{"context": "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer the slings and arrows of outrageous fortune", "input": "What is the question?", "answers": ["to be"], "length": 30}

{"context": "Now is the winter of our discontent made glorious summer by this sun of York.", "input": "Which season?", "answers": "winter"}
JSON
cat > "$W/lb.yaml" <<YAML
model_config:
  model_path: "$MODEL"
  dtype: "float32"
  output_path: "$W/lb.json"
data_config:
  dataset: "LongBench"
  dataset_path: "$W/lb.jsonl"
  input_truncated_len: 24
scheduler_config:
  max_new_tokens: 4
  batch_size: 2
YAML
$BIN run --yaml "$W/lb.yaml" >"$W/lb.out" 2>"$W/lb.err" || { cat "$W/lb.err"; fail "LongBench run"; }
python3 -c "
import json,sys; r=json.load(open('$W/lb.json')); assert len(r)==2, r
assert all(x['prompt_tokens']==24 for x in r), [x['prompt_tokens'] for x in r]
assert 'Now, answer the question based on the text above.' in r[0]['prompt'] and r[0]['prompt'].endswith('Answer:'), r[0]['prompt']
"

# apply_chat_template: the prompt is the rendered user turn (BOS + reasoning mode + user + assistant)
write_yaml "$W/c.yaml" 2 64 "  apply_chat_template: true"
sed -i "s|^  model_name: \"golden-b\"|  model_name: \"golden-b\"\n  output_path: \"$W/c.json\"|" "$W/c.yaml"
$BIN run --yaml "$W/c.yaml" >"$W/c.out" 2>"$W/c.err" || { cat "$W/c.err"; fail "chat run"; }
want=$($BIN logits -m "$MODEL" -p "the crown" --chat --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)['prompt_ids']))")
got=$(python3 -c "import json; print(json.load(open('$W/c.json'))[2]['prompt_tokens'])")
[ "$want" = "$got" ] || fail "chat prompt tokens $got != $want"
plain=$(python3 -c "import json; print(json.load(open('$W/a.json'))[2]['prompt_tokens'])")
[ "$got" -gt "$((plain + 5))" ] || fail "chat template did not wrap the prompt ($got vs $plain tokens)"
echo "ok"
