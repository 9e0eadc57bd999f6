"""Longest verbatim overlap (in characters) between generated completions and the training text.

Usage: /usr/bin/python3 experiments/verbatim_overlap.py --completions OUT.json [--corpus FILE] [--train-frac 0.9]
OUT.json is what `hyinfer run` writes to model_config.output_path (a list of {prompt, completion}).
The training text is the first train-frac of the corpus by characters (as tools/make/train_tiny_hy3.py
splits it). For each completion it prints the longest substring that also occurs in the training
text, and the overall maximum: a measure of memorisation vs generalisation.
"""
import argparse
import json
import os


def longest_common(s, text):
    """Longest substring of s found in text (greedy extension from every start; O(len(s)^2) finds)."""
    best = ""
    for i in range(len(s)):
        j = i + len(best) + 1
        if j > len(s):
            break
        while j <= len(s) and s[i:j] in text:
            best = s[i:j]
            j += 1
    return best


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--completions", required=True)
    ap.add_argument("--corpus", default=os.path.join(here, "..", "tests", "data", "corpora", "tinyshakespeare.txt"))
    ap.add_argument("--train-frac", type=float, default=0.9)
    a = ap.parse_args()
    corpus = open(a.corpus, encoding="utf-8").read()
    train = corpus[:int(len(corpus) * a.train_frac)]
    rows = json.load(open(a.completions, encoding="utf-8"))
    overall = 0
    for r in rows:
        best = longest_common(r["completion"], train)
        overall = max(overall, len(best))
        print(f"{len(best):4d} chars  {r['prompt'][:30]!r:34} longest shared: {best!r}")
    total = sum(len(r["completion"]) for r in rows)
    print(f"longest verbatim overlap with the training text: {overall} characters "
          f"(over {len(rows)} completions, {total} characters generated)")


if __name__ == "__main__":
    main()
