#!/usr/bin/env bash
# rnn_dist's CPU LSTM against oneDNN's LSTM primitive (issue 29; bench/onednn_lstm.cpp): configs S, L and
# B on the fortunes corpus of bench/cpu_throughput.sh (char level; B the classifier), 1 and 2 threads.
# Each line is checked inside the program (the implementations agree within 1e-4, or it is void).
# L takes a quarter of the batches (its rows cost 16 times S's).
#   bench/onednn_lstm.sh BUILD_DIR [OUT_DIR (bench-out)] [STEPS (8)]
set -euo pipefail
BUILD=$(cd "${1:?usage: bench/onednn_lstm.sh BUILD_DIR [OUT_DIR] [STEPS]}" && pwd)
OUT=${2:-bench-out}
STEPS=${3:-8}
[ -x "$BUILD/bench/onednn_lstm" ] || { echo "onednn_lstm: not built (oneDNN, Debian libdnnl-dev, not found)" >&2; exit 2; }
mkdir -p "$OUT"
bash "$(dirname "$0")/fortunes_data.sh" "$BUILD" "$OUT"
status=0
for threads in 1 2; do
  for config in S L B; do
    data=$OUT/data/train.h5
    [ $config = B ] && data=$OUT/classify/train.h5
    steps=$STEPS
    [ $config = L ] && steps=$(((STEPS + 3) / 4))
    "$BUILD/bench/onednn_lstm" "$data" $config --steps "$steps" --threads $threads || status=1
    echo
  done
done
exit $status
