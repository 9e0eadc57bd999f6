#!/usr/bin/python3
"""Evaluate tool calling of a tiny Hy3 (or, with --format hy4, Hy4-preview) checkpoint on held-out synthetic
agent prompts, with the C engine.

Usage:
  make -s -j2
  /usr/bin/python3 tools/make/eval_tool_calls.py --model build/hy3-tiny-tools [--n-single 60 --n-parallel 30
      --n-answer 40] [--report build/hy3-tiny-tools/TOOL_EVAL.md]

Prompts come from tools/make/hy3_tool_data.py, split "heldout" (cities, countries, time zones and user phrasings
that never occur in training; numbers are random), rendered with the model directory's chat_template.jinja the
way Hugging Face does (tools/ref/render_chat_template.py: tools in OpenAI format, add_generation_prompt,
reasoning_effort no_think) and tokenized with tools/make/make_hy3_tokenizer.py (the tool markers are single
added tokens). Each prompt runs through `build/hyinfer generate --prompt-ids ... --temperature 0 --print-ids`
(greedy, raw ids: no second template pass), and the decoded output is parsed with the Hy3 grammar of
specs/hy3_tool_calls.md §1.4:
  <tool_calls>\\n (<tool_call>NAME<tool_sep>\\n (<arg_key>K</arg_key>\\n<arg_value>V</arg_value>\\n)* </tool_call>\\n)+
  </tool_calls> <eos>
(all markers with the :opensource suffix). Measures:
  well-formed   the whole output is exactly that block (no text around it) ending on EOS
  name          the called function names equal the expected ones, in order
  name+args     names and arguments equal (values coerced by the tool's JSON schema: integer, boolean,
                array via JSON, string raw)
  parallel      the same, restricted to the prompts that need two calls
  answer        for conversations that end with the tool responses: the final answer (up to EOS) contains
                every salient value of the responses (temperature and condition, time, result, population, hour,
                date), and whether it equals the reference sentence exactly

--format hy4 (models/hy4-tiny): prompts from tools/make/hy4_tool_data.py (the same held-out entities and
phrasings), rendered with the model's chat_template.jinja with --reasoning-effort (default no_think; `high` lets
the model write a reasoning before </think:opensource>, which is stripped before parsing), tokenized with
tools/make/train_tiny_hy4.py's byte-level BPE + added tokens; EOS = <｜hy_end:opensource｜>; the grammar is Hy4's
(docs/tool-calling.md), compact, no <tool_sep>, nothing between calls:
  <tool_calls> (<tool_call>NAME (<arg_key>K</arg_key><arg_value>V</arg_value>)* </tool_call>)+ </tool_calls> <eos>
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
sys.path.insert(0, os.path.join(ROOT, "tools", "make"))
import hy3_tool_data as td  # noqa: E402
import make_hy3_tokenizer as hytok  # noqa: E402
from render_chat_template import compile_template  # noqa: E402

S = ":opensource"
EOS_TEXT = "<\uff5chy_eos%s\uff5c>" % S
CALLS_RE = re.compile(
    r"^<tool_calls{s}>\n((?:<tool_call{s}>[^<\n]+<tool_sep{s}>\n"
    r"(?:<arg_key{s}>[^<]*</arg_key{s}>\n<arg_value{s}>[^<]*</arg_value{s}>\n)*"
    r"</tool_call{s}>\n)+)</tool_calls{s}>$".format(s=S), re.S)
CALL_RE = re.compile(r"<tool_call{s}>([^<\n]+)<tool_sep{s}>\n((?:<arg_key{s}>[^<]*</arg_key{s}>\n"
                     r"<arg_value{s}>[^<]*</arg_value{s}>\n)*)</tool_call{s}>".format(s=S), re.S)
ARG_RE = re.compile(r"<arg_key{s}>([^<]*)</arg_key{s}>\n<arg_value{s}>([^<]*)</arg_value{s}>".format(s=S), re.S)
SALIENT = {"get_weather": ["temperature", "condition"], "get_time": ["time"], "add": ["result"],
           "get_population": ["population"], "set_alarm": ["hour"], "sum_list": ["result"], "get_date": ["date"]}


HY4_CALLS_RE = re.compile(
    r"^<tool_calls{s}>((?:<tool_call{s}>[^<\n]+"
    r"(?:<arg_key{s}>[^<]*</arg_key{s}><arg_value{s}>[^<]*</arg_value{s}>)*"
    r"</tool_call{s}>)+)</tool_calls{s}>$".format(s=S), re.S)
HY4_CALL_RE = re.compile(r"<tool_call{s}>([^<\n]+)((?:<arg_key{s}>[^<]*</arg_key{s}>"
                         r"<arg_value{s}>[^<]*</arg_value{s}>)*)</tool_call{s}>".format(s=S), re.S)
HY4_ARG_RE = re.compile(r"<arg_key{s}>([^<]*)</arg_key{s}><arg_value{s}>([^<]*)</arg_value{s}>".format(s=S), re.S)
HY4_EOS_TEXT = "<\uff5chy_end%s\uff5c>" % S
HY4_THINK_END = "</think%s>" % S


def parse_hy4(text, thinking):
    """Hy4 grammar. thinking: the prompt ended on <think:SUF>, the output is reasoning + </think:SUF> + the rest
    (no </think:SUF> = not well-formed). -> (well_formed, calls, the text after the reasoning)."""
    ok = True
    if thinking:
        i = text.find(HY4_THINK_END)
        if i < 0:
            ok = False
        else:
            text = text[i + len(HY4_THINK_END):]
    body = text[:-len(HY4_EOS_TEXT)] if text.endswith(HY4_EOS_TEXT) else text
    ok = ok and text.endswith(HY4_EOS_TEXT) and HY4_CALLS_RE.match(body) is not None
    calls = [(m.group(1).strip(), {k: v for k, v in HY4_ARG_RE.findall(m.group(2))})
             for m in HY4_CALL_RE.finditer(body)]
    return ok, calls, text


def coerce(tool, key, v):
    """Schema-typed value of argument `key` of `tool` (None if it cannot be coerced)."""
    props = td.TOOLS[tool]["function"]["parameters"]["properties"] if tool in td.TOOLS else {}
    typ = props.get(key, {}).get("type", "string")
    try:
        if typ == "integer":
            return int(v.strip())
        if typ == "boolean":
            return {"true": True, "false": False}[v.strip().lower()]
        if typ == "array":
            return json.loads(v)
        return v
    except (ValueError, KeyError, json.JSONDecodeError):
        return None


def parse(text):
    """-> (well_formed, [(name, {key: raw value})]) ; calls are also salvaged from malformed output."""
    body = text[:-len(EOS_TEXT)] if text.endswith(EOS_TEXT) else text
    ok = text.endswith(EOS_TEXT) and CALLS_RE.match(body) is not None
    calls = [(m.group(1).strip(), {k.strip(): v for k, v in ARG_RE.findall(m.group(2))})
             for m in CALL_RE.finditer(body)]
    return ok, calls


def run_engine(engine, model, ids, n, dtype, threads):
    cmd = [engine, "generate", "-m", model, "--prompt-ids", ",".join(map(str, ids)), "-n", str(n),
           "--temperature", "0", "--dtype", dtype, "--print-ids", "-t", str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError("engine failed (%d): %s" % (r.returncode, r.stderr[-2000:]))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("[")]
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="build/hy3-tiny-tools")
    ap.add_argument("--engine", default=os.path.join(ROOT, "build", "hyinfer"))
    ap.add_argument("--n-single", type=int, default=60)
    ap.add_argument("--n-parallel", type=int, default=30)
    ap.add_argument("--n-answer", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=120)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--split", default="heldout", choices=["heldout", "train"])
    ap.add_argument("--report", default="", help="write a markdown report here")
    ap.add_argument("--show", type=int, default=6, help="example outputs printed per kind")
    ap.add_argument("--format", default="hy3", choices=["hy3", "hy4"], help="model family (template, grammar)")
    ap.add_argument("--reasoning-effort", default="no_think", choices=["no_think", "low", "high"],
                    help="the template's reasoning_effort (hy3 keeps no_think)")
    a = ap.parse_args()

    with open(os.path.join(a.model, "chat_template.jinja"), encoding="utf-8") as f:
        tpl = compile_template(f.read())
    hy4 = a.format == "hy4"
    thinking = hy4 and a.reasoning_effort != "no_think"
    if hy4:
        import hy4_tool_data as td4
        import train_tiny_hy4 as t4
        tok = t4.Tok(os.path.join(a.model, "tokenizer.json"))
        for t in t4.TOOL_TOKENS:
            assert tok.encode_added(t) == [tok.added[t]], t
        encode, eos_text, data = tok.encode_added, HY4_EOS_TEXT, "hy4_tool_data.py"

        def make(rng, split, parallel):
            return td4.make_hy4_sample(rng, split, parallel=parallel)
    else:
        tok = hytok.HyTiktoken(os.path.join(a.model, "hy.tiktoken"), hytok.golden_pat_str(), hytok.special_tokens())
        for t in hytok.HY3_SPECIALS[9:]:
            assert tok.encode(t) == [hytok.special_tokens()[t]], t
        encode, eos_text, data = tok.encode, EOS_TEXT, "hy3_tool_data.py"
        make = td.make_sample

    def parse_out(text):
        if hy4:
            ok, calls, _ = parse_hy4(text, thinking)
            return ok, calls
        return parse(text)

    def final_text(text):
        if thinking and HY4_THINK_END in text:
            text = text[text.find(HY4_THINK_END) + len(HY4_THINK_END):]
        return text[:-len(eos_text)] if text.endswith(eos_text) else text

    rng = np.random.default_rng(a.seed)
    samples = [make(rng, a.split, parallel=False) for _ in range(a.n_single)]
    samples += [make(rng, a.split, parallel=True) for _ in range(a.n_parallel)]
    t0 = time.time()

    def gen(messages, tools):
        prompt = tpl.render(messages=messages, tools=tools, add_generation_prompt=True,
                            reasoning_effort=a.reasoning_effort)
        ids = encode(prompt)
        out = run_engine(a.engine, a.model, ids, a.max_tokens, a.dtype, a.threads)
        return tok.decode(out), len(ids)

    res = {"single": [], "parallel": []}
    examples = []
    plen = []
    for i, s in enumerate(samples):
        kind = "parallel" if len(s["calls"]) == 2 else "single"
        text, n = gen(s["messages"][:1], s["tools"])
        plen.append(n)
        ok, calls = parse_out(text)
        exp = [(c["name"], c["arguments"]) for c in s["calls"]]
        name_ok = [c[0] for c in calls] == [e[0] for e in exp]
        args_ok = name_ok and all({k: coerce(nm, k, v) for k, v in got.items()} == want
                                  for (nm, got), (_, want) in zip(calls, exp))
        res[kind].append((ok, name_ok, args_ok))
        if len([e for e in examples if e[0] == kind]) < a.show or not args_ok and len(examples) < 40:
            examples.append((kind, s["messages"][0]["content"], text, ok, args_ok))

    ans = []
    for s in samples[:a.n_answer // 2] + samples[a.n_single:a.n_single + a.n_answer - a.n_answer // 2]:
        text, _ = gen(s["messages"][:-1], s["tools"])
        final = final_text(text)
        vals = [str(r[k]) for c, r in zip(s["calls"], s["responses"]) for k in SALIENT[c["name"]]]
        hit = all(v in final for v in vals)
        ans.append((hit, final.strip() == s["answer"], text.endswith(eos_text)))
        if len([e for e in examples if e[0] == "answer"]) < a.show:
            examples.append(("answer", s["messages"][-2]["content"] if len(s["calls"]) == 1 else
                             " | ".join(m["content"] for m in s["messages"][2:-1]), text, hit, s["answer"]))
    secs = time.time() - t0

    def rate(rows, j):
        return sum(r[j] for r in rows) / max(len(rows), 1)

    allr = res["single"] + res["parallel"]
    lines = ["# Tool-call evaluation: %s\n" % a.model,
             "Command: `/usr/bin/python3 %s`\n" % " ".join(sys.argv),
             "Engine: `%s generate --prompt-ids ... --temperature 0 --dtype %s --print-ids` (greedy, raw prompt ids). "
             "Split `%s` of tools/make/%s, seed %d, reasoning_effort %s; prompts %d-%d tokens (mean %.0f); "
             "%.0f s.\n" % (os.path.relpath(a.engine, ROOT), a.dtype, a.split, data, a.seed, a.reasoning_effort,
                            min(plen), max(plen), np.mean(plen), secs),
             "| measure | prompts | rate |", "|---|---|---|"]
    for label, rows, j in (("well-formed tool-call block (exact grammar, ends on EOS)", allr, 0),
                           ("correct function name(s)", allr, 1),
                           ("**correct name + arguments** (schema-coerced)", allr, 2),
                           ("single call: well-formed", res["single"], 0),
                           ("single call: name + arguments", res["single"], 2),
                           ("parallel (2 calls): well-formed", res["parallel"], 0),
                           ("parallel (2 calls): both names", res["parallel"], 1),
                           ("**parallel (2 calls): both names + arguments**", res["parallel"], 2)):
        lines.append("| %s | %d | %.3f |" % (label, len(rows), rate(rows, j)))
    for label, j in (("final answer after the tool responses mentions every salient result value", 0),
                     ("final answer equals the reference sentence exactly", 1),
                     ("final answer ends on EOS", 2)):
        lines.append("| %s | %d | %.3f |" % (label, len(ans), rate(ans, j)))
    lines.append("\n## Examples\n")
    for e in examples:
        if e[0] == "answer":
            lines.append("- answer after `%s`: `%s` (values %s; reference `%s`)" %
                         (e[1].replace("\n", " "), e[2].replace("\n", "\\n"), "ok" if e[3] else "MISSING", e[4]))
        else:
            lines.append("- %s `%s` -> `%s` (%s, %s)" % (e[0], e[1], e[2].replace("\n", "\\n"),
                                                         "well-formed" if e[3] else "MALFORMED",
                                                         "args ok" if e[4] else "ARGS WRONG"))
    text = "\n".join(lines) + "\n"
    print(text)
    if a.report:
        with open(a.report, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
