"""GGUF import exactness: PyPI gguf quantises random tensors to Q4_0 / Q4_1 / Q8_0 (and F16,
BF16, F32); test_qw --gguf-check imports the raw blocks, dequantises them on the host and on
the GPU (both must equal gguf's dequantize bit for bit in fp32) and runs the forward, the input
gradient and the embedding lookup on the GPU from the imported blocks (checked here against
float64 with gguf's dequantised weights; the plain types are widened to f32 at upload, K not a
multiple of 32 included)."""
import atexit
import os
import shutil
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import quants

import wgml_dump


def main():
    build = sys.argv[1]
    seed = int(os.environ.get("WGML_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    print(f"test_gguf_quant: seed {seed}")
    rng = np.random.default_rng(seed)
    out = tempfile.mkdtemp(prefix="wgml-gguf-")
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    cases = []
    specs = [
        ("q4_0_small", QT.Q4_0, 37, 96, 1), ("q4_0", QT.Q4_0, 64, 512, 5),
        ("q4_1_small", QT.Q4_1, 37, 96, 1), ("q4_1", QT.Q4_1, 64, 512, 70),
        ("q8_0_small", QT.Q8_0, 37, 96, 3), ("q8_0", QT.Q8_0, 64, 512, 70),
        ("f16", QT.F16, 5, 40, 3), ("bf16", QT.BF16, 5, 40, 9), ("f16_mm", QT.F16, 37, 77, 21),
        ("f32", QT.F32, 6, 45, 2), ("bf16_host", QT.BF16, 3, 33, 0),
    ]
    for name, qt, n, k, m in specs:
        w = (rng.standard_normal((n, k)) * rng.uniform(0.01, 2.0, (n, 1))).astype(np.float32)
        w[0, :32] = 0.0                 # an all-zero block: d = 0
        w[1, 32:64] = np.float32(0.25)  # a constant block (Q4_1: d = 0, m = 0.25)
        w[2, :8] = np.float32(1e-6)     # tiny values: fp16 subnormals in F16
        blocks = np.ascontiguousarray(quants.quantize(w, qt))
        deq = quants.dequantize(blocks, qt).astype(np.float32).reshape(n, k)
        x = rng.uniform(-1, 1, (max(m, 1), k)).astype(np.float32)
        d = rng.uniform(-1, 1, (m, n)).astype(np.float32) if m else None
        ids = rng.integers(0, n, 4).astype(np.int32) if m else None
        wgml_dump.write_gguf_case(out, name, qt, blocks, x, m, d, ids)
        cases.append((name, n, k, m, deq, x, d, ids))
    checker = wgml_dump.run_gguf_check(build, out, [(name, n, k, deq) for name, n, k, m, deq, x, d, ids in cases])
    for name, n, k, m, deq, x, d, ids in cases:
        if m:
            o = np.fromfile(os.path.join(out, f"{name}.out"), dtype=np.float32).reshape(m, n)
            ref = x.astype(np.float64) @ deq.astype(np.float64).T
            atol = max(1e-4, 1e-3 * np.sqrt(k / 8192.0))
            checker.close(f"{name} forward M={m} from imported blocks", o, ref, atol, 1e-2)
            g = np.fromfile(os.path.join(out, f"{name}.dx"), dtype=np.float32).reshape(m, k)
            ref = d.astype(np.float64) @ deq.astype(np.float64)
            checker.close(f"{name} dx M={m}", g, ref, max(1e-4, 1e-3 * np.sqrt(n / 8192.0)), 1e-2)
            e = np.fromfile(os.path.join(out, f"{name}.emb"), dtype=np.float32).reshape(len(ids), k)
            bad = int(np.sum(e.view(np.uint32) != deq[ids].view(np.uint32)))
            checker.check(f"{name} embedding bit-exact", bad == 0, f"{bad} differ")
    sys.exit(checker.done())


if __name__ == "__main__":
    main()
