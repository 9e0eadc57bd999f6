// ref_encode.mjs - reference ids from tokenizers.js (npm @huggingface/tokenizers) for hyinfer's
// tokenizer tests.
//   node tests/js/ref_encode.mjs TOKENIZER_JSON CONFIG_JSON|- STRINGS_JSON
// prints a JSON array, one object per input string:
//   {"ids": encode(s, add_special_tokens=false).ids, "ids_bos": encode(s, add_special_tokens=true).ids,
//    "decoded": decode(ids)}
// Also: node tests/js/ref_encode.mjs --locate PACKAGE  prints the path of PACKAGE/models/tokenizer.json.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";

const args = process.argv.slice(2);
if (args[0] === "--locate") {
  const require = createRequire(import.meta.url);
  console.log(dirname(require.resolve(`${args[1]}/models/tokenizer.json`)));
  process.exit(0);
}
if (args.length !== 3) {
  console.error("usage: ref_encode.mjs TOKENIZER_JSON CONFIG_JSON|- STRINGS_JSON");
  process.exit(2);
}
const tj = JSON.parse(readFileSync(args[0], "utf8"));
const cfg = args[1] === "-" ? {} : JSON.parse(readFileSync(args[1], "utf8"));
const strings = JSON.parse(readFileSync(args[2], "utf8"));
const tok = new Tokenizer(tj, cfg);
const out = strings.map((s) => {
  const ids = tok.encode(s, { add_special_tokens: false }).ids;
  const idsBos = tok.encode(s, { add_special_tokens: true }).ids;
  return { ids, ids_bos: idsBos, decoded: ids.length ? tok.decode(ids) : "" };
});
process.stdout.write(JSON.stringify(out) + "\n");
