#!/usr/bin/python3
"""The independent llama.cpp golden (tests/data/hy3-golden-llamacpp, see its README.md).

Part A (self-check of tools/ref/hy3_ref.py): the numpy reference on hy3-golden-b/ must reproduce all 6x40 greedy ids and
every golden logit (last_prompt_logits, all_prompt_logits, steps[s].top10, MTP logits/top10/argmax) within 1e-4.
Part B (the C engine, fp32 mode), for every case:
  - `generate -n 40 --temperature 0` from prompt_ids == generated_ids exactly
  - teacher-forced `logits --all-positions` on prompt_ids + generated_ids[:39]: the row of step s matches
    steps[s].top10 (values within 1e-4, argmax == chosen, no other id above the golden 10th value + 1e-4, margin
    within 2e-4), last_prompt_logits and all_prompt_logits within 1e-4
  - cases with "mtp": `logits --prompt-ids s --mtp`, s = prompt_ids + generated_ids: one MTP row per p = 0..len(s)-2;
    argmax equal on every row, top10 values within 1e-4, full logits of the first full_logits_rows rows within 1e-4
Exit 0 = pass, 1 = fail (also when build/hyinfer is missing), 77 = golden data not present.
"""
import json
import os
import sys
import time

import numpy as np

ROOT = os.environ.get("HYINFER_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
import hy3_golden_util as U  # noqa: E402
from hy3_ref import Hy3Ref  # noqa: E402

TOL = 1e-4


def compare_case(ck, who, c, lg_tf, mtp_lg):
    """lg_tf: logits [len(prompt)+39, V] teacher-forced on prompt_ids + generated_ids[:39].
    mtp_lg: MTP logits [len(s)-1, V] for s = prompt_ids + generated_ids, or None. Returns (max main d, max mtp d)."""
    P, gen = c["prompt_ids"], c["generated_ids"]
    n = len(P)
    worst = 0.0
    exp_rows = n + len(gen) - 1
    if not ck.check(lg_tf.shape[0] == exp_rows, "%s: teacher-forced logits have %d rows, expected %d"
                    % (who, lg_tf.shape[0], exp_rows)):
        return float("inf"), float("inf")
    d = U.max_abs_diff(lg_tf[n - 1], c["last_prompt_logits"])
    worst = max(worst, d)
    ck.check(d <= TOL, "%s: last_prompt_logits max|d| %.3g" % (who, d))
    if "all_prompt_logits" in c:
        d = U.max_abs_diff(lg_tf[:n], c["all_prompt_logits"])
        worst = max(worst, d)
        ck.check(d <= TOL, "%s: all_prompt_logits max|d| %.3g" % (who, d))
    for s, st in enumerate(c["steps"]):
        row = lg_tf[n - 1 + s]
        ids = [int(i) for i, _ in st["top10"]]
        vals = np.array([v for _, v in st["top10"]])
        d = float(np.max(np.abs(row[ids] - vals)))
        worst = max(worst, d)
        ck.check(d <= TOL, "%s: step %d top10 logits max|d| %.3g" % (who, s, d))
        ck.check(int(np.argmax(row)) == st["chosen"], "%s: step %d argmax %d, golden chose %d"
                 % (who, s, int(np.argmax(row)), st["chosen"]))
        others = np.delete(row, ids)
        ck.check(float(others.max()) <= vals.min() + TOL, "%s: step %d: an id outside the golden top10 has logit %.6g "
                 "> golden 10th %.6g" % (who, s, float(others.max()), vals.min()))
        ck.check(abs(U.margin_top2(row) - st["margin_top1_top2"]) <= 2 * TOL, "%s: step %d margin %.6g vs golden %.6g"
                 % (who, s, U.margin_top2(row), st["margin_top1_top2"]))
    wm = 0.0
    if "mtp" in c:
        M = c["mtp"]
        seq = P + gen
        rows = [[int(a), int(b)] for a, b in M["rows"]]
        ck.check(rows == [[seq[p + 1], p] for p in range(len(seq) - 1)], "%s: golden MTP rows are not "
                 "(s[p+1], p) - test assumption broken" % who)
        if mtp_lg is None or not ck.check(mtp_lg.shape[0] == len(rows), "%s: %s MTP rows, expected %d"
                                          % (who, None if mtp_lg is None else mtp_lg.shape[0], len(rows))):
            return worst, float("inf")
        am = [int(x) for x in np.argmax(mtp_lg, axis=1)]
        bad = [p for p in range(len(rows)) if am[p] != int(M["argmax"][p])]
        ck.check(not bad, "%s: MTP argmax differs on rows %s" % (who, bad[:10]))
        for p, t10 in enumerate(M["top10"]):
            ids = [int(i) for i, _ in t10]
            d = float(np.max(np.abs(mtp_lg[p][ids] - np.array([v for _, v in t10]))))
            wm = max(wm, d)
            ck.check(d <= TOL, "%s: MTP row %d top10 max|d| %.3g" % (who, p, d))
        k = int(M["full_logits_rows"])
        d = U.max_abs_diff(mtp_lg[:k], M["logits"])
        wm = max(wm, d)
        ck.check(d <= TOL, "%s: MTP full logits (rows 0..%d) max|d| %.3g" % (who, k - 1, d))
    return worst, wm


def main():
    t0 = time.time()
    gdir = os.path.join(U.TESTDATA, "hy3-golden-llamacpp")
    gpath = os.path.join(gdir, "golden.json")
    if not os.path.exists(gpath):
        print("FAIL: golden data %s not present (tests/data is part of the repository)" % gpath)
        return 1
    with open(gpath) as f:
        g = json.load(f)
    mdir = os.path.join(gdir, g.get("model_dir", "hy3-golden-b"))
    cases = g["cases"]
    ck = U.Checker()

    print("== A. numpy reference (tools/ref/hy3_ref.py, float64) vs the llama.cpp golden")
    ref = Hy3Ref(mdir)
    wa, wam = 0.0, 0.0
    for ci, c in enumerate(cases):
        P, gen = c["prompt_ids"], c["generated_ids"]
        lg, _ = ref.forward(P + gen[:-1])
        greedy = [int(np.argmax(lg[len(P) - 1 + s])) for s in range(len(gen))]
        ck.check(greedy == gen, "reference case %d: greedy differs from golden at step %s"
                 % (ci, next((s for s in range(len(gen)) if greedy[s] != gen[s]), None)))
        mtp = ref.mtp_logits(P + gen) if "mtp" in c else None
        w, wm = compare_case(ck, "reference case %d" % ci, c, lg, mtp)
        wa, wam = max(wa, w), max(wam, wm)
        print("  case %d: greedy %s, logits max|d| %.3g%s" % (ci, "ok" if greedy == gen else "DIFFERS", w,
                                                             ", MTP max|d| %.3g" % wm if mtp is not None else ""))
    print("  reference: worst main max|d| %.3g, worst MTP max|d| %.3g (threshold %g)" % (wa, wam, TOL))

    print("\n== B. engine (fp32) vs the llama.cpp golden")
    if U.engine_cmd() is None:
        ck.check(False, "engine binary %s/build/hyinfer not found (run make); part B needs it" % ROOT)
        return ck.finish("test_llamacpp_golden")
    print("  engine: %s" % " ".join(U.engine_cmd()))
    wb, wbm = 0.0, 0.0
    for ci, c in enumerate(cases):
        P, gen = c["prompt_ids"], c["generated_ids"]
        who = "engine case %d" % ci
        try:
            out = U.engine_generate(mdir, P, len(gen), ignore_eos=False)
            lg, _ = U.engine_logits(mdir, P + gen[:-1], all_positions=True)
            mtp = U.engine_logits(mdir, P + gen, all_positions=False, mtp=True)[1] if "mtp" in c else None
        except U.EngineError as e:
            ck.check(False, "%s: engine error: %s" % (who, e))
            continue
        first = next((s for s in range(max(len(out), len(gen))) if s >= len(out) or s >= len(gen)
                      or out[s] != gen[s]), None)
        ck.check(out == gen, "%s: greedy ids differ from golden from step %s (engine gave %d ids)"
                 % (who, first, len(out)))
        w, wm = compare_case(ck, who, c, lg, mtp)
        wb, wbm = max(wb, w), max(wbm, wm)
        print("  case %d: greedy %s, logits max|d| %.3g%s" % (ci, "40/40 ok" if out == gen else "DIFFERS at %s" % first,
                                                             w, ", MTP max|d| %.3g" % wm if mtp is not None else ""))
    print("  engine: worst main max|d| %.3g, worst MTP max|d| %.3g (threshold %g)" % (wb, wbm, TOL))
    print("(%.1fs)" % (time.time() - t0))
    return ck.finish("test_llamacpp_golden")


if __name__ == "__main__":
    sys.exit(main())
