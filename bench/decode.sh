#!/usr/bin/env bash
# Decode and prefill only, wgml beside llama.cpp's Vulkan backend in the same run (the model keys
# of bench/h200.sh without the kernel keys, for work on the decode step). Run from the repository
# root on the GPU machine with .deps/wgpu, .gl (the Vulkan loader debs) and .llcpp carried along:
#   MODEL=<SmolLM2-135M gguf> GEMMA=<Gemma-3-270M gguf> bash bench/decode.sh [OUT]
# Builds build-gpu when it is missing. Writes wgml_generate*.txt and peer_llamacpp.txt into OUT
# and prints bench/compare.py's table.
set -uo pipefail
OUT=${1:-out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
if [ ! -x build-gpu/wgml ] || [ -n "${REBUILD:-}" ]; then
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWGML_BUILD_TESTS=OFF >"$OUT/cmake.log" 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" >>"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
fi
W=./build-gpu/wgml
$W info | tee "$OUT/info.txt"
if [ -n "${MODEL:-}" ] && [ -f "$MODEL" ]; then
  $W bench generate --model "$MODEL" --prompt-tokens 512 --decode-tokens 256 | tee "$OUT/wgml_generate.txt"
fi
if [ -n "${GEMMA:-}" ] && [ -f "$GEMMA" ]; then
  $W bench generate --model "$GEMMA" --prompt-tokens 512 --decode-tokens 256 | tee "$OUT/wgml_generate_gemma.txt"
fi
if [ -f .llcpp/llama-bench.xz ] && [ -z "${NO_PEER:-}" ]; then
  xz -dc .llcpp/llama-bench.xz > /tmp/llama-bench && chmod +x /tmp/llama-bench
  for m in "smollm2:${MODEL:-}" "gemma:${GEMMA:-}"; do
    [ -n "${m#*:}" ] && [ -f "${m#*:}" ] || continue
    bash bench/peer_llamacpp.sh /tmp/llama-bench "${m#*:}" "llamacpp_${m%%:*}" 2>&1 | tee -a "$OUT/peer_llamacpp.txt"
  done
fi
python3 bench/compare.py "$OUT" | tee "$OUT/summary.txt"
