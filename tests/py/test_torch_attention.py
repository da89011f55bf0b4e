"""PyTorch float64 references for rope (both styles, forward and backward) and sdpa (causal
end-aligned and not, grouped-query via repeat_interleave), recomputed from the inputs that
tests/test_rope.c and tests/test_attention.c dump, compared with wgml's outputs."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wgml_dump  # noqa: E402

torch.set_default_dtype(torch.float64)


def rope_half(x, pos, theta, sign):
    """Hugging Face Llama: x*cos + rotate_half(x)*sin, pairs (i, i + D/2)."""
    D = x.shape[-1]
    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = sign * pos.to(torch.float64)[..., None] * inv          # [S, D/2] or [B, S, D/2]
    ang = torch.cat([ang, ang], dim=-1)                          # [.., D]
    if ang.dim() == 2:
        ang = ang[None]
    cos, sin = ang.cos()[:, :, None, :], ang.sin()[:, :, None, :]  # [B|1, S, 1, D]
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    rot = torch.cat([-x2, x1], dim=-1)
    return x * cos + rot * sin


def rope_interleaved(x, pos, theta, sign):
    """GGML normal mode: pairs (2i, 2i + 1), written with complex multiplication."""
    D = x.shape[-1]
    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = sign * pos.to(torch.float64)[..., None] * inv
    if ang.dim() == 2:
        ang = ang[None]
    rotor = torch.polar(torch.ones_like(ang), ang)[:, :, None, :]  # [B|1, S, 1, D/2]
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], D // 2, 2).contiguous())
    return torch.view_as_real(xc * rotor).reshape(x.shape)


def sdpa(q, k, v, causal, scale):
    G = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(G, dim=1)
    v = v.repeat_interleave(G, dim=1)
    s = q @ k.transpose(-1, -2) * scale
    Sq, Skv = q.shape[2], k.shape[2]
    if causal:
        i = torch.arange(Sq)[:, None]
        j = torch.arange(Skv)[None, :]
        s = s.masked_fill(j > Skv - Sq + i, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def main():
    build = sys.argv[1]
    checker = wgml_dump.Checker()
    for test in ("test_rope", "test_attention"):
        cases = wgml_dump.run_dump(build, test)
        for name, c in sorted(cases.items()):
            if name.startswith("rope"):
                x = torch.from_numpy(c["x"]).to(torch.float64)
                pos = torch.from_numpy(c["positions"]).to(torch.int64)
                theta, style, sign = (float(t) for t in c["params"])
                f = rope_interleaved if int(style) == 1 else rope_half
                ref = f(x, pos, theta, sign)
                # see tests/test_rope.c for the tolerance (exact angle reduction in the kernel)
                checker.close(name, c["out"], ref.numpy(), 2e-6, 1e-5)
            elif name.startswith("sdpa"):
                q, k, v = (torch.from_numpy(c[n]).to(torch.float64) for n in ("q", "k", "v"))
                causal, scale = (float(t) for t in c["params"])
                ref = sdpa(q, k, v, causal != 0, scale)
                checker.close(name, c["out"], ref.numpy(), 2e-5, 1e-4)
            else:
                print(f"FAIL: unknown case {name}")
                checker.failed += 1
    sys.exit(checker.done())


if __name__ == "__main__":
    main()
