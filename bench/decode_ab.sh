#!/usr/bin/env bash
# Decode A/B of wgml's settings on real model shapes, the settings taking turns in each round so
# that the machine's drift shows as the spread within one setting: on the GPU machine, from the
# repository root, with .deps/wgpu, .gl and .whl carried (and .llcpp for the peer):
#   SETTINGS="base xq2:WGML_QW_GEMV_XQ=2 xq2_i8:WGML_QW_GEMV_XQ=2,WGML_QW_GEMV_I8=1" \
#   MODELS="llama-3.2-1b:Q4_K_M llama-3.1-8b:Q4_K_M" ROUNDS=2 PROFILE="base xq2" bash bench/decode_ab.sh
# Per model (bench/real_shapes.py's random-weight file, written here): ROUNDS rounds of `wgml bench
# generate --prompt-tokens P --decode-tokens D` (PD="512 128"), one run per setting a round
# (LABEL:VAR=VALUE,VAR=VALUE; "base" alone: none set); then each setting named in PROFILE once
# more with `--profile` and $WGML_PROFILE_SHAPES=1 (16 decode steps, each dispatch timed alone:
# the step's kernels by shape, into $OUT/profile_<model>_<label>.txt); then, when
# .llcpp/llama-bench.xz is carried and PEER is not 0, llama.cpp's decode on the same file
# (llama-bench -fa 1 -n 64 -d <P>, after a warm-up run).
# The rounds' prefill/decode lines go to $OUT/decode_ab.txt.
set -uo pipefail
OUT=${OUT:-out}
. bench/gpu_env.sh
gpu_start
$W info >"$OUT/info.txt" 2>&1
R=$OUT/decode_ab.txt
F=/tmp/decode_ab.gguf
set -- ${PD:-512 128}
P=$1 D=$2
stamp() { echo "== $1 at $(($(date +%s) - t0)) s" | tee -a "$R"; }
run() { # VAR=VALUE,... (or base) DECODE_TOKENS [ARGS]: one bench generate with the setting's variables
  local vars=()
  [ "$1" != base ] && IFS=, read -r -a vars <<<"$1"
  env "${vars[@]}" $W bench generate --model $F --prompt-tokens $P --decode-tokens "$2" "${@:3}"
}
for mt in ${MODELS:-llama-3.2-1b:Q4_K_M}; do
  m=${mt%%:*} t=${mt#*:}
  real_shape_file "$m" "$t" "$F" "$OUT/quantize_$m.log" >"$OUT/gen_$m.log" 2>&1 || { stamp "$m $t: no file"; continue; }
  stamp "$m $t written"
  for r in $(seq 1 "${ROUNDS:-2}"); do
    for s in ${SETTINGS:-base}; do
      l=${s%%:*} v=${s#*:}
      echo "-- $m $t round $r, $l ($v)" | tee -a "$R"
      run "$v" $D 2>&1 | grep -E "^prefill |^decode |dispatches" | tee -a "$R"
    done
  done
  for s in ${SETTINGS:-base}; do
    l=${s%%:*} v=${s#*:}
    case " ${PROFILE:-} " in *" $l "*) ;; *) continue ;; esac
    pv=WGML_PROFILE_SHAPES=1
    [ "$v" != base ] && pv="$v,$pv"
    run "$pv" 16 --profile >"$OUT/profile_${m}_$l.txt" 2>&1
  done
  stamp "$m $t timed"
  if [ -x /tmp/llama-bench ] && [ "${PEER:-1}" != 0 ]; then
    /tmp/llama-bench -m $F -ngl 99 -fa 1 -p $P -n 32 -r 1 >/dev/null 2>&1 # the clock ramps under load
    /tmp/llama-bench -m $F -ngl 99 -fa 1 -p $P -n 64 -d $P -r 3 2>&1 | grep -E "\| llama|build" | tee -a "$R"
  fi
  rm -f $F
done
stamp done
