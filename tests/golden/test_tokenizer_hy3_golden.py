"""hy3-golden-b tokenizer (Split x3 + ByteLevel, add_bos_token true): every golden prompt encodes
to golden.json's prompt_ids (BOS 471 prepended per the BOS policy), and decodes back."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tok_common as tc  # noqa: E402

golden_path = os.path.join(tc.TESTDATA, "hy3-golden-llamacpp", "golden.json")
if not os.path.isfile(golden_path):
    tc.fail("no %s (tests/data is part of the repository)" % golden_path)
tc.build_driver()
with open(golden_path, encoding="utf-8") as f:
    golden = json.load(f)
cases = golden["cases"]
strings = tc.write_json("hy3b_prompts.json", [c["prompt"] for c in cases])
bad = 0
for load in (["--dir", tc.HY3B], ["--json", os.path.join(tc.HY3B, "tokenizer.json")]):
    info = tc.driver(*load, "info")
    if info["bos"] != 471 or info["vocab_size"] != 480:
        bad += 1
        print("INFO %s: %s, want bos 471, vocab 480" % (load, info))
    out = tc.driver(*load, "encode-list", strings)
    if len(out) != len(cases):
        tc.fail("%d results for %d prompts" % (len(out), len(cases)))
    for c, r in zip(cases, out):
        got = [info["bos"]] + r["special"]
        if got != c["prompt_ids"] or not r["roundtrip"] or not r["stream_ok"]:
            bad += 1
            print("MISMATCH %r\n  want %s\n  got  %s" % (c["prompt"], c["prompt_ids"], got))
    print("%s: %d prompts checked" % (load[0], len(cases)))
if len(cases) != 6:
    tc.fail("expected 6 golden cases, found %d" % len(cases))
if bad:
    tc.fail("%d mismatches" % bad)
print("PASS")
