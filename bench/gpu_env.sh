# Sourced by the scripts that run on the GPU machine (h200.sh, decode.sh, profile.sh, ab.sh,
# gemm_sweep.sh): gpu_env installs the Vulkan loader from the carried debs (.gl) when they are
# there, points the loader at NVIDIA's ICD, and writes the GPU's name, driver and clocks to
# $OUT/gpu.txt, and installs the Python wheels carried in .whl (the gguf package: the generate
# peer and bench/real_shapes.py read GGUF files with it); gpu_build SRC DIR LOG configures and
# builds wgml (no tests) from SRC into DIR; gpu_wgml LOG builds ./build-gpu when it is absent,
# brings it up to date and unpacks the carried llama.cpp tools (.llcpp) into /tmp;
# gpu_start is the common start of the scripts that time wgml (decode_ab.sh, real_shapes.sh,
# train_shapes.sh): $OUT made, gpu_env, build-gpu brought up to date (a failed build ends the
# script), t0 (the start, for time stamps) and W (the wgml binary) set;
# real_shape_file MODEL TYPE OUT LOG writes bench/real_shapes.py's random-weight file (Q4_0, Q4_1,
# Q8_0, F16 and the Q4_K_M mix directly, other types through llama-quantize from an F16 file).
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

gpu_wgml() {
  [ -x build-gpu/wgml ] || gpu_build . build-gpu "$1" || return 1
  cmake --build build-gpu -j"$(nproc)" >>"$1" 2>&1 || { tail -20 "$1"; return 1; }
  for t in llama-bench llama-quantize; do
    [ -f ".llcpp/$t.xz" ] && xz -dc ".llcpp/$t.xz" >"/tmp/$t" && chmod +x "/tmp/$t"
  done
  return 0
}

gpu_start() {
  mkdir -p "$OUT"
  gpu_env
  t0=$(date +%s)
  gpu_wgml "$OUT/cmake.log" || exit 1
  W=./build-gpu/wgml
}

real_shape_file() {
  case $2 in
  Q4_0 | Q4_1 | Q8_0 | F16 | Q4_K_M) python3 bench/real_shapes.py "$1" "$2" "$3" ;;
  *)
    [ -x /tmp/llama-quantize ] || { echo "no llama-quantize: $1 $2 skipped"; return 1; }
    python3 bench/real_shapes.py "$1" F16 /tmp/real_f16.gguf &&
      /tmp/llama-quantize /tmp/real_f16.gguf "$3" "$2" "$(nproc)" >"$4" 2>&1
    local rc=$?
    rm -f /tmp/real_f16.gguf
    [ $rc = 0 ] || tail -5 "$4"
    return $rc
    ;;
  esac
}
