#!/usr/bin/env bash
# scripts/plot_metrics.py on metrics written by `rnn_dist train --metrics`: a language model's file holding
# two runs (a second appended to the first) and a classifier's, overlaid in one PNG of 1600 x 900 pixels
# with every run counted; bad input (a line that is not JSON, a missing file) gets one line naming the
# file and line, exit 2 and no PNG. Skipped (77), saying why, without matplotlib. $1 = build directory.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/harness.sh"
python_with matplotlib || exit 77
PLOT=$HERE/../../scripts/plot_metrics.py

awk 'BEGIN { srand(3); for (i = 0; i < 200; i++) { k = 5 + int(rand() * 30); s = ""
  for (j = 0; j < k; j++) s = s substr("abcde fgh", 1 + int(rand() * 9), 1); print s } }' > lm.txt
"$BUILD/rnn_prep" --input lm.txt --output-dir lm > /dev/null || bad "rnn_prep"
printf 'pos\tgood fine\nneg\tbad sad\npos\tnice good\nneg\tawful\n%.0s' $(seq 40) > cls.tsv
"$BUILD/rnn_prep" --input cls.tsv --format tsv --tokenizer word --output-dir cls --valid-fraction 0.2 > /dev/null || bad "rnn_prep tsv"
OPTS="--embed 8 --hidden 12 --layers 1 --batch-size 8 --epochs 2 --log-every 2 --device cpu"
for lr in 1e-2 3e-3; do
  "$BUILD/rnn_dist" train --train lm/train.h5 --valid lm/valid.h5 $OPTS --lr $lr --metrics lm.jsonl > /dev/null 2>&1 \
    || bad "train lm $lr"
done
"$BUILD/rnn_dist" train --train cls/train.h5 --valid cls/valid.h5 $OPTS --bidirectional --metrics cls.jsonl > /dev/null 2>&1 \
  || bad "train classifier"
# A BIO tagger's validation records nest the entity scores ("entities":{...}): plotted as the entity F1.
printf 'ann B-PER\nmet O\nbob B-PER\n\nrome B-LOC\nsaw O\n\n%.0s' $(seq 40) > tag.conll
"$BUILD/rnn_prep" --input tag.conll --format conll --output-dir tag --valid-fraction 0.2 > /dev/null || bad "rnn_prep conll"
"$BUILD/rnn_dist" train --train tag/train.h5 --valid tag/valid.h5 $OPTS --metrics tag.jsonl > /dev/null 2>&1 || bad "train tagger"
grep -q '"entities":{' tag.jsonl || bad "the tagger's metrics have no entities object"
"$PY" "$PLOT" --metrics tag.jsonl --output tag.png > out 2> err && [ -s tag.png ] && grep -q "tag.png: 1 run(s)" out \
  && ok "a BIO tagger's metrics (nested entity scores) plot" || bad "tagger plot: $(cat err)"
# A run stopped inside an epoch marks its last validation (inside_epoch): plotted like the others.
"$BUILD/rnn_dist" train --train lm/train.h5 --valid lm/valid.h5 $OPTS --max-steps 3 --metrics stop.jsonl > /dev/null 2>&1 \
  || bad "train --max-steps 3"
grep -q '"inside_epoch":true' stop.jsonl && "$PY" "$PLOT" --metrics stop.jsonl --output stop.png > out 2> err \
  && ok "a validation inside the epoch plots" || bad "inside_epoch plot: $(cat err)"

"$PY" "$PLOT" --metrics lm.jsonl --label "language model" --metrics cls.jsonl --output curves.png > out 2> err
rc=$?
# PNG signature, then the IHDR chunk's width and height (big-endian, bytes 16-23).
size=$(od -An -tu1 -j16 -N8 curves.png 2> /dev/null | awk '{ print $1*16777216 + $2*65536 + $3*256 + $4 "x" $5*16777216 + $6*65536 + $7*256 + $8 }')
[ $rc -eq 0 ] && [ "$(head -c 8 curves.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && [ "$size" = 1600x900 ] \
  && grep -q "curves.png: 3 run(s)" out && [ "$(stat -c %s curves.png)" -gt 50000 ] \
  && ok "three runs (two appended in one file) in one ${size} PNG of $(stat -c %s curves.png) bytes" \
  || bad "plot: rc $rc, size '$size': $(cat out err)"

# The smoothed training loss does not lag: a straight line stays itself, alternating noise is averaged out.
"$PY" - "$PLOT" <<'PY' && ok "smoothing: centred, no lag on a straight line, noise averaged" || bad "smoothing"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("plot_metrics", sys.argv[1])
p = importlib.util.module_from_spec(spec); spec.loader.exec_module(p)
line = [10 - 0.1 * i for i in range(200)]
assert all(abs(a - b) < 1e-9 for a, b in zip(p.smooth(line), line))
noisy = [(-1) ** i for i in range(200)]
assert max(abs(v) for v in p.smooth(noisy)[20:-20]) < 0.1
PY

{ head -3 lm.jsonl; echo "not json"; } > broken.jsonl
"$PY" "$PLOT" --metrics broken.jsonl --output bad.png > out 2> err
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q "broken.jsonl:4: not JSON" err && ! ls bad.png* > /dev/null 2>&1 \
  && ok "a line that is not JSON: $(cat err)" || bad "broken metrics: rc $rc: $(cat err)"
"$PY" "$PLOT" --metrics missing.jsonl --output bad.png > out 2> err
[ $? -eq 2 ] && grep -q "missing.jsonl: No such file" err && ! ls bad.png* > /dev/null 2>&1 \
  && ok "a missing file: $(cat err)" || bad "missing metrics: $(cat err)"
finish
