#!/usr/bin/env bash
# Per-kernel profiles on the GPU machine (each dispatch timed alone): the decode step and the
# 512-token prefill of each model (`wgml bench generate --profile`, which also prints how a
# prefill's wall time splits), and the SmolLM2 LoRA train step (`wgml bench train --profile`).
# Run from the repository root with .deps/wgpu and .gl (the Vulkan loader debs) carried along:
#   MODEL=<SmolLM2-135M gguf> [GEMMA=<Gemma-3-270M gguf>] bash bench/profile.sh [OUT]
set -uo pipefail
OUT=${1:-out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
if [ ! -x build-gpu/wgml ] || [ -n "${REBUILD:-}" ]; then
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWGML_BUILD_TESTS=OFF >"$OUT/cmake.log" 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" >>"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
fi
W=./build-gpu/wgml
for m in "smollm2:${MODEL:-}" "gemma:${GEMMA:-}"; do
  [ -n "${m#*:}" ] && [ -f "${m#*:}" ] || continue
  $W bench generate --model "${m#*:}" --prompt-tokens 512 --decode-tokens 256 --profile | tee "$OUT/profile_generate_${m%%:*}.txt"
done
if [ -n "${MODEL:-}" ] && [ -f "$MODEL" ] && [ -z "${NO_TRAIN:-}" ]; then
  $W bench train --model "$MODEL" --batch 8 --seq-len 512 --rank 16 --steps 10 --profile | tee "$OUT/profile_train.txt"
fi
