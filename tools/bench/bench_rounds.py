#!/usr/bin/env python3
"""bench_rounds.py - interleaved rounds of `hyinfer bench latency` over several model directories, with medians.

This VM's memory bandwidth swings between runs (its own probe reads 35-80 GB/s within minutes), so one run
of a decode figure says little; README "Decode speed" asks for medians over 12+ rounds with the formats
interleaved. Each round runs every model once, in the order given; per run it prints the read bandwidth
the batch-1 roofline used (the larger of the probes just before and after that decode run), batch-1
`decode_roofline_fraction`, the step time, `projected_full_model_ms_per_token` and each decode stage's
GB/s of weight bytes; at the end the medians, and each later model's projected speed-up over the first
(median of the per-round ratios, and ratio of the medians).

Usage: tools/bench/bench_rounds.py [--rounds 12] [--hyinfer build/hyinfer] [--json-dir DIR] MODEL_DIR... [-- BENCH ARGS]
Default bench arguments: --prompt-lens 128 --batch-sizes 1 --decode-steps 16 --decode-context 4.
Example: tools/bench/bench_rounds.py --rounds 12 build/bench-hy3 build/bench-fp8 build/bench-hybrid
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

DEFAULT_ARGS = ["--prompt-lens", "128", "--batch-sizes", "1", "--decode-steps", "16", "--decode-context", "4"]
# decode stage -> its bytes_by_part key
STAGES = [("attention", "attn"), ("routed_experts", "routed_experts"), ("shared_expert", "shared_expert"),
          ("dense_mlp", "dense_mlp"), ("lm_head", "lm_head")]


def run_one(hyinfer, model, bench_args):
    cmd = [hyinfer, "bench", "latency", "-m", model] + bench_args + ["--json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("bench_rounds: %s failed (exit %d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-400:]))
    return json.loads(p.stdout)


def summary(d):
    x = d["decode"]["1"]
    st, by = x["stages"], x["bytes_by_part"]
    rates = {k: (by[b] / st[k] / 1e9 if st.get(k, 0) > 0 and by.get(b, 0) > 0 else None) for k, b in STAGES}
    # the bandwidth the batch-1 roofline used: the probes bracketing that run (older builds: the start probe)
    return {"bw": x.get("mem_bw_gbs", d["mem_bw_gbs"]), "frac": d["decode_roofline_fraction"], "step_ms": x["step_s"] * 1e3,
            "proj_ms": d.get("projected_full_model_ms_per_token"), "rates": rates}


def fmt_rates(rates):
    return " ".join("%s %s" % (k.split("_")[0][:6], "%5.1f" % v if v else "    -") for k, v in rates.items())


def main():
    argv = sys.argv[1:]
    bench_args = list(DEFAULT_ARGS)
    if "--" in argv:
        i = argv.index("--")
        argv, bench_args = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--hyinfer", default="build/hyinfer")
    ap.add_argument("--json-dir", help="also keep every run's JSON here (MODEL-ROUND.json)")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        sys.exit("bench_rounds: --rounds must be at least 1")
    for m in a.models:
        if not os.path.isdir(m):
            sys.exit("bench_rounds: %s is not a directory" % m)
    if a.json_dir:
        os.makedirs(a.json_dir, exist_ok=True)
    runs = {m: [] for m in a.models}
    for r in range(1, a.rounds + 1):
        for m in a.models:
            d = run_one(a.hyinfer, m, bench_args)
            if a.json_dir:
                with open(os.path.join(a.json_dir, "%s-%d.json" % (os.path.basename(m.rstrip("/")), r)), "w") as f:
                    json.dump(d, f)
            s = summary(d)
            runs[m].append(s)
            print("r%-2d %-24s bw %5.1f frac %.3f step %6.1f ms proj %6.0f ms | %s GB/s" %
                  (r, m[-24:], s["bw"], s["frac"], s["step_ms"], s["proj_ms"] or 0, fmt_rates(s["rates"])),
                  flush=True)
    med = statistics.median
    print("medians over %d rounds (%s):" % (a.rounds, " ".join(bench_args)))
    base = a.models[0]
    for m in a.models:
        rs = runs[m]
        line = "  %-24s bw %5.1f frac %.3f (min %.3f max %.3f) step %6.1f ms proj %6.0f ms" % (
            m[-24:], med([s["bw"] for s in rs]), med([s["frac"] for s in rs]), min(s["frac"] for s in rs),
            max(s["frac"] for s in rs), med([s["step_ms"] for s in rs]), med([s["proj_ms"] or 0 for s in rs]))
        if m != base and all(s["proj_ms"] for s in rs + runs[base]):
            ratios = [b["proj_ms"] / s["proj_ms"] for b, s in zip(runs[base], rs)]
            line += " | proj speed-up over %s: median of ratios %.2fx, ratio of medians %.2fx" % (
                os.path.basename(base.rstrip("/")), med(ratios),
                med([s["proj_ms"] for s in runs[base]]) / med([s["proj_ms"] for s in rs]))
        print(line)
        stage_meds = {k: med([s["rates"][k] for s in rs if s["rates"][k]]) if any(s["rates"][k] for s in rs)
                      else None for k, _ in STAGES}
        print("    stage medians: %s GB/s" % fmt_rates(stage_meds))


if __name__ == "__main__":
    main()
