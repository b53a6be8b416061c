#!/usr/bin/env bash
# Rebuilds the small draft LM shipped for classic two-model speculation (models/default-small-draft-model):
# configs/default-draft-model.config.json trained with train-lm on the default model's corpus split
# and tokenizer (both made by scripts/build-default-model.sh). Resumable.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-build/default-model}
OUT=${2:-models/default-small-draft-model}
STEPS=${STEPS:-400}
THREADS=${THREADS:-0}
DSPARK=${DSPARK:-build/dspark}
[ -x "$DSPARK" ] || scripts/build.sh
[ -f "$WORK/tokenizer/tokenizer.json" ] || { echo "error: run scripts/build-default-model.sh first" >&2; exit 1; }
RESUME=()
[ -f "$WORK/draft-lm/train/train_state.safetensors" ] && RESUME=(--resume)
"$DSPARK" train-lm --config configs/default-draft-model.config.json --tokenizer "$WORK/tokenizer" \
  --corpus "$WORK/corpus/train" --valid "$WORK/corpus/valid" --ext .py --out "$WORK/draft-lm" \
  --steps "$STEPS" --seq-len 256 --batch-size 16 --lr 3e-3 --seed 0 --eval-windows 128 --threads "$THREADS" "${RESUME[@]}"
mkdir -p "$OUT"
for f in config.json generation_config.json tokenizer.json model.safetensors; do
  cp "$WORK/draft-lm/$f" "$OUT/$f.tmp" && mv "$OUT/$f.tmp" "$OUT/$f"
done
echo "draft model written to $OUT"
