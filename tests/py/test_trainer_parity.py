"""wgml's LoRA training step (src/train/trainer.c) against PyTorch float32 training of the same
model from the same start.

`test_trainer --dump DIR` writes, per case: the model (the tiny synthetic GGUF itself; SmolLM2
is read from .deps/models), the configuration, the initial adapters (A from wgml's seeded init,
B = 0), the batches, and the loss wgml reported at every step (before that step's update). Here
the weights are dequantised by PyPI gguf (tests/py/llama_ref.py's reader) to float32, the
forward is written in plain PyTorch (RMSNorm, interleaved RoPE, causal grouped-query attention,
SwiGLU, tied head) with y = x Wᵀ + (alpha/r)·(x Aᵀ) Bᵀ on the adapted linears, the loss is
F.cross_entropy (ignore_index -100, mean), and the update is torch.nn.utils.clip_grad_norm_
followed by torch.optim.AdamW with the same settings.

Tolerance. Both sides compute in fp32 with the same weights, so the losses start equal to ~1e-6
relative (summation order), and the adapters drift apart only through rounding carried by Adam
(whose normalised update magnifies differences in near-zero gradients a little). Required: the
loss at every step within 1e-4 relative for the tiny model (20 steps) and 1e-3 for SmolLM2
(10 steps, batch 1 x 32 tokens of Genesis 1, r = 8 on q and v); a wrong gradient, a missing
clip or a wrong bias correction moves the loss by far more after a few steps.
Runtime (lavapipe, 2 cores): the SmolLM2 part dominates: a step costs about the same for 16 or
64 tokens (the 4-bit GEMMs' cost is in the weights at these sizes), 7-14 s on an idle machine,
up to ~25 s when other jobs share the cores; PyTorch (no MKL) needs ~3-5 s per step.
Usage: test_trainer_parity.py BUILD_DIR"""
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wgml_dump  # noqa: E402
from llama_ref import Llama  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, ".deps", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
TARGETS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]

torch.set_num_threads(2)


class Model32:
    """The GGUF's weights in float32 and the training forward with LoRA adapters."""

    def __init__(self, path):
        ref = Llama(path)
        self.n_layer, self.n_head, self.n_head_kv = ref.n_layer, ref.n_head, ref.n_head_kv
        self.head_dim, self.eps, self.base = ref.head_dim, ref.eps, ref.base
        self.t = {k: v.to(torch.float32) for k, v in ref.t.items()}
        self.out = self.t.get("output.weight", self.t["token_embd.weight"])

    def _rms(self, x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def _rope(self, x):
        # x [B, S, H, d]; pairs (2i, 2i+1) rotate by pos * base^(-2i/d); angles in float64
        S, d = x.shape[1], x.shape[-1]
        i = torch.arange(d // 2, dtype=torch.float64)
        ang = torch.arange(S, dtype=torch.float64)[:, None] * self.base ** (-2.0 * i / d)
        c = torch.cos(ang).to(torch.float32)[None, :, None, :]
        s = torch.sin(ang).to(torch.float32)[None, :, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)

    def logits(self, ids, lora, scale):
        B, S = ids.shape
        H, Hk, hd = self.n_head, self.n_head_kv, self.head_dim
        x = self.t["token_embd.weight"][ids.reshape(-1)]  # [B*S, D]
        mask = torch.full((S, S), float("-inf")).triu(1)

        def lin(l, name, h):
            y = h @ self.t["blk.%d.%s.weight" % (l, name)].T
            ab = lora.get((l, name))
            if ab is not None:
                y = y + scale * ((h @ ab[0].T) @ ab[1].T)
            return y

        for l in range(self.n_layer):
            h = self._rms(x, self.t["blk.%d.attn_norm.weight" % l])
            q = self._rope(lin(l, "attn_q", h).reshape(B, S, H, hd)).permute(0, 2, 1, 3)
            k = self._rope(lin(l, "attn_k", h).reshape(B, S, Hk, hd)).permute(0, 2, 1, 3)
            v = lin(l, "attn_v", h).reshape(B, S, Hk, hd).permute(0, 2, 1, 3)
            k = k.repeat_interleave(H // Hk, dim=1)
            v = v.repeat_interleave(H // Hk, dim=1)
            att = torch.softmax(q @ k.transpose(-1, -2) / float(np.sqrt(hd)) + mask, -1)
            a = (att @ v).permute(0, 2, 1, 3).reshape(B * S, H * hd)
            x = x + lin(l, "attn_output", a)
            h = self._rms(x, self.t["blk.%d.ffn_norm.weight" % l])
            x = x + lin(l, "ffn_down", F.silu(lin(l, "ffn_gate", h)) * lin(l, "ffn_up", h))
        return self._rms(x, self.t["output_norm.weight"]) @ self.out.T


def train(model, case, rtol, label):
    cfg = case["config"]
    r, alpha = int(cfg[0]), float(cfg[1])
    lr, wd, b1, b2, eps, clip, steps = [float(c) for c in cfg[5:12]]
    steps = int(steps)
    lora, params = {}, []
    for l in range(model.n_layer):
        for name in TARGETS:
            key = "blk.%d.%s.lora_a.init" % (l, name)
            if key in case:
                a = torch.tensor(case[key], dtype=torch.float32, requires_grad=True)
                b = torch.tensor(case["blk.%d.%s.lora_b.init" % (l, name)], dtype=torch.float32, requires_grad=True)
                assert float(b.abs().max()) == 0.0, "B starts at zero"
                lora[(l, name)] = (a, b)
                params += [a, b]
    opt = torch.optim.AdamW(params, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    tokens = torch.tensor(case["tokens"], dtype=torch.long)
    labels = torch.tensor(case["labels"], dtype=torch.long)
    got = case["losses"]
    checker = wgml_dump.Checker()
    t0 = time.time()
    ref = []
    for s in range(steps):
        k = s % tokens.shape[0]
        logits = model.logits(tokens[k], lora, alpha / r)
        loss = F.cross_entropy(logits, labels[k].reshape(-1), ignore_index=-100)
        ref.append(float(loss))
        opt.zero_grad()
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
    rel = [abs(float(g) - e) / abs(e) for g, e in zip(got, ref)]
    for s in range(steps):
        print("  %s step %2d: wgml %.6f torch %.6f rel %.2e" % (label, s, got[s], ref[s], rel[s]))
    print("  %s: %d steps in %.1f s, max rel. diff %.2e (tolerance %.0e)" % (label, steps, time.time() - t0, max(rel), rtol))
    checker.close(label + " losses", np.asarray(got, dtype=np.float64), np.asarray(ref), 0.0, rtol)
    return checker


def main():
    build = sys.argv[1]
    env = {"WGML_TRAINER_MODEL": MODEL} if os.path.exists(MODEL) else {}
    if not env:
        print("  %s is missing: SmolLM2 parity skipped" % MODEL)
    t0 = time.time()
    cases = wgml_dump.run_dump(build, "test_trainer", env)
    print("  test_trainer --dump: %.1f s" % (time.time() - t0))
    failed = 0
    tiny = cases["tiny"]
    with tempfile.NamedTemporaryFile(suffix=".gguf", delete=False) as f:
        f.write(tiny["gguf"].tobytes())
        path = f.name
    try:
        failed += train(Model32(path), tiny, 1e-4, "tiny").done()
    finally:
        os.unlink(path)
    if "smol" in cases:
        t0 = time.time()
        m = Model32(MODEL)
        print("  SmolLM2 weights dequantised in %.1f s" % (time.time() - t0))
        failed += train(m, cases["smol"], 1e-3, "smol").done()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
