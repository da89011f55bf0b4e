"""wgml's autograd against PyTorch float64 autograd.

Runs test_autograd in dump mode. Three model pieces, each built once and run twice with new
values (cases <piece>_run0, <piece>_run1): an MLP (linear, gelu, linear, silu, mean loss), a
causal GQA attention block with RoPE and a residual, and a Llama block whose q/k/v/o and
gate/up/down projections are frozen 4-bit linears (dumped dequantised, case "llama") with
LoRA adapters (scale alpha / r = 8 / 4). Each case holds the inputs, wgml's gradients
(grad_<name>) and the loss; torch recomputes them in float64 from the same inputs.
Tolerances: gradients are sums of O(10-100) fp32 products, good to ~1e-5 relative; atol is
1e-4 of the largest reference gradient, rtol 1e-3."""
import sys

import numpy as np
import torch
import torch.nn.functional as F

import wgml_dump


def t(a, grad=False):
    x = torch.from_numpy(np.array(a, dtype=np.float64))
    return x.requires_grad_(grad)


def rope_half(x, pos, theta, heads_first):
    """x [B, S, H, D] (or [B, H, S, D] when heads_first); pairs (i, i + D/2)."""
    d = x.shape[-1]
    inv = theta ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = pos.to(torch.float64)[:, None] * inv[None, :]  # [S, D/2]
    cos, sin = torch.cos(ang), torch.sin(ang)
    if heads_first:
        cos, sin = cos[None, None], sin[None, None]
    else:
        cos, sin = cos[None, :, None], sin[None, :, None]
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)


def sdpa_causal(q, k, v):
    """q [B, Hq, S, D], k/v [B, Hkv, S, D]; causal; GQA by repeating kv heads."""
    g = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(g, dim=1)
    v = v.repeat_interleave(g, dim=1)
    s = q @ k.transpose(-1, -2) / np.sqrt(q.shape[-1])
    n = q.shape[2]
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
    s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s, -1) @ v


def compare(checker, name, c, params, loss):
    loss.backward()
    checker.close(f"{name} loss", c["loss"].reshape(()), loss.detach().numpy(), 1e-4 * max(1.0, abs(loss.item())), 1e-4)
    for p, x in params.items():
        ref = x.grad.numpy()
        atol = 1e-4 * max(float(np.abs(ref).max()), 1e-6)
        checker.close(f"{name} grad {p} {list(ref.shape)}", c["grad_" + p], ref, atol, 1e-3)


def mlp(checker, name, c):
    p = {k: t(c[k], True) for k in ("x", "w1", "b1", "w2", "b2")}
    y = F.silu(F.linear(F.gelu(F.linear(p["x"], p["w1"], p["b1"])), p["w2"], p["b2"]))
    compare(checker, name, c, p, (y * y).mean())


def attention(checker, name, c):
    p = {k: t(c[k], True) for k in ("x", "wq", "wk", "wv", "wo")}
    x = p["x"]
    b, s, dm = x.shape
    pos = torch.arange(s)
    q = rope_half(F.linear(x, p["wq"]).view(b, s, 4, -1), pos, 10000.0, False).permute(0, 2, 1, 3)
    k = rope_half(F.linear(x, p["wk"]).view(b, s, 2, -1).permute(0, 2, 1, 3), pos, 10000.0, True)
    v = F.linear(x, p["wv"]).view(b, s, 2, -1).permute(0, 2, 1, 3)
    a = sdpa_causal(q, k, v).permute(0, 2, 1, 3).reshape(b, s, dm)
    out = x + F.linear(a, p["wo"])
    compare(checker, name, c, p, (out * t(c["r"])).sum())


def rms(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def llama(checker, name, c, weights):
    names = ("q", "k", "v", "o", "gate", "up", "down")
    p = {"x": t(c["x"], True)}
    for n in names:
        p["a_" + n] = t(c["a_" + n], True)
        p["b_" + n] = t(c["b_" + n], True)

    def proj(x, n):
        w = t(weights["w_" + n])
        return F.linear(x, w) + 2.0 * F.linear(F.linear(x, p["a_" + n]), p["b_" + n])

    x = p["x"]
    b, s, dm = x.shape
    pos = torch.arange(s)
    n1 = rms(x, t(c["normw1"]))
    q = rope_half(proj(n1, "q").view(b, s, 4, -1), pos, 10000.0, False).permute(0, 2, 1, 3)
    k = rope_half(proj(n1, "k").view(b, s, 2, -1), pos, 10000.0, False).permute(0, 2, 1, 3)
    v = proj(n1, "v").view(b, s, 2, -1).permute(0, 2, 1, 3)
    a = sdpa_causal(q, k, v).permute(0, 2, 1, 3).reshape(b, s, dm)
    h = x + proj(a, "o")
    n2 = rms(h, t(c["normw2"]))
    out = h + proj(F.silu(proj(n2, "gate")) * proj(n2, "up"), "down")
    compare(checker, name, c, p, (out * t(c["r"])).sum())


def main():
    cases = wgml_dump.run_dump(sys.argv[1], "test_autograd")
    checker = wgml_dump.Checker()
    for name, c in sorted(cases.items()):
        if name.startswith("mlp_"):
            mlp(checker, name, c)
        elif name.startswith("attn_"):
            attention(checker, name, c)
        elif name.startswith("llama_"):
            llama(checker, name, c, cases["llama"])
    sys.exit(checker.done())


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    main()
