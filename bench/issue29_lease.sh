#!/usr/bin/env bash
# Issue 29's model keys in one lease of the GPU machine, in three calls of under 10 minutes each
# (the warm machine keeps build-gpu, .llcpp and /tmp between calls that follow each other
# within its idle time): bash bench/issue29_lease.sh 1|2|3, from the repository root, with
# .deps/wgpu, .gl and .whl carried (and .llsrc for call 1: `bench/build_llamacpp.sh --pack`).
#   1: wgml's build beside llama.cpp's (`build_llamacpp.sh --unpacked`, about 4 minutes); the
#      4-bit GEMV by kind (`wgml bench qw --gemv --type T`, every kind during the peer's build,
#      Q4_0 and Q4_K again after it; Q4_K also at 4 rows a thread, `WGML_QW_GEMV=32,4,64,1`: the
#      offset kinds' f32 GEMV at 1.57x Q4_0's time, bench/NOTES.md 2026-12-05); then Llama-3.2-1B
#      Q4_K_M and the SmolLM2-135M shape in Q4_1 (bench/real_shapes.sh, AB_INT8=1);
#   2: Llama-3.1-8B Q4_K_M (bench/real_shapes.sh, AB_INT8=1);
#   3: the training step at SmolLM2's shape, then at Llama-3.2-1B's (bench/train_shapes.sh).
# AB_ENV="VAR=VALUE ..." times calls 1 and 2 once more per setting (the GEMV kinds and the models'
# pairs: bench/real_shapes.sh's AB_ENV) in place of the f32-activation pass (AB_INT8=1 without it).
# Each call writes one log, $OUT/issue29_<call>.log (the device tool brings back only a few
# files a call); `python3 bench/real_table.py` on the three logs prints the table.
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
CALL=${1:?usage: bench/issue29_lease.sh 1|2|3}
LOG=$OUT/issue29_$CALL.log
S=$(date +%s)
stamp() { echo "-- $1 at $(($(date +%s) - S)) s"; }
ab_int8=1
[ -n "${AB_ENV:-}" ] && ab_int8=0
scratch=/tmp/issue29_out # the scripts' own files stay here; their output goes to the log
mkdir -p "$scratch"
{
  case $CALL in
  1)
    . bench/gpu_env.sh
    OUT=$scratch gpu_env
    (bash bench/build_llamacpp.sh --unpacked >"$scratch/llbuild.log" 2>&1; echo "llama.cpp build rc=$?" >>"$scratch/llbuild.log") &
    peer_build=$!
    gpu_build . build-gpu "$scratch/cmake.log" || exit 1
    stamp "wgml built"
    ./build-gpu/wgml info
    kinds() { # round, then the types
      local r=$1
      shift
      for t in "$@"; do
        echo "== GEMV round $r, $t"; ./build-gpu/wgml bench qw --gemv --type $t
        for e in ${AB_ENV:-}; do echo "== GEMV round $r, $t, $e"; env "$e" ./build-gpu/wgml bench qw --gemv --type $t; done
      done
      echo "== GEMV round $r, Q4_K, WGML_QW_GEMV=32,4,64,1"
      WGML_QW_GEMV=32,4,64,1 ./build-gpu/wgml bench qw --gemv --type Q4_K
    }
    kinds 1 Q4_0 Q4_1 Q4_K Q6_K Q8_0
    wait $peer_build
    tail -2 "$scratch/llbuild.log"
    stamp "llama.cpp built"
    kinds 2 Q4_0 Q4_K # the second round short: the call's 10 minutes
    OUT=$scratch AB_INT8=$ab_int8 MODELS="llama-3.2-1b:Q4_K_M smollm2-135m:Q4_1" bash bench/real_shapes.sh
    ;;
  2) OUT=$scratch AB_INT8=$ab_int8 MODELS="llama-3.1-8b:Q4_K_M" bash bench/real_shapes.sh ;;
  3) OUT=$scratch MODELS="smollm2-135m:Q4_1 llama-3.2-1b:Q4_K_M" bash bench/train_shapes.sh ;;
  *) echo "call $CALL: 1, 2 or 3" ;;
  esac
  stamp "call $CALL done"
} >"$LOG" 2>&1
tail -4 "$LOG"
