#!/usr/bin/env bash
# The main job on the embedded default model (a small Python code model, models/default):
# complete a Python prompt with DSpark speculative decoding (models/default-dspark), printing the
# completion and the measured acceptance (tau). Output is exactly what the model alone produces.
# Usage: scripts/run-default.sh [PROMPT] [N_TOKENS] [extra generate options...]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/dspark ] || scripts/build.sh
model=models/default
if [ ! -f "$model/config.json" ]; then
  echo "error: $model is missing (rebuild it with scripts/build-default-model.sh)" >&2
  exit 1
fi
drafter=()
[ -f models/default-dspark/dspark.json ] && drafter=(-d models/default-dspark)
prompt=${1:-$'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'}
build/dspark generate -m "$model" "${drafter[@]}" -p "$prompt" -n "${2:-96}" "${@:3}"
