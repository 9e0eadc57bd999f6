"""Hunyuan-A13B hy.tiktoken: every golden case (ids_allow_special and ids_ordinary, made by the
reference tiktoken encoder) through (1) the tiktoken loader, (2) the tokenizer.json written by
tools/convert/tiktoken_to_tokenizer_json.py from the same files, (3) hy_tokenizer_load_dir on a directory
holding both files, (4) hy_tokenizer_load_dir on the shared A13B directory as it is (remote-code
HYTokenizer: default pat_str and specials). Then 50 kB and the whole of tinyshakespeare both ways:
identical ids, byte-exact decode. Prints the encode speed."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tok_common as tc  # noqa: E402

if not os.path.isfile(os.path.join(tc.A13B, "hy.tiktoken")):
    tc.fail("no %s/hy.tiktoken (tests/data is part of the repository)" % tc.A13B)
tc.build_driver()
golden, cfg = tc.a13b_config()
tj = tc.convert_a13b(cfg)
both = os.path.join(tc.WORK, "a13b")  # tokenizer.json + tokenizer_config.json + hy.tiktoken
link = os.path.join(both, "hy.tiktoken")
if not os.path.exists(link):
    os.symlink(os.path.join(tc.A13B, "hy.tiktoken"), link)

cases = golden["cases"]
if len(cases) < 10:
    tc.fail("golden file has only %d cases" % len(cases))
strings = tc.write_json("a13b_golden_strings.json", [c["text"] for c in cases])
loaders = {
    "tiktoken": ["--tiktoken", os.path.join(tc.A13B, "hy.tiktoken"), "--config", cfg],
    "converted-json": ["--json", tj],
    "dir-with-both": ["--dir", both],
    "shared-dir-as-is": ["--dir", tc.A13B],
}
bad = 0
for name, load in loaders.items():
    out = tc.driver(*load, "encode-list", strings)
    if len(out) != len(cases):
        tc.fail("%s: %d results for %d strings" % (name, len(out), len(cases)))
    for c, r in zip(cases, out):
        for gk, rk in (("ids_allow_special", "special"), ("ids_ordinary", "ordinary")):
            if c[gk] != r[rk]:
                bad += 1
                print("MISMATCH %s %s %r\n  want %s\n  got  %s" % (name, gk, c["text"][:60], c[gk][:30], r[rk][:30]))
        if not r["roundtrip"] or not r["stream_ok"]:
            bad += 1
            print("DECODE %s %r roundtrip=%s stream_ok=%s" % (name, c["text"][:60], r["roundtrip"], r["stream_ok"]))
    print("%-17s %d golden cases checked" % (name, len(cases)))
    info = tc.driver(*load, "info")
    if info["vocab_size"] != 128167 or info["bos"] != -1:
        bad += 1
        print("INFO %s: %s (want vocab_size 128167, bos -1)" % (name, info))
# the special-token case really differs between the two modes
if not any(c["ids_allow_special"] != c["ids_ordinary"] for c in cases):
    tc.fail("golden file has no case where specials matter")

# the varied strings of the npm test and seeded random byte soups: the tiktoken loader and the
# converted tokenizer.json must agree everywhere, not only on the golden cases
import random  # noqa: E402
rng = random.Random(7)
alphabet = "ab  \n\t'sSllL0123456789.,!?-你好世界é😀\u3000\r"
soups = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 200))) for _ in range(300)]
extra = tc.write_json("a13b_extra_strings.json", tc.STRINGS + soups)
a = tc.driver(*loaders["tiktoken"], "encode-list", extra)
b = tc.driver(*loaders["converted-json"], "encode-list", extra)
for s_, x, y in zip(tc.STRINGS + soups, a, b):
    if x["special"] != y["special"] or x["ordinary"] != y["ordinary"] or not x["roundtrip"] or not y["roundtrip"]:
        bad += 1
        print("LOADERS DIFFER %r" % s_[:60])
print("%d extra strings: tiktoken loader == converted tokenizer.json" % len(a))

corpus = os.path.join(tc.TESTDATA, "corpora", "tinyshakespeare.txt")
for limit in ("50000", "0"):
    args = ["encode-file", corpus] + ([limit] if limit != "0" else [])
    a = tc.driver(*loaders["tiktoken"], *args)
    b = tc.driver(*loaders["converted-json"], *args)
    if a["ids"] != b["ids"] or not a["roundtrip"] or not b["roundtrip"] or len(a["ids"]) < a["bytes"] // 8:
        bad += 1
        print("CORPUS %s: %d vs %d ids, roundtrip %s/%s" % (limit, len(a["ids"]), len(b["ids"]), a["roundtrip"], b["roundtrip"]))
    print("tinyshakespeare %7d bytes -> %6d ids, identical both ways; encode MB/s per CPU second (wall): "
          "%.1f (%.1f) tiktoken, %.1f (%.1f) tokenizer.json"
          % (a["bytes"], len(a["ids"]), a["bytes"] / max(a["cpu_seconds"], 1e-9) / 1e6,
             a["bytes"] / max(a["seconds"], 1e-9) / 1e6, b["bytes"] / max(b["cpu_seconds"], 1e-9) / 1e6,
             b["bytes"] / max(b["seconds"], 1e-9) / 1e6))
if bad:
    tc.fail("%d mismatches" % bad)
print("PASS")
