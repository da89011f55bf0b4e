#!/usr/bin/env bash
# Decode and prefill of real model sizes on the GPU machine (issue 29's keys, wgml's side):
# writes GGUF files with random weights at real architectures' shapes (bench/real_shapes.py:
# Llama-3.2-1B, Qwen2.5-3B, Llama-3.1-8B; Q4_0 and Q8_0), then times each with `wgml bench
# generate` (prefill of 512 and 2,048 tokens, decode at 128 and 4,096 tokens of context) next to
# the WGSL copy's bandwidth (`wgml bench ops`), and prints the decode step's weight bytes / time
# against it (the copy roofline). Run from the repository root on the GPU machine with .deps/wgpu,
# .gl (the Vulkan loader debs) and .whl (the gguf wheel) carried along; logs go to $OUT.
# MODELS="name:TYPE ..." overrides the list.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
. bench/gpu_env.sh
gpu_env
t0=$(date +%s)
gpu_build . build-gpu "$OUT/cmake.log" || exit 1
W=./build-gpu/wgml
$W info | tee "$OUT/info.txt"
$W bench ops 2>&1 | tee "$OUT/ops.txt"
MODELS=${MODELS:-"llama-3.2-1b:Q4_0 llama-3.2-1b:Q8_0 qwen2.5-3b:Q4_0 llama-3.1-8b:Q4_0 llama-3.1-8b:Q8_0"}
F=/tmp/real_shapes.gguf
for mt in $MODELS; do
  m=${mt%%:*} t=${mt#*:}
  echo "== $m $t at $(($(date +%s) - t0)) s"
  python3 bench/real_shapes.py "$m" "$t" "$F" || continue
  # the weight bytes a decode step reads: every block matrix and the head (the token embedding
  # when tied; the embedding itself is read one row per token)
  python3 - "$F" <<'PY' | tee -a "$OUT/real_shapes.txt"
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
names = {t.name: int(t.n_bytes) for t in r.tensors}
head = names.get("output.weight", names["token_embd.weight"])
blocks = sum(b for n, b in names.items() if n.startswith("blk."))
print(f"weights read per decode step: {(blocks + head) / 1e9:.3f} GB (blocks {blocks / 1e9:.3f}, head {head / 1e9:.3f})")
PY
  for pd in "512 128" "2048 32" "4096 64"; do
    set -- $pd
    echo "-- $m $t prompt $1 decode $2" | tee -a "$OUT/real_shapes.txt"
    $W bench generate --model "$F" --prompt-tokens "$1" --decode-tokens "$2" 2>&1 | tail -6 | tee -a "$OUT/real_shapes.txt"
  done
  rm -f "$F"
done
echo "== done at $(($(date +%s) - t0)) s"
