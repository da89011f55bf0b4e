#!/usr/bin/env bash
# The training step of several wgml versions on the GPU machine, in one call: TREES="<source
# tree> ... ." bash bench/train_ab.sh (default "$BASE .": BASE=<the other version's tree>, then
# this one). Builds each tree into its build-gpu (in parallel), writes each shape's random-weight
# file once (bench/real_shapes.py, types it writes itself: Q4_0, Q4_1, Q8_0), then times `wgml
# bench train` (LoRA r16 on all seven projections, batch 8 x 512, the step checked against the
# eval graph's loss) for the trees taking turns, ROUNDS times (default 2), so drift of the
# machine shows as the spread within one tree. An entry TREE:VAR=VALUE runs that tree's build with
# the variable set (e.g. TREES=".:WGML_LORA_SHARED=0 .:WGML_LORA_SHARED=1"). PROFILE=1 adds each tree's per-op profile of the
# first shape ($OUT/profile_<n>.txt, the top of it in the log); PEER=1 the PyTorch peer at the
# first shape (bench/peer_train.py, PEFT under torch.compile, fp32). Carry .deps/wgpu, .gl and
# .whl; MODELS="shape:TYPE ..." (default "smollm2-135m:Q4_1 llama-3.2-1b:Q4_0"). Log: $OUT/train_ab.txt.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
R=$OUT/train_ab.txt
. bench/gpu_env.sh
gpu_env | tee "$R"
t0=$(date +%s)
stamp() { echo "-- $1 at $(($(date +%s) - t0)) s" | tee -a "$R"; }
TREES=${TREES:-${BASE:?set TREES or BASE} .}
pids=()
for t in $(for e in $TREES; do echo "${e%%:*}"; done | sort -u); do
  [ "$t" = . ] || [ -e "$t/.deps" ] || ln -s "$PWD/.deps" "$t/.deps"
  gpu_build "$t" "$t/build-gpu" "$OUT/cmake_$(basename "$(cd "$t" && pwd)").log" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || exit 1; done
side() { # an entry of TREES, then the arguments of wgml
  local t=${1%%:*} e=
  [ "$t" = "$1" ] || e=${1#*:}
  shift
  env $e "$t/build-gpu/wgml" "$@"
}
stamp "built: $TREES"
first=1
for mt in ${MODELS:-smollm2-135m:Q4_1 llama-3.2-1b:Q4_0}; do
  m=${mt%%:*} t=${mt#*:} F=/tmp/train_ab_$m.gguf
  real_shape_file "$m" "$t" "$F" "$OUT/quantize_$m.log" 2>&1 | tee -a "$R"
  stamp "$m $t written"
  for r in $(seq 1 "${ROUNDS:-2}"); do
    for t in $TREES; do
      echo "== $m $t round $r" | tee -a "$R"
      side "$t" bench train --model "$F" --batch 8 --seq-len 512 --rank 16 --steps "${STEPS:-10}" 2>&1 | tail -3 | tee -a "$R"
    done
  done
  if [ $first = 1 ] && [ "${PROFILE:-0}" = 1 ]; then
    i=0
    for t in $TREES; do
      i=$((i + 1))
      echo "== $m $t profile" | tee -a "$R"
      side "$t" bench train --model "$F" --batch 8 --seq-len 512 --rank 16 --steps 3 --profile >"$OUT/profile_$i.txt" 2>&1
      grep -A 45 "^profile train step" "$OUT/profile_$i.txt" | tee -a "$R"
    done
  fi
  if [ $first = 1 ] && [ "${PEER:-0}" = 1 ]; then
    PYTHONUNBUFFERED=1 python3 bench/peer_train.py 8 512 16 20 compile "$m" 2>&1 | grep -v Warning | tail -2 | tee -a "$R"
  fi
  first=0
  rm -f "$F"
  stamp "$m done"
done
