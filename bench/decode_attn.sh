#!/usr/bin/env bash
# Decode attention at long context on the GPU machine: the decode step of real model shapes
# (bench/real_shapes.py's random-weight files) at each (prompt, decode) pair of PD, once per
# setting of VARIANTS (environment assignments, "-" for none: WGML_DECODE_KPT=4, say, the keys a
# thread of attn_decode.wgsl, or WGML_KV=f16, the cache's f16 form; several joined by "+") and, with BASE=<source tree>, for that tree's build too (first in
# each round, ROUNDS rounds); then the decode step's profile at the first pair for the settings
# of PROFILE (the attention kernels' lines); and llama.cpp's decode at the same depths when
# .llcpp is carried. Run from the repository root with .deps/wgpu, .gl and .whl carried (and BASE's
# tree, which needs src, include, tools, cmake, fuzz and CMakeLists.txt); MODELS="name:TYPE ...".
# Writes $OUT/decode_attn.txt as it goes (a call cut off at its limit keeps what it finished).
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
R=$OUT/decode_attn.txt
. bench/gpu_env.sh
gpu_env | tee -a "$R"
t0=$(date +%s)
stamp() { echo "-- $1 at $(($(date +%s) - t0)) s" | tee -a "$R"; }
if [ -n "${BASE:-}" ]; then
  [ -e "$BASE/.deps" ] || ln -s "$PWD/.deps" "$BASE/.deps"
  gpu_build "$BASE" "$BASE/build-gpu" "$OUT/cmake_base.log" &
  base_build=$!
fi
gpu_wgml "$OUT/cmake.log" || exit 1
[ -n "${BASE:-}" ] && { wait $base_build || exit 1; }
stamp built
ev() { local w=${1/#-/X=}; echo "${w//+/ }"; } # a VARIANTS word as env's assignments
gen() { # label, wgml, prompt, decode, then env settings
  local label=$1 w=$2 p=$3 d=$4
  shift 4
  echo "-- $label, prompt $p decode $d" | tee -a "$R"
  env "$@" "$w" bench generate --model "$F" --prompt-tokens "$p" --decode-tokens "$d" 2>&1 |
    grep -E "^decode |^decode-step |^prefill |^KV cache|^device memory" | tee -a "$R"
}
for mt in ${MODELS:-llama-3.1-8b:Q4_K_M}; do
  m=${mt%%:*} t=${mt#*:}
  F=/tmp/decode_attn_${m}_$t.gguf # kept for the next call on a warm machine
  [ -f "$F.done" ] || { real_shape_file "$m" "$t" "$F" "$OUT/quantize.log" && touch "$F.done"; } || continue
  stamp "$mt written"
  IFS=, read -ra pds <<<"${PD:-4096 64,512 128}"
  for pd in "${pds[@]}"; do
    set -- $pd
    for r in $(seq 1 "${ROUNDS:-1}"); do
      [ -n "${BASE:-}" ] && gen "$mt base (round $r)" "$BASE/build-gpu/wgml" "$1" "$2" X=
      for v in ${VARIANTS:--}; do gen "$mt $v (round $r)" ./build-gpu/wgml "$1" "$2" $(ev "$v"); done
    done
    if [ -x /tmp/llama-bench ]; then
      /tmp/llama-bench -m "$F" -ngl 99 -fa 1 -p 0 -n "$2" -d "$1" -r 3 2>/dev/null | grep -E "tg[0-9]" |
        sed "s/^/peer llama.cpp /" | tee -a "$R"
    fi
    stamp "$mt $pd done"
  done
  set -- ${pds[0]}
  for v in ${PROFILE:-}; do
    echo "-- $mt profile $v, prompt $1" | tee -a "$R"
    env $(ev "$v") ./build-gpu/wgml bench generate --model "$F" --prompt-tokens "$1" --decode-tokens 16 --profile 2>&1 |
      awk '/^profile decode step/ { on = 1 } /^profile prefill/ { on = 0 } on' |
      awk 'NR <= 8 || /attn|combine/' | tee -a "$R"
  done
done
stamp done
