#!/usr/bin/env bash
# The training step at real model shapes on the GPU machine (issue 29's training keys): writes a
# GGUF file with random weights at each shape (bench/real_shapes.py; Q4_0, Q8_0 and F16 directly,
# other types such as Q4_1 and Q4_K_M through llama.cpp's quantizer from an F16 file, as
# bench/real_shapes.sh does), times `wgml bench train` on it (LoRA r16 on all seven projections,
# batch 8 x 512, the step checked against the eval graph's loss) and, in the same run, the PyTorch
# peer at the same shape (bench/peer_train.py: PEFT, fp32 weights, under torch.compile in fp32 and
# with bf16 autocast). Speed does not depend on the weights' values.
# Run from the repository root on the GPU machine with .deps/wgpu, .gl, .whl and .llcpp
# (llama-quantize.xz) carried along; logs go to $OUT. MODELS="shape:TYPE ..." (default
# "smollm2-135m:Q4_1 llama-3.2-1b:Q4_K_M": SmolLM2's key file type, and the 1B file people
# download), MODES (default "compile compile-bf16"), STEPS (wgml's timed steps, default 10);
# LOAD=1 also prints each file's load time and memory (`bench generate`, 16 + 8 tokens).
set -uo pipefail
OUT=${OUT:-out}
. bench/gpu_env.sh
gpu_start
R=$OUT/train_shapes.txt
for mt in ${MODELS:-smollm2-135m:Q4_1 llama-3.2-1b:Q4_K_M}; do
  m=${mt%%:*} t=${mt#*:} F=/tmp/train_shape.gguf
  echo "== $m $t at $(($(date +%s) - t0)) s" | tee -a "$R"
  real_shape_file "$m" "$t" "$F" "$OUT/quantize_$m.log" 2>&1 | tee -a "$R"
  [ "${PIPESTATUS[0]}" = 0 ] || continue
  [ "${LOAD:-0}" = 1 ] && $W bench generate --model "$F" --prompt-tokens 16 --decode-tokens 8 2>&1 | grep -E "^model load|device memory" | tee -a "$R"
  $W bench train --model "$F" --batch 8 --seq-len 512 --rank 16 --steps "${STEPS:-10}" 2>&1 | tail -3 | tee -a "$R"
  for mode in ${MODES:-compile compile-bf16}; do
    PYTHONUNBUFFERED=1 python3 bench/peer_train.py 8 512 16 20 "$mode" "$m" 2>&1 | grep -v Warning | tail -2 | tee -a "$R"
  done
  rm -f "$F"
done
echo "== done at $(($(date +%s) - t0)) s"
