#!/usr/bin/env bash
# rnn_dist's CPU LSTM against oneDNN's LSTM primitive, an implementation of its own (bench/onednn_lstm.cpp):
# on one batch of the fortunes corpus, the outputs, input gradients and every weight gradient of a
# unidirectional language model (1 thread) and of the bidirectional classifier (2 threads) agree within
# 1e-4, or the program exits 1. Skipped (77), saying why, where oneDNN is not installed.
#   tests/onednn_lstm.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "$1" && pwd)
[ -x "$BUILD/bench/onednn_lstm" ] || { echo "SKIP: bench/onednn_lstm not built (oneDNN, Debian libdnnl-dev, not found)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$(dirname "$0")/../bench/fortunes_data.sh" "$BUILD" "$work"
for run in "data S 1" "classify B 2"; do
  set -- $run
  "$BUILD/bench/onednn_lstm" "$work/$1/train.h5" "$2" --steps 1 --threads "$3" >"$work/out.txt"
  cat "$work/out.txt"
  grep -q "^check: rnn_dist against oneDNN on the first batch" "$work/out.txt" ||
    { echo "onednn_lstm: no check line for config $2" >&2; exit 1; }
  grep -q "^rnn_dist / oneDNN: " "$work/out.txt" || { echo "onednn_lstm: no ratio for config $2" >&2; exit 1; }
done
