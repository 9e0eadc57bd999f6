"""Both RoPE pairings: a Llama checkpoint with GPT-J interleaved pairs (2i, 2i+1) declared by
config.json "rope_interleaved": true gives the same logits as the same weights permuted to the
NeoX rotate_half pairing (j, j+d/2) that Hugging Face Llama checkpoints use.

The stories260K conversion (tools/convert/convert_llama2c.py) permutes wq/wk rows per head: new row
r*d/2 + m = old row 2m + r. Undoing that and setting rope_interleaved must reproduce its logits;
leaving the weights permuted while declaring interleaved must not (the check is sensitive)."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.environ.get("HYINFER_ROOT", os.getcwd())
TESTDATA = os.path.join(ROOT, "tests", "data")
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
import safetensors_np as st  # noqa: E402

BIN = os.path.join(ROOT, "build", "hyinfer")
W = os.path.join(ROOT, "build", "rope-pairing")
IDS = "1,403,407,261,378,11,290,94,299,300,301,302,303,100,200,255,320,411"


def logits(d):
    out = subprocess.run([BIN, "logits", "-m", d, "--prompt-ids", IDS, "--all-positions", "--dtype", "float32",
                          "--json"], capture_output=True, text=True, check=True)
    return np.array(json.loads(out.stdout)["logits"])


def main():
    shutil.rmtree(W, ignore_errors=True)
    neox = os.path.join(W, "neox")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools/convert/convert_llama2c.py"), "--checkpoint",
                    os.path.join(TESTDATA, "stories260K/stories260K.bin"), "--tokenizer",
                    os.path.join(TESTDATA, "stories260K/tok512.bin"), "--out", neox], check=True,
                   stdout=subprocess.DEVNULL)
    cfg = json.load(open(os.path.join(neox, "config.json")))
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    tensors = st.load(os.path.join(neox, "model.safetensors"))

    def unpermute(w, heads):
        w = w.reshape(heads, 2, hd // 2, -1)          # [h, r, m, in]: row r*hd/2+m
        return w.transpose(0, 2, 1, 3).reshape(heads * hd, -1)  # row 2m+r

    for variant, undo in (("inter", True), ("wrong", False)):
        d = os.path.join(W, variant)
        shutil.copytree(neox, d)
        out = []
        for name, (dt, arr) in tensors.items():
            if undo and name.endswith("q_proj.weight"):
                arr = unpermute(arr, cfg["num_attention_heads"])
            elif undo and name.endswith("k_proj.weight"):
                arr = unpermute(arr, cfg["num_key_value_heads"])
            out.append((name, dt, arr))
        st.save(os.path.join(d, "model.safetensors"), out)
        c = dict(cfg, rope_interleaved=True)
        json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=1)
    a, b, c = logits(neox), logits(os.path.join(W, "inter")), logits(os.path.join(W, "wrong"))
    d_ok, d_bad = np.abs(a - b).max(), np.abs(a - c).max()
    print(f"NeoX-permuted vs interleaved-declared: max |dlogit| {d_ok:.3g} (<= 1e-4); "
          f"permuted weights declared interleaved: {d_bad:.3g} (must be > 0.1)")
    sys.exit(0 if d_ok <= 1e-4 and d_bad > 0.1 else 1)


if __name__ == "__main__":
    main()
