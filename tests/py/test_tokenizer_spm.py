"""wgml's SentencePiece tokenizer (tokenizer.ggml.model = "llama") against PyPI sentencepiece
and Hugging Face transformers, both built from the same GGUF vocabulary (Gemma 3 270M).

sentencepiece: a ModelProto written from the GGUF's tokens, scores and token types (model_type
BPE; byte_fallback when the vocabulary has <0xXX> tokens; the identity normalizer, no NFKC:
the GGUF carries no normalization rules; add_dummy_prefix = tokenizer.ggml.add_space_prefix;
remove_extra_whitespaces false; escape_whitespaces true; user-defined pieces with their spaces
written back as U+2581, see below). This is the format's own implementation and the reference
for the ids: they must be identical, with and without matching special tokens (with matching,
the text is split at control tokens' text and the runs between are encoded by sentencepiece).

GGUF converters write a user-defined piece's U+2581 as a space (Gemma's pieces "▁▁", "▁▁▁", ...
are stored as "  ", "   ", ...). Taken literally, the pieces never match in SentencePiece
(it replaces spaces with U+2581 before it looks for user-defined pieces), and "a    b" would be
a, ▁, ▁, ▁, ▁b; with the marker put back, sentencepiece gives a, ▁▁▁▁, b, which is what
transformers gives (it keeps the original pieces) and what Gemma was trained on. So the marker
is put back here and in wgml's loader; the literal reading is checked to differ, so that the
test shows the choice matters.

transformers (AutoTokenizer.from_pretrained(dir, gguf_file=...), run in .deps/venv-pt): its
GGUF converter rebuilds the vocabulary as a `tokenizers` BPE model (merges from the scores)
with byte fallback; it matches control tokens' text, so it is compared with matching on. The
two disagree in one known way, and there sentencepiece follows the format: transformers makes
the user-defined pieces ordinary BPE pieces, reached by pairwise merges, while a SentencePiece
user-defined piece is matched whole (longest first) and never merged further. Up to the
longest such piece (31 spaces, newlines or tabs in Gemma) both give one piece; a longer run,
e.g. 32 spaces, is 31 + 1 in sentencepiece (and in llama.cpp, which also matches user-defined
pieces whole) but 16 + 16 in transformers. Texts with such a run are counted apart; any other
difference fails the test.

Texts: the King James Bible (.deps/data/kjv.txt, its first 1.5 MB), the Jargon File (jargon-text), the
licences in /usr/share/common-licenses, hard strings (byte fallback, whitespace runs, tabs and
newlines, emoji, CJK, combining marks, special-token text, the empty string) and random strings
of assigned code points. Invalid UTF-8 (which Python strings cannot hold) is checked on its own:
wgml keeps each invalid byte and encodes it as its <0xXX> token, where sentencepiece would first
replace it with U+FFFD; decode gives the bytes back. Decode is checked against sentencepiece's
and decode(encode(s)) == s.
Usage: test_tokenizer_spm.py BUILD_DIR"""
import glob
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, ".deps", "models", "gemma-3-270m-q4_k_m.gguf")
VENV_PT = os.path.join(ROOT, ".deps", "venv-pt", "bin", "python")

failures = 0
passes = 0


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
        print("FAIL:", what)


def read_kv(path):
    """The GGUF file's metadata (key -> value; arrays as lists), read with struct: gguf's
    GGUFReader also indexes every tensor and array element, half a minute for this file."""
    import mmap
    import struct
    f = open(path, "rb")
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", m, 0)
    assert magic == b"GGUF" and version in (2, 3), (magic, version)
    pos = 24
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def string(pos):
        (n,) = struct.unpack_from("<Q", m, pos)
        return m[pos + 8:pos + 8 + n].decode("utf-8"), pos + 8 + n

    def value(t, pos):
        if t == 8:
            return string(pos)
        if t == 9:
            et, n = struct.unpack_from("<IQ", m, pos)
            pos += 12
            if et in scalar:
                size = struct.calcsize("<" + scalar[et])
                return list(struct.unpack_from(f"<{n}{scalar[et]}", m, pos)), pos + n * size
            out = []
            for _ in range(n):
                v, pos = value(et, pos)
                out.append(v)
            return out, pos
        (v,) = struct.unpack_from("<" + scalar[t], m, pos)
        return v, pos + struct.calcsize("<" + scalar[t])

    kv = {}
    for _ in range(n_kv):
        k, pos = string(pos)
        (t,) = struct.unpack_from("<I", m, pos)
        kv[k], pos = value(t, pos + 4)
    return kv


def read_vocab(path):
    kv = read_kv(path)
    meta = {k: kv.get("tokenizer.ggml." + k) for k in
            ("bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id")}
    meta["add_space_prefix"] = bool(kv.get("tokenizer.ggml.add_space_prefix", True))
    meta["add_bos_token"] = bool(kv.get("tokenizer.ggml.add_bos_token", True))
    return (kv["tokenizer.ggml.model"], kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.scores"],
            kv["tokenizer.ggml.token_type"], meta)


def make_sp(tokens, scores, types, meta, dummy_prefix, literal_user=False):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb
    m = pb.ModelProto()
    for t, s, y in zip(tokens, scores, types):
        p = m.pieces.add()
        p.piece, p.score, p.type = (t if literal_user or y != 4 else t.replace(" ", "\u2581")), s, y
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = 6 in types
    m.trainer_spec.unk_id = meta["unknown_token_id"]
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = dummy_prefix
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    return spm.SentencePieceProcessor(model_proto=m.SerializeToString())


def run(tool, args, data):
    p = subprocess.run([tool] + args, input=data, capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


class Ref:
    """sentencepiece ids for a text, with or without control-token matching."""

    def __init__(self, tokens, scores, types, meta):
        self.sp = make_sp(tokens, scores, types, meta, meta["add_space_prefix"])
        self.sp_noprefix = make_sp(tokens, scores, types, meta, False) if meta["add_space_prefix"] else self.sp
        self.control = sorted({t for t, y in zip(tokens, types) if y in (2, 3) and t}, key=len, reverse=True)
        self.literal = make_sp(tokens, scores, types, meta, meta["add_space_prefix"], literal_user=True)
        self.ids = {}
        for i, t in enumerate(tokens):
            self.ids.setdefault(t, i)

    def encode(self, text, special):
        if not special:
            return self.sp.encode(text)
        out, seg, p = [], 0, 0
        while p < len(text):
            m = next((c for c in self.control if text.startswith(c, p)), None) if text[p] in "<[" else None
            if m is None:
                p += 1
                continue
            if seg < p:
                out += (self.sp if seg == 0 else self.sp_noprefix).encode(text[seg:p])
            out.append(self.ids[m])
            p += len(m)
            seg = p
        if seg < len(text):
            out += (self.sp if seg == 0 else self.sp_noprefix).encode(text[seg:])
        return out


def compare(tool, ref, name, text, special=False, verbose=False):
    t0 = time.time()
    want = ref.encode(text, special)
    t_ref = time.time() - t0
    rc, out, err = run(tool, ["encode", MODEL] + (["--special"] if special else []), text.encode("utf-8"))
    got = [int(x) for x in out.split()] if rc == 0 else None
    ok = got == want
    if not ok and got is not None:
        i = first_diff(got, want)
        print(f"  {name}: first difference at id {i}: wgml {got[max(0, i - 3):i + 5]} sentencepiece {want[max(0, i - 3):i + 5]}")
    check(ok, f"{name} (special={special}): ids differ from sentencepiece {err}")
    if verbose or not ok:
        print(f"  {name}: {len(text.encode())} bytes, {len(want)} ids: {'ok' if ok else 'DIFFER'} "
              f"(sentencepiece {t_ref:.2f} s; wgml {err.strip()})")
    rc, out, err = run(tool, ["roundtrip", MODEL] + (["--special"] if special else []), text.encode("utf-8"))
    check(rc == 0, f"{name}: decode(encode(s)) != s: {out!r} {err}")
    if not special:
        rc, out, err = run(tool, ["decode", MODEL], " ".join(map(str, want)).encode())
        check(rc == 0 and out == ref.sp.decode(want).encode("utf-8"), f"{name}: decode differs from sentencepiece's")
    return want


HARD = [
    "", " ", "  ", "\n", "\n\n\n", "\t\t x", "a  b   c    d", "a    b", "trailing   ", "   leading",
    "Hello world! It's 2024, isn't it?  I'm sure we'll see; you'd've THEY'RE 'quoted'",
    "1234567890 3.14159 -42 1,000,000 ½ ² Ⅻ ٣٤٥ ๓", "x = a+b*(c-d)/e; // comment\n\tif (x) { return 0; }",
    "Ünïcödé façade naïve café — “quotes” ‘single’ … ©®™ €£¥",
    "日本語のテキストと中文文本，한국어 텍스트。", "Ελληνικά Русский עברית العربية हिन्दी ไทย",
    "emoji 😀😃🎉 👩‍👩‍👧‍👦 🇫🇷 👍🏽 and ❤️", "zero\u200bwidth\u200d joiner \ufeffbom",
    "nbsp\u00a0here\u2003em\u3000ideo\u2028line\u2029para\u0085nel",
    "\x1c\x1d\x1e\x1f control \x01\x02\x7f", "tabs\tand\r\nCRLF\r\n", " \n \n  \n", "\t\t\t\t\t\t\tx",
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "<bos><eos>x<pad><unk><mask>",
    "<start_of_turn", "<<end_of_turn>>", "[multimodal]<start_of_image><end_of_image>", "<unused0><unused6241>",
    "x\u0301\u0302 combining e\u0301 a\u030a", "\U0001d400\U0001d401 math \U00010348 gothic", "\ue000 private \U000f0000",
    "a" * 3000, " " * 500 + "x", "-" * 200, "\n" * 40 + "x", "ab" * 1000, "▁ literal marker ▁▁",
]


def compare_batch(tool, ref, name, texts, special):
    """Many short strings in one run of the tool: ids and decode(ids) of each."""
    assert all("\0" not in t for t in texts)
    rc, out, err = run(tool, ["batch", MODEL] + (["--special"] if special else []),
                       b"\0".join(t.encode("utf-8") for t in texts))
    lines = out.decode().split("\n")
    check(rc == 0 and len(lines) == 2 * len(texts) + 1, f"{name}: batch run failed: {err}")
    if rc != 0:
        return
    for i, text in enumerate(texts):
        want = ref.encode(text, special)
        got = [int(x) for x in lines[2 * i].split()]
        if got != want:
            j = first_diff(got, want)
            print(f"  {name}[{i}] {text[:60]!r}: first difference at id {j}: wgml {got[max(0, j - 3):j + 5]} sp {want[max(0, j - 3):j + 5]}")
        check(got == want, f"{name}[{i}] (special={special}): ids differ")
        back = bytes.fromhex(lines[2 * i + 1])
        # a U+2581 in the text stands for a space
        check(back == text.replace("\u2581", " ").encode("utf-8"), f"{name}[{i}]: decode(encode(s)) != s: {back[:80]!r}")
        if not special:
            check(back.decode("utf-8") == ref.sp.decode(want), f"{name}[{i}]: decode differs from sentencepiece's")


def random_strings(rng, n):
    pools = [range(0x20, 0x7F), range(0xA0, 0x250), range(0x300, 0x36F), range(0x370, 0x3FF), range(0x400, 0x4FF),
             range(0x600, 0x6FF), range(0x900, 0x97F), range(0x2000, 0x206F), range(0x2150, 0x218F),
             range(0x3000, 0x30FF), range(0x4E00, 0x4F00), range(0xAC00, 0xAD00), range(0xFF00, 0xFFEF),
             range(0x1F300, 0x1F64F), range(0x1D400, 0x1D7FF), range(0x9, 0xE)]
    out = []
    for _ in range(n):
        s = []
        for _ in range(rng.randint(1, 60)):
            c = chr(rng.choice(rng.choice(pools)))
            if unicodedata.category(c) in ("Cs",):
                continue
            s.append(c * rng.choice([1, 1, 1, 2, 5]))
        out.append("".join(s))
    return out


HF_SCRIPT = r"""
import json, sys
from transformers import AutoTokenizer
d, name, texts_path, out_path = sys.argv[1:5]
tk = AutoTokenizer.from_pretrained(d, gguf_file=name)
texts = json.load(open(texts_path))
json.dump([tk.encode(t, add_special_tokens=False) for t in texts], open(out_path, "w"))
"""


def compare_transformers(tokens, types, texts, ref):
    """transformers' GGUF tokenizer on texts; returns (same, known differences, other differences)."""
    if not os.path.exists(VENV_PT):
        check(False, f"{VENV_PT} missing")
        return
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(MODEL, os.path.join(tmp, "model.gguf"))
        json.dump(texts, open(os.path.join(tmp, "texts.json"), "w"))
        script = os.path.join(tmp, "hf.py")
        open(script, "w").write(HF_SCRIPT)
        t0 = time.time()
        p = subprocess.run([VENV_PT, script, tmp, "model.gguf", os.path.join(tmp, "texts.json"),
                            os.path.join(tmp, "out.json")], capture_output=True, text=True)
        if p.returncode != 0:
            check(False, f"transformers failed: {p.stderr[-2000:]}")
            return
        hf = json.load(open(os.path.join(tmp, "out.json")))
        print(f"  transformers: {len(texts)} texts in {time.time() - t0:.1f} s")
    import re
    same = other = known = 0
    for text, h in zip(texts, hf):
        s = ref.encode(text, True)
        if s == h:
            same += 1
        elif re.search(r"( {32,}|\n{32,}|\t{32,})", text):
            known += 1
        else:
            other += 1
            i = first_diff(s, h)
            print(f"  transformers differs on {text[:60]!r}: at {i}: sentencepiece {s[max(0, i - 2):i + 4]} "
                  f"transformers {h[max(0, i - 2):i + 4]} {[tokens[x] for x in h[max(0, i - 2):i + 4]]}")
    print(f"  transformers vs sentencepiece (special tokens matched): {same} texts the same, {known} differ by a run "
          f"longer than the longest user-defined piece, {other} otherwise")
    check(other == 0, f"transformers differs from sentencepiece in {other} of {len(texts)} texts")


def main():
    build = sys.argv[1]
    try:
        from sentencepiece import sentencepiece_model_pb2  # noqa: F401
    except Exception as e:  # e.g. its generated code needs a newer protobuf than this venv's
        if os.environ.get("WGML_SPM_REEXEC") or not os.path.exists(VENV_PT):
            raise
        print(f"sentencepiece's ModelProto does not load here ({type(e).__name__}: {str(e)[:160]}); "
              f"running under {VENV_PT}", flush=True)
        os.environ["WGML_SPM_REEXEC"] = "1"
        os.execv(VENV_PT, [VENV_PT] + sys.argv)
    tool = os.path.join(build, "tests", "tool_model")
    if not os.path.exists(MODEL):
        print(f"FAIL: {MODEL} is missing: run scripts/setup.sh")
        return 1
    t0 = time.time()
    model, tokens, scores, types, meta = read_vocab(MODEL)
    check(model == "llama", f"tokenizer.ggml.model is {model}")
    ref = Ref(tokens, scores, types, meta)
    print(f"sentencepiece reference: {len(tokens)} pieces, {meta}, built in {time.time() - t0:.1f} s")

    texts = []
    kjv = os.path.join(ROOT, ".deps", "data", "kjv.txt")
    if os.path.exists(kjv):
        # the first 1.5 MB keeps the test's time down (sentencepiece takes 4 s per MB here)
        texts.append(("kjv (first 1.5 MB)", open(kjv, encoding="utf-8").read()[:1_500_000]))
    else:
        check(False, f"{kjv} missing")
    jpath = "/usr/share/doc/jargon-text/jargon.txt.gz"
    if os.path.exists(jpath):
        texts.append(("jargon", gzip.open(jpath).read().decode("latin-1")))
    else:
        check(False, f"{jpath} missing (apt-get install jargon-text)")
    lic = ""
    for p in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(p):
            lic += open(p, "rb").read().decode("utf-8", errors="replace")
    texts.append(("common-licenses", lic))
    total = 0
    for name, text in texts:
        compare(tool, ref, name, text, special=False, verbose=True)
        total += len(text.encode())
    print(f"  {total / 1e6:.1f} MB of text compared")
    # with special tokens matched: the jargon file with chat markup spliced in
    marked = "<start_of_turn>user\n" + texts[-1][1][:200_000].replace("\n\n", "<end_of_turn>\n<start_of_turn>model\n") + "<eos>"
    compare(tool, ref, "licences with turn markup", marked, special=True, verbose=True)

    for special in (False, True):
        compare_batch(tool, ref, "hard", HARD, special)
    rng = random.Random(int(os.environ.get("WGML_SEED", "1234")))
    rs = random_strings(rng, 300)
    compare(tool, ref, "random strings (joined)", "\n".join(rs), verbose=True)
    compare(tool, ref, "NUL bytes", "a\x00b\x00\x00 c\x00", verbose=True)
    compare_batch(tool, ref, "random", rs, False)

    # invalid UTF-8: each invalid byte becomes its <0xXX> token and decode gives it back
    byte_id = {int(t[3:5], 16): i for i, (t, y) in enumerate(zip(tokens, types)) if y == 6}
    for raw in (b"a\xffb", b"\xc3", b"ok \xe2\x82 cut", b"\xf0\x9f\x98", b"\x80\x80", b"\xed\xa0\x80 surrogate"):
        rc, out, err = run(tool, ["encode", MODEL], raw)
        ids = [int(x) for x in out.split()]
        bad = [b for b in raw if b >= 0x80]
        check(rc == 0 and all(byte_id[b] in ids for b in bad), f"invalid UTF-8 {raw!r}: byte tokens {ids}")
        rc, out, err = run(tool, ["roundtrip", MODEL], raw)
        check(rc == 0, f"invalid UTF-8 {raw!r}: decode(encode(s)) != s {out!r}")

    # the user-defined pieces taken literally give other ids (the choice above matters)
    check(ref.literal.encode("a    b") != ref.sp.encode("a    b"), "literal user-defined pieces differ")
    print(f"  'a    b': {ref.sp.encode('a    b')}; with the pieces taken literally {ref.literal.encode('a    b')}")

    # BOS per add_bos_token, and the chat prompt's ids
    rc, out, _ = run(tool, ["encode", MODEL, "--bos"], b"hi")
    check(rc == 0 and [int(x) for x in out.split()] == [meta["bos_token_id"]] + ref.sp.encode("hi"), "BOS id")
    rc, out, err = run(tool, ["chat", MODEL, "--gen", "system", "Be brief.", "user", " Hi there \n",
                              "assistant", "Hello.", "user", "2+2?"], b"")
    want = ("<bos><start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n")
    check(rc == 0 and out.decode() == want, f"chat: {out!r} {err}")
    rc, out2, err = run(tool, ["encode", MODEL, "--special"], out)
    check(rc == 0 and [int(x) for x in out2.split()] == ref.encode(want, True), "chat prompt ids")

    # transformers' GGUF tokenizer: hard and random strings, and 200 KB of the Bible
    compare_transformers(tokens, types, HARD + rs + [texts[0][1][:200_000], texts[1][1][:200_000]], ref)
    print(f"{passes} passed, {failures} failed ({time.time() - t0:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
