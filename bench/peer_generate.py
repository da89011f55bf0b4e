"""PyTorch peer for `wgml bench generate`: SmolLM2 (any GGUF Llama) in PyTorch eager fp32 on
the GPU, with the same dequantised weights (PyPI gguf) and a KV cache. Prefill: one forward
over the prompt; decode: one token at a time (argmax read back each step, as a chat loop
does). Prints tokens/s. TF32 off."""
import sys
import time

import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    return f.parts[f.data[0]][0].item()


class Llama:
    def __init__(self, path, dev):
        r = GGUFReader(path)
        self.L = int(field(r, "llama.block_count"))
        self.E = int(field(r, "llama.embedding_length"))
        self.H = int(field(r, "llama.attention.head_count"))
        self.Hk = int(field(r, "llama.attention.head_count_kv", self.H))
        self.d = self.E // self.H
        self.eps = float(field(r, "llama.attention.layer_norm_rms_epsilon"))
        self.base = float(field(r, "llama.rope.freq_base", 10000.0))
        self.t = {}
        for t in r.tensors:
            w = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
            shape = [int(x) for x in reversed(t.shape.tolist())]
            self.t[t.name] = torch.from_numpy(w.reshape(shape)).to(dev)
        self.out = self.t.get("output.weight", self.t["token_embd.weight"])
        self.dev = dev

    def rms(self, x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x, pos):
        i = torch.arange(self.d // 2, device=self.dev, dtype=torch.float32)
        ang = pos[:, None].float() * self.base ** (-2.0 * i / self.d)
        c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * c - b * s, a * s + b * c), -1).flatten(-2)

    def forward(self, ids, start, cache):
        S = ids.shape[0]
        pos = torch.arange(start, start + S, device=self.dev)
        x = self.t["token_embd.weight"][ids]
        for l in range(self.L):
            W = lambda n: self.t["blk.%d.%s.weight" % (l, n)]
            h = self.rms(x, W("attn_norm"))
            q = self.rope((h @ W("attn_q").T).view(S, self.H, self.d), pos)
            k = self.rope((h @ W("attn_k").T).view(S, self.Hk, self.d), pos)
            v = (h @ W("attn_v").T).view(S, self.Hk, self.d)
            kc, vc = cache[l]
            kc[start:start + S], vc[start:start + S] = k, v
            K = kc[:start + S].repeat_interleave(self.H // self.Hk, 1)
            V = vc[:start + S].repeat_interleave(self.H // self.Hk, 1)
            att = torch.einsum("shd,thd->hst", q, K) / self.d ** 0.5
            mask = torch.full((S, start + S), float("-inf"), device=self.dev).triu(start + 1)
            a = torch.einsum("hst,thd->shd", torch.softmax(att + mask, -1), V).reshape(S, self.E)
            x = x + a @ W("attn_output").T
            h = self.rms(x, W("ffn_norm"))
            x = x + (torch.nn.functional.silu(h @ W("ffn_gate").T) * (h @ W("ffn_up").T)) @ W("ffn_down").T
        return self.rms(x[-1:], self.t["output_norm.weight"]) @ self.out.T


def main(path, prompt_tokens=128, decode_tokens=64):
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    m = Llama(path, dev)
    ids = torch.randint(0, m.out.shape[0], (prompt_tokens,), device=dev)
    cache = [(torch.zeros(prompt_tokens + decode_tokens + 1, m.Hk, m.d, device=dev),
              torch.zeros(prompt_tokens + decode_tokens + 1, m.Hk, m.d, device=dev)) for _ in range(m.L)]
    with torch.no_grad():
        for _ in range(2):  # warm-up
            m.forward(ids, 0, cache)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits = m.forward(ids, 0, cache)
        nxt = int(logits.argmax())
        torch.cuda.synchronize()
        t_prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i in range(decode_tokens):
            logits = m.forward(torch.tensor([nxt], device=dev), prompt_tokens + i, cache)
            nxt = int(logits.argmax())  # read back each token
        t_decode = time.perf_counter() - t0
    print(f"peer generate_prefill {prompt_tokens / t_prefill:.1f} tokens/s")
    print(f"peer generate_decode {decode_tokens / t_decode:.1f} tokens/s")
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name()}")


if __name__ == "__main__":
    main(sys.argv[1])
