#!/usr/bin/env bash
# python/rnn_dist_onnx.py against rnn_dist: a character language model (also exported with --state), one
# with tied embeddings (one initializer) and one with the adaptive softmax (the full distribution),
# bidirectional classifiers pooling last, mean and max, and a bidirectional tagger, trained here, are
# exported, pass onnx.checker, and run in onnxruntime (npm onnxruntime-node, CPU) on a whole test file as
# one batch of unequal lengths: their log-probabilities must equal `rnn_dist eval --log-probs` within
# 1e-4 (tests/export/run_onnx.js); the stateful graph fed in two halves must equal one pass. Bad input to
# the exporter: one line, exit 2, no file. Skipped (77), saying why, without python3-onnx, h5py, node or
# onnxruntime-node (scripts/deps.sh installs them into .cache/node). $1 = build directory.
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
source "$HERE/../cli/lib/harness.sh"
source "$HERE/lib.sh"
python_with onnx h5py numpy || exit 77
export NODE_PATH=$REPO/.cache/node/node_modules
if ! command -v node > /dev/null || ! node -e "require('onnxruntime-node')" 2> /dev/null; then
  echo "SKIP: node cannot load onnxruntime-node from $NODE_PATH (scripts/deps.sh installs it)"
  exit 77
fi

awk 'BEGIN { srand(7); for (i = 0; i < 300; i++) { k = 5 + int(rand() * 50); s = ""
  for (j = 0; j < k; j++) s = s substr("abcde fghij", 1 + int(rand() * 11), 1); print s } }' > lm.txt
"$BUILD/rnn_prep" --input lm.txt --output-dir lm --valid-fraction 0 --test-fraction 0.2 > /dev/null || bad "rnn_prep lm"
# A byte-tokenizer language model too: its vocabulary is not UTF-8.
"$BUILD/rnn_prep" --input lm.txt --output-dir lm-byte --tokenizer byte --valid-fraction 0 --test-fraction 0.2 > /dev/null \
  || bad "rnn_prep lm --tokenizer byte"
make_labelled_data
run() {  # run NAME DATA OPTIONS...: trains, evaluates DATA/test.h5, exports, runs the graph in onnxruntime
  local name=$1 data=$2 state=()
  shift 2
  "$BUILD/rnn_dist" train --train "$data/train.h5" --embed 12 --hidden 16 --layers 2 --batch-size 16 --epochs 100 \
    --max-steps 25 --lr 1e-2 --seed 5 --device cpu --checkpoint-dir "ck-$name" "$@" > "log.$name" 2>&1 \
    || { bad "$name: $(tail -1 "log.$name")"; return; }
  local ck=ck-$name/step-00000025.h5
  "$BUILD/rnn_dist" eval --checkpoint "$ck" --data "$data/test.h5" --device cpu --log-probs "lp.$name" > /dev/null 2>&1 \
    || { bad "$name eval"; return; }
  "$PY" "$REPO/python/rnn_dist_onnx.py" --checkpoint "$ck" --onnx "$name.onnx" > "x.$name" 2>&1 \
    || { bad "$name export: $(tail -1 "x.$name")"; return; }
  if [ "$name" = lm ]; then
    "$PY" "$REPO/python/rnn_dist_onnx.py" --checkpoint "$ck" --onnx lm-state.onnx --state > /dev/null 2>&1 || bad "lm export --state"
    state=(lm-state.onnx)
  fi
  "$PY" "$HERE/onnx_batch.py" "$data/test.h5" "lp.$name" "batch.$name.json" || { bad "$name batch"; return; }
  if line=$(node "$HERE/run_onnx.js" "$name.onnx" "batch.$name.json" "${state[@]}" 2>&1); then
    ok "$name: $line"
  else
    bad "$name: $line"
  fi
}
run lm lm --dropout 0.2
run lm-byte lm-byte
run lm-tied lm --embed 16 --tie-embeddings
run lm-adaptive lm --softmax adaptive --cutoffs 5,9 --div-value 2
"$PY" -c "import onnx, sys; n = [i.name for i in onnx.load('lm-tied.onnx').graph.initializer]
sys.exit(0 if n.count('emb.weight') == 1 and 'head_wt' not in n else 1)" \
  && ok "lm-tied: the embedding is the graph's one initializer for both uses" || bad "lm-tied: the tied matrix is stored twice"
for pool in last mean max; do run "classify-$pool" cls --bidirectional --pool "$pool"; done
run tag tag --bidirectional

# The exporter on what is not a checkpoint: one line, exit 2, nothing written.
# ONNX's LSTM operator has no projection: such a checkpoint is refused in one line, no file written.
"$BUILD/rnn_dist" train --train lm/train.h5 --embed 8 --hidden 12 --proj-size 4 --layers 1 --max-steps 2 --device cpu \
  --checkpoint-dir ck-proj > log.proj 2>&1 || bad "projected lm: $(tail -1 log.proj)"
"$PY" "$REPO/python/rnn_dist_onnx.py" --checkpoint ck-proj/step-00000002.h5 --onnx proj.onnx > out 2> err
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q "projection (proj_size 4) has no ONNX LSTM operator" err \
  && ! ls proj.onnx* > /dev/null 2>&1 && ok "a projected LSTM is refused: $(cat err)" || bad "exporter on --proj-size: rc $rc: $(cat err)"
"$PY" "$REPO/python/rnn_dist_onnx.py" --checkpoint lm/test.h5 --onnx bad.onnx > out 2> err
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q "not an rnn_dist checkpoint" err && ! ls bad.onnx* > /dev/null 2>&1 \
  && ok "a data file is refused: $(cat err)" || bad "exporter on a data file: rc $rc: $(cat err)"
"$PY" "$REPO/python/rnn_dist_onnx.py" --checkpoint ck-lm --onnx bad.onnx > out 2> err
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q "ck-lm: is a directory, not a checkpoint" err && ! ls bad.onnx* > /dev/null 2>&1 \
  && ok "a directory is refused: $(cat err)" || bad "exporter on a directory: rc $rc: $(cat err)"
finish
