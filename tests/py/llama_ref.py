"""An independent float64 Llama for checking wgml's model: the weights are read by the PyPI
`gguf` package (GGUFReader) and dequantised by gguf.quants.dequantize, the forward is plain
PyTorch (torch 1.13, CPU, float64). Nothing here comes from wgml.

The architecture, from the GGUF's llama.* metadata:
  x = token_embd[ids]
  per layer:  h = rmsnorm(x) * attn_norm
              q = h Wq^T, k = h Wk^T, v = h Wv^T        (split into heads of head_dim)
              rope on q and k (below)
              a = softmax(q k^T / sqrt(head_dim) + causal mask) v, KV head = q head // (Hq/Hkv)
              x = x + a Wo^T
              h = rmsnorm(x) * ffn_norm
              x = x + (silu(h Wgate^T) * (h Wup^T)) Wdown^T
  logits = (rmsnorm(x) * output_norm) W_out^T, W_out = output.weight or, when absent,
           token_embd.weight (tied)
  rmsnorm(x) = x / sqrt(mean(x^2) + eps)

RoPE as llama.cpp applies it to GGUF Llama weights ("normal" mode; the converter permuted
the q/k rows of the Hugging Face checkpoint so that this mode is equivalent to HF's
rotate_half): within each head of dimension d, the ADJACENT pairs (x[2i], x[2i+1]) for
i = 0 .. d/2 - 1 rotate by the angle pos * base^(-2i/d):
  x'[2i]   = x[2i] cos - x[2i+1] sin
  x'[2i+1] = x[2i] sin + x[2i+1] cos

Usage as a module: Llama(path).logits(ids) -> float64 tensor [len(ids), vocab].
"""
import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.parts[f.data[0]]
    if f.types and f.types[0].name == "STRING":
        return bytes(v).decode("utf-8")
    return v[0].item()


class Llama:
    def __init__(self, path):
        r = GGUFReader(path)
        arch = _field(r, "general.architecture")
        assert arch == "llama", arch
        self.n_layer = int(_field(r, "llama.block_count"))
        self.n_embd = int(_field(r, "llama.embedding_length"))
        self.n_head = int(_field(r, "llama.attention.head_count"))
        self.n_head_kv = int(_field(r, "llama.attention.head_count_kv", self.n_head))
        self.head_dim = self.n_embd // self.n_head
        self.eps = float(_field(r, "llama.attention.layer_norm_rms_epsilon"))
        self.base = float(_field(r, "llama.rope.freq_base", 10000.0))
        self.t = {}
        for t in r.tensors:
            # dequantize gives the numpy array in the file's row-major shape [n, k]
            w = dequantize(t.data, t.tensor_type)
            shape = [int(x) for x in reversed(t.shape.tolist())]
            self.t[t.name] = torch.from_numpy(np.asarray(w, dtype=np.float64).reshape(shape))
        self.out = self.t.get("output.weight", self.t["token_embd.weight"])
        # rope_freqs.weight (Llama 3 files): each pair's frequency is divided by its factor
        self.freq_factors = self.t.get("rope_freqs.weight")

    def _rms(self, x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def _rope(self, x, pos):
        # x [S, H, d]; adjacent pairs (2i, 2i+1) rotate by pos * base^(-2i/d)
        d = x.shape[-1]
        i = torch.arange(d // 2, dtype=torch.float64)
        freq = self.base ** (-2.0 * i / d)
        if self.freq_factors is not None:
            freq = freq / self.freq_factors
        ang = pos[:, None].to(torch.float64) * freq  # [S, d/2]
        c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = a * c - b * s
        out[..., 1::2] = a * s + b * c
        return out

    def logits(self, ids):
        S, hd, H, Hk = len(ids), self.head_dim, self.n_head, self.n_head_kv
        pos = torch.arange(S)
        x = self.t["token_embd.weight"][torch.tensor(ids, dtype=torch.long)]
        mask = torch.full((S, S), float("-inf"), dtype=torch.float64).triu(1)
        for l in range(self.n_layer):
            W = lambda n: self.t["blk.%d.%s.weight" % (l, n)]
            h = self._rms(x, W("attn_norm"))
            q = self._rope((h @ W("attn_q").T).reshape(S, H, hd), pos)
            k = self._rope((h @ W("attn_k").T).reshape(S, Hk, hd), pos)
            v = (h @ W("attn_v").T).reshape(S, Hk, hd)
            rep = H // Hk
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
            att = torch.einsum("shd,thd->hst", q, k) / np.sqrt(hd) + mask
            a = torch.einsum("hst,thd->shd", torch.softmax(att, -1), v).reshape(S, H * hd)
            x = x + a @ W("attn_output").T
            h = self._rms(x, W("ffn_norm"))
            x = x + (torch.nn.functional.silu(h @ W("ffn_gate").T) * (h @ W("ffn_up").T)) @ W("ffn_down").T
        return self._rms(x, self.t["output_norm.weight"]) @ self.out.T
