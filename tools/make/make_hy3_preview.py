#!/usr/bin/python3
"""Make tests/data/hy3-preview-tiny: models/hy3-tiny in the Hy3-preview spelling.

Hy3-preview's tokens differ from the final Hy3's in spelling only as far as public sources show (ms-swift's
hy_v3_preview template: bare tags such as <think>, <tool_calls>, <｜hy_User｜>, <｜hy_eos｜>, and the BOS
<｜hy_begin▁of▁sentence｜> with U+2581 instead of underscores). This checkpoint keeps hy3-tiny's weights, ids
and base vocabulary (model.safetensors and hy.tiktoken are symlinks) and renames its added tokens; its
chat_template.jinja is tests/data/hy3/tencent-Hy3.jinja with the suffix variable HYTK = '' and the preview
BOS. Whether the real preview ids equal the final ones is not public; here they do, so the tool-trained
hy3-tiny weights write preview-spelled tool calls.

Usage: /usr/bin/python3 tools/make/make_hy3_preview.py [--out tests/data/hy3-preview-tiny]
"""
import argparse
import json
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "models", "hy3-tiny")
FINAL_BOS = "<｜hy_begin_of_sentence:opensource｜>"
PREVIEW_BOS = "<｜hy_begin▁of▁sentence｜>"


def preview_spelling(s):
    return PREVIEW_BOS if s == FINAL_BOS else s.replace(":opensource", "")


def preview_template():
    t = open(os.path.join(ROOT, "tests", "data", "hy3", "tencent-Hy3.jinja"), encoding="utf-8").read()
    final_hytk = "{%- set HYTK = ':opensource' %}"
    final_bos = "{%- set bos_token = '<｜hy_begin_of_sentence{}｜>'.format(HYTK) %}"
    assert final_hytk in t and final_bos in t
    t = t.replace(final_hytk, "{%- set HYTK = '' %}")
    t = t.replace(final_bos, "{%- set bos_token = '" + PREVIEW_BOS + "' %}")
    head = ("{#- Hy3-preview chat template for hyinfer's test checkpoint tests/data/hy3-preview-tiny: the official\n"
            "    tencent/Hy3 template (tests/data/hy3/tencent-Hy3.jinja) in the preview spelling that ms-swift's\n"
            "    hy_v3_preview template reproduces (bare tags, BOS <｜hy_begin▁of▁sentence｜>). Not a copy of a\n"
            "    published Hy3-preview chat_template.jinja (none is public). Made by tools/make/make_hy3_preview.py. -#}\n")
    return head + t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "hy3-preview-tiny"))
    a = ap.parse_args()
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    for f in ("model.safetensors", "hy.tiktoken"):
        os.symlink(os.path.relpath(os.path.join(SRC, f), a.out), os.path.join(a.out, f))
    for f in ("config.json", "generation_config.json", "LICENSE"):
        shutil.copy(os.path.join(SRC, f), os.path.join(a.out, f))
    cfg = json.load(open(os.path.join(SRC, "tokenizer_config.json"), encoding="utf-8"))
    cfg.pop("chat_template", None)
    for k in ("bos_token", "eos_token", "pad_token"):
        if isinstance(cfg.get(k), str):
            cfg[k] = preview_spelling(cfg[k])
    for v in cfg["added_tokens_decoder"].values():
        v["content"] = preview_spelling(v["content"])
    with open(os.path.join(a.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
        f.write("\n")
    with open(os.path.join(a.out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(preview_template())
    print("wrote %s" % a.out)


if __name__ == "__main__":
    main()
