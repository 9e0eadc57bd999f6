"""Independent Python references for the stories260K checks (helper module, not a test itself).

- RuncTokenizer: llama2.c run.c's tokenizer (build_tokenizer / encode / decode / safe_printf) on tok512.bin.
- HfBpeTokenizer: a Hugging Face tokenizers-style BPE encoder/decoder driven only by a tokenizer.json
  (normalizer Prepend+Replace, BPE with byte_fallback, rank-ordered merges, decoder pipeline).
- runc_forward / hf_forward: numpy fp32 forwards of a llama2.c checkpoint (interleaved RoPE, original
  layout) and of a converted HF Llama safetensors (NeoX RoPE), with KV caches.
- read_reference: the blocks of reference_outputs_run_c.txt.
"""
import json
import random
import shlex
import struct

import numpy as np

SPACE = "\u2581"


# ------------------------------------------------------------------------------------------- run.c tokenizer

class RuncTokenizer:
    def __init__(self, path):
        with open(path, "rb") as f:
            buf = f.read()
        (self.max_token_length,) = struct.unpack_from("<i", buf, 0)
        off, self.vocab, self.scores = 4, [], []
        while off < len(buf):
            s, n = struct.unpack_from("<fi", buf, off)
            off += 8
            self.vocab.append(buf[off:off + n])
            self.scores.append(s)
            off += n
        self.lookup = {}
        for i, v in enumerate(self.vocab):  # run.c bsearch over a sorted copy; vocab strings are unique
            self.lookup.setdefault(v, i)

    def encode(self, text, bos=True, eos=False):
        """text: str (UTF-8 encoded here) or bytes. Mirrors run.c encode() step by step."""
        data = text.encode("utf-8") if isinstance(text, str) else text
        toks = []
        if bos:
            toks.append(1)
        if data:
            toks.append(self.lookup[b" "])
        i = 0
        while i < len(data):
            j = i + 1
            while j < len(data) and (data[j] & 0xC0) == 0x80 and j - i < 4:
                j += 1
            cp = data[i:j]
            tid = self.lookup.get(cp)
            if tid is not None:
                toks.append(tid)
            else:
                toks.extend(b + 3 for b in cp)
            i = j
        while True:
            best_score, best_id, best_idx = -1e10, -1, -1
            for k in range(len(toks) - 1):
                tid = self.lookup.get(self.vocab[toks[k]] + self.vocab[toks[k + 1]])
                if tid is not None and self.scores[tid] > best_score:
                    best_score, best_id, best_idx = self.scores[tid], tid, k
            if best_idx == -1:
                break
            toks[best_idx:best_idx + 2] = [best_id]
        if eos:
            toks.append(2)
        return toks

    def decode_piece(self, prev, tok):
        piece = self.vocab[tok]
        if prev == 1 and piece[:1] == b" ":
            piece = piece[1:]
        if len(piece) == 6 and piece.startswith(b"<0x") and piece.endswith(b">"):
            try:
                piece = bytes([int(piece[3:5], 16)])
            except ValueError:
                pass
        return piece

    @staticmethod
    def safe_printf(piece):
        """run.c safe_printf: drop a lone non-printable, non-space byte."""
        if not piece:
            return b""
        if len(piece) == 1:
            c = piece[0]
            printable = 0x20 <= c < 0x7F
            space = c in (0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D)
            if not (printable or space):
                return b""
        return piece

    def stdout_of(self, ids):
        """Bytes run.c prints for a token sequence ids[0] = BOS, ids[1:] printed one by one, then '\\n'."""
        out = b""
        for prev, tok in zip(ids, ids[1:]):
            out += self.safe_printf(self.decode_piece(prev, tok))
        return out + b"\n"


# ------------------------------------------------------------------------------------------- HF BPE by merges

class HfBpeTokenizer:
    """Only the subset of tokenizer.json used by the converted Llama tokenizer; asserts that subset."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            tj = json.load(f)
        norm = tj["normalizer"]
        assert norm["type"] == "Sequence" and [n["type"] for n in norm["normalizers"]] == ["Prepend", "Replace"]
        self.prepend = norm["normalizers"][0]["prepend"]
        rep = norm["normalizers"][1]
        self.rep_from, self.rep_to = rep["pattern"]["String"], rep["content"]
        assert tj["pre_tokenizer"] is None
        m = tj["model"]
        assert m["type"] == "BPE" and m["byte_fallback"] and m["fuse_unk"]
        self.vocab = m["vocab"]
        self.id_to_tok = {i: t for t, i in self.vocab.items()}
        self.unk = self.vocab[m["unk_token"]]
        self.ranks = {}
        for r, mg in enumerate(m["merges"]):
            a, b = mg.split(" ") if isinstance(mg, str) else mg
            self.ranks.setdefault((self.vocab[a], self.vocab[b]), (r, self.vocab[a + b]))
        pp = tj["post_processor"]
        assert pp["type"] == "TemplateProcessing"
        self.prefix_ids = []
        for item in pp["single"]:
            if "SpecialToken" in item:
                self.prefix_ids += pp["special_tokens"][item["SpecialToken"]["id"]]["ids"]
            else:
                break
        self.decoders = tj["decoder"]["decoders"]
        self.added = {a["id"]: a for a in tj["added_tokens"]}

    def normalize(self, text):
        if text:
            text = self.prepend + text
        return text.replace(self.rep_from, self.rep_to)

    SPECIAL_STRINGS = ("<unk>", "<s>", "</s>")

    def encode(self, text, add_special_tokens=True):
        """Like HF tokenizers: special added tokens written in the text are matched first (leftmost,
        longest) and become their ids; each remaining segment is normalized (so gets its own '▁'
        prefix) and BPE-encoded on its own."""
        specials = sorted((a["content"] for a in self.added.values() if a["special"]), key=len, reverse=True)
        ids, seg, i = [], "", 0
        while i < len(text):
            hit = next((sp for sp in specials if text.startswith(sp, i)), None)
            if hit is None:
                seg += text[i]
                i += 1
                continue
            ids += self._encode_segment(seg)
            ids.append(self.vocab[hit])
            seg, i = "", i + len(hit)
        ids += self._encode_segment(seg)
        return (self.prefix_ids if add_special_tokens else []) + ids

    def _encode_segment(self, text):
        s = self.normalize(text)
        syms = []
        for ch in s:
            if ch in self.vocab:
                syms.append(self.vocab[ch])
            else:
                bts = ["<0x%02X>" % b for b in ch.encode("utf-8")]
                if all(t in self.vocab for t in bts):
                    syms += [self.vocab[t] for t in bts]
                elif syms and syms[-1] == self.unk:  # fuse_unk
                    pass
                else:
                    syms.append(self.unk)
        while len(syms) > 1:
            best = None
            for k in range(len(syms) - 1):
                r = self.ranks.get((syms[k], syms[k + 1]))
                if r is not None and (best is None or r[0] < best[0]):
                    best = (r[0], k, r[1])
            if best is None:
                break
            _, k, new = best
            syms[k:k + 2] = [new]
        return syms

    def decode(self, ids, skip_special_tokens=True):
        toks = [self.id_to_tok[i] for i in ids
                if not (skip_special_tokens and i in self.added and self.added[i]["special"])]
        for d in self.decoders:
            t = d["type"]
            if t == "Replace":
                toks = [x.replace(d["pattern"]["String"], d["content"]) for x in toks]
            elif t == "ByteFallback":
                out, pend = [], b""
                for x in toks:
                    if len(x) == 6 and x.startswith("<0x") and x.endswith(">"):
                        pend += bytes([int(x[3:5], 16)])
                        continue
                    if pend:
                        try:
                            out.append(pend.decode("utf-8"))
                        except UnicodeDecodeError:
                            out += ["\ufffd"] * len(pend)
                        pend = b""
                    out.append(x)
                if pend:
                    try:
                        out.append(pend.decode("utf-8"))
                    except UnicodeDecodeError:
                        out += ["\ufffd"] * len(pend)
                toks = out
            elif t == "Fuse":
                toks = ["".join(toks)]
            elif t == "Strip":
                c, start, stop = d["content"], d["start"], d["stop"]
                res = []
                for x in toks:
                    n = 0
                    while n < start and x.startswith(c):
                        x, n = x[len(c):], n + 1
                    n = 0
                    while n < stop and x.endswith(c):
                        x, n = x[:-len(c)], n + 1
                    res.append(x)
                toks = res
            else:
                raise AssertionError("decoder " + t)
        return "".join(toks)


# ------------------------------------------------------------------------------------------- models

def _rmsnorm(x, w):
    ss = np.float32(np.mean(x * x, dtype=np.float32)) + np.float32(1e-5)
    return (x * np.float32(1.0 / np.sqrt(ss))) * w


def _silu(x):
    return x / (np.float32(1.0) + np.exp(-x))


class RuncModel:
    """run.c forward on llama2.c weights (interleaved RoPE, original row order)."""

    def __init__(self, cfg, w):
        self.c, self.w = cfg, w
        L, S = cfg["n_layers"], cfg["seq_len"]
        kv = cfg["n_kv_heads"] * cfg["head_size"]
        self.kc = np.zeros((L, S, kv), np.float32)
        self.vc = np.zeros((L, S, kv), np.float32)

    def forward(self, token, pos):
        c, w = self.c, self.w
        hs, nh, nkv = c["head_size"], c["n_heads"], c["n_kv_heads"]
        kv_dim, kv_mul = nkv * hs, nh // nkv
        x = w["token_embedding"][token].copy()
        i = np.arange(0, c["dim"], 2)
        freq = (1.0 / np.power(np.float32(10000.0), (i % hs).astype(np.float32) / np.float32(hs))).astype(np.float32)
        ang = np.float32(pos) * freq
        fcr, fci = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
        for l in range(c["n_layers"]):
            xb = _rmsnorm(x, w["rms_att"][l])
            q, k, v = w["wq"][l] @ xb, w["wk"][l] @ xb, w["wv"][l] @ xb
            q0, q1 = q[0::2].copy(), q[1::2].copy()
            q[0::2], q[1::2] = q0 * fcr - q1 * fci, q0 * fci + q1 * fcr
            n = kv_dim // 2
            k0, k1 = k[0::2].copy(), k[1::2].copy()
            k[0::2], k[1::2] = k0 * fcr[:n] - k1 * fci[:n], k0 * fci[:n] + k1 * fcr[:n]
            self.kc[l, pos], self.vc[l, pos] = k, v
            out = np.empty(c["dim"], np.float32)
            for h in range(nh):
                g = h // kv_mul
                kh = self.kc[l, :pos + 1, g * hs:(g + 1) * hs]
                a = kh @ q[h * hs:(h + 1) * hs] / np.float32(np.sqrt(hs))
                a = np.exp(a - a.max())
                a /= a.sum()
                out[h * hs:(h + 1) * hs] = a @ self.vc[l, :pos + 1, g * hs:(g + 1) * hs]
            x = x + w["wo"][l] @ out
            xb = _rmsnorm(x, w["rms_ffn"][l])
            x = x + w["w2"][l] @ (_silu(w["w1"][l] @ xb) * (w["w3"][l] @ xb))
        x = _rmsnorm(x, w["rms_final"])
        cls = w["token_embedding"] if c["shared_classifier"] else w["wcls"]
        return cls @ x


class HfLlamaModel:
    """HF Llama forward (NeoX rotate_half RoPE) on a converted directory's tensors/config."""

    def __init__(self, config, tensors):
        self.cfg = config
        self.t = {k: v for k, (_, v) in tensors.items()}
        hs = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        self.hs = hs
        self.inv_freq = (1.0 / (config["rope_theta"] ** (np.arange(0, hs, 2, dtype=np.float32) / hs))).astype(np.float32)
        L, S = config["num_hidden_layers"], config["max_position_embeddings"]
        kv = config["num_key_value_heads"] * hs
        self.kc = np.zeros((L, S, kv), np.float32)
        self.vc = np.zeros((L, S, kv), np.float32)

    def _rope(self, v, nheads, cos, sin):
        h = v.reshape(nheads, self.hs)
        half = self.hs // 2
        x1, x2 = h[:, :half], h[:, half:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=1).reshape(-1)

    def forward(self, token, pos):
        c, t, hs = self.cfg, self.t, self.hs
        nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
        kv_mul = nh // nkv
        eps = np.float32(c["rms_norm_eps"])

        def norm(x, w):
            return (x * np.float32(1.0 / np.sqrt(np.mean(x * x, dtype=np.float32) + eps))) * w

        ang = np.float32(pos) * self.inv_freq
        cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
        x = t["model.embed_tokens.weight"][token].astype(np.float32)
        for l in range(c["num_hidden_layers"]):
            p = f"model.layers.{l}."
            xb = norm(x, t[p + "input_layernorm.weight"])
            q = self._rope(t[p + "self_attn.q_proj.weight"] @ xb, nh, cos, sin)
            k = self._rope(t[p + "self_attn.k_proj.weight"] @ xb, nkv, cos, sin)
            self.kc[l, pos], self.vc[l, pos] = k, t[p + "self_attn.v_proj.weight"] @ xb
            out = np.empty(nh * hs, np.float32)
            for h in range(nh):
                g = h // kv_mul
                a = self.kc[l, :pos + 1, g * hs:(g + 1) * hs] @ q[h * hs:(h + 1) * hs] / np.float32(np.sqrt(hs))
                a = np.exp(a - a.max())
                a /= a.sum()
                out[h * hs:(h + 1) * hs] = a @ self.vc[l, :pos + 1, g * hs:(g + 1) * hs]
            x = x + t[p + "self_attn.o_proj.weight"] @ out
            xb = norm(x, t[p + "post_attention_layernorm.weight"])
            x = x + t[p + "mlp.down_proj.weight"] @ (_silu(t[p + "mlp.gate_proj.weight"] @ xb)
                                                     * (t[p + "mlp.up_proj.weight"] @ xb))
        x = norm(x, t["model.norm.weight"])
        head = t["model.embed_tokens.weight"] if c["tie_word_embeddings"] else t["lm_head.weight"]
        return head @ x


def runc_generate(model, prompt_ids, steps):
    """run.c generate() with temperature 0: returns (all ids incl. BOS and prompt, list of logits)."""
    ids, logits_all = [prompt_ids[0]], []
    token, pos = prompt_ids[0], 0
    while pos < steps:
        logits = model.forward(token, pos)
        logits_all.append(logits)
        nxt = prompt_ids[pos + 1] if pos < len(prompt_ids) - 1 else int(np.argmax(logits))
        pos += 1
        if nxt == 1:
            break
        ids.append(nxt)
        token = nxt
    return ids, logits_all


def engine_generate(model, prompt_ids, max_new, eos_ids):
    """What `hyinfer generate --temperature 0 -n max_new` should do: prefill, then greedy new tokens,
    stopping (without emitting) at an eos id. Returns (new ids, list of logits)."""
    logits_all = []
    for pos, tok in enumerate(prompt_ids):
        logits = model.forward(tok, pos)
        logits_all.append(logits)
    new, pos = [], len(prompt_ids)
    while len(new) < max_new:
        nxt = int(np.argmax(logits))
        if nxt in eos_ids:
            break
        new.append(nxt)
        if len(new) == max_new:
            break
        logits = model.forward(nxt, pos)
        logits_all.append(logits)
        pos += 1
    return new, logits_all


# ------------------------------------------------------------------------------------------- reference file

def read_reference(path):
    """Returns list of dicts: cmd (str), args (dict of flag -> value), stdout (bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    blocks, pos = [], 0
    while True:
        a = data.find(b"=== CMD: ", pos)
        if a < 0:
            break
        eol = data.index(b"\n", a)
        cmd = data[a + len(b"=== CMD: "):eol].decode()
        end = data.index(b"=== END\n", eol)
        argv = shlex.split(cmd)
        args = {argv[i]: argv[i + 1] for i in range(2, len(argv) - 1, 2)}
        blocks.append({"cmd": cmd, "args": args, "stdout": data[eol + 1:end]})
        pos = end
    return blocks


# ------------------------------------------------------------------------------------------- test texts

def test_texts(rt, corpus_path):
    """Fixed strings, the first 100 corpus lines (one by one and in 5-line chunks), and 300 seeded random
    strings glued from vocabulary pieces, spaces, punctuation and non-vocab characters (byte fallback)."""
    texts = ["Once upon a time", "", " ", "  ", "a", "Lily", " Once upon a time", "Once upon a time ",
             "Hello  world\n", "Tim and Lily went to the park.\nThey saw a big dog!",
             "\"I'm sorry, mom.\" She said, \"Don't worry.\"", "tab\there", "café naïve – “quotes” …",
             "\u2603 snowman \U0001d11e clef \u4e2d\u6587", "\u200a\xa0", "<s> </s> <unk> <0x41>",
             "aaaa llll pppp oooo", "1234567890 $%&*()[]{}~|\\/"]
    with open(corpus_path, encoding="utf-8") as f:
        lines = f.read().split("\n")[:100]
    texts += lines
    texts += ["\n".join(lines[i:i + 5]) for i in range(0, 100, 5)]
    rng = random.Random(1234)
    pieces = [t.decode("utf-8") for t in rt.vocab[259:]]
    extra = [" ", "  ", "\n", ".", ",", "'", "\"", "é", "\u2014", "\u00fc", "\U0001F600", "x", "z"]
    for _ in range(300):
        texts.append("".join(rng.choice(pieces if rng.random() < 0.8 else extra)
                             for _ in range(rng.randint(1, 25))))
    return texts
