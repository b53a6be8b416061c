#!/usr/bin/env bash
# CPU decoding measurements, all in one run (docs/BENCHMARKS.md, "CPU decoding"):
#   1. memory read bandwidth, linear layers (m = 1..16) and cached attention (Google Benchmark);
#   2. one target forward of T = 1..16 tokens, weights read per token and the share of the
#      bandwidth limit, for the default model (with its DSpark draft block) and a random-weight
#      Qwen3-0.6B-config model (bf16 on disk), default (mixed) and float32 compute;
#   3. greedy decoding tokens/s on Qwen3-0.6B.
# Needs a build with benchmarks (cmake -DDSPARK_BUILD_BENCH=ON, the default).
# Usage: scripts/bench-cpu.sh [QWEN_DIR (created with init-random when missing)]
set -euo pipefail
cd "$(dirname "$0")/.."
qwen="${1:-build/models/qwen3-0.6b-random}"
[ -x build/dspark_bench ] || { echo "error: build/dspark_bench is missing (configure with -DDSPARK_BUILD_BENCH=ON)" >&2; exit 1; }
if [ ! -f "$qwen/model.safetensors" ]; then
  build/dspark init-random --config configs/qwen3-0.6b.config.json --out "$qwen" --dtype bf16 --seed 0
fi
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d)"
build/dspark_bench --benchmark_filter='ReadBandwidth|Attention|Matmul/.*/m:(1|2|4|8|16)/k:(256|1024)/n:(768|3072|151936)'
echo "== default-small model (8.4M), default compute (float32 activations, bf16 matrices)"
build/dspark profile -m models/default-small -d models/default-small-dspark --max-tokens 16 --repeats 9 --no-save
echo "== default-small model (8.4M), --dtype f32"
build/dspark profile -m models/default-small --max-tokens 16 --repeats 9 --no-save --dtype f32 --no-bandwidth
echo "== Qwen3-0.6B (random), default compute"
build/dspark profile -m "$qwen" --max-tokens 16 --repeats 3 --no-save
echo "== Qwen3-0.6B (random), --dtype f32"
build/dspark profile -m "$qwen" --max-tokens 16 --repeats 3 --no-save --dtype f32 --no-bandwidth
for dtype in auto f32; do
  build/dspark generate -m "$qwen" -p "def fibonacci(n):" -n 32 --json --dtype "$dtype" |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(f'Qwen3-0.6B greedy decode --dtype $dtype: {d[\"tokens_per_second\"]:.2f} tokens/s ({d[\"n_generated\"]} tokens)')"
done
