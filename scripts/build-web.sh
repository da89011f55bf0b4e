#!/usr/bin/env bash
# The browser build: the library, the CLI and the tests as wasm32 programs (clang-16, lld-16,
# wasi-libc from Debian; scripts/setup.sh installs them) in BUILD (default build-web/). The
# JavaScript that runs them is web/ (webgpu.js, wasi.js, worker.js); docs/BROWSER.md says how.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-web}
cmake -S . -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE=cmake/wasm32-wasi.cmake -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
