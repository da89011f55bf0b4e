#!/usr/bin/env bash
# One GPU run (NVIDIA, Vulkan): builds wgml there, prints the device, checks and times wgml's
# kernels and PyTorch's on the same GPU in the same run, and prints the table of performance
# keys (bench/compare.py: key first, ratio last). Every wgml number comes from a command that
# checks its kernel against a double-precision reference before timing (`check` column).
# Run from the repository root on the GPU machine with .deps/wgpu and .gl (the Vulkan loader
# .deb) carried along; MODEL=<SmolLM2-135M gguf> adds the model keys (train_step, decode).
# .whl/ may hold the gguf wheel (the generate peer reads the model with it).
# Optional: SWEEP=1 adds bench/gemm_sweep.sh and bench/q4_sweep.sh (every variant, checked).
# Logs go to $OUT (or out/).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
# the gguf package for the PyTorch peers that read the model (carried as a wheel in .whl/)
if ls .whl/*.whl >/dev/null 2>&1; then python3 -m pip install -q --no-deps --no-index .whl/*.whl 2>&1 | grep -v WARNING; fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWGML_BUILD_TESTS=OFF >"$OUT/cmake.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" >>"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
W=./build-gpu/wgml
$W info | tee "$OUT/info.txt"
t0=$(date +%s)
stamp() { echo "-- $1 at $(($(date +%s) - t0)) s"; }

# fp32 GEMM: the squares, and the GEMMs of a SmolLM2 training step (8 x 512 = 4096 tokens) in
# their three orientations: forward x·Wᵀ (NT), dx = dy·W (NN), dW = dyᵀ·x (TN), for the
# projections 576->576 (q, o), 576->192 (k, v), 576->1536 (gate, up) and 1536->576 (down)
SQUARE=${SQUARE:-4096x4096x4096,8192x8192x8192,2048x2048x2048}
TRAIN=${TRAIN:-4096x576x576:NT 4096x576x576:NN 576x576x4096:TN 4096x192x576:NT 4096x576x192:NN 192x576x4096:TN \
4096x1536x576:NT 4096x576x1536:NN 1536x576x4096:TN 4096x576x1536:NT 4096x1536x576:NN 576x1536x4096:TN}
stamp "bench matmul"
$W bench matmul --check --shapes "$SQUARE" | tee "$OUT/wgml_matmul.txt"
for s in $TRAIN; do
  $W bench matmul --check --shapes "${s%%:*}" --trans "${s##*:}" | grep -v '^adapter\|^shape' | tee -a "$OUT/wgml_matmul.txt"
done
stamp "bench ops"
$W bench ops | tee "$OUT/wgml_ops.txt"
stamp "bench q4"
$W bench q4 | tee "$OUT/wgml_q4.txt"
stamp "bench lmhead"
$W bench lmhead | tee "$OUT/wgml_lmhead.txt"
stamp "bench attention"
$W bench attention --profile | tee "$OUT/wgml_attention.txt"
if [ -n "${MODEL:-}" ] && [ -f "$MODEL" ]; then
  stamp "bench generate"
  $W bench generate --model "$MODEL" | tee "$OUT/wgml_generate.txt"
  stamp "peer generate"
  PYTHONUNBUFFERED=1 python3 bench/peer_generate.py "$MODEL" | tee "$OUT/peer_generate.txt"
  stamp "bench train"
  $W bench train --model "$MODEL" --batch 8 --seq-len 512 --rank 16 --steps 20 --profile | tee "$OUT/wgml_train.txt"
  stamp "peer train"
  PYTHONUNBUFFERED=1 python3 bench/peer_train.py 8 512 16 20 | tee "$OUT/peer_train.txt"
fi
stamp "peer matmul and copy"
PYTHONUNBUFFERED=1 python3 bench/peer_torch.py matmul "$SQUARE,$(echo $TRAIN | tr ' ' ',')" | tee "$OUT/peer_matmul.txt"
PYTHONUNBUFFERED=1 python3 bench/peer_torch.py copy 1073741824 | tee "$OUT/peer_copy.txt"
PYTHONUNBUFFERED=1 python3 bench/peer_torch.py attention 8 9 3 512 64 | tee "$OUT/peer_attention.txt"
stamp "noise: the same version timed again"
{ $W bench q4 --gemv; $W bench matmul --check --shapes 4096x4096x4096; $W bench ops; } 2>&1 | tee "$OUT/noise.txt"
if [ -n "${SWEEP:-}" ]; then
  stamp "sweeps"
  NO_BUILD=1 OUT="$OUT" bash bench/gemm_sweep.sh >"$OUT/gemm_sweep.log" 2>&1; tail -30 "$OUT/gemm_sweep.log"
  B=$W bash bench/q4_sweep.sh | tee "$OUT/q4_sweep.txt"
fi
stamp "done"
echo "== performance keys =="
python3 bench/compare.py "$OUT" | tee "$OUT/summary.txt"
tar czf "$OUT.tgz" -C "$OUT" . 2>/dev/null || true
