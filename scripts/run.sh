#!/usr/bin/env bash
# The main job: installs what is missing, builds, shows the adapter, then fine-tunes
# SmolLM2-135M-Instruct (4-bit GGUF) on the King James Bible with a LoRA adapter on the GPU
# (QLoRA-style: the 4-bit base stays frozen) and shows what changed: the held-out perplexity
# before and after (printed by wgml finetune; the last 5% of the text, never trained on) and a
# greedy sample without and with the adapter.
#
# Sized so that it finishes within 10 minutes on a machine without a GPU (lavapipe, Mesa's CPU
# Vulkan driver, 2 cores): 20 LoRA steps of 1 x 64 tokens and 512 held-out tokens per
# evaluation (before and after). A training step of SmolLM2-135M on 64 tokens is about 52 GFLOP
# (forward and backward); README.md ("Time") gives the budget and the measured run. Only the
# CLI is built here (bash scripts/test.sh builds and runs the tests). Override with the
# environment, e.g. on a real GPU:
#   STEPS=2000 BATCH=8 SEQ_LEN=256 EVAL_TOKENS=32768 bash scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target wgml_cli

# MODEL: a GGUF path, or smollm2 (the default) or gemma3 (Gemma-3-270M, Q4_K_M, with its
# SentencePiece tokenizer)
MODEL=${MODEL:-smollm2}
case "$MODEL" in
  smollm2) MODEL=.deps/models/SmolLM2-135M-Instruct.Q4_1.gguf ;;
  gemma3) MODEL=.deps/models/gemma-3-270m-q4_k_m.gguf ;;
esac
DATA=${DATA:-.deps/data/kjv.txt}
OUT=${OUT:-out/kjv-lora}
STEPS=${STEPS:-20}
BATCH=${BATCH:-1}
SEQ_LEN=${SEQ_LEN:-64}
EVAL_TOKENS=${EVAL_TOKENS:-512}
LR=${LR:-2e-3}
PROMPT=${PROMPT:-"And it came to pass, when the king heard"}
MAX_TOKENS=${MAX_TOKENS:-32}

T0=$(date +%s)
./build/wgml info
./build/wgml info --model "$MODEL" | sed -n '/architecture description/,/^$/p'

echo
echo "== sample from the base model (greedy) =="
./build/wgml generate --model "$MODEL" --prompt "$PROMPT" --max-tokens "$MAX_TOKENS" --ctx 256

echo
echo "== wgml finetune: LoRA on $DATA, $STEPS steps of $BATCH x $SEQ_LEN tokens =="
rm -rf "$OUT"
if ! ./build/wgml finetune --model "$MODEL" --data "$DATA" --out "$OUT" --mode lora \
    --steps "$STEPS" --batch "$BATCH" --seq-len "$SEQ_LEN" --lr "$LR" \
    --eval-tokens "$EVAL_TOKENS" --eval-every "${EVAL_EVERY:-0}" --seed 1; then
  echo "run.sh: wgml finetune failed" >&2
  exit 1
fi

echo
echo "== sample with the adapter (greedy) =="
./build/wgml generate --model "$MODEL" --lora "$OUT" --prompt "$PROMPT" --max-tokens "$MAX_TOKENS" --ctx 256

echo
echo "== held-out perplexity (from $OUT/loss.csv) =="
awk -F, 'NR > 1 && $5 != "" { printf "  step %5d: perplexity %s\n", $1, $5 }' "$OUT/loss.csv"
echo "outputs: $OUT/adapter.safetensors, adapter_config.json, loss.csv, loss.svg, checkpoint/"
echo "run.sh: $(( $(date +%s) - T0 )) s after the build"
