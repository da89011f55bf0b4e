"""Writes a GGUF file with random weights at a real architecture's shapes and metadata, for
timing wgml (and peers) on the models people run without downloading them: decode and prefill
speed do not depend on the weights' values.

    python3 bench/real_shapes.py MODEL TYPE OUT.gguf [--layers N]

MODEL: smollm2-135m, llama-3.2-1b, llama-3.2-3b, llama-3.1-8b, qwen2.5-3b (the shapes and hyper-parameters
of their Hugging Face configs, as llama.cpp's converter writes them). TYPE: Q4_0, Q4_1 or Q8_0
for every matrix, the token embedding and head included (quantised with the gguf package's
reference quantizers), norms in F32. K-quant
mixes (Q4_K_M) need llama.cpp's own quantizer (llama-quantize) run on an F16 file: TYPE F16
writes that file. --layers N keeps only the first N blocks (a quick check of the writer).

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
TYPES = {"Q4_0": gguf.GGMLQuantizationType.Q4_0, "Q4_1": gguf.GGMLQuantizationType.Q4_1,
         "Q8_0": gguf.GGMLQuantizationType.Q8_0, "F16": gguf.GGMLQuantizationType.F16}
FILE_TYPES = {"Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "Q4_1": gguf.LlamaFileType.MOSTLY_Q4_1,
              "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "F16": gguf.LlamaFileType.MOSTLY_F16}


def matrix(rng, rows, cols, qtype, cache):
    """A random [rows, cols] matrix in qtype (N(0, 0.02), as initialised models are), one per shape."""
    key = (rows, cols)
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
    w.add_tensor("token_embd.weight", matrix(rng, vocab, d, qtype, cache), raw_dtype=qtype)
    for l in range(n_layer):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", ones(d))
        w.add_tensor(p + "attn_q.weight", matrix(rng, h * hd, d, qtype, cache), raw_dtype=qtype)
        w.add_tensor(p + "attn_k.weight", matrix(rng, hk * hd, d, qtype, cache), raw_dtype=qtype)
        w.add_tensor(p + "attn_v.weight", matrix(rng, hk * hd, d, qtype, cache), raw_dtype=qtype)
        if bias:
            for t, n in (("attn_q", h * hd), ("attn_k", hk * hd), ("attn_v", hk * hd)):
                w.add_tensor(p + t + ".bias", np.zeros(n, dtype=np.float32))
        w.add_tensor(p + "attn_output.weight", matrix(rng, d, h * hd, qtype, cache), raw_dtype=qtype)
        w.add_tensor(p + "ffn_norm.weight", ones(d))
        w.add_tensor(p + "ffn_gate.weight", matrix(rng, ff, d, qtype, cache), raw_dtype=qtype)
        w.add_tensor(p + "ffn_up.weight", matrix(rng, ff, d, qtype, cache), raw_dtype=qtype)
        w.add_tensor(p + "ffn_down.weight", matrix(rng, d, ff, qtype, cache), raw_dtype=qtype)
    w.add_tensor("output_norm.weight", ones(d))
    if not tied:  # a second vocabulary matrix of the same shape: its own copy of the bytes
        w.add_tensor("output.weight", matrix(rng, vocab, d, qtype, cache).copy(), raw_dtype=qtype)
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
