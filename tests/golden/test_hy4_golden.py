#!/usr/bin/python3
"""The C engine's hy_v4 path (fp32 mode) against llama.cpp's own hy_v4 (tests/data/hy4-golden-llamacpp) and the
numpy reference tools/ref/hy4_ref.py (which tests/golden/test_hy4_reference.py checks against the same golden).

For every one of the 7 golden cases:
  1. `generate -n 40 --temperature 0 --ignore-eos` from prompt_ids == llama.cpp's generated_ids exactly
  2. teacher-forced `logits --all-positions --mtp` on prompt_ids + generated_ids[:39]:
     - every golden logit (last_prompt_logits, all_prompt_logits, the top-10 of each step) within
       1e-4 * max(1, |logit|) (the golden README: a correct fp32 engine lands near 1e-5)
     - every row within 1e-4 * max(1, max |ref|) of hy4_ref (all 480 logits, not only the golden's top-10)
     - the MTP head (which llama.cpp cannot run): every draft row p = 0..n-2 within the same bound of hy4_ref
  3. case 1 (a chat-format prompt) once more through `generate --chat -p USER_TEXT`: the Hy4 turn format rendered
     in C gives the same 40 ids
4. Quantized hy_v4 (`hyinfer quantize --quant-dtype fp8|mxfp8|mxfp4|hybrid`, round-to-nearest): the engine on the
   quantized checkpoint (fp32 mode) equals hy4_ref on tools/ref/quant_ref.py's dequantization of it within the same
   tolerance, for case 0 with the MTP rows; the indexer, kv_b_proj, router, hc_* and sinks stay BF16/F32.
5. Loader errors on broken copies of hy4-golden-b under build/hy4-broken/: a missing tensor, an indexer on a
   "shared" layer, a tensor of a layer config.json does not have, a wrong shape, a stray tensor; each must fail
   with a message that names the tensor.
Exit 0 = pass, 1 = fail (also when build/hyinfer is missing).
"""
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.environ.get("HYINFER_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
import hy3_golden_util as U  # noqa: E402
import hy4_ref  # noqa: E402
import quant_ref  # noqa: E402
import safetensors_np  # noqa: E402

GOLDEN = os.path.join(ROOT, "tests", "data", "hy4-golden-llamacpp")
MODEL = os.path.join(GOLDEN, "hy4-golden-b")
REL = 1e-4


def rel_err(mine, theirs):
    """max |mine - theirs| / (REL * max(1, |theirs|)) elementwise."""
    theirs = np.asarray(theirs, dtype=np.float64)
    return float(np.max(np.abs(np.asarray(mine) - theirs) / (REL * np.maximum(1.0, np.abs(theirs)))))


def broken_copies(out):
    """(name, directory, text the error must contain) of checkpoints that must not load."""
    W = safetensors_np.load(os.path.join(MODEL, "model.safetensors"), widen_bf16=False)
    with open(os.path.join(MODEL, "config.json")) as f:
        cfg = json.load(f)
    cases = []

    def write(name, tensors, config=None, must=""):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        safetensors_np.save(os.path.join(d, "model.safetensors"), [(k, dt, a) for k, (dt, a) in tensors.items()])
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config or cfg, f)
        cases.append((name, d, must))

    t = dict(W)
    del t["model.layers.2.self_attn.indexer.wk.weight"]
    write("missing", t, must="model.layers.2.self_attn.indexer.wk.weight")
    t = dict(W)
    t["model.layers.1.self_attn.indexer.wk.weight"] = W["model.layers.0.self_attn.indexer.wk.weight"]
    write("indexer-on-shared", t, must="model.layers.1.self_attn.indexer.wk.weight")
    c3 = dict(cfg, num_hidden_layers=3, mlp_layer_types=cfg["mlp_layer_types"][:3],
              indexer_types=cfg["indexer_types"][:3], layer_types=cfg["layer_types"][:3])
    write("extra-layer", dict(W), config=c3, must="model.layers.3.")
    t = dict(W)
    dt, a = W["model.layers.0.self_attn.q_b_proj.weight"]
    t["model.layers.0.self_attn.q_b_proj.weight"] = (dt, a[:-1])
    write("bad-shape", t, must="model.layers.0.self_attn.q_b_proj.weight")
    t = dict(W)
    t["model.layers.0.self_attn.q_proj.weight"] = W["model.layers.0.self_attn.q_b_proj.weight"]
    write("stray", t, must="model.layers.0.self_attn.q_proj.weight")
    return cases


def dequantized_ref(qdir, out):
    """hy4_ref on quant_ref's dequantization of the quantized checkpoint qdir (per-expert matrices re-fused)."""
    deq = quant_ref.dequantize_tensors(safetensors_np.load(os.path.join(qdir, "model.safetensors")))
    with open(os.path.join(qdir, "config.json")) as f:
        cfg = json.load(f)
    E = cfg["n_routed_experts"]
    for lp in sorted({k.split(".mlp.experts.")[0] for k in deq if ".mlp.experts." in k}):
        gate = lp + ".mlp.experts.%d.gate_proj.weight"
        if gate % 0 in deq:
            deq[lp + ".mlp.experts.gate_up_proj"] = np.stack(
                [np.concatenate([deq.pop(gate % e), deq.pop(lp + ".mlp.experts.%d.up_proj.weight" % e)]) for e in range(E)])
            deq[lp + ".mlp.experts.down_proj"] = np.stack(
                [deq.pop(lp + ".mlp.experts.%d.down_proj.weight" % e) for e in range(E)])
    os.makedirs(out, exist_ok=True)
    safetensors_np.save(os.path.join(out, "model.safetensors"), [(k, "F32", v) for k, v in sorted(deq.items())])
    cfg.pop("quantization_config", None)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f)
    return hy4_ref.Hy4Ref(out)


def check_quantized(ck, g):
    work = os.path.join(ROOT, "build", "hy4-quant")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    c = g["cases"][0]
    ids = c["prompt_ids"] + c["generated_ids"][:-1]
    for q in ("fp8", "mxfp8", "mxfp4", "hybrid"):
        qd = os.path.join(work, q)
        p = subprocess.run(U.engine_cmd() + ["quantize", "-m", MODEL, "-o", qd, "--quant-dtype", q],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        if not ck.check(p.returncode == 0, "quantize %s: %s" % (q, p.stderr[-300:])):
            continue
        W = safetensors_np.load(os.path.join(qd, "model.safetensors"), widen_bf16=False)
        kept = [k for k in W if (".indexer." in k or "kv_b_proj" in k or k.endswith("learnable_sink_param")
                                 or ".hc_" in k or k.endswith("mlp.gate.weight")) and W[k][0] not in ("BF16", "F32")]
        quantized = [k for k in W if W[k][0] in ("F8_E4M3", "U8", "F4_E2M1") and "q_b_proj" in k]
        ck.check(not kept and quantized, "quantize %s: unquantized modules %s quantized, q_b_proj quantized: %s"
                 % (q, kept[:3], bool(quantized)))
        try:
            lg, mtp = U.engine_logits(qd, ids, all_positions=True, mtp=True)
        except U.EngineError as e:
            ck.check(False, "quantized %s: %s" % (q, e))
            continue
        ref = dequantized_ref(qd, qd + "-deq")
        rl, h, _ = ref.forward(ids)
        rm = ref.forward_mtp(ids, h)
        d, dm = U.max_abs_diff(lg, rl) / U.tol_for(rl), U.max_abs_diff(mtp, rm) / U.tol_for(rm)
        ck.check(d <= 1.0 and dm <= 1.0, "quantized %s: engine vs hy4_ref(dequantized) %.3f / MTP %.3f of the "
                 "tolerance" % (q, d, dm))
        print("quantized %-6s: engine vs hy4_ref on the dequantized weights: logits %.3f, MTP %.3f of the tolerance"
              % (q, d, dm))


def main():
    t0 = time.time()
    ck = U.Checker()
    if U.engine_cmd() is None:
        print("FAIL: engine binary %s/build/hyinfer not found (run make); this test needs it" % ROOT)
        return 1
    with open(os.path.join(GOLDEN, "golden.json")) as f:
        g = json.load(f)
    ref = hy4_ref.Hy4Ref(MODEL)
    worst = {"golden": 0.0, "ref": 0.0, "mtp": 0.0}
    for ci, c in enumerate(g["cases"]):
        P, gen = c["prompt_ids"], c["generated_ids"]
        n = len(P)
        try:
            got = U.engine_generate(MODEL, P, len(gen))
            ck.check(got == gen, "case %d: greedy ids differ from llama.cpp's at step %s" %
                     (ci, next((i for i, (a, b) in enumerate(zip(got, gen)) if a != b), len(got))))
            ids = P + gen[:-1]
            lg, mtp = U.engine_logits(MODEL, ids, all_positions=True, mtp=True)
        except U.EngineError as e:
            ck.check(False, "case %d: %s" % (ci, e))
            continue
        e = rel_err(lg[n - 1], c["last_prompt_logits"])
        if "all_prompt_logits" in c:
            e = max(e, rel_err(lg[:n], c["all_prompt_logits"]))
        for s, st in enumerate(c["steps"]):
            top = np.asarray(st["top"])
            e = max(e, rel_err(lg[n - 1 + s, top[:, 0].astype(int)], top[:, 1]))
        worst["golden"] = max(worst["golden"], e)
        ck.check(e <= 1.0, "case %d: golden logits off by %.2f of the tolerance" % (ci, e))
        rl, h, _ = ref.forward(ids)
        d = U.max_abs_diff(lg, rl) / U.tol_for(rl)
        worst["ref"] = max(worst["ref"], d)
        ck.check(d <= 1.0, "case %d: logits vs hy4_ref off by %.2f of the tolerance" % (ci, d))
        rm = ref.forward_mtp(ids, h)
        d = U.max_abs_diff(mtp, rm) / U.tol_for(rm)
        worst["mtp"] = max(worst["mtp"], d)
        ck.check(mtp.shape == rm.shape and d <= 1.0,
                 "case %d: MTP logits (%d rows) vs hy4_ref off by %.2f of the tolerance" % (ci, len(mtp), d))
    c1 = g["cases"][1]
    user = c1["prompt"].split("<｜hy_middle:opensource｜>")[1].split("<｜hy_end:opensource｜>")[0]
    p = subprocess.run(U.engine_cmd() + ["generate", "-m", MODEL, "--chat", "-p", user, "-n", "40", "--temperature", "0",
                                         "--dtype", "float32", "--print-ids", "--ignore-eos"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    got = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("[")][-1]) if p.returncode == 0 else None
    ck.check(got == c1["generated_ids"], "generate --chat (Hy4 turn format) on case 1: %s" % (got or p.stderr[-300:]))
    print("7 cases x 40 greedy ids; worst error as a fraction of the tolerance: golden logits %.3f, all logits vs "
          "hy4_ref %.3f, MTP rows vs hy4_ref %.3f" % (worst["golden"], worst["ref"], worst["mtp"]))

    check_quantized(ck, g)
    out = os.path.join(ROOT, "build", "hy4-broken")
    shutil.rmtree(out, ignore_errors=True)
    for name, d, must in broken_copies(out):
        p = subprocess.run(U.engine_cmd() + ["logits", "-m", d, "--prompt-ids", "1,2,3", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        msg = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        ck.check(p.returncode != 0 and must in msg and "Sanitizer" not in p.stderr,
                 "broken checkpoint %s: exit %d, message %r (must name %s)" % (name, p.returncode, msg, must))
        print("broken checkpoint %-18s -> %s" % (name, msg))
    print("(%.1f s)" % (time.time() - t0))
    return ck.finish("test_hy4_golden")


if __name__ == "__main__":
    sys.exit(main())
