#!/usr/bin/env bash
# Multi-byte UTF-8 through the server: a checkpoint whose outputs are CJK words and emoji
# (tests/e2e/utf8_model.py) is served; streamed chat and completion text must be valid UTF-8
# without U+FFFD, be mostly CJK/emoji, and equal the non-streamed text (greedy and seeded sampling).
set -euo pipefail
cd "${HYINFER_ROOT:-.}"
PY="${PYTHON:-/usr/bin/python3}"
W=build/e2e-utf8; rm -rf "$W"; mkdir -p "$W"
"$PY" tests/e2e/utf8_model.py "$W/model" >/dev/null
port=$(( 20000 + RANDOM % 20000 ))
build/hyinfer serve "$W/model" --port "$port" --served-model-name m --dtype float32 >"$W/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
"$PY" - "$port" <<'PY'
import json, sys, urllib.request
port = sys.argv[1]
def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    return urllib.request.urlopen(req, timeout=60).read()
def stream(path, body):
    raw = post(path, dict(body, stream=True))
    text = ""
    for line in raw.decode("utf-8").split("\n"):
        if line.startswith("data: ") and line != "data: [DONE]":
            ch = json.loads(line[6:])["choices"]
            if ch:
                d = ch[0].get("delta", {}).get("content") if "delta" in ch[0] else ch[0].get("text")
                text += d or ""
    return text
cases = [("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "你好，世界 🙂"}],
                                    "max_tokens": 40}),
         ("/v1/completions", {"model": "m", "prompt": "日本語のテキスト", "max_tokens": 40})]
multi = 0
for path, body in cases:
    for extra in ({"temperature": 0}, {"temperature": 1.0, "seed": 3}, {"temperature": 1.0, "seed": 4}):
        b = dict(body, **extra)
        full = json.loads(post(path, b))["choices"][0]
        full = full["message"]["content"] if "message" in full else full["text"]
        s = stream(path, b)
        assert s == full, (path, extra, s, full)
        assert "\ufffd" not in s, (path, extra, s)
        wide = sum(ord(c) >= 0x3000 for c in s)
        assert wide >= len(s) // 2 and wide >= 10, (path, extra, s)
        multi += wide
        print(f"ok {path} {extra}: {s[:24]!r}... ({wide} wide chars)")
print(f"ok: {multi} CJK/emoji characters streamed, no U+FFFD, streamed == non-streamed")
PY
