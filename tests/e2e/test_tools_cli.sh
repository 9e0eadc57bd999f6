#!/bin/bash
# test_tools_cli.sh - tool calling without the server: `generate --chat --tools FILE` and
# `run --yaml --tools FILE` render the tools into the chat prompt and print the parsed calls, for
# the three bundled chat dialects (models/hy3-tiny, models/hy4-tiny, tests/data/hy3-preview-tiny: each
# tool-trained model calls get_weather with its own tags); --chat-template replaces the checkpoint's
# template; bad tools files, a missing template and --tools without a chat prompt are clear errors.
set -u
cd "$(dirname "$0")/../.."
BIN=build/hyinfer
M=models/hy3-tiny
[ -x "$BIN" ] || { echo "skip: build/hyinfer missing"; exit 77; }
[ -f "$M/model.safetensors" ] || { echo "skip: $M missing"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat >"$W/tools.json" <<'JSON'
[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]
JSON
for MM in $M models/hy4-tiny tests/data/hy3-preview-tiny; do
  out=$($BIN generate -m $MM --chat --tools "$W/tools.json" -p "What is the weather like in Paris?" -n 64 --temperature 0 \
        --dtype float32 2>"$W/err") || fail "$MM: generate --tools failed: $(cat "$W/err")"
  echo "$out" | tail -1 | grep -q '^tool_calls: \[' || fail "$MM: no tool_calls line: $out"
  if grep -qi "tool[- ]call" "$MM/TRAINING.md" 2>/dev/null || [ "$MM" = tests/data/hy3-preview-tiny ]; then
    echo "$out" | tail -1 | grep -q '"name":"get_weather"' || fail "$MM: the tool-trained model did not call get_weather: $out"
  fi
  echo "$MM: $(echo "$out" | tail -1 | cut -c1-160)"
done
out=$($BIN generate -m $M --chat --tools "$W/tools.json" -p "Weather in Paris?" -n 8 --temperature 0 --dtype float32 2>"$W/err") ||
  fail "generate --tools failed: $(cat "$W/err")"
# the tools reach the prompt: the prompt is longer than without them
p1=$(grep -o 'prompt [0-9]* tokens' "$W/err")
$BIN generate -m $M --chat -p "Weather in Paris?" -n 1 --temperature 0 --dtype float32 2>"$W/err0" >/dev/null
p0=$(grep -o 'prompt [0-9]* tokens' "$W/err0")
[ "$p1" != "$p0" ] || fail "tools did not change the prompt ($p1)"

# --chat-template: a file or the text itself replaces the checkpoint's template
printf '{{ bos_token }}{{ messages[0].content }}' >"$W/bare.jinja"
$BIN generate -m $M --chat --chat-template "$W/bare.jinja" -p "Weather in Paris?" -n 1 --temperature 0 2>"$W/e1" >/dev/null ||
  fail "--chat-template FILE: $(cat "$W/e1")"
$BIN generate -m $M -p "Weather in Paris?" -n 1 --temperature 0 2>"$W/e2" >/dev/null
[ "$(grep -o 'prompt [0-9]* tokens' "$W/e1")" = "$(grep -o 'prompt [0-9]* tokens' "$W/e2")" ] ||
  fail "--chat-template FILE did not replace the template ($(grep -o 'prompt [0-9]* tokens' "$W/e1"))"
$BIN generate -m $M --chat --chat-template '{{ messages[0].content }}' -p "Weather in Paris?" -n 1 2>"$W/e1" >/dev/null ||
  fail "--chat-template TEXT: $(cat "$W/e1")"
$BIN generate -m $M --chat --chat-template no-such.jinja -p x -n 1 >/dev/null 2>"$W/e" && fail "missing template file accepted"
grep -q "no-such.jinja" "$W/e" || fail "unclear error: $(cat "$W/e")"
$BIN generate -m $M --chat --chat-template $'a\n{% for x in y %}' -p x -n 1 >/dev/null 2>"$W/e" && fail "broken template accepted"
grep -q "line 2" "$W/e" || fail "template error does not name the line: $(cat "$W/e")"
GB=tests/data/hy4-golden-llamacpp/hy4-golden-b
if [ -d "$GB" ]; then # a checkpoint whose tokenizer_config.json holds its template
  $BIN generate -m $GB --chat -p "Hello" -n 1 --temperature 0 >/dev/null 2>"$W/e" || fail "tokenizer_config template: $(cat "$W/e")"
fi

echo '{"tools": []}' >"$W/empty.json"
echo '[{"type":"function","function":{}}]' >"$W/noname.json"
echo '[{"type":' >"$W/broken.json"
for f in empty noname broken; do
  $BIN generate -m $M --chat --tools "$W/$f.json" -p x -n 1 >/dev/null 2>"$W/e" && fail "$f.json accepted"
  grep -q "$f.json" "$W/e" || fail "$f.json: error does not name the file: $(cat "$W/e")"
done
$BIN generate -m $M --tools "$W/tools.json" -p x -n 1 >/dev/null 2>"$W/e" && fail "--tools without --chat accepted"
grep -q -- "--tools needs --chat" "$W/e" || fail "unclear error: $(cat "$W/e")"

# run: one prompt through the YAML job with tools; output records carry tool_calls
echo '["Weather in Paris?", "Time in Tokyo?"]' >"$W/prompts.json"
cat >"$W/job.yaml" <<YAML
model_config:
  model_path: "$PWD/$M"
  dtype: "float32"
  output_path: "$W/out.json"
data_config:
  dataset: "default"
  dataset_path: "$W/prompts.json"
  apply_chat_template: true
scheduler_config:
  max_new_tokens: 6
  batch_size: 2
sampling:
  temperature: 0
YAML
$BIN run --yaml "$W/job.yaml" --tools "$W/tools.json" >"$W/run.txt" 2>"$W/e" || fail "run --tools failed: $(cat "$W/e")"
python3 - "$W/out.json" <<'PY' || fail "run output lacks tool_calls lists"
import json, sys
recs = json.load(open(sys.argv[1]))
assert len(recs) == 2 and all(isinstance(r.get("tool_calls"), list) for r in recs), recs
PY
sed -i 's/apply_chat_template: true/apply_chat_template: false/' "$W/job.yaml"
$BIN run --yaml "$W/job.yaml" --tools "$W/tools.json" >/dev/null 2>"$W/e" && fail "run --tools without chat accepted"
grep -q "apply_chat_template" "$W/e" || fail "unclear error: $(cat "$W/e")"
echo "ok: generate --tools, run --tools, bad tools files"
