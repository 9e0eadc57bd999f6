#!/usr/bin/python3
"""C engine (fp32 mode) vs the numpy reference tools/ref/hy3_ref.py on small random hy_v3 checkpoints.

For every variant of tools/make/make_random_hy3.py (written to build/golden-rand/<variant>) and 3 random prompts:
  1. logits at every position: max |d| <= 1e-4 * max(1, max |ref logit|)   (DESIGN §5)
     (and `logits` without --all-positions returns exactly the last row)
  2. MTP logits (rows p = 0..len-2) with the same rule
  3. 64 greedy tokens (--ignore-eos): the reference, teacher-forced on the engine's tokens, must pick the same
     token at every step, up to the first step where the reference's top-1/top-2 margin is below 1e-3 (there
     the comparison of that prompt stops, and the test says so)
  4. mutation check: for every watch-point switch of hy3_ref.MUTATIONS, the mutated reference must FAIL the
     tolerance against the engine on every variant where the switch changes the reference at all, which proves
     that check 1 would catch that bug. Prints a table.
Exit 0 = pass, 1 = fail (also when build/hyinfer is missing). $HYINFER_BIN overrides the engine (e.g. tools/ref/hy3_ref.py
with --dtype float32 as a stand-in).
"""
import os
import sys
import time

import numpy as np

ROOT = os.environ.get("HYINFER_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
sys.path.insert(0, os.path.join(ROOT, "tools", "make"))
import hy3_golden_util as U  # noqa: E402
import make_random_hy3  # noqa: E402
from hy3_ref import MUTATIONS, Hy3Ref  # noqa: E402

N_GEN = 64
MARGIN_MIN = 1e-3
PROMPT_LENS = {"inner": (5, 17, 40), "outer-fused": (6, 23, 38), "sharded": (8, 19, 33), "scaled": (5, 12, 40),
               "dist": (7, 21, 36)}


def prompts_for(variant, vocab):
    rng = np.random.Generator(np.random.PCG64(sum(map(ord, variant)) * 7919))
    return [[int(x) for x in rng.integers(0, vocab, size=n)] for n in PROMPT_LENS[variant]]


def main():
    t0 = time.time()
    ck = U.Checker()
    if U.engine_cmd() is None:
        print("FAIL: engine binary %s/build/hyinfer not found (run make); this test needs it" % ROOT)
        return 1
    print("engine: %s" % " ".join(U.engine_cmd()))
    summary = []  # (variant, max main d, main tol ratio, max mtp d, mtp ratio, greedy steps compared)
    mut_rows = {}  # (mutation, variant) -> (effect on ref, d vs engine, ratio to tol)
    for variant in make_random_hy3.VARIANTS:
        d = os.path.join(ROOT, "build", "golden-rand", variant)
        make_random_hy3.write(d, variant)
        ref = Hy3Ref(d)
        prompts = prompts_for(variant, ref.cfg.vocab)
        eng = []  # per prompt: (engine logits, engine mtp, ref logits, ref mtp, tol, tol_mtp)
        worst = [0.0, 0.0, 0.0, 0.0]
        steps_done = []
        min_gap = float("inf")
        for pi, p in enumerate(prompts):
            tag = "%s prompt %d (len %d)" % (variant, pi, len(p))
            r_lg, r_h = ref.forward(p)
            min_gap = min([min_gap] + [g for _, g in ref.sel_gaps])
            r_mtp = ref.mtp_logits(p, r_h)
            try:
                c_lg, c_mtp = U.engine_logits(d, p, all_positions=True, mtp=True)
                c_last, _ = U.engine_logits(d, p, all_positions=False)
                c_gen = U.engine_generate(d, p, N_GEN, ignore_eos=True)
            except U.EngineError as e:
                ck.check(False, "%s: engine error: %s" % (tag, e))
                continue
            tol, tol_m = U.tol_for(r_lg), U.tol_for(r_mtp)
            dm, dmtp = U.max_abs_diff(c_lg, r_lg), U.max_abs_diff(c_mtp, r_mtp)
            ck.check(dm <= tol, "%s: logits max|d| %.3g > tol %.3g (shape %s vs %s)"
                     % (tag, dm, tol, list(c_lg.shape), list(r_lg.shape)))
            ck.check(dmtp <= tol_m, "%s: MTP logits max|d| %.3g > tol %.3g (shape %s vs %s)"
                     % (tag, dmtp, tol_m, list(c_mtp.shape), list(r_mtp.shape)))
            ck.check(c_last.shape == (1, ref.cfg.vocab) and U.max_abs_diff(c_last[0], r_lg[-1]) <= tol,
                     "%s: logits without --all-positions is not the last row" % tag)
            worst = [max(worst[0], dm), max(worst[1], dm / tol), max(worst[2], dmtp), max(worst[3], dmtp / tol_m)]
            print("%-28s logits max|d| %.3g (tol %.3g)  MTP max|d| %.3g (tol %.3g)" % (tag, dm, tol, dmtp, tol_m))
            # greedy: teacher-force the reference on the engine's tokens, compare step by step
            if not ck.check(len(c_gen) == N_GEN, "%s: generate returned %d ids, expected %d"
                            % (tag, len(c_gen), N_GEN)):
                continue
            tf, _ = ref.forward(p + c_gen[:N_GEN - 1])
            n = 0
            for s in range(N_GEN):
                row = tf[len(p) - 1 + s]
                if U.margin_top2(row) < MARGIN_MIN:
                    print("    greedy: step %d has reference top-1/top-2 margin %.2g < %g, comparison stops there"
                          % (s, U.margin_top2(row), MARGIN_MIN))
                    break
                if not ck.check(int(np.argmax(row)) == c_gen[s], "%s: greedy step %d: engine %d, reference %d"
                                % (tag, s, c_gen[s], int(np.argmax(row)))):
                    break
                n += 1
            steps_done.append(n)
            print("    greedy: %d/%d steps identical" % (n, N_GEN))
            eng.append((p, c_lg, c_mtp, r_lg, r_mtp, tol, tol_m))
        print("  %s: smallest gap between the k-th and (k+1)-th expert-selection score: %.3g" % (variant, min_gap))
        summary.append((variant, worst, steps_done))
        # mutation check
        for m in MUTATIONS:
            mref = Hy3Ref(d, mutations=[m])
            effect, dd, ratio = 0.0, 0.0, 0.0
            for p, c_lg, c_mtp, r_lg, r_mtp, tol, tol_m in eng:
                m_lg, m_h = mref.forward(p)
                m_mtp = mref.mtp_logits(p, m_h)
                effect = max(effect, U.max_abs_diff(m_lg, r_lg), U.max_abs_diff(m_mtp, r_mtp))
                dd = max(dd, U.max_abs_diff(c_lg, m_lg))
                ratio = max(ratio, U.max_abs_diff(c_lg, m_lg) / tol)
            mut_rows[(m, variant)] = (effect, dd, ratio)
            if eng and effect > 0:
                ck.check(ratio > 1.0, "mutation %s on %s: mutated reference still within tolerance of the engine "
                         "(max|d| %.3g, %.2f x tol): the comparison is not sensitive to it" % (m, variant, dd, ratio))

    print("\nper variant: worst logits max|d| (and / tol), worst MTP max|d| (and / tol), greedy steps compared")
    for variant, w, steps in summary:
        print("  %-12s %.3g (%.3f)   %.3g (%.3f)   %s" % (variant, w[0], w[1], w[2], w[3], steps))
    variants = list(make_random_hy3.VARIANTS)
    print("\nmutation table: max|logit d| of the mutated reference vs the engine (x tol); "
          "'n/a' = switch has no effect on that checkpoint")
    print("  %-22s" % "mutation" + "".join("%18s" % v for v in variants) + "  verdict")
    for m in MUTATIONS:
        cells, detected, applicable = [], 0, 0
        for v in variants:
            effect, dd, ratio = mut_rows.get((m, v), (0.0, 0.0, 0.0))
            if effect == 0:
                cells.append("%18s" % "n/a")
                continue
            applicable += 1
            detected += ratio > 1.0
            cells.append("%18s" % ("%.3g (%.0fx)" % (dd, ratio)))
        ok = applicable > 0 and detected == applicable
        ck.check(applicable > 0, "mutation %s changes no variant's reference output" % m)
        print("  %-22s" % m + "".join(cells) + "  %s" % ("detected %d/%d" % (detected, applicable)
                                                           if ok else "NOT DETECTED %d/%d" % (detected, applicable)))
    print("\n(%.1fs)" % (time.time() - t0))
    return ck.finish("test_hy3_reference")


if __name__ == "__main__":
    sys.exit(main())
