#!/usr/bin/env bash
# Builds the libFuzzer targets under fuzz/ (clang, ASan + UBSan, into build-fuzz/) and runs each
# for the given number of seconds (default 60), one after another (one process at a time).
#   bash scripts/fuzz.sh [seconds-per-target] [target ...]     targets: gguf tokenizer dequant
#                                                               safetensors checkpoint data pte npy
#                                                               adapter
# Each target starts from its seed corpus fuzz/corpus/<target>/ plus the inputs found by earlier
# runs (build-fuzz/corpus/<target>/, where new inputs go). A crashing input is written to
# build-fuzz/crashes/<target>/; once the bug is fixed, copy it to fuzz/regressions/<target>/,
# where the plain build's CTest fuzz_regress_<target> replays it. Logs: build-fuzz/logs/.
# WGML_SKIP_APT=1 skips installing clang.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf tokenizer dequant safetensors checkpoint data pte npy adapter)
[ "${WGML_SKIP_APT:-0}" = 1 ] || bash scripts/setup.sh --fuzz-tools
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWGML_FUZZ=ON -DWGML_BUILD_TESTS=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}")
declare -A maxlen=([gguf]=16384 [tokenizer]=2048 [dequant]=4096 [safetensors]=8192 [checkpoint]=8192 [data]=4096 [pte]=8192 [adapter]=16384)
status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/crashes/$t" build-fuzz/logs
  echo "== fuzz_$t for ${secs}s =="
  set +e
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "build-fuzz/fuzz/fuzz_$t" "build-fuzz/corpus/$t" "fuzz/corpus/$t" \
    -max_total_time="$secs" -max_len="${maxlen[$t]:-4096}" -timeout=20 -rss_limit_mb=2048 \
    -artifact_prefix="build-fuzz/crashes/$t/" -print_final_stats=1 >"build-fuzz/logs/$t.log" 2>&1
  rc=$?
  set -e
  grep -E '^(stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' "build-fuzz/logs/$t.log" || true
  tail -n 3 "build-fuzz/logs/$t.log" | grep -E 'Done|cov:' || true
  if [ $rc != 0 ]; then
    echo "fuzz_$t: FAILED (exit $rc); see build-fuzz/logs/$t.log and build-fuzz/crashes/$t/"
    status=1
  else
    echo "fuzz_$t: no crash"
  fi
done
exit $status
