#!/usr/bin/env bash
# Fault tests of `rnn_dist train`: a data file missing on one rank, a rank that throws and a rank killed
# mid-training end every rank within seconds with one message, and so does a rank that hangs (the
# watchdog); SIGTERM (on one rank or all) finishes the step, writes a checkpoint and exits 0, and --resume
# continues; after a killed rank, --resume reaches the parameters of an uninterrupted run; non-finite
# steps are skipped, then stop the job, agreed by all ranks and reported once; damaged data and
# checkpoints are refused by name; SIGKILL during checkpoint writes never leaves a damaged checkpoint; a
# full disk loses nothing; runs are bitwise repeatable.
# $1 = build directory.
source "$(dirname "$0")/lib/harness.sh"
MOUNTS=()
cleanup() { for m in "${MOUNTS[@]}"; do umount "$m"; done; }
MPI="mpirun --oversubscribe -np 2"

awk 'BEGIN { srand(5); for (i = 0; i < 400; i++) { k = 5 + int(rand() * 40); line = ""
  for (j = 0; j < k; j++) line = line sprintf("%c", 97 + int(rand() * 6)); print line; print "%" } }' > corpus.txt
"$BUILD/rnn_prep" --input corpus.txt --output-dir data --format records >/dev/null || bad "rnn_prep"
M="--embed 8 --hidden 16 --layers 1 --batch-size 4 --seed 3"
A="--train data/train.h5 $M"

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

# A rank that hangs (never reaches the step's all-reduce): the others would wait forever inside MPI; the
# watchdog (--comm-timeout) ends the job, with one message from rank 0 naming the step. Also with the
# all-reduce overlapped in buckets: rank 0's communication thread waits in the first group while its
# backward pass goes on, and the watchdog, armed for every group, names its buckets.
hang_test() {  # $1 = what, $2 = the message's part before "the gradient all-reduce", then options
  local what=$1 names=$2 rc
  shift 2
  start=$SECONDS
  RNN_DIST_TEST_FAIL=1:5:hang timeout 60 $MPI "$BUILD/rnn_dist" train $A --max-steps 50 --comm-timeout 3 "$@" > out 2> err
  rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((SECONDS - start)) -lt 30 ] && [ "$(grep -c 'rnn_dist: error' err)" -eq 1 ] \
    && grep -q "rnn_dist: error: rank 0 (.*): step 5: ${names}the gradient all-reduce did not complete within 3 s" err \
    && ok "$what: the watchdog ends the job in $((SECONDS - start)) s (rc $rc), one message" \
    || bad "$what: rc $rc after $((SECONDS - start)) s: $(head -5 err)"
}
hang_test "a hanging rank" ""
hang_test "a hanging rank, overlapped all-reduce" "buckets\? 1\(-[0-9]*\)\? of [0-9]* of " --overlap on --bucket-mb 0.002
# A rank killed while the others' buckets are in flight ends the job too.
start=$SECONDS
RNN_DIST_TEST_FAIL=1:5:kill timeout 60 $MPI "$BUILD/rnn_dist" train $A --max-steps 50 --comm-timeout 20 \
  --overlap on --bucket-mb 0.002 > out 2> err
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((SECONDS - start)) -lt 30 ] \
  && ok "a rank killed mid-overlap ends the job in $((SECONDS - start)) s (rc $rc)" \
  || bad "killed rank with overlap: rc $rc after $((SECONDS - start)) s: $(head -5 err)"

# A placement refused on one node only (emulated nodes: 4 ranks, 2 per node; rank 2 fails where the
# duplicate-GPU verdict is taken, after the node-level gather): every rank agrees on it before any rank
# connects, where on GPUs the other node would wait in NCCL's set-up forever. One message, exit 1, and no
# placement lines (--verbose prints them only once connected).
start=$SECONDS
RNN_DIST_TEST_FAIL=2:check timeout 60 mpirun --oversubscribe -np 4 "$BUILD/rnn_dist" train $A --max-steps 5 \
  --ranks-per-node 2 --verbose --comm-timeout 5 > out 2> err
rc=$?
[ $rc -eq 1 ] && [ $((SECONDS - start)) -lt 30 ] && [ "$(grep -c 'rnn_dist: error' err)" -eq 1 ] \
  && grep -q "rnn_dist: error: rank 2: RNN_DIST_TEST_FAIL: injected failure at check" err && ! grep -q "^placement:" out \
  && ok "a placement refused on one node ends every rank before they connect ($((SECONDS - start)) s), one message" \
  || bad "placement refused on one node: rc $rc after $((SECONDS - start)) s: $(head -5 err) $(grep placement out | head -2)"

# A rank that hangs while the ranks connect (on GPUs: inside NCCL's set-up, which has no deadline of its
# own): the watchdog is armed from the start of the set-up to the agreement after it, so rank 0 ends the
# job with one message.
start=$SECONDS
RNN_DIST_TEST_FAIL=1:connect:hang timeout 60 $MPI "$BUILD/rnn_dist" train $A --max-steps 5 --comm-timeout 3 > out 2> err
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((SECONDS - start)) -lt 30 ] && [ "$(grep -c 'rnn_dist: error' err)" -eq 1 ] \
  && grep -q "rnn_dist: error: rank 0 (.*): the set-up of the communicators did not complete within 3 s" err \
  && ok "a rank hanging in the set-up: the watchdog ends the job in $((SECONDS - start)) s (rc $rc), one message" \
  || bad "hang in the set-up: rc $rc after $((SECONDS - start)) s: $(head -5 err)"

# mpirun across nodes (emulated: the rank's OMPI_MCA_orte_num_nodes) with a TCP keepalive that is unset or
# slower than --comm-timeout: one warning line with settings that fit; none once they do.
KA="OMPI_MCA_oob_tcp_keepalive_time=2 OMPI_MCA_oob_tcp_keepalive_intvl=1 OMPI_MCA_oob_tcp_keepalive_probes=1"
KA_SLOW="OMPI_MCA_oob_tcp_keepalive_time=10 OMPI_MCA_oob_tcp_keepalive_intvl=2 OMPI_MCA_oob_tcp_keepalive_probes=5"
for case in "|is not set" "$KA_SLOW|notices a lost node only after 20 s" "$KA|"; do
  vars=${case%|*} want=${case#*|}
  $MPI env OMPI_MCA_orte_num_nodes=2 $vars "$BUILD/rnn_dist" train $A --max-steps 1 --comm-timeout 5 > out 2> err
  n=$(grep -c "warning: mpirun across 2 nodes with --comm-timeout 5 s" err)
  if [ -n "$want" ]; then
    [ "$n" -eq 1 ] && grep -q "$want.*export OMPI_MCA_oob_tcp_keepalive_time=2 OMPI_MCA_oob_tcp_keepalive_intvl=1 OMPI_MCA_oob_tcp_keepalive_probes=1" err \
      && ok "keepalive '${vars:-unset}' with --comm-timeout 5: one warning with the fix" || bad "keepalive warning: $(cat err)"
  else
    [ "$n" -eq 0 ] && ok "keepalive detecting in 3 s, below --comm-timeout 5: no warning" || bad "keepalive that fits: $(cat err)"
  fi
done

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

# Signals to mpirun itself: USR1 is forwarded, every rank checkpoints and mpirun exits 0. TERM ends the
# job the way Open MPI ends a job it is told to: mpirun exits 1, and the ranks may be killed before they
# checkpoint (README: send USR1); what is there is not damaged.
# mpirun runs in a session of its own (setsid execs it: $! is mpirun): a TERM that reaches it before its
# handlers are set up (a loaded machine) ends its process group, which must not be this shell's, and
# the run gets 60 s to reach step 50.
for sig in USR1 TERM; do
  rm -rf sig
  setsid $MPI "$BUILD/rnn_dist" train $A --epochs 100000 --log-every 1 --save-every 20 --checkpoint-dir sig > log.sig 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "^epoch [0-9]* step 50/" log.sig && break; sleep 0.1; done
  kill -$sig $pid
  wait $pid
  rc=$?
  loads=1
  for f in sig/step-*.h5; do "$BUILD/rnn_dist" info "$f" > /dev/null 2>&1 || loads=0; done
  if [ $sig = USR1 ]; then
    [ $rc -eq 0 ] && grep -q "stopped by signal 10" log.sig && [ $loads = 1 ] \
      && ok "SIGUSR1 to mpirun: every rank checkpointed, mpirun exits 0" || bad "SIGUSR1 to mpirun: rc $rc: $(tail -3 log.sig)"
  else
    [ $rc -eq 1 ] && [ $loads = 1 ] && ok "SIGTERM to mpirun: exit 1, every checkpoint there loads" \
      || bad "SIGTERM to mpirun: rc $rc: $(ls sig)"
  fi
done

# Non-finite losses (--lr 3e38: after the first update the forward pass overflows): each step is skipped
# on every rank; --max-bad-steps in a row stop the job, once.
$MPI "$BUILD/rnn_dist" train $A --max-steps 30 --optimizer sgd --lr 3e38 --max-bad-steps 3 > out 2> err
rc=$?
[ $rc -eq 1 ] && [ "$(grep -c 'update skipped' out)" -eq 3 ] && [ "$(grep -c 'rnn_dist: error' err)" -eq 1 ] \
  && grep -q "3 consecutive steps with a non-finite loss" err && ok "non-finite steps skipped, then one error: $(cat err)" \
  || bad "non-finite policy: rc $rc: $(cat out err | tail -5)"

# Determinism: the same seed, data, ranks and threads give bitwise-identical parameters.
for r in 1 2; do
  $MPI "$BUILD/rnn_dist" train $A --max-steps 12 --threads 2 --dropout 0.2 --deterministic --checkpoint-dir det$r > log.det$r 2>&1 \
    || bad "determinism run $r: $(tail -1 log.det$r)"
done
h5diff det1/step-00000012.h5 det2/step-00000012.h5 /model > diff.out 2>&1 && ok "two identical runs give bitwise-equal parameters" \
  || bad "runs differ: $(head -3 diff.out)"

# Damaged data: not HDF5, truncated on disk, truncated while training (HDF5 then reads zeros).
echo "plain text" > text.h5
head -c 3000 data/train.h5 > short.h5
for f in text.h5 short.h5; do
  $MPI "$BUILD/rnn_dist" train $M --train $f --max-steps 2 > out 2> err
  rc=$?
  [ $rc -eq 2 ] && [ "$(grep -c 'rnn_dist: error' err)" -eq 1 ] && grep -q "$f" err && ok "$f -> exit 2: $(grep error err)" \
    || bad "$f: rc $rc: $(cat err)"
done
cp data/train.h5 vanishing.h5
start=$SECONDS
"$BUILD/rnn_dist" train $M --train vanishing.h5 --epochs 100000 --log-every 1 > log.v 2> err &
pid=$!
for _ in $(seq 100); do grep -q "^epoch 1 step 2/" log.v && break; sleep 0.1; done
truncate -s 20000 vanishing.h5
timeout 30 tail --pid=$pid -f /dev/null
wait $pid
rc=$?
[ $rc -eq 2 ] && grep -q "vanishing.h5: sequence .* (<pad>, never stored" err && [ $((SECONDS - start)) -lt 30 ] \
  && ok "data file truncated mid-training -> exit 2: $(cat err)" || bad "truncated mid-training: rc $rc: $(cat err)"

# Damaged checkpoints: a flipped parameter (checksum), a truncated file; --resume=require with none.
"$BUILD/rnn_dist" train $A --max-steps 4 --checkpoint-dir good > /dev/null 2>&1
mkdir cbad
cp good/step-00000004.h5 cbad/step-00000004.h5
off=$(h5dump -p -H -d /model/out.weight cbad/step-00000004.h5 | sed -n 's/.*OFFSET \([0-9]*\).*/\1/p')
printf '\177\177\177\177' | dd of=cbad/step-00000004.h5 bs=1 seek=$((off + 8)) conv=notrunc status=none
"$BUILD/rnn_dist" train $A --max-steps 8 --resume --checkpoint-dir cbad > out 2> err
rc=$?
[ -n "$off" ] && [ $rc -eq 2 ] && grep -q "cbad/step-00000004.h5: parameter checksum mismatch" err && [ ! -f cbad/step-00000008.h5 ] \
  && ok "corrupted checkpoint refused: $(cat err)" || bad "corrupted checkpoint: rc $rc: $(cat err)"
head -c 20000 good/step-00000004.h5 > trunc.h5
"$BUILD/rnn_dist" eval --checkpoint trunc.h5 --data data/train.h5 --device cpu > out 2> err
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q "trunc.h5" err && ok "truncated checkpoint -> exit 2: $(cat err)" \
  || bad "truncated checkpoint: rc $rc: $(cat err)"
$MPI "$BUILD/rnn_dist" train $A --max-steps 2 --resume=require --checkpoint-dir nothing > out 2> err
rc=$?
[ $rc -eq 2 ] && [ "$(grep -c 'rnn_dist: error' err)" -eq 1 ] && grep -q "resume=require: no checkpoint" err \
  && ok "--resume=require without a checkpoint -> exit 2" || bad "--resume=require: rc $rc: $(cat err)"

# A step whose gradient is NaN on one rank (as an overflow makes it) is skipped on every rank; the run
# finishes, says so, and exits 4; no checkpoint is written inside the streak of skipped steps.
RNN_DIST_TEST_FAIL=0:3:nan $MPI -x RNN_DIST_TEST_FAIL "$BUILD/rnn_dist" train $A --max-steps 6 --save-every 1 --keep 10 \
  --checkpoint-dir skip > out 2> err
rc=$?
[ $rc -eq 4 ] && grep -q "^finished with 1 step(s) skipped for a non-finite loss or gradient norm .*exit status 4" out \
  && [ "$(ls skip | tr '\n' ' ')" = "step-00000001.h5 step-00000002.h5 step-00000004.h5 step-00000005.h5 step-00000006.h5 " ] \
  && ok "a skipped step: the run finishes with exit 4 and says so; no checkpoint of the skipped step" \
  || bad "skipped step: rc $rc: $(tail -2 out) $(ls skip)"
# A diverged model (--lr 1e30 with weight decay: the loss of step 2 is finite, its update overflows) is
# never checkpointed: the job ends naming the last good checkpoint, which stays; eval of it says the
# parameters have diverged.
"$BUILD/rnn_dist" train $A --optimizer sgd --lr 1e30 --weight-decay 0.1 --max-steps 8 --save-every 1 --keep 3 --checkpoint-dir dvg > out 2> err
rc=$?
[ $rc -eq 1 ] && grep -q "step 2: the parameters or the optimizer state are not finite, so no checkpoint was written (the last good one is dvg/step-00000001.h5)" err \
  && [ "$(ls dvg)" = step-00000001.h5 ] && ok "a diverged model is not checkpointed: $(cat err)" || bad "diverged: rc $rc: $(cat err); $(ls dvg)"
"$BUILD/rnn_dist" eval --checkpoint dvg/step-00000001.h5 --data data/train.h5 > out 2> err
rc=$?
[ $rc -eq 1 ] && grep -q "the checkpoint's parameters have diverged" err && ok "eval of diverged parameters -> exit 1: $(cat err)" \
  || bad "eval of diverged parameters: rc $rc: $(cat out err)"

# SIGKILL at random points of a run that checkpoints every step: every file under a checkpoint name
# loads, and each rerun resumes from the newest.
W="--train data/train.h5 --embed 16 --hidden 96 --layers 2 --batch-size 4 --seed 3 --save-every 1 --keep 2"
shopt -s nullglob
good_kills=0 mid_write=0
for delay in 0.05 0.1 0.15 0.2 0.25; do
  "$BUILD/rnn_dist" train $W --epochs 100000 --log-every 1 --resume --checkpoint-dir kw > log.kw 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q "^epoch" log.kw && break; sleep 0.1; done
  sleep $delay
  kill -KILL $pid
  wait $pid 2>/dev/null
  all_load=1
  ls kw | grep -q '\.tmp\.' && mid_write=$((mid_write + 1))
  for f in kw/step-*.h5; do "$BUILD/rnn_dist" info "$f" > /dev/null 2>&1 || all_load=0; done
  [ $all_load -eq 1 ] && good_kills=$((good_kills + 1))
done
newest=$(ls kw/step-*.h5 | tail -1)
"$BUILD/rnn_dist" train $W --epochs 100000 --log-every 1 --resume --checkpoint-dir kw > log.kw2 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "^epoch" log.kw2 && break; sleep 0.1; done
kill -TERM $pid
wait $pid
shopt -u nullglob
[ $good_kills -eq 5 ] && [ -n "$newest" ] && grep -q "resumed from $newest" log.kw2 && ok "5 kills during checkpointing ($mid_write mid-write): every checkpoint loads, resume from $newest" \
  || bad "kill during checkpoint writes: $good_kills/5 clean; newest $newest; $(grep -v device log.kw2 | head -3)"

# A full disk (a small tmpfs): the checkpoint write fails with the file named and the system's reason, exit
# 1 (not 2: a full disk is not bad input), the previous checkpoint stays and no partial file is left;
# rnn_prep likewise leaves nothing behind. A metrics file that cannot be written is reported once, with
# the reason; training goes on and finishes with exit 4.
size=$(stat -c %s good/step-00000004.h5)
mkdir -p full
if mount -t tmpfs -o size=$((size * 3 / 2 / 1024 + 4))k tmpfs full 2> mount.err; then
  MOUNTS+=("$T/full")
  cp -r good full/ck
  "$BUILD/rnn_dist" train $A --max-steps 8 --resume --checkpoint-dir full/ck > out 2> err
  rc=$?
  [ $rc -eq 1 ] && grep -q "full/ck/step-00000008.h5.*: No space left on device" err && [ "$(ls full/ck)" = "step-00000004.h5" ] \
    && "$BUILD/rnn_dist" info full/ck/step-00000004.h5 > /dev/null && ok "disk full during a checkpoint: $(cat err)" \
    || bad "disk full checkpoint: rc $rc: $(cat err); left: $(ls full/ck)"
  rm -rf full/ck
  awk -v n=$((size * 3 / 61)) 'BEGIN { srand(2); for (i = 0; i < n; i++) { s = ""
    for (j = 0; j < 60; j++) s = s sprintf("%c", 97 + int(rand() * 26)); print s; print "%" } }' > big.txt
  "$BUILD/rnn_prep" --input big.txt --output-dir full/prep --format records --tokenizer byte > out 2> err
  rc=$?
  [ $rc -eq 1 ] && grep -q "No space left on device" err && [ -z "$(ls -A full/prep 2>/dev/null)" ] \
    && ok "disk full in rnn_prep: $(cat err)" || bad "disk full rnn_prep: rc $rc: $(cat err); left: $(ls -A full/prep)"
  rm -rf full/prep
  dd if=/dev/zero of=full/filler bs=64k 2>/dev/null  # until the tmpfs is full
  "$BUILD/rnn_dist" train $A --max-steps 8 --log-every 2 --metrics full/m.jsonl > out 2> err
  rc=$?
  [ $rc -eq 4 ] && [ "$(grep -c 'rnn_dist: warning: --metrics full/m.jsonl: cannot write: No space left on device' err)" -eq 1 ] \
    && grep -q "^finished with the metrics file incomplete" out && grep -q "^epoch 1 step 8/8" out \
    && ok "metrics on a full disk: one warning with the reason, training finished, exit 4" \
    || bad "metrics on a full disk: rc $rc: $(cat err) $(tail -2 out)"
else
  echo "SKIP: disk-full tests: cannot mount a tmpfs here: $(cat mount.err)"
fi

finish
