#!/usr/bin/python3
"""Golden test: the Jinja interpreter (src/text/jinja*.c through text/chat.h) against jinja2 rendering
the official Hy3 template and its Hy3-preview spelling (tests/data/hy3-preview-tiny).

Named conversations covering every branch of tencent-Hy3.jinja plus a few hundred seeded random
ones are rendered by tools/ref/render_chat_template.py (jinja2, as Hugging Face apply_chat_template
does) and by tests/golden/chat_template_driver.c (linked against build/libhyinfer.a). Outputs
must be byte-for-byte equal; where jinja2 raises, the C side must fail too with a message that
contains the exception's text.
Scratch files: build/chat_template/. Exit 0 pass, 1 fail, 77 skip.
"""
import json
import os
import random
import struct
import subprocess
import sys

ROOT = os.environ.get("HYINFER_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TEMPLATE = os.path.join(ROOT, "tests", "data", "hy3", "tencent-Hy3.jinja")
PREVIEW_TEMPLATE = os.path.join(ROOT, "tests", "data", "hy3-preview-tiny", "chat_template.jinja")
WORK = os.path.join(ROOT, "build", "chat_template")
N_RANDOM = 400

sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))


def skip(why):
    print("skip: " + why)
    sys.exit(77)


try:
    import render_chat_template as ref  # needs jinja2
except ImportError as e:
    skip("python3-jinja2 not importable: %s" % e)
if not os.path.isfile(TEMPLATE):
    print("FAIL: template not found: %s (tests/data is part of the repository)" % TEMPLATE)
    sys.exit(1)


# ----------------------------------------------------------------------------- named cases

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city, in °C — «quoted» \"text\"",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "城市名"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7.5}},
        "required": ["city"]}}}
SEARCH_TOOL = {"type": "function", "function": {
    "name": "search", "description": "Search\nthe web\tnow", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}}}}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]

CALL_ARGS = {"city": "Zürich 北京 🌧", "days": 3, "metric": True, "ratio": 0.1, "big": 1e16,
             "small": 1.5e-05, "none": None, "opts": {"unit": "°C", "list": [1, 2.0, "x", False],
                                                      "empty": {}}, "tags": [], "quote": "a\"b\\c"}


def call(name, args, cid="call_1"):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def float_stress_values(n=3000):
    """Doubles where shortest-repr digits are easy to get wrong: random bit patterns, powers of two
    and ten and their neighbours, subnormals, short decimals."""
    rng = random.Random(99)
    out = []
    while len(out) < n:
        r = rng.random()
        if r < 0.35:
            bits = rng.getrandbits(64)
        else:
            if r < 0.7:
                x = 2.0 ** rng.randint(-1074, 1023)
            elif r < 0.85:
                x = 10.0 ** rng.randint(-320, 308)
            else:
                x = round(rng.uniform(-1e6, 1e6), rng.randint(0, 8))
            bits = (struct.unpack("<Q", struct.pack("<d", x))[0] + rng.choice([-1, 0, 1])) % (1 << 64)
        x = struct.unpack("<d", struct.pack("<Q", bits))[0]
        if x == x and abs(x) != float("inf"):
            out.append(x)
    return out


def named_cases():
    u = lambda c: {"role": "user", "content": c}
    a = lambda c, **kw: dict({"role": "assistant", "content": c}, **kw)
    s = lambda c: {"role": "system", "content": c}
    tool = lambda c: {"role": "tool", "content": c, "tool_call_id": "call_1"}
    tool_turn = [u("Weather in Zürich?"),
                 a("", reasoning_content="need the tool", tool_calls=[call("get_weather", CALL_ARGS)])]
    return {
        "plain_turns": {"messages": [u("Hello"), a("Hi there."), u("How are you?")],
                        "add_generation_prompt": True},
        "system_prompt": {"messages": [s("You are helpful."), u("Hi")], "add_generation_prompt": True},
        "two_system_messages": {"messages": [s("First. "), u("Hi"), s(["Second", {"type": "text", "text": "!"}]),
                                             a("ok"), u("again")], "add_generation_prompt": True},
        "effort_undefined": {"messages": [u("q")], "add_generation_prompt": True},
        "effort_no_think": {"messages": [u("q")], "add_generation_prompt": True, "reasoning_effort": "no_think"},
        "effort_low": {"messages": [s("S"), u("q")], "add_generation_prompt": True, "reasoning_effort": "low"},
        "effort_high": {"messages": [u("q")], "add_generation_prompt": True, "reasoning_effort": "high"},
        "effort_invalid": {"messages": [u("q")], "add_generation_prompt": True, "reasoning_effort": "medium"},
        "effort_empty": {"messages": [u("q")], "reasoning_effort": ""},
        "effort_none": {"messages": [u("q")], "add_generation_prompt": True, "reasoning_effort": None},
        "effort_number": {"messages": [u("q")], "reasoning_effort": 3},
        "effort_invalid_with_fallback": {"messages": [u("q")], "reasoning_effort": "max",
                                         "fallback_strategy": "reasoning_toolcall_retry"},
        "reasoning_before_and_after_last_user": {
            "messages": [u("1+1?"), a("2", reasoning_content="simple"), u("and 2+2?"),
                         a("4", reasoning_content="also simple")], "reasoning_effort": "high"},
        "reasoning_key_variants": {
            "messages": [u("a"), a("x", reasoning="via reasoning key"), u("b"),
                         a("y", reasoning_content=None, reasoning="fallback key"),
                         a("z", reasoning_content=7)]},
        "preserved_thinking_true": {
            "messages": [u("1+1?"), a("2", reasoning_content="simple"), u("and 2+2?")],
            "preserved_thinking": True, "add_generation_prompt": True},
        "preserved_thinking_false_with_tools": {
            "messages": tool_turn + [tool("sunny"), a("It is sunny.", reasoning_content="done"), u("thanks")],
            "tools": TOOLS, "preserved_thinking": False, "add_generation_prompt": True},
        "tool_call_then_responses_then_user": {
            "messages": tool_turn + [tool("12°C, rain"), tool({"temp": 12, "unit": "C"}), tool(None), u("and tomorrow?")],
            "tools": TOOLS, "add_generation_prompt": True},
        "tool_call_then_responses_then_assistant": {
            "messages": [s("Sys")] + tool_turn + [tool("12°C"), tool("rain"),
                                                  a("Rainy, 12°C.", reasoning_content="summarize")],
            "tools": TOOLS, "reasoning_effort": "high"},
        "tool_responses_at_end": {
            "messages": tool_turn + [tool("12°C")], "tools": TOOLS, "add_generation_prompt": True,
            "reasoning_effort": "low"},
        "two_tool_calls_parallel": {
            "messages": [u("both"), a(None, tool_calls=[call("get_weather", {"city": "Paris"}),
                                                        call("search", {"q": "news", "n": -2.5e-7})]),
                         tool("a"), tool("b"), u("next"), tool("orphan")],
            "tools": TOOLS},
        "tool_call_arguments_json_string": {
            "messages": [u("x"), a("", tool_calls=[call("search", "{\"q\": \"news\"}")])], "tools": TOOLS},
        "tool_call_typed_args_json_string_three_responses": {
            "messages": [s("Sys"), u("x"), a("", tool_calls=[call("get_weather", json.dumps(
                {"city": "Paris", "days": 3, "metric": True, "tags": ["a", "b"], "opts": {"k": 1.5, "z": None}}))]),
                tool("r1"), tool("r2"), tool("r3"), u("next"), a("done")],
            "tools": TOOLS, "add_generation_prompt": True},
        "tool_call_without_arguments": {
            "messages": [u("x"), a("", tool_calls=[{"function": {"name": "search"}}])], "tools": TOOLS},
        "tool_call_empty_list": {"messages": [u("x"), a("plain", tool_calls=[])], "tools": TOOLS},
        "content_list_of_parts": {
            "messages": [u([{"type": "text", "text": "Look: "}, {"type": "image_url", "image_url": {"url": "x"}},
                            "raw string part", {"type": "text", "text": 42}, {"type": "text"},
                            {"type": "text", "text": None}, 5, ["nested"]]),
                         a([{"type": "text", "text": "seen"}])], "add_generation_prompt": True},
        "null_content": {"messages": [s(None), u(None), a(None), u("x"), {"role": "assistant"}]},
        "content_other_types": {
            "messages": [u(12), u(3.25), u(True), u({"k": "it's \u3000\u00a0\u200b\x7f\n", "v": [1e22, None, "\"q\""]}),
                         u({"k": "plain 'single'"}), a(0.1)]},
        "add_generation_prompt_false": {"messages": [u("Hello")], "add_generation_prompt": False},
        "last_assistant_no_generation_prompt": {"messages": [u("Hello"), a("partial")], "add_generation_prompt": True},
        "cjk_emoji": {"messages": [s("你是一个乐于助人的助手。"), u("你好 👋🏽 こんにちは 안녕하세요 🇨🇳"),
                                   a("你好！😀", reasoning_content="用户在打招呼"), u("謝謝\u3000！")],
                      "add_generation_prompt": True, "reasoning_effort": "high"},
        "is_training": {"messages": [u("a"), a("b", reasoning_content="r1"), u("c"), a("d"),
                                     a("e", tool_calls=[call("search", {"q": "z"})]), tool("t")],
                        "is_training": True, "tools": TOOLS},
        "raw_last_assistant": {"messages": [u("a"), a("prefill", reasoning_content="hidden")],
                               "raw_last_assistant": True, "add_generation_prompt": True},
        "raw_last_assistant_tool_call": {"messages": [u("a"), a("c", tool_calls=[call("search", {"q": 1})])],
                                         "raw_last_assistant": True, "tools": TOOLS},
        "fallback_strategy": {"messages": [u("a")], "tools": TOOLS, "add_generation_prompt": True,
                              "fallback_strategy": "reasoning_toolcall_retry"},
        "fallback_strategy_other": {"messages": [u("a")], "add_generation_prompt": True,
                                    "fallback_strategy": "something_else"},
        "tools_empty_list": {"messages": [u("a")], "tools": [], "add_generation_prompt": True},
        "tools_with_empty_system": {"messages": [s(""), u("a")], "tools": [{"name": "f"}, 5, "s", None]},
        "tools_not_iterable": {"messages": [u("a")], "tools": 7},
        "odd_roles_and_items": {"messages": [{"role": "developer", "content": "dev"}, "not a dict", [1],
                                             {"content": "no role"}, u("real"), {"role": 5}]},
        "messages_empty": {"messages": [], "add_generation_prompt": True},
        "messages_none": {"messages": None},
        "float_repr_stress": {"messages": [u("f"), a("", tool_calls=[call("f", {"xs": float_stress_values()})]),
                                           u({"xs": float_stress_values()[:300]})], "tools": TOOLS},
        "kwargs_truthiness": {"messages": [u("a"), a("b", reasoning_content="r"), u("c")],
                              "preserved_thinking": "yes", "is_training": 0, "raw_last_assistant": [],
                              "add_generation_prompt": 1},
    }


# ----------------------------------------------------------------------------- random cases

ODD_CHARS = ["\n", "\t", "\r", "\"", "'", "\\", "\x01", "\x1f", "\x7f", "\u00a0", "\u00e9",
             "\u0378", "\u200b", "\u2028", "\u3000", "\ue000", "中", "文", "🙂", "👍🏽", "\U0001f600",
             "<think:opensource>", "{", "}", ":", ",", " ", "  "]
WORDS = ["hello", "world", "the", "tool", "weather", "北京", "café", "42", "true", "null"]


def rand_text(rng, maxlen=6):
    parts = []
    for _ in range(rng.randint(0, maxlen)):
        parts.append(rng.choice(WORDS) if rng.random() < 0.6 else rng.choice(ODD_CHARS))
    return "".join(parts)


def rand_float(rng):
    r = rng.random()
    if r < 0.3:
        x = rng.choice([0.0, -0.0, 0.1, 0.5, 1.0, 100.0, 1e16, 1e15, 1e-4, 1e-5, 123456.789,
                        2.0 ** 53, 5e-324, 1.7976931348623157e308, 0.30000000000000004])
    elif r < 0.6:
        x = rng.uniform(-1000, 1000)
    else:
        while True:
            x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
            if x == x and x not in (float("inf"), float("-inf")):
                break
    return x


def rand_value(rng, depth=0):
    r = rng.random()
    if r < 0.25 or depth > 2:
        return rand_text(rng)
    if r < 0.4:
        return rng.randint(-10 ** 12, 10 ** 12)
    if r < 0.55:
        return rand_float(rng)
    if r < 0.62:
        return rng.choice([True, False, None])
    if r < 0.8:
        return [rand_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rand_text(rng, 2) or "k": rand_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def rand_content(rng):
    r = rng.random()
    if r < 0.55:
        return rand_text(rng, 10)
    if r < 0.65:
        return None
    if r < 0.85:
        parts = []
        for _ in range(rng.randint(0, 3)):
            q = rng.random()
            if q < 0.6:
                parts.append({"type": "text", "text": rand_text(rng)})
            elif q < 0.75:
                parts.append(rand_text(rng))
            elif q < 0.85:
                parts.append({"type": "image_url", "image_url": {"url": "u"}})
            else:
                parts.append({"type": "text", "text": rand_value(rng)})
        return parts
    return rand_value(rng)


def rand_message(rng, roles):
    role = rng.choice(roles)
    m = {"role": role}
    if rng.random() < 0.95:
        m["content"] = rand_content(rng)
    if role == "assistant":
        if rng.random() < 0.5:
            m["reasoning_content"] = rand_text(rng) if rng.random() < 0.85 else None
        if rng.random() < 0.15:
            m["reasoning"] = rand_text(rng)
        if rng.random() < 0.35:
            calls = []
            for _ in range(rng.randint(0, 3)):
                args = {rand_text(rng, 2) or "arg": rand_value(rng) for _ in range(rng.randint(0, 4))}
                if rng.random() < 0.03:
                    args = json.dumps(args)  # OpenAI wire form: jinja2 raises on .items()
                calls.append(call(rng.choice(["get_weather", "search", "f_" + rand_text(rng, 1)]), args))
            m["tool_calls"] = calls
    return m


def random_case(rng):
    roles = ["user", "assistant", "tool", "system", "user", "assistant", "tool"]
    c = {"messages": [rand_message(rng, roles) for _ in range(rng.randint(0, 8))]}
    if rng.random() < 0.4:
        c["tools"] = [rng.choice([WEATHER_TOOL, SEARCH_TOOL, rand_value(rng)]) for _ in range(rng.randint(0, 3))]
    if rng.random() < 0.8:
        c["add_generation_prompt"] = rng.random() < 0.6
    if rng.random() < 0.7:
        c["reasoning_effort"] = rng.choice(["no_think", "low", "high"] * 5 + ["bad", None])
    for k in ("preserved_thinking", "is_training", "raw_last_assistant"):
        if rng.random() < 0.2:
            c[k] = rng.random() < 0.5
    if rng.random() < 0.1:
        c["fallback_strategy"] = rng.choice(["reasoning_toolcall_retry", "other"])
    return c


# ----------------------------------------------------------------------------- driver

def build_driver():
    lib = os.path.join(ROOT, "build", "libhyinfer.a")
    r = subprocess.run(["make", "-s", "build/libhyinfer.a"], cwd=ROOT)
    if r.returncode != 0 or not os.path.isfile(lib):
        print("FAIL: could not build build/libhyinfer.a")
        sys.exit(1)
    exe = os.path.join(WORK, "chat_template_driver")
    libs = subprocess.run(["pkg-config", "--libs", "libpcre2-8", "jansson", "yaml-0.1"],
                          capture_output=True, text=True, check=True).stdout.split()
    cmd = ["gcc", "-std=c11", "-D_GNU_SOURCE", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
           "-I" + os.path.join(ROOT, "src"), "-o", exe,
           os.path.join(ROOT, "tests", "golden", "chat_template_driver.c"), lib] + libs + \
          ["-lm", "-lpthread", "-fopenmp"]
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
    os.makedirs(WORK, exist_ok=True)
    named = named_cases()
    names = list(named)
    cases = [named[k] for k in names]
    rng = random.Random(1234)
    for i in range(N_RANDOM):
        names.append("random_%d" % i)
        cases.append(random_case(rng))

    cases_path = os.path.join(WORK, "cases.json")
    with open(cases_path, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)
    exe = build_driver()
    pairs = []
    for tpl in (TEMPLATE, PREVIEW_TEMPLATE):
        with open(tpl, encoding="utf-8") as f:
            template = ref.compile_template(f.read())
        expected = [ref.render_result(template, c) for c in cases]
        out_path = os.path.join(WORK, "c_results.json")
        r = subprocess.run([exe, tpl, cases_path, out_path])
        if r.returncode != 0:
            print("FAIL: driver exited with %d" % r.returncode)
            return 1
        with open(out_path, encoding="utf-8") as f:
            got = json.load(f)
        if len(got) != len(cases):
            print("FAIL: driver returned %d results for %d cases" % (len(got), len(cases)))
            return 1
        tag = os.path.relpath(tpl, ROOT)
        pairs += [("%s %s" % (tag, n), e, g) for n, e, g in zip(names, expected, got)]

    failures = 0
    n_err = 0
    for name, exp, res in pairs:
        problem = None
        if "load_error" in res:
            problem = "the template did not load: %s" % res["load_error"]
        elif "error" in exp:
            n_err += 1
            if "error" not in res:
                problem = "jinja2 raised %s: %r, C rendered %r" % (exp["type"], exp["error"], res["text"][:200])
            elif exp["error"] not in res["error"]:
                problem = "error text differs: jinja2 %r, C %r" % (exp["error"], res["error"])
        elif "error" in res:
            problem = "C failed (%r), jinja2 rendered %r" % (res["error"], exp["text"][:200])
        elif res["text"] != exp["text"]:
            i = first_diff(exp["text"], res["text"])
            problem = "output differs at char %d:\n  jinja2: %r\n  C:      %r" % (
                i, exp["text"][max(0, i - 60):i + 60], res["text"][max(0, i - 60):i + 60])
        if problem:
            failures += 1
            if failures <= 10:
                print("FAIL %s: %s" % (name, problem))
    print("2 templates x %d cases (%d named, %d random; %d expected errors), %d failures" % (
        len(cases), len(named), N_RANDOM, n_err, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
