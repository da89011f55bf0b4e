"""GGUF import exactness: PyPI gguf quantises random tensors to Q4_0 / Q4_1 / Q8_0 (and F16,
BF16); test_q4 --gguf-check imports the raw blocks, dequantises them on the host (must equal
gguf's dequantize bit for bit in fp32) and runs the forward on the GPU from the imported
blocks (checked here against float64 with gguf's dequantised weights)."""
import os
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
    cases = []
    specs = [
        ("q4_0_small", QT.Q4_0, 37, 96, 1), ("q4_0", QT.Q4_0, 64, 512, 5),
        ("q4_1_small", QT.Q4_1, 37, 96, 1), ("q4_1", QT.Q4_1, 64, 512, 70),
        ("q8_0_small", QT.Q8_0, 37, 96, 3), ("q8_0", QT.Q8_0, 64, 512, 70),
        ("f16", QT.F16, 5, 40, 0), ("bf16", QT.BF16, 5, 40, 0),
    ]
    for name, qt, n, k, m in specs:
        w = (rng.standard_normal((n, k)) * rng.uniform(0.01, 2.0, (n, 1))).astype(np.float32)
        w[0, :32] = 0.0                 # an all-zero block: d = 0
        w[1, 32:64] = np.float32(0.25)  # a constant block (Q4_1: d = 0, m = 0.25)
        w[2, :8] = np.float32(1e-6)     # tiny values: fp16 subnormals in F16
        blocks = np.ascontiguousarray(quants.quantize(w, qt))
        deq = quants.dequantize(blocks, qt).astype(np.float32).reshape(n, k)
        x = rng.uniform(-1, 1, (max(m, 1), k)).astype(np.float32)
        wgml_dump.write_gguf_case(out, name, qt, blocks, x, m)
        cases.append((name, n, k, m, deq, x))
    checker = wgml_dump.run_gguf_check(build, out, [(name, n, k, deq) for name, n, k, m, deq, x in cases])
    for name, n, k, m, deq, x in cases:
        if m:
            o = np.fromfile(os.path.join(out, f"{name}.out"), dtype=np.float32).reshape(m, n)
            ref = x.astype(np.float64) @ deq.astype(np.float64).T
            atol = max(1e-4, 1e-3 * np.sqrt(k / 8192.0))
            checker.close(f"{name} forward M={m} from imported blocks", o, ref, atol, 1e-2)
    sys.exit(checker.done())


if __name__ == "__main__":
    main()
