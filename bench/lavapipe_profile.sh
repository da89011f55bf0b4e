#!/usr/bin/env bash
# Where a wgml command's time goes on lavapipe (a machine without a GPU): a perf profile of the
# kernels' compiled code, by kind of instruction (bench/jit_mix.py says what the kinds are).
#
#   bench/lavapipe_profile.sh OUT_DIR COMMAND [ARGS...]
#   e.g. bench/lavapipe_profile.sh /tmp/prof build/wgml bench qw --train --type Q4_1
#
# The command runs once to fill a shader cache of its own (OUT_DIR/shader-cache), so that the
# profiled run compiles nothing; then under perf, inside gdb, which stops it at wgml_ctx_destroy
# and writes a core dump while the JIT code is still mapped (lavapipe's LLVM writes no perf
# map, so the code is read back from the core). Leaves OUT_DIR/jit-samples.txt (count and
# address of each sampled instruction), the annotated disassembly of the hot code
# (OUT_DIR/r*.annotated) and prints the table. The core (about 1 GB) is removed at the end.
# Needs perf, gdb and objdump (Debian: linux-perf, gdb, binutils; installed when missing).
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,14p "$0"; exit 2; }
out=$(realpath -m "$1"); shift
here=$(cd "$(dirname "$0")" && pwd)
need=()
command -v perf >/dev/null || need+=(linux-perf)
command -v gdb >/dev/null || need+=(gdb)
command -v objdump >/dev/null || need+=(binutils)
if [ ${#need[@]} -gt 0 ]; then
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get install -y -q --no-install-recommends "${need[@]}"
fi
bin=$(command -v "$1")
mkdir -p "$out"
export MESA_SHADER_CACHE_DIR=$out/shader-cache
"$@" >"$out/warm-up.txt" 2>&1 || { tail -5 "$out/warm-up.txt"; exit 1; }
perf record -F 1999 -o "$out/perf.data" -- gdb -batch -ex 'set disable-randomization on' \
  -ex 'break wgml_ctx_destroy' -ex run -ex "gcore $out/core" -ex kill --args "$@" >"$out/gdb.txt" 2>&1
# the JIT code's samples, whatever thread ran them: perf names their map perf-PID.map (there is
# none) or [JIT]; gdb, profiled beside the command, has no JIT code
perf script -i "$out/perf.data" -F ip,dso 2>/dev/null |
  awk '$2 ~ /perf-[0-9]+\.map/ || $2 ~ /JIT/ {print $1}' | sort | uniq -c >"$out/jit-samples.txt"
python3 "$here/jit_mix.py" "$out/jit-samples.txt" "$out/core" "$bin" "$out"
rm -f "$out/core"
