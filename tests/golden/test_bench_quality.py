"""`hyinfer bench quality -m A --ref B`: top-1 agreement, KL(P_B || P_A), top-5 and perplexities.

1. A = B = models/hy3-tiny (bf16 and fp32): top-1 agreement 1, mean and max KL exactly 0, equal
   perplexities; the default text is tinyshakespeare's last 10% of characters (trainer's split).
2. A = bf16 mode, B = fp32 mode of hy3-tiny: reported; bounds of test_bf16_mode.py for a trained
   model (top-1 >= 0.95, 0 < mean KL <= 0.02). Earlier note: 0.986 / 0.0008 (144 positions).
3. A = hy3-tiny with layer 2's o_proj scaled by 1.5 (written to build/), B = hy3-tiny: top-1 < 1,
   mean KL > 0.
4. Arithmetic: every figure of a 3-window fp32 run (windows of 8 tokens, 3 rows per forward call)
   recomputed with numpy from `hyinfer logits --all-positions` of both models on the same windows.
5. --tokenizer DIR: one tokenizer for both sides; `--positions all` on a small text predicts each
   of its tokens. Bad input: missing -m / --ref, unreadable directory, --positions 0, not a count,
   beyond the text or `all` of an empty text, vocab sizes that differ, tokenizers that differ (BOS
   or ids), no default text, bad --context / --text / --text-start / --tokenizer: exit 2 and a
   message naming the problem.
Measured when written (1000 positions): bf16 vs fp32 top-1 0.987, mean KL 0.00124; perturbed
top-1 0.670, mean KL 0.196.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.environ.get("HYINFER_ROOT", os.getcwd())
TESTDATA = os.path.join(ROOT, "tests", "data")
BIN = os.path.join(ROOT, "build", "hyinfer")
TINY = os.path.join(ROOT, "models", "hy3-tiny")
CORPUS = os.path.join(TESTDATA, "corpora", "tinyshakespeare.txt")
WORK = os.path.join(ROOT, "build", "test-bench-quality")
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))

fails = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fails.append(what)


def quality(*args):
    p = subprocess.run([BIN, "bench", "quality", "--json", *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("bench quality %s failed (rc %d): %s" % (" ".join(args), p.returncode, p.stderr))
    return json.loads(p.stdout)


def make_variant(name, perturb=None, tokenizer_from=None, drop_merges=0):
    """A copy of hy3-tiny under build/: every file symlinked except what is changed."""
    if drop_merges:
        tokenizer_from = os.path.join(TINY, "tokenizer.json")
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for f in os.listdir(TINY):
        if (perturb and f == "model.safetensors") or (tokenizer_from and f == "tokenizer.json"):
            continue
        os.symlink(os.path.join(TINY, f), os.path.join(d, f))
    if perturb:
        import safetensors_np as st
        t = st.load(os.path.join(TINY, "model.safetensors"), widen_bf16=False)
        tensor, scale = perturb
        dt, arr = t[tensor]
        assert dt == "BF16", dt
        t[tensor] = ("BF16", st.from_bf16(arr) * np.float32(scale))
        st.save(os.path.join(d, "model.safetensors"), t)
    if tokenizer_from and not drop_merges:
        shutil.copy(tokenizer_from, os.path.join(d, "tokenizer.json"))
    if drop_merges:  # same specials and BOS, different ids for ordinary text
        tj = json.load(open(tokenizer_from, encoding="utf-8"))
        tj["model"]["merges"] = tj["model"]["merges"][drop_merges:]
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False)
    return d


def logsoftmax(x):
    x = x - x.max(1, keepdims=True)
    return x - np.log(np.exp(x).sum(1, keepdims=True))


def numpy_figures(a_dir, b_dir, text_ids, bos, positions, context):
    """The window rule of src/bench/quality.h (BOS + contiguous text per window), via `hyinfer logits`."""
    la_all, lb_all, tg_all = [], [], []
    o = 0
    while o < positions:
        n = min(context, positions - o)
        win = [bos] + text_ids[o:o + n - 1]
        tg_all.extend(text_ids[o:o + n])
        o += n
        for d, acc in ((a_dir, la_all), (b_dir, lb_all)):
            p = subprocess.run([BIN, "logits", "-m", d, "--prompt-ids", ",".join(map(str, win)), "--dtype", "float32",
                                "--all-positions", "--json"], capture_output=True, text=True, check=True)
            acc.append(np.array(json.loads(p.stdout)["logits"], dtype=np.float32).astype(np.float64))
    la, lb, tg = np.concatenate(la_all), np.concatenate(lb_all), np.array(tg_all)
    pa, pb = logsoftmax(la), logsoftmax(lb)
    kl = (np.exp(pb) * (pb - pa)).sum(1)
    ta, tb = la.argmax(1), lb.argmax(1)  # numpy argmax: first (lowest) index among ties
    # B's top-5 in (value desc, id asc) order: a stable sort of -lb keeps ids ascending among ties
    top5 = np.argsort(-lb, axis=1, kind="stable")[:, :5]
    in5 = np.array([ta[i] in top5[i] for i in range(len(ta))])
    rows = np.arange(len(tg))
    nll_a, nll_b = -pa[rows, tg], -pb[rows, tg]
    return {"positions": len(tg), "top1_agree_count": int((ta == tb).sum()), "top1_agreement": float((ta == tb).mean()),
            "top1_in_ref_top5": float(in5.mean()), "mean_kl": float(kl.mean()), "max_kl": float(kl.max()),
            "max_kl_position": int(kl.argmax()), "nll": float(nll_a.mean()), "ref_nll": float(nll_b.mean()),
            "perplexity": float(np.exp(nll_a.mean())), "ref_perplexity": float(np.exp(nll_b.mean()))}


def expect_error(args, needle, env=None):
    p = subprocess.run([BIN, "bench", "quality", *args], capture_output=True, text=True, env=env)
    msg = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
    check(p.returncode == 2 and needle in p.stderr,
          "bad input %s -> rc %d, %r (want rc 2 and %r)" % (" ".join(args)[:90], p.returncode, msg[:160], needle))


def main():
    if not os.path.exists(os.path.join(TINY, "model.safetensors")):
        print("skip: models/hy3-tiny/model.safetensors is missing")
        sys.exit(77)
    if not os.path.exists(CORPUS):
        print("FAIL: %s is missing (tests/data is part of the repository)" % CORPUS)
        sys.exit(1)
    os.makedirs(WORK, exist_ok=True)
    text = open(CORPUS, encoding="utf-8").read()
    cut = int(len(text) * 0.9)

    # 1. A = B
    r = quality("-m", TINY, "--ref", TINY)
    print("A = B (bf16, default text):", {k: r[k] for k in ("top1_agreement", "mean_kl", "max_kl", "positions",
                                                              "perplexity", "ref_perplexity")})
    check(r["positions"] == 1000 and r["top1_agreement"] == 1.0 and r["top1_in_ref_top5"] == 1.0,
          "A = B: 1000 positions, top-1 agreement 1, top-5 1")
    check(r["mean_kl"] == 0.0 and r["max_kl"] == 0.0, "A = B: mean and max KL exactly 0 (%g, %g)" %
          (r["mean_kl"], r["max_kl"]))
    check(r["perplexity"] == r["ref_perplexity"] and 1.0 < r["perplexity"] < 1000.0,
          "A = B: equal, plausible perplexities (%.3f)" % r["perplexity"])
    check(r["text"]["start_char"] == cut and r["text"]["chars"] == len(text) - cut and r["text"]["tokens_used"] == 1000,
          "default text = characters [%d, %d) of tinyshakespeare (got start %d, %d chars)" %
          (cut, len(text), r["text"]["start_char"], r["text"]["chars"]))
    check(r["model"]["dtype"] == "bfloat16" and r["ref"]["dtype"] == "bfloat16" and r["windows"] == 1 and
          r["context"] == 1024, "auto dtype = bfloat16 for a BF16 checkpoint; one window of context 1024")
    r = quality("-m", TINY, "--ref", TINY, "--dtype", "f32", "--positions", "300", "--context", "128")
    check(r["top1_agreement"] == 1.0 and r["mean_kl"] == 0.0 and r["windows"] == 3 and r["positions"] == 300,
          "A = B fp32, 3 windows of 128: top-1 1, KL 0 (%g)" % r["mean_kl"])

    # 2. bf16 vs fp32
    r = quality("-m", TINY, "--ref", TINY, "--dtype", "bf16", "--ref-dtype", "f32")
    print("hy3-tiny bf16 (A) vs fp32 (B), %d positions: top-1 %.4f, mean KL %.6f, max KL %.4f, A-in-B-top-5 %.4f, "
          "ppl %.3f vs %.3f" % (r["positions"], r["top1_agreement"], r["mean_kl"], r["max_kl"], r["top1_in_ref_top5"],
                                r["perplexity"], r["ref_perplexity"]))
    check(r["model"]["dtype"] == "bfloat16" and r["ref"]["dtype"] == "float32", "--dtype / --ref-dtype per side")
    check(r["top1_agreement"] >= 0.95 and 0.0 < r["mean_kl"] <= 0.02,
          "bf16 vs fp32: top-1 %.4f >= 0.95, 0 < mean KL %.6f <= 0.02" % (r["top1_agreement"], r["mean_kl"]))

    # 3. a perturbed model
    pert = make_variant("perturbed", perturb=("model.layers.2.self_attn.o_proj.weight", 1.5))
    r = quality("-m", pert, "--ref", TINY)
    print("perturbed (layer 2 o_proj x1.5) vs hy3-tiny: top-1 %.4f, mean KL %.6f, max KL %.4f, ppl %.3f vs %.3f" %
          (r["top1_agreement"], r["mean_kl"], r["max_kl"], r["perplexity"], r["ref_perplexity"]))
    check(r["top1_agreement"] < 1.0 and r["mean_kl"] > 1e-4 and r["perplexity"] != r["ref_perplexity"],
          "perturbed: top-1 < 1 and mean KL > 1e-4")

    # 4. the arithmetic against numpy (fp32: logits do not depend on how tokens are split into calls)
    positions, context = 19, 8
    r = quality("-m", pert, "--ref", TINY, "--dtype", "float32", "--positions", str(positions), "--context",
                str(context), "--rows", "3")
    p = subprocess.run([BIN, "logits", "-m", TINY, "-p", text[cut:cut + 400], "--json"], capture_output=True, text=True,
                       check=True)
    ids = json.loads(p.stdout)["prompt_ids"]
    check(ids[0] == r["bos"], "logits -p starts with the BOS bench quality uses (%d)" % r["bos"])
    ref = numpy_figures(pert, TINY, ids[1:], r["bos"], positions, context)
    check(r["windows"] == 3, "19 positions in windows of 8 -> 3 windows")
    for k, v in ref.items():
        got = r[k]
        ok = got == v if isinstance(v, int) else abs(got - v) <= 1e-9 * max(1.0, abs(v))
        check(ok, "numpy %-17s %.12g vs bench %.12g" % (k, v, got))

    # 5. bad input
    expect_error(["-m", TINY], "need -m A")
    expect_error(["--ref", TINY], "need -m A")
    expect_error(["-m", os.path.join(WORK, "no-such-dir"), "--ref", TINY], "no-such-dir")
    expect_error(["-m", TINY, "--ref", TINY, "--positions", "0"], "--positions")
    expect_error(["-m", TINY, "--ref", TINY, "--positions", "40000"], "needs 40000 text tokens")
    small = os.path.join(WORK, "small.txt")
    with open(small, "w") as f:
        f.write("To be, or not to be.\n")
    expect_error(["-m", TINY, "--ref", TINY, "--text", small, "--positions", "50"], "needs 50 text tokens")
    r = quality("-m", TINY, "--ref", TINY, "--text", small, "--positions", "all")
    check(r["positions"] == r["text"]["tokens"] == r["text"]["tokens_used"] and 1 < r["positions"] < 20 and
          r["top1_agreement"] == 1.0, "--positions all: every token of the text (%d of %d)" %
          (r["positions"], r["text"]["tokens"]))
    for bad_count in ("abc", "-3", "12x", "99999999999", ""):
        expect_error(["-m", TINY, "--ref", TINY, "--positions", bad_count], "expected a count in [1, 2147483647] or all")
    empty = os.path.join(WORK, "empty.txt")
    open(empty, "w").close()
    expect_error(["-m", TINY, "--ref", TINY, "--text", empty, "--positions", "all"], "no position to predict")
    bad = os.path.join(WORK, "bad-utf8.txt")
    with open(bad, "wb") as f:
        f.write(b"abc \xc0\x80 def")
    expect_error(["-m", TINY, "--ref", TINY, "--text", bad], "invalid UTF-8")
    expect_error(["-m", TINY, "--ref", TINY, "--text", os.path.join(WORK, "missing.txt")], "missing.txt")
    expect_error(["-m", TINY, "--ref", TINY, "--text-start", "1.5"], "--text-start")
    expect_error(["-m", TINY, "--ref", TINY, "--context", "4096"], "--context 4096")
    expect_error(["-m", TINY, "--ref", TINY, "--dtype", "f16"], "--dtype")
    golden_b = os.path.join(TESTDATA, "hy3-golden-llamacpp", "hy3-golden-b")
    if os.path.exists(os.path.join(golden_b, "tokenizer.json")):
        expect_error(["-m", TINY, "--ref", golden_b], "vocab sizes differ")
        other_tok = make_variant("other-tokenizer", tokenizer_from=os.path.join(golden_b, "tokenizer.json"))
        expect_error(["-m", TINY, "--ref", other_tok], "tokenizers differ: BOS id")
    fewer_merges = make_variant("fewer-merges", drop_merges=200)
    expect_error(["-m", fewer_merges, "--ref", TINY], "tokenizers differ on the text")
    # no default text: HYINFER_ROOT wrong and nothing at <exe dir>/../tests/data
    lone = os.path.join(WORK, "lone", "bin")
    os.makedirs(lone, exist_ok=True)
    shutil.copy(BIN, os.path.join(lone, "hyinfer"))
    env = dict(os.environ, HYINFER_ROOT=os.path.join(WORK, "no-root"))
    p = subprocess.run([os.path.join(lone, "hyinfer"), "bench", "quality", "-m", TINY, "--ref", TINY],
                       capture_output=True, text=True, env=env)
    check(p.returncode == 2 and "pass --text FILE" in p.stderr and "no-root" in p.stderr,
          "no default text -> rc %d, %r" % (p.returncode, p.stderr.strip()[:200]))
    expect_error(["-m", TINY, "--ref", TINY, "--tokenizer", os.path.join(WORK, "no-such-tok")], "no-such-tok")
    # --tokenizer: one tokenizer for both sides (models without one, e.g. random bench checkpoints)
    r = quality("-m", TINY, "--ref", fewer_merges, "--tokenizer", TINY, "--positions", "50")
    check(r["tokenizer"] == TINY and r["top1_agreement"] == 1.0 and r["mean_kl"] == 0.0,
          "--tokenizer DIR serves both sides (same weights -> KL 0)")
    # a small --text file from its start: one window, positions = its tokens
    r = quality("-m", TINY, "--ref", TINY, "--text", small, "--positions", "3")
    check(r["text"]["start_char"] == 0 and r["positions"] == 3, "--text FILE is read from its first character")

    print("%d check(s) failed" % len(fails) if fails else "all checks passed")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
