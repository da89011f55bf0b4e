"""Writes the seed corpora under fuzz/corpus/ (small files; run once, the output is committed):
  gguf/      tiny valid GGUF files from the gguf Python package (metadata of every value type,
             nested arrays, tensors of each supported type, a small byte-level BPE vocabulary,
             a small SentencePiece vocabulary with scores, byte tokens and special tokens)
             and their corrupted forms (truncated, a count or a length made huge)
  tokenizer/ a flags byte then text (English, code, digits, special tokens, non-ASCII, bad UTF-8);
             flags with the top bit set drive Gemma 3's SentencePiece vocabulary
  dequant/   the 12-byte header of fuzz_dequant.c (type, size mode, n, k) then block bytes
  safetensors/ small valid files (every dtype, rank 0..3, empty tensors, metadata with escapes)
             and their corruptions (truncated, bad header length, overlapping offsets, ...)
  checkpoint/  a flags byte (bit 0: fuzz_checkpoint.c fixes the checksum) then a checkpoint
             file laid out as ckpt_save writes it (correct checksum), and corrupted forms
  data/      the 3-byte header of fuzz_data.c (flags, seq_len, eval fraction) then plain text
             in several scripts or JSONL (both forms, malformed lines)
  adapter/   a PEFT adapter as fuzz_adapter.c takes it (2-byte length, adapter_config.json,
             adapter_model.safetensors): valid ones in every dtype, and DoRA, rsLoRA, rank
             patterns, no r, an lm_head, a wrong rank, odd rows, integers, no tensors, truncated;
             and llama.cpp LoRA GGUFs (F32, F16 without alpha, an output head, mixed ranks, not lora)
Usage: .deps/venv/bin/python fuzz/make_seeds.py [target ...]   (default: all)"""
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


def write_spm_gguf(path):
    """A SentencePiece ("llama") vocabulary: control tokens, a user-defined newline, 256 byte
    tokens, pieces with scores (one unused), the dummy prefix on."""
    w = gguf.GGUFWriter(path, "gemma3")
    toks = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "\n"]
    types = [3, 3, 3, 2, 3, 3, 4]
    toks += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256
    pieces = ["\u2581", "a", "b", "ab", "\u2581a", "\u2581ab", "c", "ca", "\u00e9"]
    toks += pieces
    types += [1, 1, 1, 1, 1, 1, 1, 5, 1]
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * 263 + [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -0.5, -8.0])
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
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
    p = os.path.join(tmp, "tokenizer_spm.gguf")
    write_spm_gguf(p)
    out("gguf", "tokenizer_spm.gguf", open(p, "rb").read())
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
    # Gemma 3's SentencePiece vocabulary (the flags byte's top bit)
    spm = [
        (0x80, "Hello world, it is 2024!  Tabs\there.\n".encode()),
        (0x84, b"<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"),
        (0x80, "a    b\n\n\n\t\t\u2581 literal marker 日本語 😀 e\u0301".encode()),
        (0x83, b"\xff\xfe\x80\xc3(\xe2\x82 invalid utf-8 \xf0\x9f\x98"),
        (0x84, b"<start_of_turn<end_of_turn>><unused0>[multimodal]<start_of_image>"),
        (0x80, b"\x00\x01\x02 control \x7f" + b" " * 40 + b"x"),
    ]
    for i, (flags, t) in enumerate(spm):
        out("tokenizer", f"spm{i:02d}", bytes([flags]) + t)


def dequant_seeds():
    def hdr(typ, mode, n, k):
        return bytes([typ, mode]) + (n & (2**40 - 1)).to_bytes(5, "little") + (k & (2**40 - 1)).to_bytes(5, "little")
    rng = np.random.default_rng(2)
    for typ, bb, be in ((0, 4, 1), (1, 2, 1), (30, 2, 1), (2, 18, 32), (3, 20, 32), (8, 34, 32), (10, 84, 256),
                        (11, 110, 256), (20, 18, 32), (23, 136, 256)):
        for n, nb in ((1, 1), (3, 2)):
            k = be * nb
            data = rng.integers(0, 256, n * nb * bb, dtype=np.uint8).tobytes()
            out("dequant", f"t{typ}_n{n}_k{k}", hdr(typ, 0, n, k) + data)
    out("dequant", "neg_k", hdr(2, 0, 1, -32) + bytes(18))
    out("dequant", "huge", hdr(0, 64 | 62, 1, 1) + bytes(16))


def st_file(tensors, meta=None, pad=True):
    """A safetensors file as src/io/safetensors.c's st_build lays it out: metadata first,
    tensors in order, the header padded with spaces to a multiple of 8."""
    import json
    h = {}
    if meta is not None:
        h["__metadata__"] = meta
    off = 0
    blob = b""
    for name, dtype, shape, data in tensors:
        h[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
        blob += data
    hj = json.dumps(h, separators=(",", ":"), ensure_ascii=False).encode()
    while pad and len(hj) % 8:
        hj += b" "
    return struct.pack("<Q", len(hj)) + hj + blob


def safetensors_seeds():
    rng = np.random.default_rng(3)
    f32 = rng.standard_normal(6).astype(np.float32).tobytes()
    t = [("w", "F32", (2, 3), f32), ("ids", "I32", (4,), struct.pack("<4i", 1, -2, 3, -4)),
         ("mask", "BOOL", (3,), b"\x01\x00\x01"), ("scalar", "F64", (), struct.pack("<d", 2.5)),
         ("empty", "F16", (0, 5), b""), ("b", "BF16", (1, 1, 2), b"\x80\x3f\x00\x40"),
         ("u8", "U8", (5,), bytes(range(5))), ("i64", "I64", (1,), struct.pack("<q", -1)),
         ("u16", "U16", (2,), b"\xff\xff\x00\x01"), ("i8", "I8", (2,), b"\x80\x7f"),
         ("i16", "I16", (1,), b"\x00\x80"), ("u32", "U32", (1,), b"\x01\x02\x03\x04"),
         ("u64", "U64", (1,), bytes(8))]
    good = st_file(t, {"k": "v", "esc": "quote\" back\\ nl\n tab\t é"})
    out("safetensors", "all_dtypes.st", good)
    out("safetensors", "one.st", st_file([t[0]]))
    out("safetensors", "meta_only.st", st_file([], {"a": "1"}))
    out("safetensors", "empty_obj.st", st_file([]))
    out("safetensors", "unpadded.st", st_file(t[:3], {"x": ""}, pad=False))
    out("safetensors", "trunc_data.st", good[:-3])
    out("safetensors", "trunc_header.st", good[:40])
    out("safetensors", "short.st", good[:5])
    out("safetensors", "huge_hlen.st", struct.pack("<Q", 1 << 62) + good[8:])
    out("safetensors", "extra_byte.st", good + b"\x00")
    h = b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}'
    out("safetensors", "overlap.st", struct.pack("<Q", len(h)) + h + b"abc")
    h = b'{"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}}'
    out("safetensors", "bad_dtype.st", struct.pack("<Q", len(h)) + h + b"ab")
    h = b'{"a":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,4]}}'
    out("safetensors", "huge_shape.st", struct.pack("<Q", len(h)) + h + b"abcd")
    h = b'{"__metadata__":{"n":1},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
    out("safetensors", "meta_not_string.st", struct.pack("<Q", len(h)) + h + b"a")


def fnv1a64(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def ckpt_file(tensors, meta):
    """A checkpoint as ckpt_save writes it: format first, checksum last, FNV-1a of the file
    with the checksum's digits zeroed."""
    m = {"format": "wgml-checkpoint-1"}
    m.update(meta)
    m["checksum"] = "0" * 16
    b = st_file(tensors, m)
    i = b.index(b'"checksum":"') + len(b'"checksum":"')
    return b[:i] + b"%016x" % fnv1a64(b) + b[i + 16:]


def checkpoint_seeds():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 4)).astype(np.float32).tobytes()
    t = [("lora.0.a", "F32", (2, 4), a), ("lora.0.b", "F32", (4, 2), a), ("opt.m.0", "F32", (8,), a),
         ("opt.state", "U8", (3,), b"xyz")]
    meta = {"step": "12", "data_pos": "48", "seed": "7", "rng": "0123456789abcdef", "lora_rank": "2",
            "base_sha256": "ab" * 32}
    good = ckpt_file(t, meta)
    out("checkpoint", "good", b"\x00" + good)
    out("checkpoint", "good_fix", b"\x01" + good)
    out("checkpoint", "no_tensors", b"\x00" + ckpt_file([], {"step": "0"}))
    bad = bytearray(good)
    bad[-1] ^= 1
    out("checkpoint", "flipped_byte", b"\x00" + bytes(bad))
    out("checkpoint", "flipped_byte_fix", b"\x01" + bytes(bad))
    out("checkpoint", "truncated", b"\x00" + good[: len(good) - 5])
    out("checkpoint", "no_checksum", b"\x01" + st_file(t, {"format": "wgml-checkpoint-1"}))
    out("checkpoint", "wrong_format", b"\x01" + st_file(t, {"format": "other", "checksum": "0" * 16}))
    out("checkpoint", "short_checksum", b"\x01" + st_file([], {"format": "wgml-checkpoint-1", "checksum": "12"}))


def data_seeds():
    texts = [
        "The quick brown fox jumps over the lazy dog. " * 6,
        "naïve café — 日本語のテキストです。 Ελληνικά κείμενα. Русский текст. 😀😀 " * 3,
        "def f(x):\n    return x**2  # comment\n" * 5,
        "short",
        "",
        "<|im_start|>user\nhi<|im_end|>\n" * 4,
    ]
    for i, t in enumerate(texts):
        for j, (sl, fr) in enumerate(((8, 0), (4, 64), (1, 128), (63, 255))):
            out("data", f"text{i}_{j}", bytes([0, sl - 1, fr]) + t.encode())
    out("data", "text_bad_utf8", bytes([0, 3, 0]) + b"\xff\xfe\x80 abc \xc3( more words here and there")
    lines = [
        '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"}]}',
        '{"prompt":"2+2?","response":"4"}',
        '{"prompt":"Translate: chat","response":"cat \\u00e9 \\ud83d\\ude00"}',
        '{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},{"role":"assistant","content":"d"}]}',
    ]
    good = "\n".join(lines * 2) + "\n"
    for j, (fl, sl, fr) in enumerate(((1, 16, 0), (3, 8, 128), (7, 64, 255), (1, 1, 0))):
        out("data", f"jsonl_{j}", bytes([fl, sl - 1, fr]) + good.encode())
    malformed = [
        '{"prompt":"x"}',
        '{"prompt":"x","response":3}',
        '{"messages":[{"role":"user"}]}',
        '{"messages":"no"}',
        '{"prompt":"x","response":"y"',
        '[1,2,3]',
        '{"prompt":"x","response":"y"}\n\n   \n{"prompt":"a","response":"b"}\r\n',
        '{"messages":[]}',
        '{"prompt":"a\\u0000b","response":"c"}',
        '{"messages":[{"role":"tool","content":"x"},{"role":"assistant","content":"y"}]}',
    ]
    for j, m in enumerate(malformed):
        out("data", f"jsonl_bad{j}", bytes([1, 15, 0]) + (lines[1] + "\n" + m + "\n" + lines[0]).encode())


def npy_seeds():
    """.npy files from numpy (every dtype the reader takes, rank 0..4, versions 1 and 2) and
    corruptions (truncated data, a bad magic, a huge header length, Fortran order, bad dicts)."""
    import io
    rng = np.random.default_rng(5)
    arrays = {
        "f32_2x3": rng.standard_normal((2, 3)).astype("<f4"), "f64_4": rng.standard_normal(4),
        "i64_3x1x2": rng.integers(-9, 9, (3, 1, 2)), "i32_rank0": np.array(7, dtype="<i4"),
        "bool_5": rng.integers(0, 2, 5).astype(bool), "u8_2x2x2x2": rng.integers(0, 255, (2, 2, 2, 2)).astype("u1"),
        "i8_3": np.array([-1, 0, 1], dtype="i1"), "i16_2": np.array([300, -300], dtype="<i2"),
        "f16_3": np.array([1, 2, 3], dtype="<f2"), "f32_empty": np.zeros((0, 3), dtype="<f4"),
    }
    for name, a in arrays.items():
        b = io.BytesIO()
        np.save(b, a)
        data = b.getvalue()
        out("npy", name + ".npy", data)
        if name == "f32_2x3":
            b2 = io.BytesIO()
            np.lib.format.write_array(b2, a, version=(2, 0))
            out("npy", "v2_" + name + ".npy", b2.getvalue())
            out("npy", "truncated.npy", data[:-3])
            out("npy", "bad_magic.npy", b"\x93NUMPZ" + data[6:])
            out("npy", "huge_hlen.npy", data[:8] + b"\xff\xff" + data[10:])
            out("npy", "fortran.npy", data.replace(b"'fortran_order': False", b"'fortran_order': True "))
            out("npy", "big_endian.npy", data.replace(b"<f4", b">f4"))
            out("npy", "bad_shape.npy", data.replace(b"(2, 3)", b"(2; 3)"))
            out("npy", "huge_dim.npy", data.replace(b"(2, 3)", b"(99999999999999999999, 3)"[:6]))
            out("npy", "dup_key.npy", data.replace(b"'shape'", b"'descr'"))


def adapter_seeds():
    """fuzz_adapter.c's input: a 2-byte length, adapter_config.json, adapter_model.safetensors."""
    import json
    rng = np.random.default_rng(5)
    cfg = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"],
           "lora_dropout": 0.0, "bias": "none", "use_dora": False, "use_rslora": False, "rank_pattern": {},
           "alpha_pattern": {}, "modules_to_save": None, "fan_in_fan_out": False}

    def t(layer, mod, ab, shape, dtype="F32"):
        n = int(np.prod(shape))
        a = rng.standard_normal(n)
        data = {"F32": a.astype(np.float32), "F64": a, "F16": a.astype(np.float16)}.get(dtype)
        raw = data.tobytes() if data is not None else (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
        kind = "self_attn" if mod[0] in "qkvo" else "mlp"
        return ("base_model.model.model.layers.%d.%s.%s.lora_%s.weight" % (layer, kind, mod, ab), dtype, shape, raw)

    def seed(name, c, tensors, meta=None):
        cj = json.dumps(c).encode()
        out("adapter", name, struct.pack("<H", len(cj)) + cj + st_file(tensors, meta))

    qv = [t(0, "q_proj", "A", (2, 64)), t(0, "q_proj", "B", (64, 2)), t(1, "v_proj", "A", (2, 64)), t(1, "v_proj", "B", (32, 2))]
    seed("qv.bin", cfg, qv, {"format": "pt"})
    seed("k_f16.bin", cfg, [t(0, "k_proj", "A", (2, 64), "F16"), t(0, "k_proj", "B", (32, 2), "F16")])
    seed("down_bf16.bin", cfg, [t(1, "down_proj", "A", (2, 96), "BF16"), t(1, "down_proj", "B", (64, 2), "BF16")])
    seed("o_f64.bin", cfg, [t(0, "o_proj", "A", (2, 64), "F64"), t(0, "o_proj", "B", (64, 2), "F64")])
    seed("dora.bin", {**cfg, "use_dora": True}, qv)
    seed("rslora.bin", {**cfg, "use_rslora": True}, qv)
    seed("pattern.bin", {**cfg, "rank_pattern": {"q_proj": 4}}, qv)
    seed("no_r.bin", {k: v for k, v in cfg.items() if k != "r"}, qv)
    seed("head.bin", cfg, qv + [("base_model.model.lm_head.lora_A.weight", "F32", (2, 64), bytes(512))])
    seed("bad_rank.bin", cfg, [t(0, "q_proj", "A", (3, 64))])
    seed("odd_rows.bin", cfg, [t(0, "q_proj", "B", (62, 2))])
    seed("i32.bin", cfg, [("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", "I32", (2, 1), bytes(8))])
    seed("empty.bin", cfg, [])
    cj = json.dumps(cfg).encode()
    out("adapter", "not_object.bin", struct.pack("<H", 2) + b"[]" + st_file(qv))

    def lora_gguf(name, tensors, alpha=4.0, atype="lora"):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "a.gguf")
            w = gguf.GGUFWriter(path, "llama")
            w.add_string("general.type", "adapter")
            w.add_string("adapter.type", atype)
            if alpha is not None:
                w.add_float32("adapter.lora.alpha", alpha)
            for tn, arr in tensors:
                w.add_tensor(tn, arr)
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
            w.close()
            out("adapter", name, open(path, "rb").read())

    A = lambda k, dt=np.float32: rng.standard_normal((2, k)).astype(dt)  # noqa: E731
    B = lambda n, dt=np.float32: rng.standard_normal((n, 2)).astype(dt)  # noqa: E731
    lora_gguf("lora_f32.gguf", [("blk.0.attn_q.weight.lora_a", A(64)), ("blk.0.attn_q.weight.lora_b", B(64)),
                                ("blk.1.ffn_down.weight.lora_a", A(96)), ("blk.1.ffn_down.weight.lora_b", B(64))])
    lora_gguf("lora_f16_noalpha.gguf", [("blk.0.attn_k.weight.lora_a", A(64, np.float16)),
                                        ("blk.0.attn_k.weight.lora_b", B(32, np.float16))], alpha=None)
    lora_gguf("lora_output.gguf", [("output.weight.lora_a", A(64)), ("output.weight.lora_b", B(320))])
    lora_gguf("lora_rank_mix.gguf", [("blk.0.attn_v.weight.lora_a", A(64)), ("blk.0.attn_v.weight.lora_b",
                                                                             rng.standard_normal((32, 3)).astype(np.float32))])
    lora_gguf("not_lora.gguf", [("blk.0.attn_q.weight.lora_a", A(64))], atype="control_vector")
    out("adapter", "truncated.bin", (struct.pack("<H", len(cj)) + cj + st_file(qv))[:-9])


SEEDS = {"gguf": gguf_seeds, "tokenizer": tokenizer_seeds, "dequant": dequant_seeds, "safetensors": safetensors_seeds,
         "checkpoint": checkpoint_seeds, "data": data_seeds,
         "npy": npy_seeds, "adapter": adapter_seeds}

if __name__ == "__main__":
    which = sys.argv[1:] or list(SEEDS)
    for t in which:
        SEEDS[t]()
    for t in which:
        d = os.path.join(HERE, "corpus", t)
        print(t, len(os.listdir(d)), "files", sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)), "bytes")
