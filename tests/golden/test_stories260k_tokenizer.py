"""stories260K tokenizer conversion: tools/convert/convert_llama2c.py's tokenizer.json must encode exactly like
llama2.c run.c's encode() on tok512.bin, and decode back like run.c prints.

Both sides are independent Python re-implementations (tests/golden/stories260k_ref.py): run.c's
score-greedy merge loop reading tok512.bin directly, and an HF-tokenizers-style BPE (rank-ordered
merges, byte_fallback, Prepend/Replace normalizer, Replace/ByteFallback/Fuse/Strip decoder) reading
only the converted tokenizer.json. Texts: fixed strings, the first 100 lines of tinyshakespeare (one by
one and in 5-line chunks), and 300 seeded random strings glued from vocabulary pieces, spaces,
punctuation and non-ASCII characters (byte fallback).
Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from stories260k_ref import RuncTokenizer, HfBpeTokenizer, test_texts  # noqa: E402

ROOT = os.environ.get("HYINFER_ROOT", os.path.dirname(os.path.dirname(HERE)))
DATA = os.path.join(ROOT, "tests", "data", "stories260K")
CORPUS = os.path.join(ROOT, "tests", "data", "corpora", "tinyshakespeare.txt")
OUT = os.path.join(ROOT, "build", "stories260K-hf-toktest")


def main():
    for p in (os.path.join(DATA, "stories260K.bin"), os.path.join(DATA, "tok512.bin"), CORPUS):
        if not os.path.exists(p):
            print(f"FAIL: {p} missing (tests/data is part of the repository)")
            return 1
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert", "convert_llama2c.py"),
                    "--checkpoint", os.path.join(DATA, "stories260K.bin"),
                    "--tokenizer", os.path.join(DATA, "tok512.bin"), "--out", OUT], check=True)
    rt = RuncTokenizer(os.path.join(DATA, "tok512.bin"))
    hf = HfBpeTokenizer(os.path.join(OUT, "tokenizer.json"))
    fails = 0

    # structure of the converted files
    tj = json.load(open(os.path.join(OUT, "tokenizer.json"), encoding="utf-8"))
    tc = json.load(open(os.path.join(OUT, "tokenizer_config.json"), encoding="utf-8"))
    vocab = tj["model"]["vocab"]
    checks = [
        (len(vocab) == len(rt.vocab), "vocab size"),
        ([vocab.get(t) for t in ("<unk>", "<s>", "</s>", "<0x00>", "<0xFF>", "\u2581", "\u2581Once")]
         == [0, 1, 2, 3, 258, 410, 403], "special/byte/space ids"),
        (all(vocab[t.decode("utf-8").replace(" ", "\u2581")] == i for i, t in enumerate(rt.vocab) if i >= 3),
         "vocab strings = tok512 strings with ' ' -> '\u2581'"),
        ([a["content"] for a in tj["added_tokens"]] == ["<unk>", "<s>", "</s>"], "added_tokens"),
        (tc["add_bos_token"] is True and tc["bos_token"] == "<s>" and tc["eos_token"] == "</s>", "tokenizer_config"),
    ]
    for ok, what in checks:
        if not ok:
            print("FAIL structure:", what)
            fails += 1

    texts = test_texts(rt, CORPUS)
    # Known, intended difference: HF tokenizers (and so the engine) turn "<s>", "</s>", "<unk>" written
    # in the text into the special ids, run.c spells them out; texts holding them are compared apart.
    sp_text = "x <s> </s>y<unk>"
    got = hf.encode(sp_text)
    if got != [1] + hf.encode("x ", False) + [1] + hf.encode(" ", False) + [2] + hf.encode("y", False) + [0]:
        fails += 1
        print(f"FAIL special tokens in text: {got}")
    texts = [t for t in texts if not any(s in t for s in HfBpeTokenizer.SPECIAL_STRINGS)]

    n_ids = 0
    for t in texts:
        a, b = rt.encode(t), hf.encode(t)
        n_ids += len(a)
        if a != b:
            fails += 1
            if fails <= 10:
                print(f"FAIL encode {t!r}\n  run.c {a}\n  hf    {b}")
            continue
        # decode: HF decoder pipeline == original text; run.c's printed bytes == text + "\n"
        # minus what run.c's safe_printf drops: it prints byte-fallback tokens one byte at a time and
        # skips each byte that is neither printable ASCII nor whitespace, so a character that is not
        # itself a vocab token is lost unless it is ASCII.
        d = hf.decode(b)
        if d != t:
            fails += 1
            print(f"FAIL hf decode {t!r} -> {d!r}")
        printed = rt.stdout_of(a)
        want = b"".join(ch.encode() if ch.encode() in rt.lookup
                        else bytes(c for c in ch.encode() if 0x20 <= c < 0x7F or c in b" \t\n\v\f\r")
                        for ch in t) + b"\n"
        if printed != want:
            fails += 1
            print(f"FAIL run.c decode {t!r} -> {printed!r}")
    print(f"{len(texts)} texts, {n_ids} ids compared, {fails} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
