#!/usr/bin/env bash
# The skinny GEMMs of LoRA training (rank 16 on SmolLM2-135M, 8 x 512 tokens): x·Aᵀ, h·Bᵀ,
# dh = dy·B, dB = dyᵀ·h, dA = dhᵀ·x, dx += dh·A, over the tile variants and split factors,
# each checked against a double reference. Run after bench/h200.sh has built build-gpu.
# The skinny variants (matmul_skinny.wgsl: an output side <= 32) and the outer-product ones
# (matmul_outer.wgsl: K <= 32) against the 32x32 tile; split counts apply to every variant
# (the outer kernel only splits when forced). One pass over all twelve at the automatic
# choice: wgml bench matmul --check --reps 20 --shapes lora
set -uo pipefail
W=${WGML:-./build-gpu/wgml}
V=${VARIANTS:-tile32x32_k16_r4x4,skinny_r4_kt16,skinny_r2_kt16,skinny_r1_kt32,skinny_r4_kt4,outer_r4,outer_r8,auto}
S=${SPLITS:-1,2,4,8,16,auto}
for spec in 4096x16x576:NT 4096x16x1536:NT 4096x576x16:NT 4096x1536x16:NT 4096x16x576:NN 4096x16x1536:NN \
  576x16x4096:TN 1536x16x4096:TN 16x576x4096:TN 16x1536x4096:TN 4096x576x16:NN 4096x1536x16:NN; do
  "$W" bench matmul --check --reps 20 --shapes "${spec%%:*}" --trans "${spec##*:}" --variant "$V" --splitk "$S" |
    grep -v '^adapter\|^shape'
done
