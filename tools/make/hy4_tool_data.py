#!/usr/bin/python3
"""Synthetic agent (tool-calling) conversations for the tiny Hy4-preview model (models/hy4-tiny).

Used by tools/make/train_tiny_hy4.py (--tool-frac) for training and by tools/make/eval_tool_calls.py --format hy4
for the held-out evaluation. The conversations are those of tools/make/hy3_tool_data.py (same 7 tools, entities,
phrasings and train/heldout split: held-out cities, countries, time zones and phrasings never occur in a training
tool prompt), plus what Hy4 adds:
  - a reasoning_effort per sample, `no_think` or `high` (--high-frac), so both generation prompts
    (`<think:SUF></think:SUF>` and `<think:SUF>`) are learned; with `high` every assistant turn after the last user
    message carries a short or empty reasoning_content (which the template keeps only in that case);
  - rendering with models/hy4-tiny/chat_template.jinja (Hugging Face's jinja2 settings: trim_blocks,
    lstrip_blocks, raise_exception, tojson with ensure_ascii=False).
make_echo() conversations (plain word-copy chats over all entities; see hy3_tool_data.make_echo for why) get an
effort too, rendered without tools.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hy3_tool_data import (CITIES, COUNTRIES, TIMEZONES, TOOLS, TOOL_NAMES, make_echo,  # noqa: E402,F401
                           make_sample)

REASON_CALL = ["", "", "I will call {names}.", "The user wants {names}.", "This needs {names}.",
               "Call {names} with the values from the question."]
REASON_ANSWER = ["", "", "I have the results.", "Now I can answer.", "The tool returned the values."]


def _pick(rng, xs):
    return xs[int(rng.integers(len(xs)))]


def with_effort(rng, s, high_frac=0.5):
    """Give sample s (hy3_tool_data shape) a reasoning_effort and, for `high`, reasoning on its assistant turns."""
    effort = "high" if rng.random() < high_frac else "no_think"
    s = dict(s, effort=effort)
    if effort == "high":
        msgs = []
        for m in s["messages"]:
            if m["role"] == "assistant":
                if m.get("tool_calls"):
                    names = " and ".join(c["function"]["name"] for c in m["tool_calls"])
                    rc = _pick(rng, REASON_CALL).format(names=names)
                else:
                    rc = _pick(rng, REASON_ANSWER)
                m = dict(m, reasoning_content=rc)
            msgs.append(m)
        s["messages"] = msgs
    return s


def make_hy4_sample(rng, split="train", parallel=None, max_tools=3, high_frac=0.5):
    return with_effort(rng, make_sample(rng, split, parallel=parallel, max_tools=max_tools), high_frac)


def make_hy4_echo(rng, list_frac=0.0, list_max=4, high_frac=0.5):
    return with_effort(rng, make_echo(rng, list_frac, list_max), high_frac)


_TEMPLATES = {}


def render(template_src, s, add_generation_prompt=False, messages=None):
    """Render sample s (or `messages` with s's tools and effort) with the Hy4 template, HF's way."""
    import json

    import jinja2

    if template_src not in _TEMPLATES:
        def raise_exception(msg):
            raise jinja2.exceptions.TemplateError(msg)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):   # HF's override
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                              sort_keys=sort_keys)

        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
        env.globals["raise_exception"] = raise_exception
        env.filters["tojson"] = tojson
        _TEMPLATES[template_src] = env.from_string(template_src)
    return _TEMPLATES[template_src].render(messages=s["messages"] if messages is None else messages,
                                           tools=s.get("tools"), add_generation_prompt=add_generation_prompt,
                                           reasoning_effort=s.get("effort", "no_think"))
