#!/usr/bin/python3
"""Train the bundled tiny Hy3 (hy_v3) model on tinyshakespeare and export it in the exact Hy3 layout.

Usage (what produced models/hy3-tiny; see TRAINING.md there for the exact command line):
  OMP_NUM_THREADS=1 nohup nice -n 5 /usr/bin/python3 tools/make/train_tiny_hy3.py --out models/hy3-tiny \
      --minutes 44 --batch 8 --threads 1 > build/train_hy3/log.txt 2>&1 &
  /usr/bin/python3 tools/make/train_tiny_hy3.py --check-golden   # torch math vs llama.cpp's hy_v3 golden
  /usr/bin/python3 tools/make/train_tiny_hy3.py --out models/hy3-tiny --report-only   # re-evaluate an export

Tool-calling fine-tune (issue 27 item 5; what produced build/hy3-tiny-tools, which became models/hy3-tiny: see
TRAINING.md there, which also lists the fourth phase), three
phases; the first two were stopped by hand right after a periodic checkpoint (steps 903 and 1393), each next
one resumes that checkpoint with more copy drills (no copying of names/numbers had emerged):
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 nohup nice -n 10 /usr/bin/python3 tools/make/train_tiny_hy3.py \
      --out build/hy3-tiny-tools --work build/train_hy3_tools --init-from models/hy3-tiny --tool-frac 0.5 \
      --tool-seq-len 520 --minutes 40 --lr 2e-3 --batch 8 --threads 1 > build/train_hy3_tools/log.txt 2>&1 &
  ... --init-from models/hy3-tiny --resume --tool-frac 0.5 --echo-frac 0.35 --echo-list-frac 0.6 \
      --tool-seq-len 520 --minutes 32 --lr 2e-3 --batch 8 --threads 1
  ... --init-from models/hy3-tiny --resume --tool-frac 0.625 --echo-frac 0.5 --echo-list-frac 0.9 \
      --echo-list-max 14 --tool-seq-len 520 --minutes 21 --lr 2e-3 --batch 8 --threads 1
  /usr/bin/python3 tools/make/eval_tool_calls.py --model build/hy3-tiny-tools     # held-out tool-call rates
(Debian's python3-torch uses the reference BLAS unless an optimised libblas.so.3 such as libopenblas0-pthread
is installed; with the reference one a step is 5-8x slower.)
--tool-frac F puts round(F * batch) synthetic agent conversations (tools/make/hy3_tool_data.py: 1-3 OpenAI
tools in the prompt, 1 or 2 parallel calls, role "tool" responses, a final answer quoting them), rendered
with the real template, into every batch; their loss is taken on the assistant turns only, and their logits
are computed only at those positions; --echo-frac of that pool are plain word-copy chats over all entity
names (see hy3_tool_data.make_echo for why). --init-from DIR starts from an exported checkpoint (the compact
table is rebuilt from the data; new ids start at the exported 'other' vector). The defaults (--tool-frac 0,
no --init-from) reproduce the original runs unchanged.

The torch model implements the Hy3 math of specs/hy3_architecture.md §2 and §4.1:
pre-norm blocks; RMSNorm without +1 offset; q/k per-head RMSNorm *before* NeoX (rotate_half) RoPE;
GQA (query head h -> kv head h // (n_heads / n_kv)); causal softmax attention with scale head_dim^-0.5;
layer 0 dense SwiGLU; layers >= 1 MoE: fp32 sigmoid router, expert_bias added for top-k *selection only*,
gathered unbiased scores renormalised (sum + 1e-20), times router_scaling_factor on the routed part,
plus one unscaled, ungated shared expert; final RMSNorm; tied lm_head. The MTP layer (stored as
model.layers.<num_hidden_layers>) takes the final-normed hidden h_p and the embedding of token p+1:
eh_proj(concat(enorm(emb), hnorm(h))) -> full MoE decoder layer -> final_layernorm -> lm_head, and is
trained (weight --mtp-weight) on token p+2. expert_bias is updated aux-loss-free (DeepSeek-V3 style):
after every step, bias_e += gamma * sign(mean_load - load_e).

Speed: the training softmax runs over the token ids that occur in the data (compact table) plus one
"other" class standing for all remaining rows (they are exported as one shared vector `u` plus tiny
noise, and the class logit is u.h + log(#other rows), which is exactly the full-vocabulary softmax when
those rows are equal). So the exported model puts (almost) no probability on unused ids.

Data: tests/data/corpora/tinyshakespeare.txt, first 90% (by characters) for training, last 10%
for validation, tokenized with the real Hunyuan BPE (tools/make/make_hy3_tokenizer.py). Training sequences
are BOS + corpus text from a random line start, or (fraction --chat-frac) consecutive speeches rendered
as a multi-turn no_think chat with the real tencent-Hy3.jinja template (is_training=True).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
sys.path.insert(0, os.path.join(ROOT, "tools", "make"))
import safetensors_np as stn  # noqa: E402
import make_hy3_tokenizer as hytok  # noqa: E402

CORPUS = os.path.join(ROOT, "tests", "data", "corpora", "tinyshakespeare.txt")


# ----------------------------------------------------------------------------------------- config

def make_config(a):
    n = a.layers
    return {
        "architectures": ["HYV3ForCausalLM"],
        "model_type": "hy_v3",
        "dtype": "bfloat16",
        "vocab_size": a.vocab_size,
        "hidden_size": a.hidden,
        "intermediate_size": a.intermediate,
        "num_hidden_layers": n,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "head_dim": a.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": a.max_pos,
        "rms_norm_eps": 1e-5,
        "rope_parameters": {"rope_theta": a.rope_theta, "rope_type": "default"},
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "first_k_dense_replace": 1,
        "mlp_layer_types": ["dense"] + ["sparse"] * (n - 1),
        "num_experts": a.experts,
        "num_experts_per_tok": a.topk,
        "num_shared_experts": 1,
        "moe_intermediate_size": a.moe_intermediate,
        "expert_hidden_dim": a.moe_intermediate,
        "router_scaling_factor": a.router_scale,
        "route_norm": True,
        "moe_router_use_sigmoid": True,
        "moe_router_enable_expert_bias": True,
        "qk_norm": True,
        "enable_moe_fp32_combine": False,
        "enable_lm_head_fp32": True,
        "enable_attention_fp32_softmax": False,
        "num_nextn_predict_layers": 1,
        "bos_token_id": hytok.BOS,
        "eos_token_id": hytok.EOS,
        "pad_token_id": hytok.PAD,
        "sep_token_id": hytok.ASSISTANT,
        "eod_token_id": hytok.EOD,
        "initializer_range": 0.02,
        "use_cache": True,
        "output_router_logits": False,
        "use_grouped_mm": False,
        "transformers_version": "5.6.0",
    }


GENERATION_CONFIG = {
    "bos_token_id": hytok.BOS,
    "eos_token_id": [hytok.EOS, hytok.EOD],
    "pad_token_id": hytok.PAD,
    "do_sample": True,
    "temperature": 0.8,
    "top_p": 0.95,
    "top_k": 40,
    "transformers_version": "5.6.0",
}


# ------------------------------------------------------------------------------------------ model

class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_cos_sin(T, D, theta):
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float32) / D))      # [D/2]
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]            # [T, D/2] fp32
    ang = torch.cat([ang, ang], dim=-1)                                           # NeoX: (j, j + D/2)
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    """x [B, h, T, D]; out[j] = x[j] cos - x[j+D/2] sin, out[j+D/2] = x[j+D/2] cos + x[j] sin."""
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos + rot * sin


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, self.nh, self.nkv, self.D = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.q_proj = nn.Linear(H, self.nh * self.D, bias=False)
        self.k_proj = nn.Linear(H, self.nkv * self.D, bias=False)
        self.v_proj = nn.Linear(H, self.nkv * self.D, bias=False)
        self.o_proj = nn.Linear(self.nh * self.D, H, bias=False)
        self.q_norm = RMSNorm(self.D, c["rms_norm_eps"])
        self.k_norm = RMSNorm(self.D, c["rms_norm_eps"])

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(B, T, self.nh, self.D)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, self.nkv, self.D)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.nkv, self.D).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        g = self.nh // self.nkv
        k = k.repeat_interleave(g, dim=1)          # query head h uses kv head h // g
        v = v.repeat_interleave(g, dim=1)
        s = (q @ k.transpose(-1, -2)) * (self.D ** -0.5) + mask
        o = torch.softmax(s, dim=-1) @ v                      # (fp32 training)
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.nh * self.D))


class DenseMLP(nn.Module):
    def __init__(self, H, I):
        super().__init__()
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, I, E = c["hidden_size"], c["moe_intermediate_size"], c["num_experts"]
        self.E, self.k, self.scale = E, c["num_experts_per_tok"], c["router_scaling_factor"]
        self.route_norm = c.get("route_norm", True)
        self.router_gate = nn.Parameter(torch.empty(E, H))          # mlp.router.gate.weight (F32)
        self.register_buffer("expert_bias", torch.zeros(E))         # mlp.expert_bias (F32)
        self.gate = nn.Parameter(torch.empty(E, I, H))              # experts.E.gate_proj.weight
        self.up = nn.Parameter(torch.empty(E, I, H))                # experts.E.up_proj.weight
        self.down = nn.Parameter(torch.empty(E, H, I))              # experts.E.down_proj.weight
        self.shared_mlp = DenseMLP(H, I * c["num_shared_experts"])
        self.last_load = torch.zeros(E)

    def forward(self, x):
        shp = x.shape
        x = x.reshape(-1, shp[-1])
        s = torch.sigmoid(x @ self.router_gate.t())                                 # [N, E] (fp32 training)
        idx = torch.topk((s + self.expert_bias).detach(), self.k, dim=-1).indices  # bias: selection only
        w = s.gather(1, idx)                                                        # unbiased scores
        if self.route_norm:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)                               # route_norm
        w = w * self.scale                                                          # routed part only
        out = torch.zeros_like(x)
        load = torch.zeros(self.E)
        for e in range(self.E):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            load[e] = tok.numel()
            if tok.numel() == 0:
                continue
            xe = x[tok]
            ye = (F.silu(xe @ self.gate[e].t()) * (xe @ self.up[e].t())) @ self.down[e].t()
            out = out.index_add(0, tok, ye * w[tok, slot].unsqueeze(-1))
        self.last_load = load
        return (out + self.shared_mlp(x)).reshape(shp)


class DecoderLayer(nn.Module):
    def __init__(self, c, dense):
        super().__init__()
        H, eps = c["hidden_size"], c["rms_norm_eps"]
        self.input_layernorm = RMSNorm(H, eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(H, eps)
        self.mlp = DenseMLP(H, c["intermediate_size"]) if dense else MoE(c)

    def forward(self, h, cos, sin, mask):
        h = h + self.self_attn(self.input_layernorm(h), cos, sin, mask)
        return h + self.mlp(self.post_attention_layernorm(h))


class MTPLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, eps = c["hidden_size"], c["rms_norm_eps"]
        self.enorm = RMSNorm(H, eps)
        self.hnorm = RMSNorm(H, eps)
        self.eh_proj = nn.Linear(2 * H, H, bias=False)
        self.layer = DecoderLayer(c, dense=False)
        self.final_layernorm = RMSNorm(H, eps)

    def forward(self, emb_next, h_final, cos, sin, mask):
        u = self.eh_proj(torch.cat([self.enorm(emb_next), self.hnorm(h_final)], dim=-1))
        return self.final_layernorm(self.layer(u, cos, sin, mask))


class HyV3(nn.Module):
    """emb: [R, H] rows indexed by the ids this model instance uses (compact ids while training, real
    ids for a loaded export). n_other > 0 adds the 'other rows' class (vector other_row, count n_other)."""

    def __init__(self, c, n_rows, n_other=0):
        super().__init__()
        self.c = c
        H = c["hidden_size"]
        self.embed = nn.Parameter(torch.empty(n_rows, H))
        self.n_other = n_other
        self.other_row = nn.Parameter(torch.empty(H)) if n_other > 0 else None
        self.layers = nn.ModuleList([DecoderLayer(c, dense=(i < c["first_k_dense_replace"]))
                                     for i in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(H, c["rms_norm_eps"])
        self.mtp = MTPLayer(c)
        self.lm_head = None if c.get("tie_word_embeddings", False) else nn.Parameter(torch.empty(n_rows, H))
        self._rope = {}

    def init_weights(self, std=0.02, seed=0):
        g = torch.Generator().manual_seed(seed)
        for name, p in self.named_parameters():
            if p.dim() == 1 and name != "other_row":
                continue                                  # norms stay at ones
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g) * std)
        n_res = 2 * (len(self.layers) + 1)
        for name, p in self.named_parameters():           # GPT-2 style residual-branch scaling
            if name.endswith("o_proj.weight") or name.endswith("down_proj.weight") or name.endswith(".down"):
                with torch.no_grad():
                    p.mul_(1.0 / math.sqrt(n_res))

    def rope(self, T):
        if T not in self._rope:
            self._rope[T] = rope_cos_sin(T, self.c["head_dim"], self.c["rope_parameters"]["rope_theta"])
        return self._rope[T]

    @staticmethod
    def causal_mask(T):
        return torch.full((T, T), float("-inf")).triu(1)

    def trunk(self, ids):
        """ids [B, T] -> final-normed hidden [B, T, H]."""
        T = ids.shape[1]
        cos, sin = self.rope(T)
        mask = self.causal_mask(T)
        h = self.embed[ids]
        for layer in self.layers:
            h = layer(h, cos, sin, mask)
        return self.norm(h)

    def mtp_hidden(self, h_final, next_ids):
        """h_final [B, T, H] rows p = 0..T-1, next_ids [B, T] = token p+1 -> MTP output (final_layernorm)."""
        T = next_ids.shape[1]
        cos, sin = self.rope(T)
        return self.mtp(self.embed[next_ids], h_final, cos, sin, self.causal_mask(T))

    def logits(self, x):
        if self.lm_head is not None:
            return x @ self.lm_head.t()
        if not self.n_other:
            return x @ self.embed.t()
        w = torch.cat([self.embed, self.other_row.unsqueeze(0)], dim=0)
        b = torch.zeros(w.shape[0])
        b[-1] = math.log(self.n_other)
        return F.linear(x, w, b)

    def moe_modules(self):
        return [l.mlp for l in self.layers if isinstance(l.mlp, MoE)] + [self.mtp.layer.mlp]

    def losses(self, seq):
        """seq [B, T+2] -> (main CE over T rows, MTP CE over T rows, main logits, mtp logits)."""
        T = seq.shape[1] - 2
        x = seq[:, :T]
        h = self.trunk(x)
        lg = self.logits(h)
        main = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), seq[:, 1:T + 1].reshape(-1))
        g = self.mtp_hidden(h, seq[:, 1:T + 1])
        lg2 = self.logits(g)
        mtp = F.cross_entropy(lg2.reshape(-1, lg2.shape[-1]), seq[:, 2:T + 2].reshape(-1))
        return main, mtp, lg, lg2


# ----------------------------------------------------------------------------------- export/load

def export(model, c, out_dir, full_ids, noise_seed=1234):
    """Write model.safetensors (+ config.json, generation_config.json) in the Hy3 inner layout.
    full_ids[i] = real vocabulary id of compact row i."""
    H, V = c["hidden_size"], c["vocab_size"]
    with torch.no_grad():
        emb = np.empty((V, H), dtype=np.float32)
        g = np.random.default_rng(noise_seed)
        emb[:] = model.other_row.numpy()[None, :] + g.standard_normal((V, H)).astype(np.float32) * 1e-3
        emb[np.asarray(full_ids)] = model.embed.numpy()
    t = [("model.embed_tokens.weight", "BF16", emb)]

    def bf(name, p):
        t.append((name, "BF16", p.detach().float().numpy()))

    def f32(name, p):
        t.append((name, "F32", p.detach().float().numpy()))

    def layer(L, lay):
        pre = "model.layers.%d." % L
        bf(pre + "input_layernorm.weight", lay.input_layernorm.weight)
        bf(pre + "post_attention_layernorm.weight", lay.post_attention_layernorm.weight)
        a = lay.self_attn
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            bf(pre + "self_attn.%s.weight" % n, getattr(a, n).weight)
        bf(pre + "self_attn.q_norm.weight", a.q_norm.weight)
        bf(pre + "self_attn.k_norm.weight", a.k_norm.weight)
        m = lay.mlp
        if isinstance(m, DenseMLP):
            for n in ("gate_proj", "up_proj", "down_proj"):
                bf(pre + "mlp.%s.weight" % n, getattr(m, n).weight)
        else:
            f32(pre + "mlp.router.gate.weight", m.router_gate)
            f32(pre + "mlp.expert_bias", m.expert_bias)
            for e in range(m.E):
                bf(pre + "mlp.experts.%d.gate_proj.weight" % e, m.gate[e])
                bf(pre + "mlp.experts.%d.up_proj.weight" % e, m.up[e])
                bf(pre + "mlp.experts.%d.down_proj.weight" % e, m.down[e])
            for n in ("gate_proj", "up_proj", "down_proj"):
                bf(pre + "mlp.shared_mlp.%s.weight" % n, getattr(m.shared_mlp, n).weight)

    for L, lay in enumerate(model.layers):
        layer(L, lay)
    Lm = c["num_hidden_layers"]
    layer(Lm, model.mtp.layer)
    pre = "model.layers.%d." % Lm
    bf(pre + "enorm.weight", model.mtp.enorm.weight)
    bf(pre + "hnorm.weight", model.mtp.hnorm.weight)
    bf(pre + "eh_proj.weight", model.mtp.eh_proj.weight)
    bf(pre + "final_layernorm.weight", model.mtp.final_layernorm.weight)
    bf("model.norm.weight", model.norm.weight)
    for name, dt, arr in t:
        if arr.ndim == 2:
            assert arr.shape[1] % 32 == 0, (name, arr.shape)
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, "model.safetensors.tmp")
    stn.save(tmp, t, metadata={"format": "pt"})
    os.replace(tmp, os.path.join(out_dir, "model.safetensors"))
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(GENERATION_CONFIG, f, indent=2)
        f.write("\n")
    return sum(int(np.prod(a.shape)) for _, _, a in t)


def load_export(out_dir):
    """Build a full-vocabulary HyV3 (fp32 math) from an exported directory (weights as stored, bf16 widened)."""
    with open(os.path.join(out_dir, "config.json")) as f:
        c = json.load(f)
    w = {k: torch.from_numpy(np.array(v[1], dtype=np.float32)) for k, v in
         stn.load(os.path.join(out_dir, "model.safetensors")).items()}
    m = HyV3(c, c["vocab_size"])
    used = set()
    outer = {".mlp.router.gate.": ".mlp.gate.", ".mlp.expert_bias": ".mlp.e_score_correction_bias",
             ".mlp.shared_mlp.": ".mlp.shared_experts."}

    def get(n):
        if n not in w:                       # HF "outer" spelling (convert_ckpt_to_outer.py)
            for a, b in outer.items():
                n = n.replace(a, b)
        used.add(n)
        return w[n]

    def lin(mod, n):
        mod.weight.data.copy_(get(n))

    def layer(L, lay):
        pre = "model.layers.%d." % L
        lin(lay.input_layernorm, pre + "input_layernorm.weight")
        lin(lay.post_attention_layernorm, pre + "post_attention_layernorm.weight")
        for n in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
            lin(getattr(lay.self_attn, n), pre + "self_attn.%s.weight" % n)
        mm = lay.mlp
        if isinstance(mm, DenseMLP):
            for n in ("gate_proj", "up_proj", "down_proj"):
                lin(getattr(mm, n), pre + "mlp.%s.weight" % n)
        else:
            mm.router_gate.data.copy_(get(pre + "mlp.router.gate.weight"))
            mm.expert_bias.copy_(get(pre + "mlp.expert_bias"))
            for e in range(mm.E):
                mm.gate.data[e] = get(pre + "mlp.experts.%d.gate_proj.weight" % e)
                mm.up.data[e] = get(pre + "mlp.experts.%d.up_proj.weight" % e)
                mm.down.data[e] = get(pre + "mlp.experts.%d.down_proj.weight" % e)
            for n in ("gate_proj", "up_proj", "down_proj"):
                lin(getattr(mm.shared_mlp, n), pre + "mlp.shared_mlp.%s.weight" % n)

    m.embed.data.copy_(get("model.embed_tokens.weight"))
    for L, lay in enumerate(m.layers):
        layer(L, lay)
    Lm = c["num_hidden_layers"]
    layer(Lm, m.mtp.layer)
    for n in ("enorm", "hnorm", "eh_proj", "final_layernorm"):
        lin(getattr(m.mtp, n), "model.layers.%d.%s.weight" % (Lm, n))
    lin(m.norm, "model.norm.weight")
    if m.lm_head is not None:
        m.lm_head.data.copy_(get("lm_head.weight"))
    assert used == set(w), "unexpected tensors: %s" % sorted(set(w) - used)
    return m, c


@torch.no_grad()
def greedy(model, ids, n_new, stop=()):
    ids = list(ids)
    out = []
    for _ in range(n_new):
        h = model.trunk(torch.tensor([ids]))
        nxt = int(model.logits(h[0, -1]).argmax())
        ids.append(nxt)
        out.append(nxt)
        if nxt in stop:
            break
    return out


def check_llamacpp_golden(golden_dir):
    """Run this file's torch Hy3 (float64) on the llama.cpp golden checkpoint (hy3-golden-b: outer names,
    untied lm_head, route_norm false) and compare teacher-forced logits, greedy ids and MTP rows.
    Returns (cases_ok, n_cases, max |dlogit| main, max |dlogit| mtp, mtp argmax agree, mtp rows)."""
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        m, _ = load_export(os.path.join(golden_dir, "hy3-golden-b"))
        m = m.double().eval()
        for mod in m.modules():
            if isinstance(mod, MoE):
                mod.expert_bias = mod.expert_bias.double()
        with open(os.path.join(golden_dir, "golden.json")) as f:
            g = json.load(f)
        mx = mxm = 0.0
        ok = agree = rows = 0
        with torch.no_grad():
            for cs in g["cases"]:
                s = cs["prompt_ids"] + cs["generated_ids"]
                P = len(cs["prompt_ids"])
                lg = m.logits(m.trunk(torch.tensor([s[:-1]])))[0]
                mx = max(mx, (lg[P - 1] - torch.tensor(cs["last_prompt_logits"])).abs().max().item())
                for st, step in enumerate(cs["steps"]):
                    for i, v in step["top10"]:
                        mx = max(mx, abs(lg[P - 1 + st, i].item() - v))
                ok += lg[P - 1:].argmax(-1).tolist() == cs["generated_ids"]
                if "mtp" in cs:
                    mt = cs["mtp"]
                    hh = m.trunk(torch.tensor([s]))
                    l2 = m.logits(m.mtp_hidden(hh[:, :len(s) - 1], torch.tensor([s[1:]])))[0]
                    for r in range(mt["full_logits_rows"]):
                        mxm = max(mxm, (l2[r] - torch.tensor(mt["logits"][r])).abs().max().item())
                    agree += sum(int(a == b) for a, b in zip(l2.argmax(-1).tolist(), mt["argmax"]))
                    rows += len(mt["argmax"])
        return ok, len(g["cases"]), mx, mxm, agree, rows
    finally:
        torch.set_default_dtype(prev)


# ------------------------------------------------------------------------------------------- data

_TEMPLATES = {}


def render_chat(template_src, messages, **kw):
    """Render with jinja2 the way HF does (trim_blocks, lstrip_blocks, raise_exception)."""
    import jinja2

    if template_src not in _TEMPLATES:
        def raise_exception(msg):
            raise jinja2.exceptions.TemplateError(msg)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):   # HF's override
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                              sort_keys=sort_keys)

        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
        env.globals["raise_exception"] = raise_exception
        env.filters["tojson"] = tojson
        _TEMPLATES[template_src] = env.from_string(template_src)
    return _TEMPLATES[template_src].render(messages=messages, **kw)


def assistant_mask(ids):
    """mask[j] = True where ids[j] is generated by the assistant: everything after an assistant header
    <｜hy_Assistant｜><think></think> up to and including the turn's EOS."""
    mask = [False] * len(ids)
    on = False
    for j, t in enumerate(ids):
        if on:
            mask[j] = True
            if t == hytok.EOS:
                on = False
        elif t == hytok.THINK_END and j >= 2 and ids[j - 1] == hytok.THINK and ids[j - 2] == hytok.ASSISTANT:
            on = True
    return mask


def tool_samples(tok, template_src, n, seed, split, max_len, echo_frac=0.0, echo_list_frac=0.0,
                 echo_list_max=4):
    """n rendered agent conversations (ids, assistant mask, sample) no longer than max_len tokens; a fraction
    echo_frac (train only) are hy3_tool_data.make_echo word-copy chats."""
    import hy3_tool_data as td

    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        s = td.make_echo(rng, echo_list_frac, echo_list_max) if split == "train" and rng.random() < echo_frac \
            else td.make_sample(rng, split)
        txt = render_chat(template_src, s["messages"], tools=s["tools"], is_training=True)
        ids = tok.encode(txt, allow_special=True)
        if len(ids) > max_len:
            continue
        out.append((ids, assistant_mask(ids), s))
    return out


def speeches(text):
    return [b.strip("\n") for b in text.split("\n\n") if b.strip()]


def build_data(a, tok, template_src):
    with open(CORPUS, encoding="utf-8") as f:
        text = f.read()
    cut = int(len(text) * 0.9)
    tr_text, va_text = text[:cut], text[cut:]
    tr = tok.encode_ordinary(tr_text)
    va = tok.encode_ordinary(va_text)

    def line_starts(ids):
        st = [0]
        for i in range(len(ids) - 1):
            if tok.decoder[ids[i]].endswith(b"\n"):
                st.append(i + 1)
        return st

    # the exact no_think chat format, checked against the jinja template
    one = render_chat(template_src, [{"role": "user", "content": "A"}, {"role": "assistant", "content": "B"}],
                      is_training=True)
    want = (hytok.HY3_SPECIALS[0] + hytok.HY3_SPECIALS[8] + "reasoning_effort:no_think" + hytok.HY3_SPECIALS[2]
            + "A" + hytok.HY3_SPECIALS[3] + hytok.HY3_SPECIALS[6] + hytok.HY3_SPECIALS[7] + "B"
            + hytok.HY3_SPECIALS[4])
    assert one == want, repr(one)

    def chats(txt, n, rng, need):
        sp = speeches(txt)
        out = []
        for _ in range(n):
            i = int(rng.integers(0, len(sp) - 2))
            msgs, chars = [], 0
            while chars < 5 * need and i < len(sp):
                msgs.append({"role": "user" if len(msgs) % 2 == 0 else "assistant", "content": sp[i]})
                chars += len(sp[i])
                i += 1
            if len(msgs) % 2:
                msgs = msgs[:-1] if len(msgs) > 1 else msgs + [{"role": "assistant", "content": sp[0]}]
            ids = tok.encode(render_chat(template_src, msgs, is_training=True), allow_special=True)
            out.append(ids)
        return out

    rng = np.random.default_rng(a.seed)
    need = a.seq_len + 2
    tr_chat = chats(tr_text, a.chat_pool, rng, need)
    va_chat = chats(va_text, 64, np.random.default_rng(a.seed + 1), need)
    d = {"train": tr, "val": va, "train_starts": line_starts(tr), "train_chat": tr_chat,
         "val_chat": va_chat, "train_chars": len(tr_text), "val_chars": len(va_text),
         "train_tool": [], "val_tool": []}
    if a.tool_frac > 0:
        # the tokenizer must see the tool markers as single added tokens
        for t in hytok.HY3_SPECIALS[9:]:
            assert tok.encode(t, allow_special=True) == [hytok.special_tokens()[t]], t
        d["train_tool"] = tool_samples(tok, template_src, a.tool_pool, a.seed + 11, "train", a.tool_seq_len + 1,
                                        a.echo_frac, a.echo_list_frac, a.echo_list_max)
        d["val_tool"] = tool_samples(tok, template_src, 64, a.seed + 12, "heldout", a.tool_seq_len + 1)
    return d


def pad_to(ids, n):
    ids = ids[:n]
    return ids + [hytok.PAD] * (n - len(ids)), len(ids)


# ------------------------------------------------------------------------------------------- main

def bigram_val_loss(tr, va_targets_prev, n_vocab, k):
    """Add-k bigram over compact ids trained on tr; returns mean NLL over (prev, target) pairs."""
    tr = np.asarray(tr)
    pairs = tr[:-1].astype(np.int64) * n_vocab + tr[1:]
    u, cnt = np.unique(pairs, return_counts=True)
    big = dict(zip(u.tolist(), cnt.tolist()))
    prev_tot = np.zeros(n_vocab)
    np.add.at(prev_tot, tr[:-1], 1)
    nll = 0.0
    for p, t in va_targets_prev:
        c = big.get(int(p) * n_vocab + int(t), 0)
        nll -= math.log((c + k) / (prev_tot[p] + k * n_vocab))
    return nll / len(va_targets_prev)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="models/hy3-tiny")
    ap.add_argument("--work", default="build/train_hy3")
    ap.add_argument("--minutes", type=float, default=38.0)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--export-every", type=float, default=300.0, help="seconds between checkpoint exports")
    ap.add_argument("--seq-len", type=int, default=192)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--wd", type=float, default=0.05)
    ap.add_argument("--chat-frac", type=float, default=0.25)
    ap.add_argument("--chat-pool", type=int, default=3000)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--mtp-frac", type=float, default=0.35, help="fraction of rows carrying the MTP loss")
    ap.add_argument("--bias-step", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--init-from", default="", help="start from this exported checkpoint directory (weights)")
    ap.add_argument("--tool-frac", type=float, default=0.0,
                    help="fraction of each batch that are synthetic tool-calling conversations (0 = off)")
    ap.add_argument("--tool-seq-len", type=int, default=520, help="context of the tool-conversation rows")
    ap.add_argument("--tool-pool", type=int, default=6000, help="number of distinct training tool conversations")
    ap.add_argument("--echo-list-frac", type=float, default=0.0,
                    help="fraction of the word-copy chats that copy a list of 2-4 names/numbers (copy drill)")
    ap.add_argument("--echo-list-max", type=int, default=4, help="longest copy-drill list")
    ap.add_argument("--echo-frac", type=float, default=0.1,
                    help="fraction of the tool pool that are plain word-copy chats over all entities (see hy3_tool_data)")
    ap.add_argument("--resume", action="store_true",
                    help="continue from WORK/state.pt (weights only; fresh optimizer, warmup and cosine schedule)")
    ap.add_argument("--golden", default=os.path.join(ROOT, "tests", "data", "hy3-golden-llamacpp"),
                    help="llama.cpp hy_v3 golden used to check this file's torch math")
    ap.add_argument("--check-golden", action="store_true", help="only run the golden check and exit")
    # architecture
    ap.add_argument("--vocab-size", type=int, default=128192)
    ap.add_argument("--hidden", type=int, default=96)
    ap.add_argument("--intermediate", type=int, default=384)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--topk", type=int, default=2)
    ap.add_argument("--moe-intermediate", type=int, default=128)
    ap.add_argument("--router-scale", type=float, default=2.0)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--max-pos", type=int, default=1024)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    env = "OMP_NUM_THREADS=%s " % os.environ["OMP_NUM_THREADS"] if "OMP_NUM_THREADS" in os.environ else ""
    cmdline = "%snice -n %d /usr/bin/python3 %s" % (env, os.nice(0), " ".join(sys.argv))
    gres = check_llamacpp_golden(a.golden)
    gline = ("llama.cpp golden (%s): teacher-forced greedy ids equal on %d/%d cases, max |dlogit| main %.2e, "
             "MTP %.2e, MTP argmax %d/%d" % ((os.path.relpath(a.golden, ROOT),) + gres))
    print(gline, flush=True)
    if a.check_golden:
        sys.exit(0 if gres[0] == gres[1] and gres[2] < 1e-4 and gres[3] < 1e-4 else 1)
    train_cmd = cmdline
    if a.report_only and os.path.exists(os.path.join(a.out, "TRAINING.md")):
        with open(os.path.join(a.out, "TRAINING.md"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("Command: `"):
                    train_cmd = line[len("Command: `"):].rstrip().rstrip("`")

    t0 = time.time()
    tok = hytok.default_tokenizer()
    with open(hytok.TEMPLATE, encoding="utf-8") as f:
        template_src = f.read()
    data = build_data(a, tok, template_src)
    print("data: train %d tokens, val %d tokens, %d chat samples (%.1fs)" %
          (len(data["train"]), len(data["val"]), len(data["train_chat"]), time.time() - t0), flush=True)

    # compact vocabulary: every id in the data + the specials the chat format uses
    used = set(data["train"]) | set(data["val"])
    for s in data["train_chat"] + data["val_chat"]:
        used |= set(s)
    for s in data["train_tool"] + data["val_tool"]:
        used |= set(s[0])
    used |= {hytok.BOS, hytok.EOS, hytok.USER, hytok.ASSISTANT, hytok.THINK, hytok.THINK_END,
             hytok.REASONING_MODE}
    full_ids = sorted(used)
    to_c = {t: i for i, t in enumerate(full_ids)}
    R = len(full_ids)
    PADC = -100
    print("compact vocabulary: %d ids" % R, flush=True)

    c = make_config(a)
    L = a.seq_len

    def cseq(ids):
        return [to_c[t] for t in ids]

    tr_c, va_c = np.asarray(cseq(data["train"])), np.asarray(cseq(data["val"]))
    bosc = to_c[hytok.BOS]
    starts = np.asarray([s for s in data["train_starts"] if s + L + 1 <= len(tr_c)])

    def chat_row(ids):
        ids, n = pad_to(cseq(ids), L + 2)
        return [x if i < n else PADC for i, x in enumerate(ids)]

    tr_chat = [chat_row(s) for s in data["train_chat"]]
    va_chat = [chat_row(s) for s in data["val_chat"]]
    LT = a.tool_seq_len

    def tool_row(sample):
        """inputs row of LT + 2 ids; targets outside assistant turns (and padding) are PADC."""
        ids, mask = sample[0], sample[1]
        ids_c = cseq(ids)
        row = [x if mask[i] else PADC for i, x in enumerate(ids_c)] + [PADC] * (LT + 2 - len(ids_c))
        inp = ids_c + [to_c[hytok.EOS]] * (LT + 2 - len(ids_c))   # after the sample: never read by a target
        return inp[:LT + 2], row[:LT + 2]

    tr_tool = [tool_row(s) for s in data["train_tool"]]
    va_tool = [tool_row(s) for s in data["val_tool"]]
    # validation windows: BOS + contiguous val text
    va_rows = [[bosc] + va_c[o:o + L + 1].tolist() for o in range(0, len(va_c) - L - 1, L + 1)]

    model = HyV3(c, R, n_other=c["vocab_size"] - R)
    model.init_weights(seed=a.seed)

    def init_from_export(m, src):
        """Load the exported checkpoint src into the compact model m (rows by real id; 'other' = mean of the rest)."""
        full0, c0 = load_export(src)
        for k in ("hidden_size", "num_hidden_layers", "num_experts", "vocab_size"):
            assert c0[k] == c[k], (k, c0[k], c[k])
        sd = full0.state_dict()
        with torch.no_grad():
            fi = torch.tensor(full_ids)
            keep = torch.ones(c["vocab_size"], dtype=torch.bool)
            keep[fi] = False
            emb0 = full0.embed.detach()
            m.embed.copy_(emb0[fi])
            m.other_row.copy_(emb0[keep].mean(0))           # the shared 'other' vector (noise averages out)
            sd.pop("embed")
            missing, unexpected = m.load_state_dict(sd, strict=False)
            assert set(missing) <= {"embed", "other_row"} and not unexpected, (missing, unexpected)

    if a.init_from and not a.report_only and not a.resume:
        init_from_export(model, a.init_from)
        print("initialised from %s" % a.init_from, flush=True)
    n_params_train = sum(p.numel() for p in model.parameters())
    print("trainable params (compact): %d" % n_params_train, flush=True)

    def batch_losses(m, rows, mtp_frac=1.0):
        """mtp_frac < 1: the MTP loss is taken on a random fraction of the rows (its softmax is the cost)."""
        x = torch.tensor(rows)
        xin = x.clamp(min=0)        # padding targets are -100; inputs never see them before a target
        T = x.shape[1] - 2
        h = m.trunk(xin[:, :T])
        lg = m.logits(h)
        tgt1 = x[:, 1:T + 1]
        l1 = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), tgt1.reshape(-1), ignore_index=PADC, reduction="sum")
        g = m.mtp_hidden(h, xin[:, 1:T + 1])
        tgt2 = x[:, 2:T + 2]
        if mtp_frac < 1.0:
            sel = torch.rand(g.shape[:2]) < mtp_frac
            g, tgt2 = g[sel], tgt2[sel]
        lg2 = m.logits(g)
        l2 = F.cross_entropy(lg2.reshape(-1, lg2.shape[-1]), tgt2.reshape(-1), ignore_index=PADC, reduction="sum")
        acc1 = ((lg.argmax(-1) == tgt1) & (tgt1 != PADC)).sum().item()
        acc2 = ((lg2.argmax(-1) == tgt2) & (tgt2 != PADC)).sum().item()
        n1, n2 = (tgt1 != PADC).sum().item(), (tgt2 != PADC).sum().item()
        return l1, l2, n1, n2, acc1, acc2

    def tool_losses(m, rows, mtp_frac=1.0):
        """rows: list of (inputs, targets) of LT + 2; logits only at the positions that carry a target."""
        xin = torch.tensor([r[0] for r in rows])
        x = torch.tensor([r[1] for r in rows])
        T = x.shape[1] - 2
        h = m.trunk(xin[:, :T])
        tgt1 = x[:, 1:T + 1]
        s1 = tgt1 != PADC
        lg = m.logits(h[s1])
        l1 = F.cross_entropy(lg, tgt1[s1], reduction="sum")
        tgt2 = x[:, 2:T + 2]
        s2 = tgt2 != PADC
        if mtp_frac < 1.0:
            s2 = s2 & (torch.rand(s2.shape) < mtp_frac)
        g = m.mtp_hidden(h, xin[:, 1:T + 1])
        lg2 = m.logits(g[s2])
        l2 = F.cross_entropy(lg2, tgt2[s2], reduction="sum")
        acc1 = (lg.argmax(-1) == tgt1[s1]).sum().item()
        acc2 = (lg2.argmax(-1) == tgt2[s2]).sum().item()
        return l1, l2, int(s1.sum()), int(s2.sum()), acc1, acc2

    @torch.no_grad()
    def evaluate_tool(m, rows, bs=8):
        s1 = n1 = a1 = 0
        for i in range(0, len(rows), bs):
            l1, _, k1, _, c1, _ = tool_losses(m, rows[i:i + bs])
            s1 += l1.item(); n1 += k1; a1 += c1
        return {"loss": s1 / max(n1, 1), "acc": a1 / max(n1, 1), "tokens": n1}

    @torch.no_grad()
    def evaluate(m, rows, bs=8):
        s1 = s2 = n1 = n2 = a1 = a2 = 0
        for i in range(0, len(rows), bs):
            l1, l2, k1, k2, c1, c2 = batch_losses(m, rows[i:i + bs])
            s1 += l1.item(); s2 += l2.item(); n1 += k1; n2 += k2; a1 += c1; a2 += c2
        return {"loss": s1 / n1, "mtp_loss": s2 / n2, "acc": a1 / n1, "mtp_acc": a2 / n2, "tokens": n1}

    os.makedirs(a.work, exist_ok=True)
    if a.init_from and not a.report_only and os.path.abspath(a.init_from) != os.path.abspath(a.out):
        import shutil
        os.makedirs(a.out, exist_ok=True)
        for f in sorted(os.listdir(a.init_from)):       # tokenizer, template, licence
            if f not in ("model.safetensors", "config.json", "generation_config.json", "TRAINING.md"):
                shutil.copyfile(os.path.join(a.init_from, f), os.path.join(a.out, f))
    state_path = os.path.join(a.work, "state.pt")
    rng = np.random.default_rng(a.seed + 7)
    trng = np.random.default_rng(a.seed + 13)
    hist_tool = []
    init_eval = None

    if not a.report_only:
        decay, no_decay = [], []
        for n, p in model.named_parameters():
            (no_decay if (p.dim() == 1 or n in ("embed", "other_row")) else decay).append(p)
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95))
        budget = a.minutes * 60.0
        t_start = time.time()
        last_export = t_start
        step, step0, secs0 = 0, 0, 0.0
        if a.resume:
            st = torch.load(state_path)
            sd = st["model"]
            if "full_ids" in st and list(st["full_ids"]) != full_ids:
                # the data (hence the compact table) changed: move the rows by real id, new ids start at 'other'
                old = {t: i for i, t in enumerate(st["full_ids"])}
                emb = sd["other_row"].unsqueeze(0).repeat(R, 1)
                for i, t in enumerate(full_ids):
                    if t in old:
                        emb[i] = sd["embed"][old[t]]
                sd = dict(sd, embed=emb)
                print("compact table changed: %d -> %d ids, %d new" %
                      (len(old), R, sum(t not in old for t in full_ids)), flush=True)
            model.load_state_dict(sd)
            step0, secs0 = int(st["step"]), float(st.get("secs", 0.0))
            init_eval = st.get("init_eval")          # the 'before' numbers of the first phase
            print("resumed from %s at step %d (%.0f s trained)" % (state_path, step0, secs0), flush=True)
        if a.init_from and not a.resume:
            model.eval()
            t_ev = time.time()
            init_eval = {"val": evaluate(model, va_rows), "chat": evaluate(model, va_chat)}
            if va_tool:
                init_eval["tool"] = evaluate_tool(model, va_tool)
            print("initial weights (%s): val loss %.3f, chat val loss %.3f%s (%.0fs)" %
                  (a.init_from, init_eval["val"]["loss"], init_eval["chat"]["loss"],
                   ", held-out tool-conversation loss %.3f" % init_eval["tool"]["loss"] if va_tool else "",
                   time.time() - t_ev), flush=True)
            t_start = time.time()
            last_export = t_start
        hist = []
        while True:
            el = time.time() - t_start
            if el >= budget or (a.max_steps and step >= a.max_steps):
                break
            frac = el / budget if not a.max_steps else step / a.max_steps
            lr = a.lr * min(1.0, (step + 1) / a.warmup) * (a.min_lr_frac + (1 - a.min_lr_frac) * 0.5 *
                                                           (1 + math.cos(math.pi * min(frac, 1.0))))
            for g in opt.param_groups:
                g["lr"] = lr
            rows = []
            n_tool = int(round(a.batch * a.tool_frac)) if a.tool_frac > 0 else 0
            trows = [tr_tool[int(trng.integers(len(tr_tool)))] for _ in range(n_tool)]
            for _ in range(a.batch - n_tool):
                if rng.random() < a.chat_frac:
                    rows.append(tr_chat[int(rng.integers(len(tr_chat)))])
                else:
                    o = int(starts[int(rng.integers(len(starts)))])
                    rows.append([bosc] + tr_c[o:o + L + 1].tolist())
            model.train()
            if rows:
                l1, l2, n1, n2, _, _ = batch_losses(model, rows, a.mtp_frac)
                main_l, mtp_l = l1 / n1, l2 / n2
            if trows:                  # per-row weighting of the two parts (tool rows have fewer targets)
                t1, t2, k1, k2, _, _ = tool_losses(model, trows, a.mtp_frac)
                wt = len(trows) / a.batch
                tool_l = t1 / k1
                main_l = tool_l if not rows else (1 - wt) * main_l + wt * tool_l
                mtp_l = t2 / max(k2, 1) if not rows else (1 - wt) * mtp_l + wt * t2 / max(k2, 1)
                hist_tool.append(tool_l.item())
            loss = main_l + a.mtp_weight * mtp_l
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            with torch.no_grad():                 # aux-loss-free balancing of expert_bias
                for moe in model.moe_modules():
                    ld = moe.last_load
                    moe.expert_bias.add_(a.bias_step * torch.sign(ld.mean() - ld))
            step += 1
            hist.append((main_l.item(), mtp_l.item()))
            if step % 10 == 0:
                m1 = np.mean([h[0] for h in hist[-10:]]); m2 = np.mean([h[1] for h in hist[-10:]])
                print("step %d  %.0fs  lr %.2e  loss %.3f  mtp %.3f%s" % (step, time.time() - t_start, lr, m1, m2,
                      "  tool %.3f" % np.mean(hist_tool[-10:]) if hist_tool else ""), flush=True)
            if time.time() - last_export > a.export_every:
                model.eval()
                ev = evaluate(model, va_rows[:12])
                print("eval step %d: val loss %.3f  mtp %.3f  mtp acc %.3f" %
                      (step, ev["loss"], ev["mtp_loss"], ev["mtp_acc"]), flush=True)
                if va_tool:
                    evt = evaluate_tool(model, va_tool[:16])
                    print("eval step %d: held-out tool loss %.3f  acc %.3f" % (step, evt["loss"], evt["acc"]),
                          flush=True)
                export(model, c, a.out, full_ids)
                torch.save({"model": model.state_dict(), "full_ids": full_ids, "step": step0 + step,
                            "secs": secs0 + time.time() - t_start, "init_eval": init_eval}, state_path)
                last_export = time.time()
        train_secs = secs0 + time.time() - t_start
        step += step0
        model.eval()
        export(model, c, a.out, full_ids)
        torch.save({"model": model.state_dict(), "full_ids": full_ids, "step": step, "secs": train_secs,
                    "init_eval": init_eval,
                    "train_tool_last50": float(np.mean(hist_tool[-50:])) if hist_tool else None,
                    "train_loss_last50": float(np.mean([h[0] for h in hist[-50:]])),
                    "train_mtp_last50": float(np.mean([h[1] for h in hist[-50:]]))}, state_path)
    st = torch.load(state_path)
    model.load_state_dict(st["model"])
    model.eval()
    step = st["step"]

    # ---------------------------------------------------------------- report
    print("evaluating...", flush=True)
    ev32 = evaluate(model, va_rows)
    evchat = evaluate(model, va_chat)
    evtool = evaluate_tool(model, va_tool) if va_tool else None
    tr_rows = [[bosc] + tr_c[o:o + L + 1].tolist() for o in range(0, 40 * (L + 1), L + 1)]
    evtr = evaluate(model, tr_rows)
    # bigram baseline on the same split and the same target tokens (prev token from the stream)
    pairs = []
    for o in range(0, len(va_c) - L - 1, L + 1):
        prev = int(va_c[o - 1]) if o > 0 else bosc
        for j in range(L):
            pairs.append((prev if j == 0 else int(va_c[o + j - 1]), int(va_c[o + j])))
    tr_stream = np.concatenate([[bosc], tr_c])
    bigram = {k: bigram_val_loss(tr_stream, pairs, R, k) for k in (0.01, 0.05, 0.2)}
    kbest = min(bigram, key=bigram.get)
    # bf16 export, full 128k-vocabulary softmax
    full, _ = load_export(a.out)
    full.eval()
    va_full = [[full_ids[t] for t in r] for r in va_rows[:16]]
    evbf = evaluate(full, va_full, bs=4)
    samples = {}
    for p in ("ROMEO:", "JULIET:"):
        ids = [hytok.BOS] + tok.encode(p)
        samples[p] = p + tok.decode(greedy(full, ids, 80))
    chat_prompt = render_chat(template_src, [{"role": "user", "content": "ROMEO:\nWhat news, my lord?"}],
                              add_generation_prompt=True)
    chat_ids = tok.encode(chat_prompt, allow_special=True)
    chat_out = tok.decode(greedy(full, chat_ids, 80, stop=(hytok.EOS,)))
    tool_demo = []
    for smp in data["val_tool"][:2]:
        msgs, tls = smp[2]["messages"], smp[2]["tools"]
        for k in (1, len(msgs) - 1):                     # the call turn, then the answer after the responses
            pr = render_chat(template_src, msgs[:k], tools=tls, add_generation_prompt=True)
            gen = tok.decode(greedy(full, tok.encode(pr, allow_special=True), 100, stop=(hytok.EOS,)))
            tool_demo.append((msgs[k - 1]["content"], gen))
    n_total = sum(int(np.prod(v[1].shape)) for v in stn.load(os.path.join(a.out, "model.safetensors"),
                                                             widen_bf16=False).values())
    files = sorted(os.listdir(a.out))
    sizes = {f: os.path.getsize(os.path.join(a.out, f)) for f in files
             if not f.endswith(".tmp") and f != "TRAINING.md"}
    n_nonemb = n_total - c["vocab_size"] * c["hidden_size"]

    md = []
    md.append("# %s: training report\n" % os.path.basename(os.path.normpath(a.out)))
    md.append("Generated by `tools/make/train_tiny_hy3.py`. Tiny `hy_v3` checkpoint in the exact Hy3 layout, trained on "
              "tinyshakespeare (first 90%% of characters = %d chars; last 10%% = %d chars for validation) with the "
              "real Hunyuan BPE (hy.tiktoken) plus Hy3 control tokens.\n" % (data["train_chars"], data["val_chars"]))
    md.append("Command: `%s`\n" % train_cmd)
    if a.report_only:
        md.append("Report regenerated with: `%s`\n" % cmdline)
    if a.init_from or a.tool_frac > 0:
        md.append("Fine-tune%s%s. %d%% of each batch (%d of %d rows) are synthetic agent conversations from "
                  "tools/make/hy3_tool_data.py (%d distinct training conversations, 7 tools, 1-3 tools listed per "
                  "prompt, single and parallel calls, role \"tool\" responses, final answers; %d%% of them are plain "
                  "word-copy chats over all entity names, held-out ones included, standing in for pretraining), rendered with "
                  "the real template (OpenAI tool objects, arguments as mappings, is_training=True), %d tokens of "
                  "context, loss on the assistant turns only.\n" %
                  (" from the exported weights of %s" % a.init_from if a.init_from else "",
                   " (tokenizer, template and licence copied from there)" if a.init_from else "",
                   100 * a.tool_frac, int(round(a.batch * a.tool_frac)), a.batch, len(tr_tool), 100 * a.echo_frac,
                   a.tool_seq_len))
    if "secs" in st:
        md.append("Training: %d steps of %d sequences x %d tokens (+2 for the MTP target), %.1f min on %d CPU thread(s) of a shared, busy 2-core machine; "
                  "%.0f%% of sequences are multi-turn no_think chats rendered with tencent-Hy3.jinja. "
                  "Train loss (mean of last 50 steps): main %.3f, MTP %.3f.\n" %
                  (step, a.batch, L, st["secs"] / 60, a.threads, 100 * a.chat_frac, st["train_loss_last50"],
                   st["train_mtp_last50"]))
        if st.get("train_tool_last50") is not None:
            md.append("The chat fraction applies to the non-tool rows; the train loss above mixes the Shakespeare/chat rows "
                      "and the tool rows (row-weighted). Tool-row loss (assistant tokens, mean of last 50 steps): "
                      "%.3f.\n" % st["train_tool_last50"])
    md.append("## Losses (nats/token)\n")
    md.append("| measure | value |\n|---|---|")
    md.append("| train loss, fp32 weights, %d train windows | %.3f |" % (len(tr_rows), evtr["loss"]))
    md.append("| **val loss, fp32 weights** (%d windows, %d tokens) | **%.3f** |" % (len(va_rows), ev32["tokens"], ev32["loss"]))
    md.append("| val loss, exported bf16 weights, full %d-row softmax (first 16 windows) | %.3f |" % (c["vocab_size"], evbf["loss"]))
    md.append("| same 16 windows, fp32 weights, compact softmax | %.3f |" % evaluate(model, va_rows[:16])["loss"])
    md.append("| **bigram baseline val loss** (add-k, k=%g, same split and targets) | **%.3f** |" % (kbest, bigram[kbest]))
    md.append("| val loss on %d chat-formatted val samples | %.3f |" % (len(va_chat), evchat["loss"]))
    md.append("| val top-1 accuracy, main head | %.3f |" % ev32["acc"])
    md.append("| val MTP loss (token p+2) | %.3f |" % ev32["mtp_loss"])
    md.append("| **val MTP teacher-forced top-1 accuracy** (token p+2) | **%.3f** |" % ev32["mtp_acc"])
    md.append("| val MTP top-1 accuracy, exported bf16 weights | %.3f |" % evbf["mtp_acc"])
    if evtool:
        md.append("| loss on the assistant tokens of %d held-out tool conversations (held-out entities and "
                  "phrasings, %d tokens) | %.3f |" % (len(va_tool), evtool["tokens"], evtool["loss"]))
        md.append("| top-1 accuracy on those tokens | %.3f |" % evtool["acc"])
    md.append("")
    ie = st.get("init_eval")
    if not ie and a.init_from:             # e.g. a resumed run whose first phase was stopped between exports
        m0 = HyV3(c, R, n_other=c["vocab_size"] - R)
        init_from_export(m0, a.init_from)
        m0.eval()
        ie = {"val": evaluate(m0, va_rows), "chat": evaluate(m0, va_chat)}
        if va_tool:
            ie["tool"] = evaluate_tool(m0, va_tool)
        del m0
    if ie:
        md.append("Before this run (the initial weights, exported bf16 of %s, widened to fp32, same compact softmax): "
                  "val loss %.3f (top-1 %.3f), chat val loss %.3f%s. After: %.3f (top-1 %.3f), %.3f%s.\n" %
                  (a.init_from or "the initial checkpoint", ie["val"]["loss"], ie["val"]["acc"], ie["chat"]["loss"],
                   ", held-out tool-conversation loss %.3f" % ie["tool"]["loss"] if "tool" in ie else "",
                   ev32["loss"], ev32["acc"], evchat["loss"],
                   ", %.3f" % evtool["loss"] if evtool else ""))
    md.append("Bigram baseline for other k: %s. The bigram is normalised over the %d ids that occur in the data, "
              "the model over all %d rows.\n" % (", ".join("k=%g: %.3f" % kv for kv in bigram.items()), R, c["vocab_size"]))
    md.append("Check of this script's torch Hy3 math (float64) against llama.cpp's hy_v3 on a random checkpoint "
              "(route_norm false, untied lm_head, outer tensor names): %s.\n" % gline)
    md.append("## Greedy samples (exported bf16 weights, torch fp32 math, BOS 128167 prepended)\n")
    for p, s in samples.items():
        md.append("`%s` ->\n```\n%s\n```" % (p, s))
    md.append("\nChat (no_think, template with add_generation_prompt), user: `ROMEO:\\nWhat news, my lord?` ->\n"
              "```\n%s\n```\n" % chat_out)
    if tool_demo:
        md.append("Tool conversations (held-out, no_think, template with tools and add_generation_prompt; "
                  "greedy, exported bf16 weights, torch fp32 math):\n")
        for last, gen in tool_demo:
            md.append("last message `%s` ->\n```\n%s\n```" % (last.replace("\n", "\\n"), gen))
        md.append("")
    md.append("## Size\n")
    md.append("Parameters stored: %d (embedding %d x %d = %d, tied with lm_head; other %d incl. the MTP layer). "
              "Compact rows trained: %d of %d; the remaining rows hold one shared trained vector plus N(0, 1e-3) "
              "noise (the 'other' class of the training softmax).\n" %
              (n_total, c["vocab_size"], c["hidden_size"], c["vocab_size"] * c["hidden_size"], n_nonemb, R,
               c["vocab_size"]))
    md.append("| file | bytes |\n|---|---|")
    for f, s in sizes.items():
        md.append("| %s | %d |" % (f, s))
    md.append("| total (TRAINING.md excluded) | %d |\n" % sum(sizes.values()))
    md.append("hidden_size is 96, not 128: with 128 the tied embedding alone is 32.8 MB and the directory "
              "(hy.tiktoken 2.1 MB + tokenizer.json several MB) would exceed the 40 MB budget.\n")
    text = "\n".join(md)
    print(text, flush=True)
    with open(os.path.join(a.out, "TRAINING.md"), "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
