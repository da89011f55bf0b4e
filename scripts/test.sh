#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test on the default
# adapter (lavapipe on a machine without a GPU): the kernels as they ship (trusted: no runtime
# checks) and with naga's runtime checks, the Python and ExecuTorch tests; then the tests built
# with AddressSanitizer + UndefinedBehaviorSanitizer (leak detection on).
# WGML_TEST_SANITIZE=0 skips the sanitizer pass; WGML_TEST_JOBS sets the tests run at once
# (default: the machine's cores).
#
# On lavapipe almost all of a cold test's time is the driver compiling kernels (at a pipeline's
# first dispatch), so the run is arranged around that:
#  - the driver's shader cache lives in this checkout (build/shader-cache), so a fresh clone
#    starts cold whatever the home folder holds, and the sanitizer pass, which runs the same
#    kernels, finds them compiled;
#  - kernels run with lavapipe's 128-bit vectors (LP_NATIVE_VECTOR_WIDTH=128: subgroups of 4),
#    which compile about twice as fast as its default 256-bit ones (test_attn_decode's part
#    two with checked kernels: 57 s against 130 s). The width is invisible to a kernel but for
#    its subgroup size, and only the 4-bit GEMV uses subgroups, so its tests (test_qw_gemv*,
#    test_qw_multi*) run their checked kernels at 256 bits (subgroups of 8): both sizes are
#    exercised. Each width has its own cache folder: Mesa's cache key does not include the
#    width.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh build
# the Python package into the venv as a user installs it (scikit-build-core builds libwgml.so
# and the CLI into it, in python/build/; --no-build-isolation: the venv's pinned backend, no
# download); the Python tests themselves run from python/ over build/libwgml.so
.deps/venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation ./python
jobs=${WGML_TEST_JOBS:-$(nproc)}
cache=$PWD/build/shader-cache
# the tests' temporary files go to a folder of this run, which must be empty at the end: a test
# that leaves files behind fails the run (a full /tmp once stopped CI's set-up)
# (PyTorch's compile cache, which the Python tests' imports create empty there, goes to build/)
TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/wgml-tests.XXXXXX")
export TMPDIR TORCHINDUCTOR_CACHE_DIR=$PWD/build/torchinductor
trap 'rm -rf "$TMPDIR"' EXIT # also when a build step stops the run
t0=$SECONDS
status=0
echo "== tests: trusted kernels, Python and ExecuTorch (plain build) =="
LP_NATIVE_VECTOR_WIDTH=128 MESA_SHADER_CACHE_DIR=$cache/w128 \
  ctest --test-dir build --output-on-failure -j"$jobs" -E '_checked$' || status=1
echo "== tests: checked kernels (plain build) =="
LP_NATIVE_VECTOR_WIDTH=128 MESA_SHADER_CACHE_DIR=$cache/w128 \
  ctest --test-dir build --output-on-failure -j"$jobs" -R '_checked$' -E '^test_qw_(gemv|multi)' || status=1
echo "== tests: the subgroup kernels' checked tests at 256 bits (subgroups of 8) =="
MESA_SHADER_CACHE_DIR=$cache/w256 ctest --test-dir build --output-on-failure -j"$jobs" \
  -R '^test_qw_(gemv|multi).*_checked$' || status=1
echo "== plain build: $((SECONDS - t0)) s =="
echo "== tests in the browser: wasm32 build in headless Chromium (WebGPU on Dawn) =="
t2=$SECONDS
bash scripts/build-web.sh build-web
# (the native side of the browser's model tests compiles the kernels the trusted tests did)
LP_NATIVE_VECTOR_WIDTH=128 MESA_SHADER_CACHE_DIR=$cache/w128 \
  ctest --test-dir build-web --output-on-failure -j"$jobs" || status=1
echo "== browser: $((SECONDS - t2)) s =="
if [ "${WGML_TEST_SANITIZE:-1}" = 1 ]; then
  echo "== tests (AddressSanitizer + UndefinedBehaviorSanitizer): trusted kernels =="
  t1=$SECONDS
  bash scripts/build.sh build-asan -DWGML_SANITIZE=ON
  # the host code is the same for checked kernels, and the Python tests load the plain library
  LP_NATIVE_VECTOR_WIDTH=128 MESA_SHADER_CACHE_DIR=$cache/w128 \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_odr_violation=0 \
  LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -E '^py_|_checked$' || status=1
  echo "== sanitizer build: $((SECONDS - t1)) s =="
fi
if [ -n "$(ls -A "$TMPDIR")" ]; then
  echo "== the tests left files in their temporary folder (failed): =="
  (cd "$TMPDIR" && find . -maxdepth 2 | sort | head -40)
  status=1
fi
exit $status
