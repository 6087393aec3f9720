#!/usr/bin/env bash
# The main job on a fresh machine: installs missing packages, builds, turns the fortunes corpus into HDF5
# sequence files with rnn_prep, trains a character-level LSTM with 2 MPI ranks on the CPU for about two
# minutes, then evaluates it on the test split, prints a sample of generated text and draws the training
# curves (out/fortunes-curves.png).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
rnn_dist_build
data=out/fortunes
mkdir -p "$data"
mapfile -t inputs < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
build/rnn_prep --input "${inputs[@]}" --output-dir "$data" --format records --record-sep '%' \
  --tokenizer char --max-len 400 --valid-fraction 0.05 --test-fraction 0.05 --seed 1
build/rnn_dist info "$data/train.h5"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ckpt=out/fortunes-ckpt
rm -rf "$ckpt" out/fortunes-metrics.jsonl
mpirun --oversubscribe -np 2 build/rnn_dist train --train "$data/train.h5" --valid "$data/valid.h5" \
  --embed 32 --hidden 192 --layers 2 --batch-size 16 --optimizer adam --lr 4e-3 --clip-norm 1 \
  --epochs 2 --log-every 50 --seed 1 --checkpoint-dir "$ckpt" --save-every 200 --metrics out/fortunes-metrics.jsonl
last=$(ls "$ckpt"/step-*.h5 | tail -1)
echo "== evaluation on the test split (compare with the unigram entropy printed by rnn_dist info above)"
build/rnn_dist eval --checkpoint "$last" --data "$data/test.h5"
echo "== sample"
build/rnn_dist sample --checkpoint "$last" --prime "The " --length 300 --temperature 0.8 --seed 7
echo "== curves"
# Debian's python3, where the packages of scripts/deps.sh (matplotlib) are installed.
/usr/bin/python3 scripts/plot_metrics.py --metrics out/fortunes-metrics.jsonl --label "fortunes, 2 ranks" \
  --output out/fortunes-curves.png
