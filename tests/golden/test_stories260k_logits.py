"""stories260K through the C engine, tokenizer left out (test_stories260k.sh covers text in/out):

1. `hyinfer logits --prompt-ids <run.c's greedy sequence> --all-positions --dtype float32 --json` on the
   converted model must match a numpy fp32 model of run.c on the original llama2.c weights
   (tests/golden/stories260k_ref.py) at every position: max abs diff < 1e-3, same argmax.
2. `hyinfer generate --prompt-ids 1,403,407,261,378 -n 252 --temperature 0 --dtype float32 --print-ids`
   must print exactly run.c's greedy continuation ids (reference case 4, as ids).
Exit 0 pass, else fail.
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("HYINFER_ROOT", os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
sys.path.insert(0, os.path.join(ROOT, "tools", "convert"))
from stories260k_ref import RuncTokenizer, RuncModel, runc_generate  # noqa: E402
import convert_llama2c  # noqa: E402

DATA = os.path.join(ROOT, "tests", "data", "stories260K")
OUT = os.path.join(ROOT, "build", "stories260K-hf-logitstest")
BIN = os.path.join(ROOT, "build", "hyinfer")


def main():
    ckpt, tok = os.path.join(DATA, "stories260K.bin"), os.path.join(DATA, "tok512.bin")
    for p in (ckpt, tok):
        if not os.path.exists(p):
            print(f"FAIL: {p} missing (tests/data is part of the repository)")
            return 1
    if not os.access(BIN, os.X_OK):
        print(f"FAIL: {BIN} not built (run make)")
        return 1
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert", "convert_llama2c.py"), "--checkpoint", ckpt,
                    "--tokenizer", tok, "--out", OUT], check=True)
    cfg, w = convert_llama2c.read_checkpoint(ckpt)
    prompt = RuncTokenizer(tok).encode("Once upon a time")
    assert prompt == [1, 403, 407, 261, 378], prompt
    ids, logits = runc_generate(RuncModel(cfg, w), prompt, 256)  # reference case 4
    assert len(ids) == 257
    fails = 0

    feed = ids[:200]
    r = subprocess.run([BIN, "logits", "-m", OUT, "--prompt-ids", ",".join(map(str, feed)), "--all-positions",
                        "--dtype", "float32", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL: hyinfer logits exited {r.returncode}: {r.stderr[-2000:]}")
        fails += 1
    else:
        got = np.array(json.loads(r.stdout)["logits"], dtype=np.float32)
        want = np.stack(logits[:len(feed)])
        if got.shape != want.shape:
            print(f"FAIL: logits shape {got.shape}, want {want.shape}")
            fails += 1
        else:
            diff = np.abs(got - want).max(axis=1)
            same = (got.argmax(axis=1) == want.argmax(axis=1))
            print(f"logits over {len(feed)} positions: max abs diff {diff.max():.3e} (at position "
                  f"{int(diff.argmax())}), argmax agrees at {int(same.sum())}/{len(feed)}")
            if diff.max() >= 1e-3 or not same.all():
                fails += 1
                print("FAIL: engine logits differ from the run.c model")

    n_new = 256 - len(prompt) + 1
    r = subprocess.run([BIN, "generate", "-m", OUT, "--prompt-ids", ",".join(map(str, prompt)), "-n", str(n_new),
                        "--temperature", "0", "--dtype", "float32", "--print-ids"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL: hyinfer generate exited {r.returncode}: {r.stderr[-2000:]}")
        fails += 1
    else:
        got = json.loads(r.stdout.strip().splitlines()[-1])
        want = ids[len(prompt):]
        k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        if got != want:
            print(f"FAIL: generated ids differ from run.c at new token {k} (got {len(got)}, want {len(want)})\n"
                  f"  got  {got[max(0, k - 3):k + 5]}\n  want {want[max(0, k - 3):k + 5]}")
            fails += 1
        else:
            print(f"generate --prompt-ids: {len(got)} greedy ids identical to run.c")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
