#!/usr/bin/env bash
# One GPU run (NVIDIA, Vulkan): builds wgml there, prints the device, checks and times wgml's
# kernels and PyTorch's on the same GPU in the same run, and prints the ratios.
# Run from the repository root on the GPU machine with .deps/wgpu and .gl (the Vulkan loader
# .deb) carried along. Logs go to $OUT (or out/).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWGML_BUILD_TESTS=OFF >"$OUT/cmake.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" >>"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
./build-gpu/wgml info | tee "$OUT/info.txt"

SHAPES=${SHAPES:-4096x4096x4096,8192x8192x8192,4096x1536x576,4096x576x1536,576x1536x4096,2048x2048x2048}
echo "== wgml bench matmul (checked) =="
./build-gpu/wgml bench matmul --check --shapes "$SHAPES" | tee "$OUT/wgml_matmul.txt"
for v in ${VARIANTS:-}; do
  ./build-gpu/wgml bench matmul --variant "$v" --shapes "$SHAPES" | tee -a "$OUT/wgml_matmul_variants.txt"
done
echo "== wgml bench ops =="
./build-gpu/wgml bench ops | tee "$OUT/wgml_ops.txt"
echo "== wgml bench q4 =="
./build-gpu/wgml bench q4 | tee "$OUT/wgml_q4.txt"
if [ -n "${MODEL:-}" ] && [ -f "$MODEL" ]; then
  echo "== wgml bench generate =="
  ./build-gpu/wgml bench generate --model "$MODEL" | tee "$OUT/wgml_generate.txt"
  echo "== PyTorch peer: generate (fp32 eager, KV cache) =="
  PYTHONUNBUFFERED=1 python3 bench/peer_generate.py "$MODEL" | tee "$OUT/peer_generate.txt"
  echo "== wgml bench train (LoRA r=16, all projections, batch 8 x 512) =="
  ./build-gpu/wgml bench train --model "$MODEL" --batch 8 --seq-len 512 --rank 16 --steps 5 | tee "$OUT/wgml_train.txt"
  echo "== PyTorch + PEFT peer: train step =="
  PYTHONUNBUFFERED=1 python3 bench/peer_train.py 8 512 16 5 | tee "$OUT/peer_train.txt"
fi
echo "== PyTorch peer =="
PYTHONUNBUFFERED=1 python3 bench/peer_torch.py matmul "$SHAPES" | tee "$OUT/peer_matmul.txt"
PYTHONUNBUFFERED=1 python3 bench/peer_torch.py copy 1073741824 | tee "$OUT/peer_copy.txt"
echo "== ratios =="
python3 bench/compare.py "$OUT" | tee "$OUT/summary.txt"
