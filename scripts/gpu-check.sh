#!/usr/bin/env bash
# The GPU check of the CUDA path (docs/cuda.md), in one run:
#   1. build: configure and build dspark against the LibTorch of the installed PyTorch (CUDA) in
#      $BUILD (skipped when $BUILD/dspark exists);
#   2. logits: a small random Qwen3 model scored on the CPU and on $DEVICE in float32
#      (perplexity --save-logits): largest difference <= TOL and the same argmax at every position;
#   3. lossless: greedy output of plain decoding == speculative decoding (a random DSpark drafter,
#      the n-gram drafter) on $DEVICE;
#   4. benchmark: a random Qwen3-4B-config target (bf16) with a random DSpark drafter of DeepSpec's
#      shape: verify(T)/verify(1) for T = 1, 2, 4, 8, 16, draft block / verify, tokens/s plain and
#      speculative, per-cycle target and drafter time (tau means nothing with random weights).
# Usage (a GPU machine with PyTorch and the Debian packages of scripts/setup.sh):
#   scripts/gpu-check.sh
# Dry run on a CPU-only machine with the Debian build (step 2 then compares the CPU kernels with
# LibTorch's operators, the path a GPU takes; step 4 uses a small target):
#   DEVICE=cpu SMALL=1 BUILD=build scripts/gpu-check.sh
# Environment: DEVICE (cuda), SMALL (0; 1: benchmark a small target), BUILD (build-torch2),
# WORK (scratch, $BUILD/gpu-check), PYTHON (python3, the one with torch), TOL (1e-3), TOKENS (128).
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE="${DEVICE:-cuda}"
SMALL="${SMALL:-0}"
BUILD="${BUILD:-build-torch2}"
WORK="${WORK:-$BUILD/gpu-check}"
PYTHON="${PYTHON:-python3}"
TOL="${TOL:-1e-3}"
TOKENS="${TOKENS:-128}"
dspark="$BUILD/dspark"
mkdir -p "$WORK"
step() { echo; echo "== $*"; }

# ---- 1. build
if [ ! -x "$dspark" ]; then
  step "build against PyTorch's LibTorch in $BUILD"
  prefix="$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPU", torch.cuda.is_available())' 2>/dev/null
  cuda_args=()
  if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null; then
    root="$(scripts/cuda-root-from-wheels.sh "$PWD/$BUILD-cuda-root" "$PYTHON" 2>/dev/null)"
    cuda_args=(-DCUDA_TOOLKIT_ROOT_DIR="$root" -DCMAKE_CUDA_COMPILER="$root/bin/nvcc")
  fi
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DDSPARK_BUILD_TESTS=OFF -DDSPARK_BUILD_BENCH=OFF "${cuda_args[@]}"
  ninja -C "$BUILD" dspark
fi
"$dspark" --version

# ---- 2. logits, CPU vs $DEVICE
small="$WORK/small"
[ -f "$small/model.safetensors" ] || "$dspark" init-random --config configs/default-random.config.json --out "$small" --dtype f32 --seed 1
head -c 1500 src/model/transformer.cpp > "$WORK/text.txt"
ppl() { "$dspark" perplexity -m "$small" -f "$WORK/text.txt" --ctx 256 --dtype f32 --json "$@"; }
step "logits: CPU vs $DEVICE (float32, random $(basename "$small") model)"
ppl --device cpu --save-logits "$WORK/logits-cpu.safetensors"
if [ "$DEVICE" = cpu ]; then
  DSPARK_DISABLE_KERNELS=1 ppl --device cpu --save-logits "$WORK/logits-other.safetensors"
else
  ppl --device "$DEVICE" --save-logits "$WORK/logits-other.safetensors"
fi
"$PYTHON" - "$WORK/logits-cpu.safetensors" "$WORK/logits-other.safetensors" "$TOL" <<'PY'
import json, struct, sys
from array import array
def load(path):  # safetensors: u64 header length, JSON header, raw little-endian data
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        meta = json.loads(f.read(n))["logits"]
        f.seek(8 + n + meta["data_offsets"][0])
        values = array("f")
        values.frombytes(f.read(meta["data_offsets"][1] - meta["data_offsets"][0]))
    return meta["shape"], values
(shape, a), (shape_b, b) = load(sys.argv[1]), load(sys.argv[2])
assert shape == shape_b, f"shapes differ: {shape} vs {shape_b}"
rows, V = shape
diff = max(abs(x - y) for x, y in zip(a, b))
argmax = lambda v, r: max(range(V), key=lambda i: v[r * V + i])
same = sum(argmax(a, r) == argmax(b, r) for r in range(rows))
tol = float(sys.argv[3])
print(f"{rows} positions x {V}: max |logit difference| {diff:.3g} (tolerance {tol:g}), same argmax at {same}/{rows}")
if diff > tol or same != rows: sys.exit("FAIL: logits differ")
print("PASS")
PY

# ---- 3. greedy speculative == plain on $DEVICE
step "lossless: speculative == plain greedy on $DEVICE"
[ -f "$small-dspark/dspark.json" ] || "$dspark" init-random --drafter-for "$small" --out "$small-dspark" --seed 2 --dtype f32
tokens() { "$dspark" generate -m "$small" -p "def fibonacci(n):" -n 96 --json --device "$DEVICE" "$@" |
  "$PYTHON" -c 'import json, sys; d = json.load(sys.stdin); print(" ".join(map(str, d["tokens"]))); print("tau %.2f" % d["tau"], file=sys.stderr)'; }
for dtype in f32 bf16; do
  plain="$(tokens --dtype "$dtype")"
  for drafter in "-d $small-dspark" "--draft ngram"; do
    spec="$(tokens --dtype "$dtype" $drafter 2>"$WORK/tau.txt")"
    if [ "$spec" = "$plain" ]; then
      echo "PASS $dtype $drafter: $(wc -w <<<"$plain") tokens identical ($(cat "$WORK/tau.txt"))"
    else
      echo "FAIL $dtype $drafter: speculative output differs from plain decoding"
      echo "  plain: $plain"; echo "  spec:  $spec"
      exit 1
    fi
  done
done

# ---- 4. benchmark
if [ "$SMALL" = 1 ]; then
  target="$WORK/small-bf16"; config=configs/default-random.config.json
else
  target="$WORK/qwen3-4b-random"; config=configs/qwen3-4b.config.json
fi
step "benchmark: random $(basename "$config" .config.json) target (bf16) + random DeepSpec-shaped DSpark drafter on $DEVICE"
[ -f "$target/config.json" ] || "$dspark" init-random --config "$config" --out "$target" --dtype bf16 --seed 3 --shard-mb 4000
[ -f "$target-dspark/dspark.json" ] || "$dspark" init-random --drafter-for "$target" --layout deepspec \
  --drafter-config configs/deepspec.drafter.json --out "$target-dspark" --seed 4
"$dspark" profile -m "$target" -d "$target-dspark" --device "$DEVICE" --max-tokens 16 --context 256 --repeats 5 \
  --no-save --no-bandwidth --json > "$WORK/profile.json"
for d in "" "-d $target-dspark"; do
  "$dspark" generate -m "$target" -p "def fibonacci(n):" -n "$TOKENS" --device "$DEVICE" --json $d
done > "$WORK/generate.jsonl"
"$PYTHON" - "$WORK/profile.json" "$WORK/generate.jsonl" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
print(f"{p['model']} ({p['dtype']}, context {p['context']}): one target forward of T tokens")
print("   T        ms   verify(T)/verify(1)")
for row in p["rows"]:
    if row["tokens"] in (1, 2, 4, 8, 16):
        print(f"{row['tokens']:>4} {row['ms']:>9.2f} {row['cost_vs_1']:>10.2f}")
if "draft_block_ms" in p:
    g = p["draft_block_size"]
    print(f"draft block (g = {g}): {p['draft_block_ms']:.2f} ms back to back, {p['draft_block_after_verify_ms']:.2f} ms after a verify"
          f" = {p.get('draft_block_vs_verify', float('nan')):.2f} x a verify of {g + 1} tokens")
for line in open(sys.argv[2]):
    d = json.loads(line)
    plain = d["drafter"] in ("", "none")
    name = "plain" if plain else d["drafter"]
    steps = max(d["steps"], 1)
    extra = "" if plain else (f", per cycle: target {1e3 * d['target_seconds'] / steps:.2f} ms, "
                                         f"drafter {1e3 * d['draft_seconds'] / steps:.2f} ms (tau {d['tau']:.2f}, random weights)")
    print(f"{name}: {d['tokens_per_second']:.1f} tokens/s over {d['n_generated']} tokens{extra}")
PY
echo; echo "gpu-check: all checks passed"
