#!/usr/bin/env bash
# Sweeps the quantised-weight GEMV shape on the GPU: threads per row (TPR), rows per thread (RPT), workgroup
# size (WG) and blocks loaded per iteration (BPI), through $WGML_QW_GEMV="TPR,RPT,WG,BPI" (CONFIGS, a
# space-separated list, replaces the default one: the shapes of the twenty-second session's sweep, about
# 21 s each on an H100 with seven GEMV shapes).
# Every line is checked against a double-precision reference by wgml bench qw itself.
# Run after bench/h200.sh has built build-gpu (same machine, same call or a warm one).
#
# bench/qw_sweep.sh mm: the tiled 4-bit GEMM instead: every tile variant x split-K count
# ($WGML_QW_MM_VARIANT x $WGML_QW_MM_SPLITK) on the training shapes of wgml bench qw --train
# (M = 4096 and 512, forward and input gradient, the LM head chunk), after the automatic choice.
# VARIANTS and SPLITS narrow it (about 10 s per pair on an H200).
#
# TYPE=Q4_K (or Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q5_K, Q6_K) times that GGUF weight type instead
# of q4gsw (`wgml bench qw --type`; shapes whose K is not whole blocks are skipped).
# WGML_BENCH_QW_SHAPES="KxN,..." times those shapes instead of the fixed list, for example one
# model's decode GEMVs (Llama-3.1-8B's q/k/v, o, down: 4096x6144,4096x4096,14336x4096).
set -uo pipefail
B=${B:-./build-gpu/wgml}
T=()
if [ -n "${TYPE:-}" ]; then T=(--type "$TYPE"); fi
if [ "${1:-}" = mm ]; then
  echo "== auto"
  "$B" bench qw --train "${T[@]}"
  for v in ${VARIANTS:-db128x128_k8_r8x8 db128x128_k16_r8x8 db128x64_k16_r8x4 db128x64_k8_r8x4 db64x64_k16_r4x4 \
      tile128x128_k16_r8x8 tile128x64_k16_r8x4 tile64x64_k32_r4x4}; do
    for s in ${SPLITS:-1 2 4 8}; do
      echo "== WGML_QW_MM_VARIANT=$v WGML_QW_MM_SPLITK=$s"
      WGML_QW_MM_VARIANT=$v WGML_QW_MM_SPLITK=$s "$B" bench qw --train "${T[@]}" | grep -E '^M='
    done
  done
  exit 0
fi
for cfg in auto ${CONFIGS:-32,8,64,1 32,4,64,1 16,8,64,1 64,8,64,1 64,4,64,1 128,8,128,1 128,4,128,1 256,8,256,1 \
    256,4,256,1 32,8,64,2 64,1,256,2 16,2,256,2}; do
  echo "== WGML_QW_GEMV=$cfg"
  if [ "$cfg" = auto ]; then "$B" bench qw --gemv "${T[@]}" | grep GEMV; else WGML_QW_GEMV=$cfg "$B" bench qw --gemv "${T[@]}" | grep GEMV; fi
done
