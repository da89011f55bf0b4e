#!/usr/bin/env bash
# One GPU run (NVIDIA, Vulkan): builds wgml there, prints the device, checks and times wgml's
# kernels and PyTorch's on the same GPU in the same run, and prints the table of performance
# keys (bench/compare.py: key first, ratio last). Every wgml number comes from a command that
# checks its kernel against a double-precision reference before timing (`check` column).
# Run from the repository root on the GPU machine with .deps/wgpu and .gl (the Vulkan loader
# .deb) carried along; MODEL=<SmolLM2-135M gguf> adds the model keys (train_step, decode).
# .whl/ may hold the gguf wheel (the generate peer reads the model with it).
# GEMMA=<Gemma-3-270M gguf> adds its decode and prefill keys. Peers carried along when present:
# .llcpp/llama-bench.xz (llama.cpp's Vulkan backend, bench/build_llamacpp.sh) for decode and
# prefill on the same GGUF files; .ort/onnxruntime_webgpu-*.whl (ONNX Runtime's WebGPU EP) for
# the GEMM rows. PEFT + torch.compile (fp32 and bf16 autocast) is the training peer.
# PART=wgml runs only wgml's side (build, keys, noise), PART=peers only the peers, so that a run
# fits two calls of the GPU machine's 10-minute limit; compare.py joins the two folders' files.
# Optional: SWEEP=1 adds bench/gemm_sweep.sh and bench/qw_sweep.sh (every variant, checked).
# Logs go to $OUT (or out/).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
. bench/gpu_env.sh
gpu_env
PART=${PART:-all}
t0=$(date +%s)
stamp() { echo "-- $1 at $(($(date +%s) - t0)) s"; }
if [ "$PART" != peers ]; then
gpu_build . build-gpu "$OUT/cmake.log" || exit 1
W=./build-gpu/wgml
$W info | tee "$OUT/info.txt"
bash bench/wgml_keys.sh "$W" "$OUT"
stamp "noise: the same version timed again"
{ $W bench qw --gemv; $W bench matmul --check --shapes 4096x4096x4096; $W bench ops; } 2>&1 | tee "$OUT/noise.txt"
fi
. bench/shapes.sh
if [ "$PART" != wgml ]; then
if [ -n "${MODEL:-}" ] && [ -f "$MODEL" ]; then
  stamp "peer generate"
  PYTHONUNBUFFERED=1 python3 bench/peer_generate.py "$MODEL" | tee "$OUT/peer_generate.txt"
  stamp "peer train"
  for mode in eager compile compile-bf16; do
    PYTHONUNBUFFERED=1 python3 bench/peer_train.py 8 512 16 20 $mode 2>&1 | grep -v Warning | tail -3
  done | tee "$OUT/peer_train.txt"
fi
if [ -f .llcpp/llama-bench.xz ]; then
  xz -dc .llcpp/llama-bench.xz > /tmp/llama-bench && chmod +x /tmp/llama-bench
  cat .llcpp/VERSION 2>/dev/null
  for m in "smollm2:${MODEL:-}" "gemma:${GEMMA:-}"; do
    [ -n "${m#*:}" ] && [ -f "${m#*:}" ] || continue
    stamp "peer llama.cpp ${m%%:*}"
    bash bench/peer_llamacpp.sh /tmp/llama-bench "${m#*:}" "llamacpp_${m%%:*}" 2>&1 | tee -a "$OUT/peer_llamacpp.txt"
  done
fi
if ls .ort/onnxruntime_webgpu-*.whl >/dev/null 2>&1; then
  stamp "peer ONNX Runtime WebGPU"
  python3 -m pip install -q --no-deps --target /tmp/ortw .ort/onnxruntime_webgpu-*.whl 2>&1 | grep -v WARNING
  PYTHONPATH=/tmp/ortw PYTHONUNBUFFERED=1 python3 bench/peer_ort_gemm.py 4096,8192 2>&1 | tail -4 | tee "$OUT/peer_ort.txt"
fi
stamp "peer matmul and copy"
PYTHONUNBUFFERED=1 python3 bench/peer_torch.py matmul "$SQUARE,$(echo $TRAIN | tr ' ' ',')" | tee "$OUT/peer_matmul.txt"
PYTHONUNBUFFERED=1 python3 bench/peer_torch.py copy 1073741824 | tee "$OUT/peer_copy.txt"
PYTHONUNBUFFERED=1 python3 bench/peer_torch.py attention 8 9 3 512 64 | tee "$OUT/peer_attention.txt"
fi
if [ -n "${SWEEP:-}" ]; then
  stamp "sweeps"
  NO_BUILD=1 OUT="$OUT" bash bench/gemm_sweep.sh >"$OUT/gemm_sweep.log" 2>&1; tail -30 "$OUT/gemm_sweep.log"
  B=$W bash bench/qw_sweep.sh | tee "$OUT/qw_sweep.txt"
fi
stamp "done"
echo "== performance keys =="
python3 bench/compare.py "$OUT" | tee "$OUT/summary.txt"
tar czf "$OUT.tgz" -C "$OUT" . 2>/dev/null || true
