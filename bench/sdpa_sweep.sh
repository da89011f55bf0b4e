#!/usr/bin/env bash
# Sweeps the attention forward's tile (WX,WY,TM,TN[,DC] through $WGML_SDPA_TILE) at the prefill
# shapes of 512 tokens: SmolLM2 (9 query heads, 3 kv heads, D = 64), Gemma 3 (4, 1, D = 256) and
# a Llama-style D = 128 (32, 8), batch 1, causal; then the training shape (batch 8, SmolLM2's heads)
# with the automatic tile. Every line is checked against a double-precision reference by
# `wgml bench attention --forward` itself. Run on the GPU machine after build-gpu is built.
# SHAPES and TILES narrow it; SPLITS="1 2 4" also sweeps the key split ($WGML_SDPA_SPLIT; unset:
# the automatic rule).
set -uo pipefail
B=${B:-./build-gpu/wgml}
for shape in ${SHAPES:-9,3,64 4,1,256 32,8,128}; do
  IFS=, read -r hq hkv d <<<"$shape"
  for t in auto ${TILES:-4,32,2,8 8,16,4,2 16,16,4,1 16,16,2,2 8,32,2,4 8,32,4,2 8,32,2,2 16,8,4,2 8,8,4,4 8,16,2,4 \
      8,16,2,2 4,16,2,8 4,32,1,8 8,16,1,4 16,16,2,1 32,8,2,1 16,16,4,1,16 16,16,4,1,32 8,16,4,2,16 8,16,4,2,32}; do
    if [ "$t" = auto ]; then unset WGML_SDPA_TILE; else export WGML_SDPA_TILE=$t; fi
    for sp in ${SPLITS:-auto}; do
      if [ "$sp" = auto ]; then unset WGML_SDPA_SPLIT; else export WGML_SDPA_SPLIT=$sp; fi
      printf '%-10s %-14s %-5s ' "$shape" "$t" "$sp"
      "$B" bench attention --batch 1 --seq "${SEQ:-512}" --heads "$hq" --kv-heads "$hkv" --dim "$d" --forward 2>&1 |
        grep -E '^sdpa forward |bench attention:' | head -1
    done
  done
done
unset WGML_SDPA_TILE WGML_SDPA_SPLIT
"$B" bench attention --forward
