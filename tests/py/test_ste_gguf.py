"""The STE GGUF writer (src/io/gguf_write.c) against PyPI gguf.

PyPI gguf's GGUFWriter makes a GGUF with metadata of several types, an F32 tensor and Q4_0,
Q4_1 and Q8_0 weights; test_finetune_io (WGML_STE_* mode) rewrites the Q4_0 and Q4_1 weights
from latent = dequant(W) + ((i % 7) - 3) * 0.3 (f32) and also opens the result with wgml's
reader. Here GGUFReader reads the output: every metadata field and every other tensor is
unchanged, the rewritten tensors keep their scales (and minimums), and their codes are the
requant rule computed with NumPy in float32:
  Q4_0: clip(rint(latent / d), -8, 7) + 8;  Q4_1: clip(rint((latent - m) / d), 0, 15).
Usage: test_ste_gguf.py BUILD_DIR"""
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFWriter
from gguf.quants import dequantize, quantize

failures = 0
passes = 0


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
        print("FAIL:", what)


def codes_of(raw, qt):
    """(d, m, codes[rows, k]) of GGUF blocks raw[rows, bytes]."""
    bb = 18 if qt == QT.Q4_0 else 20
    rows = raw.shape[0]
    blocks = raw.reshape(rows, -1, bb)
    d = blocks[:, :, 0:2].copy().view(np.float16).astype(np.float32)[:, :, 0]
    m = blocks[:, :, 2:4].copy().view(np.float16).astype(np.float32)[:, :, 0] if qt == QT.Q4_1 else None
    qs = blocks[:, :, bb - 16:]
    codes = np.concatenate([qs & 15, qs >> 4], axis=2).reshape(rows, -1)
    return d, m, codes


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    exe = os.path.join(build, "tests", "test_finetune_io")
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.gguf")
        w = GGUFWriter(src, "llama")
        w.add_string("general.name", "ste synthetic")
        w.add_uint32("llama.block_count", 2)
        w.add_float32("llama.rope.freq_base", 10000.0)
        w.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])
        weights = {
            "norm.weight": (rng.standard_normal(64).astype(np.float32), QT.F32),
            "blk.0.attn_q.weight": (rng.standard_normal((8, 64)).astype(np.float32), QT.Q4_0),
            "blk.0.ffn_up.weight": (rng.standard_normal((6, 96)).astype(np.float32), QT.Q4_1),
            "blk.1.ffn_down.weight": (rng.standard_normal((4, 64)).astype(np.float32), QT.Q8_0),
        }
        for name, (x, qt) in weights.items():
            if qt == QT.F32:
                w.add_tensor(name, x)
            else:
                w.add_tensor(name, quantize(x, qt), raw_dtype=qt)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        out = os.path.join(tmp, "out.gguf")
        targets = ["blk.0.attn_q.weight", "blk.0.ffn_up.weight"]
        r = subprocess.run([exe], env=dict(os.environ, WGML_STE_IN=src, WGML_STE_OUT=out, WGML_STE_NAMES=",".join(targets)),
                           capture_output=True, text=True)
        check(r.returncode == 0 and "0 failed" in r.stdout, "test_finetune_io rewrite: " + r.stdout[-600:] + r.stderr[-300:])
        if not os.path.exists(out):
            print("%d passed, %d failed" % (passes, failures))
            sys.exit(1)
        a, b = GGUFReader(src), GGUFReader(out)
        check(list(a.fields) == list(b.fields), "same metadata keys")
        for k in a.fields:
            fa, fb = a.fields[k], b.fields[k]
            same = len(fa.parts) == len(fb.parts) and all(np.array_equal(x, y) for x, y in zip(fa.parts, fb.parts))
            check(same, "metadata %s unchanged" % k)
        ta = {t.name: t for t in a.tensors}
        tb = {t.name: t for t in b.tensors}
        check(list(ta) == list(tb), "same tensors in the same order")
        for name, t in ta.items():
            u = tb[name]
            check(t.tensor_type == u.tensor_type and list(t.shape) == list(u.shape) and t.data_offset == u.data_offset,
                  "%s: type, shape and offset unchanged" % name)
            if name not in targets:
                check(np.array_equal(np.asarray(t.data), np.asarray(u.data)), "%s: data unchanged" % name)
                continue
            qt = t.tensor_type
            rows, k = int(t.shape[1]), int(t.shape[0])
            deq = dequantize(np.asarray(t.data), qt).reshape(rows, k).astype(np.float32)
            idx = np.arange(rows * k).reshape(rows, k)
            latent = deq + ((idx % 7) - 3).astype(np.float32) * np.float32(0.3)
            d0, m0, _ = codes_of(np.asarray(t.data), qt)
            d1, m1, c1 = codes_of(np.asarray(u.data), qt)
            check(np.array_equal(d0, d1) and (m0 is None or np.array_equal(m0, m1)), "%s: scales/minimums unchanged" % name)
            dd = np.repeat(d0, 32, axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                if qt == QT.Q4_0:
                    want = np.clip(np.rint(latent / dd), -8, 7) + 8
                    want = np.where(dd == 0, 8, want)
                else:
                    mm = np.repeat(m0, 32, axis=1)
                    want = np.clip(np.rint((latent - mm) / dd), 0, 15)
                    want = np.where(dd == 0, 0, want)
            bad = int(np.sum(want.astype(np.int64) != c1))
            check(bad == 0, "%s: codes follow the requant rule (%d of %d differ)" % (name, bad, c1.size))
            changed = int(np.sum(np.asarray(t.data) != np.asarray(u.data)))
            check(changed > 0, "%s: the latent perturbation changed some codes (%d bytes)" % (name, changed))
            got = dequantize(np.asarray(u.data), qt).reshape(rows, k)
            lo, hi = (np.minimum(-8 * dd, 7 * dd), np.maximum(-8 * dd, 7 * dd)) if qt == QT.Q4_0 else (mm, mm + 15 * dd)
            check(np.all(np.abs(got - np.clip(latent, lo, hi)) <= np.abs(dd) / 2 + 1e-6),
                  "%s: PyPI gguf dequantises the result to within half a step of the latent" % name)
    print("%d passed, %d failed" % (passes, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
