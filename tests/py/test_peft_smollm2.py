# venv: pt
"""A random PEFT adapter (rank 16, lora_alpha 32, all seven projections, float32) on
SmolLM2-135M-Instruct (Q4_1 GGUF: 30 layers, 9 query and 3 KV heads of 64, so q's and k's
lora_B rows are permuted by head groups unlike the tiny model's) gives in wgml (`--lora DIR`)
the logits of transformers + PEFT (the model that saved it) on the same GGUF, in float64, after
a 12-token prefill (the last position's logits, which every adapter of every layer reaches): the check, tolerance
and failure modes of tests/py/test_peft_adapter.py (measured 3.8e-5 at the last position, 4.0e-5
over nine decoded positions; q's and k's rows left in GGUF's order: 6.0 over those nine).
Usage: test_peft_smollm2.py BUILD_DIR"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import test_peft_adapter as t  # noqa: E402


def main():
    build = os.path.abspath(sys.argv[1])
    t0 = time.time()
    with tempfile.TemporaryDirectory() as d:
        ids = [504, 3575, 282, 4649, 314, 7042, 30, 378, 3575, 282, 4649, 314]
        t.peft_to_wgml(build, d, t.SMOL, ids, [(16, 32, t.ALL, np.float32)], reload=False, npre=len(ids))
    print("%.1f s" % (time.time() - t0), flush=True)
    return t.finish()


if __name__ == "__main__":
    sys.exit(main())
