#!/usr/bin/env bash
# Builds the mid-size Python code model (configs/mid-model.config.json: Qwen3, hidden 512, 10
# layers, 35.7M parameters, 71 MB of bf16 weights) from the Python sources on this machine:
#   1. corpus: the standard library (/usr/lib/python3.11, same split as build-default-model.sh:
#      VALID_MODULES held out) plus the .py files of the Debian packages in PACKAGES below
#      (installed with apt-get when missing), without any path through an evaluation package
#      (EVAL_PACKAGES: kept out of every corpus, prompt set and tokenizer; pip and setuptools
#      vendor some of them) and without files over 512 KB (generated tables);
#   2. tokenizer: byte-level BPE, 8192 tokens, on the standard library's training split only
#      (the same recipe as the small default model);
#   3. model: train-lm with bf16 matrix products on AMX when the CPU has it (--matmul bf16), one
#      cosine schedule of STEPS steps of 16 x 256 tokens, stopped at STOP (resumable: run the
#      script again, with a higher STOP, to continue; the schedule stays the same).
# Usage: scripts/build-mid-model.sh [WORK_DIR (default build/mid-model)] [OUT (default models/default)]
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${1:-build/mid-model}
OUT=${2:-models/default}
PYLIB=${PYLIB:-/usr/lib/python3.11}
DIST=${DIST:-/usr/lib/python3/dist-packages}
STEPS=${STEPS:-2000}
STOP=${STOP:-0}
THREADS=${THREADS:-0}
DSPARK=${DSPARK:-build/dspark}

VALID_MODULES=(argparse.py csv.py difflib.py fractions.py heapq.py json shlex.py statistics.py textwrap.py wsgiref)
# Debian 12 packages whose sources join the corpus (package -> top-level directories in $DIST).
APT_PACKAGES=(python3-django python3-sympy python3-numpy python3-scipy python3-twisted python3-matplotlib
  python3-setuptools python3-pandas python3-sqlalchemy python3-requests python3-docutils python3-babel
  python3-networkx python3-tornado python3-sphinx python3-jinja2 python3-mpmath python3-attr python3-click
  python3-werkzeug python3-flask python3-hypothesis python3-pytest)
PACKAGES=(django sympy numpy scipy twisted matplotlib setuptools pandas sqlalchemy requests docutils babel
  networkx tornado sphinx jinja2 mpmath attr click werkzeug flask hypothesis _pytest)
# The evaluation set: never in a corpus, a prompt set or a tokenizer's training data.
EVAL_PACKAGES='argcomplete|crcmod|cryptography|dbus|gi|lazr|oauthlib|pyflakes|pygments|pyparsing|wadllib|yaml'

[ -x "$DSPARK" ] || scripts/build.sh
[ -d "$PYLIB" ] || { echo "error: $PYLIB not found (apt-get install python3.11)" >&2; exit 1; }
missing=()
for p in "${PACKAGES[@]}"; do [ -d "$DIST/$p" ] || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${APT_PACKAGES[*]} (missing: ${missing[*]})"
  apt-get install -y --no-install-recommends "${APT_PACKAGES[@]}"
fi

# 1. Corpus copy (frozen even if the system changes later).
if [ ! -f "$WORK/corpus/.done" ]; then
  rm -rf "$WORK/corpus"
  mkdir -p "$WORK/corpus/train/stdlib" "$WORK/corpus/train/packages" "$WORK/corpus/valid"
  (cd "$PYLIB" && find . -name '*.py' -not -path './encodings/*' -not -path './pydoc_data/*' \
     -not -path '*/__pycache__/*' | LC_ALL=C sort) > "$WORK/corpus/stdlib.txt"
  while read -r f; do
    rel=${f#./}
    dest=train/stdlib
    for m in "${VALID_MODULES[@]}"; do
      if [ "$rel" = "$m" ] || [[ "$rel" == "$m/"* ]]; then dest=valid; fi
    done
    mkdir -p "$WORK/corpus/$dest/$(dirname "$rel")"
    cp "$PYLIB/$rel" "$WORK/corpus/$dest/$rel"
  done < "$WORK/corpus/stdlib.txt"
  (cd "$DIST" && find "${PACKAGES[@]}" -name '*.py' -size -512k -not -path '*/__pycache__/*' | LC_ALL=C sort |
     grep -Ev "(^|/)($EVAL_PACKAGES)(/|\.py$)") > "$WORK/corpus/packages.txt"
  while read -r rel; do
    mkdir -p "$WORK/corpus/train/packages/$(dirname "$rel")"
    cp "$DIST/$rel" "$WORK/corpus/train/packages/$rel"
  done < "$WORK/corpus/packages.txt"
  touch "$WORK/corpus/.done"
fi
echo "corpus: train $(find "$WORK/corpus/train" -name '*.py' | wc -l) files" \
     "($(du -sh "$WORK/corpus/train" | cut -f1)), valid $(find "$WORK/corpus/valid" -name '*.py' | wc -l) files"

# 2. Tokenizer.
if [ ! -f "$WORK/tokenizer/tokenizer.json" ]; then
  "$DSPARK" train-tokenizer --corpus "$WORK/corpus/train/stdlib" --ext .py --vocab 8192 --out "$WORK/tokenizer"
fi

# 3. Model.
MATMUL=f32
"$DSPARK" train-lm --help | grep -q -- --matmul && grep -qw amx_bf16 /proc/cpuinfo && MATMUL=bf16
RESUME=()
[ -f "$WORK/lm/train/train_state.safetensors" ] && RESUME=(--resume)
"$DSPARK" train-lm --config configs/mid-model.config.json --tokenizer "$WORK/tokenizer" \
  --corpus "$WORK/corpus/train" --valid "$WORK/corpus/valid" --ext .py --out "$WORK/lm" \
  --steps "$STEPS" --seq-len 256 --batch-size 16 --lr 1e-3 --warmup 150 --seed 0 --eval-windows 128 \
  --eval-every 250 --matmul "$MATMUL" --stop-at "$STOP" --threads "$THREADS" "${RESUME[@]}"

# Ship: the exported HF files only (not the training state).
mkdir -p "$OUT"
for f in config.json generation_config.json tokenizer.json model.safetensors; do
  cp "$WORK/lm/$f" "$OUT/$f.tmp" && mv "$OUT/$f.tmp" "$OUT/$f"
done
echo "mid-size model written to $OUT"
