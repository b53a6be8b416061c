#!/usr/bin/env bash
# Plain-decoding numbers of the foundation on a random-weight Qwen3-0.6B-config model (bf16 on
# disk): greedy tokens/s per compute path, and the cost of one forward of T tokens vs T = 1.
# Usage: scripts/bench-foundation.sh [MODEL_DIR]   (created with init-random when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-build/models/qwen3-0.6b-random}"
if [ ! -f "$model/model.safetensors" ]; then
  build/dspark init-random --config configs/qwen3-0.6b.config.json --out "$model" --dtype bf16 --seed 0
fi
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d)"
for dtype in f32 bf16; do
  build/dspark generate -m "$model" -p "def fibonacci(n):" -n 32 --json -t "$(nproc)" --dtype "$dtype" |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(f'greedy decode --dtype $dtype: {d[\"tokens_per_second\"]:.2f} tokens/s ({d[\"n_generated\"]} tokens)')"
done
build/dspark profile -m "$model" --max-tokens 16 --repeats 3 --context 64 -t "$(nproc)"
