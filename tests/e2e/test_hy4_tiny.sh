#!/usr/bin/env bash
# The bundled tiny Hy4-preview (models/hy4-tiny, hy_v4) end to end:
#  1. `hyinfer run --yaml ${HY4_YAML:-configs/hy4_tiny.yaml}` (bf16, MTP drafting on) exits 0 without warnings, one
#     completion per default prompt, and at least 60% of the generated words occur in tinyshakespeare
#     (a trained model, not noise);
#  2. the C engine (fp32) matches tools/ref/hy4_ref.py on this trained checkpoint: logits of a 300-token
#     prompt (past index_topk 64: sparse attention drops keys) and its MTP rows within 1e-4 * max(1, |ref|);
#  3. `serve`: /v1/chat/completions renders the checkpoint's chat_template.jinja and returns text: with
#     reasoning_effort no_think all of it is content; with the template's default (high) the prompt ends in
#     an open <think:opensource> and the output is split into reasoning_content and content, no marker
#     text in either; an effort the template does not know is a 400 with the template's message.
set -euo pipefail
cd "${HYINFER_ROOT:-.}"
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
out=build/e2e-hy4-tiny; mkdir -p "$out"
M=${HY4_MODEL:-models/hy4-tiny}
build/hyinfer run --yaml ${HY4_YAML:-configs/hy4_tiny.yaml} >"$out/stdout" 2>"$out/stderr" || { cat "$out/stderr"; exit 1; }
if grep -qi "warning" "$out/stderr"; then echo "unexpected warning:"; cat "$out/stderr"; exit 1; fi
"$PY" - "$out/stdout" tests/data/corpora/tinyshakespeare.txt <<'PYEOF'
import json, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
corpus = set(re.findall(r"[a-z']+", open(sys.argv[2], encoding="utf-8").read().lower()))
comps = re.findall(r"^--- completion.*?---\n(.*?)(?=^=== \[|\Z)", text, re.S | re.M)
n_prompts = len(json.load(open("data/prompts_default.json")))
words = [w for c in comps for w in re.findall(r"[a-z']+", c.lower())]
known = sum(w in corpus for w in words)
print(f"run: {len(comps)} completions, {len(words)} words, {known / max(1, len(words)):.1%} in the corpus vocabulary")
sys.exit(0 if len(comps) == n_prompts and words and known / len(words) >= 0.6 else 1)
PYEOF
"$PY" - "$M" <<'PYEOF'
import json, os, subprocess, sys
import numpy as np
sys.path.insert(0, "tools/ref"); sys.path.insert(0, "tools/make")
import hy4_ref, train_tiny_hy4
m = sys.argv[1]
tok = train_tiny_hy4.Tok(os.path.join(m, "tokenizer.json"))
text = open("tests/data/corpora/tinyshakespeare.txt", encoding="utf-8").read()[-4000:]
ids = tok.encode(text)[:300]
r = subprocess.run(["build/hyinfer", "logits", "-m", m, "--prompt-ids", ",".join(map(str, ids)), "--all-positions",
                    "--mtp", "--dtype", "float32", "--json"], capture_output=True, text=True, check=True)
j = json.loads(r.stdout)
ref = hy4_ref.Hy4Ref(m)
rl, h, sets = ref.forward(ids)
rm = ref.forward_mtp(ids, h)
d = np.abs(np.array(j["logits"]) - rl).max() / (1e-4 * max(1.0, np.abs(rl).max()))
dm = np.abs(np.array(j["mtp_logits"]) - rm).max() / (1e-4 * max(1.0, np.abs(rm).max()))
dropped = len(ids) - len(sets[0][-1])
print(f"engine vs hy4_ref on {len(ids)} tokens: logits {d:.3f}, MTP {dm:.3f} of the tolerance; the last row attends to "
      f"{len(sets[0][-1])} keys ({dropped} dropped)")
sys.exit(0 if d <= 1 and dm <= 1 and dropped > 0 else 1)
PYEOF
PORT=$(( 20000 + RANDOM % 20000 ))
build/hyinfer serve "$M" --port "$PORT" --served-model-name hy4-tiny >"$out/serve.log" 2>&1 &
SRV=$!
trap 'kill $SRV 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break; sleep 0.1; done
chat() { curl -s "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' -d "$1"; }
msg='"messages":[{"role":"user","content":"What news, my lord?"}],"max_tokens":48,"temperature":0'
chat "{\"model\":\"hy4-tiny\",$msg,\"reasoning_effort\":\"none\"}" >"$out/no_think.json"
chat "{\"model\":\"hy4-tiny\",$msg}" >"$out/high.json"
"$PY" - "$out/no_think.json" "$out/high.json" <<'PYEOF'
import json, re, sys
mark = re.compile(r"</?(think|tool_calls|tool_call|arg_key|arg_value)[:>]|hy_(start|middle|end)")
nt, hi = (json.load(open(p)) for p in sys.argv[1:3])
m = nt["choices"][0]["message"]
assert m["content"] and not m.get("reasoning_content"), nt
assert nt["usage"]["prompt_tokens"] > 0, nt
h = hi["choices"][0]["message"]
for t in (m["content"], h.get("content") or "", h.get("reasoning_content") or ""):
    assert not mark.search(t), ("marker text leaked", t)
assert h.get("reasoning_content") or h.get("content"), hi
print("serve chat no_think:", repr(m["content"][:60]))
print("serve chat high: reasoning", repr((h.get("reasoning_content") or "")[:40]), "content", repr((h.get("content") or "")[:40]))
PYEOF
bad='{"model":"hy4-tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"chat_template_kwargs":{"reasoning_effort":"max"}}'
code=$(curl -s -o "$out/bad.json" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' -d "$bad")
[ "$code" = 400 ] && grep -q reasoning_effort "$out/bad.json" || { echo "reasoning_effort: HTTP $code $(cat "$out/bad.json")"; exit 1; }
echo "PASS: hy4-tiny run --yaml, engine == hy4_ref (sparse), serve chat (no_think, high)"
