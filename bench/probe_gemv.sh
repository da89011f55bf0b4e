#!/usr/bin/env bash
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWGML_BUILD_TESTS=OFF >"$OUT/cmake.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" >>"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
W=./build-gpu/wgml
for m in "" inline inline:8 inline:16 dispatch; do echo "== WGML_CE_COUNT=$m"; WGML_CE_COUNT=$m $W bench ops --profile 2>&1 | grep -A6 "^cross_entropy"; done 2>&1 | tee "$OUT/ce.txt"
$W bench ops --rows 1024 | grep -E "softmax|cross" | tee -a "$OUT/ce.txt"
VARIANTS="db128x128_k8_r8x8 db128x64_k16_r8x4 db128x64_k8_r8x4 db64x64_k16_r4x4 tile128x64_k16_r8x4" SPLITS="1 4" B=$W bash bench/q4_sweep.sh mm 2>&1 | tee "$OUT/q4mm.txt"
