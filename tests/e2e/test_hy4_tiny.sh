#!/usr/bin/env bash
# The bundled tiny Hy4-preview (models/hy4-tiny, hy_v4) end to end:
#  1. `hyinfer run --yaml ${HY4_YAML:-configs/hy4_tiny.yaml}` (bf16, MTP drafting on) exits 0 without warnings, one
#     completion per default prompt, and at least 60% of the generated words occur in tinyshakespeare
#     (a trained model, not noise);
#  2. the C engine (fp32) matches tools/ref/hy4_ref.py on this trained checkpoint: logits of a 300-token
#     prompt (past index_topk 64: sparse attention drops keys) and its MTP rows within 1e-4 * max(1, |ref|);
#  3. `serve`: /v1/chat/completions renders the Hy4 turn format and returns text; a chat request with
#     chat_template_kwargs.reasoning_effort is refused with a 400 naming it.
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
body='{"model":"hy4-tiny","messages":[{"role":"user","content":"What news, my lord?"}],"max_tokens":24,"temperature":0}'
resp=$(curl -s "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' -d "$body")
echo "$resp" | "$PY" -c 'import json,sys; r=json.load(sys.stdin); c=r["choices"][0]; assert c["message"]["content"], r; assert r["usage"]["prompt_tokens"] > 0, r; print("serve chat:", repr(c["message"]["content"][:60]))'
bad='{"model":"hy4-tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"chat_template_kwargs":{"reasoning_effort":"high"}}'
code=$(curl -s -o "$out/bad.json" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' -d "$bad")
[ "$code" = 400 ] && grep -q reasoning_effort "$out/bad.json" || { echo "reasoning_effort: HTTP $code $(cat "$out/bad.json")"; exit 1; }
echo "PASS: hy4-tiny run --yaml, engine == hy4_ref (sparse), serve chat"
