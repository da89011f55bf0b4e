#!/usr/bin/env bash
# The main job: installs what is missing, builds, shows the adapter and runs the matmul
# benchmark on it (with a correctness spot-check).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh build
./build/wgml info
./build/wgml bench matmul --check
