#!/usr/bin/env bash
# python/rnn_dist_torch.py against rnn_dist: checkpoints of every kind trained here (a character language
# model with dropout, and byte and word ones, one with tied embeddings, a word one with the adaptive softmax, and
# LSTMs with a projection (--proj-size: language models, one adaptive, one tied to a 6-wide embedding, a bidirectional tagger
# and classifier); word-level bidirectional classifiers pooling last, mean and max; a bidirectional and
# a unidirectional tagger) are rebuilt in PyTorch, whose log-probabilities over a whole test file must equal
# `rnn_dist eval --log-probs` within 1e-5 and whose summed loss `rnn_dist eval --json`'s within 1e-6
# relative (tests/export/compare_torch.py). Skipped (77), saying why, without PyTorch and h5py.
# $1 = build directory.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../cli/lib/harness.sh"
source "$HERE/lib.sh"
python_with torch h5py || exit 77

awk 'BEGIN { srand(7); for (i = 0; i < 300; i++) { k = 5 + int(rand() * 50); s = ""
  for (j = 0; j < k; j++) s = s substr("abcde fghij", 1 + int(rand() * 11), 1); print s } }' > lm.txt
"$BUILD/rnn_prep" --input lm.txt --output-dir lm --valid-fraction 0 --test-fraction 0.2 > /dev/null || bad "rnn_prep lm"
# The same text through the byte and word tokenizers: the byte vocabulary is not UTF-8.
for t in byte word; do
  "$BUILD/rnn_prep" --input lm.txt --output-dir lm-$t --tokenizer $t --valid-fraction 0 --test-fraction 0.2 > /dev/null \
    || bad "rnn_prep lm --tokenizer $t"
done
make_labelled_data
run() {  # run NAME DATA OPTIONS...: trains, evaluates on DATA/test.h5 and compares with PyTorch
  local name=$1 data=$2
  shift 2
  "$BUILD/rnn_dist" train --train "$data/train.h5" --embed 12 --hidden 16 --layers 2 --batch-size 16 --epochs 100 --max-steps 25 \
    --lr 1e-2 --seed 5 --device cpu --checkpoint-dir "ck-$name" "$@" > "log.$name" 2>&1 || { bad "$name: $(tail -1 "log.$name")"; return; }
  "$BUILD/rnn_dist" eval --checkpoint "ck-$name/step-00000025.h5" --data "$data/test.h5" --device cpu \
    --batch-size 7 --log-probs "lp.$name" --json > "ev.$name" 2>&1 || { bad "$name eval: $(tail -1 "ev.$name")"; return; }
  tail -1 "ev.$name" > "ev.$name.json"
  if line=$("$PY" "$HERE/compare_torch.py" "ck-$name/step-00000025.h5" "$data/test.h5" "lp.$name" "ev.$name.json" 2>&1); then
    ok "$line"
  else
    bad "$name: $line"
  fi
}
run lm lm --dropout 0.2
run lm-byte lm-byte
run lm-word lm-word
run lm-tied lm --embed 16 --tie-embeddings --dropout 0.1
run lm-adaptive lm-word --softmax adaptive --cutoffs 4,9 --div-value 2 --dropout 0.1
run lm-proj lm --proj-size 6 --dropout 0.1
run lm-proj-adaptive lm-word --proj-size 12 --softmax adaptive --cutoffs 4,9 --div-value 2
run lm-proj-tied lm --proj-size 6 --embed 6 --tie-embeddings
run tag-proj tag --bidirectional --proj-size 5
run classify-proj cls --bidirectional --pool last --proj-size 5
for pool in last mean max; do run "classify-$pool" cls --bidirectional --pool "$pool" --dropout 0.1; done
run tag-bi tag --bidirectional
run tag-uni tag

# The loader refuses what is not a checkpoint.
"$PY" -c "import sys; sys.path.insert(0, '$HERE/../../python'); import rnn_dist_torch as rt; rt.load('lm/test.h5')" 2> err
[ $? -ne 0 ] && grep -q "not an rnn_dist checkpoint" err && ok "a data file is refused as a checkpoint" \
  || bad "loader on a data file: $(tail -1 err)"
"$PY" -c "import sys; sys.path.insert(0, '$HERE/../../python'); import rnn_dist_torch as rt; rt.load('ck-lm')" 2> err
[ $? -ne 0 ] && grep -q "ck-lm: is a directory, not a checkpoint" err && ok "a directory is refused as a checkpoint" \
  || bad "loader on a directory: $(tail -1 err)"
finish
