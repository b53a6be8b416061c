#!/usr/bin/env bash
# The main job on the default model: complete a Python prompt.
# Until the trained default model ships under models/, a random-weight Qwen3-architecture model is
# created from configs/default-random.config.json (its output is gibberish by design).
set -euo pipefail
cd "$(dirname "$0")/.."
model=models/default
if [ ! -f "$model/config.json" ]; then
  model=build/models/default-random
  if [ ! -f "$model/model.safetensors" ]; then
    build/dspark init-random --config configs/default-random.config.json --out "$model" --dtype bf16 --seed 1
  fi
fi
build/dspark generate -m "$model" -p "${1:-def fibonacci(n):}" -n "${2:-64}" "${@:3}"
