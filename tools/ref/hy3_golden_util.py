"""Helpers shared by tests/golden/test_hy3_reference.py and test_llamacpp_golden.py.

The engine binary is $HYINFER_BIN if set (e.g. `tools/ref/hy3_ref.py` itself as a float32 stand-in while the C engine
is being written), else $HYINFER_ROOT/build/hyinfer.
"""
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.environ.get("HYINFER_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTDATA = os.path.join(ROOT, "tests", "data")


def engine_cmd():
    """argv prefix of the engine, or None when it does not exist."""
    b = os.environ.get("HYINFER_BIN")
    if b:
        if b.endswith(".py"):
            return [sys.executable, b]
        return [b]
    path = os.path.join(ROOT, "build", "hyinfer")
    return [path] if os.access(path, os.X_OK) else None


class EngineError(Exception):
    pass


def _run(args, timeout=120):
    cmd = engine_cmd()
    if cmd is None:
        raise EngineError("engine binary build/hyinfer not found")
    full = cmd + args
    try:
        p = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, text=True)
    except subprocess.TimeoutExpired:
        raise EngineError("timed out after %ds: %s" % (timeout, " ".join(full)))
    if p.returncode != 0:
        raise EngineError("exit %d: %s\nstderr: %s" % (p.returncode, " ".join(full), p.stderr.strip()[-2000:]))
    return p.stdout


def _ids_arg(ids):
    return ",".join(str(int(i)) for i in ids)


def engine_logits(model_dir, ids, all_positions=True, mtp=False):
    """Runs `hyinfer logits`; returns (logits [rows, vocab] float64, mtp_logits or None)."""
    args = ["logits", "-m", model_dir, "--prompt-ids", _ids_arg(ids), "--dtype", "float32", "--json"]
    if all_positions:
        args.append("--all-positions")
    if mtp:
        args.append("--mtp")
    out = _run(args)
    start = out.find("{")
    if start < 0:
        raise EngineError("logits: no JSON object on stdout: %r" % out[:300])
    try:
        obj = json.loads(out[start:])
    except json.JSONDecodeError as e:
        raise EngineError("logits: bad JSON on stdout (%s): %r" % (e, out[start:start + 300]))
    if [int(i) for i in obj.get("prompt_ids", [])] != [int(i) for i in ids]:
        raise EngineError("logits: prompt_ids echoed back differ from the input")
    lg = np.asarray(obj["logits"], dtype=np.float64)
    ml = np.asarray(obj["mtp_logits"], dtype=np.float64) if mtp else None
    if mtp and "mtp_logits" not in obj:
        raise EngineError("logits --mtp: no mtp_logits in the output")
    return lg, ml


def engine_generate(model_dir, ids, n, ignore_eos=True):
    args = ["generate", "-m", model_dir, "--prompt-ids", _ids_arg(ids), "-n", str(n), "--temperature", "0",
            "--dtype", "float32", "--print-ids"]
    if ignore_eos:
        args.append("--ignore-eos")
    out = _run(args)
    lines = [ln for ln in out.splitlines() if ln.strip().startswith("[")]
    if not lines:
        raise EngineError("generate: no JSON id array on stdout: %r" % out[:300])
    return [int(x) for x in json.loads(lines[-1])]


def tol_for(ref_logits):
    """DESIGN §5 fp32 criterion: max |d| <= 1e-4 * max(1, max |reference logit|)."""
    return 1e-4 * max(1.0, float(np.max(np.abs(ref_logits))))


def max_abs_diff(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b)))


def margin_top2(row):
    t = np.partition(np.asarray(row, dtype=np.float64), -2)[-2:]
    return float(t[1] - t[0])


class Checker:
    """Collects failures instead of stopping at the first one; prints each as it happens."""

    def __init__(self):
        self.failures = []

    def check(self, ok, msg):
        if not ok:
            self.failures.append(msg)
            print("FAIL: " + msg, flush=True)
        return ok

    def finish(self, what):
        if self.failures:
            print("\n%s: %d failure(s)" % (what, len(self.failures)))
            for f in self.failures[:40]:
                print("  - " + f.splitlines()[0])
            return 1
        print("\n%s: all checks passed" % what)
        return 0
