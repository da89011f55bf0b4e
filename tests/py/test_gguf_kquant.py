"""GGUF host-side block formats Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: wgml_gguf_dequantize (through
test_q4 --gguf-check, host dequantisation only) must equal PyPI gguf's numpy dequantize bit for
bit in fp32. Q5_0 / Q5_1 blocks come from gguf's own quantiser (random weights with an all-zero,
a constant and a tiny block) and, like the K types (which gguf cannot quantise), from random raw
bytes whose fp16 fields are finite: extreme scales (±65504), subnormal and zero scales, and
blocks whose codes are all zero or all saturated. These types are not run on the GPU yet, so
no forward is checked here (the wrong-size and bad-K errors are in test_q4's error cases)."""
import os
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import quants

import wgml_dump

# byte size of one block and the offsets of its fp16 fields, from the GGUF block layouts
LAYOUT = {
    QT.Q5_0: (32, 22, [0]),
    QT.Q5_1: (32, 24, [0, 2]),
    QT.Q4_K: (256, 144, [0, 2]),
    QT.Q5_K: (256, 176, [0, 2]),
    QT.Q6_K: (256, 210, [208]),
}
# zero, ±smallest and largest subnormal, smallest normal, one, ±largest finite
SPECIAL_HALVES = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0xFBFF],
                          dtype=np.uint16)


def finite_halves(rng, size):
    """Random fp16 bit patterns with no inf / NaN, a third of them from SPECIAL_HALVES."""
    h = rng.integers(0, 1 << 16, size=size, dtype=np.uint32).astype(np.uint16)
    h[(h >> 10) & 0x1F == 0x1F] &= np.uint16(0xBFFF)  # exponent 31 -> 15
    pick = rng.random(size) < 0.33
    h[pick] = rng.choice(SPECIAL_HALVES, size=int(pick.sum()))
    return h


def raw_blocks(rng, qt, n, k):
    """n rows of k elements as random raw blocks with finite fp16 fields; row 0 holds an
    all-zero-codes block and an all-saturated-codes block (every non-fp16 byte 0x00 / 0xFF)."""
    be, bb, halves = LAYOUT[qt]
    nb = k // be
    b = rng.integers(0, 256, size=(n, nb, bb), dtype=np.uint16).astype(np.uint8)
    fixed = np.zeros(bb, dtype=bool)
    for off in halves:
        fixed[off:off + 2] = True
    b[0, 0, ~fixed] = 0x00
    b[0, 1 % nb, ~fixed] = 0xFF
    for off in halves:
        h = finite_halves(rng, (n, nb))
        b[:, :, off] = (h & 0xFF).astype(np.uint8)
        b[:, :, off + 1] = (h >> 8).astype(np.uint8)
    return b.reshape(n, nb * bb)


def quantised_blocks(rng, qt, n, k):
    w = (rng.standard_normal((n, k)) * rng.uniform(0.01, 2.0, (n, 1))).astype(np.float32)
    w[0, :32] = 0.0                 # an all-zero block: d = 0
    w[1, 32:64] = np.float32(0.25)  # a constant block
    w[2, :32] = np.float32(1e-6)    # tiny values: a subnormal fp16 scale
    w[3, :32] = np.float32(6e4)     # near the largest fp16
    return np.ascontiguousarray(quants.quantize(w, qt))


def main():
    build = sys.argv[1]
    seed = int(os.environ.get("WGML_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    print(f"test_gguf_kquant: seed {seed}")
    rng = np.random.default_rng(seed)
    out = tempfile.mkdtemp(prefix="wgml-kquant-")
    cases = []
    specs = [
        ("q5_0_quant", QT.Q5_0, 37, 96, quantised_blocks), ("q5_0_raw", QT.Q5_0, 64, 256, raw_blocks),
        ("q5_1_quant", QT.Q5_1, 37, 96, quantised_blocks), ("q5_1_raw", QT.Q5_1, 64, 256, raw_blocks),
        ("q4_k_raw", QT.Q4_K, 48, 512, raw_blocks), ("q4_k_one", QT.Q4_K, 1, 256, raw_blocks),
        ("q5_k_raw", QT.Q5_K, 48, 512, raw_blocks), ("q5_k_one", QT.Q5_K, 1, 256, raw_blocks),
        ("q6_k_raw", QT.Q6_K, 48, 512, raw_blocks), ("q6_k_one", QT.Q6_K, 1, 256, raw_blocks),
    ]
    for name, qt, n, k, make in specs:
        blocks = make(rng, qt, n, k)
        be, bb, _ = LAYOUT[qt]
        assert blocks.shape == (n, k // be * bb) and blocks.dtype == np.uint8, (name, blocks.shape)
        deq = quants.dequantize(blocks, qt).astype(np.float32).reshape(n, k)
        assert np.all(np.isfinite(deq)), name
        wgml_dump.write_gguf_case(out, name, qt, blocks, np.zeros(k, dtype=np.float32), 0)
        cases.append((name, n, k, deq))
    checker = wgml_dump.run_gguf_check(build, out, cases)
    sys.exit(checker.done())


if __name__ == "__main__":
    main()
