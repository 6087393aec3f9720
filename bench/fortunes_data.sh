#!/usr/bin/env bash
# The fortunes corpus of the CPU benchmarks (docs/benchmarks.md), prepared once per OUT_DIR: OUT_DIR/data
# for the language models (char level), OUT_DIR/classify labelled by the file each fortune came from.
#   bench/fortunes_data.sh BUILD_DIR OUT_DIR
set -euo pipefail
BUILD=$1
OUT=$2
mapfile -t inputs < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
[ ${#inputs[@]} -gt 0 ] || { echo "no fortune files in /usr/share/games/fortunes" >&2; exit 2; }
for kind in data classify; do
  [ -f "$OUT/$kind/train.h5" ] && continue
  labels=()
  [ $kind = classify ] && labels=(--label-from-file)
  "$BUILD/rnn_prep" --input "${inputs[@]}" --output-dir "$OUT/$kind" --format records --record-sep '%' \
    --tokenizer char --max-len 400 --valid-fraction 0.05 --seed 1 "${labels[@]}" > /dev/null
done
