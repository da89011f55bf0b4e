#!/usr/bin/env bash
# Builds the llama.cpp peer (llama-bench with the Vulkan backend) for bench/h200.sh, on this
# machine, from the llama.cpp sources vendored in the PyPI sdist of llama-cpp-python. A measurement
# tool only: nothing of wgml links it or needs it. Today's llama.cpp needs newer Vulkan headers and
# a newer glslc than Debian 12 has (VK_EXT_layer_settings; the cooperative-matrix, integer-dot and
# bfloat16 shader extensions, without which llama.cpp would build only its slower shaders and not
# be the peer a user gets). So the script takes Debian 13's libvulkan-dev (headers) and glslc
# (shaderc 2025.2) with the C/C++ runtime they were built against, unpacked under $WORK (nothing
# is installed on the system), and runs that glslc through its own dynamic loader. With it
# llama.cpp builds its cooperative-matrix (KHR and NV2) and integer-dot shaders; the bfloat16, fp4
# and fp8 ones (GL_EXT_bfloat16, e2m1, e4m3: weights of those types only) stay out. Writes
# .llcpp/llama-bench.xz and .llcpp/llama-quantize.xz (the K-quant mixes of bench/real_shapes.sh
# come from it), stripped and compressed, to carry to the GPU machine.
#
# Where it builds: here (no argument) takes about 70 minutes on a 2-core machine; `--pack` instead
# writes .llsrc/llsrc.tar.xz (the llama.cpp sources without their models, docs and tests, and the
# Debian 13 pieces above: about 15 MB), and `--unpacked`, run on the GPU machine with .llsrc
# carried, builds from it there with every core and writes .llcpp/ there (the GPU machine reaches
# no network, so everything it builds with travels in the pack).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
W=${WORK:-/tmp/llcpp}
T=$W/trixie
MODE=${1:-here}
if [ "$MODE" = --unpacked ]; then
  mkdir -p "$W"
  tar xJf .llsrc/llsrc.tar.xz -C "$W"
fi
mkdir -p "$T/lists/partial" "$T/archives/partial" "$T/root"
if [ ! -x "$T/glslc" ]; then
  . scripts/debian_mirror.sh # trixie from the mirror this machine's apt uses
  M=$(debian_mirror)
  echo "deb $M trixie main" > "$T/sources.list"
  A=(-o Dir::Etc::sourcelist="$T/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$T/lists"
     -o Dir::Cache::archives="$T/archives")
  apt-get -q "${A[@]}" update
  (cd "$T" && apt-get -q "${A[@]}" download libvulkan-dev spirv-headers glslc libshaderc1 libc6 libstdc++6 libgcc-s1)
  for d in "$T"/*.deb; do dpkg -x "$d" "$T/root"; done
  cat > "$T/glslc" <<'SH'
#!/bin/sh
D=$(dirname "$(readlink -f "$0")")/root
exec "$D/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$D/usr/lib/x86_64-linux-gnu" "$D/usr/bin/glslc" "$@"
SH
  chmod +x "$T/glslc"
fi
v=$("$T/glslc" --version)
echo "glslc: ${v%%$'\n'*}"
S=llama_cpp_python-$VERSION/vendor/llama.cpp
if [ ! -d "$W/$S" ]; then
  [ -f "$W/llama_cpp_python-$VERSION.tar.gz" ] ||
    python3 -m pip download --quiet --no-deps --no-binary=:all: "llama-cpp-python==$VERSION" -d "$W"
  tar xzf "$W/llama_cpp_python-$VERSION.tar.gz" -C "$W"
fi
if [ "$MODE" = --pack ]; then # what the build reads, for the GPU machine
  mkdir -p .llsrc
  tar cJf .llsrc/llsrc.tar.xz -C "$W" --exclude="$S/models" --exclude="$S/docs" --exclude="$S/tests" \
    --exclude="$S/tools/ui" --exclude="$S/examples" --exclude="$S/benches" --exclude="$S/build-vk" \
    trixie/glslc trixie/root "$S"
  ls -la .llsrc
  exit 0
fi
S=$W/$S
# links against the system's Vulkan loader (libvulkan1, which scripts/setup.sh installs): the
# dev package's libvulkan.so points at a loader built for Debian 13's C library
VK_LIB=$(ls /usr/lib/x86_64-linux-gnu/libvulkan.so.1)
cmake -S "$S" -B "$S/build-vk" -DVulkan_GLSLC_EXECUTABLE="$T/glslc" -DVulkan_INCLUDE_DIR="$T/root/usr/include" \
  -DVulkan_LIBRARY="$VK_LIB" \
  -DCMAKE_PREFIX_PATH="$T/root/usr" -DGGML_VULKAN=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF
cmake --build "$S/build-vk" --target llama-bench llama-quantize -j"$(nproc)"
mkdir -p .llcpp
for t in llama-bench llama-quantize; do
  strip -o ".llcpp/$t" "$S/build-vk/bin/$t"
  xz -9 -f ".llcpp/$t"
done
echo "llama-cpp-python $VERSION" > .llcpp/VERSION
ls -la .llcpp
