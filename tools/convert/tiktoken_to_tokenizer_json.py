#!/usr/bin/env python3
"""tiktoken_to_tokenizer_json.py - converts a tiktoken BPE file into an equivalent Hugging Face
tokenizer.json (byte-level BPE).

Usage (stable CLI; other tools call it):
    /usr/bin/python3 tools/convert/tiktoken_to_tokenizer_json.py --tiktoken hy.tiktoken \
        --config tokenizer_config.json --out tokenizer.json [--pat-str REGEX]

Inputs:
  --tiktoken  lines "base64(token bytes) rank"; the rank is the token id.
  --config    tokenizer_config.json. Used keys:
                "pat_str"               the pre-tokenizer split regex (else --pat-str, else the
                                        Hunyuan PAT_STR of tokenization_hy.py);
                "added_tokens_decoder"  {"id": {"content": "...", "special": true, "lstrip": ...}}
                                        -> added_tokens (every entry, in id order);
                "add_bos_token" + "bos_token"  -> a TemplateProcessing post_processor that
                                        prepends BOS (omitted when add_bos_token is not true).
  --out       the tokenizer.json to write (UTF-8, ensure_ascii=False).

Output: model BPE with the vocab in the GPT-2 byte->unicode surface form, "ignore_merges": true
(a piece that is itself a token is not split, as tiktoken does), merges derived from the ranks:
every split of a token into two tokens (left + right), ordered by the rank of the merged token,
then by the left and right ranks. pre_tokenizer Sequence[Split(Regex pat_str, Isolated),
ByteLevel(add_prefix_space false, use_regex false)], decoder ByteLevel, normalizer null.
With these, HF BPE (merge the lowest-priority adjacent pair, leftmost first) makes the same
choices as tiktoken (merge the adjacent pair whose concatenation has the lowest rank).
Exit status 0, or 1 with a message naming the file on bad input.
"""
import argparse
import base64
import json
import sys

HY_DEFAULT_PAT_STR = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                      r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode character table."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
          + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def read_tiktoken(path):
    ranks = {}
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                raise ValueError(f"{path}:{lineno}: expected \"base64 rank\"")
            try:
                tok = base64.b64decode(parts[0], validate=True)
                rank = int(parts[1])
            except Exception as e:  # noqa: BLE001 - report any decoding problem with its line
                raise ValueError(f"{path}:{lineno}: {e}") from None
            if tok in ranks:
                raise ValueError(f"{path}:{lineno}: token appears twice")
            ranks[tok] = rank
    if not ranks:
        raise ValueError(f"{path}: no tokens")
    return ranks


def derive_merges(ranks):
    merges = []
    for tok, rank in ranks.items():
        if len(tok) < 2:
            continue
        local = []
        for k in range(1, len(tok)):
            left, right = tok[:k], tok[k:]
            rl, rr = ranks.get(left), ranks.get(right)
            if rl is not None and rr is not None:
                local.append((rank, rl, rr, left, right))
        merges.extend(local)
    merges.sort(key=lambda m: (m[0], m[1], m[2]))
    return merges


def convert(tiktoken_path, config_path, pat_str=None):
    ranks = read_tiktoken(tiktoken_path)
    cfg = {}
    if config_path:
        with open(config_path, "r", encoding="utf-8") as f:
            try:
                cfg = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{config_path}: invalid JSON: {e}") from None
        if not isinstance(cfg, dict):
            raise ValueError(f"{config_path}: top level is not an object")
    pat = cfg.get("pat_str") or pat_str or HY_DEFAULT_PAT_STR
    b2u = bytes_to_unicode()

    def surf(b):
        return "".join(b2u[x] for x in b)

    vocab = {surf(tok): rank for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1])}
    merges = [f"{surf(l)} {surf(r)}" for _, _, _, l, r in derive_merges(ranks)]

    added = []
    atd = cfg.get("added_tokens_decoder") or {}
    if not isinstance(atd, dict):
        raise ValueError(f"{config_path}: added_tokens_decoder is not an object")
    for key, tok in sorted(atd.items(), key=lambda kv: int(kv[0])):
        if not isinstance(tok, dict) or "content" not in tok:
            raise ValueError(f"{config_path}: added_tokens_decoder[{key!r}] has no content")
        added.append({
            "id": int(key), "content": tok["content"],
            "single_word": bool(tok.get("single_word", False)),
            "lstrip": bool(tok.get("lstrip", False)), "rstrip": bool(tok.get("rstrip", False)),
            "normalized": bool(tok.get("normalized", False)),
            "special": bool(tok.get("special", True)),
        })

    post = None
    if cfg.get("add_bos_token") is True:
        bos = cfg.get("bos_token")
        if isinstance(bos, dict):
            bos = bos.get("content")
        ids = [a["id"] for a in added if a["content"] == bos]
        if not ids:
            raise ValueError(f"{config_path}: add_bos_token is true but bos_token {bos!r} "
                             "is not in added_tokens_decoder")
        post = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [ids[0]], "tokens": [bos]}},
        }

    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pat}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False},
        ]},
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None,
            "continuing_subword_prefix": None, "end_of_word_suffix": None,
            "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
            "vocab": vocab, "merges": merges,
        },
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiktoken", required=True, help="tiktoken rank file (base64 rank lines)")
    ap.add_argument("--config", help="tokenizer_config.json (pat_str, added_tokens_decoder, add_bos_token)")
    ap.add_argument("--out", required=True, help="tokenizer.json to write")
    ap.add_argument("--pat-str", help="split regex when the config has no pat_str")
    a = ap.parse_args(argv)
    try:
        tj = convert(a.tiktoken, a.config, a.pat_str)
    except (OSError, ValueError) as e:
        print(f"tiktoken_to_tokenizer_json: {e}", file=sys.stderr)
        return 1
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {a.out}: {len(tj['model']['vocab'])} tokens, {len(tj['model']['merges'])} merges, "
          f"{len(tj['added_tokens'])} added tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
