#!/usr/bin/env bash
# A/B of the training step of two wgml versions on the GPU machine, in one call: BASE=<source
# tree of the other version> bash bench/train_ab.sh. Builds BASE into $BASE/build-gpu beside this
# tree's build-gpu (in parallel), writes each shape's random-weight file once (bench/real_shapes.py,
# types it writes itself: Q4_0, Q4_1, Q8_0), then times `wgml bench train` (LoRA r16 on all seven
# projections, batch 8 x 512, the step checked against the eval graph's loss) for A and B taking
# turns, ROUNDS times (default 2), so drift of the machine shows as the spread within one side.
# PROFILE=1 adds this tree's per-op profile of the first shape; PEER=1 the PyTorch peer at the
# first shape (bench/peer_train.py, PEFT under torch.compile, fp32). Carry .deps/wgpu, .gl and
# .whl; MODELS="shape:TYPE ..." (default "smollm2-135m:Q4_1 llama-3.2-1b:Q4_0"). Log: $OUT/train_ab.txt.
set -uo pipefail
OUT=${OUT:-out}
BASE=${BASE:?BASE=<source tree of the version to compare against>}
mkdir -p "$OUT"
R=$OUT/train_ab.txt
. bench/gpu_env.sh
gpu_env | tee "$R"
t0=$(date +%s)
stamp() { echo "-- $1 at $(($(date +%s) - t0)) s" | tee -a "$R"; }
[ -e "$BASE/.deps" ] || ln -s "$PWD/.deps" "$BASE/.deps"
gpu_build "$BASE" "$BASE/build-gpu" "$OUT/cmake_base.log" &
pa=$!
gpu_build . build-gpu "$OUT/cmake.log" || exit 1
wait $pa || exit 1
stamp "both built"
first=1
for mt in ${MODELS:-smollm2-135m:Q4_1 llama-3.2-1b:Q4_0}; do
  m=${mt%%:*} t=${mt#*:} F=/tmp/train_ab_$m.gguf
  real_shape_file "$m" "$t" "$F" "$OUT/quantize_$m.log" 2>&1 | tee -a "$R"
  stamp "$m $t written"
  for r in $(seq 1 "${ROUNDS:-2}"); do
    for side in a b; do
      W=./build-gpu/wgml
      [ $side = a ] && W=$BASE/build-gpu/wgml
      echo "== $m $t round $r $side ($W)" | tee -a "$R"
      $W bench train --model "$F" --batch 8 --seq-len 512 --rank 16 --steps "${STEPS:-10}" 2>&1 | tail -3 | tee -a "$R"
    done
  done
  if [ $first = 1 ] && [ "${PROFILE:-0}" = 1 ]; then
    echo "== $m $t profile (this tree)" | tee -a "$R"
    ./build-gpu/wgml bench train --model "$F" --batch 8 --seq-len 512 --rank 16 --steps 3 --profile 2>&1 | tail -50 | tee -a "$R"
  fi
  if [ $first = 1 ] && [ "${PEER:-0}" = 1 ]; then
    PYTHONUNBUFFERED=1 python3 bench/peer_train.py 8 512 16 20 compile "$m" 2>&1 | grep -v Warning | tail -2 | tee -a "$R"
  fi
  first=0
  rm -f "$F"
  stamp "$m done"
done
