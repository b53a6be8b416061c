#!/usr/bin/env bash
# Rebuilds the drafters shipped for a default target (TARGET, default models/default; the drafters
# go beside it as $TARGET-dspark and $TARGET-dflash):
#   1. prompts: signature + docstring of functions in the default model's training split
#      (scripts/make-prompts.py); the held-out bench prompts come from its validation modules;
#   2. regen: the default model regenerates responses (temperature 0.7, top-p 0.8, top-k 20);
#   3. train: a DSpark drafter and a DFlash baseline with the same data, settings and time budget
#      (MINUTES of training each, including the one-off caching of the target's hidden states;
#      the schedule length follows from each one's measured speed), run side by side on one
#      thread each. DSpark's loss weights CE,L1,BCE are 1,0.9,1 (DSPARK_LOSS; the paper's
#      0.1,0.9,1 trains the greedy argmax more slowly at this budget, see docs/BENCHMARKS.md);
#      DFlash is CE only;
#   4. fine-tune for sampled decoding (FINETUNE_MINUTES, default 55; 0 skips): the target also
#      regenerates the training prompts at temperature 1 without top-p / top-k (what `--temp 1`
#      decodes from: step 2's contexts are more predictable than those), and the DSpark drafter
#      continues from step 3's weights on both regenerations (--init, peak lr 5e-4, two threads);
#   5. a DSpark drafter for sampled decoding, $TARGET-dspark-sampled (SAMPLED_MINUTES, default 60;
#      0 skips): step 4's drafter continues on temperature-1 regenerations only (step 4's and a
#      second one, --seed 2) with the paper's loss weights 0.1,0.9,1: at temperature 1 a draft is
#      accepted with probability 1 - TV(p, q), the L1 term, and CE on the sampled token pulls q
#      toward the data instead (docs/BENCHMARKS.md, "A drafter for sampled decoding");
#   6. calibrate: STS temperatures of the DSpark confidence heads on 48 held-out prompts that are
#      disjoint from the benchmark prompts, for greedy decoding (calibration.json) and at
#      temperature 1 (calibration-sampled.json; fitted under token-by-token verification, which
#      the head's per-position confidences fit: under block verification the fit hits its cap).
# Needs the target's corpus split (scripts/build-mid-model.sh for models/default,
# scripts/build-default-model.sh for models/default-small). Resumable: run it again after an
# interruption. Usage: [TARGET=DIR] scripts/build-default-drafters.sh [WORK_DIR (default build/mid-model)]
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${1:-build/mid-model}
TARGET=${TARGET:-models/default}
MINUTES=${MINUTES:-50}
FINETUNE_MINUTES=${FINETUNE_MINUTES:-55}
SAMPLED_MINUTES=${SAMPLED_MINUTES:-60}
PROMPTS=${PROMPTS:-3000}
DSPARK=${DSPARK:-build/dspark}
DSPARK_LOSS=${DSPARK_LOSS:-1,0.9,1}

[ -x "$DSPARK" ] || scripts/build.sh
[ -d "$WORK/corpus/train" ] || { echo "error: run scripts/build-default-model.sh first (no $WORK/corpus)" >&2; exit 1; }

mkdir -p "$WORK/drafters"
python3 scripts/make-prompts.py "$WORK/corpus/train" "$WORK/drafters/train-prompts.jsonl" --max "$PROMPTS"
python3 scripts/make-prompts.py "$WORK/corpus/valid" bench/prompts/python-heldout.jsonl --max 32
python3 scripts/make-prompts.py "$WORK/corpus/valid" "$WORK/drafters/calibration-prompts.jsonl" --max 48 \
  --exclude bench/prompts/python-heldout.jsonl

"$DSPARK" regen --target "$TARGET" --prompts "$WORK/drafters/train-prompts.jsonl" --out "$WORK/drafters/regen" \
  --temp 0.7 --top-p 0.8 --top-k 20 --max-new 128 --batch 16 --seed 0

# `dspark train` into $WORK/drafters/NAME (log NAME.log beside it), resuming a run left there.
train_into() {  # name, train args...
  local name=$1; shift
  local resume=()
  [ -f "$WORK/drafters/$name/train/train_state.safetensors" ] && resume=(--resume)
  "$DSPARK" train --target "$TARGET" --out "$WORK/drafters/$name" "$@" "${resume[@]}" > "$WORK/drafters/$name.log" 2>&1
}
# The training prompts regenerated at temperature 1 without top-p / top-k, into $WORK/drafters/NAME.
regen_t1() {  # name, seed
  "$DSPARK" regen --target "$TARGET" --prompts "$WORK/drafters/train-prompts.jsonl" --out "$WORK/drafters/$1" \
    --temp 1 --top-p 1 --top-k 0 --max-new 128 --batch 16 --seed "$2"
}
# A trained drafter's files into a model directory, each written atomically.
install_drafter() {  # from, to
  mkdir -p "$2"
  for f in dspark.json drafter.safetensors token_counts.json; do
    cp "$1/$f" "$2/$f.tmp" && mv "$2/$f.tmp" "$2/$f"
  done
}
train() {  # name, extra args...
  local name=$1; shift
  train_into "$name" --data "$WORK/drafters/regen" --config configs/default-dspark.drafter.json --minutes "$MINUTES" \
    --batch-size 8 --anchors 32 --max-len 256 --lr 1e-3 --seed 0 --threads 1 --cache-hidden "$@"
}
train dspark --loss-weights "$DSPARK_LOSS" &
train dflash --dflash &
wait
tail -n 1 "$WORK/drafters/dspark.log" "$WORK/drafters/dflash.log"

shipped_dspark=$WORK/drafters/dspark
if [ "$FINETUNE_MINUTES" != 0 ]; then
  regen_t1 regen-t1 1
  train_into dspark-ft --data "$WORK/drafters/regen" --data "$WORK/drafters/regen-t1" --init "$WORK/drafters/dspark" \
    --minutes "$FINETUNE_MINUTES" --batch-size 8 --anchors 32 --max-len 256 --lr 5e-4 --seed 1 --threads 2 \
    --cache-hidden --loss-weights "$DSPARK_LOSS"
  tail -n 1 "$WORK/drafters/dspark-ft.log"
  shipped_dspark=$WORK/drafters/dspark-ft
fi

install_drafter "$shipped_dspark" "$TARGET-dspark"
install_drafter "$WORK/drafters/dflash" "$TARGET-dflash"
drafters=("$TARGET-dspark")
if [ "$FINETUNE_MINUTES" != 0 ] && [ "$SAMPLED_MINUTES" != 0 ]; then
  regen_t1 regen-t1b 2
  train_into dspark-sampled --data "$WORK/drafters/regen-t1" --data "$WORK/drafters/regen-t1b" --init "$shipped_dspark" \
    --minutes "$SAMPLED_MINUTES" --batch-size 8 --anchors 32 --max-len 256 --lr 5e-4 --seed 2 --threads 2 \
    --cache-hidden --loss-weights 0.1,0.9,1
  tail -n 1 "$WORK/drafters/dspark-sampled.log"
  install_drafter "$WORK/drafters/dspark-sampled" "$TARGET-dspark-sampled"
  drafters+=("$TARGET-dspark-sampled")
fi

for d in "${drafters[@]}"; do
  "$DSPARK" calibrate -m "$TARGET" -d "$d" --prompts "$WORK/drafters/calibration-prompts.jsonl"
  "$DSPARK" calibrate -m "$TARGET" -d "$d" --prompts "$WORK/drafters/calibration-prompts.jsonl" --temp 1 --seed 1 \
    --sampled-verify token
done
echo "drafters written to ${drafters[*]} and $TARGET-dflash"
