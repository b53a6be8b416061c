#!/usr/bin/env bash
# Builds and runs the whole test suite through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
ctest --test-dir build --output-on-failure -j1 "$@"
