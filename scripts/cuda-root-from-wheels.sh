#!/usr/bin/env bash
# Assembles a CUDA toolkit directory for CMake from the NVIDIA packages a PyTorch wheel installs
# next to torch (nvidia/cu13/... or nvidia/<component>/... for CUDA 12), plus the compiler from the
# nvidia-cuda-nvcc package of the same CUDA version (pip install "nvidia-cuda-nvcc==13.2.*" and
# "nvidia-nvvm==13.2.*" for torch.version.cuda 13.2). A CUDA LibTorch's CMake config insists on
# nvcc and the CUDA libraries even when, as here, nothing is compiled for the GPU.
# Usage: scripts/cuda-root-from-wheels.sh OUT_DIR [PYTHON]   (symlinks only; prints OUT_DIR)
set -euo pipefail
out="$1"
python="${2:-python3}"
nvidia="$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia"))')"
[ -d "$nvidia" ] || { echo "error: no NVIDIA packages next to torch ($nvidia)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/lib"
ln -s lib "$out/lib64"
for pkg in "$nvidia"/*/; do
  for sub in bin include lib nvvm; do
    [ -d "$pkg$sub" ] || continue
    if [ "$sub" = nvvm ]; then
      [ -e "$out/nvvm" ] || ln -s "$pkg$sub" "$out/nvvm"
      continue
    fi
    mkdir -p "$out/$sub"
    for f in "$pkg$sub"/*; do
      name="$(basename "$f")"
      [ -e "$out/$sub/$name" ] || ln -s "$f" "$out/$sub/$name"
      # libfoo.so.13 -> libfoo.so: what find_library and the linker look for.
      case "$name" in
        *.so.*) base="${name%%.so.*}.so"; [ -e "$out/lib/$base" ] || ln -s "$f" "$out/lib/$base" ;;
      esac
    done
  done
done
[ -x "$out/bin/nvcc" ] || { echo "error: no nvcc among $nvidia/*/bin (pip install nvidia-cuda-nvcc of torch.version.cuda)" >&2; exit 1; }
echo "$out"
