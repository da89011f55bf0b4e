#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test on the default
# adapter (lavapipe on a machine without a GPU); then the same tests built with
# AddressSanitizer + UndefinedBehaviorSanitizer (leak detection on).
# WGML_TEST_SANITIZE=0 skips the sanitizer pass.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh build
# the Python package over build/libwgml.so into the venv (a reinstall of the same version is
# harmless; --no-build-isolation: the venv's setuptools, no download); its tests run from python/
.deps/venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation ./python
cp build/libwgml.so "$(.deps/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/wgml/"
echo "== tests (plain build) =="
ctest --test-dir build --output-on-failure -j1
if [ "${WGML_TEST_SANITIZE:-1}" = 1 ]; then
  echo "== tests (AddressSanitizer + UndefinedBehaviorSanitizer) =="
  bash scripts/build.sh build-asan -DWGML_SANITIZE=ON
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_odr_violation=0
  export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir build-asan --output-on-failure -j1 -E '^py_'
fi
