#!/usr/bin/env bash
# fp32 GEMM sweep on the GPU machine (NVIDIA, Vulkan): every matmul variant and split-K factor
# on the shapes that matter, each configuration spot-checked against a double reference
# (`wgml bench matmul --check`), then the best configuration per (shape, orientation).
# Run from the repository root with .deps/wgpu and .gl (the Vulkan loader .deb) carried along,
# as bench/h200.sh. Logs go to $OUT (or out/). Takes about 2-3 minutes on an H200.
# Columns: shape MxNxK (of op(a)·op(b)), op (NN; TN: a stored transposed; NT: b stored
# transposed), variant ("auto:" = the automatic choice), split (K slices; "a" = automatic),
# ms per product, TFLOP/s, check.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
. bench/gpu_env.sh
gpu_env
# the build is skipped with NO_BUILD=1 when build-gpu/wgml (or $WGML) exists
if [ -z "${NO_BUILD:-}" ] || [ ! -x "${WGML:-build-gpu/wgml}" ]; then
  gpu_build . build-gpu "$OUT/cmake.log" || exit 1
fi
W=${WGML:-./build-gpu/wgml}
LOG="$OUT/gemm_sweep.txt"
: >"$LOG"
start=$(date +%s)
unset WGML_MATMUL_VARIANT WGML_MATMUL_SPLITK
# tile32x32 is far off the pace on large problems; the big squares leave it out
BIG="tile128x128_k8_r8x8,tile64x64_k16_r4x4,tile128x128_k16_r8x8,tile128x64_k16_r8x4,db128x128_k8_r8x8,db128x128_k16_r8x8,db128x64_k16_r8x4,db64x64_k16_r4x4,auto"
run() { # label, then bench arguments
  local label=$1; shift
  echo "== $label ($(($(date +%s) - start)) s)"
  "$W" bench matmul --check "$@" 2>&1 | grep -v '^adapter' | tee -a "$LOG" | grep -v '^shape'
}
echo "shape MxNxK          op  variant                    split         ms   TFLOP/s check" | tee -a "$LOG"
# big squares: no split (hundreds of tiles already)
run "8192^3" --shapes "${SHAPES_HUGE:-8192x8192x8192}" --reps 3 --variant "$BIG" --splitk 1
run "4096^3, 2048^3" --shapes "${SHAPES_SQUARE:-4096x4096x4096,2048x2048x2048}" --reps 10 --variant "$BIG" --splitk 1 --trans NN,NT,TN
# training shapes (a linear layer 576 -> 1536 over 4096 tokens, and 1536 -> 576), as M x N x K
# of the product: forward x·Wᵀ (NT) and dx = dy·W (NN) have M = 4096 tokens; the weight
# gradient dW = dyᵀ·x (TN) has K = 4096 (long K, few tiles: the split-K case)
run "training: forward and dx" --shapes "${SHAPES_TRAIN:-4096x1536x576,4096x576x1536}" --reps 10 \
  --variant "$BIG" --splitk 1,2,4,auto --trans NN,NT,TN
run "training: dW (long K)" --shapes "${SHAPES_DW:-576x1536x4096,1536x576x4096}" --reps 10 \
  --variant "$BIG" --splitk 1,2,4,8,auto --trans NN,TN
echo "== done in $(($(date +%s) - start)) s"
echo
echo "best per shape and orientation (TFLOP/s, checked configurations only):"
awk '$1 ~ /^[0-9]+x/ && $7 == "ok" { key = $1 " " $2; if ($6 > best[key]) { best[key] = $6; cfg[key] = $3 " split " $4 } }
     $1 ~ /^[0-9]+x/ && $3 ~ /^auto:/ && (!(($1 " " $2) in autov) || $4 ~ /^a/) { autov[$1 " " $2] = $6 " (" $3 " split " $4 ")" }
     END { for (k in best) printf "%-26s %8.2f  %-34s auto %s\n", k, best[k], cfg[k], autov[k] }' "$LOG" | sort | tee "$OUT/gemm_best.txt"
if grep -q FAIL "$LOG"; then echo "CHECK FAILURES:"; grep FAIL "$LOG"; exit 1; fi
