#!/usr/bin/python3
"""Convert a llama2.c checkpoint (+ its tokenizer .bin) into a Hugging Face style Llama directory.

Usage:
  /usr/bin/python3 tools/convert/convert_llama2c.py --checkpoint stories260K.bin --tokenizer tok512.bin --out DIR

Writes DIR/config.json, DIR/generation_config.json, DIR/model.safetensors (F32),
DIR/tokenizer.json, DIR/tokenizer_config.json.

Checkpoint (llama2.c "legacy" format, what run.c reads): 7 little-endian int32
  dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (> 0: classifier shared with the
  token embedding; < 0: separate classifier stored at the end), seq_len
then float32 arrays, each row-major [out, in] like torch nn.Linear weights:
  token_embedding [vocab, dim], rms_att [L, dim], wq [L, dim, dim], wk [L, kv_dim, dim],
  wv [L, kv_dim, dim], wo [L, dim, dim], rms_ffn [L, dim], w1 [L, hidden, dim], w2 [L, dim, hidden],
  w3 [L, hidden, dim], rms_final [dim], freq_cis_real [seq_len, head/2], freq_cis_imag [same],
  (wcls [vocab, dim] if vocab_size < 0).
run.c's FFN is w2(silu(w1 x) * w3 x), so w1 -> gate_proj, w3 -> up_proj, w2 -> down_proj.

RoPE: run.c rotates interleaved pairs (i, i+1), i even, of q/k with frequency
  1 / 10000^((i % head_size) / head_size); inside a head i % head_size = 2m, so pair m turns at
  10000^(-2m/head_size), which is exactly HF's inv_freq[m] = 1 / base^(arange(0, head_size, 2)[m] / head_size). HF Llama (and the
engine) rotate NeoX pairs (m, m + head_size/2) with inv_freq[m]. So we permute the rows of wq and wk
within each head: new row r*head_size/2 + m <- old row 2m + r (r in {0, 1}). Then the NeoX rotation of
the permuted q/k equals the permuted interleaved rotation, and since q.k is invariant under applying the
same permutation to both, attention scores are unchanged. wv/wo are not touched.

Tokenizer (llama2.c format): int32 max_token_length, then per token: float32 score, int32 len, bytes.
llama2.c stored '▁' as ' ' and ids 1/2 as "\\n<s>\\n" / "\\n</s>\\n"; we write the SentencePiece-style
strings back. run.c encodes by: dummy-prefix " " (non-empty text only), one token per UTF-8 codepoint
(else byte tokens id = byte + 3), then repeatedly merge the adjacent pair whose concatenation is a vocab
token with the highest score (leftmost on ties). The HF BPE model reproduces that with merges
ordered by the merged token's score, highest first (see build_merges).

Stopping: run.c stops when it samples BOS (id 1); the TinyStories models were trained with BOS between
stories and no EOS. generation_config.json therefore lists eos_token_id [1, 2]: 1 makes an engine stop
exactly where run.c stops, 2 keeps the usual </s> meaning (never produced by these models in practice).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import safetensors_np  # noqa: E402

SPACE = "\u2581"  # '▁'
LLAMA2C_MAGIC = 0x616B3432  # "ak42": the newer versioned export, not supported here


class ConvertError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# checkpoint

def read_checkpoint(path):
    """Returns (cfg dict, dict of numpy float32 arrays in llama2.c naming/shapes)."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 28:
        raise ConvertError(f"{path}: too short for a llama2.c header ({len(buf)} bytes)")
    hdr = struct.unpack_from("<7i", buf, 0)
    if hdr[0] == LLAMA2C_MAGIC:
        raise ConvertError(f"{path}: versioned llama2.c export (magic ak42) is not supported; "
                           "use the legacy format run.c reads")
    dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len = hdr
    shared = vocab > 0
    vocab = abs(vocab)
    for name, v in (("dim", dim), ("hidden_dim", hidden), ("n_layers", n_layers), ("n_heads", n_heads),
                    ("n_kv_heads", n_kv_heads), ("vocab_size", vocab), ("seq_len", seq_len)):
        if v <= 0 or v > 1 << 24:
            raise ConvertError(f"{path}: header {name} = {v} out of range")
    if dim % n_heads:
        raise ConvertError(f"{path}: dim {dim} not divisible by n_heads {n_heads}")
    if n_heads % n_kv_heads:
        raise ConvertError(f"{path}: n_heads {n_heads} not divisible by n_kv_heads {n_kv_heads}")
    head = dim // n_heads
    if head % 2:
        raise ConvertError(f"{path}: head size {head} is odd, RoPE needs pairs")
    kv_dim = n_kv_heads * head
    L = n_layers
    layout = [
        ("token_embedding", (vocab, dim)),
        ("rms_att", (L, dim)),
        ("wq", (L, dim, dim)),
        ("wk", (L, kv_dim, dim)),
        ("wv", (L, kv_dim, dim)),
        ("wo", (L, dim, dim)),
        ("rms_ffn", (L, dim)),
        ("w1", (L, hidden, dim)),
        ("w2", (L, dim, hidden)),
        ("w3", (L, hidden, dim)),
        ("rms_final", (dim,)),
        ("freq_cis_real", (seq_len, head // 2)),
        ("freq_cis_imag", (seq_len, head // 2)),
    ]
    if not shared:
        layout.append(("wcls", (vocab, dim)))
    need = 28 + 4 * sum(int(np.prod(s)) for _, s in layout)
    if len(buf) != need:
        raise ConvertError(f"{path}: size {len(buf)} bytes, header implies {need}")
    off = 28
    w = {}
    for name, shape in layout:
        n = int(np.prod(shape))
        w[name] = np.frombuffer(buf, dtype="<f4", count=n, offset=off).reshape(shape).astype(np.float32)
        off += 4 * n
    cfg = dict(dim=dim, hidden_dim=hidden, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads,
               vocab_size=vocab, seq_len=seq_len, shared_classifier=shared, head_size=head)
    return cfg, w


def interleaved_to_neox(w, n_heads):
    """Rows of a [n_heads*head, in] projection: per head, old row 2m+r -> new row r*head/2 + m."""
    rows, cols = w.shape
    head = rows // n_heads
    return w.reshape(n_heads, head // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols).copy()


def hf_tensors(cfg, w):
    """List of (name, "F32", array) in HF Llama naming."""
    out = [("model.embed_tokens.weight", "F32", w["token_embedding"])]
    for l in range(cfg["n_layers"]):
        p = f"model.layers.{l}."
        out += [
            (p + "input_layernorm.weight", "F32", w["rms_att"][l]),
            (p + "self_attn.q_proj.weight", "F32", interleaved_to_neox(w["wq"][l], cfg["n_heads"])),
            (p + "self_attn.k_proj.weight", "F32", interleaved_to_neox(w["wk"][l], cfg["n_kv_heads"])),
            (p + "self_attn.v_proj.weight", "F32", w["wv"][l]),
            (p + "self_attn.o_proj.weight", "F32", w["wo"][l]),
            (p + "post_attention_layernorm.weight", "F32", w["rms_ffn"][l]),
            (p + "mlp.gate_proj.weight", "F32", w["w1"][l]),
            (p + "mlp.up_proj.weight", "F32", w["w3"][l]),
            (p + "mlp.down_proj.weight", "F32", w["w2"][l]),
        ]
    out.append(("model.norm.weight", "F32", w["rms_final"]))
    if not cfg["shared_classifier"]:
        out.append(("lm_head.weight", "F32", w["wcls"]))
    return out


def check_freq_cis(cfg, w):
    """The stored freq_cis tables must be what NeoX RoPE with theta 10000 computes (else refuse)."""
    head = cfg["head_size"]
    inv = 1.0 / (10000.0 ** (np.arange(0, head, 2, dtype=np.float64) / head))
    ang = np.arange(cfg["seq_len"], dtype=np.float64)[:, None] * inv[None, :]
    if not (np.allclose(w["freq_cis_real"], np.cos(ang), atol=2e-3)
            and np.allclose(w["freq_cis_imag"], np.sin(ang), atol=2e-3)):
        raise ConvertError("checkpoint freq_cis tables do not match rope_theta 10000")


def hf_config(cfg):
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": cfg["dim"],
        "intermediate_size": cfg["hidden_dim"],
        "num_hidden_layers": cfg["n_layers"],
        "num_attention_heads": cfg["n_heads"],
        "num_key_value_heads": cfg["n_kv_heads"],
        "head_dim": cfg["head_size"],
        "vocab_size": cfg["vocab_size"],
        "max_position_embeddings": cfg["seq_len"],
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": bool(cfg["shared_classifier"]),
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "float32",
        "use_cache": True,
    }


def generation_config():
    # eos 1 (= BOS): run.c ends a sample when it draws BOS; see the module docstring.
    return {"bos_token_id": 1, "eos_token_id": [1, 2]}


# ---------------------------------------------------------------------------------------------
# tokenizer

def read_llama2c_tokenizer(path, vocab_size):
    """Returns (max_token_length, list of raw byte strings, list of float scores)."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 4:
        raise ConvertError(f"{path}: too short")
    (max_len,) = struct.unpack_from("<i", buf, 0)
    off, pieces, scores = 4, [], []
    while off < len(buf):
        if off + 8 > len(buf):
            raise ConvertError(f"{path}: truncated entry {len(pieces)} at byte {off}")
        score, n = struct.unpack_from("<fi", buf, off)
        off += 8
        if n < 0 or n > max_len or off + n > len(buf):
            raise ConvertError(f"{path}: entry {len(pieces)} has bad length {n}")
        pieces.append(buf[off:off + n])
        scores.append(score)
        off += n
    if len(pieces) != vocab_size:
        raise ConvertError(f"{path}: {len(pieces)} tokens, checkpoint vocab_size is {vocab_size}")
    return max_len, pieces, scores


def hf_vocab_strings(raw):
    """llama2.c byte strings -> SentencePiece piece strings ('▁' for space, specials restored)."""
    if len(raw) < 3 + 256:
        raise ConvertError(f"tokenizer has {len(raw)} tokens, need <unk>,<s>,</s> and 256 byte tokens")
    out = []
    for i, b in enumerate(raw):
        if i == 0:
            s = "<unk>"
        elif i == 1:
            s = "<s>"
        elif i == 2:
            s = "</s>"
        else:
            try:
                s = b.decode("utf-8")
            except UnicodeDecodeError:
                raise ConvertError(f"tokenizer entry {i} is not UTF-8: {b!r}")
            if 3 <= i < 259 and s != "<0x%02X>" % (i - 3):
                raise ConvertError(f"tokenizer entry {i} is {s!r}, expected byte token <0x{i - 3:02X}>")
            s = s.replace(" ", SPACE)
        out.append(s)
    seen = {}
    for i, s in enumerate(out):
        if s in seen:
            raise ConvertError(f"tokenizer entries {seen[s]} and {i} are both {s!r}")
        seen[s] = i
    return out


def build_merges(pieces, scores):
    """All pairs (a, b) of ordinary vocab pieces with a+b an ordinary vocab piece, ordered by the merged
    piece's score descending, then merged id ascending, then split position ascending.

    HF BPE applies the lowest-rank adjacent pair first, so this order is run.c's "highest score" rule.
    Ordinary = not <unk>/<s>/</s> and not a <0xXX> byte token (run.c can never build those by merging
    text, and they never take part in a merge whose concatenation is in the vocabulary)."""
    ordinary = {s: i for i, s in enumerate(pieces) if i >= 259}
    cand = []
    for s, i in ordinary.items():
        for k in range(1, len(s)):
            a, b = s[:k], s[k:]
            if a in ordinary and b in ordinary:
                cand.append((-scores[i], i, k, a, b))
    cand.sort(key=lambda t: (t[0], t[1], t[2]))
    return [(a, b) for _, _, _, a, b in cand]


def tokenizer_json(pieces, scores):
    merges = build_merges(pieces, scores)
    for a, b in merges:
        if " " in a or " " in b:
            raise ConvertError(f"merge piece contains a space: {a!r} {b!r}")
    specials = [(0, "<unk>"), (1, "<s>"), (2, "</s>")]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, c in specials],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
        ]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ]},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": False,
            "vocab": {s: i for i, s in enumerate(pieces)},
            "merges": [f"{a} {b}" for a, b in merges],
        },
    }


def tokenizer_config(seq_len):
    return {
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": None,
        "clean_up_tokenization_spaces": False,
        "legacy": True,
        "model_max_length": seq_len,
        "tokenizer_class": "LlamaTokenizer",
        "added_tokens_decoder": {str(i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": True}
                                 for i, c in ((0, "<unk>"), (1, "<s>"), (2, "</s>"))},
    }


# ---------------------------------------------------------------------------------------------

def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def convert(checkpoint, tokenizer, out_dir):
    cfg, w = read_checkpoint(checkpoint)
    check_freq_cis(cfg, w)
    _, raw, scores = read_llama2c_tokenizer(tokenizer, cfg["vocab_size"])
    pieces = hf_vocab_strings(raw)
    os.makedirs(out_dir, exist_ok=True)
    write_json(os.path.join(out_dir, "config.json"), hf_config(cfg))
    write_json(os.path.join(out_dir, "generation_config.json"), generation_config())
    safetensors_np.save(os.path.join(out_dir, "model.safetensors"), hf_tensors(cfg, w),
                        metadata={"format": "pt", "source": "llama2.c " + os.path.basename(checkpoint)})
    write_json(os.path.join(out_dir, "tokenizer.json"), tokenizer_json(pieces, scores))
    write_json(os.path.join(out_dir, "tokenizer_config.json"), tokenizer_config(cfg["seq_len"]))
    return cfg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True, help="llama2.c model .bin (legacy format)")
    ap.add_argument("--tokenizer", required=True, help="llama2.c tokenizer .bin (e.g. tok512.bin)")
    ap.add_argument("--out", required=True, help="output directory")
    a = ap.parse_args(argv)
    try:
        cfg = convert(a.checkpoint, a.tokenizer, a.out)
    except (ConvertError, OSError) as e:
        print(f"convert_llama2c: {e}", file=sys.stderr)
        return 1
    print(f"wrote {a.out}: dim {cfg['dim']}, layers {cfg['n_layers']}, heads {cfg['n_heads']}/"
          f"{cfg['n_kv_heads']}, vocab {cfg['vocab_size']}, seq_len {cfg['seq_len']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
