#!/usr/bin/env bash
# Sweeps the q4 GEMV shape (threads per row, rows per thread, workgroup size) on the GPU.
# Run after bench/h200.sh has built build-gpu (same machine, same call or a warm one).
set -uo pipefail
for cfg in auto 8,4,256 16,4,256 16,2,256 32,4,256 32,2,256 16,8,256 8,8,256 16,4,128 32,1,256; do
  echo "== WGML_Q4_GEMV=$cfg"
  if [ "$cfg" = auto ]; then ./build-gpu/wgml bench q4 | grep GEMV; else WGML_Q4_GEMV=$cfg ./build-gpu/wgml bench q4 | grep GEMV; fi
done
