#!/usr/bin/env bash
# The main job on a fresh machine: installs missing packages, builds, turns the fortunes corpus into
# HDF5 sequence files with rnn_prep and summarises them with rnn_dist info. (Training is added to this
# script as soon as `rnn_dist train` lands.)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
rnn_dist_install_deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${RNN_DIST_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)"
data=out/fortunes
mkdir -p "$data"
mapfile -t inputs < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
build/rnn_prep --input "${inputs[@]}" --output-dir "$data" --format records --record-sep '%' \
  --tokenizer char --max-len 400 --valid-fraction 0.05 --test-fraction 0.05 --seed 1
build/rnn_dist info "$data/train.h5" "$data/valid.h5"
