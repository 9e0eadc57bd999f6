#!/usr/bin/python3
"""Train the bundled tiny Hy4-preview (hy_v4) model on tinyshakespeare and export it in the hub layout.

Usage (what produced models/hy4-tiny; TRAINING.md there has the exact command line and the measured losses):
  OMP_NUM_THREADS=1 nohup nice -n 5 /usr/bin/python3 tools/make/train_tiny_hy4.py --out models/hy4-tiny \
      --minutes 40 --threads 1 > build/train_hy4/log.txt 2>&1 &

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
        with open(path, encoding="utf-8") as f:
            t = json.load(f)
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

    def decode(self, ids):
        s = "".join(self.inv.get(i, "") for i in ids if i < 471)
        return bytes(self.unb[c] for c in s).decode("utf-8", errors="replace")


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
        "transformers_version": "5.16.2", "vocab_size": 480, "hidden_size": a.hidden, "num_hidden_layers": nl,
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

def export(model, c, out):
    os.makedirs(out, exist_ok=True)
    T = []

    def bf(name, p):
        T.append((name, "BF16", p.detach().float().numpy()))

    def f32(name, p):
        T.append((name, "F32", p.detach().float().numpy()))

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
    stn.save(os.path.join(out, "model.safetensors"), T, metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
        f.write("\n")
    for fn in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(os.path.join(TOKDIR, fn), os.path.join(out, fn))


# ------------------------------------------------------------------------------------------- training

def build_rows(tok, text, a, rng, n_rows, T):
    """n_rows training rows of T+1 ids: corpus text from a random line start, or a chat of speeches."""
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
                row = chat_ids(tok, msgs)
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
