#!/usr/bin/env bash
# CLI tests of `rnn_dist train`: training lowers the loss and writes a checkpoint and metrics; N ranks
# give the same parameters as 1 rank with the same global batch (flat and hierarchical all-reduce);
# bad options end with exit code 2 and one message, printed once. $1 = build directory.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }

# A small corpus with structure to learn.
awk 'BEGIN { srand(3); n = split("the quick brown fox jumps over a lazy dog while seven wizards quietly hex jam bags", w, " ")
  for (i = 0; i < 600; i++) { k = 2 + int(rand() * 11); line = ""
    for (j = 0; j < k; j++) line = line (j ? " " : "") w[1 + int(rand() * n)]
    print line; print "%" } }' > corpus.txt
"$BUILD/rnn_prep" --input corpus.txt --output-dir data --format records --valid-fraction 0.1 >/dev/null || bad "rnn_prep"

A="--train data/train.h5 --embed 16 --hidden 32 --layers 2 --max-steps 20 --log-every 5 --seed 7"
if "$BUILD/rnn_dist" train $A --valid data/valid.h5 --batch-size 8 --checkpoint-dir c1 --metrics m.jsonl > log1 2>&1; then
  ok "1-rank training exits 0"
else
  bad "1-rank training: $(tail -1 log1)"
fi
[ -f c1/step-00000020.h5 ] && ok "checkpoint written" || bad "no checkpoint c1/step-00000020.h5"
first=$(grep -m1 '"kind":"train"' m.jsonl | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
last=$(grep '"kind":"train"' m.jsonl | tail -1 | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.15) }' \
  && ok "loss falls ($first -> $last)" || bad "loss did not fall ($first -> $last)"
grep -q '"kind":"valid"' m.jsonl && ok "validation metrics logged" || bad "no validation metrics"

mpirun --oversubscribe -np 2 "$BUILD/rnn_dist" train $A --batch-size 4 --checkpoint-dir c2 > log2 2>&1 || bad "2 ranks: $(tail -1 log2)"
mpirun --oversubscribe -np 4 "$BUILD/rnn_dist" train $A --batch-size 2 --ranks-per-node 2 --allreduce hierarchical \
  --checkpoint-dir c4 > log4 2>&1 || bad "4 ranks hierarchical: $(tail -1 log4)"
for d in c2 c4; do
  if h5diff -d 1e-5 c1/step-00000020.h5 $d/step-00000020.h5 /model > diff.$d 2>&1; then
    ok "$d parameters equal 1 rank within 1e-5"
  else
    bad "$d parameters differ from 1 rank: $(head -3 diff.$d)"
  fi
done

# Resume: 12 steps, stop, resume to 20 gives bitwise the parameters of 20 uninterrupted steps
# (within one epoch). A directory without checkpoints with --resume starts fresh with a notice.
R="--train data/train.h5 --embed 16 --hidden 32 --layers 2 --log-every 5 --seed 7 --batch-size 8 --save-every 4"
"$BUILD/rnn_dist" train $R --max-steps 12 --checkpoint-dir cr > logr1 2>&1 || bad "resume part 1: $(tail -1 logr1)"
"$BUILD/rnn_dist" train $R --max-steps 20 --resume --checkpoint-dir cr > logr2 2>&1 || bad "resume part 2: $(tail -1 logr2)"
grep -q "resumed from cr/step-00000012.h5" logr2 && ok "resume found the newest checkpoint" || bad "resume: $(head -3 logr2)"
h5diff c1/step-00000020.h5 cr/step-00000020.h5 /model > diff.r 2>&1 && ok "resumed run is bitwise equal" \
  || bad "resumed run differs: $(head -3 diff.r)"
"$BUILD/rnn_dist" train $A --batch-size 8 --resume --checkpoint-dir fresh > logf 2>&1
grep -q "starting fresh" logf && ok "--resume with no checkpoint starts fresh" || bad "--resume fresh: $(head -2 logf)"
"$BUILD/rnn_dist" train --train data/train.h5 --embed 16 --hidden 24 --layers 2 --resume --checkpoint-dir cr > out 2> err
[ $? -eq 2 ] && grep -q "differs from the command line" err && ok "resume with another model shape -> exit 2" \
  || bad "resume with another shape: $(cat err)"

# eval and sample on the trained checkpoint; a data file with another vocabulary is refused.
"$BUILD/rnn_dist" eval --checkpoint c1/step-00000020.h5 --data data/valid.h5 --json > ev 2>&1 \
  && tail -1 ev | grep -q '^{"loss":' && ok "eval --json" || bad "eval: $(cat ev)"
"$BUILD/rnn_dist" sample --checkpoint c1/step-00000020.h5 --prime "the " --length 20 --seed 3 > sm 2>&1 \
  && grep -q "^the " sm && ok "sample" || bad "sample: $(cat sm)"
"$BUILD/rnn_prep" --input corpus.txt --output-dir wdata --format records --tokenizer word >/dev/null
"$BUILD/rnn_dist" eval --checkpoint c1/step-00000020.h5 --data wdata/train.h5 > out 2> err
[ $? -eq 2 ] && grep -q "vocabulary" err && ok "eval refuses another vocabulary" || bad "eval vocab: $(cat err)"

# Bad options: exit code 2, one line, printed once even with 2 ranks.
B="--max-steps 2 --embed 8 --hidden 8"
for opt in "--train data/train.h5 --layers -3" "--train data/train.h5 --optimizer rmsprop" "--train missing.h5" \
           "--train data/train.h5 --bogus 1" "--train data/train.h5 --batch-tokens 3"; do
  "$BUILD/rnn_dist" train $B $opt > out 2> err
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && ok "'$opt' -> exit 2: $(cat err)" || bad "'$opt' -> exit $rc: $(cat err)"
done
for opt in "--optimizer rmsprop" "--hidden 0" "--lr-schedule linear"; do
  mpirun --oversubscribe -np 2 "$BUILD/rnn_dist" train $B --train data/train.h5 $opt > out 2> err
  rc=$?
  [ $rc -eq 2 ] && [ "$(grep -c 'rnn_dist: error' err)" -eq 1 ] && ok "2 ranks, '$opt': exit 2, printed once" || bad "2 ranks, '$opt': exit $rc: $(cat err)"
done
"$BUILD/rnn_dist" train $A --checkpoint-dir /proc/rnn_dist > out 2> err
[ $? -eq 2 ] && grep -q checkpoint-dir err && ok "unwritable checkpoint dir -> exit 2" || bad "unwritable checkpoint dir: $(cat err)"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
