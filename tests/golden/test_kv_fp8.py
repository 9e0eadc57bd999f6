#!/usr/bin/python3
"""FP8 E4M3 KV cache (--kv-cache-dtype fp8) on models/hy3-tiny, float32 compute, against the default
(fp32) KV cache:

1. flags: --kv-cache-dtype on generate / logits / run (+ YAML model_config.kv_cache_dtype); a bad
   value is a clear error; the engine's start-up line names the dtype and the bytes per token.
2. greedy 40-token continuations of a few prompts: identical, or the first divergence is a near-tie
   of the fp32 reference (the token fp8 picks is within NEAR_TIE logits of the reference's top-1);
   and `hyinfer logits --kv-cache-dtype fp8` over the same prefix agrees with the fp8 greedy token
   (prefill-in-one-batch vs decode: the fp32-mode invariance holds with fp8 too).
3. next-token distributions over 4 windows x 256 tokens (1024 positions) of tinyshakespeare's
   held-out tail (last 10% of characters, the tiny model's validation split), via
   tests/golden/kv_quality_driver.c: top-1 agreement and mean KL(fp32 KV || fp8 KV) are printed
   and must stay within regression bounds (measured with the default least-squares scales,
   kernels/fp8_scale.h: 0.976 / 0.0035 nats on the tool-call fine-tune of models/hy3-tiny, 0.974 /
   0.0009 on the Shakespeare-only weights before it; with HYINFER_KV_FP8_SCALE=amax, amax/448 scales:
   0.956 / 0.0102 (before: 0.944 / 0.0052), and the fitted KL must stay below 0.4x that; the printout
   shows every disagreement at a reference top-1/top-2 margin below 0.5 logits). The same over the whole
   tail (31,468 positions, `bench quality --positions all`, default context 1024): measured 0.9771 /
   0.00268 (before: 0.9812 / 0.00234), bounds 0.975 / 0.004.
4. static V scales: per-head absmax/448 calibrated with tools/ref/hy3_ref.py on training text, written
   to kv_cache_scales.safetensors (side file) and, in a second copy, into a shard named by
   model.safetensors.index.json (in the checkpoint); both are read (start-up line: "V scales static
   in 4 of 5 layers") and used: the right scales give a KL close to dynamic V, a deliberately wrong
   scale (1/64 of it: saturation) a much larger one, the right ones give identical logits in both
   copies, and a malformed scale tensor is a load error naming it.
"""
import json
import os
import re
import shutil
import subprocess
import socket
import sys
import time
import urllib.request

import numpy as np

ROOT = os.environ.get("HYINFER_ROOT", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TESTDATA = os.path.join(ROOT, "tests", "data")
BIN = os.path.join(ROOT, "build", "hyinfer")
MODEL = os.path.join(ROOT, "models", "hy3-tiny")
TEXT = os.path.join(TESTDATA, "corpora", "tinyshakespeare.txt")
WORK = os.path.join(ROOT, "build", "test_kv_fp8")
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))

NEAR_TIE = 0.5           # logits
TOP1_MIN = 0.95          # regression bounds around the measured 0.976 / 0.0035 (amax/448: 0.956 / 0.0102)
MEAN_KL_MAX = 0.005
TOP1_WIDE_MIN = 0.99     # top-1 agreement where the reference margin is >= 0.5 (measured 1.000)
AMAX_KL_RATIO = 0.4      # fitted scales' KL against amax/448's (measured 0.17)
TAIL_TOP1_MIN = 0.975    # the whole held-out tail at the default context 1024 (measured 0.9771 / 0.00268)
TAIL_KL_MAX = 0.004

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def build_driver():
    lib = os.path.join(ROOT, "build", "libhyinfer.a")
    if run(["make", "-s", "build/libhyinfer.a"], cwd=ROOT).returncode != 0:
        print("FAIL: could not build build/libhyinfer.a")
        sys.exit(1)
    exe = os.path.join(WORK, "kv_quality_driver")
    libs = run(["make", "-s", "print-ldlibs"], cwd=ROOT).stdout.split()  # incl. Open MPI when the build has it
    cmd = ["gcc", "-std=c11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "src"),
           "-o", exe, os.path.join(ROOT, "tests", "golden", "kv_quality_driver.c"), lib] + libs
    r = run(cmd)
    if r.returncode != 0:
        print("FAIL: driver did not compile: " + " ".join(cmd) + "\n" + r.stderr)
        sys.exit(1)
    return exe


def quality(driver, model, windows, wlen, test_kv="fp8", scale_rule="mse"):
    n_chars = os.path.getsize(TEXT)
    off = (n_chars * 9) // 10  # the tiny model's validation split: last 10% of characters
    r = run([driver, model, TEXT, str(off), str(windows), str(wlen), "auto", test_kv],
            env=dict(os.environ, HYINFER_LOG="warn", HYINFER_KV_FP8_SCALE=scale_rule))
    if r.returncode != 0:
        print("FAIL: driver: " + r.stderr)
        sys.exit(1)
    return json.loads(r.stdout)


def gen(model, prompt_ids, kv, n=40):
    r = run([BIN, "generate", "-m", model, "--prompt-ids", ",".join(map(str, prompt_ids)), "-n", str(n),
             "--temperature", "0", "--dtype", "float32", "--ignore-eos", "--print-ids", "--kv-cache-dtype", kv])
    if r.returncode != 0:
        print("FAIL: generate: " + r.stderr)
        sys.exit(1)
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def last_logits(model, ids, kv):
    r = run([BIN, "logits", "-m", model, "--prompt-ids", ",".join(map(str, ids)), "--dtype", "float32",
             "--kv-cache-dtype", kv, "--json"])
    if r.returncode != 0:
        print("FAIL: logits: " + r.stderr)
        sys.exit(1)
    return np.array(json.loads(r.stdout)["logits"][-1])


_enc = {}


def encode(text):
    if text in _enc:
        return _enc[text]
    r = run([BIN, "logits", "-m", MODEL, "-p", text, "--dtype", "float32", "--json"])
    if r.returncode != 0:
        print("FAIL: logits -p: " + r.stderr)
        sys.exit(1)
    _enc[text] = json.loads(r.stdout)["prompt_ids"]
    return _enc[text]


def test_flags():
    r = run([BIN, "generate", "-m", MODEL, "-p", "x", "-n", "1", "--kv-cache-dtype", "fp8_e5m2"])
    check(r.returncode != 0 and "--kv-cache-dtype" in r.stderr and "fp8_e5m2" in r.stderr,
          "generate --kv-cache-dtype fp8_e5m2 is refused naming the flag and value (%r)" % r.stderr.strip())
    r = run([BIN, "logits", "-m", MODEL, "-p", "x", "--kv-cache-dtype", "int8", "--json"])
    check(r.returncode != 0 and "int8" in r.stderr, "logits --kv-cache-dtype int8 is refused")
    _, err = gen(MODEL, [1, 2, 3], "fp8", n=2)
    m = re.search(r"kv cache: fp8_e4m3, .* (\d+) bytes per token", err)
    _, err32 = gen(MODEL, [1, 2, 3], "auto", n=2)
    _, err16 = gen(MODEL, [1, 2, 3], "bf16", n=2)
    m32 = re.search(r"kv cache: fp32, .* (\d+) bytes per token", err32)
    m16 = re.search(r"kv cache: bf16, .* (\d+) bytes per token", err16)
    check(bool(m and m32 and m16), "start-up line names the KV dtype and bytes per token")
    if m and m32 and m16:
        b8, b32, b16 = int(m.group(1)), int(m32.group(1)), int(m16.group(1))
        # hy3-tiny: 5 cache layers (4 + MTP) x 2 kv heads x head_dim 32 x K,V
        check((b32, b16, b8) == (2560, 1280, 640 + 80),
              "bytes per token fp32 %d, bf16 %d, fp8 %d (640 element bytes + 80 scale bytes)" % (b32, b16, b8))
    # run: YAML key, then the flag overriding it
    os.makedirs(WORK, exist_ok=True)
    y = os.path.join(WORK, "kv.yaml")
    with open(os.path.join(WORK, "one_prompt.json"), "w") as f:
        json.dump(["ROMEO: O, what"], f)
    with open(y, "w") as f:
        f.write("model_config:\n  model_path: %s\n  dtype: float32\n  kv_cache_dtype: fp8\n"
                "data_config:\n  dataset_path: %s\n"
                "scheduler_config:\n  max_new_tokens: 4\n" % (MODEL, os.path.join(WORK, "one_prompt.json")))
    r = run([BIN, "run", "--yaml", y])
    check(r.returncode == 0 and "kv cache: fp8_e4m3" in r.stderr, "run: model_config.kv_cache_dtype: fp8 is used")
    r = run([BIN, "run", "--yaml", y, "--kv-cache-dtype", "bf16"])
    check(r.returncode == 0 and "kv cache: bf16" in r.stderr, "run: --kv-cache-dtype overrides the YAML")
    with open(y, "w") as f:
        f.write("model_config:\n  model_path: %s\n  kv_cache_dtype: fp4\n" % MODEL)
    r = run([BIN, "run", "--yaml", y])
    check(r.returncode != 0 and "model_config.kv_cache_dtype" in r.stderr and "fp4" in r.stderr,
          "run: a bad model_config.kv_cache_dtype names the key (%r)" % r.stderr.strip()[-160:])


def test_serve():
    """serve --kv-cache-dtype fp8: a greedy completion equals generate's with fp8."""
    ids = encode("ROMEO: O, what")
    r = run([BIN, "generate", "-m", MODEL, "-p", "ROMEO: O, what", "-n", "24", "--temperature", "0",
             "--dtype", "float32", "--ignore-eos", "--kv-cache-dtype", "fp8"])
    want = r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = open(os.path.join(WORK, "serve.log"), "w")
    p = subprocess.Popen([BIN, "serve", MODEL, "--port", str(port), "--dtype", "float32", "--kv-cache-dtype", "fp8",
                          "--kv-cache-memory-bytes", "1000000"], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(120):
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as h:
                    if h.status == 200:
                        break
            except Exception:
                time.sleep(0.25)
        body = json.dumps({"prompt": ids, "max_tokens": 24, "temperature": 0, "ignore_eos": True}).encode()
        req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port, data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            got = json.load(resp)["choices"][0]["text"]
    except Exception as e:  # noqa: BLE001
        got = "error: %r" % e
    finally:
        p.terminate()
        p.wait(timeout=30)
        log.close()
    with open(os.path.join(WORK, "serve.log")) as f:
        slog = f.read()
    # 1000000 bytes / (720 bytes per token x 16 tokens per block) = 86 blocks
    check("kv cache: fp8_e4m3, 86 blocks of 16 tokens" in slog, "serve: fp8 KV budget 86 blocks (start-up line)")
    check(got == want, "serve --kv-cache-dtype fp8: completion %r equals generate's %r" % (got[:40], want[:40]))


def test_bench_quality():
    """bench quality --kv-cache-dtype / --ref-kv-cache-dtype apply to their side."""
    base = [BIN, "bench", "quality", "-m", MODEL, "--ref", MODEL, "--dtype", "float32", "--positions", "200",
            "--context", "100", "--json"]
    env = dict(os.environ, HYINFER_ROOT=ROOT)
    r = run(base + ["--kv-cache-dtype", "fp8"], env=env)
    ok = r.returncode == 0
    d = json.loads(r.stdout) if ok else {}
    check(ok and d["model"]["kv_cache_dtype"] == "fp8_e4m3" and d["ref"]["kv_cache_dtype"] == "fp32"
          and d["positions"] == 200 and d["mean_kl"] > 0 and d["top1_agreement"] >= 0.85,
          "bench quality --kv-cache-dtype fp8: %s" % ({k: d.get(k) for k in ("top1_agreement", "mean_kl")}
                                                        if ok else r.stderr.strip()))
    r = run(base + ["--kv-cache-dtype", "fp8", "--ref-kv-cache-dtype", "fp8"], env=env)
    d = json.loads(r.stdout) if r.returncode == 0 else {}
    check(d.get("mean_kl") == 0 and d.get("top1_agreement") == 1, "bench quality: fp8 on both sides: KL 0")
    r = run(base + ["--ref-kv-cache-dtype", "e5m2"], env=env)
    check(r.returncode == 2 and "--ref-kv-cache-dtype" in r.stderr, "bench quality: bad --ref-kv-cache-dtype refused")


def test_full_tail():
    """The issue's measure over every position of the held-out tail (31 windows of the default 1024):
    the standard error there is about 0.0008, against 0.0045 for 1,000 positions in one window."""
    r = run([BIN, "bench", "quality", "-m", MODEL, "--ref", MODEL, "--dtype", "float32", "--kv-cache-dtype", "fp8",
             "--positions", "all", "--json"], env=dict(os.environ, HYINFER_ROOT=ROOT))
    d = json.loads(r.stdout) if r.returncode == 0 else {}
    if not d:
        check(False, "bench quality --positions all --kv-cache-dtype fp8: %s" % r.stderr.strip()[-300:])
        return
    print("fp8 vs fp32 KV, whole held-out tail (bench quality, context %d): positions %d in %d windows, "
          "top-1 agreement %.4f +- %.4f, mean KL %.5f nats" % (d["context"], d["positions"], d["windows"],
                                                              d["top1_agreement"], d["top1_agreement_stderr"],
                                                              d["mean_kl"]))
    check(d["model"]["kv_cache_dtype"] == "fp8_e4m3" and d["ref"]["kv_cache_dtype"] == "fp32" and d["mean_kl"] > 0,
          "whole tail: fp8 KV on the measured side only (KL %g > 0)" % d["mean_kl"])
    check(d["positions"] == d["text"]["tokens"] == 31468 and d["windows"] == 31 and d["context"] == 1024,
          "whole tail: every one of the 31468 tokens, 31 windows of 1024 (got %d, %d, %d)" %
          (d["positions"], d["windows"], d["context"]))
    check(d["top1_agreement"] >= TAIL_TOP1_MIN, "whole tail: top-1 agreement %.4f >= %.3f (issue target 0.98: %s)"
          % (d["top1_agreement"], TAIL_TOP1_MIN, "met" if d["top1_agreement"] >= 0.98 else "NOT met"))
    check(d["mean_kl"] <= TAIL_KL_MAX, "whole tail: mean KL %.5f <= %.3f" % (d["mean_kl"], TAIL_KL_MAX))


def test_greedy():
    prompts = ["ROMEO: O, what", "First Citizen:", "KING HENRY: Now, lords,", "To be, or not to be"]
    n_same = 0
    for p in prompts:
        ids = encode(p)
        a, _ = gen(MODEL, ids, "auto")
        b, _ = gen(MODEL, ids, "fp8")
        d = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), None)
        if d is None:
            n_same += 1
            check(a == b, "greedy %r: 40 tokens identical with fp8 KV" % p)
            continue
        ref = last_logits(MODEL, ids + a[:d], "auto")
        f8 = last_logits(MODEL, ids + a[:d], "fp8")
        gap = float(ref[a[d]] - ref[b[d]])
        rank = int((ref > ref[b[d]]).sum())
        check(int(np.argmax(ref)) == a[d] and int(np.argmax(f8)) == b[d],
              "greedy %r: logits over the prefix reproduce both greedy tokens at step %d" % (p, d))
        check(gap <= NEAR_TIE and rank <= 2,
              "greedy %r: diverges at step %d/40 at a near-tie: fp8 picks the reference's rank-%d token, "
              "%.4f logits below its top-1 (max |dlogit| there %.3f)"
              % (p, d, rank + 1, gap, float(np.max(np.abs(f8 - ref)))))
    print("greedy: %d of %d prompts identical over 40 tokens" % (n_same, len(prompts)))


def test_quality(driver):
    q = quality(driver, MODEL, 4, 256)
    print("fp8 vs fp32 KV, held-out tail: positions %d, top-1 agreement %.4f, mean KL %.5f nats, p99 KL %.4f, "
          "max KL %.4f, mean |dlogit| %.4f; positions with reference margin >= 0.5: %d, top-1 there %.4f"
          % (q["positions"], q["top1_agreement"], q["mean_kl"], q["p99_kl"], q["max_kl"], q["mean_abs_dlogit"],
             q["positions_margin_ge_0.5"], q["top1_agreement_margin_ge_0.5"]))
    print("reference margins at the %d disagreements: %s" % (len(q["ref_margin_at_disagreements"]),
                                                           q["ref_margin_at_disagreements"]))
    check(q["positions"] >= 500, "at least 500 positions")
    check(q["top1_agreement"] >= TOP1_MIN, "top-1 agreement %.4f >= %.2f (issue target 0.98: %s)"
          % (q["top1_agreement"], TOP1_MIN, "met" if q["top1_agreement"] >= 0.98 else "NOT met"))
    check(q["mean_kl"] <= MEAN_KL_MAX, "mean KL %.5f <= %.3f" % (q["mean_kl"], MEAN_KL_MAX))
    check(q["top1_agreement_margin_ge_0.5"] >= TOP1_WIDE_MIN,
          "top-1 agreement %.4f >= %.2f where the reference is not near a tie"
          % (q["top1_agreement_margin_ge_0.5"], TOP1_WIDE_MIN))
    qa = quality(driver, MODEL, 4, 256, scale_rule="amax")
    print("HYINFER_KV_FP8_SCALE=amax (dynamic scales amax/448): top-1 agreement %.4f, mean KL %.5f nats"
          % (qa["top1_agreement"], qa["mean_kl"]))
    check(q["mean_kl"] <= AMAX_KL_RATIO * qa["mean_kl"], "fitted scales: mean KL %.5f <= %.1f x amax/448's %.5f"
          % (q["mean_kl"], AMAX_KL_RATIO, qa["mean_kl"]))
    return q


def calibrate_v_absmax():
    """Per (layer, kv head) max |v| of the tiny model over training text, from the numpy reference."""
    import hy3_ref
    ref = hy3_ref.Hy3Ref(MODEL, dtype=np.float32)
    c = ref.cfg
    amax = np.zeros((c.n_layers, c.n_kv), dtype=np.float64)
    orig = ref.attention

    def att(L, a, pos):
        v = (a @ L["v"].T).reshape(a.shape[0], c.n_kv, c.head_dim)
        amax[L["index"]] = np.maximum(amax[L["index"]], np.abs(v).max(axis=(0, 2)))
        return orig(L, a, pos)
    ref.attention = att
    with open(TEXT) as f:
        train = f.read(20000)
    for start in (0, 9000):
        ids = encode(train[start:start + 1000])[:160]
        ref.forward(ids)
    return amax


def model_copy(name, scales, in_checkpoint=False):
    """A copy of hy3-tiny (symlinks) plus v_cache.scale tensors: a kv_cache_scales.safetensors side
    file, or (in_checkpoint) a second shard named by model.safetensors.index.json."""
    import safetensors_np
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for f in os.listdir(MODEL):
        os.symlink(os.path.join(MODEL, f), os.path.join(d, f))
    tensors = {"model.layers.%d.self_attn.v_cache.scale" % L: ("F32", np.asarray(s, dtype=np.float32))
               for L, s in enumerate(scales)}
    if not in_checkpoint:
        safetensors_np.save(os.path.join(d, "kv_cache_scales.safetensors"), tensors)
        return d
    safetensors_np.save(os.path.join(d, "scales-00002.safetensors"), tensors)
    with open(os.path.join(MODEL, "model.safetensors"), "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        names = [k for k in json.loads(f.read(n)) if k != "__metadata__"]
    wm = {k: "model.safetensors" for k in names}
    wm.update({k: "scales-00002.safetensors" for k in tensors})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    return d


def test_static_v(driver):
    amax = calibrate_v_absmax()
    right = amax / 448.0
    print("calibrated V absmax per layer/head: %s" % np.round(amax, 3).tolist())
    side = model_copy("tiny-vscale-side", right)
    inck = model_copy("tiny-vscale-ckpt", right, in_checkpoint=True)
    wrong = model_copy("tiny-vscale-wrong", right / 64.0)
    for d in (side, inck):
        _, err = gen(d, [1, 2, 3], "fp8", n=2)
        check("V scales static in 4 of 5 layers" in err and "688 bytes per token" in err,
              "%s: static V scales read (4 main layers; MTP layer dynamic; 688 bytes per token)"
              % os.path.basename(d))
    la = last_logits(side, encode("ROMEO: O, what light"), "fp8")
    lb = last_logits(inck, encode("ROMEO: O, what light"), "fp8")
    ld = last_logits(MODEL, encode("ROMEO: O, what light"), "fp8")
    check(np.array_equal(la, lb), "side-file and in-checkpoint scales give identical logits")
    check(not np.array_equal(la, ld), "static V scales change the logits (vs dynamic V)")
    qs = quality(driver, side, 2, 96)
    qd = quality(driver, MODEL, 2, 96)
    qw = quality(driver, wrong, 2, 96)
    print("192 positions: mean KL dynamic V %.5f, static V (calibrated) %.5f, static V 1/64 (wrong) %.5f; "
          "top-1 %.4f / %.4f / %.4f" % (qd["mean_kl"], qs["mean_kl"], qw["mean_kl"], qd["top1_agreement"],
                                        qs["top1_agreement"], qw["top1_agreement"]))
    check(qs["mean_kl"] <= 1.5 * qd["mean_kl"] + 1e-3, "calibrated static V: KL close to dynamic V")
    check(qw["mean_kl"] >= 5 * qs["mean_kl"], "wrong static V scale: KL >= 5x the calibrated one")
    # malformed: 3 elements for 2 kv heads
    bad = model_copy("tiny-vscale-bad", [np.ones(3, dtype=np.float32) * 0.01] * 4)
    r = run([BIN, "generate", "-m", bad, "-p", "x", "-n", "1", "--kv-cache-dtype", "fp8"])
    check(r.returncode != 0 and "v_cache.scale" in r.stderr and "3 elements" in r.stderr,
          "a 3-element v_cache.scale is a load error naming it (%r)" % r.stderr.strip()[-200:])
    bad = model_copy("tiny-vscale-neg", [np.array([0.01, -1.0], dtype=np.float32)] * 4)
    r = run([BIN, "generate", "-m", bad, "-p", "x", "-n", "1"])
    check(r.returncode != 0 and "must be finite and > 0" in r.stderr, "a negative v_cache.scale is a load error")
    for d in os.listdir(WORK):
        if d.startswith("tiny-vscale"):
            shutil.rmtree(os.path.join(WORK, d), ignore_errors=True)


def main():
    if not os.path.isfile(BIN):
        print("FAIL: %s not built" % BIN)
        return 1
    if not os.path.isfile(TEXT):
        print("FAIL: %s missing (tests/data is part of the repository)" % TEXT)
        return 1
    if not os.path.isdir(MODEL):
        print("skip: %s missing" % MODEL)
        return 77
    os.makedirs(WORK, exist_ok=True)
    driver = build_driver()
    for f in (test_flags, test_serve, test_bench_quality, test_greedy, lambda: test_quality(driver), test_full_tail,
              lambda: test_static_v(driver)):
        t0 = time.time()
        f()
        print("  (%.1f s)" % (time.time() - t0))
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all FP8 KV cache checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
