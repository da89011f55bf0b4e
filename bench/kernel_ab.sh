#!/usr/bin/env bash
# A/B of two wgml builds' kernels and models on the GPU machine, in one call: BASE=<source tree
# of the other version> bash bench/kernel_ab.sh. Builds BASE into $BASE/build-gpu and this tree
# into build-gpu side by side, then, ROUNDS times (2), alternating base and this tree:
#  - each command of CMDS (';'-separated arguments of `wgml`, each with its own leading VAR=VALUE
#    settings if any; default the 4-bit GEMV by kind and the prefill GEMMs; ENV="VAR=VALUE ..."
#    applies to all);
#  - for each MODELS entry ("name:TYPE", bench/real_shapes.py's random-weight files, written once
#    per model), `wgml bench generate` at each (prompt, decode) pair of PD ("512 128"), once as
#    the default and once per MENV setting (say WGML_QW_INT8=0; "A=1+B=2" sets both in one run).
# Run from the repository root with .deps/wgpu, .gl and .whl carried (bench/gpu_env.sh); the log
# is $OUT/kernel_ab.log, each line of a run tagged with its side ("base" or "this").
set -uo pipefail
OUT=${OUT:-out}
BASE=${BASE:?BASE=<source tree of the version to compare against>}
ROUNDS=${ROUNDS:-2}
CMDS=${CMDS:-"bench qw --gemv;bench qw --gemv --type Q4_K;bench qw --gemv --type Q6_K;bench qw --gemv --type Q8_0;bench qw --prefill;bench qw --prefill --type Q4_K"}
mkdir -p "$OUT"
LOG=$OUT/kernel_ab.log
. bench/gpu_env.sh
t0=$(date +%s)
stamp() { echo "-- $1 at $(($(date +%s) - t0)) s"; }
{
  gpu_env
  [ -e "$BASE/.deps" ] || ln -s "$PWD/.deps" "$BASE/.deps"
  gpu_build "$BASE" "$BASE/build-gpu" "$OUT/cmake_base.log" &
  b=$!
  gpu_build . build-gpu "$OUT/cmake_this.log" || exit 1
  wait $b || exit 1
  stamp "built"
  ./build-gpu/wgml info
  side() { [ "$1" = "$BASE/build-gpu/wgml" ] && echo base || echo this; }
  # a command's leading VAR=VALUE words (its own settings) and the rest (wgml's arguments)
  cmd_env() { local w; for w in $1; do [[ $w =~ ^[A-Z_0-9]+= ]] || break; echo "$w"; done; }
  cmd_args() { local w a=0; for w in $1; do [[ $a = 0 && $w =~ ^[A-Z_0-9]+= ]] && continue; a=1; echo "$w"; done; }
  IFS=';' read -ra cmds <<<"$CMDS"
  for r in $(seq 1 "$ROUNDS"); do
    for c in "${cmds[@]}"; do
      for w in "$BASE/build-gpu/wgml" ./build-gpu/wgml; do
        echo "== round $r, $(side "$w"): wgml $c ${ENV:-}"
        env ${ENV:-} $(cmd_env "$c") $w $(cmd_args "$c") 2>&1 | sed "s/^/$(side "$w") | /"
      done
    done
    stamp "round $r of the commands"
  done
  F=/tmp/kernel_ab.gguf
  IFS=, read -ra pds <<<"${PD:-512 128}"
  for mt in ${MODELS:-}; do
    m=${mt%%:*} t=${mt#*:}
    python3 bench/real_shapes.py "$m" "$t" "$F" || continue
    stamp "$m $t written"
    for r in $(seq 1 "$ROUNDS"); do
      for pd in "${pds[@]}"; do
        set -- $pd
        for e in "" ${MENV:-}; do
          for w in "$BASE/build-gpu/wgml" ./build-gpu/wgml; do
            echo "== round $r, $(side "$w"): $m $t prompt $1 decode $2 ${e:-default}"
            env ${e//+/ } $w bench generate --model "$F" --prompt-tokens "$1" --decode-tokens "$2" 2>&1 |
              grep -E "^prefill |^decode |dispatches|check" | sed "s/^/$(side "$w") | /"
          done
        done
      done
    done
    rm -f "$F"
    stamp "$m $t done"
  done
  stamp "all done"
} >"$LOG" 2>&1
tail -3 "$LOG"
