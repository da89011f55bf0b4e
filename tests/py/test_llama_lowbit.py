"""The low-bit GGUF types in a whole model: SmolLM2-135M-Instruct's file with ffn_down in Q3_K,
Q2_K and IQ4_XS (by layer; its K = 1,536 is whole super-blocks of 256) and attn_q / attn_output
in IQ4_NL (K = 576, blocks of 32) in a third of the layers, the mix a Q2_K, Q3_K_M or IQ4_XS
file of llama.cpp holds. The blocks come from tests/py/lowbit_quant.py (round-to-nearest from
the file's own weights, dequantised by PyPI gguf); every other tensor is copied as it is.

wgml's logits (`tool_model logits`: a prefill, then decode steps through the KV cache) against
tests/py/llama_ref.py, the float64 Llama over the same file dequantised by PyPI gguf, with
test_llama_logits.py's bounds: both sides read the same blocks, so the difference is wgml's
fp32 rounding (the quantiser's error is in both).
Usage: test_llama_lowbit.py BUILD_DIR"""
import os
import re
import sys
import tempfile
import time

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import Llama  # noqa: E402
from lowbit_quant import quantize  # noqa: E402
from wgml_dump import gguf_copy, parity_logits, parity_start  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, ".deps", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
ATOL, RTOL = 1e-3, 1e-5
PROMPTS = [("The capital of France is", 3), ("In the beginning God created the heaven and the earth.", 0)]
DOWN = {0: QT.Q3_K, 1: QT.Q2_K, 2: QT.IQ4_XS}  # layer % 4 -> ffn_down's type (3: as in the file)

def new_type(name):
    """The type tensor `name` takes in the low-bit file, or None to copy it."""
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", name)
    if not m:
        return None
    layer, what = int(m.group(1)), m.group(2)
    if what == "ffn_down":
        return DOWN.get(layer % 4)
    if what in ("attn_q", "attn_output") and layer % 3 == 0:
        return QT.IQ4_NL
    return None


def write_lowbit(src, dst):
    """src with the tensors new_type names requantised; the count of each new type."""
    def convert(name, t):
        qt = new_type(name)
        if qt is None:
            return None
        n, k = int(t.shape[1]), int(t.shape[0])
        return quantize(quants.dequantize(t.data, t.tensor_type).reshape(n, k), qt), qt
    counts = {}
    for name in gguf_copy(src, dst, convert):
        counts[new_type(name).name] = counts.get(new_type(name).name, 0) + 1
    return counts


def main():
    tool, check, there = parity_start(sys.argv[1], MODEL)
    if not there:
        return check.done()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "smollm2-lowbit.gguf")
        t0 = time.time()
        counts = write_lowbit(MODEL, path)
        print("wrote %s in %.1f s: %s" % (path, time.time() - t0, counts))
        check(counts == {"Q3_K": 8, "Q2_K": 8, "IQ4_XS": 7, "IQ4_NL": 20}, "the file holds every low-bit type")
        # the copied tensors are byte for byte the source's
        src = {t.name: t for t in GGUFReader(MODEL).tensors}
        same = all(np.array_equal(np.asarray(t.data), np.asarray(src[t.name].data))
                   for t in GGUFReader(path).tensors if new_type(t.name) is None)
        check(same, "every other tensor copied unchanged")
        ref = Llama(path)
        parity_logits(check, tool, path, PROMPTS, lambda ids: ref.logits(ids).numpy(), ATOL, RTOL)
    return check.done()


if __name__ == "__main__":
    sys.exit(main())
