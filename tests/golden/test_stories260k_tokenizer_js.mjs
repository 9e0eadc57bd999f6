// Optional cross-check of the converted stories260K tokenizer.json with npm @huggingface/tokenizers
// (tokenizers.js, an independent HF implementation): its encode must give the ids of llama2.c run.c's
// encode() (Python re-implementation on tok512.bin, tests/golden/stories260k_ref.py), with BOS, on the
// same texts as test_stories260k_tokenizer.py, and its decode must give the text back. Texts that spell
// "<s>", "</s>" or "<unk>" are tokenized differently on purpose (HF matches special tokens in text,
// run.c does not); for those the ids must equal the Python HF-BPE emulation instead.
// Skips (77) when tests/js/node_modules/@huggingface/tokenizers is not installed.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = process.env.HYINFER_ROOT || path.resolve(here, "..", "..");
const testdata = path.join(root, "tests", "data");
const py = process.env.PYTHON || "/usr/bin/python3";
const data = path.join(testdata, "stories260K");
const modPath = path.join(root, "tests", "js", "node_modules", "@huggingface", "tokenizers", "dist", "tokenizers.mjs");

if (!existsSync(modPath)) {
  console.log(`skip: ${modPath} not installed (npm @huggingface/tokenizers)`);
  process.exit(77);
}
for (const f of ["stories260K.bin", "tok512.bin"]) {
  if (!existsSync(path.join(data, f))) {
    console.log(`FAIL: ${path.join(data, f)} missing (tests/data is part of the repository)`);
    process.exit(1);
  }
}
const { Tokenizer } = await import(pathToFileURL(modPath).href);

const out = path.join(root, "build", "stories260K-hf-jstest");
const golden = path.join(out, "runc_ids.json");
const script = `
import json, os, sys, subprocess
sys.path.insert(0, ${JSON.stringify(here)})
from stories260k_ref import RuncTokenizer, HfBpeTokenizer, test_texts
subprocess.run([sys.executable, ${JSON.stringify(path.join(root, "tools", "convert", "convert_llama2c.py"))},
                "--checkpoint", ${JSON.stringify(path.join(data, "stories260K.bin"))},
                "--tokenizer", ${JSON.stringify(path.join(data, "tok512.bin"))},
                "--out", ${JSON.stringify(out)}], check=True, stdout=subprocess.DEVNULL)
rt = RuncTokenizer(${JSON.stringify(path.join(data, "tok512.bin"))})
texts = test_texts(rt, ${JSON.stringify(path.join(testdata, "corpora", "tinyshakespeare.txt"))})
hf = HfBpeTokenizer(${JSON.stringify(path.join(out, "tokenizer.json"))})
json.dump([{"text": t, "special": any(s in t for s in hf.SPECIAL_STRINGS),
            "ids": hf.encode(t) if any(s in t for s in hf.SPECIAL_STRINGS) else rt.encode(t)} for t in texts],
          open(${JSON.stringify(golden)}, "w"))
`;
const r = spawnSync(py, ["-c", script], { stdio: "inherit" });
if (r.status !== 0) {
  console.log(`FAIL: python helper exited ${r.status}`);
  process.exit(1);
}
const tj = JSON.parse(readFileSync(path.join(out, "tokenizer.json"), "utf8"));
const tc = JSON.parse(readFileSync(path.join(out, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(tj, tc);
const cases = JSON.parse(readFileSync(golden, "utf8"));
let fails = 0;
for (const { text, special, ids } of cases) {
  const got = Array.from(tok.encode(text).ids);
  if (JSON.stringify(got) !== JSON.stringify(ids)) {
    if (++fails <= 10) console.log(`FAIL encode ${JSON.stringify(text)}\n  want ${ids}\n  js   ${got}`);
    continue;
  }
  if (special) continue;
  const back = tok.decode(got, { skip_special_tokens: true });
  if (back !== text) {
    if (++fails <= 10) console.log(`FAIL decode ${JSON.stringify(text)} -> ${JSON.stringify(back)}`);
  }
}
console.log(`${cases.length} texts, ${fails} failures`);
process.exit(fails ? 1 : 0);
