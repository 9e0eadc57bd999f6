#!/usr/bin/python3
"""Build the tokenizer files of the bundled tiny Hy3 model from the real Hunyuan tokenizer.

Usage: /usr/bin/python3 tools/make/make_hy3_tokenizer.py --out models/hy3-tiny
       [--src tests/data/hunyuan-a13b-tokenizer] [--template tests/data/hy3/tencent-Hy3.jinja]

Writes into --out:
  hy.tiktoken            A13B's BPE ranks, copied unchanged (127,957 ranks)
  LICENSE                A13B tokenizer licence, copied unchanged
  tokenizer_config.json  pat_str, added_tokens_decoder (A13B's 210 specials at 127957.. plus the Hy3
                         control tokens at 128167..128188), Hy3 bos/eos/pad, add_bos_token, chat_template
  chat_template.jinja    tencent-Hy3.jinja, unchanged
  tokenizer.json         converted by tools/convert/tiktoken_to_tokenizer_json.py (run from here unless --no-json)

Also usable as a module: `HyTiktoken` is a small rank-based byte-level BPE encoder (tiktoken semantics:
regex pre-split with pat_str, then repeatedly merge the adjacent pair whose concatenation has the lowest
rank) used by tools/make/train_tiny_hy3.py. `--check` verifies it against golden_tiktoken_encodings.json.
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys

import regex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "tests", "data", "hunyuan-a13b-tokenizer")
TEMPLATE = os.path.join(ROOT, "tests", "data", "hy3", "tencent-Hy3.jinja")

N_RANKS = 127957
A13B_SPECIALS = (["<|endoftext|>", "<|startoftext|>", "<|bos|>", "<|eos|>", "<|pad|>"]
                 + ["<|extra_%d|>" % i for i in range(205)])          # ids 127957..128166
HY3_SPECIALS = [                                                      # ids 128167..128188
    "<\uff5chy_begin_of_sentence:opensource\uff5c>",   # 128167 BOS
    "<\uff5chy_pad:opensource\uff5c>",                 # 128168 pad
    "<\uff5chy_User:opensource\uff5c>",                # 128169
    "<\uff5chy_Assistant:opensource\uff5c>",           # 128170 sep
    "<\uff5chy_eos:opensource\uff5c>",                 # 128171 EOS
    "<\uff5chy_eod:opensource\uff5c>",                 # 128172 eod
    "<think:opensource>",                              # 128173
    "</think:opensource>",                             # 128174
    "<\uff5creasoning_mode:opensource\uff5c>",         # 128175
    "<tool_calls:opensource>", "</tool_calls:opensource>",
    "<tool_call:opensource>", "</tool_call:opensource>",
    "<tool_sep:opensource>",
    "<arg_key:opensource>", "</arg_key:opensource>",
    "<arg_value:opensource>", "</arg_value:opensource>",
    "<tool_responses:opensource>", "</tool_responses:opensource>",
    "<tool_response:opensource>", "</tool_response:opensource>",   # 128188
]
HY3_FIRST_ID = N_RANKS + len(A13B_SPECIALS)                            # 128167
BOS, PAD, USER, ASSISTANT, EOS, EOD, THINK, THINK_END, REASONING_MODE = range(HY3_FIRST_ID, HY3_FIRST_ID + 9)


def special_tokens():
    """dict token string -> id, all 232 specials."""
    out = {t: N_RANKS + i for i, t in enumerate(A13B_SPECIALS)}
    out.update({t: HY3_FIRST_ID + i for i, t in enumerate(HY3_SPECIALS)})
    return out


def load_ranks(path):
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def golden_pat_str(src=SRC):
    with open(os.path.join(src, "golden_tiktoken_encodings.json"), encoding="utf-8") as f:
        return json.load(f)["pat_str"]


class HyTiktoken:
    """Byte-level BPE over tiktoken ranks. encode(text, allow_special=True) -> list of ids."""

    def __init__(self, tiktoken_path, pat_str, specials):
        self.ranks = load_ranks(tiktoken_path)
        self.decoder = {r: b for b, r in self.ranks.items()}
        self.pat = regex.compile(pat_str)
        self.specials = dict(specials)
        for t, i in self.specials.items():
            self.decoder[i] = t.encode("utf-8")
        self.special_pat = regex.compile("|".join(regex.escape(t) for t in
                                                  sorted(self.specials, key=len, reverse=True)))
        self.cache = {}

    def _bpe(self, piece):
        r = self.ranks.get(piece)
        if r is not None:
            return [r]
        parts = [piece[i:i + 1] for i in range(len(piece))]
        while len(parts) > 1:
            best, best_i = None, -1
            for i in range(len(parts) - 1):
                rr = self.ranks.get(parts[i] + parts[i + 1])
                if rr is not None and (best is None or rr < best):
                    best, best_i = rr, i
            if best is None:
                break
            parts[best_i:best_i + 2] = [parts[best_i] + parts[best_i + 1]]
        return [self.ranks[p] for p in parts]

    def encode_ordinary(self, text):
        out = []
        for m in self.pat.finditer(text):
            piece = m.group(0).encode("utf-8")
            ids = self.cache.get(piece)
            if ids is None:
                ids = self._bpe(piece)
                self.cache[piece] = ids
            out.extend(ids)
        return out

    def encode(self, text, allow_special=True):
        if not allow_special:
            return self.encode_ordinary(text)
        out, pos = [], 0
        for m in self.special_pat.finditer(text):
            out.extend(self.encode_ordinary(text[pos:m.start()]))
            out.append(self.specials[m.group(0)])
            pos = m.end()
        out.extend(self.encode_ordinary(text[pos:]))
        return out

    def decode_bytes(self, ids):
        return b"".join(self.decoder[i] for i in ids)

    def decode(self, ids):
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def default_tokenizer(src=SRC):
    return HyTiktoken(os.path.join(src, "hy.tiktoken"), golden_pat_str(src), special_tokens())


def check_golden(src=SRC):
    """Compare HyTiktoken with the golden tiktoken encodings (A13B's own specials only)."""
    with open(os.path.join(src, "golden_tiktoken_encodings.json"), encoding="utf-8") as f:
        gold = json.load(f)
    tok = default_tokenizer(src)
    bad = 0
    for c in gold["cases"]:
        for key, allow in (("ids_allow_special", True), ("ids_ordinary", False)):
            got = tok.encode(c["text"], allow_special=allow)
            if got != c[key]:
                bad += 1
                print("MISMATCH %s %r\n  got  %s\n  want %s" % (key, c["text"], got, c[key]))
    print("golden check: %d cases, %d mismatches" % (len(gold["cases"]), bad))
    return bad == 0


def tokenizer_config(pat_str, template, model_max_length):
    added = {}
    for t, i in sorted(special_tokens().items(), key=lambda kv: kv[1]):
        added[str(i)] = {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                         "single_word": False, "special": True}
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "vocab_file": "hy.tiktoken",
        "pat_str": pat_str,
        "model_max_length": model_max_length,
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": HY3_SPECIALS[0],
        "eos_token": HY3_SPECIALS[4],
        "pad_token": HY3_SPECIALS[1],
        "clean_up_tokenization_spaces": False,
        "added_tokens_decoder": added,
        "chat_template": template,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=False)
    ap.add_argument("--src", default=SRC)
    ap.add_argument("--template", default=TEMPLATE)
    ap.add_argument("--model-max-length", type=int, default=1024)
    ap.add_argument("--check", action="store_true", help="verify the BPE against the golden encodings")
    ap.add_argument("--no-json", action="store_true", help="do not write tokenizer.json")
    a = ap.parse_args()
    if a.check:
        ok = check_golden(a.src)
        if not a.out:
            sys.exit(0 if ok else 1)
    if not a.out:
        ap.error("--out is required")
    os.makedirs(a.out, exist_ok=True)
    ranks = load_ranks(os.path.join(a.src, "hy.tiktoken"))
    assert len(ranks) == N_RANKS and sorted(ranks.values()) == list(range(N_RANKS)), "unexpected hy.tiktoken"
    shutil.copyfile(os.path.join(a.src, "hy.tiktoken"), os.path.join(a.out, "hy.tiktoken"))
    shutil.copyfile(os.path.join(a.src, "LICENSE"), os.path.join(a.out, "LICENSE"))
    with open(a.template, encoding="utf-8") as f:
        template = f.read()
    with open(os.path.join(a.out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(template)
    cfg = tokenizer_config(golden_pat_str(a.src), template, a.model_max_length)
    with open(os.path.join(a.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
        f.write("\n")
    ids = sorted(int(k) for k in cfg["added_tokens_decoder"])
    print("wrote %s: %d ranks, %d specials (%d..%d)" % (a.out, len(ranks), len(ids), ids[0], ids[-1]))
    if not a.no_json:
        conv = os.path.join(ROOT, "tools", "convert", "tiktoken_to_tokenizer_json.py")
        subprocess.run([sys.executable, conv, "--tiktoken", os.path.join(a.out, "hy.tiktoken"),
                        "--config", os.path.join(a.out, "tokenizer_config.json"),
                        "--out", os.path.join(a.out, "tokenizer.json")], check=True)


if __name__ == "__main__":
    main()
