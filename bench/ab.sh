#!/usr/bin/env bash
# A/B of two wgml builds on the GPU machine, in one run: BASE=<source tree of the other version>
# bash bench/ab.sh. Builds BASE into $BASE/build-gpu and this tree into build-gpu, then runs
# bench/wgml_keys.sh for each, alternating A B A B (ROUNDS=2), so drift of the machine shows as
# the spread within one side. Prints bench/compare.py's table for every run (peers "not run":
# only wgml's columns are compared). Carry .deps/wgpu and .gl as for bench/h200.sh; MODEL adds
# decode and train_step. Logs go to $OUT/a1, $OUT/b1, ...
set -uo pipefail
OUT=${OUT:-out}
BASE=${BASE:?BASE=<source tree of the version to compare against>}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
. bench/gpu_env.sh
gpu_env
build() { # source dir, build dir
  [ -e "$1/.deps" ] || ln -s "$PWD/.deps" "$1/.deps"
  gpu_build "$1" "$2" "$OUT/cmake_$(basename "$1").log" || exit 1
}
build "$BASE" "$BASE/build-gpu"
build . build-gpu
./build-gpu/wgml info | tee "$OUT/info.txt"
for r in $(seq 1 "$ROUNDS"); do
  bash bench/wgml_keys.sh "$BASE/build-gpu/wgml" "$OUT/a$r" >"$OUT/a$r.log" 2>&1
  bash bench/wgml_keys.sh ./build-gpu/wgml "$OUT/b$r" >"$OUT/b$r.log" 2>&1
done
for r in $(seq 1 "$ROUNDS"); do
  for side in a b; do
    echo "== $side$r ($([ $side = a ] && echo "BASE $BASE" || echo "this tree")) =="
    python3 bench/compare.py "$OUT/$side$r" | awk -F'  +' 'NR == 1 || $3 != "not run" { print $1 "  " $3 "  " $5 }'
    grep -E '^[0-9]+x[0-9]+x[0-9]+ ' "$OUT/$side$r/wgml_matmul.txt"
  done
done | tee "$OUT/ab.txt"
# the device tool brings back a few files: the per-run folders travel as one archive
tar czf "$OUT/ab_runs.tgz" -C "$OUT" $(cd "$OUT" && ls -d a[0-9]* b[0-9]* info.txt) && rm -rf "$OUT"/a[0-9]* "$OUT"/b[0-9]*
