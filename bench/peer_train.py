"""PyTorch peer for the training step: a Llama with SmolLM2-135M's shape, or with another of
bench/real_shapes.py's shapes named by the sixth argument (e.g. llama-3.2-1b) (Hugging Face
transformers' LlamaForCausalLM, random weights — speed does not depend on their values) with
PEFT LoRA adapters on all seven projections, fp32 with TF32 off, AdamW on the adapters,
batch x seq tokens per step. Prints tokens/s (median step time over the timed steps).
Modes (fifth argument): eager (fp32), compile (the model under torch.compile, fp32), compile-bf16
(torch.compile with bf16 autocast: the fastest setting a PyTorch user would pick). The key is
train_step for eager and train_step_<mode> otherwise; bench/compare.py takes the faster compiled
one as the peer."""
import sys
import time

import torch


def config(shape):
    from transformers import LlamaConfig
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from real_shapes import MODELS
    arch, layers, d, ff, heads, kv, hd, vocab, rope, eps, tied, bias = MODELS[shape]
    if arch != "llama":
        raise SystemExit(f"peer_train: {shape} is not a Llama shape")
    return LlamaConfig(vocab_size=vocab, hidden_size=d, intermediate_size=ff, num_hidden_layers=layers,
                       num_attention_heads=heads, num_key_value_heads=kv, head_dim=hd,
                       max_position_embeddings=2048, rms_norm_eps=eps, rope_theta=rope,
                       tie_word_embeddings=tied)


def main(batch=8, seq=512, rank=16, steps=20, mode="eager", shape="smollm2-135m"):
    warmup = 5 if mode == "eager" else 8  # the compiled modes compile during the first steps
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cfg = config(shape)
    model = LlamaForCausalLM(cfg).cuda().float()
    lora = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0,
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    model = get_peft_model(model, lora)
    run = torch.compile(model) if mode.startswith("compile") else model
    amp = torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode.endswith("bf16"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    times = []
    for i in range(warmup + steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with amp:
            out = run(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss = out.loss.item()  # read back the loss, as wgml does
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    t = times[len(times) // 2]
    key = "train_step" if mode == "eager" else "train_step_" + mode
    key += "" if shape == "smollm2-135m" else "_" + shape
    print(f"peer {key} {batch * seq / t:.1f} tokens/s (step {t * 1e3:.1f} ms median of {steps}, "
          f"{times[0] * 1e3:.1f}-{times[-1] * 1e3:.1f} ms, loss {loss:.3f})")
    import transformers, peft
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}")


if __name__ == "__main__":
    main(*[int(a) for a in sys.argv[1:5]], *sys.argv[5:7])
