#!/usr/bin/env bash
# Fault tests of `rnn_dist train`: a data file missing on one rank, a rank that throws and a rank killed
# mid-training end every rank within seconds with one message; SIGTERM (on one rank or all) finishes the
# step, writes a checkpoint and exits 0, and --resume continues; after a killed rank, --resume reaches
# the parameters of an uninterrupted run; non-finite steps are skipped, then stop the job, agreed by all
# ranks and reported once. $1 = build directory.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
MPI="mpirun --oversubscribe -np 2"

awk 'BEGIN { srand(5); for (i = 0; i < 400; i++) { k = 5 + int(rand() * 40); line = ""
  for (j = 0; j < k; j++) line = line sprintf("%c", 97 + int(rand() * 6)); print line; print "%" } }' > corpus.txt
"$BUILD/rnn_prep" --input corpus.txt --output-dir data --format records >/dev/null || bad "rnn_prep"
A="--train data/train.h5 --embed 8 --hidden 16 --layers 1 --batch-size 4 --seed 3"

# A data file missing on rank 1 only: set-up fails there; one message from rank 0, exit 2, no hang.
start=$SECONDS
timeout 60 $MPI bash -c 'f=data/train.h5; [ "$OMPI_COMM_WORLD_RANK" = 1 ] && f=gone.h5
  exec "$0" train --train $f --embed 8 --hidden 16 --max-steps 5' "$BUILD/rnn_dist" > out 2> err
rc=$?
[ $rc -eq 2 ] && [ "$(grep -c 'rnn_dist: error' err)" -eq 1 ] && grep -q "rank 1: gone.h5" err && [ $((SECONDS - start)) -lt 30 ] \
  && ok "file missing on one rank -> exit 2, one message: $(grep 'rnn_dist: error' err)" || bad "missing on one rank: rc $rc: $(cat err)"

# A rank that throws mid-training ends every rank within seconds, naming the rank.
start=$SECONDS
RNN_DIST_TEST_FAIL=1:5 timeout 60 $MPI "$BUILD/rnn_dist" train $A --max-steps 50 > out 2> err
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((SECONDS - start)) -lt 30 ] && [ "$(grep -c 'rnn_dist: error' err)" -eq 1 ] \
  && grep -q "rnn_dist: error: rank 1 (.*): RNN_DIST_TEST_FAIL: injected failure at step 5" err \
  && ok "a throwing rank ends the job in $((SECONDS - start)) s (rc $rc)" || bad "throwing rank: rc $rc: $(head -5 err)"

# A rank killed (SIGKILL) mid-training: the others end within 30 s; --resume from the last checkpoint
# then reaches the parameters of an uninterrupted run (bitwise: same ranks, same threads).
$MPI "$BUILD/rnn_dist" train $A --max-steps 16 --checkpoint-dir full > log.full 2>&1 || bad "uninterrupted: $(tail -1 log.full)"
start=$SECONDS
RNN_DIST_TEST_FAIL=1:11:kill timeout 60 $MPI "$BUILD/rnn_dist" train $A --max-steps 16 --save-every 4 --checkpoint-dir k > log.k 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((SECONDS - start)) -lt 30 ] && [ -f k/step-00000008.h5 ] && [ ! -f k/step-00000012.h5 ] \
  && ok "killed rank ends the job in $((SECONDS - start)) s (rc $rc), last checkpoint step 8" || bad "killed rank: rc $rc: $(tail -3 log.k)"
ls k | grep -v '^step-0000000[48].h5$' > stray
[ ! -s stray ] && ok "no stray files in the checkpoint directory" || bad "stray files: $(cat stray)"
$MPI "$BUILD/rnn_dist" train $A --max-steps 16 --resume --checkpoint-dir k > log.k2 2>&1
grep -q "resumed from k/step-00000008.h5" log.k2 && h5diff full/step-00000016.h5 k/step-00000016.h5 /model > diff.out 2>&1 \
  && ok "resume after the kill equals the uninterrupted run" || bad "resume after kill: $(tail -2 log.k2) $(head -2 diff.out)"

# SIGTERM to a single-rank run: it finishes the step, checkpoints, exits 0; --resume continues.
"$BUILD/rnn_dist" train $A --epochs 100000 --log-every 1 --checkpoint-dir t > log.t 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "^epoch 1 step 2/" log.t && break; sleep 0.1; done
kill -TERM $pid
wait $pid
rc=$?
ck=$(ls t/step-*.h5 2>/dev/null | tail -1)
[ $rc -eq 0 ] && grep -q "stopped by signal 15 after step" log.t && [ -n "$ck" ] && "$BUILD/rnn_dist" info "$ck" > /dev/null \
  && ok "SIGTERM -> checkpoint $ck, exit 0" || bad "SIGTERM: rc $rc: $(tail -2 log.t)"
n=$(echo "$ck" | sed 's/.*step-0*\([0-9]*\).h5/\1/')
"$BUILD/rnn_dist" train $A --epochs 100000 --max-steps $((n + 3)) --resume --checkpoint-dir t > log.t2 2>&1
grep -q "resumed from $ck" log.t2 && [ -f "$(printf 't/step-%08d.h5' $((n + 3)))" ] && ok "resumed after SIGTERM" \
  || bad "resume after SIGTERM: $(head -3 log.t2)"

# SIGTERM to one rank of two: both stop after the same step, rank 0 checkpoints, exit 0.
$MPI "$BUILD/rnn_dist" train $A --epochs 100000 --log-every 1 --checkpoint-dir t2 > log.m 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "^epoch 1 step 2/" log.m && break; sleep 0.1; done
rank=$(pgrep -P $pid -f "rnn_dist train" | tail -1)
[ -n "$rank" ] && kill -TERM "$rank"
timeout 30 tail --pid=$pid -f /dev/null
wait $pid
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'stopped by signal 15' log.m)" -eq 1 ] && ls t2/step-*.h5 > /dev/null 2>&1 \
  && ok "SIGTERM to one of 2 ranks stops both cleanly" || bad "SIGTERM one rank: rc $rc: $(tail -3 log.m)"

# Non-finite losses: each step is skipped on every rank; --max-bad-steps in a row stop the job, once.
$MPI "$BUILD/rnn_dist" train $A --max-steps 30 --optimizer sgd --lr 1e30 --max-bad-steps 3 > out 2> err
rc=$?
[ $rc -eq 1 ] && [ "$(grep -c 'update skipped' out)" -eq 3 ] && [ "$(grep -c 'rnn_dist: error' err)" -eq 1 ] \
  && grep -q "3 consecutive steps with a non-finite loss" err && ok "non-finite steps skipped, then one error: $(cat err)" \
  || bad "non-finite policy: rc $rc: $(cat out err | tail -5)"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
