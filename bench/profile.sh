#!/usr/bin/env bash
# Per-kernel profiles on the GPU machine (each dispatch timed alone): the decode step and the
# 512-token prefill of each model (`wgml bench generate --profile`, which also prints how a
# prefill's wall time splits), and the SmolLM2 LoRA train step (`wgml bench train --profile`).
# Run from the repository root with .deps/wgpu and .gl (the Vulkan loader debs) carried along:
#   MODEL=<SmolLM2-135M gguf> [GEMMA=<Gemma-3-270M gguf>] bash bench/profile.sh [OUT]
set -uo pipefail
OUT=${1:-out}
mkdir -p "$OUT"
. bench/gpu_env.sh
gpu_env >/dev/null
if [ ! -x build-gpu/wgml ] || [ -n "${REBUILD:-}" ]; then
  gpu_build . build-gpu "$OUT/cmake.log" || exit 1
fi
W=./build-gpu/wgml
for m in "smollm2:${MODEL:-}" "gemma:${GEMMA:-}"; do
  [ -n "${m#*:}" ] && [ -f "${m#*:}" ] || continue
  $W bench generate --model "${m#*:}" --prompt-tokens 512 --decode-tokens 256 --profile | tee "$OUT/profile_generate_${m%%:*}.txt"
done
if [ -n "${MODEL:-}" ] && [ -f "$MODEL" ] && [ -z "${NO_TRAIN:-}" ]; then
  $W bench train --model "$MODEL" --batch 8 --seq-len 512 --rank 16 --steps 10 --profile | tee "$OUT/profile_train.txt"
fi
