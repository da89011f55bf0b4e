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
. bench/gpu_env.sh
gpu_env
if [ ! -x build-gpu/wgml ] || [ -n "${REBUILD:-}" ]; then
  gpu_build . build-gpu "$OUT/cmake.log" || exit 1
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
