#!/usr/bin/env bash
# CLI tests of --sparse-embedding (issue 30): SGD gives the dense run's parameters bitwise; Adam's N ranks
# equal 1 rank within 1e-5 through both exchanges (gather and allreduce), with the hierarchical all-reduce,
# with overlap and with --accumulate; resume is bitwise; auto picks the exchange by bytes; clipping counts
# the sparse rows; a NaN skips the step everywhere; options it cannot honour are refused with one line.
# $1 = build directory.
source "$(dirname "$0")/lib/harness.sh"

# 600 sentences over a 300-word vocabulary: a step of 12 sentences touches a small part of it.
awk 'BEGIN { srand(5); for (i = 0; i < 600; i++) { k = 3 + int(rand() * 10); line = ""
    for (j = 0; j < k; j++) { r = rand(); line = line (j ? " " : "") "w" int(300 * r * r * r) }
    print line; print "%" } }' > corpus.txt
"$BUILD/rnn_prep" --input corpus.txt --output-dir data --tokenizer word --format records --valid-fraction 0 > /dev/null \
  || bad "rnn_prep"
A="--train data/train.h5 --embed 16 --hidden 24 --layers 2 --seed 7 --max-steps 20 --log-every 5"
train() {  # train NAME RANKS OPTIONS...: checkpoint in ck-NAME, log in log.NAME, metrics in m.NAME
  local name=$1 np=$2
  shift 2
  mpirun --oversubscribe -np "$np" "$BUILD/rnn_dist" train $A --checkpoint-dir "ck-$name" --metrics "m.$name" "$@" \
    > "log.$name" 2>&1 || bad "$name: $(tail -1 "log.$name")"
}
final() { echo "ck-$1/step-00000020.h5"; }
equal() {  # equal A B WHAT [h5diff options]: /model of both final checkpoints
  local a=$1 b=$2 what=$3
  shift 3
  if h5diff "$@" "$(final "$a")" "$(final "$b")" /model > diff.out 2>&1; then ok "$what"
  else bad "$what: $(head -3 diff.out)"; fi
}

train sgd-dense 1 --batch-size 12 --optimizer sgd --lr 0.5
train sgd-sparse 1 --batch-size 12 --optimizer sgd --lr 0.5 --sparse-embedding
equal sgd-dense sgd-sparse "sgd: --sparse-embedding gives the dense run's parameters bitwise"
grep -q "sparse embedding gradient (exchange auto)" log.sgd-sparse && ok "the start line names the sparse gradient" \
  || bad "start line: $(grep '^rnn_dist train' log.sgd-sparse)"
rows=$(grep -o '"sparse_rows_per_step":[0-9.]*' m.sgd-sparse | cut -d: -f2)
vocab=$("$BUILD/rnn_dist" info data/train.h5 2>/dev/null | grep -o 'vocabulary [0-9]*' | grep -o '[0-9]*')
awk -v r="$rows" 'BEGIN { exit !(r > 10 && r < 120) }' && ok "a step touches $rows of the vocabulary's rows" \
  || bad "rows per step: '$rows' (vocabulary ${vocab:-?})"

# Adam: SparseAdam's semantics differ from dense Adam on the embedding only.
train adam-dense 1 --batch-size 12
train adam 1 --batch-size 12 --sparse-embedding
if h5diff "$(final adam-dense)" "$(final adam)" /model/emb.weight > /dev/null 2>&1; then
  bad "adam: the sparse embedding's update equals the dense one (untouched rows' moments should not decay)"
else
  ok "adam: the embedding's update differs from dense Adam's (untouched rows keep their moments)"
fi
h5diff "$(final adam-dense)" "$(final adam)" /model/lstm.weight_hh_l0 > /dev/null 2>&1 \
  && bad "adam: the LSTM's weights equal dense Adam's although the embedding's differ" \
  || ok "adam: the rest follows from the embedding (different after 20 steps)"
for way in gather allreduce; do
  train adam-2-$way 2 --batch-size 6 --sparse-embedding --sparse-exchange $way
  equal adam adam-2-$way "adam, 2 ranks, --sparse-exchange $way: 1 rank's parameters within 1e-5" -d 1e-5
  train adam-3-$way 3 --batch-size 4 --sparse-embedding --sparse-exchange $way
  equal adam adam-3-$way "adam, 3 ranks, --sparse-exchange $way: 1 rank's parameters within 1e-5" -d 1e-5
done
[ "$(grep -o '"sparse_gathered_steps":[0-9]*' m.adam-3-gather)" = '"sparse_gathered_steps":20' ] \
  && [ "$(grep -o '"sparse_gathered_steps":[0-9]*' m.adam-3-allreduce)" = '"sparse_gathered_steps":0' ] \
  && ok "--sparse-exchange gather and allreduce go their way at every step" \
  || bad "exchange ways: $(grep -ho '"sparse_gathered_steps":[0-9]*' m.adam-3-*)"
# Bytes per rank and step as the model says: gather (n-1) k (E+1) 4 for 3 ranks, allreduce 2 (n-1)/n V E 4 + ids.
gb=$(grep -o '"sparse_exchange_bytes_per_step":[0-9.e+]*' m.adam-3-gather | cut -d: -f2)
ab=$(grep -o '"sparse_exchange_bytes_per_step":[0-9.e+]*' m.adam-3-allreduce | cut -d: -f2)
awk -v g="$gb" -v a="$ab" 'BEGIN { exit !(g > 0 && a > g) }' && ok "gather moves fewer bytes here ($gb against $ab per rank and step)" \
  || bad "exchange bytes: gather '$gb', allreduce '$ab'"
# The exchange's time on rank 0, and after the agreement on k on the slowest rank (both positive; the
# latter leaves out the agreement, the wait for the last rank).
es=$(grep -o '"sparse_exchange_s_per_step":[0-9.e+-]*' m.adam-3-gather | cut -d: -f2)
gs=$(grep -o '"sparse_after_agreement_s_per_step_slowest":[0-9.e+-]*' m.adam-3-gather | cut -d: -f2)
awk -v e="$es" -v g="$gs" 'BEGIN { exit !(e > 0 && g > 0 && g < 10) }' \
  && ok "the exchange timed: $es s per step on rank 0, after the agreement on k $gs s on the slowest rank" \
  || bad "exchange times: '$es', '$gs'"
train adam-3-auto 3 --batch-size 4 --sparse-embedding
[ "$(grep -o '"sparse_gathered_steps":[0-9]*' m.adam-3-auto)" = '"sparse_gathered_steps":20' ] \
  && ok "auto gathers where that moves fewer bytes" || bad "auto: $(grep -o '"sparse_gathered_steps":[0-9]*' m.adam-3-auto)"
train adam-4-hier 4 --batch-size 3 --sparse-embedding --ranks-per-node 2 --allreduce hierarchical
equal adam adam-4-hier "adam, 4 ranks, hierarchical all-reduce: 1 rank's parameters within 1e-5" -d 1e-5
train adam-3-overlap 3 --batch-size 4 --sparse-embedding --overlap on --bucket-mb 0.002
grep -q "all-reduce overlapped in [2-9][0-9]* bucket(s)" log.adam-3-overlap && ok "overlap: the dense part in several buckets" \
  || bad "overlap: $(grep '^rnn_dist train' log.adam-3-overlap)"
equal adam adam-3-overlap "adam, 3 ranks with overlap: 1 rank's parameters within 1e-5" -d 1e-5
train adam-acc 1 --batch-size 6 --accumulate 2 --sparse-embedding
equal adam adam-acc "adam, --accumulate 2 of 6: the batch of 12 within 1e-5" -d 1e-5

# Resume: 10 steps, then 10 more, bitwise the 20 straight (parameters and optimizer state).
mpirun --oversubscribe -np 2 "$BUILD/rnn_dist" train ${A/--max-steps 20/--max-steps 10} --batch-size 6 --sparse-embedding \
  --checkpoint-dir ck-resume > log.r1 2>&1 || bad "resume, first half: $(tail -1 log.r1)"
mpirun --oversubscribe -np 2 "$BUILD/rnn_dist" train $A --batch-size 6 --sparse-embedding --checkpoint-dir ck-resume --resume \
  > log.r2 2>&1 || bad "resume, second half: $(tail -1 log.r2)"
train straight 2 --batch-size 6 --sparse-embedding
for g in /model /optimizer; do
  h5diff "$(final straight)" "$(final resume)" $g > diff.out 2>&1 && ok "resume: $g bitwise the straight run's" \
    || bad "resume $g: $(head -3 diff.out)"
done

# Clipping: the norm counts the sparse rows (the dense run's norm, to rounding), and SGD stays the dense run.
train clip-dense 1 --batch-size 12 --optimizer sgd --lr 0.5 --clip-norm 0.05
train clip-sparse 1 --batch-size 12 --optimizer sgd --lr 0.5 --clip-norm 0.05 --sparse-embedding
paste <(grep -o 'grad_norm [0-9.]*' log.clip-dense) <(grep -o 'grad_norm [0-9.]*' log.clip-sparse) > norms
[ -s norms ] && awk '{ if ($2 != $4) exit 1 }' norms && ok "clip: the logged gradient norms equal the dense run's ($(head -1 norms))" \
  || bad "clip norms: $(head -2 norms)"
equal clip-dense clip-sparse "clip: sgd parameters within 1e-6 of the dense run's" -d 1e-6

# A NaN in rank 1's step 3 skips the step on both ranks.
RNN_DIST_TEST_FAIL=1:3:nan mpirun --oversubscribe -np 2 -x RNN_DIST_TEST_FAIL "$BUILD/rnn_dist" train $A --batch-size 6 \
  --sparse-embedding > log.nan 2>&1
grep -q "^step 3: non-finite loss or gradient norm, update skipped" log.nan && grep -q "step 20/20" log.nan \
  && ok "a NaN of rank 1's step 3 skips the step on every rank" || bad "NaN: $(tail -3 log.nan)"

# Refused, with one line naming both options: exit 2.
for opt in "--optimizer sgd --momentum 0.9" "--optimizer sgd --weight-decay 0.01" "--tie-embeddings --embed 24" \
           "--sparse-exchange sometimes"; do
  "$BUILD/rnn_dist" train $A --batch-size 12 --sparse-embedding $opt > out 2> err
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q -- "--sparse-e" err && ok "'--sparse-embedding $opt' -> exit 2: $(cat err)" \
    || bad "'--sparse-embedding $opt' -> exit $rc: $(cat err)"
done
finish
