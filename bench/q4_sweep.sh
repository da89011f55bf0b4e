#!/usr/bin/env bash
# Sweeps the q4 GEMV shape on the GPU: threads per row (TPR), rows per thread (RPT), workgroup
# size (WG) and blocks loaded per iteration (BPI), through $WGML_Q4_GEMV="TPR,RPT,WG,BPI".
# Every line is checked against a double-precision reference by wgml bench q4 itself.
# Run after bench/h200.sh has built build-gpu (same machine, same call or a warm one).
set -uo pipefail
B=${B:-./build-gpu/wgml}
for cfg in auto ${CONFIGS:-16,2,256,1 16,2,256,2 16,2,256,4 32,4,256,1 32,4,256,2 32,2,256,2 32,2,256,4 \
    16,4,256,2 64,1,256,2 64,2,256,2 64,1,256,4 32,1,256,4 8,4,256,2 16,2,128,4 32,2,512,2}; do
  echo "== WGML_Q4_GEMV=$cfg"
  if [ "$cfg" = auto ]; then "$B" bench q4 --gemv | grep GEMV; else WGML_Q4_GEMV=$cfg "$B" bench q4 --gemv | grep GEMV; fi
done
