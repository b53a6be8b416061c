#!/usr/bin/env bash
# The main job on the embedded default model (a Python code model): complete a Python prompt with
# DSpark speculative decoding (its drafter, MODEL-dspark, with a 1024-token draft vocabulary), printing the
# completion and the measured acceptance (tau). Output is exactly what the model alone produces.
# Then it decodes the same prompt once more without the drafter and prints the speedup. With
# --temp above 0 it drafts with MODEL-dspark-sampled when that exists.
# Usage: scripts/run-default.sh [PROMPT] [N_TOKENS] [extra generate options...]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/dspark ] || scripts/build.sh
# models/default (35.7M) with models/default-dspark; should that drafter be missing (e.g. while
# scripts/build-default-drafters.sh rebuilds it), the 8.4M models/default-small with its own.
model=models/default
[ -f "$model-dspark/dspark.json" ] || model=models/default-small
if [ ! -f "$model/config.json" ]; then
  echo "error: $model is missing (rebuild it with scripts/build-mid-model.sh or scripts/build-default-model.sh)" >&2
  exit 1
fi
# Sampled decoding (a --temp above 0 among the extra options) drafts with MODEL-dspark-sampled,
# the drafter fine-tuned for it, over the whole vocabulary: at temperature 1 the target samples
# outside the 1024 most frequent tokens often enough that a cut costs more acceptance than time.
temp=0
args=("${@:3}")
for ((i = 0; i < ${#args[@]}; ++i)); do
  case ${args[i]} in
    --temp) temp=${args[i + 1]:-0} ;;
    --temp=*) temp=${args[i]#--temp=} ;;
  esac
done
sampled=$(awk -v t="$temp" 'BEGIN { print (t + 0 > 0) ? 1 : 0 }')
drafter=()
if [ "$sampled" = 1 ] && [ -f "$model-dspark-sampled/dspark.json" ]; then
  drafter=(-d "$model-dspark-sampled")
elif [ -f "$model-dspark/dspark.json" ]; then
  drafter=(-d "$model-dspark")
  # The drafter cut at load to the 1024 tokens most frequent in its training data (96% of them):
  # the same greedy drafts almost always, at a fraction of the LM-head reads (docs/drafter.md).
  [ -f "$model-dspark/token_counts.json" ] && drafter+=(--draft-vocab 1024)
fi
prompt=${1:-$'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'}
stats=$(mktemp)
trap 'rm -f "$stats"' EXIT
build/dspark generate -m "$model" "${drafter[@]}" -p "$prompt" -n "${2:-96}" "${@:3}" 2> >(tee "$stats" >&2)
wait
[ ${#drafter[@]} -gt 0 ] || exit 0
# The same prompt and options with plain decoding (output identical at temperature 0).
plain=$(build/dspark generate -m "$model" -p "$prompt" -n "${2:-96}" "${@:3}" 2>&1 >/dev/null | tail -1)
rate() { sed -n 's/.* \([0-9.]*\) tokens\/s.*/\1/p' | tail -1; }
spec_rate=$(rate < "$stats")
plain_rate=$(echo "$plain" | rate)
if [ -n "$spec_rate" ] && [ -n "$plain_rate" ]; then
  echo "plain decoding of the same prompt: $plain_rate tokens/s; speculative: $spec_rate tokens/s;" \
       "speedup $(awk -v a="$spec_rate" -v b="$plain_rate" 'BEGIN { printf "%.2fx", a / b }')"
fi
