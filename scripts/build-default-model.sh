#!/usr/bin/env bash
# Rebuilds the embedded default model (models/default-small) from scratch on this machine:
#   1. corpus: the .py files of Debian's python3.11 standard library (/usr/lib/python3.11),
#      without encodings/ and pydoc_data/ (generated data tables, not code);
#   2. split: the whole modules listed in VALID_MODULES are held out for validation;
#   3. tokenizer: byte-level BPE, 8192 tokens, trained on the training split only;
#   4. model: configs/default-model.config.json trained with train-lm (f32, exported as bf16).
# Resumable: run it again after an interruption and training continues from its checkpoint.
# Usage: scripts/build-default-model.sh [WORK_DIR (default build/default-model)] [OUT (default models/default-small)]
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${1:-build/default-model}
OUT=${2:-models/default-small}
PYLIB=${PYLIB:-/usr/lib/python3.11}
STEPS=${STEPS:-450}
STEPS2=${STEPS2:-300}
STEPS3=${STEPS3:-5000}
STOP3=${STOP3:-2503}  # the shipped model: stage 3 stopped here (time); raise it (or 0) to continue
THREADS=${THREADS:-0}
DSPARK=${DSPARK:-build/dspark}

# Held-out modules (whole files or packages, relative to the standard library root).
VALID_MODULES=(argparse.py csv.py difflib.py fractions.py heapq.py json shlex.py statistics.py textwrap.py wsgiref)

[ -x "$DSPARK" ] || scripts/build.sh
[ -d "$PYLIB" ] || { echo "error: $PYLIB not found (apt-get install python3.11)" >&2; exit 1; }

# 1-2. Corpus copy with the split (copies, so the corpus is frozen even if the system changes).
if [ ! -f "$WORK/corpus/.done" ]; then
  rm -rf "$WORK/corpus"
  mkdir -p "$WORK/corpus/train" "$WORK/corpus/valid"
  (cd "$PYLIB" && find . -name '*.py' -not -path './encodings/*' -not -path './pydoc_data/*' \
     -not -path '*/__pycache__/*' | LC_ALL=C sort) > "$WORK/corpus/all.txt"
  while read -r f; do
    rel=${f#./}
    dest=train
    for m in "${VALID_MODULES[@]}"; do
      if [ "$rel" = "$m" ] || [[ "$rel" == "$m/"* ]]; then dest=valid; fi
    done
    mkdir -p "$WORK/corpus/$dest/$(dirname "$rel")"
    cp "$PYLIB/$rel" "$WORK/corpus/$dest/$rel"
  done < "$WORK/corpus/all.txt"
  touch "$WORK/corpus/.done"
fi
echo "corpus: train $(find "$WORK/corpus/train" -name '*.py' | wc -l) files," \
     "valid $(find "$WORK/corpus/valid" -name '*.py' | wc -l) files"

# 3. Tokenizer.
if [ ! -f "$WORK/tokenizer/tokenizer.json" ]; then
  "$DSPARK" train-tokenizer --corpus "$WORK/corpus/train" --ext .py --vocab 8192 --out "$WORK/tokenizer"
fi

# 4. Model, in three stages (each resumes when its checkpoint exists):
#    stage 1: 450 steps of 16 x 256 tokens from random weights, peak lr 2e-3;
#    stage 2: from stage 1's export, 300 more steps of 8 x 256 tokens (more updates per token
#    seen), peak lr 1.5e-3;
#    stage 3: from stage 2's export, a 5000-step schedule of 8 x 256 tokens, peak lr 1.5e-3,
#    stopped at step STOP3 (2503, ~2.4 epochs) for the shipped model.
RESUME=()
[ -f "$WORK/lm/train/train_state.safetensors" ] && RESUME=(--resume)
"$DSPARK" train-lm --config configs/default-model.config.json --tokenizer "$WORK/tokenizer" \
  --corpus "$WORK/corpus/train" --valid "$WORK/corpus/valid" --ext .py --out "$WORK/lm" \
  --steps "$STEPS" --seq-len 256 --batch-size 16 --lr 2e-3 --seed 0 --eval-windows 128 --threads "$THREADS" "${RESUME[@]}"
RESUME=()
[ -f "$WORK/lm2/train/train_state.safetensors" ] && RESUME=(--resume)
"$DSPARK" train-lm --config configs/default-model.config.json --tokenizer "$WORK/tokenizer" --init "$WORK/lm" \
  --corpus "$WORK/corpus/train" --valid "$WORK/corpus/valid" --ext .py --out "$WORK/lm2" \
  --steps "$STEPS2" --seq-len 256 --batch-size 8 --lr 1.5e-3 --warmup 20 --seed 1 --eval-windows 128 \
  --threads "$THREADS" "${RESUME[@]}"
RESUME=()
[ -f "$WORK/lm3/train/train_state.safetensors" ] && RESUME=(--resume)
"$DSPARK" train-lm --config configs/default-model.config.json --tokenizer "$WORK/tokenizer" --init "$WORK/lm2" \
  --corpus "$WORK/corpus/train" --valid "$WORK/corpus/valid" --ext .py --out "$WORK/lm3" \
  --steps "$STEPS3" --seq-len 256 --batch-size 8 --lr 1.5e-3 --warmup 100 --seed 2 --eval-windows 128 \
  --eval-every 250 --stop-at "$STOP3" --threads "$THREADS" "${RESUME[@]}"

# Ship: the exported HF files only (not the training state).
mkdir -p "$OUT"
for f in config.json generation_config.json tokenizer.json model.safetensors; do
  cp "$WORK/lm3/$f" "$OUT/$f.tmp" && mv "$OUT/$f.tmp" "$OUT/$f"
done
echo "default model written to $OUT"
