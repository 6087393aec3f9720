#!/usr/bin/env bash
# CLI tests of the overlapped and the bfloat16 gradient all-reduce: --overlap on (buckets summed by a
# communication thread during the backward pass) gives the parameters of --overlap off after 20 steps,
# bitwise on 2 ranks and within 1e-6 relative on 4 (hierarchical), in packed and stream runs and for a
# bidirectional classifier, and those of one big batch with --accumulate; the buckets leave during the
# backward pass (the metrics' lead times); a NaN on one rank skips the step everywhere; --allreduce-dtype bf16 changes nothing on 1 rank and stays within bfloat16's rounding on 2; bad
# values are refused with one line. $1 = build directory.
source "$(dirname "$0")/lib/harness.sh"

awk 'BEGIN { srand(3); n = split("the quick brown fox jumps over a lazy dog while seven wizards quietly hex jam bags", w, " ")
  for (i = 0; i < 600; i++) { k = 2 + int(rand() * 11); line = ""
    for (j = 0; j < k; j++) line = line (j ? " " : "") w[1 + int(rand() * n)]
    print line; print "%" } }' > corpus.txt
"$BUILD/rnn_prep" --input corpus.txt --output-dir data --format records >/dev/null || bad "rnn_prep"
# 16,367 parameters: 0.004 MB buckets (1,048 floats) cut them into 16.
A="--train data/train.h5 --embed 16 --hidden 32 --layers 2 --seed 7 --max-steps 20 --log-every 5 --bucket-mb 0.004"
P=step-00000020.h5

train() {  # $1 = ranks, $2 = checkpoint directory, then options
  local np=$1 dir=$2; shift 2
  rm -rf "$dir"
  mpirun --oversubscribe -np "$np" "$BUILD/rnn_dist" train $A --checkpoint-dir "$dir" "$@" > "log.$dir" 2>&1 \
    || bad "$dir: $(tail -1 "log.$dir")"
}
bitwise() {  # $1, $2 = checkpoints, $3 = what
  if h5diff "$1" "$2" /model > diff.out 2>&1; then ok "$3: parameters bitwise equal"
  else bad "$3: parameters differ: $(head -3 diff.out)"; fi
}
relative() {  # $1, $2 = checkpoints, $3 = bound, $4 = what
  if h5diff -p "$3" "$1" "$2" /model > diff.out 2>&1; then ok "$4: parameters equal within $3 relative"
  else bad "$4: parameters differ: $(head -3 diff.out)"; fi
}

# Packed, 2 ranks: bitwise (a sum of two values does not depend on the order); the thread did cut 16 buckets.
train 2 off2 --batch-size 6 --overlap off
train 2 on2 --batch-size 6 --overlap on --metrics on2.jsonl
grep -q "all-reduce overlapped in 16 bucket(s)" log.on2 && ! grep -q "overlapped" log.off2 \
  && ok "--overlap on announces 16 buckets, off none" || bad "bucket announcement: $(grep 'rnn_dist train' log.on2 log.off2)"
bitwise off2/$P on2/$P "packed, 2 ranks, overlap on vs off"
# The buckets did leave during the backward pass: the first (the output layer's) was sent before the pass
# ended, those of LSTM layer 1 (8,448 parameters, 8 buckets) before the last group (layer 0 and the
# embedding), and every one completed after it was sent.
leads=$(sed -n 's/.*"bucket_lead_s":\[\([^]]*\)\].*/\1/p' on2.jsonl)
dones=$(sed -n 's/.*"bucket_done_s":\[\([^]]*\)\].*/\1/p' on2.jsonl)
early=$(awk -v l="$leads" 'BEGIN { n = split(l, a, ","); e = 0; for (i = 1; i <= n; ++i) e += a[i] > a[n]; print e }')
awk -v l="$leads" -v d="$dones" -v e="$early" 'BEGIN { n = split(l, a, ","); m = split(d, b, ",")
  ok = n == 16 && m == 16 && a[1] > 0 && e >= 8; for (i = 1; i <= n; ++i) ok = ok && b[i] > -a[i]; exit !ok }' \
  && ok "$early of 16 buckets left before the last group, the first $(cut -d, -f1 <<<"$leads") s before the backward pass ended" \
  || bad "bucket timing: $early buckets early; leads [$leads] done [$dones]"
# A non-finite gradient on one rank (injected before the backward pass, so its bucket carries it) is
# skipped on every rank with overlap too.
RNN_DIST_TEST_FAIL=1:3:nan mpirun --oversubscribe -np 2 -x RNN_DIST_TEST_FAIL "$BUILD/rnn_dist" train $A --batch-size 6 \
  --overlap on > log.nan 2>&1
grep -q "^step 3: non-finite loss or gradient norm, update skipped" log.nan && grep -q "step 20/20" log.nan \
  && ok "overlap: the NaN of rank 1's step 3 skips the step on every rank" || bad "NaN with overlap: $(tail -3 log.nan)"
# Packed, 4 ranks as 2 nodes of 2, hierarchical: reduce-scatter, cross-node all-reduce and all-gather per bucket.
train 4 off4 --batch-size 3 --ranks-per-node 2 --allreduce hierarchical --overlap off
train 4 on4 --batch-size 3 --ranks-per-node 2 --allreduce hierarchical --overlap on
relative off4/$P on4/$P 1e-6 "packed, 4 ranks hierarchical, overlap on vs off"
# Stream mode carries the state between steps; --accumulate overlaps only its last micro-batch.
train 2 soff --batch-size 6 --batching stream --bptt 9 --overlap off
train 2 son --batch-size 6 --batching stream --bptt 9 --overlap on
bitwise soff/$P son/$P "stream, 2 ranks, overlap on vs off"
train 2 aon --batch-size 2 --accumulate 3 --overlap on
# (Micro-batches add their gradients in another order than one batch: within 1e-5, as cli.train's --accumulate.)
if h5diff -d 1e-5 off2/$P aon/$P /model > diff.out 2>&1; then ok "--accumulate 3 x 2 with overlap vs batches of 6: within 1e-5"
else bad "--accumulate with overlap: $(head -3 diff.out)"; fi
# A bidirectional classifier: the reverse weights sit beside the forward ones in each layer's report.
awk 'BEGIN { srand(5); split("good great fine nice|bad awful poor sad|red green blue grey", fam, "|")
  split("pos neg col", lab, " "); n = split("the a it was very so and but", filler, " ")
  for (i = 0; i < 600; i++) { c = 1 + int(rand() * 3); split(fam[c], w, " "); k = 3 + int(rand() * 8); line = ""
    for (j = 0; j < k; j++) line = line (j ? " " : "") (rand() < 0.5 ? w[1 + int(rand() * 4)] : filler[1 + int(rand() * n)])
    print lab[c] "\t" line } }' > cls.tsv
"$BUILD/rnn_prep" --format tsv --tokenizer word --input cls.tsv --output-dir cls > /dev/null || bad "rnn_prep tsv"
C="--train cls/train.h5 --bidirectional --pool mean"
for ov in off on; do
  rm -rf "c$ov"
  mpirun --oversubscribe -np 2 "$BUILD/rnn_dist" train $C --embed 16 --hidden 32 --layers 2 --seed 7 --max-steps 20 \
    --batch-size 6 --bucket-mb 0.004 --overlap $ov --checkpoint-dir "c$ov" > "log.c$ov" 2>&1 || bad "classifier $ov: $(tail -1 "log.c$ov")"
done
bitwise coff/$P con/$P "bidirectional classifier, 2 ranks, overlap on vs off"

# auto: on from 4 ranks when the gradients fill several buckets; off for one bucket, or below 4 ranks.
train 4 auto4 --batch-size 3
train 4 auto4one --batch-size 3 --bucket-mb 25
train 2 auto2 --batch-size 6
grep -q "overlapped in 16 bucket(s)" log.auto4 && ! grep -q "overlapped" log.auto4one && ! grep -q "overlapped" log.auto2 \
  && ok "--overlap auto: on for 4 ranks and 16 buckets, off for one bucket or 2 ranks" \
  || bad "auto: $(grep 'rnn_dist train' log.auto4 log.auto4one log.auto2)"

# bfloat16 gradients: nothing travels on 1 rank, so nothing is rounded; on 2 ranks the parameters move
# off fp32's by bfloat16 rounding (the test fails if they are bitwise equal: nothing was rounded) and
# stay within 5e-3 (Adam's steps are lr-sized, 0.002, whatever the gradient's rounding; 0.0017 measured).
train 1 f1 --batch-size 12
train 1 b1 --batch-size 12 --allreduce-dtype bf16
bitwise f1/$P b1/$P "1 rank, bf16 vs fp32"
train 2 b2 --batch-size 6 --allreduce-dtype bf16 --overlap on
if h5diff off2/$P b2/$P /model > /dev/null 2>&1; then bad "2 ranks bf16: bitwise equal to fp32, nothing rounded"
elif h5diff -d 5e-3 off2/$P b2/$P /model > diff.out 2>&1; then ok "2 ranks, bf16 vs fp32: differ, within 5e-3"
else bad "2 ranks bf16 vs fp32: $(head -3 diff.out)"; fi
l32=$(grep -o 'step 20/20 loss [0-9.]*' log.off2 | awk '{print $4}')
l16=$(grep -o 'step 20/20 loss [0-9.]*' log.b2 | awk '{print $4}')
awk -v a="$l32" -v b="$l16" 'BEGIN { d = a - b; exit !(a > 0 && (d < 0 ? -d : d) < 0.01) }' \
  && ok "loss after 20 steps: fp32 $l32, bf16 $l16" || bad "loss fp32 '$l32' vs bf16 '$l16'"

# Refusals: one line naming the option, exit 2.
# bf16 with the hierarchical algorithm, overlapped: the buckets' reduce-scatter, cross-node sum and
# all-gather in bfloat16 give what one bf16 all-reduce after the backward pass gives, to bfloat16's
# rounding, and neither is fp32's.
train 4 hb16off --batch-size 3 --ranks-per-node 2 --allreduce hierarchical --overlap off --allreduce-dtype bf16
train 4 hb16on --batch-size 3 --ranks-per-node 2 --allreduce hierarchical --overlap on --allreduce-dtype bf16
if h5diff off4/$P hb16on/$P /model > /dev/null 2>&1; then bad "4 ranks hierarchical bf16: bitwise fp32, nothing rounded"
elif h5diff -d 5e-3 hb16off/$P hb16on/$P /model > diff.out 2>&1; then ok "4 ranks hierarchical bf16, overlap on vs off: within 5e-3"
else bad "hierarchical bf16 with overlap: $(head -3 diff.out)"; fi

refused() {  # $1 = what the message must say, then options
  local want=$1; shift
  "$BUILD/rnn_dist" train $A --batch-size 4 "$@" > out 2> err
  [ $? -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q -- "$want" err && ok "refused: $(cat err)" \
    || bad "$*: $(cat err)"
}
refused "--overlap: 'maybe' is not on, off or auto" --overlap maybe
refused "--bucket-mb must be in (0, 1e6\] MB, got 0" --bucket-mb 0
refused "--allreduce-dtype: 'fp16' is not fp32 or bf16" --allreduce-dtype fp16
refused "--overlap on: not on GPUs yet" --overlap on --device cuda
finish
