"""The README's Python example, timed at each stage (load, the evaluation before, each training
step, the evaluation after, generation), for the lavapipe figures in docs/PERFORMANCE.md.

    PYTHONPATH=python WGML_LIBRARY=$PWD/build/libwgml.so .deps/venv/bin/python bench/example_stages.py

Cold: empty the driver's shader cache first (`MESA_SHADER_CACHE_DIR=$(mktemp -d)`); warm: run
again with the same one. `WGML_LOG_PIPELINES=1` lists the pipelines it creates."""
import os
import time

import wgml

T = [time.time()]


def stage(name):
    T.append(time.time())
    print("%-10s %.1f s" % (name, T[-1] - T[-2]), flush=True)


model = wgml.Model.load(os.environ.get("WGML_MODEL", ".deps/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
stage("load")
text = open(os.environ.get("WGML_DATA", ".deps/data/kjv.txt")).read()[:20000]
train, held_out = text[:-2000], text[-2000:]
print("held-out perplexity before:", model.eval(held_out, seq_len=32).perplexity)
stage("eval1")
trainer = wgml.Trainer(model, rank=8, targets=["q", "v"], batch=1, seq_len=32, lr=2e-3)
for row in wgml.rows_of(model.tokenize(train), 32)[:4]:
    print("loss", trainer.step(row[None]))
    stage("step")
print("held-out perplexity after:", trainer.evaluate(held_out).perplexity)
stage("eval2")
trainer.attach()
print("".join(model.generate("And it came to pass", max_tokens=16)))
stage("generate")
print("total %.1f s" % (time.time() - T[0]))
