#!/usr/bin/python3
"""dist_projection.py - projected decode speed of full Hy3 and Hy4-preview on N CPU nodes (layout A).

Layout A (docs/distributed.md): one rank per node, attention heads split over the N ranks (TP-N),
routed experts spread over them (EP-N), the dense MLP, shared expert, embedding and lm_head split
(TP-N), every token seen by every rank -- what `mpirun -np N hyinfer ... -tp N --enable-expert-parallel`
runs. A decode step costs, on the slowest rank,

  t_step = sum over layers of (bytes the rank streams in that layer) / rate          (memory)
         + the collectives of the step, each priced by the alpha-beta model below       (network)

  bytes per layer = replicated part (router f32; Hy4: MLA down-projections, indexer, hyper-connection
                    vectors) + split part / N (q/o and k/v heads -- k/v no further than one KV head per
                    rank --, dense MLP, shared expert, lm_head) + E[max distinct routed experts on one rank]
                    x expert bytes (uniform routing, Monte Carlo; the step waits for the busiest rank)
  rate            = per-rank read rate in bytes/s: the achieved weight bytes/s of `bench latency`'s
                    decode (decode.1 / decode.16 achieved_weight_gbs), or --mem-bw-gbs x --efficiency

  collectives (the engine's, src/model/forward.c; activations travel as fp32, --act-bytes):
    exact combine (default): per layer  AG(T x heads*v_dim) + AG(T x H)      attention: head outputs, o_proj rows
                             MoE layer  AG(T*K x H)                          expert outputs (--dispatch ag)
                                        or A2A(pairs to the home rank) + AG(T x H)      (--dispatch a2a)
                                        AG(T x I_shared) + AG(T x H)         shared expert (dense TP)
                             dense layer AG(T x I_dense) + AG(T x H)
    sum combine:             each of the gathers pairs above is one SR(T x H): alltoallv + allgatherv
    per step                 2 BCAST(step plan header, body) + AG(T x H) embedding rows
                             + GATHER(T x V fp32 logits to rank 0)
  alpha-beta prices (N ranks, power of two; alpha per message, beta per link):
    AG(S)     = log2(N) alpha + (N-1)/N S / beta      (recursive doubling; S = the gathered result)
    GATHER(S) = log2(N) alpha + (N-1)/N S / beta
    BCAST(s)  = log2(N) (alpha + s / beta)
    A2A(S)    = (N-1) alpha + S / beta                (pairwise; S = the most one rank sends or receives)
    SR(S)     = A2A((N-1)/N S) + AG(S)                (hy_fd_sum_rows: fixed rank order)

Inputs: --inputs FILE (repeatable) reads JSON: the output of `hyinfer bench latency --json` (rate from
decode."1"/"16".achieved_weight_gbs), of `hyinfer bench comm --json` (alpha_us, beta_gbs: the ping-pong
fit), or a plain object with any of rate_gbs, rate_gbs_b16, alpha_us, beta_gbs, mem_bw_gbs, link_gbps.
Flags override files; the defaults are the example of specs/distributed.md §4: 200 GB/s nodes, 100 Gb/s
Ethernet, alpha 20 us. Model shapes: specs/hy3_architecture.md, specs/hy4_architecture.md (§1, §6, §9).
stdlib only; /usr/bin/python3.
"""

import argparse
import json
import math
import random
import sys
import textwrap

# FP8 checkpoints: linear weights 1 byte/param (per-tensor scales), embedding / lm_head bf16, the router
# held as an f32 copy (src/model/load.c), hyper-connection vectors f32.
HY3 = {
    "name": "Hy3 (295B, hy_v3)",
    "hidden": 4096, "layers": 80, "dense_layers": 1, "heads": 64, "kv_heads": 8, "head_dim": 128,
    "v_dim": 128, "vocab": 120832, "experts": 192, "top_k": 8, "expert_inter": 1536, "shared_inter": 1536,
    "dense_inter": 13312,
}
HY4 = {
    "name": "Hy4-preview (770B, hy_v4)",
    "hidden": 6144, "layers": 78, "dense_layers": 1, "heads": 64, "kv_heads": 1, "head_dim": 256,
    "v_dim": 256, "vocab": 120832, "experts": 256, "top_k": 8, "expert_inter": 2048, "shared_inter": 2048,
    "dense_inter": 18432,
    # MLA (hy4_architecture.md §6.1): q_a [2048, 6144], kv_a [576, 6144] replicated on every rank; q_b
    # [16384, 2048], kv_b [28672, 512], o_proj [6144, 16384], linear_gate [16384, 6144] split by heads.
    "mla": {"q_a": 2048 * 6144, "kv_a": 576 * 6144, "q_b": 16384 * 2048, "kv_b": 28672 * 512,
            "o": 6144 * 16384, "gate": 16384 * 6144, "latent": 576},
    # DSA indexer on the 21 "full" layers (§7): wq_b [4096, 2048], wk [128, 6144], weights_proj [32, 6144]
    "indexer": {"layers": 21, "params": 4096 * 2048 + 128 * 6144 + 32 * 6144},
    # iHC (§4.1): two [8, 24576] f32 projections per layer
    "hc_f32": 2 * 8 * 24576,
}


def model_bytes(m, N, wb, context):
    """Bytes one rank holds and streams per decode token, by part: (replicated per layer, split per layer
    (already / N), per-step extras, expert bytes, held in all)."""
    H, L, Ld = m["hidden"], m["layers"], m["dense_layers"]
    Lm = L - Ld
    expert = 3 * H * m["expert_inter"] * wb
    router = m["experts"] * H * 4 + m["experts"] * 4  # f32 gate + expert_bias
    if "mla" in m:
        a = m["mla"]
        attn_rep = (a["q_a"] + a["kv_a"]) * wb + m["hc_f32"] * 4
        attn_split = (a["q_b"] + a["kv_b"] + a["o"] + a["gate"]) * wb / N
        idx = m["indexer"]["params"] * wb * m["indexer"]["layers"] / L  # averaged over the layers
        attn_rep += idx
        kv_read = min(context, 2048) * a["latent"] * 2  # bf16 latent, replicated (DSA top-2048)
    else:
        qo = 2 * H * m["heads"] * m["head_dim"]
        kv = 2 * H * m["kv_heads"] * m["head_dim"]
        attn_rep = 0.0
        attn_split = qo * wb / N + kv * wb * max(1.0 / N, 1.0 / m["kv_heads"])
        kv_read = context * 2 * max(1, m["kv_heads"] // N) * m["head_dim"] * 2  # bf16 K and V
    shared = 3 * H * m["shared_inter"] * wb
    dense = 3 * H * m["dense_inter"] * wb
    lm_head = m["vocab"] * H * 2
    embed = m["vocab"] * H * 2
    per_layer_rep = attn_rep
    per_layer_split = attn_split
    moe_extra = router + shared / N  # per MoE layer besides the routed experts
    dense_extra = dense / N
    step_extra = lm_head / N
    held = (L * (attn_rep + attn_split) + Lm * (router + shared / N + m["experts"] * expert / N) + Ld * dense / N +
            (lm_head + embed) / N)
    return {"per_layer_rep": per_layer_rep, "per_layer_split": per_layer_split, "kv_read": kv_read,
            "moe_extra": moe_extra,
            "dense_extra": dense_extra, "step_extra": step_extra, "expert": expert, "held": held}


_max_cache = {}


def expected_max_experts(E, K, B, N, trials, seed):
    """E[max over the N ranks of the distinct experts (of E, split into N contiguous blocks) that B tokens
    selecting K distinct experts each touch on that rank] under uniform routing (Monte Carlo)."""
    key = (E, K, B, N, trials, seed)
    if key in _max_cache:
        return _max_cache[key]
    rng = random.Random(seed * 1000003 + E * 31 + K * 7 + B * 131 + N)
    per = E // N
    total = 0
    for _ in range(trials):
        seen = set()
        for _ in range(B):
            seen.update(rng.sample(range(E), K))
        counts = [0] * N
        for e in seen:
            counts[min(e // per, N - 1)] += 1
        total += max(counts)
    _max_cache[key] = total / trials
    return _max_cache[key]


class Net:
    def __init__(self, N, alpha, beta):
        self.N, self.a, self.b = N, alpha, beta
        self.lg = math.ceil(math.log2(N)) if N > 1 else 0
        self.calls = 0

    def ag(self, S):
        if self.N == 1:
            return 0.0
        self.calls += 1
        return self.lg * self.a + (self.N - 1) / self.N * S / self.b

    def gather(self, S):
        return self.ag(S)

    def bcast(self, s):
        if self.N == 1:
            return 0.0
        self.calls += 1
        return self.lg * (self.a + s / self.b)

    def a2a(self, S):
        if self.N == 1:
            return 0.0
        self.calls += 1
        return (self.N - 1) * self.a + S / self.b

    def sr(self, S):
        return self.a2a((self.N - 1) / self.N * S) + self.ag(S)


def comm_step(m, N, T, net, combine, dispatch, act, shared_split):
    """Seconds of the collectives of one decode step of T tokens (net counts the calls)."""
    H, K, L, Ld = m["hidden"], m["top_k"], m["layers"], m["dense_layers"]
    row = H * act
    t = net.bcast(64) + net.bcast(64 + 64 * T)  # step plan: header, then ids, positions, slots, tables
    t += net.ag(T * row)  # vocabulary-split embedding rows
    for layer in range(L):
        if combine == "exact":
            t += net.ag(T * m["heads"] * m["v_dim"] * act) + net.ag(T * row)
        else:
            t += net.sr(T * row)
        if layer < Ld:
            t += net.ag(T * m["dense_inter"] * act) + net.ag(T * row) if combine == "exact" else net.sr(T * row)
            continue
        if dispatch == "ag":
            t += net.ag(T * K * row) if combine == "exact" else net.sr(T * row)
        else:
            home = math.ceil(T / N)
            pairs_in = home * K * (N - 1) / N
            pairs_out = T * K / N
            if combine == "exact":
                t += net.a2a(max(pairs_in, pairs_out) * row) + net.ag(T * row)
            else:
                t += net.a2a(min(T, T * K / N) * row) + net.ag(T * row)
        if shared_split:
            t += net.ag(T * m["shared_inter"] * act) + net.ag(T * row) if combine == "exact" else net.sr(T * row)
    t += net.gather(T * m["vocab"] * 4)  # fp32 logits to rank 0
    return t


def project(m, N, B, rate, alpha, beta, a, shared_split):
    by = model_bytes(m, N, a.weight_bytes, a.context)
    if not shared_split:
        by["moe_extra"] += 3 * m["hidden"] * m["shared_inter"] * a.weight_bytes * (1 - 1.0 / N)
    Lm = m["layers"] - m["dense_layers"]
    emax = expected_max_experts(m["experts"], m["top_k"], B, N, a.trials, a.seed)
    step_bytes = (m["layers"] * (by["per_layer_rep"] + by["per_layer_split"] + B * by["kv_read"]) +
                  Lm * (by["moe_extra"] + emax * by["expert"]) + m["dense_layers"] * by["dense_extra"] +
                  by["step_extra"])
    t_mem = step_bytes / rate
    net = Net(N, alpha, beta)
    t_comm = comm_step(m, N, B, net, a.combine, a.dispatch, a.act_bytes, shared_split)
    return {"N": N, "batch": B, "held_gb": by["held"] / 1e9, "step_gb": step_bytes / 1e9, "max_experts": emax,
            "mem_ms": t_mem * 1e3, "comm_ms": t_comm * 1e3, "collectives": net.calls,
            "step_ms": (t_mem + t_comm) * 1e3, "tokens_per_s": B / (t_mem + t_comm)}


def load_inputs(files):
    got = {}
    for path in files:
        try:
            with open(path) as f:
                o = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit("dist_projection: --inputs %s: %s" % (path, e))
        if not isinstance(o, dict):
            sys.exit("dist_projection: --inputs %s: not a JSON object" % path)
        dec = o.get("decode")
        if isinstance(dec, dict):  # bench latency --json
            for k, key in (("1", "rate_gbs"), ("16", "rate_gbs_b16")):
                if isinstance(dec.get(k), dict) and dec[k].get("achieved_weight_gbs"):
                    got[key] = float(dec[k]["achieved_weight_gbs"])
        for key in ("rate_gbs", "rate_gbs_b16", "alpha_us", "beta_gbs", "mem_bw_gbs", "link_gbps"):
            if isinstance(o.get(key), (int, float)) and not isinstance(o.get(key), bool):
                if key == "mem_bw_gbs" and isinstance(dec, dict):
                    continue  # bench latency's probe: the achieved decode rate is used instead
                got[key] = float(o[key])
    return got


def main():
    ap = argparse.ArgumentParser(
        prog="dist_projection.py",
        description="Projected decode ms/token (batch 1) and batch-B tokens/s of full Hy3 and Hy4-preview on "
                    "N CPU nodes, layout A (attention TP-N + experts EP-N, tokens replicated), from a per-rank "
                    "read rate and the network's alpha/beta. Prints the formula it uses.",
        epilog="example: mpirun -np 2 build/hyinfer bench comm --json > comm.json; build/hyinfer bench latency "
               "-m DIR --json > lat.json; tools/dist_projection.py --inputs comm.json --inputs lat.json. "
               "Defaults: 200 GB/s nodes, 100 Gb/s Ethernet, alpha 20 us (specs/distributed.md §4).")
    ap.add_argument("--inputs", action="append", default=[], metavar="FILE",
                    help="JSON of measured inputs (bench latency --json, bench comm --json, or "
                         "{rate_gbs, rate_gbs_b16, alpha_us, beta_gbs, mem_bw_gbs, link_gbps}); repeatable")
    ap.add_argument("--mem-bw-gbs", type=float, help="node memory read bandwidth, GB/s (default 200)")
    ap.add_argument("--efficiency", type=float, default=1.0,
                    help="fraction of --mem-bw-gbs a decode step achieves (default 1.0)")
    ap.add_argument("--rate-gbs", type=float, help="per-rank achieved decode read rate, GB/s (overrides the rest)")
    ap.add_argument("--link-gbps", type=float, help="link bandwidth, Gb/s (default 100)")
    ap.add_argument("--beta-gbs", type=float, help="link bandwidth, GB/s (instead of --link-gbps)")
    ap.add_argument("--alpha-us", type=float, help="latency per message, microseconds (default 20)")
    ap.add_argument("--nodes", default="1,2,4,8,16,32", help="node counts, powers of two (default 1,2,4,8,16,32)")
    ap.add_argument("--batch", type=int, default=16, help="batch size of the throughput column (default 16)")
    ap.add_argument("--combine", choices=("exact", "sum"), default="exact",
                    help="exact: gathers (default, bitwise = 1 rank) | sum: alltoallv + allgatherv")
    ap.add_argument("--dispatch", choices=("ag", "a2a"), default="ag",
                    help="MoE exchange: ag = one gather of the T*K expert rows (default) | a2a = pairs to the "
                         "home rank + a gather of T rows")
    ap.add_argument("--shared", choices=("split", "replicated"), default="split",
                    help="shared expert split over the ranks (dense_tp N, the -tp N layout; default) or "
                         "replicated (dense_tp_size 1: no collectives, full bytes on every rank)")
    ap.add_argument("--weight-bytes", type=float, default=1.0, help="bytes per linear weight (1 = FP8; default 1)")
    ap.add_argument("--act-bytes", type=int, default=4, help="bytes per activation on the wire (engine: 4 = fp32)")
    ap.add_argument("--context", type=int, default=0,
                    help="context tokens per sequence whose KV is read (default 0: weights only)")
    ap.add_argument("--trials", type=int, default=2000, help="Monte Carlo trials for the busiest rank's experts")
    ap.add_argument("--seed", type=int, default=1, help="Monte Carlo seed (default 1)")
    ap.add_argument("--model", choices=("hy3", "hy4", "both"), default="both", help="which model(s) (default both)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    a = ap.parse_args()

    try:
        nodes = [int(x) for x in a.nodes.split(",")]
    except ValueError:
        sys.exit("dist_projection: --nodes %r is not a comma-separated list of integers" % a.nodes)
    if any(n < 1 or n & (n - 1) for n in nodes):
        sys.exit("dist_projection: --nodes: every count must be a power of two (1, 2, 4, ...)")
    if a.batch < 1 or a.trials < 1 or a.act_bytes < 1 or not a.weight_bytes > 0 or a.context < 0:
        sys.exit("dist_projection: need --batch >= 1, --trials >= 1, --act-bytes >= 1, --weight-bytes > 0, "
                 "--context >= 0")

    got = load_inputs(a.inputs)
    src = {}
    if a.rate_gbs:
        rate1 = rate16 = a.rate_gbs
        src["rate"] = "--rate-gbs"
    elif a.mem_bw_gbs:
        rate1 = rate16 = a.mem_bw_gbs * a.efficiency
        src["rate"] = "--mem-bw-gbs x --efficiency"
    elif "rate_gbs" in got:
        rate1 = got["rate_gbs"]
        rate16 = got.get("rate_gbs_b16", rate1)
        src["rate"] = "inputs (achieved decode bytes/s)"
    elif "mem_bw_gbs" in got:
        rate1 = rate16 = got["mem_bw_gbs"] * a.efficiency
        src["rate"] = "inputs mem_bw_gbs x --efficiency"
    else:
        rate1 = rate16 = 200.0 * a.efficiency
        src["rate"] = "default 200 GB/s"
    if a.alpha_us is not None:
        alpha_us, src["alpha"] = a.alpha_us, "--alpha-us"
    elif "alpha_us" in got:
        alpha_us, src["alpha"] = got["alpha_us"], "inputs"
    else:
        alpha_us, src["alpha"] = 20.0, "default"
    if a.beta_gbs:
        beta_gbs, src["beta"] = a.beta_gbs, "--beta-gbs"
    elif a.link_gbps:
        beta_gbs, src["beta"] = a.link_gbps / 8.0, "--link-gbps / 8"
    elif "beta_gbs" in got:
        beta_gbs, src["beta"] = got["beta_gbs"], "inputs"
    elif "link_gbps" in got:
        beta_gbs, src["beta"] = got["link_gbps"] / 8.0, "inputs link_gbps / 8"
    else:
        beta_gbs, src["beta"] = 12.5, "default 100 Gb/s"
    if not (rate1 > 0 and rate16 > 0 and beta_gbs > 0 and alpha_us >= 0):
        sys.exit("dist_projection: need a rate > 0, beta > 0 and alpha >= 0")

    models = {"hy3": [HY3], "hy4": [HY4], "both": [HY3, HY4]}[a.model]
    shared_split = a.shared == "split"
    out = {"rate_gbs_batch1": rate1, "rate_gbs_batchB": rate16, "alpha_us": alpha_us, "beta_gbs": beta_gbs,
           "sources": src, "combine": a.combine, "dispatch": a.dispatch, "shared": a.shared,
           "weight_bytes": a.weight_bytes, "act_bytes": a.act_bytes, "context": a.context, "batch": a.batch,
           "formula": textwrap.dedent(__doc__.split("on the slowest rank,\n")[1].split("\nInputs:")[0]).strip("\n"),
           "models": []}
    for m in models:
        rows = []
        for N in nodes:
            r1 = project(m, N, 1, rate1 * 1e9, alpha_us * 1e-6, beta_gbs * 1e9, a, shared_split)
            rb = project(m, N, a.batch, rate16 * 1e9, alpha_us * 1e-6, beta_gbs * 1e9, a, shared_split)
            rows.append({"N": N, "batch1": r1, "batchB": rb})
        out["models"].append({"name": m["name"], "rows": rows})
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print("dist_projection: layout A (attention TP-N + EP-N, tokens replicated), %s combine, %s dispatch, "
          "shared expert %s" % (a.combine, a.dispatch, a.shared))
    print("  per-rank read rate %.1f GB/s at batch 1, %.1f GB/s at batch %d (%s); alpha %.2f us (%s); "
          "beta %.3f GB/s = %.1f Gb/s (%s)" % (rate1, rate16, a.batch, src["rate"], alpha_us, src["alpha"],
                                               beta_gbs, beta_gbs * 8, src["beta"]))
    print("  weights %.2f B/param (linears), bf16 embedding/lm_head, f32 router; activations %d B on the wire; "
          "KV context %d" % (a.weight_bytes, a.act_bytes, a.context))
    print()
    print("formula:")
    for line in out["formula"].splitlines():
        print("  " + line)
    for mo in out["models"]:
        print()
        print("%s" % mo["name"])
        print("  %4s %9s | %-38s | %-40s" % ("N", "GB/rank", "batch 1", "batch %d" % a.batch))
        print("  %4s %9s | %8s %8s %6s %6s %8s | %8s %8s %6s %6s %9s" % (
            "", "held", "mem ms", "comm ms", "colls", "exp", "ms/tok", "mem ms", "comm ms", "colls", "exp",
            "tok/s"))
        for r in mo["rows"]:
            b1, bb = r["batch1"], r["batchB"]
            print("  %4d %9.1f | %8.1f %8.1f %6d %6.2f %8.1f | %8.1f %8.1f %6d %6.2f %9.1f" % (
                r["N"], b1["held_gb"], b1["mem_ms"], b1["comm_ms"], b1["collectives"], b1["max_experts"],
                b1["step_ms"], bb["mem_ms"], bb["comm_ms"], bb["collectives"], bb["max_experts"],
                bb["tokens_per_s"]))
    print()
    print("  held = weights one rank keeps (FP8 linears, all its experts); exp = E[max distinct experts of one "
          "rank] per MoE layer; colls = collectives per step on the critical path")


if __name__ == "__main__":
    main()
