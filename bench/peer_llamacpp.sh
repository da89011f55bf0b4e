#!/usr/bin/env bash
# The llama.cpp peer for decode and prefill: llama-bench (Vulkan backend, all layers on the GPU,
# flash attention on) on the same GGUF file wgml runs. Usage: bench/peer_llamacpp.sh LLAMA_BENCH
# MODEL NAME; prints "peer <NAME>_prefill <tok/s>" (512-token prompt) and "peer <NAME>_decode
# <tok/s>" (256 generated tokens, batch 1), each llama-bench's mean over its repetitions, then
# llama-bench's own table. llama.cpp is a measurement tool, never a dependency of wgml: the binary
# is built by bench/build_llamacpp.sh and carried to the GPU machine.
set -uo pipefail
B=$1 MODEL=$2 NAME=$3
json=$("$B" -m "$MODEL" -ngl 99 -fa 1 -p 512 -n 256 -r 5 -o json 2>/dev/null) || { echo "llama-bench failed on $MODEL"; exit 1; }
python3 - "$NAME" "$json" <<'PY'
import json, sys
name, rows = sys.argv[1], json.loads(sys.argv[2])
for r in rows:
    kind = "prefill" if r["n_prompt"] and not r["n_gen"] else "decode"
    print(f"peer {name}_{kind} {r['avg_ts']:.1f} tokens/s (llama-bench pp{r['n_prompt']} tg{r['n_gen']}, "
          f"+- {r.get('stddev_ts', 0):.1f}, {r.get('backends', '')}, build {r.get('build_commit', '')} "
          f"{r.get('build_number', '')}, {r.get('gpu_info', '')})")
PY
"$B" -m "$MODEL" -ngl 99 -fa 1 -p 512 -n 256 -r 3 2>&1 | tail -8
