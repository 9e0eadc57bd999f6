#!/usr/bin/python3
"""Train the bundled tiny Hy4-preview (hy_v4) model on tinyshakespeare and export it in the hub layout.

Usage (the first training, Shakespeare; TRAINING.md of models/hy4-tiny has the exact command lines and losses):
  OMP_NUM_THREADS=1 nohup nice -n 5 /usr/bin/python3 tools/make/train_tiny_hy4.py --out models/hy4-tiny \
      --minutes 40 --threads 1 > build/train_hy4/log.txt 2>&1 &

Tool-calling fine-tune (what produced the current models/hy4-tiny, as was done for models/hy3-tiny):
  MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_TOP_PAD_=1073741824 \
  OMP_NUM_THREADS=1 nohup nice -n 10 /usr/bin/python3 tools/make/train_tiny_hy4.py --init-from models/hy4-tiny \
      --out build/hy4-tiny-tools --work build/train_hy4_tools --tool-frac 0.625 --tool-seq-len 1024 \
      --echo-frac 0.3 --echo-list-frac 0.6 --echo-list-max 8 --minutes 33 --lr 2e-3 --warmup 50 --batch 8 \
      --threads 1 > build/train_hy4_tools/log.txt 2>&1 &
  cp build/hy4-tiny-tools/* models/hy4-tiny/
  ... the same flags with --out models/hy4-tiny --report-only        # the fine-tune's section of TRAINING.md
  /usr/bin/python3 tools/make/eval_tool_calls.py --format hy4 --model models/hy4-tiny   # held-out tool-call rates
--init-from DIR starts from DIR's exported weights, adds Hy4's six structural tool tokens to DIR's tokenizer
(tool_tokenizer: ids 480-485; the new embedding / lm_head rows start at the mean of the stored rows plus noise)
and trains on a mix: round(--tool-frac * batch) rows of synthetic agent conversations (tools/make/hy4_tool_data.py,
rendered with DIR/chat_template.jinja, reasoning_effort no_think or high, loss on the assistant turns only,
--echo-frac of them word-copy chats) and the first training's Shakespeare text / chat rows (the chats now in the
template's format). The defaults without --init-from reproduce the first training unchanged. (Debian's
python3-torch uses the reference BLAS unless an optimised libblas.so.3 such as libopenblas0-serial is installed;
with the reference one a step is 5-8x slower. The MALLOC_* settings keep glibc from unmapping and re-faulting the
large attention buffers of the long tool rows every step.)

The torch model implements specs/hy4_architecture.md (the same math as tools/ref/hy4_ref.py, which the C engine
and llama.cpp's golden agree with): 4 hyper-connection streams (HC-pre / HC-post per sub-block, HC-head), gated
MLA with learnable sinks and interleaved RoPE on the last qk_rope_head_dim dims, the lightning indexer on `full`
layers (top index_topk keys, ties to the earlier position; `shared` layers reuse the previous full layer's
selection), layer 0 dense SwiGLU, MoE layers with a sigmoid router + selection bias (aux-loss-free balancing:
bias_e += gamma * sign(mean_load - load_e) after each step), route norm, routed_scaling_factor and the SwiGLU clamp
on routed experts only, an unclamped shared expert, untied lm_head; one MTP layer (plain pre-norm block with its own
MLA + full indexer + MoE) trained on token p+2 from (token p+1, final-normed h_p).

The indexer's top-k is not differentiable; as in DeepSeek's DSA training, the indexer gets its own loss: the KL
divergence from the head-mean attention distribution of its layer (detached, over the selected keys) to the
softmax of its scores over all causal keys (weight --index-weight). index_topk (64) is below the training context
(256 tokens), so the sparse selection really drops keys in training and in the exported model.

Tokenizer: the hy4-golden-b byte-level BPE (tests/data/hy4-golden-llamacpp: 256 bytes + 215 merges learned on
tinyshakespeare, Hy4's control tokens at 471-479; the real Hy4 vocabulary is not public). It is re-implemented
here in Python (the three hunyuan-dense regex splits, GPT-2 byte map, merges by rank) and checked against the
golden's prompt_ids before training. Data: tests/data/corpora/tinyshakespeare.txt, first 90% of the characters
for training, the last 10% for validation; a fraction --chat-frac of the rows are consecutive speeches as a
multi-turn chat in the golden's Hy4 turn format (hy_start role hy_middle content hy_end), loss on every token.
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import regex
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
sys.path.insert(0, os.path.join(ROOT, "tools", "convert"))
import safetensors_np as stn  # noqa: E402
from tiktoken_to_tokenizer_json import bytes_to_unicode  # noqa: E402  (GPT-2's byte <-> unicode table)

CORPUS = os.path.join(ROOT, "tests", "data", "corpora", "tinyshakespeare.txt")
GOLDEN = os.path.join(ROOT, "tests", "data", "hy4-golden-llamacpp")
TOKDIR = os.path.join(GOLDEN, "hy4-golden-b")
START, MIDDLE, PAD, END = 471, 472, 473, 474


# ------------------------------------------------------------------------------------------- tokenizer

class Tok:
    """Byte-level BPE of tokenizer.json (Split x3 'Isolated' pre-tokenizer, ByteLevel, merges by rank)."""

    def __init__(self, path):
        if isinstance(path, dict):
            t = path
        else:
            with open(path, encoding="utf-8") as f:
                t = json.load(f)
        self.added = {x["content"]: x["id"] for x in t.get("added_tokens", [])}
        self.added_inv = {v: k for k, v in self.added.items()}
        self.added_rx = regex.compile("(" + "|".join(regex.escape(x) for x in sorted(self.added, key=len,
                                                                                   reverse=True)) + ")")
        self.n_vocab = max([len(t["model"]["vocab"])] + [i + 1 for i in self.added.values()])
        self.vocab = t["model"]["vocab"]
        self.ranks = {tuple(m.split(" ") if isinstance(m, str) else m): i for i, m in enumerate(t["model"]["merges"])}
        self.splits = [regex.compile(p["pattern"]["Regex"]) for p in t["pre_tokenizer"]["pretokenizers"]
                       if p["type"] == "Split"]
        self.bmap = bytes_to_unicode()
        self.inv = {v: k for k, v in self.vocab.items()}
        self.unb = {c: b for b, c in self.bmap.items()}
        self.cache = {}

    def _pieces(self, text):
        pieces = [text]
        for rx in self.splits:
            nxt = []
            for p in pieces:
                pos = 0
                for m in rx.finditer(p):
                    if m.start() > pos:
                        nxt.append(p[pos:m.start()])
                    if m.end() > m.start():
                        nxt.append(m.group(0))
                    pos = m.end()
                if pos < len(p):
                    nxt.append(p[pos:])
            pieces = nxt
        return pieces

    def _bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        parts = list(word)
        while len(parts) > 1:
            best, bi = None, -1
            for i in range(len(parts) - 1):
                r = self.ranks.get((parts[i], parts[i + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            parts = parts[:bi] + [parts[bi] + parts[bi + 1]] + parts[bi + 2:]
        ids = [self.vocab[p] for p in parts]
        self.cache[word] = ids
        return ids

    def encode(self, text):
        out = []
        for p in self._pieces(text):
            out += self._bpe("".join(self.bmap[b] for b in p.encode("utf-8")))
        return out

    def encode_added(self, text):
        """Like Hugging Face's tokenizer: the added tokens (control, think and tool markers) are matched first,
        the text between them goes through the BPE."""
        out = []
        for part in self.added_rx.split(text):
            if part in self.added:
                out.append(self.added[part])
            elif part:
                out += self.encode(part)
        return out

    def decode(self, ids):
        """BPE ids -> text; added tokens (ids >= 471) are spelled out unless they are outside the vocabulary."""
        out, buf = [], []
        for i in list(ids) + [None]:
            if i is not None and i in self.inv and i not in self.added_inv:
                buf.append(self.inv[i])
                continue
            if buf:
                out.append(bytes(self.unb[c] for c in "".join(buf)).decode("utf-8", errors="replace"))
                buf = []
            if i is not None and i in self.added_inv:
                out.append(self.added_inv[i])
        return "".join(out)

    def decode_text(self, ids):
        """The original decode: BPE ids only (control tokens dropped)."""
        return self.decode([i for i in ids if i < 471])


def chat_ids(tok, msgs, gen_prompt=False):
    """The golden's Hy4 turn format (tokenizer_config.json chat_template)."""
    ids = []
    for m in msgs:
        ids += [START] + tok.encode(m["role"]) + [MIDDLE] + tok.encode(m["content"]) + [END]
    if gen_prompt:
        ids += [START] + tok.encode("assistant") + [MIDDLE]
    return ids


def check_tokenizer(tok):
    with open(os.path.join(GOLDEN, "golden.json")) as f:
        g = json.load(f)
    specials = {"<｜hy_start:opensource｜>": START, "<｜hy_middle:opensource｜>": MIDDLE,
                "<｜hy_end:opensource｜>": END, "<｜reasoning_mode:opensource｜>": 475}
    pat = "(" + "|".join(regex.escape(s) for s in specials) + ")"
    n = 0
    for c in g["cases"]:
        ids = []
        for part in regex.split(pat, c["prompt"]):
            ids += [specials[part]] if part in specials else tok.encode(part) if part else []
        assert ids == c["prompt_ids"], (c["prompt"], ids, c["prompt_ids"])
        n += 1
    return n


# ------------------------------------------------------------------------------------------- model

def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, cos, sin, dr):
    """Interleaved pairs (2i, 2i+1) on the last dr dims of x [..., T, (heads,) D]; cos/sin broadcastable."""
    head, tail = x[..., :-dr], x[..., -dr:]
    a, b = tail[..., 0::2], tail[..., 1::2]
    ra, rb = a * cos - b * sin, a * sin + b * cos
    return torch.cat([head, torch.stack([ra, rb], dim=-1).flatten(-2)], dim=-1)


class Lin(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(o, i))

    def forward(self, x):
        return x @ self.weight.t()


class Indexer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.wq_b = Lin(c["q_lora_rank"], c["index_n_heads"] * c["index_head_dim"])
        self.wk = Lin(c["hidden_size"], c["index_head_dim"])
        self.k_norm_w = nn.Parameter(torch.ones(c["index_head_dim"]))
        self.k_norm_b = nn.Parameter(torch.zeros(c["index_head_dim"]))
        self.weights_proj = Lin(c["hidden_size"], c["index_n_heads"])

    def forward(self, u, cq, cos, sin):
        c = self.c
        B, T, _ = u.shape
        HI, dI, dr = c["index_n_heads"], c["index_head_dim"], c["qk_rope_head_dim"]
        q = rope(self.wq_b(cq).view(B, T, HI, dI), cos[:, None], sin[:, None], dr)
        k = F.layer_norm(self.wk(u), (dI,), self.k_norm_w, self.k_norm_b, c["rms_norm_eps"])
        k = rope(k, cos, sin, dr)
        w = self.weights_proj(u)
        dots = torch.relu(torch.einsum("bthd,bsd->bths", q, k))
        return torch.einsum("bth,bths->bts", w, dots) / math.sqrt(HI * dI)


def topk_mask(score, k):
    """Allowed[b, t, s]: causal and among the k best scores of row t (all when t < k; exact ties, rare, fall
    where torch.topk puts them, while the engine takes the earlier position)."""
    B, T, _ = score.shape
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    if k >= T:
        return causal.expand(B, T, T)
    idx = score.masked_fill(~causal, float("-inf")).topk(k, dim=-1).indices
    m = torch.zeros(B, T, T, dtype=torch.bool)
    m.scatter_(-1, idx, True)
    return (m & causal) | (causal & (torch.arange(T)[:, None] < k))


class MLA(nn.Module):
    def __init__(self, c, has_indexer):
        super().__init__()
        self.c = c
        d, H = c["hidden_size"], c["num_attention_heads"]
        dn, dr, dv, rq, rkv = (c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["q_lora_rank"],
                               c["kv_lora_rank"])
        self.q_a_proj = Lin(d, rq)
        self.q_a_layernorm = nn.Parameter(torch.ones(rq))
        self.q_b_proj = Lin(rq, H * (dn + dr))
        self.kv_a_proj_with_mqa = Lin(d, rkv + dr)
        self.kv_a_layernorm = nn.Parameter(torch.ones(rkv))
        self.kv_b_proj = Lin(rkv, H * (dn + dv))
        self.o_proj = Lin(H * dv, d)
        self.linear_gate = Lin(d, H * dv)
        self.learnable_sink_param = nn.Parameter(torch.zeros(H))
        self.indexer = Indexer(c) if has_indexer else None

    def forward(self, u, cos, sin, allowed):
        """-> (out, allowed mask used, indexer KL loss or 0)."""
        c = self.c
        B, T, _ = u.shape
        H, dn, dr, dv, rkv = (c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"],
                              c["kv_lora_rank"])
        eps = c["rms_norm_eps"]
        cq = rms(self.q_a_proj(u), self.q_a_layernorm, eps)
        q = rope(self.q_b_proj(cq).view(B, T, H, dn + dr), cos[:, None], sin[:, None], dr)
        kv = self.kv_a_proj_with_mqa(u)
        lat = rms(kv[..., :rkv], self.kv_a_layernorm, eps)
        kpe = rope(kv[..., rkv:], cos, sin, dr)
        kvb = self.kv_b_proj.weight.view(H, dn + dv, rkv)
        k_nope = torch.einsum("hdc,bsc->bshd", kvb[:, :dn], lat)
        v = torch.einsum("hdc,bsc->bshd", kvb[:, dn:], lat)
        score = None
        if self.indexer is not None:
            score = self.indexer(u, cq, cos, sin)
            allowed = topk_mask(score.detach(), c["index_topk"])
        lg = (torch.einsum("bthd,bshd->bhts", q[..., :dn], k_nope) +
              torch.einsum("bthd,bsd->bhts", q[..., dn:], kpe)) / math.sqrt(dn + dr)
        lg = lg.masked_fill(~allowed[:, None], float("-inf"))
        sink = self.learnable_sink_param.view(1, H, 1, 1).expand(B, H, T, 1)
        p = torch.softmax(torch.cat([lg, sink], dim=-1), dim=-1)[..., :T]
        o = torch.einsum("bhts,bshd->bthd", p, v).reshape(B, T, H * dv)
        o = o * torch.sigmoid(self.linear_gate(u))
        kl = u.new_zeros(())
        if score is not None:
            target = p.detach().mean(1)
            target = target / target.sum(-1, keepdim=True).clamp_min(1e-20)
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            logq = torch.log_softmax(score.masked_fill(~causal, float("-inf")), dim=-1)
            kl = (target * (torch.log(target.clamp_min(1e-20)) - logq.masked_fill(~causal, 0.0))).sum(-1).mean()
        return self.o_proj(o), allowed, kl


class Experts(nn.Module):
    def __init__(self, c):
        super().__init__()
        E, I, d = c["n_routed_experts"], c["moe_intermediate_size"], c["hidden_size"]
        self.gate_up_proj = nn.Parameter(torch.empty(E, 2 * I, d))
        self.down_proj = nn.Parameter(torch.empty(E, d, I))


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        d, E, I = c["hidden_size"], c["n_routed_experts"], c["moe_intermediate_size"]
        self.gate = Lin(d, E)
        self.register_buffer("e_score_correction_bias", torch.zeros(E))
        self.experts = Experts(c)
        self.shared = nn.ModuleDict({"gate_proj": Lin(d, I), "up_proj": Lin(d, I), "down_proj": Lin(I, d)})
        self.load = None

    def forward(self, u):
        c = self.c
        E, K, I, L = c["n_routed_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"], c["swiglu_limit"]
        s = torch.sigmoid(self.gate(u).float())
        idx = (s + self.e_score_correction_bias).topk(K, dim=-1).indices
        w = s.gather(-1, idx)
        w = w / (w.sum(-1, keepdim=True) + 1e-20) * c["routed_scaling_factor"]
        dense_w = torch.zeros_like(s).scatter(-1, idx, w)  # [B, T, E]
        self.load = torch.zeros(E).scatter_add(0, idx.flatten(), torch.ones(idx.numel())).detach()
        gu = torch.einsum("btd,eid->btei", u, self.experts.gate_up_proj)
        g, v = gu[..., :I].clamp(max=L), gu[..., I:].clamp(-L, L)
        y = torch.einsum("btei,edi->bted", F.silu(g) * v, self.experts.down_proj)
        out = (dense_w.unsqueeze(-1) * y).sum(2)
        sh = self.shared
        return out + sh["down_proj"](F.silu(sh["gate_proj"](u)) * sh["up_proj"](u))


class Dense(nn.Module):
    def __init__(self, d, I):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = Lin(d, I), Lin(d, I), Lin(I, d)

    def forward(self, u):
        return self.down_proj(F.silu(self.gate_proj(u)) * self.up_proj(u))


class HC(nn.Module):
    def __init__(self, c, n_out):
        super().__init__()
        C, d = c["hc_mult"], c["hidden_size"]
        self.fn = nn.Parameter(torch.empty(n_out, C * d))
        self.base = nn.Parameter(torch.zeros(n_out))
        self.scale = nn.Parameter(torch.full((2 if n_out == 2 * C else 1,), 0.01))
        self.c = c

    def mix(self, X):
        z = X.flatten(-2)
        r = torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + self.c["rms_norm_eps"])
        return (z @ self.fn.t()) * r

    def pre(self, X):
        C = self.c["hc_mult"]
        m = self.mix(X)
        a = torch.sigmoid(m[..., :C] * self.scale[0] + self.base[:C]) + self.c["hc_eps"]
        p = self.c["hc_magnitude"] * torch.sigmoid(m[..., C:] * self.scale[1] + self.base[C:]) + self.c["hc_eps"]
        return (a.unsqueeze(-1) * X).sum(-2), p

    def head(self, X):
        g = torch.sigmoid(self.mix(X) * self.scale[0] + self.base) + self.c["hc_eps"]
        return (g.unsqueeze(-1) * X).sum(-2)


class Layer(nn.Module):
    def __init__(self, c, L, mtp=False):
        super().__init__()
        eps_d = c["hidden_size"]
        self.c = c
        self.mtp = mtp
        full = mtp or c["indexer_types"][L] == "full"
        self.input_layernorm = nn.Parameter(torch.ones(eps_d))
        self.post_attention_layernorm = nn.Parameter(torch.ones(eps_d))
        self.self_attn = MLA(c, full)
        moe = mtp or c["mlp_layer_types"][L] == "sparse"
        self.mlp = MoE(c) if moe else Dense(c["hidden_size"], c["intermediate_size"])
        if not mtp:
            self.hc_attn = HC(c, 2 * c["hc_mult"])
            self.hc_mlp = HC(c, 2 * c["hc_mult"])

    def forward(self, X, cos, sin, allowed):
        eps = self.c["rms_norm_eps"]
        if self.mtp:
            a, allowed, kl = self.self_attn(rms(X, self.input_layernorm, eps), cos, sin, allowed)
            X = X + a
            return X + self.mlp(rms(X, self.post_attention_layernorm, eps)), allowed, kl
        y, p = self.hc_attn.pre(X)
        a, allowed, kl = self.self_attn(rms(y, self.input_layernorm, eps), cos, sin, allowed)
        X = X + p.unsqueeze(-1) * a.unsqueeze(-2)
        y, p = self.hc_mlp.pre(X)
        f = self.mlp(rms(y, self.post_attention_layernorm, eps))
        return X + p.unsqueeze(-1) * f.unsqueeze(-2), allowed, kl


class HyV4(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        V, d = c["vocab_size"], c["hidden_size"]
        self.embed = nn.Parameter(torch.empty(V, d))
        self.layers = nn.ModuleList([Layer(c, L) for L in range(c["num_hidden_layers"])])
        self.hc_head = HC(c, c["hc_mult"])
        self.norm = nn.Parameter(torch.ones(d))
        self.lm_head = nn.Parameter(torch.empty(V, d))
        self.mtp = Layer(c, 0, mtp=True)
        self.mtp_norms = nn.ParameterDict({k: nn.Parameter(torch.ones(d)) for k in ["enorm", "hnorm", "final_layernorm"]})
        self.eh_proj = Lin(2 * d, d)

    def init_weights(self, seed):
        g = torch.Generator().manual_seed(seed)
        for n, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 if "fn" not in n else 0.002
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=g) * std)
        C = self.c["hc_mult"]
        with torch.no_grad():
            for L in self.layers:
                for hc in (L.hc_attn, L.hc_mlp):
                    hc.base[:C] = -math.log(C - 1)
            self.hc_head.base[:] = -math.log(C - 1)

    def rope_tables(self, T):
        c = self.c
        dr = c["qk_rope_head_dim"]
        inv = c["rope_parameters"]["rope_theta"] ** (-torch.arange(0, dr, 2, dtype=torch.float64) / dr)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
        return torch.cos(ang).float(), torch.sin(ang).float()

    def forward(self, ids):
        """ids [B, T] -> (logits [B, T, V], final-normed h [B, T, d], indexer KL sum, MTP logits [B, T-1, V])."""
        c = self.c
        B, T = ids.shape
        cos, sin = self.rope_tables(T)
        e = self.embed[ids]
        X = e.unsqueeze(-2).expand(B, T, c["hc_mult"], c["hidden_size"])
        allowed, kl = None, 0.0
        for L in self.layers:
            X, allowed, k = L(X, cos, sin, allowed)
            kl = kl + k
        h = rms(self.hc_head.head(X), self.norm, c["rms_norm_eps"])
        logits = h @ self.lm_head.t()
        n = self.mtp_norms
        x = torch.cat([rms(self.embed[ids[:, 1:]], n["enorm"], c["rms_norm_eps"]),
                       rms(h[:, :-1], n["hnorm"], c["rms_norm_eps"])], dim=-1)
        v, _, k = self.mtp(self.eh_proj(x), cos[:T - 1], sin[:T - 1], None)
        kl = kl + k
        mtp_logits = rms(v, n["final_layernorm"], c["rms_norm_eps"]) @ self.lm_head.t()
        return logits, h, kl, mtp_logits

    def moes(self):
        return [L.mlp for L in list(self.layers) + [self.mtp] if isinstance(L.mlp, MoE)]


def make_config(a):
    nl = 4
    return {
        "architectures": ["HYV4ForCausalLM"], "model_type": "hy_v4", "dtype": "bfloat16",
        "transformers_version": "5.16.2", "vocab_size": getattr(a, "vocab_size", 480), "hidden_size": a.hidden, "num_hidden_layers": nl,
        "intermediate_size": 2 * a.hidden, "moe_intermediate_size": a.hidden // 2,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "hidden_act": "silu", "initializer_range": 0.02,
        "tie_word_embeddings": False, "bos_token_id": START, "eos_token_id": END, "pad_token_id": PAD,
        "use_cache": True, "attention_bias": False, "attention_dropout": 0.0, "num_attention_heads": 4,
        "num_key_value_heads": 4, "head_dim": 16, "q_lora_rank": a.hidden // 2, "kv_lora_rank": 32,
        "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "gated_mla": True,
        "gating_type": "elementwise", "learnable_sink": True, "learnable_sink_init": 0.0,
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "use_dsa": True,
        "layer_types": ["deepseek_sparse_attention"] * nl, "index_topk": a.index_topk, "index_head_dim": 32,
        "index_n_heads": 4, "indexer_types": ["full", "shared", "full", "shared"], "enable_ihc": True,
        "hc_mult": 4, "hc_magnitude": 2.0, "hc_eps": 1e-06, "mlp_layer_types": ["dense"] + ["sparse"] * (nl - 1),
        "first_k_dense_replace": 1, "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2,
        "norm_topk_prob": True, "routed_scaling_factor": 2.0, "n_group": 1, "topk_group": 1,
        "swiglu_limit": 7.0, "num_nextn_predict_layers": 1, "mtp_loss_factor": 0.1, "enable_lm_head_fp32": True,
        "bitwise_backward_align": False,
    }


# ------------------------------------------------------------------------------------------- export

def tensor_list(model):
    """[(hub tensor name, stored dtype, the torch parameter/buffer)] in the export order."""
    T = []

    def bf(name, p):
        T.append((name, "BF16", p))

    def f32(name, p):
        T.append((name, "F32", p))

    def attn(lp, a):
        bf(lp + ".self_attn.q_a_proj.weight", a.q_a_proj.weight)
        bf(lp + ".self_attn.q_a_layernorm.weight", a.q_a_layernorm)
        bf(lp + ".self_attn.q_b_proj.weight", a.q_b_proj.weight)
        bf(lp + ".self_attn.kv_a_proj_with_mqa.weight", a.kv_a_proj_with_mqa.weight)
        bf(lp + ".self_attn.kv_a_layernorm.weight", a.kv_a_layernorm)
        bf(lp + ".self_attn.kv_b_proj.weight", a.kv_b_proj.weight)
        bf(lp + ".self_attn.o_proj.weight", a.o_proj.weight)
        bf(lp + ".self_attn.linear_gate.weight", a.linear_gate.weight)
        f32(lp + ".self_attn.learnable_sink_param", a.learnable_sink_param)
        if a.indexer is not None:
            ix = a.indexer
            bf(lp + ".self_attn.indexer.wq_b.weight", ix.wq_b.weight)
            bf(lp + ".self_attn.indexer.wk.weight", ix.wk.weight)
            bf(lp + ".self_attn.indexer.k_norm.weight", ix.k_norm_w)
            bf(lp + ".self_attn.indexer.k_norm.bias", ix.k_norm_b)
            bf(lp + ".self_attn.indexer.weights_proj.weight", ix.weights_proj.weight)

    def mlp(lp, m):
        if isinstance(m, MoE):
            bf(lp + ".mlp.gate.weight", m.gate.weight)
            f32(lp + ".mlp.gate.e_score_correction_bias", m.e_score_correction_bias)
            bf(lp + ".mlp.experts.gate_up_proj", m.experts.gate_up_proj)
            bf(lp + ".mlp.experts.down_proj", m.experts.down_proj)
            for k in ("gate_proj", "up_proj", "down_proj"):
                bf(lp + ".mlp.shared_experts.%s.weight" % k, m.shared[k].weight)
        else:
            for k in ("gate_proj", "up_proj", "down_proj"):
                bf(lp + ".mlp.%s.weight" % k, getattr(m, k).weight)

    bf("model.embed_tokens.weight", model.embed)
    for L, lay in enumerate(model.layers):
        lp = "model.layers.%d" % L
        bf(lp + ".input_layernorm.weight", lay.input_layernorm)
        bf(lp + ".post_attention_layernorm.weight", lay.post_attention_layernorm)
        for site, hc in (("hc_attn_layer", lay.hc_attn), ("hc_mlp_layer", lay.hc_mlp)):
            f32(lp + ".%s.hc_pre.hc_fn" % site, hc.fn)
            f32(lp + ".%s.hc_pre.hc_base" % site, hc.base)
            f32(lp + ".%s.hc_pre.hc_scale" % site, hc.scale)
        attn(lp, lay.self_attn)
        mlp(lp, lay.mlp)
    f32("model.hc_head.hc_head_fn", model.hc_head.fn)
    f32("model.hc_head.hc_head_base", model.hc_head.base)
    f32("model.hc_head.hc_head_scale", model.hc_head.scale)
    bf("model.norm.weight", model.norm)
    bf("lm_head.weight", model.lm_head)
    lp = "model.mtp_layers.0"
    n = model.mtp_norms
    bf(lp + ".enorm.weight", n["enorm"])
    bf(lp + ".hnorm.weight", n["hnorm"])
    bf(lp + ".eh_proj.weight", model.eh_proj.weight)
    bf(lp + ".input_layernorm.weight", model.mtp.input_layernorm)
    bf(lp + ".post_attention_layernorm.weight", model.mtp.post_attention_layernorm)
    bf(lp + ".final_layernorm.weight", n["final_layernorm"])
    attn(lp, model.mtp.self_attn)
    mlp(lp, model.mtp.mlp)
    return T


def export(model, c, out, tok_files=None):
    """Hub layout: model.safetensors (bf16/f32 as the real model), config.json, tokenizer files (TOKDIR's, or
    tok_files = {file name: JSON object} for the tool fine-tune's extended tokenizer)."""
    os.makedirs(out, exist_ok=True)
    T = [(n, d, p.detach().float().numpy()) for n, d, p in tensor_list(model)]
    stn.save(os.path.join(out, "model.safetensors"), T, metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
        f.write("\n")
    if tok_files is None:
        for fn in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            shutil.copy(os.path.join(TOKDIR, fn), os.path.join(out, fn))
    else:
        for fn, obj in tok_files.items():
            with open(os.path.join(out, fn), "w", encoding="utf-8") as f:
                json.dump(obj, f, indent=1 if fn == "tokenizer.json" else 2, ensure_ascii=False)
                f.write("\n")


TOOL_TOKENS = ["<tool_call:opensource>", "</tool_call:opensource>", "<arg_key:opensource>", "</arg_key:opensource>",
               "<arg_value:opensource>", "</arg_value:opensource>"]


def tool_tokenizer(src):
    """tokenizer.json / tokenizer_config.json / generation_config.json of src with Hy4's structural tool tokens
    added (ids after the last one, non-special like <tool_calls:opensource>) and the one-line chat_template
    removed from tokenizer_config.json (chat_template.jinja is the template)."""
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    with open(os.path.join(src, "generation_config.json"), encoding="utf-8") as f:
        gc = json.load(f)
    have = {x["content"] for x in tj["added_tokens"]}
    nid = max(x["id"] for x in tj["added_tokens"]) + 1
    for t in TOOL_TOKENS:
        if t in have:
            continue
        fields = {"content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                  "special": False}
        tj["added_tokens"].append(dict({"id": nid}, **fields))
        tc["added_tokens_decoder"][str(nid)] = fields
        nid += 1
    tc.pop("chat_template", None)
    return {"tokenizer.json": tj, "tokenizer_config.json": tc, "generation_config.json": gc}


# ------------------------------------------------------------------------------------------- training

def build_rows(tok, text, a, rng, n_rows, T, chat_fn=None):
    """n_rows training rows of T+1 ids: corpus text from a random line start, or a chat of speeches (rendered
    by chat_fn(messages) -> ids, default the golden's turn format chat_ids)."""
    ids = np.asarray(tok.encode(text), dtype=np.int64)
    starts = np.flatnonzero(np.asarray([tok.inv[i].endswith("Ċ") for i in ids[:-1]])) + 1
    speeches = [s.strip("\n") for s in text.split("\n\n") if s.strip()]
    rows = []
    for _ in range(n_rows):
        if rng.random() < a.chat_frac:
            i = int(rng.integers(0, len(speeches) - 4))
            msgs = []
            row = []
            while len(row) < T + 1 and i < len(speeches):
                msgs.append({"role": "user" if len(msgs) % 2 == 0 else "assistant", "content": speeches[i]})
                row = chat_fn(msgs) if chat_fn else chat_ids(tok, msgs)
                i += 1
            row = (row + [PAD] * (T + 1))[:T + 1]
        else:
            s = int(starts[rng.integers(0, len(starts))])
            s = min(s, len(ids) - T - 2)
            row = ids[s:s + T + 1].tolist()
        rows.append(row)
    return np.asarray(rows, dtype=np.int64), ids


def losses(model, batch, a):
    x = torch.from_numpy(batch)
    logits, h, kl, mtp = model(x[:, :-1])
    V = logits.shape[-1]
    tgt = x[:, 1:]
    main = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1), ignore_index=PAD)
    mt = F.cross_entropy(mtp.reshape(-1, V), tgt[:, 1:].reshape(-1), ignore_index=PAD)  # row p -> token p+2
    return main, mt, kl


def evaluate(model, va_ids, T, n=24):
    model.eval()
    tot, cnt, mtot = 0.0, 0, 0.0
    with torch.no_grad():
        for i in range(n):
            s = i * (len(va_ids) - T - 2) // n
            row = va_ids[s:s + T + 1][None]
            m, mt, _ = losses(model, row, None)
            tot += float(m)
            mtot += float(mt)
            cnt += 1
    model.train()
    return tot / cnt, mtot / cnt


def bigram_val_loss(tr, va, V, k=0.01):
    """Add-k bigram baseline on the same split (nats/token, full 480-id vocabulary)."""
    cnt = np.full((V, V), k)
    np.add.at(cnt, (tr[:-1], tr[1:]), 1.0)
    p = cnt / cnt.sum(1, keepdims=True)
    return float(-np.mean(np.log(p[va[:-1], va[1:]])))


def report(a, tok, text, cut):
    """TRAINING.md of the export in a.out: losses of the exported bf16 weights (tools/ref/hy4_ref.py, float64) on
    validation windows, the bigram baseline, greedy samples from the C engine (build/hyinfer, fp32)."""
    import subprocess
    import hy4_ref
    with open(os.path.join(a.work, "summary.json")) as f:
        sm = json.load(f)
    ref = hy4_ref.Hy4Ref(a.out)
    va = np.asarray(tok.encode(text[cut:]), dtype=np.int64)
    tr = np.asarray(tok.encode(text[:cut]), dtype=np.int64)
    T, n = a.seq_len, 16
    nll, mnll, cnt, acc, macc = 0.0, 0.0, 0, 0, 0
    for i in range(n):
        s = i * (len(va) - T - 2) // n
        ids = va[s:s + T + 1].tolist()
        lg, h, _ = ref.forward(ids[:-1])
        lp = lg - lg.max(1, keepdims=True)
        lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
        nll -= lp[np.arange(T), ids[1:]].sum()
        acc += int((lg.argmax(1) == np.asarray(ids[1:])).sum())
        ml = ref.forward_mtp(ids[:-1], h)
        mp = ml - ml.max(1, keepdims=True)
        mp = mp - np.log(np.exp(mp).sum(1, keepdims=True))
        mnll -= mp[np.arange(T - 1), ids[2:]].sum()
        macc += int((ml.argmax(1) == np.asarray(ids[2:])).sum())
        cnt += T
    val, val_mtp = nll / cnt, mnll / (cnt - n)
    top1, mtp_top1 = acc / cnt, macc / (cnt - n)
    big = bigram_val_loss(tr, va, 480)
    eng = os.path.join(ROOT, "build", "hyinfer")
    samples = []
    for p, chat in (("ROMEO:", False), ("JULIET:", False), ("What news, my lord?", True)):
        cmd = [eng, "generate", "-m", a.out, "-p", p, "-n", "120", "--temperature", "0", "--dtype", "float32"]
        r = subprocess.run(cmd + (["--chat"] if chat else []), capture_output=True, text=True)
        samples.append((p, chat, r.stdout.strip() if r.returncode == 0 else "(error: %s)" % r.stderr.strip()[-200:]))
    size = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out) if f != "TRAINING.md")
    args = sm["args"]
    lines = ["# hy4-tiny: training report", "",
             "Generated by `tools/make/train_tiny_hy4.py --report-only`. A tiny Hy4-preview (`hy_v4`) checkpoint in "
             "the hub layout (every tensor name and dtype of the real model, MTP layer included), trained on "
             "tinyshakespeare (first 90%% of characters = %d chars; last 10%% = %d chars for validation)." %
             (cut, len(text) - cut), "",
             "Command: `OMP_NUM_THREADS=1 nice -n 5 /usr/bin/python3 tools/make/train_tiny_hy4.py --out models/hy4-tiny "
             "--minutes %g --threads %d` (defaults otherwise: batch %d, seq-len %d, hidden %d, index-topk %d, lr %g, "
             "chat-frac %g, mtp-weight %g, index-weight %g, seed %d)" % (args["minutes"], args["threads"], args["batch"],
                                                                        args["seq_len"], args["hidden"],
                                                                        args["index_topk"], args["lr"],
                                                                        args["chat_frac"], args["mtp_weight"],
                                                                        args["index_weight"], args["seed"]), "",
             "Geometry: hidden 128, 4 layers (layer 0 dense SwiGLU 256; layers 1-3 MoE: 8 routed experts of 64, top-2, "
             "+ 1 shared, swiglu_limit 7, routed_scaling_factor 2), 4 MLA heads (q_lora 64, kv_lora 32, nope 32 + rope "
             "16, v 32) with sigmoid gates and learnable sinks, the lightning indexer (4 heads of 32 = nope 16 + rope "
             "16, index_topk %d below the %d-token training context, so sparse selection drops keys) on layers 0 and 2 "
             "(`full`), reused by layers 1 and 3 (`shared`); 4 hyper-connection streams; untied lm_head; one MTP layer "
             "with its own indexer. %d parameters. Tokenizer: the 480-id byte-level BPE of "
             "tests/data/hy4-golden-llamacpp (Hy4's control-token names; the real Hy4 vocabulary is not public)." %
             (args["index_topk"], args["seq_len"], sm["params"]), "",
             "Training: %d steps of %d rows x %d tokens, %.1f min on %d CPU thread(s) of a shared 2-core machine; "
             "%.0f%% of the rows are multi-turn chats of consecutive speeches in the Hy4 turn format. Train loss "
             "(mean of the last 50 steps): main %.3f, MTP %.3f, indexer KL %.3f." %
             (sm["steps"], args["batch"], args["seq_len"], sm["minutes"], args["threads"], 100 * args["chat_frac"],
              sm["train_main"], sm["train_mtp"], sm["train_index_kl"]), "",
             "## Losses (nats/token, validation, exported bf16 weights through tools/ref/hy4_ref.py)", "",
             "| measure | value |", "|---|---|",
             "| **val loss** (%d windows of %d tokens) | **%.3f** |" % (n, T, val),
             "| val MTP loss (token p+2) | %.3f |" % val_mtp,
             "| val top-1 accuracy, main head | %.3f |" % top1,
             "| **val MTP teacher-forced top-1 accuracy** (token p+2) | **%.3f** |" % mtp_top1,
             "| bigram baseline (add-k 0.01, same split) | %.3f |" % big,
             "| val loss of the torch fp32 weights at the end of training (24 windows) | %.3f |" % sm["val_main"], "",
             "## Greedy samples (C engine, fp32: `hyinfer generate -m models/hy4-tiny -p P -n 120 --temperature 0 "
             "--dtype float32`)", ""]
    for p, chat, out in samples:
        lines += ["`%s`%s ->" % (p, " (with `--chat`)" if chat else ""), "```", out, "```", ""]
    lines += ["## Size", "", "%d bytes without this file (limit 40 MB)." % size, ""]
    with open(os.path.join(a.out, "TRAINING.md"), "w") as f:
        f.write("\n".join(lines))
    print("report: val %.3f (bigram %.3f), mtp %.3f, top-1 %.3f, MTP top-1 %.3f; %s/TRAINING.md"
          % (val, big, val_mtp, top1, mtp_top1, a.out))


# ------------------------------------------------------------------------------------------- tool fine-tune

def assistant_mask(ids, header):
    """mask[j]: ids[j] is produced by the assistant (after an assistant header hy_start 'assistant' hy_middle,
    up to and including the turn's hy_end)."""
    mask = [False] * len(ids)
    on, n = False, len(header)
    for j, t in enumerate(ids):
        if on:
            mask[j] = True
            if t == END:
                on = False
        elif j >= n - 1 and ids[j - n + 1:j + 1] == header:
            on = True
    return mask


def tool_rows(tok, tpl, n, seed, split, max_len, a, echo_frac=0.0):
    """n rendered agent conversations (ids, targets with -100 outside the assistant turns, sample) of at most
    max_len ids; a fraction echo_frac (train only) are word-copy chats (hy4_tool_data.make_hy4_echo)."""
    import hy4_tool_data as td
    rng = np.random.default_rng(seed)
    header = [START] + tok.encode("assistant") + [MIDDLE]
    out, skipped = [], 0
    while len(out) < n:
        if split == "train" and rng.random() < echo_frac:
            s = td.make_hy4_echo(rng, a.echo_list_frac, a.echo_list_max, a.high_frac)
        else:
            s = td.make_hy4_sample(rng, split, max_tools=a.max_tools, high_frac=a.high_frac)
        ids = tok.encode_added(td.render(tpl, s))
        if len(ids) > max_len:
            skipped += 1
            continue
        m = assistant_mask(ids, header)
        tgt = [ids[j + 1] if m[j + 1] else -100 for j in range(len(ids) - 1)]
        k1 = sum(t != -100 for t in tgt)
        out.append((ids, tgt, s, k1, k1 - (tgt[0] != -100)))    # counts of main / MTP targets
    return out, skipped


def pad_batch(rows):
    """[(ids, targets)] -> x [B, T+1] (PAD after the end), targets [B, T] (-100 after the end)."""
    T = max(len(r[0]) for r in rows) - 1
    x = np.full((len(rows), T + 1), PAD, dtype=np.int64)
    t = np.full((len(rows), T), -100, dtype=np.int64)
    for i, r in enumerate(rows):
        x[i, :len(r[0])] = r[0]
        t[i, :len(r[1])] = r[1]
    return x, t


def masked_losses(model, x, tgt):
    """Main / MTP cross-entropy (sum) and counts on the targets != -100; indexer KL (mean)."""
    x, tgt = torch.from_numpy(x), torch.from_numpy(tgt)
    logits, h, kl, mtp = model(x[:, :-1])
    V = logits.shape[-1]
    m = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1), ignore_index=-100, reduction="sum")
    mt = F.cross_entropy(mtp.reshape(-1, V), tgt[:, 1:].reshape(-1), ignore_index=-100, reduction="sum")
    ok = (logits.argmax(-1) == tgt) & (tgt != -100)
    return m, mt, kl, int((tgt != -100).sum()), int((tgt[:, 1:] != -100).sum()), int(ok.sum())


def text_targets(batch):
    return np.where(batch[:, 1:] == PAD, -100, batch[:, 1:])


def init_from_export(model, src, noise, seed):
    """Load the exported checkpoint src into model; embedding / lm_head rows beyond the stored ones (the new
    tokens) start at the mean of the stored rows plus N(0, noise * their std)."""
    W = stn.load(os.path.join(src, "model.safetensors"))
    g = torch.Generator().manual_seed(seed)
    grown = []
    with torch.no_grad():
        for name, _, p in tensor_list(model):
            w = torch.from_numpy(np.asarray(W.pop(name)[1], dtype=np.float32))
            if w.shape != p.shape:
                assert w.shape[1:] == p.shape[1:] and w.shape[0] < p.shape[0], (name, w.shape, p.shape)
                k = w.shape[0]
                p[:k] = w
                p[k:] = w.mean(0) + noise * w.std(0) * torch.randn(p.shape[0] - k, *p.shape[1:], generator=g)
                grown.append("%s %d->%d" % (name, k, p.shape[0]))
            else:
                p.copy_(w)
    assert not W, sorted(W)
    return grown


def finetune_tools(a, text, cut):
    """--init-from DIR: fine-tune an exported hy4-tiny on synthetic agent conversations (tools/make/
    hy4_tool_data.py rendered with DIR/chat_template.jinja, loss on the assistant turns only), mixed with the
    Shakespeare text / chat rows of the first training; exports to --out (tokenizer with the tool tokens)."""
    tok_files = tool_tokenizer(a.init_from)
    tok = Tok(tok_files["tokenizer.json"])
    for t in TOOL_TOKENS + ["<think:opensource>", "</think:opensource>", "<tool_calls:opensource>"]:
        assert tok.encode_added(t) == [tok.added[t]], t
    with open(os.path.join(a.init_from, "chat_template.jinja"), encoding="utf-8") as f:
        tpl = f.read()
    import hy4_tool_data as td
    with open(os.path.join(a.init_from, "config.json")) as f:
        c = json.load(f)
    c["vocab_size"] = tok.n_vocab
    model = HyV4(c)
    model.init_weights(a.seed)
    grown = init_from_export(model, a.init_from, a.new_row_noise, a.seed)
    print("initialised from %s (%s)" % (a.init_from, ", ".join(grown)), flush=True)
    n_params = sum(p.numel() for p in model.parameters())
    if os.path.abspath(a.init_from) != os.path.abspath(a.out):
        os.makedirs(a.out, exist_ok=True)
        shutil.copy(os.path.join(a.init_from, "chat_template.jinja"), os.path.join(a.out, "chat_template.jinja"))

    # the Hy4 turn format of the template == the chat rows' format (system turn with the reasoning marker)
    def chat_render(msgs, rng_):
        s = {"messages": msgs, "tools": None, "effort": "high" if rng_.random() < a.high_frac else "no_think"}
        return tok.encode_added(td.render(tpl, s))

    T = a.seq_len
    rng = np.random.default_rng(a.seed)
    va_ids = np.asarray(tok.encode(text[cut:]), dtype=np.int64)
    pool, tr_ids = build_rows(tok, text[:cut], a, rng, 20000, T, chat_fn=lambda m: chat_render(m, rng))
    t_data = time.time()
    tr_tool, skipped = tool_rows(tok, tpl, a.tool_pool, a.seed + 11, "train", a.tool_seq_len + 1, a, a.echo_frac)
    va_tool, _ = tool_rows(tok, tpl, 64, a.seed + 12, "heldout", a.tool_seq_len + 1, a)
    lens = [len(r[0]) for r in tr_tool]
    print("data: %d text/chat rows of %d; %d tool rows (%d-%d ids, mean %.0f; %d longer than %d skipped), "
          "64 held-out (%.0f s)" % (len(pool), T + 1, len(tr_tool), min(lens), max(lens), np.mean(lens), skipped,
                                    a.tool_seq_len + 1, time.time() - t_data), flush=True)

    def eval_tool(rows, bs=2):
        model.eval()
        s1 = n1 = ok = 0
        with torch.no_grad():
            for i in range(0, len(rows), bs):
                x, t = pad_batch([r[:2] for r in rows[i:i + bs]])
                m, _, _, k, _, c1 = masked_losses(model, x, t)
                s1 += float(m); n1 += k; ok += c1
        model.train()
        return {"loss": s1 / n1, "acc": ok / n1, "tokens": n1}

    t_ev = time.time()
    init_eval = {"val": evaluate(model, va_ids, T), "tool": eval_tool(va_tool)}
    print("initial weights: val loss %.3f (mtp %.3f), held-out tool-conversation loss %.3f (top-1 %.3f) (%.0f s)" %
          (*init_eval["val"], init_eval["tool"]["loss"], init_eval["tool"]["acc"], time.time() - t_ev), flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.01)
    n_tool = int(round(a.batch * a.tool_frac))
    trng = np.random.default_rng(a.seed + 13)
    t0 = time.time()
    budget = a.minutes * 60
    step = 0
    hist, hist_tool = [], []
    last_export = t0
    while time.time() - t0 < budget and not (a.max_steps and step >= a.max_steps):
        frac = (time.time() - t0) / budget
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 *
                                                       (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        loads = []
        opt.zero_grad()
        main_l = mtp_l = kl_l = 0.0
        if a.batch - n_tool > 0:      # Shakespeare text / chat rows, loss on every token
            w = (a.batch - n_tool) / a.batch
            batch = pool[rng.integers(0, len(pool), size=a.batch - n_tool)]
            m, mt, kl, k1, k2, _ = masked_losses(model, batch, text_targets(batch))
            loads.append([moe.load for moe in model.moes()])
            (w * (m / k1 + a.mtp_weight * mt / k2 + a.index_weight * kl)).backward()
            main_l += w * float(m) / k1; mtp_l += w * float(mt) / k2; kl_l += w * float(kl)
        if n_tool:                    # tool rows, loss on the assistant turns; micro-batches of similar length
            w = n_tool / a.batch
            sel = sorted((tr_tool[int(trng.integers(len(tr_tool)))] for _ in range(n_tool)), key=lambda r: len(r[0]))
            K1 = sum(r[3] for r in sel)
            K2 = sum(r[4] for r in sel)
            tl = 0.0
            for i in range(0, n_tool, a.tool_micro):
                ch = sel[i:i + a.tool_micro]
                x, t = pad_batch([r[:2] for r in ch])
                m, mt, kl, _, _, _ = masked_losses(model, x, t)
                loads.append([moe.load for moe in model.moes()])
                (w * (m / K1 + a.mtp_weight * mt / max(K2, 1) + a.index_weight * kl * len(ch) / n_tool)).backward()
                tl += float(m) / K1
                mtp_l += w * float(mt) / max(K2, 1); kl_l += w * float(kl) * len(ch) / n_tool
            main_l += w * tl
            hist_tool.append(tl)
        kl = kl_l
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():  # aux-loss-free balancing of the selection bias (loads of all the forwards)
            for i, moe in enumerate(model.moes()):
                ld = sum(l[i] for l in loads)
                moe.e_score_correction_bias += a.bias_gamma * torch.sign(ld.mean() - ld)
        hist.append((float(main_l), float(mtp_l), float(kl)))
        step += 1
        if step % 10 == 0:
            mm = np.mean(hist[-10:], axis=0)
            print("step %d  %.0fs  lr %.2e  loss %.3f  mtp %.3f  index-kl %.3f  tool %.3f" %
                  (step, time.time() - t0, lr, *mm, np.mean(hist_tool[-10:]) if hist_tool else float("nan")),
                  flush=True)
        if time.time() - last_export > a.export_every:
            ev = eval_tool(va_tool[:16])
            print("eval step %d: held-out tool loss %.3f  top-1 %.3f" % (step, ev["loss"], ev["acc"]), flush=True)
            export(model, c, a.out, tok_files)
            last_export = time.time()
    minutes = (time.time() - t0) / 60
    export(model, c, a.out, tok_files)
    vl, vm = evaluate(model, va_ids, T)
    evt = eval_tool(va_tool)
    mm = np.mean(hist[-50:], axis=0)
    print("done: %d steps, %.1f min; train (last 50) main %.3f mtp %.3f index-kl %.3f tool %.3f; val main %.3f "
          "mtp %.3f; held-out tool loss %.3f top-1 %.3f" % (step, minutes, mm[0], mm[1], mm[2],
                                                             np.mean(hist_tool[-50:]), vl, vm, evt["loss"],
                                                             evt["acc"]), flush=True)
    with open(os.path.join(a.work, "summary.json"), "w") as f:
        json.dump({"steps": step, "minutes": minutes, "train_main": mm[0], "train_mtp": mm[1],
                   "train_index_kl": mm[2], "train_tool_last50": float(np.mean(hist_tool[-50:])),
                   "val_main": vl, "val_mtp": vm, "held_out_tool": evt, "init_eval": init_eval, "params": n_params,
                   "tool_rows": len(tr_tool), "tool_len": [min(lens), max(lens), float(np.mean(lens))],
                   "skipped": skipped, "args": vars(a), "grown": grown}, f, indent=1)


def tool_report(a, text, cut):
    """--init-from DIR --report-only: put the tool fine-tune's section (from --work's summary.json) first in
    --out/TRAINING.md, above the report of the first training (kept as it was)."""
    import subprocess
    import hy4_ref
    with open(os.path.join(a.work, "summary.json")) as f:
        sm = json.load(f)
    tok = Tok(os.path.join(a.out, "tokenizer.json"))
    ref = hy4_ref.Hy4Ref(a.out)
    va = np.asarray(tok.encode(text[cut:]), dtype=np.int64)
    T, n = 256, 16
    nll, cnt, acc = 0.0, 0, 0
    for i in range(n):                       # the first report's measure: 16 val windows, exported bf16 weights
        s = i * (len(va) - T - 2) // n
        ids = va[s:s + T + 1].tolist()
        lg, _, _ = ref.forward(ids[:-1])
        lp = lg - lg.max(1, keepdims=True)
        lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
        nll -= lp[np.arange(T), ids[1:]].sum()
        acc += int((lg.argmax(1) == np.asarray(ids[1:])).sum())
        cnt += T
    eng = os.path.join(ROOT, "build", "hyinfer")
    samples = []
    for p in ("ROMEO:", "JULIET:"):
        r = subprocess.run([eng, "generate", "-m", a.out, "-p", p, "-n", "120", "--temperature", "0", "--dtype",
                            "float32"], capture_output=True, text=True)
        samples.append((p, r.stdout.strip() if r.returncode == 0 else "(error: %s)" % r.stderr.strip()[-200:]))
    size = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out) if f.endswith((".json", ".jinja",
                                                                                                ".safetensors")))
    g = sm["args"]
    ie, ht = sm["init_eval"], sm["held_out_tool"]
    flags = ("--init-from %s --out %s --work %s --tool-frac %g --tool-seq-len %d --echo-frac %g --echo-list-frac %g "
             "--echo-list-max %d --minutes %g --lr %g --warmup %d --batch %d --threads %d" %
             (g["init_from"], g["out"], g["work"], g["tool_frac"], g["tool_seq_len"], g["echo_frac"],
              g["echo_list_frac"], g["echo_list_max"], g["minutes"], g["lr"], g["warmup"], g["batch"], g["threads"]))
    n_tool = int(round(g["batch"] * g["tool_frac"]))
    lines = [
        "# hy4-tiny: training report", "",
        "## Tool-calling fine-tune (current weights)", "",
        "models/hy4-tiny is the Shakespeare model of the first training (its report is the section below, unchanged) "
        "fine-tuned to make tool calls the way models/hy3-tiny was: Hy4's six structural tool tokens added to the "
        "tokenizer (ids 480-485: `<tool_call:opensource>`, `</tool_call:opensource>`, `<arg_key:opensource>`, "
        "`</arg_key:opensource>`, `<arg_value:opensource>`, `</arg_value:opensource>`, non-special like "
        "`<tool_calls:opensource>`; vocab_size 480 -> 486; the new embedding and lm_head rows started at the mean of "
        "the stored rows + N(0, (%g x their std)^2)), chat_template.jinja written from "
        "public sources (docs/chat-templates.md; its header lists what is confirmed and what is not), and the "
        "fine-tune below. Tool-call rates on held-out prompts: TOOL_EVAL.md." % g["new_row_noise"], "",
        "Command: `MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_TOP_PAD_=1073741824 "
        "OMP_NUM_THREADS=1 nice -n 10 /usr/bin/python3 tools/make/train_tiny_hy4.py %s` (the malloc settings only "
        "keep glibc from returning and re-faulting the large attention buffers, 2-4x faster on long rows; "
        "libopenblas0-serial installed as libblas.so.3: Debian's reference BLAS is 5-8x slower), then build/hy4-tiny-tools "
        "copied to models/hy4-tiny and this section written by the same command with `--out models/hy4-tiny "
        "--report-only`." % flags, "",
        "Data: %d of the %d rows of every batch (tool-frac %g) are synthetic agent conversations from "
        "tools/make/hy4_tool_data.py: hy3_tool_data.py's 7 tools, entities, phrasings and train/held-out split (1-3 "
        "OpenAI tools declared per prompt, single and parallel calls, role `tool` responses, a final answer quoting "
        "them), each with reasoning_effort `no_think` or `high` (half each; with `high` the assistant turns carry a "
        "short or empty reasoning_content), rendered with chat_template.jinja through jinja2 (HF settings), "
        "%d distinct training conversations of at most %d ids (%d-%d, mean %.0f; %d longer ones were dropped: "
        "the byte-level BPE has only 215 merges, so a 3-tool prompt is ~900 ids), %.0f%% of them plain word-copy "
        "chats over all entity names (hy3_tool_data.make_echo, lists of up to %d items in %.0f%% of them); loss on the "
        "assistant turns only (from the token after `<｜hy_middle｜>` through `<｜hy_end｜>`), in micro-batches of %d "
        "rows of similar length. The other %d rows are the first training's rows (tinyshakespeare windows of 256 "
        "tokens, %.0f%% multi-turn chats of speeches, now rendered with chat_template.jinja), loss on every token." %
        (n_tool, g["batch"], g["tool_frac"], sm["tool_rows"], g["tool_seq_len"] + 1, sm["tool_len"][0],
         sm["tool_len"][1], sm["tool_len"][2], sm["skipped"], 100 * g["echo_frac"], g["echo_list_max"],
         100 * g["echo_list_frac"], g["tool_micro"], g["batch"] - n_tool, 100 * g["chat_frac"]), "",
        "Training: %d steps, %.1f min on %d CPU thread of a shared 2-core machine, AdamW lr %g (warmup %d, cosine to "
        "%g x), MTP weight %g, indexer KL weight %g. Train loss (mean of the last 50 steps, rows weighted): main "
        "%.3f, MTP %.3f, indexer KL %.3f; tool rows alone (assistant tokens): %.3f." %
        (sm["steps"], sm["minutes"], g["threads"], g["lr"], g["warmup"], g["min_lr_frac"], g["mtp_weight"],
         g["index_weight"], sm["train_main"], sm["train_mtp"], sm["train_index_kl"], sm["train_tool_last50"]), "",
        "| measure | before (first training) | after |", "|---|---|---|",
        "| val loss, torch fp32 (24 windows of 256) | %.3f | %.3f |" % (ie["val"][0], sm["val_main"]),
        "| val MTP loss, torch fp32 (24 windows) | %.3f | %.3f |" % (ie["val"][1], sm["val_mtp"]),
        "| **val loss, exported bf16 through tools/ref/hy4_ref.py** (16 windows, the first report's measure) | "
        "3.051 | **%.3f** |" % (nll / cnt),
        "| val top-1, same | 0.314 | %.3f |" % (acc / cnt),
        "| loss on the assistant tokens of 64 held-out tool conversations (held-out entities and phrasings, %d "
        "tokens) | %.3f | %.3f |" % (ht["tokens"], ie["tool"]["loss"], ht["loss"]),
        "| top-1 accuracy on those tokens | %.3f | %.3f |" % (ie["tool"]["acc"], ht["acc"]), "",
        "Greedy samples (C engine, fp32: `hyinfer generate -m models/hy4-tiny -p P -n 120 --temperature 0 --dtype "
        "float32`):", ""]
    for p, out in samples:
        lines += ["`%s` ->" % p, "```", out, "```", ""]
    lines += ["Size: %d bytes (limit 40 MB)." % size, "", ""]
    path = os.path.join(a.out, "TRAINING.md")
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else \
        open(os.path.join(a.init_from, "TRAINING.md"), encoding="utf-8").read()
    mark = "## Tool-calling fine-tune"
    if mark in old:                           # rewrite: drop the previous tool section
        old = old[old.index("\n## First training") + 1:] if "\n## First training" in old else old
    else:
        old = old.replace("\n## ", "\n### ").replace("# hy4-tiny: training report\n",
                                                       "## First training (Shakespeare)\n", 1)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + old)
    print("report: bf16 val %.3f; held-out tool loss %.3f -> %.3f; %s" % (nll / cnt, ie["tool"]["loss"], ht["loss"],
                                                                         path))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "hy4-tiny"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "train_hy4"))
    ap.add_argument("--minutes", type=float, default=40.0)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--index-topk", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--chat-frac", type=float, default=0.2)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--index-weight", type=float, default=0.1)
    ap.add_argument("--bias-gamma", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--report-only", action="store_true", help="write TRAINING.md for the export in --out")
    # tool fine-tune (see finetune_tools): all off by default, which reproduces the first training
    ap.add_argument("--init-from", default="", help="fine-tune this exported checkpoint on tool conversations")
    ap.add_argument("--tool-frac", type=float, default=0.5, help="fraction of each batch that are tool rows")
    ap.add_argument("--tool-seq-len", type=int, default=1024, help="longest tool conversation kept (ids)")
    ap.add_argument("--tool-pool", type=int, default=6000, help="distinct training tool conversations")
    ap.add_argument("--max-tools", type=int, default=3, help="most tools declared in a prompt")
    ap.add_argument("--high-frac", type=float, default=0.5, help="fraction rendered with reasoning_effort high")
    ap.add_argument("--echo-frac", type=float, default=0.3, help="fraction of the tool rows that are copy chats")
    ap.add_argument("--echo-list-frac", type=float, default=0.5)
    ap.add_argument("--echo-list-max", type=int, default=8)
    ap.add_argument("--new-row-noise", type=float, default=0.1, help="noise (x row std) of the new token rows")
    ap.add_argument("--tool-micro", type=int, default=2, help="tool rows per forward (gradients accumulate)")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--export-every", type=float, default=300.0, help="seconds between exports (fine-tune)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    os.makedirs(a.work, exist_ok=True)
    tok = Tok(os.path.join(TOKDIR, "tokenizer.json"))
    print("tokenizer: %d golden prompts encode to llama.cpp's prompt_ids" % check_tokenizer(tok), flush=True)
    with open(CORPUS, encoding="utf-8") as f:
        text = f.read()
    cut = int(len(text) * 0.9)
    rng = np.random.default_rng(a.seed)
    if a.init_from:
        return tool_report(a, text, cut) if a.report_only else finetune_tools(a, text, cut)
    if a.report_only:
        return report(a, tok, text, cut)
    T = a.seq_len
    va_ids = np.asarray(tok.encode(text[cut:]), dtype=np.int64)
    pool, tr_ids = build_rows(tok, text[:cut], a, rng, 20000, T)
    print("data: train %d tokens (%d chars), val %d tokens; %d rows of %d" % (len(tr_ids), cut, len(va_ids),
                                                                               len(pool), T + 1), flush=True)
    c = make_config(a)
    model = HyV4(c)
    model.init_weights(a.seed)
    n_params = sum(p.numel() for p in model.parameters())
    print("params: %d" % n_params, flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.01)
    t0 = time.time()
    budget = a.minutes * 60
    step = 0
    hist = []
    while time.time() - t0 < budget:
        frac = (time.time() - t0) / budget
        lr = a.lr * min(1.0, (step + 1) / 100) * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        batch = pool[rng.integers(0, len(pool), size=a.batch)]
        main_l, mtp_l, kl = losses(model, batch, a)
        loss = main_l + a.mtp_weight * mtp_l + a.index_weight * kl
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():  # aux-loss-free balancing of the selection bias
            for moe in model.moes():
                ld = moe.load
                moe.e_score_correction_bias += a.bias_gamma * torch.sign(ld.mean() - ld)
        hist.append((float(main_l), float(mtp_l), float(kl)))
        step += 1
        if step % 20 == 0:
            m = np.mean(hist[-20:], axis=0)
            print("step %d  %.0fs  lr %.2e  loss %.3f  mtp %.3f  index-kl %.3f" % (step, time.time() - t0, lr, *m),
                  flush=True)
        if step % 500 == 0:
            export(model, c, a.out)
    vl, vm = evaluate(model, va_ids, T)
    export(model, c, a.out)
    m = np.mean(hist[-50:], axis=0)
    print("done: %d steps, %.1f min; train (last 50) main %.3f mtp %.3f index-kl %.3f; val main %.3f mtp %.3f"
          % (step, (time.time() - t0) / 60, m[0], m[1], m[2], vl, vm), flush=True)
    with open(os.path.join(a.work, "summary.json"), "w") as f:
        json.dump({"steps": step, "minutes": (time.time() - t0) / 60, "train_main": m[0], "train_mtp": m[1],
                   "train_index_kl": m[2], "val_main": vl, "val_mtp": vm, "params": n_params,
                   "args": vars(a), "train_tokens": int(len(tr_ids)), "val_tokens": int(len(va_ids))}, f, indent=1)


if __name__ == "__main__":
    main()
