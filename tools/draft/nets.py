"""Torch modules in polykv's (GGUF's) conventions, so weights move between them and GGUF unchanged:
matrices [out][in] (y = W·x), llama rope in ggml's "normal" style (dimension 2i pairs with 2i+1,
inv_freq_i = base^(-2i/n_rot)), RMSNorm x·w. A Block is one llama decoder layer; Llama a whole model
(the target, frozen, or the small draft model); MtpHead the nextn block of polykv's model/mtp_head.h:
  x_t = eh_proj·[rms(embed(id_{t+1}))·enorm ; rms(h_t)·hnorm];  y = block(x) at positions t;
  logits_t = output·(rms(y_t)·shared_head_norm)   (predicts id_{t+2})."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rms(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w.to(x.dtype)


def rope_tables(n_pos, n_rot, base, device):
    inv = 1.0 / (base ** (torch.arange(0, n_rot // 2, device=device, dtype=torch.float32) * 2.0 / n_rot))
    ang = torch.arange(n_pos, device=device, dtype=torch.float32)[:, None] * inv[None, :]  # [T][n_rot/2]
    return ang.cos(), ang.sin()


def rope_norm(x, cos, sin):
    """x: [B][H][T][D]; rotates pairs (2i, 2i+1) for i < len(cos[0])."""
    r = cos.shape[-1] * 2
    xr = x[..., :r].float().reshape(*x.shape[:-1], r // 2, 2)
    x0, x1 = xr[..., 0], xr[..., 1]
    y = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).reshape(*x.shape[:-1], r)
    return torch.cat((y.to(x.dtype), x[..., r:]), dim=-1)


def causal_attention(q, k, v):
    """q [B][H][T][D], k/v [B][Hkv][T][D] -> [B][H][T][D]; scale 1/sqrt(D)."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    return s.masked_fill(mask, float("-inf")).softmax(-1).to(v.dtype) @ v


class Cfg:
    def __init__(self, n_embd, n_ff, n_head, n_head_kv, head_dim, n_layer, n_vocab, rope_base=10000.0,
                 eps=1e-5, n_ctx=2048):
        self.__dict__.update(locals())
        del self.__dict__["self"]


def _mat(n_out, n_in, std=0.02):
    return nn.Parameter(torch.randn(n_out, n_in) * std)


class Block(nn.Module):
    """GGUF names: attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down."""

    def __init__(self, c, n_layer_scale=1):
        super().__init__()
        E, H, Hk, D, Fd = c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff
        self.c = c
        self.attn_norm = nn.Parameter(torch.ones(E))
        self.attn_q = _mat(H * D, E)
        self.attn_k = _mat(Hk * D, E)
        self.attn_v = _mat(Hk * D, E)
        self.attn_output = _mat(E, H * D, 0.02 / math.sqrt(2 * n_layer_scale))
        self.ffn_norm = nn.Parameter(torch.ones(E))
        self.ffn_gate = _mat(Fd, E)
        self.ffn_up = _mat(Fd, E)
        self.ffn_down = _mat(E, Fd, 0.02 / math.sqrt(2 * n_layer_scale))

    def forward(self, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        h = rms(x, self.attn_norm, c.eps)
        q = F.linear(h, self.attn_q).view(B, T, c.n_head, c.head_dim).transpose(1, 2)
        k = F.linear(h, self.attn_k).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        v = F.linear(h, self.attn_v).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        q, k = rope_norm(q, cos, sin), rope_norm(k, cos, sin)
        a = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, c.n_head * c.head_dim)
        x = x + F.linear(a, self.attn_output)
        h = rms(x, self.ffn_norm, c.eps)
        return x + F.linear(F.silu(F.linear(h, self.ffn_gate)) * F.linear(h, self.ffn_up), self.ffn_down)


class Llama(nn.Module):
    """GGUF names: token_embd, blk.N.*, output_norm, output."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.token_embd = nn.Parameter(torch.randn(c.n_vocab, c.n_embd) * 0.02)
        self.blocks = nn.ModuleList([Block(c, c.n_layer) for _ in range(c.n_layer)])
        self.output_norm = nn.Parameter(torch.ones(c.n_embd))
        self.output = _mat(c.n_vocab, c.n_embd)

    def forward(self, ids):
        """ids [B][T] -> (hidden after output_norm [B][T][E], logits [B][T][V])."""
        c = self.c
        cos, sin = rope_tables(ids.shape[1], c.head_dim, c.rope_base, ids.device)
        x = F.embedding(ids, self.token_embd)
        for b in self.blocks:
            x = b(x, cos, sin)
        h = rms(x, self.output_norm, c.eps)
        return h, F.linear(h, self.output)

    def gguf_tensors(self):
        """(name, float32 numpy array [out][in] or [n]) in GGUF naming."""
        out = [("token_embd.weight", self.token_embd), ("output_norm.weight", self.output_norm),
               ("output.weight", self.output)]
        for i, b in enumerate(self.blocks):
            out += block_tensors(b, f"blk.{i}.")
        return [(n, p.detach().float().cpu().numpy()) for n, p in out]

    def load_gguf(self, reader):
        with torch.no_grad():
            for n, p in [("token_embd.weight", self.token_embd), ("output_norm.weight", self.output_norm),
                         ("output.weight", self.output)]:
                p.copy_(torch.from_numpy(reader.array(n)))
            for i, b in enumerate(self.blocks):
                load_block(b, reader, f"blk.{i}.")


BLOCK_NAMES = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
               "ffn_down"]


def block_tensors(b, prefix):
    return [(prefix + n + ".weight", getattr(b, n)) for n in BLOCK_NAMES]


def load_block(b, reader, prefix):
    with torch.no_grad():
        for n in BLOCK_NAMES:
            getattr(b, n).copy_(torch.from_numpy(reader.array(prefix + n + ".weight")))


class MtpHead(nn.Module):
    """The nextn block; token_embd and output are the target's (passed in, frozen)."""

    def __init__(self, c):
        super().__init__()
        E = c.n_embd
        self.c = c
        self.eh_proj = nn.Parameter(torch.cat((torch.randn(E, E) * 0.02, torch.eye(E)), dim=1))  # [E][2E]
        self.enorm = nn.Parameter(torch.ones(E))
        self.hnorm = nn.Parameter(torch.ones(E))
        self.shared_head_norm = nn.Parameter(torch.ones(E))
        self.block = Block(c)

    def forward(self, next_ids, hidden, token_embd, output):
        """next_ids [B][T] (id_{t+1}), hidden [B][T][E] (h_t) -> (logits [B][T][V] predicting id_{t+2},
        y [B][T][E] the block's output, which chained drafting feeds back as the next step's hidden)."""
        c = self.c
        e = rms(F.embedding(next_ids, token_embd), self.enorm, c.eps)
        h = rms(hidden, self.hnorm, c.eps)
        x = F.linear(torch.cat((e, h.to(e.dtype)), dim=-1), self.eh_proj)
        cos, sin = rope_tables(next_ids.shape[1], c.head_dim, c.rope_base, next_ids.device)
        y = self.block(x, cos, sin)
        return F.linear(rms(y, self.shared_head_norm, c.eps), output), y

    def gguf_tensors(self, layer):
        p = f"blk.{layer}."
        out = [(p + "nextn.eh_proj.weight", self.eh_proj), (p + "nextn.enorm.weight", self.enorm),
               (p + "nextn.hnorm.weight", self.hnorm),
               (p + "nextn.shared_head_norm.weight", self.shared_head_norm)] + block_tensors(self.block, p)
        return [(n, t.detach().float().cpu().numpy()) for n, t in out]
