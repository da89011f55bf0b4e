"""Writes the seed corpora under fuzz/corpus/ (small files; run once, the output is committed):
  gguf/      tiny valid GGUF files from the gguf Python package (metadata of every value type,
             nested arrays, tensors of each supported type, a small byte-level BPE vocabulary)
             and their corrupted forms (truncated, a count or a length made huge)
  tokenizer/ a flags byte then text (English, code, digits, special tokens, non-ASCII, bad UTF-8)
  dequant/   the 12-byte header of fuzz_dequant.c (type, size mode, n, k) then block bytes
Usage: .deps/venv/bin/python fuzz/make_seeds.py"""
import os
import struct
import sys
import tempfile

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))


def out(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def byte_chars():
    """GPT-2's byte -> printable character map."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_gguf(path, with_tokenizer, tensors):
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint32("test.u32", 7)
    w.add_int32("test.i32", -3)
    w.add_float32("test.f32", 1.5)
    w.add_uint64("test.u64", 1 << 40)
    w.add_int64("test.i64", -(1 << 40))
    w.add_float64("test.f64", 2.25)
    w.add_bool("test.bool", True)
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_string("test.str", "héllo")
    w.add_array("test.arr_i32", [1, 2, 3])
    w.add_array("test.arr_str", ["a", "bc", ""])
    w.add_array("test.arr_nested", [[1, 2], [3]])
    if with_tokenizer:
        bc = byte_chars()
        toks = [bc[b] for b in range(256)] + ["Ġt", "he", "Ġthe", "<|im_start|>", "<|im_end|>"]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("smollm")
        w.add_token_list(toks)
        w.add_token_types([1] * 259 + [3, 3])
        w.add_token_merges(["Ġ t", "h e", "Ġt he"])
        w.add_bos_token_id(259)
        w.add_eos_token_id(260)
        w.add_chat_template("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}")
    rng = np.random.default_rng(1)
    for name, qtype, shape in tensors:
        x = rng.standard_normal(shape).astype(np.float32)
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, x)
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            q = gguf.quants.quantize(x, qtype)
            w.add_tensor(name, q, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_seeds():
    T = gguf.GGMLQuantizationType
    tmp = tempfile.mkdtemp()
    variants = {
        "meta_only.gguf": (False, []),
        "tokenizer.gguf": (True, []),
        "tensors.gguf": (False, [("a", T.F32, (2, 3)), ("b", T.F16, (4,)), ("c", T.Q4_0, (1, 32)),
                                 ("d", T.Q4_1, (2, 32)), ("e", T.Q8_0, (1, 32)), ("f", T.BF16, (2, 2))]),
    }
    for name, (tok, tensors) in variants.items():
        p = os.path.join(tmp, name)
        write_gguf(p, tok, tensors)
        data = open(p, "rb").read()
        out("gguf", name, data)
    # corruptions of the smallest file
    base = open(os.path.join(tmp, "tensors.gguf"), "rb").read()
    out("gguf", "trunc_header.gguf", base[:20])
    out("gguf", "trunc_mid.gguf", base[: len(base) // 2])
    out("gguf", "huge_kv_count.gguf", base[:16] + struct.pack("<Q", 1 << 60) + base[24:])
    out("gguf", "huge_tensor_count.gguf", base[:8] + struct.pack("<Q", 1 << 60) + base[16:])
    out("gguf", "v2.gguf", base[:4] + struct.pack("<I", 2) + base[8:])
    out("gguf", "empty_v3.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 0))


def tokenizer_seeds():
    texts = [
        (0, b"Hello, world!"),
        (0, b"The quick brown fox jumps over the lazy dog. 1234567890"),
        (4, b"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"),
        (3, b"  leading spaces\ttabs\n\nnewlines   "),
        (0, "naïve café — 日本語のテキスト 😀 Ελληνικά".encode()),
        (0, b"def f(x):\n    return x**2  # comment\n"),
        (0, b"\xff\xfe\x80\xc3(\xe2\x82 invalid utf-8 \xf0\x9f\x98"),
        (4, b"<|endoftext|><|im_end|><|im_start|"),
        (0, b"I'm can't we'll they've 'S 'LL"),
        (0, b"\x00\x01\x02 control \x7f"),
    ]
    for i, (flags, t) in enumerate(texts):
        out("tokenizer", f"text{i:02d}", bytes([flags]) + t)


def dequant_seeds():
    def hdr(typ, mode, n, k):
        return bytes([typ, mode]) + (n & (2**40 - 1)).to_bytes(5, "little") + (k & (2**40 - 1)).to_bytes(5, "little")
    rng = np.random.default_rng(2)
    for typ, bb, be in ((0, 4, 1), (1, 2, 1), (30, 2, 1), (2, 18, 32), (3, 20, 32), (8, 34, 32)):
        for n, nb in ((1, 1), (3, 2)):
            k = be * nb
            data = rng.integers(0, 256, n * nb * bb, dtype=np.uint8).tobytes()
            out("dequant", f"t{typ}_n{n}_k{k}", hdr(typ, 0, n, k) + data)
    out("dequant", "neg_k", hdr(2, 0, 1, -32) + bytes(18))
    out("dequant", "huge", hdr(0, 64 | 62, 1, 1) + bytes(16))


if __name__ == "__main__":
    gguf_seeds()
    tokenizer_seeds()
    dequant_seeds()
    for t in ("gguf", "tokenizer", "dequant"):
        d = os.path.join(HERE, "corpus", t)
        print(t, len(os.listdir(d)), "files", sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)), "bytes")
