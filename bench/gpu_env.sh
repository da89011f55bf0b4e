# Sourced by the scripts that run on the GPU machine (h200.sh, decode.sh, profile.sh, ab.sh,
# gemm_sweep.sh): gpu_env installs the Vulkan loader from the carried debs (.gl) when they are
# there, points the loader at NVIDIA's ICD, and writes the GPU's name, driver and clocks to
# $OUT/gpu.txt, and installs the Python wheels carried in .whl (the gguf package: the generate
# peer and bench/real_shapes.py read GGUF files with it); gpu_build SRC DIR LOG configures and
# builds wgml (no tests) from SRC into DIR.
gpu_env() {
  if [ -d .gl ]; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  fi
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-deps --no-index .whl/*.whl 2>&1 | grep -v WARNING
  fi
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>/dev/null | tee "$OUT/gpu.txt"
}

gpu_build() {
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWGML_BUILD_TESTS=OFF >"$3" 2>&1 &&
    cmake --build "$2" -j"$(nproc)" >>"$3" 2>&1 || { tail -30 "$3"; return 1; }
}
