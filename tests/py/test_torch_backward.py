"""Backward ops of wgml against PyTorch float64 autograd.

Runs test_backward and test_backward_attn (sdpa, embedding, gather) in dump mode. Each case holds
the forward inputs, the upstream gradient and wgml's gradients; the forward is recomputed with
torch in float64 with requires_grad, and backward(dy) gives the reference gradients:
  softmax*/logsoftmax*: x, dy, params [dim] -> dx of softmax / log_softmax(x)
  rms*: x, w?, dy, params [eps, has_w, has_dw] (torch 1.13 has no rms_norm: written out)
  layer*: x, w?, b, dy, params [eps, has_w, has_dw, has_db] -> F.layer_norm
  unary*: x, dy, params [op, lo, hi] (op -1: clamp(lo, hi); else a wgml_unary_op value)
  sdpa*: q, k, v, dout, params [causal, scale]: softmax(q kᵀ scale + end-aligned mask) v with
         k / v heads repeated for grouped-query attention (their gradients sum over the copies)
  embedding*: idx, dy, params [V] -> F.embedding's weight gradient
  gather*: idx, dy, params [dim] and wgml's dx (its shape is x's) -> torch.gather's input gradient
Tolerances are those of the C test (fp32 kernels; sums over rows add a sqrt(rows) factor)."""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

import wgml_dump

# the Python package over the build's library, for the unary table's names
os.environ.setdefault("WGML_LIBRARY", os.path.join(os.path.abspath(sys.argv[1]), "libwgml.so"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python"))
from wgml.core import UNARY_OPS  # noqa: E402

ATOL, RTOL = 1e-5, 1e-4

# the torch function of each unary op, by its name in wgml's table (wgml.core.UNARY_OPS, read from
# the library, gives the name of a dumped op value; a new op without an entry here fails)
UNARY = {"relu": torch.relu, "sigmoid": torch.sigmoid, "silu": F.silu, "gelu": lambda x: F.gelu(x),
         "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "exp": torch.exp, "log": torch.log,
         "neg": torch.neg, "abs": torch.abs, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "tanh": torch.tanh,
         "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc, "round": torch.round, "sin": torch.sin,
         "cos": torch.cos, "expm1": torch.expm1}


def t64(a, grad=False):
    t = torch.from_numpy(np.asarray(a).astype(np.float64))
    return t.requires_grad_(grad)


def main():
    cases = wgml_dump.run_dump(sys.argv[1], "test_backward")
    cases.update(wgml_dump.run_dump(sys.argv[1], "test_backward_attn"))  # other names: sdpa*, embedding*, gather*
    checker = wgml_dump.Checker()
    for name, c in sorted(cases.items()):
        prm = [float(v) for v in c["params"]]
        if name.startswith("softmax") or name.startswith("logsoftmax"):
            dim = int(prm[0])
            x = t64(c["x"], True)
            y = (torch.log_softmax if name.startswith("log") else torch.softmax)(x, dim)
            y.backward(t64(c["dy"]))
            checker.close(f"{name} {list(x.shape)} dim {dim}", c["dx"], x.grad.numpy(), ATOL, RTOL)
        elif name.startswith("rms"):
            eps, has_w, has_dw = prm
            x = t64(c["x"], True)
            w = t64(c["w"], True) if has_w else None
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
            if w is not None:
                y = y * w
            else:
                ones = torch.ones(x.shape[-1], dtype=torch.float64, requires_grad=True)
                y = y * ones
            y.backward(t64(c["dy"]))
            rows = x.numel() // x.shape[-1]
            checker.close(f"{name} {list(x.shape)} dx", c["dx"], x.grad.numpy(), ATOL, RTOL)
            if has_dw:
                ref = (w if w is not None else ones).grad.numpy()
                checker.close(f"{name} {list(x.shape)} dw", c["dw"], ref, ATOL * math.sqrt(rows), RTOL)
        elif name.startswith("layer"):
            eps, has_w, has_dw, has_db = prm
            x = t64(c["x"], True)
            d = x.shape[-1]
            w = t64(c["w"], True) if has_w else torch.ones(d, dtype=torch.float64, requires_grad=True)
            b = t64(c["b"], True)
            F.layer_norm(x, (d,), w, b, eps).backward(t64(c["dy"]))
            rows = x.numel() // d
            at = ATOL * max(1.0, abs(float(x.mean())))
            checker.close(f"{name} {list(x.shape)} dx", c["dx"], x.grad.numpy(), at, RTOL)
            if has_dw:
                checker.close(f"{name} {list(x.shape)} dw", c["dw"], w.grad.numpy(), at * math.sqrt(rows), RTOL)
            if has_db:
                checker.close(f"{name} {list(x.shape)} db", c["db"], b.grad.numpy(), ATOL * math.sqrt(rows), RTOL)
        elif name.startswith("unary"):
            op, lo, hi = int(prm[0]), prm[1], prm[2]
            x = t64(c["x"], True)
            y = torch.clamp(x, lo, hi) if op < 0 else UNARY[UNARY_OPS[op]](x)
            y.backward(t64(c["dy"]))
            checker.close(f"{name} op {op} n {x.numel()}", c["dx"], x.grad.numpy(), ATOL, RTOL)
        elif name.startswith("sdpa"):
            causal, scale = int(prm[0]), prm[1]
            q, k, v = t64(c["q"], True), t64(c["k"], True), t64(c["v"], True)
            hq, hkv, sq, skv = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
            rep = hq // hkv
            kk, vv = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            s = q @ kk.transpose(-1, -2) * scale
            if causal:
                i = torch.arange(sq).unsqueeze(1)
                j = torch.arange(skv).unsqueeze(0)
                s = s.masked_fill(j > skv - sq + i, float("-inf"))
            out = torch.softmax(s, -1) @ vv
            out.backward(t64(c["dout"]))
            label = f"{name} {list(q.shape)} kv {list(k.shape)}{' causal' if causal else ''}"
            at = 2e-5 * math.sqrt(sq * rep)
            checker.close(label + " dq", c["dq"], q.grad.numpy(), 2e-5, 1e-3)
            checker.close(label + " dk", c["dk"], k.grad.numpy(), at, 1e-3)
            checker.close(label + " dv", c["dv"], v.grad.numpy(), at, 1e-3)
        elif name.startswith("embedding"):
            V = int(prm[0])
            idx = torch.from_numpy(c["idx"].astype(np.int64))
            dy = t64(c["dy"])
            W = torch.zeros(V, dy.shape[-1], dtype=torch.float64, requires_grad=True)
            F.embedding(torch.where(idx < 0, idx + V, idx), W).backward(dy)
            n = idx.numel()
            checker.close(f"{name} V {V} N {n}", c["dw"], W.grad.numpy(), 1e-5 * math.sqrt(n / 4 + 1), RTOL)
        elif name.startswith("gather"):
            dim = int(prm[0])
            idx = torch.from_numpy(c["idx"].astype(np.int64))
            x = torch.zeros(c["dx"].shape, dtype=torch.float64, requires_grad=True)
            size = x.shape[dim]
            torch.gather(x, dim, torch.where(idx < 0, idx + size, idx)).backward(t64(c["dy"]))
            checker.close(f"{name} x {list(x.shape)} dim {dim} index {list(idx.shape)}", c["dx"], x.grad.numpy(),
                          ATOL, RTOL)
        else:
            print(f"FAIL: unknown case {name}")
            checker.failed += 1
    sys.exit(checker.done())


if __name__ == "__main__":
    main()
