"""stories260K weight conversion, checked without the C engine.

1. A numpy fp32 re-implementation of run.c (interleaved RoPE, original llama2.c tensors) must reproduce
   the greedy blocks of reference_outputs_run_c.txt (cases 1, 2, 4) byte for byte: this validates the
   reference model itself.
2. A numpy HF-Llama forward (NeoX rotate_half RoPE, HF names) on the converted model.safetensors +
   config.json must give the same logits as (1) at every position (max abs diff < 1e-3) and, run the way
   `hyinfer generate -p PROMPT -n N --temperature 0 --echo` is specified (prompt through tokenizer.json,
   N = steps - len(prompt ids incl. BOS) + 1 new tokens, stop on generation_config eos_token_id, echo the
   raw prompt, decode the new ids with the tokenizer.json decoder, final "\\n"), must print the same bytes.
3. Structure: tensor names/shapes/dtypes, no lm_head (tied), config.json / generation_config.json values.
4. A random checkpoint of another shape with a separate classifier converts to matching logits; a
   truncated checkpoint is refused.
Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("HYINFER_ROOT", os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
sys.path.insert(0, os.path.join(ROOT, "tools", "convert"))
from stories260k_ref import (RuncTokenizer, HfBpeTokenizer, RuncModel, HfLlamaModel,  # noqa: E402
                             runc_generate, engine_generate, read_reference)
import convert_llama2c  # noqa: E402
import safetensors_np  # noqa: E402

DATA = os.path.join(ROOT, "tests", "data", "stories260K")
OUT = os.path.join(ROOT, "build", "stories260K-hf-convtest")


def main():
    ckpt, tok = os.path.join(DATA, "stories260K.bin"), os.path.join(DATA, "tok512.bin")
    ref_path = os.path.join(DATA, "reference_outputs_run_c.txt")
    for p in (ckpt, tok, ref_path):
        if not os.path.exists(p):
            print(f"FAIL: {p} missing (tests/data is part of the repository)")
            return 1
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert", "convert_llama2c.py"), "--checkpoint", ckpt,
                    "--tokenizer", tok, "--out", OUT], check=True)
    fails = []

    def check(ok, what):
        if not ok:
            fails.append(what)
            print("FAIL", what)

    # --- structure
    cfg, w = convert_llama2c.read_checkpoint(ckpt)
    config = json.load(open(os.path.join(OUT, "config.json")))
    gen = json.load(open(os.path.join(OUT, "generation_config.json")))
    tensors = safetensors_np.load(os.path.join(OUT, "model.safetensors"))
    want = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
            "intermediate_size": 172, "num_hidden_layers": 5, "num_attention_heads": 8,
            "num_key_value_heads": 4, "vocab_size": 512, "max_position_embeddings": 512, "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0, "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2,
            "torch_dtype": "float32"}
    for k, v in want.items():
        check(config.get(k) == v, f"config.json {k} = {config.get(k)!r}, want {v!r}")
    check("rope_scaling" not in config or config["rope_scaling"] is None, "config.json rope_scaling")
    check(gen.get("eos_token_id") == [1, 2] and gen.get("bos_token_id") == 1, f"generation_config {gen}")
    names = ["model.embed_tokens.weight", "model.norm.weight"]
    for l in range(5):
        names += [f"model.layers.{l}.{n}.weight" for n in (
            "input_layernorm", "post_attention_layernorm", "self_attn.q_proj", "self_attn.k_proj",
            "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")]
    check(sorted(tensors) == sorted(names), f"tensor names {sorted(set(tensors) ^ set(names))}")
    shapes = {"q_proj": (64, 64), "k_proj": (32, 64), "v_proj": (32, 64), "o_proj": (64, 64),
              "gate_proj": (172, 64), "up_proj": (172, 64), "down_proj": (64, 172), "layernorm": (64,)}
    for n, (dt, a) in tensors.items():
        check(dt == "F32", f"{n} dtype {dt}")
        for key, shp in shapes.items():
            if key in n:
                check(a.shape == shp, f"{n} shape {a.shape}")
    arr = {n: a for n, (_, a) in tensors.items()}
    check(arr["model.embed_tokens.weight"].shape == (512, 64), "embed_tokens shape")
    check(np.array_equal(arr["model.embed_tokens.weight"], w["token_embedding"]), "embed_tokens values")
    check(np.array_equal(arr["model.layers.3.mlp.gate_proj.weight"], w["w1"][3]), "w1 -> gate_proj")
    check(np.array_equal(arr["model.layers.3.mlp.up_proj.weight"], w["w3"][3]), "w3 -> up_proj")
    check(np.array_equal(arr["model.layers.3.mlp.down_proj.weight"], w["w2"][3]), "w2 -> down_proj")
    check(np.array_equal(arr["model.layers.4.self_attn.v_proj.weight"], w["wv"][4]), "wv -> v_proj")
    # q permutation: new row r*4+m of head h is old row 2m+r (head_size 8)
    q_new, q_old = arr["model.layers.2.self_attn.q_proj.weight"], w["wq"][2]
    check(all(np.array_equal(q_new[h * 8 + r * 4 + m], q_old[h * 8 + 2 * m + r])
              for h in range(8) for r in range(2) for m in range(4)), "q_proj row permutation")

    # --- generation
    rt = RuncTokenizer(tok)
    hf = HfBpeTokenizer(os.path.join(OUT, "tokenizer.json"))
    blocks = read_reference(ref_path)
    greedy = [b for b in blocks if float(b["args"].get("-t", "1.0")) == 0.0]
    check(len(greedy) == 3, f"{len(greedy)} greedy reference blocks, want 3")
    for b in greedy:
        steps = int(b["args"].get("-n", "256"))
        prompt = b["args"].get("-i", "")
        pids = rt.encode(prompt, bos=True)
        runc = RuncModel(cfg, w)
        ids, logits_r = runc_generate(runc, pids, steps)
        out = rt.stdout_of(ids)
        check(out == b["stdout"], f"numpy run.c on [{b['cmd']}]: {out[-60:]!r} vs {b['stdout'][-60:]!r}")

        hids = hf.encode(prompt)
        check(hids == pids, f"prompt ids {hids} vs run.c {pids}")
        n_new = steps - len(hids) + 1
        # the -n values hard-coded in test_stories260k.sh
        want_p = {"": [1], "Once upon a time": [1, 403, 407, 261, 378]}.get(prompt)
        check(hids == want_p, f"prompt {prompt!r} ids {hids}, test_stories260k.sh assumes {want_p}")
        check(n_new == {64: 60, 256: 256 if not prompt else 252}[steps], f"-n mapping {steps} -> {n_new}")
        model = HfLlamaModel(config, tensors)
        new, logits_h = engine_generate(model, hids, n_new, set(gen["eos_token_id"]))
        check(hids + new == ids, f"HF-side ids differ from run.c on [{b['cmd']}]")
        m = min(len(logits_r), len(logits_h))
        diff = max(float(np.max(np.abs(a - c))) for a, c in zip(logits_r[:m], logits_h[:m]))
        check(diff < 1e-3, f"logits max abs diff {diff}")
        text = (prompt + hf.decode(new)).encode("utf-8") + b"\n"
        check(text == b["stdout"], f"echo+decode on [{b['cmd']}]: {text[-60:]!r}")
        check(len(new) == n_new, f"[{b['cmd']}] stopped at eos after {len(new)} tokens, the .sh test assumes -n")
        print(f"[{b['cmd']}] prompt ids {len(hids)}, -n {n_new}, generated {len(new)}, "
              f"stopped by {'eos' if len(new) < n_new else '-n'}, logits diff {diff:.2e}")

    synthetic_checks(tok, check)
    print("FAILED: %d checks" % len(fails) if fails else "all checks passed")
    return 1 if fails else 0


def synthetic_checks(tok, check):
    """A random llama2.c checkpoint with another shape (head_size 12, GQA 3:1, separate classifier:
    negative vocab_size) must convert to an untied HF model with the same logits; a truncated file
    must be refused with exit status 1."""
    rng = np.random.default_rng(7)
    dim, hidden, L, nh, nkv, vocab, seq = 72, 100, 2, 6, 2, 512, 40
    hs = dim // nh
    kv = nkv * hs
    ang = np.arange(seq)[:, None] * (1.0 / 10000.0 ** (np.arange(0, hs, 2) / hs))[None, :]
    parts = [rng.standard_normal(n).astype(np.float32) * 0.3 for n in (
        vocab * dim, L * dim, L * dim * dim, L * kv * dim, L * kv * dim, L * dim * dim, L * dim,
        L * hidden * dim, L * dim * hidden, L * hidden * dim, dim)]
    parts += [np.cos(ang).astype(np.float32).ravel(), np.sin(ang).astype(np.float32).ravel(),
              rng.standard_normal(vocab * dim).astype(np.float32) * 0.3]
    os.makedirs(os.path.join(ROOT, "build"), exist_ok=True)
    path = os.path.join(ROOT, "build", "synthetic_llama2c.bin")
    with open(path, "wb") as f:
        f.write(np.array([dim, hidden, L, nh, nkv, -vocab, seq], np.int32).tobytes())
        for a in parts:
            f.write(a.tobytes())
    out = os.path.join(ROOT, "build", "synthetic-hf")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert", "convert_llama2c.py"), "--checkpoint", path,
                        "--tokenizer", tok, "--out", out])
    check(r.returncode == 0, "synthetic conversion")
    if r.returncode:
        return
    config = json.load(open(os.path.join(out, "config.json")))
    tensors = safetensors_np.load(os.path.join(out, "model.safetensors"))
    check(config["tie_word_embeddings"] is False and "lm_head.weight" in tensors, "untied classifier -> lm_head")
    cfg, w = convert_llama2c.read_checkpoint(path)
    a, b = RuncModel(cfg, w), HfLlamaModel(config, tensors)
    diff = max(float(np.max(np.abs(a.forward(t, p) - b.forward(t, p))))
               for p, t in enumerate([1, 300, 17, 400, 5, 259, 260, 511]))
    check(diff < 1e-3, f"synthetic logits max abs diff {diff}")
    print(f"synthetic head_size {hs}, GQA {nh}/{nkv}, untied: logits diff {diff:.2e}")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 4)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert", "convert_llama2c.py"), "--checkpoint", path,
                        "--tokenizer", tok, "--out", out + "-bad"], capture_output=True, text=True)
    check(r.returncode == 1 and "header implies" in r.stderr, f"truncated checkpoint: rc {r.returncode} {r.stderr!r}")


if __name__ == "__main__":
    sys.exit(main())
