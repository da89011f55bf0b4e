#!/usr/bin/env bash
# wgml's side of the performance keys, for one build: bench/wgml_keys.sh WGML_BINARY OUT_DIR.
# Every command checks its kernel against a double-precision reference before timing. Writes
# wgml_*.txt into OUT_DIR (the names bench/compare.py reads). MODEL=<SmolLM2-135M gguf> adds
# the model keys (decode and prefill at 512 prompt tokens and 256 generated, the llama.cpp peer's
# test; train_step); GEMMA=<Gemma-3-270M gguf> adds Gemma's decode and prefill. Used by bench/h200.sh (wgml and its peers) and
# bench/ab.sh (two wgml builds against each other).
set -uo pipefail
W=$1
OUT=$2
mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "-- $1 at $(($(date +%s) - t0)) s"; }

. "$(dirname "$0")/shapes.sh"
stamp "bench matmul"
$W bench matmul --check --shapes "$SQUARE" | tee "$OUT/wgml_matmul.txt"
for s in $TRAIN; do
  $W bench matmul --check --shapes "${s%%:*}" --trans "${s##*:}" | grep -v '^adapter\|^shape' | tee -a "$OUT/wgml_matmul.txt"
done
stamp "bench ops"
$W bench ops | tee "$OUT/wgml_ops.txt"
stamp "bench qw"
$W bench qw | tee "$OUT/wgml_qw.txt"
stamp "bench lmhead"
$W bench lmhead | tee "$OUT/wgml_lmhead.txt"
stamp "bench attention"
$W bench attention --profile | tee "$OUT/wgml_attention.txt"
if [ -n "${MODEL:-}" ] && [ -f "$MODEL" ]; then
  stamp "bench generate"
  $W bench generate --model "$MODEL" --prompt-tokens 512 --decode-tokens 256 | tee "$OUT/wgml_generate.txt"
  stamp "bench train"
  $W bench train --model "$MODEL" --batch 8 --seq-len 512 --rank 16 --steps 20 --profile | tee "$OUT/wgml_train.txt"
fi
if [ -n "${GEMMA:-}" ] && [ -f "$GEMMA" ]; then
  stamp "bench generate (Gemma-3-270M)"
  $W bench generate --model "$GEMMA" --prompt-tokens 512 --decode-tokens 256 | tee "$OUT/wgml_generate_gemma.txt"
fi
stamp "wgml keys done"
