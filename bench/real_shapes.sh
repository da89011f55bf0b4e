#!/usr/bin/env bash
# Decode and prefill of real model sizes on the GPU machine (issue 29's keys), wgml beside
# llama.cpp's Vulkan backend on the same files: writes GGUF files with random weights at real
# architectures' shapes (bench/real_shapes.py: SmolLM2-135M, Llama-3.2-1B, Qwen2.5-3B,
# Llama-3.1-8B; Q4_0, Q8_0, and Q4_K_M: llama.cpp's mix of Q4_K and Q6_K written directly from
# random K blocks, bench/real_shapes.py's kmix; other K mixes through llama.cpp's own quantizer from
# an F16 file), then times each:
#  - wgml: `wgml bench generate` (prefill of 512 and 2,048 tokens; decode at 512, 2,048 and 4,096
#    tokens of context), next to the WGSL copy's bandwidth (`wgml bench ops`), with the decode
#    step's weight bytes / time against it (the copy roofline);
#  - llama.cpp (when .llcpp/llama-bench.xz is carried, bench/build_llamacpp.sh): llama-bench with
#    every layer on the GPU and flash attention, prefill pp512 and pp2048 from an empty context,
#    decode tg64 at 512 and 4,096 tokens of context (-d);
#  - the GPU memory each used: the peak of nvidia-smi's memory.used, sampled every 0.1 s while
#    the command runs, less the idle reading before it.
# Run from the repository root on the GPU machine with .deps/wgpu, .gl (the Vulkan loader debs)
# and .whl (the gguf wheel) carried along, and .llcpp (llama-bench.xz, llama-quantize.xz) for the
# peer and the Q4_K_M files; logs go to $OUT. MODELS="name:TYPE ..." overrides the list.
# AB_NORM=1 also times the decode at 512 positions with the GEMV's norm prologue forced on and off
# ($WGML_QW_GEMV_NORM_BUDGET), for the rule in qw_gemv_norm_fits; AB_INT8=1 also times each
# pair with f32 activations ($WGML_QW_INT8=0: the prefill's f32 GEMM and decode's f32 GEMV; the
# default on a GPU is the integer dot product, in decode for the GEMVs of the gemv_i8x rule); PROFILE=1 keeps the decode step's and the prefill's profiles at 512 positions
# (`bench generate --profile`) in $OUT. PD="512 128,2048 32" overrides the (prompt, decode)
# pairs timed. AB_FLUSH=1 also runs each pair with WGML_UPLOAD_FLUSH=0 (memory A/B).
# AB_ENV="VAR=VALUE ..." also times each pair once per setting, with that variable set (any switch:
# WGML_QW_GEMV_I8=1, every GEMV in the integer form, say; WGML_QW_KSCALES=0, the K types' scales
# as f32 pairs), with wgml's memory line; a setting of several variables joins them with commas
# (WGML_QW_GEMV_XQ=1,WGML_QW_GEMV_I8=1).
# WGML_MEMORY_TRACE=64M (say) in the environment lists wgml's large buffers in the logs.
set -uo pipefail
OUT=${OUT:-out}
. bench/gpu_env.sh
gpu_start
R=$OUT/real_shapes.txt
$W info | tee "$OUT/info.txt"
$W bench ops 2>&1 | tee "$OUT/ops.txt"
cat .llcpp/VERSION 2>/dev/null | tee -a "$R"

# peak GPU memory (MiB) over the idle reading while "$@" runs; the command's output goes on
mem_peak() {
  local base f=/tmp/mem_samples.$$
  base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
  (while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; sleep 0.1; done) >"$f" &
  local s=$!
  "$@"
  local rc=$?
  kill $s 2>/dev/null; wait $s 2>/dev/null
  echo "gpu memory: peak $(( $(sort -n "$f" | tail -1) - base )) MiB over idle ($*)"
  rm -f "$f"
  return $rc
}

# the weight bytes a decode step reads: every block matrix and the head (the token embedding
# when tied; the embedding itself is read one row per token)
weight_bytes() {
  python3 - "$1" <<'PY'
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
names = {t.name: int(t.n_bytes) for t in r.tensors}
head = names.get("output.weight", names["token_embd.weight"])
blocks = sum(b for n, b in names.items() if n.startswith("blk."))
kinds = sorted({t.tensor_type.name for t in r.tensors if t.name.startswith("blk.")})
print(f"weights read per decode step: {(blocks + head) / 1e9:.3f} GB (blocks {blocks / 1e9:.3f}, head "
      f"{head / 1e9:.3f}; block kinds {' '.join(kinds)})")
PY
}

peer() { # llama-bench on $1: prefill from an empty context, decode at 512 and 4,096 positions
  local f=$1 j1 j2
  [ -x /tmp/llama-bench ] || return 0
  /tmp/llama-bench -m "$f" -ngl 99 -fa 1 -p 512 -n 32 -r 2 >/dev/null 2>&1 # the clock ramps under load
  j1=$(mem_peak /tmp/llama-bench -m "$f" -ngl 99 -fa 1 -p 512,2048 -n 0 -r 5 -o json 2>/dev/null) || { echo "llama-bench failed"; return 1; }
  j2=$(/tmp/llama-bench -m "$f" -ngl 99 -fa 1 -p 0 -n 64 -d 512,4096 -r 3 -o json 2>/dev/null) || { echo "llama-bench failed"; return 1; }
  python3 - "$j1" "$j2" <<'PY'
import json, sys
text = sys.argv[1]
mem = text[text.rindex("gpu memory:"):].strip() if "gpu memory:" in text else ""
rows = json.loads(text[:text.rindex("gpu memory:")] if mem else text) + json.loads(sys.argv[2])
for r in rows:
    kind = f"prefill {r['n_prompt']}" if r["n_prompt"] else f"decode at {r.get('n_depth', 0)}"
    print(f"peer llama.cpp {kind}: {r['avg_ts']:.1f} tokens/s (llama-bench pp{r['n_prompt']} tg{r['n_gen']} "
          f"d{r.get('n_depth', 0)}, +- {r.get('stddev_ts', 0):.1f}, {r.get('backends', '')}, build "
          f"{r.get('build_commit', '')} {r.get('build_number', '')})")
print(f"peer llama.cpp {mem}")
PY
}

MODELS=${MODELS:-"llama-3.2-1b:Q4_0 llama-3.2-1b:Q4_K_M llama-3.1-8b:Q4_0 llama-3.1-8b:Q4_K_M"}
F=/tmp/real_shapes.gguf
for mt in $MODELS; do
  m=${mt%%:*} t=${mt#*:}
  echo "== $m $t at $(($(date +%s) - t0)) s" | tee -a "$R"
  real_shape_file "$m" "$t" "$F" "$OUT/quantize_$m.log" 2>&1 | tee -a "$R"
  [ "${PIPESTATUS[0]}" = 0 ] || continue
  weight_bytes "$F" | tee -a "$R"
  IFS=, read -ra pds <<<"${PD:-512 128,2048 32,4096 64}"
  for pd in "${pds[@]}"; do
    set -- $pd
    echo "-- $m $t prompt $1 decode $2" | tee -a "$R"
    mem_peak $W bench generate --model "$F" --prompt-tokens "$1" --decode-tokens "$2" 2>&1 | tail -10 | tee -a "$R"
    if [ "${PROFILE:-0}" = 1 ] && [ "$1" = 512 ]; then # each dispatch of the decode step timed alone
      $W bench generate --model "$F" --prompt-tokens "$1" --decode-tokens 16 --profile >"$OUT/profile_${m}_$t.txt" 2>&1
    fi
    if [ "${AB_FLUSH:-0}" = 1 ]; then # the weights' uploads staged all at once, as before 6ef66f8
      echo "-- $m $t prompt $1, WGML_UPLOAD_FLUSH=0" | tee -a "$R"
      WGML_UPLOAD_FLUSH=0 mem_peak $W bench generate --model "$F" --prompt-tokens "$1" --decode-tokens "$2" 2>&1 |
        grep -E "^prefill |^decode |device memory|gpu memory" | tee -a "$R"
    fi
    ab_env=${AB_ENV:-}
    [ "${AB_INT8:-0}" = 1 ] && ab_env="WGML_QW_INT8=0 $ab_env" # f32 activations
    for e in $ab_env; do
      echo "-- $m $t prompt $1 decode $2, $e" | tee -a "$R"
      IFS=, read -r -a vars <<<"$e"
      env "${vars[@]}" $W bench generate --model "$F" --prompt-tokens "$1" --decode-tokens "$2" 2>&1 |
        grep -E "^prefill |^decode |^device memory" | tee -a "$R"
    done
    if [ "${AB_NORM:-0}" = 1 ] && [ "$1" = 512 ]; then # the prologue does not depend on the context
      for b in 0 1000000000000; do
        echo "-- $m $t prompt $1 decode $2, WGML_QW_GEMV_NORM_BUDGET=$b" | tee -a "$R"
        WGML_QW_GEMV_NORM_BUDGET=$b $W bench generate --model "$F" --prompt-tokens "$1" --decode-tokens "$2" 2>&1 |
          grep -E "^decode |dispatches" | tee -a "$R"
      done
    fi
  done
  peer "$F" 2>&1 | tee -a "$R"
  rm -f "$F"
done
echo "== done at $(($(date +%s) - t0)) s"
