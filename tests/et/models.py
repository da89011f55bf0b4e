"""Small models for the end-to-end program tests (tests/et/test_programs.py): an MLP and a
transformer block (grouped-query attention with rotary embeddings, RMSNorm, SwiGLU), written in
plain PyTorch so that the exporter sees only standard operators."""
import torch
import torch.nn.functional as F


class MLP(torch.nn.Module):
    def __init__(self, d_in=16, d_hidden=32, d_out=8):
        super().__init__()
        self.l1 = torch.nn.Linear(d_in, d_hidden)
        self.l2 = torch.nn.Linear(d_hidden, d_hidden)
        self.l3 = torch.nn.Linear(d_hidden, d_out)

    def forward(self, x):
        h = torch.relu(self.l1(x))
        h = torch.sigmoid(self.l2(h)) * h
        return torch.softmax(self.l3(h), dim=-1)


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_half(x, cos, sin):
    """Rotary embedding, half-split pairs (i, i + D/2), x [B, H, S, D], cos/sin [S, D]."""
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]
    rot = torch.cat([-x2, x1], dim=-1)
    return x * cos + rot * sin


class Block(torch.nn.Module):
    """Pre-norm transformer block: RMSNorm, causal GQA attention with RoPE, RMSNorm, SwiGLU MLP."""

    def __init__(self, d=32, n_head=4, n_kv=2, d_ff=64, seq=8, theta=10000.0):
        super().__init__()
        self.n_head, self.n_kv, self.hd = n_head, n_kv, d // n_head
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.wq = torch.nn.Linear(d, n_head * self.hd, bias=False)
        self.wk = torch.nn.Linear(d, n_kv * self.hd, bias=False)
        self.wv = torch.nn.Linear(d, n_kv * self.hd, bias=False)
        self.wo = torch.nn.Linear(n_head * self.hd, d, bias=False)
        self.gate = torch.nn.Linear(d, d_ff, bias=False)
        self.up = torch.nn.Linear(d, d_ff, bias=False)
        self.down = torch.nn.Linear(d_ff, d, bias=False)
        inv = theta ** (-torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd)
        ang = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None, :]
        ang = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", ang.cos().float())
        self.register_buffer("sin", ang.sin().float())
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, s, d = x.shape
        h = self.norm1(x)
        q = self.wq(h).view(b, s, self.n_head, self.hd).transpose(1, 2)
        k = self.wk(h).view(b, s, self.n_kv, self.hd).transpose(1, 2)
        v = self.wv(h).view(b, s, self.n_kv, self.hd).transpose(1, 2)
        q, k = rope_half(q, self.cos, self.sin), rope_half(k, self.cos, self.sin)
        rep = self.n_head // self.n_kv
        k = k.repeat_interleave(rep, dim=1) if False else k[:, :, None].expand(b, self.n_kv, rep, s, self.hd).reshape(b, self.n_head, s, self.hd)
        v = v[:, :, None].expand(b, self.n_kv, rep, s, self.hd).reshape(b, self.n_head, s, self.hd)
        att = torch.softmax(q @ k.transpose(-1, -2) * self.hd ** -0.5 + self.mask, dim=-1)
        o = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.wo(o)
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class EmbedArgmax(torch.nn.Module):
    """int64 in, int64 out: an embedding lookup of int64 ids, a projection and the argmax
    (the exporter narrows both to int32 inside the delegate; the runtime converts at the edges)."""

    def __init__(self, vocab=50, d=12, n_out=7):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.proj = torch.nn.Linear(d, n_out)

    def forward(self, ids):
        logits = self.proj(self.emb(ids))
        return logits, torch.argmax(logits, dim=-1)


class ConvNet(torch.nn.Module):
    """Convolutions (2-D with padding, stride and dilation; grouped; 1-D) and average pooling."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, stride=1, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=2, dilation=2, groups=2)
        self.pool = torch.nn.AvgPool2d(2, stride=2)
        self.c3 = torch.nn.Conv1d(8, 4, 3, padding=1)

    def forward(self, x):
        h = self.pool(torch.relu(self.c2(torch.relu(self.c1(x)))))
        return self.c3(h.flatten(2))


class ConvBN(torch.nn.Module):
    """A convolution, batch norm (inference: running statistics) and ReLU."""

    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(4, 6, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(6)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return torch.relu(self.bn(self.c(x)))
