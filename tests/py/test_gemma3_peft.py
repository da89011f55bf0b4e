"""wgml's LoRA fine-tune of Gemma-3-270M (src/train/trainer.c, the Q4_K_M GGUF) against PyTorch
float32 + PEFT training the same adapters from the same start, compared step by step.

wgml side: `test_trainer --dump` (its synthetic cases take ~3 s) with WGML_TRAINER_MODEL = the
GGUF (tests/test_trainer.c test_model): LoRA r 8, alpha 16, on q and v of all 18 layers, dropout none,
STEPS steps at batch 1 of SEQ tokens of Genesis 1 (wgml's own tokenisation; the two batches
alternate), constant lr LR (wgml_trainer_step takes each step's lr; the warmup and cosine
schedule are `wgml finetune`'s), AdamW betas (0.9, 0.999), eps 1e-8, weight decay 0.01 (on A and
B), global gradient-norm clip 1.0. It dumps the config, the initial A (wgml's seeded init)
and B (zero), the batches and the loss wgml reported at every step (before that step's update).

Reference: transformers' Gemma3ForCausalLM built as in tests/py/test_gemma3_logits.py
(reference(): the GGUF's tensors dequantised by PyPI gguf, norm weights minus 1), in float32,
wrapped by PEFT get_peft_model with LoraConfig(r, lora_alpha, target_modules q_proj and v_proj,
lora_dropout 0, no bias), its lora_A / lora_B set to wgml's initial A and B; per step the mean
cross-entropy of the logits against the dumped next-token labels, backward,
torch.nn.utils.clip_grad_norm_ over the adapters, torch.optim.AdamW with the same settings.

Tolerance. Both sides compute in float32 over the same dequantised weights (exact in float32),
so the losses differ by float32 rounding only: summation order in the 640- and 2048-long dot
products, the 262,144-way softmax, and Gemma's large residual stream (|x| ~1e3 after the
sqrt(640)-scaled embedding and 18 post-normed blocks) — ~1e-5 relative on the hidden state
(tests/py/test_gemma3_logits.py measures 8e-5 absolute on logits of ~30). The loss is a mean of
SEQ log-softmax values, so one step's loss is good to a few 1e-6 relative; later steps carry the
previous updates' rounding (Adam's first steps move every element by ~lr whatever the
gradient's size, so a gradient element near zero can flip its update's sign, and a fast-falling
loss amplifies that; hence few steps at a moderate lr: at lr 1e-2 the loss fell 7.78 -> 2.07 in
two steps and step 2 differed by 7.3e-4 relative; at lr 2e-3 it falls 7.78 -> 3.65). We require
2e-4 relative per step, ~10x float32's own error. Measured (lavapipe, 3 steps of 16 tokens,
lr 2e-3), wgml against PyTorch float32: 9.8e-7, 9.8e-6, 3.9e-5 at steps 0, 1, 2; against
PyTorch float64 (the same PEFT run): 2.9e-7, 6.3e-6, 1.6e-5; PyTorch float32 against float64:
7e-7, 3.4e-6, 2.2e-5.
What fails it (`test_gemma3_peft.py BUILD --variants` runs these against the same wgml dump;
relative differences from wgml's losses 7.779459, 5.748940, 3.649898): lora_alpha 8 instead of
16 (scale 1 instead of 2): 1e-6, 6.1e-2, 2.1e-1 (step 0 is blind to the adapters: B = 0); no
post-attention / post-FFN norms: loss 271 instead of 7.78 (0.97 relative) from step 0.
Time (lavapipe, 2 cores): wgml ~75 s (the synthetic cases ~3 s, then ~23 s per Gemma step),
PyTorch ~15-27 s (building the float32 model from the GGUF, then the 3 steps); ~100 s in all.
Usage: test_gemma3_peft.py BUILD_DIR [--variants] (runs itself under .deps/venv-pt)"""
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PT = os.path.join(ROOT, ".deps", "venv-pt", "bin", "python")
try:
    import peft  # noqa: F401
    import transformers  # noqa: F401
except ImportError:  # the project venv runs the tests; transformers and peft live in venv-pt
    if os.path.exists(VENV_PT) and not os.environ.get("WGML_IN_VENV_PT"):
        os.environ["WGML_IN_VENV_PT"] = "1"
        os.execv(VENV_PT, [VENV_PT] + sys.argv)
    print("transformers or peft is not installed (.deps/venv-pt)")
    sys.exit(1)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wgml_dump  # noqa: E402
import test_gemma3_logits as g3  # noqa: E402

STEPS, SEQ, LR = 3, 16, 2e-3
RTOL = 2e-4
# wgml's target names -> the Gemma3 module names PEFT adapts (the two the dump's config sets)
TARGETS = {"attn_q": "q_proj", "attn_v": "v_proj"}


def train(case, alpha=None, post_norm=True, dtype=torch.float32):
    """PyTorch + PEFT from the dump's start: the loss at every step. `alpha` and `post_norm` make
    the deliberately wrong variants, `dtype` float64 the measure of float32's own error
    (--variants)."""
    cfg = case["config"]
    r, wgml_alpha = int(cfg[0]), float(cfg[1])
    lr, wd, b1, b2, eps, clip, steps = [float(c) for c in cfg[5:12]]
    model = g3.reference(dtype)
    if not post_norm:
        for layer in model.model.layers:
            layer.post_attention_layernorm = torch.nn.Identity()
            layer.post_feedforward_layernorm = torch.nn.Identity()
    lc = LoraConfig(r=r, lora_alpha=wgml_alpha if alpha is None else alpha, lora_dropout=0.0, bias="none",
                    target_modules=list(TARGETS.values()))
    model = get_peft_model(model, lc)
    n_set = 0
    for name, mod in model.named_modules():
        if not hasattr(mod, "lora_A") or "default" not in mod.lora_A:
            continue
        li = int(name.split(".layers.")[1].split(".")[0])
        target = [k for k, v in TARGETS.items() if name.endswith("self_attn." + v)][0]
        with torch.no_grad():
            for w, lin in (("a", mod.lora_A["default"]), ("b", mod.lora_B["default"])):
                t = torch.from_numpy(case["blk.%d.%s.lora_%s.init" % (li, target, w)]).to(dtype)
                assert lin.weight.shape == t.shape, (name, w, lin.weight.shape, t.shape)
                lin.weight.copy_(t)
        n_set += 1
    n_dumped = sum(1 for k in case if k.endswith(".lora_a.init"))
    assert n_set == n_dumped, "PEFT adapted %d modules, wgml %d" % (n_set, n_dumped)
    params = [p for p in model.parameters() if p.requires_grad]
    assert len(params) == 2 * n_set
    opt = torch.optim.AdamW(params, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    tokens = torch.tensor(case["tokens"], dtype=torch.long)
    labels = torch.tensor(case["labels"], dtype=torch.long)
    losses = []
    for s in range(int(steps)):
        k = s % tokens.shape[0]
        logits = model(input_ids=tokens[k], use_cache=False).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[k].reshape(-1), ignore_index=-100)
        losses.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
    return losses


def main():
    build = sys.argv[1]
    if not os.path.exists(g3.MODEL):
        print("model file missing:", g3.MODEL)
        return 1
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    env = {"WGML_TRAINER_MODEL": g3.MODEL, "WGML_TRAINER_CASE": "gemma",
           "WGML_TRAINER_STEPS": str(STEPS), "WGML_TRAINER_SEQ": str(SEQ), "WGML_TRAINER_LR": repr(LR)}
    t0 = time.time()
    case = wgml_dump.run_dump(build, "test_trainer", env)["gemma"]
    print("  test_trainer --dump (wgml, %d steps): %.1f s" % (STEPS, time.time() - t0))
    cfg = case["config"]
    print("  config: r %d alpha %g targets %#x batch %d seq %d lr %g wd %g betas %g %g eps %g clip %g steps %d"
          % tuple(float(c) if i in (1, 5, 6, 7, 8, 9, 10) else int(c) for i, c in enumerate(cfg)))
    got = [float(x) for x in case["losses"]]
    t0 = time.time()
    ref = train(case)
    print("  PyTorch float32 + PEFT (build and %d steps): %.1f s" % (STEPS, time.time() - t0))
    rel = [abs(g - e) / abs(e) for g, e in zip(got, ref)]
    for s in range(len(ref)):
        print("  step %d: wgml %.6f torch %.6f rel %.2e" % (s, got[s], ref[s], rel[s]))
    print("  max rel. diff %.2e (tolerance %.0e)" % (max(rel), RTOL))
    if "--variants" in sys.argv:
        for label, kw in (("PyTorch float64", {"dtype": torch.float64}),
                          ("alpha 8 instead of 16", {"alpha": float(cfg[1]) / 2}),
                          ("no post-attention / post-FFN norms", {"post_norm": False})):
            v = train(case, **kw)
            print("  variant %s: %s" % (label, ", ".join(
                "step %d %.6f (rel %.2e)" % (s, v[s], abs(got[s] - v[s]) / abs(v[s])) for s in range(len(v)))))
    checker = wgml_dump.Checker()
    checker.close("Gemma-3-270M LoRA losses per step", np.asarray(got), np.asarray(ref), 0.0, RTOL)
    # training must move the loss for the comparison to say anything about the update
    checker.check("the loss changes over the steps", abs(got[-1] - got[0]) > 100 * RTOL * abs(got[0]),
                  "%s" % got)
    return 1 if checker.done() else 0


if __name__ == "__main__":
    sys.exit(main())
