"""GGUF block formats Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS on the host and the
GPU, against PyPI gguf's
numpy dequantize (an implementation we did not write):
- wgml_gguf_dequantize (host) and wgml_qweight_dequantize (GPU, after wgml_qweight_upload_gguf) must
  equal gguf's dequantisation bit for bit in fp32;
- the forward (GEMV for M <= 4, the tiled GEMM with its automatic tile and split-K plan for
  larger M), the input gradient and the embedding lookup, run on the GPU from the imported
  blocks, against float64 products of gguf's dequantised weights.
Q5_0 / Q5_1 blocks come from gguf's own quantiser (random weights with an all-zero, a constant
and a tiny block) and, like the K and IQ4 types (which gguf cannot quantise), from random raw bytes
whose fp16 fields are finite: extreme scales (±65504), subnormal and zero scales, and blocks
whose codes are all zero or all saturated. Shapes: odd N and M, several super-blocks of 256,
the Gemma-3-270M projections (d 640: q, k, gate/up Q5_0; attn_output Q4_K; ffn_down Q6_K)
and SmolLM-like ones (d 576, ff 1536; Q2_K, Q3_K and IQ4_XS as in the Q2_K, Q3_K_M and IQ4_XS
files people download). The products' tolerance scales with the magnitude of
their terms, |x|·(|w| + |b|) summed (b: the per-group minimum), since raw blocks mix values
from 1e-8 to 1e8."""
import atexit
import os
import shutil
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
    QT.Q2_K: (256, 84, [80, 82]),
    QT.Q3_K: (256, 110, [108]),
    QT.IQ4_NL: (32, 18, [0]),
    QT.IQ4_XS: (256, 136, [0]),
}
# the super-block types (their d multiplies a per-group scale, so it is kept smaller)
SUPER = (QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K, QT.IQ4_XS)
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


def moderate_blocks(rng, qt, n, k):
    """Random raw blocks whose fp16 fields keep the weights near 1 (the model-like shapes)."""
    be, bb, halves = LAYOUT[qt]
    b = raw_blocks(rng, qt, n, k).reshape(n, k // be, bb)
    # exponent 4..10 (2^-11 .. 2^-5) and mantissa bits random, either sign for a minimum
    for i, off in enumerate(halves):
        e = rng.integers(4 if qt in SUPER else 8, 7 if qt in SUPER else 11, size=b.shape[:2])
        h = (e << 10) | rng.integers(0, 1024, size=b.shape[:2])
        if i == 1:
            h |= (rng.random(b.shape[:2]) < 0.5).astype(np.int64) << 15
        h = h.astype(np.uint16)
        b[:, :, off] = (h & 0xFF).astype(np.uint8)
        b[:, :, off + 1] = (h >> 8).astype(np.uint8)
    return b.reshape(n, -1)


def minimum_part(blocks, qt):
    """|b| per element: the types with a minimum dequantised with every code byte zero give b
    (Q5_1: m; Q4_K / Q5_K / Q2_K: -dmin·min); the symmetric types have none."""
    codes = {QT.Q5_1: (4, 24), QT.Q4_K: (16, 144), QT.Q5_K: (16, 176), QT.Q2_K: (16, 80)}.get(qt)
    n = blocks.shape[0]
    if codes is None:
        return 0.0
    be, bb, _ = LAYOUT[qt]
    z = blocks.reshape(n, -1, bb).copy()
    z[:, :, codes[0]:codes[1]] = 0
    return np.abs(quants.dequantize(z.reshape(n, -1), qt).astype(np.float64).reshape(n, -1))


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
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    cases = []
    # name, type, N, K, blocks, M (0: host only), with dx, embedding ids
    specs = [
        ("q5_0_quant", QT.Q5_0, 37, 96, quantised_blocks, 5, True, 9),
        ("q5_0_raw", QT.Q5_0, 64, 256, raw_blocks, 3, True, 0),
        ("q5_1_quant", QT.Q5_1, 37, 96, quantised_blocks, 1, True, 7),
        ("q5_1_raw", QT.Q5_1, 64, 256, raw_blocks, 37, True, 0),
        ("q4_k_raw", QT.Q4_K, 48, 512, raw_blocks, 1, True, 5), ("q4_k_one", QT.Q4_K, 1, 256, raw_blocks, 0, False, 0),
        ("q4_k_mm", QT.Q4_K, 33, 768, raw_blocks, 21, True, 0),
        ("q5_k_raw", QT.Q5_K, 48, 512, raw_blocks, 37, True, 6), ("q5_k_one", QT.Q5_K, 1, 256, raw_blocks, 1, True, 0),
        ("q6_k_raw", QT.Q6_K, 48, 512, raw_blocks, 2, True, 8), ("q6_k_one", QT.Q6_K, 1, 256, raw_blocks, 0, False, 0),
        ("q6_k_mm", QT.Q6_K, 33, 768, raw_blocks, 21, True, 0),
        ("q2_k_raw", QT.Q2_K, 48, 512, raw_blocks, 3, True, 5), ("q2_k_one", QT.Q2_K, 1, 256, raw_blocks, 0, False, 0),
        ("q2_k_mm", QT.Q2_K, 33, 768, raw_blocks, 21, True, 0),
        ("q3_k_raw", QT.Q3_K, 48, 512, raw_blocks, 1, True, 6), ("q3_k_one", QT.Q3_K, 1, 256, raw_blocks, 0, False, 0),
        ("q3_k_mm", QT.Q3_K, 33, 768, raw_blocks, 21, True, 0),
        ("iq4_nl_raw", QT.IQ4_NL, 37, 96, raw_blocks, 2, True, 7), ("iq4_nl_mm", QT.IQ4_NL, 64, 256, raw_blocks, 37, True, 0),
        ("iq4_xs_raw", QT.IQ4_XS, 48, 512, raw_blocks, 4, True, 5), ("iq4_xs_one", QT.IQ4_XS, 1, 256, raw_blocks, 0, False, 0),
        ("iq4_xs_mm", QT.IQ4_XS, 33, 768, raw_blocks, 21, True, 0),
        # Gemma-3-270M (d 640, 4 query heads of 256, 1 kv head, ff 2048) and SmolLM-like shapes
        ("gemma_q", QT.Q5_0, 1024, 640, quantised_blocks, 1, False, 0),
        ("gemma_k", QT.Q5_0, 256, 640, quantised_blocks, 7, True, 0),
        ("gemma_gate", QT.Q5_0, 2048, 640, quantised_blocks, 1, False, 5),
        ("gemma_up", QT.Q5_0, 2048, 640, quantised_blocks, 13, True, 0),
        ("gemma_o", QT.Q4_K, 640, 1024, moderate_blocks, 1, False, 0),
        ("gemma_o_mm", QT.Q4_K, 640, 1024, moderate_blocks, 13, True, 0),
        ("gemma_down", QT.Q6_K, 640, 2048, moderate_blocks, 1, False, 0),
        ("gemma_down_mm", QT.Q6_K, 640, 2048, moderate_blocks, 13, True, 0),
        ("smol_down", QT.Q6_K, 576, 1536, moderate_blocks, 1, True, 0),
        ("smol_up", QT.Q5_K, 1536, 512, moderate_blocks, 9, False, 0),
        ("smol_q2_gate", QT.Q2_K, 1536, 512, moderate_blocks, 1, False, 0),
        ("smol_q3_down", QT.Q3_K, 576, 1536, moderate_blocks, 1, True, 0),
        ("smol_q3_down_mm", QT.Q3_K, 576, 1536, moderate_blocks, 13, True, 0),
        ("smol_iq4_up", QT.IQ4_XS, 1536, 512, moderate_blocks, 9, False, 0),
        ("smol_iq4nl_o", QT.IQ4_NL, 576, 576, moderate_blocks, 1, True, 0),
    ]
    # real tensors of the Gemma-3-270M Q4_K_M file when it is installed: the first block of each
    # (tensor name, type) pair among the types under test
    model = os.path.join(os.path.dirname(__file__), "..", "..", ".deps", "models", "gemma-3-270m-q4_k_m.gguf")
    real = {}
    if os.path.exists(model):
        from gguf import GGUFReader
        for t in GGUFReader(model).tensors:
            key = (".".join(p for p in t.name.split(".") if not p.isdigit()), t.tensor_type)
            if t.tensor_type in LAYOUT and len(t.shape) == 2 and key not in real:
                real[key] = np.ascontiguousarray(np.asarray(t.data)).reshape(int(t.shape[1]), -1)
                specs.append((f"gemma_file_{t.name}_{t.tensor_type.name}", t.tensor_type, int(t.shape[1]),
                              int(t.shape[0]), lambda rng, qt, n, k, b=real[key]: b, 3, True, 0))
        print(f"{len(real)} tensors of {model}")
    else:  # scripts/setup.sh installs it: a missing file fails below, it is not a skip
        print(f"FAIL: {model} is missing (run scripts/setup.sh): the real Gemma tensors cannot be checked")
    products = []
    for name, qt, n, k, make, m, with_dx, n_ids in specs:
        blocks = make(rng, qt, n, k)
        be, bb, _ = LAYOUT[qt]
        assert blocks.shape == (n, k // be * bb) and blocks.dtype == np.uint8, (name, blocks.shape)
        deq = quants.dequantize(blocks, qt).astype(np.float32).reshape(n, k)
        assert np.all(np.isfinite(deq)), name
        x = rng.uniform(-1, 1, (max(m, 1), k)).astype(np.float32)
        d = rng.uniform(-1, 1, (m, n)).astype(np.float32) if with_dx and m else None
        ids = rng.integers(0, n, n_ids).astype(np.int32) if n_ids and m else None
        wgml_dump.write_gguf_case(out, name, qt, blocks, x, m, d, ids)
        cases.append((name, n, k, deq))
        if m:
            products.append((name, qt, n, k, m, blocks, deq, x, d, ids))
    checker = wgml_dump.run_gguf_check(build, out, cases)
    found = {qt for _, qt in real}
    checker.check(f"real Q5_0, Q4_K and Q6_K tensors of {model}", found >= {QT.Q5_0, QT.Q4_K, QT.Q6_K},
                  f"types found: {sorted(qt.name for qt in found)}")
    for name, qt, n, k, m, blocks, deq, x, d, ids in products:
        w = deq.astype(np.float64)
        mag_w = np.abs(w) + minimum_part(blocks, qt)
        path = "GEMV" if m <= 4 else "GEMM"
        o = np.fromfile(os.path.join(out, f"{name}.out"), dtype=np.float32).reshape(m, n)
        ref = x.astype(np.float64) @ w.T
        atol = 2e-6 * np.sqrt(k) * (np.abs(x).astype(np.float64) @ mag_w.T) + 1e-30
        checker.close(f"{name} forward M={m} ({path}) {n}x{k}", o, ref, atol, 1e-3)
        if d is not None:
            g = np.fromfile(os.path.join(out, f"{name}.dx"), dtype=np.float32).reshape(m, k)
            ref = d.astype(np.float64) @ w
            atol = 2e-6 * np.sqrt(n) * (np.abs(d).astype(np.float64) @ mag_w) + 1e-30
            checker.close(f"{name} dx M={m} {n}x{k}", g, ref, atol, 1e-3)
        if ids is not None:
            e = np.fromfile(os.path.join(out, f"{name}.emb"), dtype=np.float32).reshape(len(ids), k)
            bad = int(np.sum(e.view(np.uint32) != deq[ids].view(np.uint32)))
            checker.check(f"{name} embedding of {len(ids)} ids bit-exact", bad == 0, f"{bad} differ")
    sys.exit(checker.done())


if __name__ == "__main__":
    main()
