"""Builds a test checkpoint (not a test itself) whose outputs are multi-byte UTF-8: models/hy3-tiny's
weights and tokenizer with an untied lm_head that is zero except for the rows of ~200 tokens that are
whole CJK words or emoji (random rows, so generation walks among them). Used by test_serve_utf8.sh
to stream CJK/emoji through the server. Usage: utf8_model.py OUT_DIR"""
import base64
import json
import os
import shutil
import sys

import numpy as np

ROOT = os.environ.get("HYINFER_ROOT", os.getcwd())
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
import safetensors_np as st  # noqa: E402

src = os.path.join(ROOT, "models", "hy3-tiny")
out = sys.argv[1]
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
for f in os.listdir(src):
    if f not in ("model.safetensors", "config.json"):
        os.symlink(os.path.abspath(os.path.join(src, f)), os.path.join(out, f))
ids = []
for line in open(os.path.join(src, "hy.tiktoken"), "rb"):
    b64, rank = line.split()
    try:
        s = base64.b64decode(b64).decode("utf-8")
    except UnicodeDecodeError:
        continue
    if len(s.encode()) >= 3 and all(0x4E00 <= ord(c) <= 0x9FFF or ord(c) >= 0x1F300 for c in s):
        ids.append(int(rank))
rng = np.random.default_rng(5)
pick = sorted(rng.choice(ids, size=min(200, len(ids)), replace=False).tolist())
cfg = json.load(open(os.path.join(src, "config.json")))
cfg["tie_word_embeddings"] = False
json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
tensors = st.load(os.path.join(src, "model.safetensors"), widen_bf16=False)
emb = tensors["model.embed_tokens.weight"][1]
head = np.zeros((emb.shape[0], emb.shape[1]), dtype=np.float32)
head[pick] = rng.normal(0, 1.0, size=(len(pick), emb.shape[1]))
items = [(k, dt, a) for k, (dt, a) in tensors.items()] + [("lm_head.weight", "BF16", head)]
st.save(os.path.join(out, "model.safetensors"), items)
print(len(pick), "multi-byte tokens in the lm_head, e.g. ids", pick[:5])
