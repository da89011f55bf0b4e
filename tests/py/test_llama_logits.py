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
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import Llama  # noqa: E402
from wgml_dump import parity_logits, parity_start  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, ".deps", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
ATOL, RTOL = 1e-3, 1e-5

# (text, number of decode steps after the prefill, special tokens)
PROMPTS = [
    ("The capital of France is", 3, False),
    ("<|im_start|>user\nWhat is 12 + 30?<|im_end|>\n<|im_start|>assistant\n", 4, True),
    ("In the beginning God created the heaven and the earth.", 0, False),
    ("def fibonacci(n):\n    if n < 2:\n        return n", 2, False),
]


def main():
    tool, check, there = parity_start(sys.argv[1], MODEL)
    if not there:
        return check.done()
    t0 = time.time()
    ref = Llama(MODEL)
    print("reference loaded in %.1f s" % (time.time() - t0))
    parity_logits(check, tool, MODEL, PROMPTS, lambda ids: ref.logits(ids).numpy(), ATOL, RTOL)
    return check.done()


if __name__ == "__main__":
    sys.exit(main())
