#!/usr/bin/python3
"""GPTQ rounding in `hyinfer quantize --calib-data` on models/hy3-tiny (src/quantize/gptq.h, calib.h).

Calibration text: the training split of tinyshakespeare (first 90% of characters, as tools/make/train_tiny_hy3.py
cuts it); quality is measured on the held-out tail, so calibration and evaluation never share text.
1. For fp8, mxfp8 and hybrid: the GPTQ checkpoint has the same header (names, dtypes, shapes) as the
   round-to-nearest one, the same bytes for every unquantized tensor and the same MX block scales (GPTQ
   fixes the scales from W first); only the element codes differ.
2. `hyinfer bench quality --dtype float32 --context 192` against the BF16 model: GPTQ's mean KL is below
   0.6x round-to-nearest's and its top-1 agreement is not lower (both printed). The math itself is checked
   against an independent reference in tests/unit/test_gptq.c.
   The statistics' refinements (calib.h), each turned off alone on fp8: --no-qk-norm-weighting and
   --no-attention-hessian change only the q_proj codes (k/v/o and the MLPs see the same statistics), in every
   layer's q_proj; --no-routing-weighting only routed experts' codes. The mean KLs over the whole held-out tail
   (31,468 positions; 1,000 are too few to tell these apart) are printed beside the default's, which may not be
   worse than 1.1x, and must be at most 0.85x without the attention statistics (measured 0.785x on the
   tool-call fine-tune of models/hy3-tiny, about 0.6x on the Shakespeare-only weights before it; figures:
   docs/quantization.md).
3. Statistics in passes (calib.h): with --calib-memory-gib 0.002 (2 MiB of the 9.5 MiB of f64 statistics) the
   hybrid checkpoint is collected in 5+ passes, none larger than the limit and none run twice, and its bytes equal
   the one-pass checkpoint's; so do limits just above the largest group (0.0011..0.0013 GiB). Passes resume
   from the hidden-state checkpoint: 5 passes run at most 5 + 4 layers per window, one pass 5.
   A 12-layer random model (tools/make/make_random_hy3.py, "inner" with 12 layers and hy3-tiny's vocabulary and
   tokenizer) stored in lexicographic tensor order, as Hugging Face writes it (layers.10 before layers.2): the
   output lists the decoder layers in increasing index, 10+ passes run at most 13 + (passes - 1) layers per
   window, and their bytes equal one pass's.
4. Bad input: calibration flags without --calib-data, a missing or empty text file, a window longer than
   max_position_embeddings, a statistics memory limit that is too small, a bad --mx-scale: clear errors,
   exit 1 or 2, nothing left in OUT; a non-empty OUT is refused before the calibration runs.
Exit 0 pass, 1 fail, 77 skip (no models/hy3-tiny).
"""
import itertools
import json
import os
import re
import shutil
import struct
import subprocess
import sys

ROOT = os.environ.get("HYINFER_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "models", "hy3-tiny")
WORK = os.path.join(ROOT, "build", "quant-gptq")
BIN = os.path.join(ROOT, "build", "hyinfer")
CORPUS = os.path.join(ROOT, "tests", "data", "corpora", "tinyshakespeare.txt")

fails = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)


def run(args, timeout=300):
    p = subprocess.run([BIN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def layer_runs(out):
    m = re.search(r"; (\d+) layer runs per window", out)
    return int(m.group(1)) if m else None


def deep_model_passes(small):
    """12 layers in lexicographic file order: natural output order, forward-moving passes, same bytes."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
    sys.path.insert(0, os.path.join(ROOT, "tools", "make"))
    import make_random_hy3
    import safetensors_np
    deep = os.path.join(WORK, "deep12")
    os.makedirs(deep, exist_ok=True)
    p = make_random_hy3.variant_params("inner")
    p.update(layers=12, vocab=128192)
    cfg, gen = make_random_hy3.make_config(p)
    for name, obj in (("config.json", cfg), ("generation_config.json", gen)):
        with open(os.path.join(deep, name), "w") as f:
            json.dump(obj, f, indent=2)
    for name in os.listdir(TINY):
        if name.startswith("tokenizer") or name.endswith(".tiktoken") or name.endswith(".jinja"):
            shutil.copy(os.path.join(TINY, name), deep)
    tensors = sorted(((a, b, c) for a, b, c, _ in make_random_hy3.make_tensors(p, p["seed"])), key=lambda t: t[0])
    safetensors_np.save(os.path.join(deep, "model.safetensors"), tensors)  # the writer keeps this order per size
    outs = {}
    for tag, extra in (("one", []), ("passes", ["--calib-memory-gib", "0.0005"])):
        d = os.path.join(WORK, "deep12-" + tag)
        rc, out, err = run(["quantize", "-m", deep, "-o", d] + small + extra)
        m = re.search(r"in (\d+) pass(?:es)? \(", out)
        outs[tag] = (rc, int(m.group(1)) if m else 0, layer_runs(out), d, err)
    (rc1, p1, r1, d1, e1), (rc2, p2, r2, d2, e2) = outs["one"], outs["passes"]
    check(rc1 == 0 and rc2 == 0 and p1 == 1 and r1 == 13 and p2 >= 10 and r2 is not None and r2 <= 13 + p2 - 1,
          "12-layer model in lexicographic order: %d passes run %s layer runs per window (one pass: %s) (%s)"
          % (p2, r2, r1, (e1 + e2).strip()[-200:]))
    if rc1 == 0 and rc2 == 0:
        h, _ = header(os.path.join(d1, "model.safetensors"))
        order = sorted(h, key=lambda k: h[k]["data_offsets"][0])
        layers = [int(k.split(".")[2]) for k in order if k.startswith("model.layers.") and h[k]["dtype"] != "BF16"
                  and h[k]["dtype"] != "F32"]
        check(len(layers) > 100 and layers == sorted(layers), "quantized matrices in increasing layer order (%s)"
              % [k for k, _ in itertools.groupby(layers)])
        same = open(os.path.join(d1, "model.safetensors"), "rb").read() == open(
            os.path.join(d2, "model.safetensors"), "rb").read()
        check(same, "12-layer model: %d passes give the one-pass bytes" % p2)
    shutil.rmtree(deep, ignore_errors=True)
    for tag in outs:
        shutil.rmtree(outs[tag][3], ignore_errors=True)


def header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        h = json.loads(f.read(n))
        base = 8 + n
        data = f.read()
    h.pop("__metadata__", None)
    return h, data


def tensor_bytes(h, data, name):
    a, b = h[name]["data_offsets"]
    return data[a:b]


def quality(model, positions="1000"):
    rc, out, err = run(["bench", "quality", "-m", model, "--ref", TINY, "--dtype", "float32", "--context", "192",
                        "--positions", positions, "--json"])
    if rc != 0:
        raise RuntimeError("bench quality %s failed: %s" % (model, err[-400:]))
    return json.loads(out)


def flag_changes(train, gq, qg, flag, what, factors, pick, n_expect, kl_bound):
    """The default fp8 GPTQ checkpoint gq (quality qg) against one quantized with `flag`: the GPTQ line says
    `factors` H factorizations, only the matrices that pick(name) selects differ (all n_expect of them, or
    some when n_expect is None), and the default's mean KL is at most kl_bound x the flag's."""
    un = os.path.join(WORK, "fp8-gptq" + flag.replace("--", "-"))
    rc, out, err = run(["quantize", "-m", TINY, "-o", un, "--quant-dtype", "fp8", "--calib-data", train, flag])
    gline = [l for l in out.splitlines() if "GPTQ" in l]
    joint = "0 with each head's rows rounded jointly" if flag == "--no-attention-hessian" else \
        "5 with each head's rows rounded jointly"
    check(rc == 0 and "%d H factorizations" % factors in out and joint in out,
          "%s: %d factorizations, '%s' (%s%s)" % (flag, factors, joint, gline, err.strip()[-200:]))
    if rc != 0:
        return
    hw, dw = header(os.path.join(gq, "model.safetensors"))
    hu, du = header(os.path.join(un, "model.safetensors"))
    differ, others = 0, []
    for k in hw:
        same = tensor_bytes(hw, dw, k) == tensor_bytes(hu, du, k)
        if pick(k):
            differ += not same
        elif not same:
            others.append(k)
    n = sum(pick(k) for k in hw)
    check(not others and (differ == n == n_expect if n_expect is not None else differ > 0),
          "%s changes the codes of %d of the %d %s matrices and nothing else (%s)" % (flag, differ, n, what, others[:4]))
    qu = quality(un, "all")
    print("     fp8 GPTQ, whole tail (%d positions): default top1 %.4f KL %.5f | %s top1 %.4f KL %.5f"
          % (qg["positions"], qg["top1_agreement"], qg["mean_kl"], flag, qu["top1_agreement"], qu["mean_kl"]))
    check(qg["mean_kl"] <= kl_bound * qu["mean_kl"], "fp8 GPTQ mean KL by default %.5f <= %.2f x with %s %.5f"
          % (qg["mean_kl"], kl_bound, flag, qu["mean_kl"]))


def weighting_flags(train, gq):
    """Each of the three statistics refinements (calib.h) against the default, one flag at a time, on the whole
    tail: on 1,000 positions their differences are within noise (with the attention Hessian on, KL 0.00151 by
    default against 0.00097 without the QK-norm weighting there, 0.00134 against 0.00134 on the whole tail)."""
    qg = quality(gq, "all")
    q_proj = lambda k: k.endswith("self_attn.q_proj.weight")  # noqa: E731
    # whole tail when written: 0.00134 against 0.00134 (C = 1024: 0.00223 against 0.00248)
    flag_changes(train, gq, qg, "--no-qk-norm-weighting", "q_proj", 85, q_proj, 5, 1.1)
    # 0.00134 against 0.00218
    flag_changes(train, gq, qg, "--no-attention-hessian", "q_proj", 90, q_proj, 5, 0.85)
    # 0.00134 against 0.00137
    flag_changes(train, gq, qg, "--no-routing-weighting", "routed expert", 90,
                 lambda k: ".mlp.experts." in k and k.endswith("_proj.weight"), None, 1.1)


def main():
    if not os.path.isfile(CORPUS):
        print("FAIL: %s missing (tests/data is part of the repository)" % CORPUS)
        return 1
    if not os.path.isdir(TINY):
        print("skip: models/hy3-tiny missing")
        return 77
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    text = open(CORPUS, encoding="utf-8").read()
    train = os.path.join(WORK, "train.txt")
    with open(train, "w", encoding="utf-8") as f:
        f.write(text[:int(len(text) * 0.9)])

    for fmt in ("fp8", "mxfp8", "hybrid"):
        rtn, gq = os.path.join(WORK, fmt + "-rtn"), os.path.join(WORK, fmt + "-gptq")
        rc, _, err = run(["quantize", "-m", TINY, "-o", rtn, "--quant-dtype", fmt])
        check(rc == 0, "%s: round-to-nearest quantize (%s)" % (fmt, err.strip()[-200:]))
        rc, out, err = run(["quantize", "-m", TINY, "-o", gq, "--quant-dtype", fmt, "--calib-data", train])
        check(rc == 0 and "GPTQ: 132 matrices" in out, "%s: GPTQ quantize rounds all 132 matrices (%s%s)"
              % (fmt, [l for l in out.splitlines() if "GPTQ" in l or "calibration" in l], err.strip()[-200:]))
        # the tool-call fine-tune of hy3-tiny sends almost no Shakespeare token to one routed expert (its gate,
        # up and down see < K = 96 of the 32768 tokens; quantize warns): at most those 3 matrices may be short
        few = re.search(r"quantize: (\d+) of the GPTQ matrices saw fewer calibration tokens", err)
        check(not few or int(few.group(1)) <= 3, "%s: default calibration (64 x 512 tokens): at most one expert's 3 "
              "matrices saw fewer tokens than their K (%s)" % (fmt, few.group(0) if few else "none"))
        if fails:
            return 1
        hr, dr = header(os.path.join(rtn, "model.safetensors"))
        hg, dg = header(os.path.join(gq, "model.safetensors"))
        same_layout = sorted(hr) == sorted(hg) and all(
            hr[k]["dtype"] == hg[k]["dtype"] and hr[k]["shape"] == hg[k]["shape"] for k in hr)
        check(same_layout, "%s: GPTQ header equals the round-to-nearest header" % fmt)
        codes_differ = 0
        for k in hr:
            if k not in hg:
                continue
            same = tensor_bytes(hr, dr, k) == tensor_bytes(hg, dg, k)
            if k.endswith(".weight") and hr[k]["dtype"] in ("F8_E4M3", "U8"):
                codes_differ += not same
            elif not same:
                check(False, "%s: tensor %s differs (only element codes may)" % (fmt, k))
        check(codes_differ >= 100, "%s: element codes differ in %d matrices" % (fmt, codes_differ))
        with open(os.path.join(rtn, "config.json")) as f1, open(os.path.join(gq, "config.json")) as f2:
            check(json.load(f1) == json.load(f2), "%s: config.json identical" % fmt)
        qr, qg = quality(rtn), quality(gq)
        print("     %s: round-to-nearest top1 %.3f KL %.5f | GPTQ top1 %.3f KL %.5f (%d positions)"
              % (fmt, qr["top1_agreement"], qr["mean_kl"], qg["top1_agreement"], qg["mean_kl"], qg["positions"]))
        check(qg["mean_kl"] < 0.6 * qr["mean_kl"], "%s: GPTQ mean KL %.5f < 0.6 x RTN %.5f"
              % (fmt, qg["mean_kl"], qr["mean_kl"]))
        check(qg["top1_agreement"] >= qr["top1_agreement"], "%s: GPTQ top-1 %.3f >= RTN %.3f"
              % (fmt, qg["top1_agreement"], qr["top1_agreement"]))
        if fmt == "fp8":
            weighting_flags(train, gq)

    # the statistics in passes: the same bytes as one pass (8 windows x 128 tokens keep it quick)
    small = ["--quant-dtype", "hybrid", "--calib-data", train, "--num-calibration-samples", "8", "--max-seq-length", "128"]
    single, multi = os.path.join(WORK, "hybrid-one-pass"), os.path.join(WORK, "hybrid-passes")
    rc1, out1, err1 = run(["quantize", "-m", TINY, "-o", single] + small)
    rc, out, err = run(["quantize", "-m", TINY, "-o", multi, "--calib-memory-gib", "0.002"] + small)
    m = re.search(r"in (\d+) pass(?:es)? \(largest ([0-9.]+) MiB of ([0-9.]+) MiB allowed", out)
    check(rc1 == 0 and "in 1 pass (" in out1, "default limit: statistics in one pass (%s)" % err1.strip()[-200:])
    check(rc == 0 and m and int(m.group(1)) >= 5 and float(m.group(2)) <= float(m.group(3)) and abs(float(m.group(3)) - 0.002 * 1024) < 0.01
          and "90 H factorizations" in out
          and "planned" not in out,
          "--calib-memory-gib 0.002: statistics in %s passes of at most %s MiB, 90 factorizations (%s%s)"
          % (m.group(1) if m else "?", m.group(2) if m else "?",
             [l for l in out.splitlines() if "calibration" in l or "GPTQ" in l], err.strip()[-200:]))
    same = rc == 0 and rc1 == 0 and open(os.path.join(multi, "model.safetensors"), "rb").read() == open(
        os.path.join(single, "model.safetensors"), "rb").read()
    check(same, "statistics in passes: model.safetensors bitwise equal to the one-pass checkpoint")
    runs1, runs = layer_runs(out1), layer_runs(out)
    check(runs1 == 5 and m and runs is not None and runs <= 5 + int(m.group(1)) - 1,
          "passes resume from the checkpoint: %s layer runs per window in %s passes (one pass: %s)"
          % (runs, m.group(1) if m else "?", runs1))
    deep_model_passes(small)
    # every limit from the largest group up runs (the dense down_proj, K = 384: 1.125 MiB; a k..v span is
    # 0.2 MiB), whatever the spans of the groups that cannot be cut (k, o, q, v) straddle
    one_bytes = open(os.path.join(single, "model.safetensors"), "rb").read() if rc1 == 0 else None
    for g in ("0.0011", "0.00115", "0.0012", "0.0013"):
        d = os.path.join(WORK, "hybrid-passes-" + g)
        rc, out, err = run(["quantize", "-m", TINY, "-o", d, "--calib-memory-gib", g] + small)
        ok = rc == 0 and open(os.path.join(d, "model.safetensors"), "rb").read() == one_bytes
        check(ok, "--calib-memory-gib %s: runs (%s), bytes equal to one pass"
              % (g, [l.strip()[:120] for l in out.splitlines() if "calibration" in l] or err.strip()[-200:]))
        shutil.rmtree(d, ignore_errors=True)

    # few tokens give a rank-deficient H: a tiny dampening must still end in GPTQ, not in fallbacks
    rc, out, err = run(["quantize", "-m", TINY, "-o", os.path.join(WORK, "tiny-damp"), "--quant-dtype", "fp8",
                        "--calib-data", train, "--num-calibration-samples", "2", "--max-seq-length", "16",
                        "--dampening-frac", "1e-30"])
    # (30 tokens reach no token at all to a few routed experts of the tool-call fine-tune: those are rounded to
    # nearest, counted as such; every other matrix is GPTQ'd and none falls back for an indefinite H)
    g = re.search(r"GPTQ: (\d+) matrices", out)
    nt = re.search(r"round-to-nearest: (\d+) \(no calibration tokens", out)
    n_gptq = int(g.group(1)) if g else -1
    check(rc == 0 and g and nt and n_gptq + int(nt.group(1)) == 132 and n_gptq >= 120 and
          "0 (Hessian indefinite)" in out,
          "rank-deficient H with --dampening-frac 1e-30: %s" % [l for l in out.splitlines() if "GPTQ" in l])
    check("warning: quantize: %d of the GPTQ matrices saw fewer calibration tokens than their input width K" % n_gptq
          in err, "30 calibration tokens: warned that all %d GPTQ matrices have fewer tokens than K (%s)"
          % (n_gptq, err.strip()[-300:]))

    empty = os.path.join(WORK, "empty.txt")
    open(empty, "w").close()
    garbage = os.path.join(WORK, "garbage.bin")
    with open(garbage, "wb") as f:
        f.write(bytes([0xff, 0xfe, 0x00, 0x41] * 100))
    out_bad = os.path.join(WORK, "bad-out")
    base = ["quantize", "-m", TINY, "-o", out_bad, "--quant-dtype", "fp8"]
    cases = [
        (["--num-calibration-samples", "8"], 2, "need --calib-data"),
        (["--calib-data", os.path.join(WORK, "nope.txt")], 2, "nope.txt"),
        (["--calib-data", empty], 2, "calibration text has 0 tokens"),
        (["--calib-data", train, "--max-seq-length", "5000"], 2, "must be in [2, 1024]"),
        (["--calib-data", train, "--num-calibration-samples", "0"], 2, "--num-calibration-samples"),
        (["--calib-data", train, "--dampening-frac", "-1"], 2, "--dampening-frac"),
        (["--calib-data", train, "--calib-memory-gib", "0.000001"], 1, "GPTQ calibration needs"),
        (["--mx-scale", "max"], 2, "--mx-scale max: expected ocp or mse"),
        (["--num-calibration-samples", "64"], 2, "need --calib-data"),
        (["--no-qk-norm-weighting"], 2, "need --calib-data"),
        (["--calib-data", garbage], 2, "invalid UTF-8 at byte 0"),
        (["--calib-data", "/dev/zero"], 2, "not a regular file"),
        (["--calib-data", WORK], 2, "not a regular file"),
        (["--calib-data", train, "--max-seq-length", "0"], 2, "--max-seq-length must be >= 2"),
        (["--calib-data", train, "--tokenizer", WORK], 2, "--tokenizer"),
    ]
    for extra, want_rc, want_msg in cases:
        rc, _, err = run(base + extra)
        check(rc == want_rc and want_msg in err and not os.path.exists(out_bad),
              "bad input %s: exit %d, %r (got %d: %s)" % (extra, want_rc, want_msg, rc, err.strip()[-160:]))
    rc, _, err = run(["quantize", "-m", TINY, "-o", os.path.join(WORK, "no", "such", "out"), "--quant-dtype", "fp8",
                      "--calib-data", train])
    check(rc == 2 and "parent directory" in err, "OUT without a parent directory: %s" % err.strip()[-160:])
    rc, _, err = run(["quantize", "-m", os.path.join(WORK, "fp8-rtn"), "-o", out_bad, "--quant-dtype", "fp8",
                      "--calib-data", train])
    check(rc == 2 and "already has a quantization_config" in err and not os.path.exists(out_bad),
          "already quantized IN with --calib-data: %s" % err.strip()[-160:])
    # a non-empty OUT is refused before the calibration runs (and left as it was)
    busy = os.path.join(WORK, "busy-out")
    os.makedirs(busy)
    open(os.path.join(busy, "keep"), "w").close()
    rc, out, err = run(["quantize", "-m", TINY, "-o", busy, "--quant-dtype", "fp8", "--calib-data", train])
    check(rc == 2 and "not empty" in err and "calibration:" not in out and os.listdir(busy) == ["keep"],
          "non-empty OUT refused before calibrating (got %d: %s)" % (rc, err.strip()[-160:]))
    return 1 if fails else 0


if __name__ == "__main__":
    rc = main()
    if rc == 0:  # kept after a failure, for a look; removed after a pass (CI disks are small)
        shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(rc)
