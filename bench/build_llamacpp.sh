#!/usr/bin/env bash
# Builds the llama.cpp peer (llama-bench with the Vulkan backend) for bench/h200.sh, on this
# machine, from the llama.cpp sources vendored in the PyPI sdist of llama-cpp-python. A measurement
# tool only: nothing of wgml links it or needs it. Needs glslc, libvulkan-dev and spirv-headers
# (Debian packages, installed here when missing). Writes .llcpp/llama-bench.xz (stripped,
# compressed, to carry to the GPU machine). Debian 12's glslc (shaderc 2023.2) lacks the
# cooperative-matrix and integer-dot-product extensions, so llama.cpp builds without those shader
# variants: its matrix-matrix products (prefill) run its plain shaders; the matrix-vector products
# of decode do not use those extensions. docs/PERFORMANCE.md records this beside every number.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
W=${WORK:-/tmp/llcpp}
need=()
for p in glslc libvulkan-dev spirv-headers; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q --no-install-recommends "${need[@]}"; else sudo apt-get install -y -q --no-install-recommends "${need[@]}"; fi
fi
mkdir -p "$W"
[ -f "$W/llama_cpp_python-$VERSION.tar.gz" ] ||
  python3 -m pip download --quiet --no-deps --no-binary=:all: "llama-cpp-python==$VERSION" -d "$W"
[ -d "$W/llama_cpp_python-$VERSION" ] || tar xzf "$W/llama_cpp_python-$VERSION.tar.gz" -C "$W"
S=$W/llama_cpp_python-$VERSION/vendor/llama.cpp
cmake -S "$S" -B "$S/build-vk" -DGGML_VULKAN=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF
cmake --build "$S/build-vk" --target llama-bench -j"$(nproc)"
mkdir -p .llcpp
strip -o .llcpp/llama-bench "$S/build-vk/bin/llama-bench"
xz -9 -f .llcpp/llama-bench
echo "llama-cpp-python $VERSION" > .llcpp/VERSION
ls -la .llcpp
