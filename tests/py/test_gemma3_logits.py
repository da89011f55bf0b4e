"""wgml's Gemma 3 forward on Gemma-3-270M (the Q4_K_M GGUF: Q5_0, Q4_K, Q6_K, Q8_0 weights) against
transformers' Gemma3ForCausalLM in float64 over the same weights.

The reference is transformers' own model class (transformers 5.24, from .deps/venv-pt): its
config comes from the GGUF metadata the way transformers' GGUF loader maps it (gemma3 ->
gemma3_text: layer_types from the sliding-window pattern 6, rope_parameters 1e6 global / 1e4
local, sliding_window 512, query_pre_attn_scalar 256), and its weights are the GGUF tensors
dequantised by PyPI gguf with 1 subtracted from every norm weight (the converter stored
1 + w because llama.cpp multiplies by the weight; transformers' Gemma3RMSNorm multiplies by
1 + w, and its GGUF loader subtracts the 1 the same way). The model is built on the meta device
and the weights assigned, which gives the same module as from_pretrained(gguf_file=...)
(checked once by hand: identical argmax and logits) without its ~1 minute of initialisation.
Token ids are fixed: the first prompt is transformers' tokenisation of "The capital of France
is" (with BOS); the others are seeded random ids from the ordinary vocabulary after BOS (the
SentencePiece tokenizer is another part of the project). The long prompt (LONG tokens > the
512-token window) makes the sliding window matter in the prefill (a 512-token chunk, then a
chunk attending to the cache) and in the decode steps.

For each prompt one `tool_model logits` process prefills the first NPRE tokens and decodes the
rest one at a time through the KV cache; the reference runs the whole sequence once (causal,
so row p is the logits at p; the LM head is applied only to the rows compared).

Tolerance. wgml computes in fp32 with the same dequantised weights (the block formats'
dequantisation is exact in fp32 and is done the same way on both sides), so the difference is
fp32 rounding. Gemma's residual stream is large (|x| up to ~1e3 after the sqrt(640)-scaled
embedding and 18 post-normed blocks), and the logits are a 640-long dot product with the tied
Q8_0 embedding after the final norm: a hidden state good to ~1e-5 relative gives logits of
magnitude ~30 good to ~3e-4. We require |wgml - ref| <= 1e-3 + 5e-5·|ref| (measured: max
8e-5 at a 600-token prompt, a twentieth of the bound; a wrong norm convention, rope pairing,
base, window or scale moves logits by O(1)) and the same greedy token wherever the
reference's top two logits are more than 1e-2 apart. Time: most of it is wgml's graph runs on
lavapipe.
Usage: test_gemma3_logits.py BUILD_DIR (runs itself under .deps/venv-pt, which has transformers)"""
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PT = os.path.join(ROOT, ".deps", "venv-pt", "bin", "python")
try:
    import transformers  # noqa: F401
except ImportError:  # the project venv runs the tests; transformers lives in venv-pt
    if os.path.exists(VENV_PT) and not os.environ.get("WGML_IN_VENV_PT"):
        os.environ["WGML_IN_VENV_PT"] = "1"
        os.execv(VENV_PT, [VENV_PT] + sys.argv)
    print("transformers is not installed (.deps/venv-pt)")
    sys.exit(1)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType  # noqa: E402
from gguf.quants import dequantize  # noqa: E402
import struct  # noqa: E402
from transformers import Gemma3ForCausalLM, Gemma3TextConfig  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wgml_dump import check_logits, run_tool_logits  # noqa: E402

MODEL = os.path.join(ROOT, ".deps", "models", "gemma-3-270m-q4_k_m.gguf")
ATOL, RTOL = 1e-3, 5e-5
LONG = 530

# (ids, number of decode steps after the prefill)
rng = np.random.default_rng(3)
PROMPTS = [
    ([2, 818, 5279, 529, 7001, 563], 3),
    ([2] + [int(x) for x in rng.integers(300, 20000, LONG - 1)], 2),
]

failures = passes = 0


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
    print(("ok   " if ok else "FAIL ") + what)


# GGUF tensor names -> transformers' parameter names (per block)
BLOCK = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
    "attn_norm": "input_layernorm", "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm", "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}


def read_gguf(path):
    """The gemma3.* metadata and the tensors (name, type, shape outermost first, raw bytes) of a
    GGUF v3 file. (gguf's GGUFReader takes ~20 s here, most of it on the 262,144-entry
    tokenizer arrays this test does not need; this reads them past.)"""
    buf = np.memmap(path, dtype=np.uint8, mode="r")
    mv = memoryview(buf)
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, mv, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        pos += n
        return bytes(mv[pos - n:pos]).decode()
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        nonlocal pos
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            if et in scalar:
                pos += n * struct.calcsize(scalar[et])
            else:
                for _ in range(n):
                    value(et)
            return None
        return take(scalar[t])
    assert bytes(mv[0:4]) == b"GGUF"
    pos = 4
    take("I")
    n_tensors, n_kv = take("Q"), take("Q")
    kv = {}
    for _ in range(n_kv):
        k = string()
        v = value(take("I"))
        if k.startswith("gemma3.") or k == "general.alignment":
            kv[k] = v
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        infos.append((name, dims, take("I"), take("Q")))
    align = kv.get("general.alignment", 32)
    base = (pos + align - 1) // align * align
    tensors = []
    for name, dims, typ, off in infos:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(typ)]
        nbytes = int(np.prod(dims)) // block * size
        tensors.append((name, GGMLQuantizationType(typ), list(reversed(dims)), buf[base + off:base + off + nbytes]))
    return kv, tensors


def reference(dtype=torch.float64):
    """transformers' Gemma3ForCausalLM over the GGUF's dequantised weights, in `dtype` (float64
    here; tests/py/test_gemma3_peft.py trains it in float32)."""
    kv, tensors = read_gguf(MODEL)
    cfg = Gemma3TextConfig(
        vocab_size=262144, hidden_size=kv["gemma3.embedding_length"],
        intermediate_size=kv["gemma3.feed_forward_length"], num_hidden_layers=kv["gemma3.block_count"],
        num_attention_heads=kv["gemma3.attention.head_count"],
        num_key_value_heads=kv["gemma3.attention.head_count_kv"], head_dim=kv["gemma3.attention.key_length"],
        rms_norm_eps=kv["gemma3.attention.layer_norm_rms_epsilon"],
        max_position_embeddings=kv["gemma3.context_length"], sliding_window=kv["gemma3.attention.sliding_window"],
        rope_theta=kv["gemma3.rope.freq_base"], query_pre_attn_scalar=kv["gemma3.attention.key_length"],
        tie_word_embeddings=True, attn_implementation="eager")
    print("layer types:", "".join("G" if t == "full_attention" else "l" for t in cfg.layer_types),
          "rope:", cfg.rope_parameters)
    sd = {}
    for tname, ttype, shape, data in tensors:
        w = dequantize(np.asarray(data), ttype).astype(np.float64).reshape(shape)
        name = tname[:-len(".weight")]
        if name.endswith("norm"):
            w = w - 1.0
        if name == "token_embd":
            key = "model.embed_tokens.weight"
        elif name == "output_norm":
            key = "model.norm.weight"
        else:
            _, li, part = name.split(".", 2)
            key = "model.layers.%s.%s.weight" % (li, BLOCK[part])
        sd[key] = torch.from_numpy(w).to(dtype)
    with torch.device("meta"):
        m = Gemma3ForCausalLM(cfg)
    m = m.to(dtype)
    missing, unexpected = m.load_state_dict(sd, strict=False, assign=True)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    m.tie_weights()
    # the embedding's sqrt(d) is a non-persistent buffer: make it as the model's init does (an f32
    # tensor, cast to the weights' dtype in the forward)
    m.model.embed_tokens.embed_scale = torch.tensor(cfg.hidden_size ** 0.5, dtype=torch.float32).to(dtype)
    m.model.rotary_emb = type(m.model.rotary_emb)(cfg)  # its inv_freq buffers, off the meta device
    m.model.rotary_emb.to(dtype)
    return m.eval()


def main():
    build = sys.argv[1]
    tool = os.path.join(build, "tests", "tool_model")
    if not os.path.exists(MODEL):
        print("model file missing:", MODEL)
        return 1
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    t0 = time.time()
    ref = reference()
    print("reference built in %.1f s" % (time.time() - t0))
    seqs = [(ids, len(ids) - n_dec, n_dec) for ids, n_dec in PROMPTS]
    got_all = run_tool_logits(tool, MODEL, seqs)
    if got_all is None:
        check(False, "tool_model logits failed")
        print("%d passed, %d failed" % (passes, failures))
        return 1
    rows, gpu_all = got_all
    at = 0
    for ids, npre, n_dec in seqs:
        got, gpu_next = rows[at:at + n_dec + 1], gpu_all[at:at + n_dec + 1]
        at += n_dec + 1
        t0 = time.time()
        with torch.no_grad():
            h = ref.model(input_ids=torch.tensor([ids])).last_hidden_state[0, npre - 1:]
            want = ref.lm_head(h).numpy()
        tr = time.time() - t0
        name = "%d tokens: prefill %d + %d decode steps (reference %.1f s)" % (len(ids), npre, n_dec, tr)
        check_logits(check, got, want, gpu_next, npre, n_dec, name, ATOL, RTOL)
    print("%d passed, %d failed" % (passes, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
