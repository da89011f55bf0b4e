"""wgml's Llama forward on SmolLM2-135M-Instruct (Q4_1 GGUF) against tests/py/llama_ref.py, a
float64 PyTorch Llama over the same weights dequantised by PyPI gguf.

For each prompt (token ids from wgml's tokenizer through `tool_model encode`), one
`tool_model logits` process (the model loaded once) prefills the first NPRE tokens and decodes the rest one by one through the KV cache, writing
the logits after the prefill (position NPRE-1) and after every decode step (positions NPRE ..
n-1). The reference runs the whole sequence once (causal, so row p is the logits at p).

Tolerance. wgml computes in fp32 with the same dequantised weights (Q4_1 / Q8_0 dequantisation
is exact in fp32), so the difference is fp32 rounding only: each dot product of length
K <= 1536 has relative error ~ sqrt(K)·2^-24 ≈ 2e-6 of its magnitude, and the residual stream
carries these through 30 layers (each adds ~1e-6 relative, plus rsqrt/exp/softmax ulp errors),
so a hidden state is good to ~1e-5 relative; logits of magnitude ~20 then differ by ~1e-4.
We require |wgml - ref| <= 1e-3 + 1e-5·|ref| element-wise (~10x the expected error; measured:
max 8e-5 on these prompts; a wrong
rope pairing, a missing norm or an off-by-one position moves logits by O(1)), and the same
argmax wherever the reference's top two logits are more than 1e-2 apart.
Usage: test_llama_logits.py BUILD_DIR"""
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import Llama  # noqa: E402
from wgml_dump import check_logits, run_tool_logits  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, ".deps", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
ATOL, RTOL = 1e-3, 1e-5

# (text, special tokens, number of decode steps after the prefill)
PROMPTS = [
    ("The capital of France is", False, 3),
    ("<|im_start|>user\nWhat is 12 + 30?<|im_end|>\n<|im_start|>assistant\n", True, 4),
    ("In the beginning God created the heaven and the earth.", False, 0),
    ("def fibonacci(n):\n    if n < 2:\n        return n", False, 2),
]

failures = passes = 0


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
    print(("ok   " if ok else "FAIL ") + what)


def main():
    build = sys.argv[1]
    tool = os.path.join(build, "tests", "tool_model")
    if not os.path.exists(MODEL):
        print("model file missing:", MODEL)
        return 1
    t0 = time.time()
    ref = Llama(MODEL)
    print("reference loaded in %.1f s" % (time.time() - t0))
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    seqs = []
    for text, special, n_dec in PROMPTS:
        args = [tool, "encode", MODEL] + (["--special"] if special else [])
        ids = [int(x) for x in subprocess.run(args, input=text.encode(), capture_output=True, check=True).stdout.split()]
        seqs.append((text, ids, len(ids) - n_dec, n_dec))
    got_all = run_tool_logits(tool, MODEL, [(ids, npre, n_dec) for _, ids, npre, n_dec in seqs])
    if got_all is None:
        check(False, "tool_model logits failed")
        print("%d passed, %d failed" % (passes, failures))
        return 1
    rows, gpu_all = got_all
    at = 0
    for text, ids, npre, n_dec in seqs:
        got, gpu_next = rows[at:at + n_dec + 1], gpu_all[at:at + n_dec + 1]
        at += n_dec + 1
        t0 = time.time()
        want = ref.logits(ids)[npre - 1:].numpy()
        tr = time.time() - t0
        name = "%r (%d tokens: prefill %d + %d decode steps; reference %.1f s)" % (text[:32], len(ids), npre, n_dec, tr)
        check_logits(check, got, want, gpu_next, npre, n_dec, name, ATOL, RTOL)
    print("%d passed, %d failed" % (passes, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
