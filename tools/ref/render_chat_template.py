#!/usr/bin/python3
"""Render the Hy3 chat template exactly as Hugging Face apply_chat_template does (jinja2 reference).

Usage:
  render_chat_template.py CASE.json              prints the rendering (exit 0), or the exception
                                                 message on stderr (exit 1)
  render_chat_template.py --batch CASES.json     CASES is a JSON list of cases; prints a JSON list
                                                 of {"text": ...} or {"error": ..., "type": ...}
  --template PATH                                template file (default <repo>/tests/data/hy3/
                                                 tencent-Hy3.jinja)

A case is {"messages": [...], "tools": [...] (optional, None when absent),
"add_generation_prompt": bool (optional, default False), any other key: a template kwarg such as
reasoning_effort, preserved_thinking, is_training, raw_last_assistant, fallback_strategy}.
Kwargs are defined only when present in the case (JSON null = Python None).

The environment mirrors transformers' chat-template compiler: ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks and the loopcontrols extension; `tojson` = json.dumps(ensure_ascii=False,
indent=None, separators=None, sort_keys=False); `raise_exception` raises TemplateError;
`strftime_now` formats the current time. Render variables: messages, tools, documents (None),
add_generation_prompt, then the kwargs.
"""
import json
import os
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


def default_template_path():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(root, "tests", "data", "hy3", "tencent-Hy3.jinja")


def compile_template(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(source)


def render(template, case):
    """Returns the rendered string; raises what the template raises."""
    kwargs = {k: v for k, v in case.items()
              if k not in ("messages", "tools", "add_generation_prompt")}
    return template.render(messages=case.get("messages"), tools=case.get("tools"), documents=None,
                           add_generation_prompt=case.get("add_generation_prompt", False),
                           **kwargs)


def render_result(template, case):
    """{"text": rendering} or {"error": message, "type": exception class name}."""
    try:
        return {"text": render(template, case)}
    except Exception as e:  # the template's own errors and Python errors both count as failures
        return {"error": str(e), "type": type(e).__name__}


def main(argv):
    args = list(argv[1:])
    tpl_path = default_template_path()
    batch = False
    if "--template" in args:
        i = args.index("--template")
        tpl_path = args[i + 1]
        del args[i:i + 2]
    if "--batch" in args:
        batch = True
        args.remove("--batch")
    if len(args) != 1:
        sys.stderr.write(__doc__)
        return 2
    with open(tpl_path, encoding="utf-8") as f:
        template = compile_template(f.read())
    with open(args[0], encoding="utf-8") as f:
        data = json.load(f)
    if batch:
        out = [render_result(template, c) for c in data]
        sys.stdout.write(json.dumps(out, ensure_ascii=False))
        sys.stdout.write("\n")
        return 0
    res = render_result(template, data)
    if "error" in res:
        sys.stderr.write("%s: %s\n" % (res["type"], res["error"]))
        return 1
    sys.stdout.buffer.write(res["text"].encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
