# venv: pt
"""Llama 3's RoPE frequency factors (rope_freqs.weight, which llama.cpp's converter writes into every
Llama 3.1 / 3.2 / 3.3 GGUF file from the model's rope_scaling "llama3"): SmolLM2-135M-Instruct's
file with such a tensor added (factor 32, low 1, high 4, original context 8192: Llama 3.2's).

1. The factors' meaning, against an implementation we did not write: the frequencies wgml uses,
   theta^(-2i/d) / f_i, equal transformers' llama3 inverse frequencies (ROPE_INIT_FUNCTIONS) for
   the same rope_scaling within f32 rounding of the factors.
2. wgml's logits (`tool_model logits`: a prefill, then decode steps through the KV cache), with
   the plain graph (a CPU adapter's) and the fused one (WGML_LLAMA_UNFUSED=0: the decode kernels
   rope_kv and attn_decode read the same table), against tests/py/llama_ref.py (float64,
   dividing by the factors too), with test_llama_logits.py's bounds; and the reference without
   the factors differs from it by far more than that bound, so a run that ignored them fails.
3. A zero factor and a table of the wrong length are refused at load, naming the tensor.
Usage: test_llama_ropefreqs.py BUILD_DIR (under .deps/venv-pt, which has transformers)"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import Llama  # noqa: E402
from wgml_dump import gguf_copy, parity_logits, parity_start  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, ".deps", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
ATOL, RTOL = 1e-3, 1e-5
SCALING = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192}
PROMPTS = [("In the beginning God created the heaven and the earth. And the earth was without form, and void;", 4)]

def llama3_factors(d, theta):
    """f_i = freq_i / scaled freq_i for rope_scaling SCALING, from its definition: wavelengths
    over original context / low_freq_factor are scaled by factor, those under original context /
    high_freq_factor kept, and between them the inverse frequency blends the two linearly in
    original context / wavelength."""
    s = SCALING
    ctx, lo, hi, factor = s["original_max_position_embeddings"], s["low_freq_factor"], s["high_freq_factor"], s["factor"]
    freq = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    wavelen = 2 * np.pi / freq
    smooth = (ctx / wavelen - lo) / (hi - lo)
    blend = 1.0 / ((1 - smooth) / factor + smooth)
    return np.where(wavelen < ctx / hi, 1.0, np.where(wavelen > ctx / lo, factor, blend)).astype(np.float32)


def transformers_inv_freq(d, heads, theta):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    cfg = LlamaConfig(hidden_size=d * heads, num_attention_heads=heads, rope_theta=theta,
                      max_position_embeddings=131072, rope_scaling=dict(SCALING))
    return ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")[0].to(torch.float64).numpy()


def main():
    tool, check, there = parity_start(sys.argv[1], MODEL)
    if not there:
        return check.done()
    plain_ref = Llama(MODEL)
    d, theta = plain_ref.head_dim, plain_ref.base
    f = llama3_factors(d, theta)
    ours = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d) / f.astype(np.float64)
    theirs = transformers_inv_freq(d, plain_ref.n_head, theta)
    rel = np.abs(ours / theirs - 1).max()
    check(rel < 1e-6 and f.min() == 1.0 and f.max() == 32.0 and ((f > 1) & (f < 32)).any(),
          "theta^(-2i/d) / rope_freqs equals transformers' llama3 inverse frequencies (max rel %.1e; factors %.3g..%.3g)"
          % (rel, f.min(), f.max()))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "smollm2-ropefreqs.gguf")
        gguf_copy(MODEL, path, extra=[("rope_freqs.weight", f)])
        ref = Llama(path)
        check(ref.freq_factors is not None, "the reference reads rope_freqs.weight")
        wants = {}

        def reference(ids):
            key = tuple(ids)
            if key not in wants:
                wants[key] = ref.logits(ids).numpy()
                moved = np.abs(wants[key] - plain_ref.logits(ids).numpy()).max()
                check(moved > 100 * ATOL, "the factors move the reference's logits by %.3g (bound %.0e)" % (moved, ATOL))
            return wants[key]
        for fused in ("1", "0"):
            os.environ["WGML_LLAMA_UNFUSED"] = fused
            parity_logits(check, tool, path, PROMPTS, reference, ATOL, RTOL, "plain graph: " if fused == "1" else "fused graph: ")
        # bad factors are refused at load, naming the tensor
        bad0 = f.copy()
        bad0[3] = 0.0
        for what, arr, words in (("a zero factor", bad0, ["rope_freqs.weight", "factor 3 is 0", "positive"]),
                                 ("31 factors for 32 pairs", f[:31], ["rope_freqs.weight", "expected [32]"])):
            bad = os.path.join(tmp, "bad.gguf")
            gguf_copy(MODEL, bad, extra=[("rope_freqs.weight", arr)])
            r = subprocess.run([tool, "logits", bad, os.path.join(tmp, "bad.bin")], input=b"1 1\n", capture_output=True)
            err = r.stderr.decode()
            check(r.returncode != 0 and all(w in err for w in words), "%s refused: %s" % (what, err.strip()[-160:]))
    return check.done()


if __name__ == "__main__":
    sys.exit(main())
