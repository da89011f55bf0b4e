"""Writes a GGUF file with random weights at a real architecture's shapes and metadata, for
timing wgml (and peers) on the models people run without downloading them: decode and prefill
speed do not depend on the weights' values.

    python3 bench/real_shapes.py MODEL TYPE OUT.gguf [--layers N]

MODEL: smollm2-135m, llama-3.2-1b, llama-3.2-3b, llama-3.1-8b, qwen2.5-3b (the shapes and hyper-parameters
of their Hugging Face configs, as llama.cpp's converter writes them). TYPE: Q4_0, Q4_1 or Q8_0
for every matrix, the token embedding and head included (quantised with the gguf package's
reference quantizers), norms in F32. K-quant
mixes (Q4_K_M) are made by llama.cpp's own quantizer (llama-quantize) from an F16 file (TYPE F16
writes that file) where it is at hand; TYPE Q4_K_M writes the same mix of types directly
(llama.cpp's rule, kmix below) from random K blocks, without the quantizer. --layers N keeps only the first N blocks (a quick check of the writer).

One random tensor is made per distinct shape and its bytes are reused for every layer (the
GPU reads each layer's copy all the same), so an 8B file takes seconds, not minutes. The
vocabulary is a SentencePiece one of the model's size (tokenizer model "llama": <unk>, <s>,
</s>, the 256 byte tokens, then placeholder pieces), which both wgml and llama.cpp load (llama.cpp
refuses a file without a vocabulary it can use: it needs the byte tokens); text falls back to
the byte tokens, and speed does not depend on which ids are read.
"""
import argparse
import sys

import numpy as np
import gguf

# name: (architecture, layers, d_model, d_ff, heads, kv heads, head dim, vocab, rope base, rms eps, tied, qkv bias)
MODELS = {
    "smollm2-135m": ("llama", 30, 576, 1536, 9, 3, 64, 49152, 100000.0, 1e-5, True, False),
    "llama-3.2-1b": ("llama", 16, 2048, 8192, 32, 8, 64, 128256, 500000.0, 1e-5, True, False),
    "llama-3.2-3b": ("llama", 28, 3072, 8192, 24, 8, 128, 128256, 500000.0, 1e-5, True, False),
    "llama-3.1-8b": ("llama", 32, 4096, 14336, 32, 8, 128, 128256, 500000.0, 1e-5, False, False),
    "qwen2.5-3b": ("qwen2", 36, 2048, 11008, 16, 2, 128, 151936, 1000000.0, 1e-6, True, True),
}
QT = gguf.GGMLQuantizationType
TYPES = {"Q4_0": QT.Q4_0, "Q4_1": QT.Q4_1, "Q8_0": QT.Q8_0, "F16": QT.F16, "Q4_K_M": QT.Q4_K}
FILE_TYPES = {"Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "Q4_1": gguf.LlamaFileType.MOSTLY_Q4_1,
              "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "F16": gguf.LlamaFileType.MOSTLY_F16,
              "Q4_K_M": gguf.LlamaFileType.MOSTLY_Q4_K_M}
# the K types' block bytes and the offsets of their f16 d fields
K_BLOCKS = {QT.Q4_K: (144, (0, 2)), QT.Q6_K: (210, (208,))}


def use_more_bits(i, n):
    """llama.cpp's Q4_K_M rule (llama_tensor_get_type): the layers whose attn_v and ffn_down
    take Q6_K: the first and last eighth, and every third in between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def kmix(name, layer, n_layer, tied):
    """The type llama-quantize gives tensor `name` of layer `layer` in a Q4_K_M file of a llama
    architecture: Q6_K for the head (the token embedding when tied), and for attn_v and ffn_down
    where use_more_bits says so; Q4_K for every other matrix."""
    if name == "output" or (name == "token_embd" and tied):
        return QT.Q6_K
    if name in ("attn_v", "ffn_down") and use_more_bits(layer, n_layer):
        return QT.Q6_K
    return QT.Q4_K


def matrix(rng, rows, cols, qtype, cache):
    """A random [rows, cols] matrix in qtype (N(0, 0.02), as initialised models are), one per shape
    and type. The K types are random blocks instead (random codes and packed scales, small
    positive f16 d's: finite values near the same scale), since the gguf package cannot quantise
    them; llama-quantize's Q4_K_M files differ only in the values, which speed does not see."""
    key = (rows, cols, qtype)
    if key not in cache and qtype in K_BLOCKS:
        bb, offs = K_BLOCKS[qtype]
        nb = rows * cols // 256
        b = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
        for o in offs:
            b[:, o:o + 2] = rng.uniform(2.0**-14, 2.0**-11, size=nb).astype(np.float16).view(np.uint8).reshape(nb, 2)
        cache[key] = b.reshape(rows, cols // 256 * bb)
    if key not in cache:
        w = (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)
        cache[key] = w.astype(np.float16) if qtype == gguf.GGMLQuantizationType.F16 else gguf.quants.quantize(w, qtype)
    return cache[key]


def add_vocab(w, n):
    """A SentencePiece vocabulary of n tokens: <unk>, <s>, </s>, the byte tokens <0x00>..<0xFF>
    (the byte fallback), then placeholder pieces "\u2581p<i>", scored in order."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    tokens += [f"\u2581p{i}" for i in range(n - len(tokens))]
    types += [gguf.TokenType.NORMAL] * (n - len(types))
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([-float(i) for i in range(n)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


def write(model, tname, out, layers=None):
    arch, n_layer, d, ff, h, hk, hd, vocab, base, eps, tied, bias = MODELS[model]
    n_layer = layers or n_layer
    qtype = TYPES[tname]
    if tname == "Q4_K_M" and (d % 256 or ff % 256):
        sys.exit(f"{model}: d_model {d} / d_ff {ff} are not whole 256-element K blocks (llama-quantize "
                 "falls back to other types there; use its F16 route)")
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(out, arch)
    w.add_name(f"{model} (random weights, {tname})")
    w.add_block_count(n_layer)
    w.add_context_length(131072 if arch == "llama" else 32768)
    w.add_embedding_length(d)
    w.add_feed_forward_length(ff)
    w.add_head_count(h)
    w.add_head_count_kv(hk)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(base)
    w.add_layer_norm_rms_eps(eps)
    w.add_vocab_size(vocab)
    w.add_file_type(FILE_TYPES[tname])
    add_vocab(w, vocab)
    cache = {}
    ones = lambda n: np.ones(n, dtype=np.float32)
    def add(name, layer, rows, cols):
        t = kmix(name, layer, n_layer, tied) if tname == "Q4_K_M" else qtype
        full = name + ".weight" if layer is None else f"blk.{layer}.{name}.weight"
        m = matrix(rng, rows, cols, t, cache)
        # the head, a second vocabulary matrix of the embedding's shape, gets its own copy
        w.add_tensor(full, m.copy() if name == "output" else m, raw_dtype=t)

    add("token_embd", None, vocab, d)
    for l in range(n_layer):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", ones(d))
        add("attn_q", l, h * hd, d)
        add("attn_k", l, hk * hd, d)
        add("attn_v", l, hk * hd, d)
        if bias:
            for t, n in (("attn_q", h * hd), ("attn_k", hk * hd), ("attn_v", hk * hd)):
                w.add_tensor(p + t + ".bias", np.zeros(n, dtype=np.float32))
        add("attn_output", l, d, h * hd)
        w.add_tensor(p + "ffn_norm.weight", ones(d))
        add("ffn_gate", l, ff, d)
        add("ffn_up", l, ff, d)
        add("ffn_down", l, d, ff)
    w.add_tensor("output_norm.weight", ones(d))
    if not tied:
        add("output", None, vocab, d)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("type", choices=sorted(TYPES))
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=None)
    a = ap.parse_args()
    write(a.model, a.type, a.out, a.layers)
    print(f"{a.out}: {a.model} {a.type}" + (f", {a.layers} layers" if a.layers else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
