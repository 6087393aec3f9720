#!/usr/bin/env bash
# Slurm across a 2-node cluster (tests/cluster/cluster.sh slurm: slurmctld on the login node, a slurmd
# per node, munge): `srun --mpi=pmix` and `mpirun` inside an allocation run `rnn_dist check` over 2 nodes x
# 2 ranks; jobs/train_multinode.sbatch with --nodes=2 trains with the hierarchical all-reduce (srun and
# mpirun launchers); with TERM to its batch shell (the time-limit signal) it checkpoints, requeues and
# resumes to the end, equal bitwise to an uninterrupted run; a partition under srun ends the job's ranks
# and srun in time. $1 = build directory.
NODES=2
source "$(dirname "$0")/lib.sh"
bash "$CLUSTER" slurm "$D" > slurm.log 2>&1 && ok "slurm: 2 nodes idle" || { bad "slurm did not start: $(cat slurm.log)"; exit 1; }
export SLURM_CONF=$D/slurm.conf RNN_DIST_HOME=$HOME_DIR RNN_DIST_BUILD=$BIN
make_data || bad "rnn_prep"
J=$HOME_DIR/jobs
NODE_OPTS=(--nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 --time=10)

on head timeout 60 srun -N2 -n4 --mpi=pmix "$BIN/rnn_dist" check > srun.out 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "rnn_dist check: 4 rank(s) on 2 host(s), 2 node(s)" srun.out \
  && ok "srun --mpi=pmix -N2 -n4: check passes on 2 nodes" || bad "srun check: rc $rc: $(tail -5 srun.out)"
on head timeout 60 salloc -N2 -n4 mpirun "$BIN/rnn_dist" check > salloc.out 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "rnn_dist check: 4 rank(s) on 2 host(s), 2 node(s)" salloc.out \
  && ok "mpirun inside salloc -N2 -n4: check passes on 2 nodes" || bad "mpirun in salloc: rc $rc: $(tail -5 salloc.out)"

cat > job.conf <<EOF
train = data/train.h5
embed = 8
hidden = 32
layers = 2
batch-size = 2
epochs = 1000
log-every = 10
seed = 5
device = cpu
comm-timeout = 60
EOF
# JOB_ID of a job submitted with --parsable into FILE.
job_id() { for _ in $(seq 40); do [ -s "$1" ] && { head -1 "$1"; return; }; sleep 0.25; done; }

for launcher in srun mpirun; do
  RNN_DIST_LAUNCHER=$launcher on head timeout 120 sbatch --wait --parsable -o ref-$launcher.out "${NODE_OPTS[@]}" \
    "$J/train_multinode.sbatch" job.conf --max-steps 1000 --checkpoint-dir ref-$launcher > /dev/null
  rc=$?
  [ $rc -eq 0 ] && grep -q "rnn_dist check: 4 rank(s) on 2 host(s), 2 node(s)" ref-$launcher.out \
    && grep -q "launcher $launcher, all-reduce hierarchical" ref-$launcher.out && [ -f ref-$launcher/step-00001000.h5 ] \
    && ok "train_multinode.sbatch --nodes=2 ($launcher): 1000 steps, hierarchical" \
    || { bad "train_multinode.sbatch ($launcher): exit $rc: $(tail -5 ref-$launcher.out)"
         echo "--- ref-$launcher.out (whole: a crash's backtrace is in it)"; cat ref-$launcher.out; }
done
h5diff ref-srun/step-00001000.h5 ref-mpirun/step-00001000.h5 /model > launchers.diff 2>&1 \
  && ok "srun and mpirun give the same parameters bitwise" || bad "srun and mpirun differ: $(head -3 launchers.diff)"

# TERM to the batch shell (what --signal=B:TERM@120 sends before the time limit; RNN_DIST_REQUEUE_WITHIN
# makes any time left count as near it): checkpoint, requeue, and the requeued run resumes to the end.
# Slurm holds a requeued job back for two minutes, so the test releases it.
RNN_DIST_REQUEUE_WITHIN=100000000 on head sbatch --parsable -o requeue.out "${NODE_OPTS[@]}" "$J/train_multinode.sbatch" \
  job.conf --max-steps 1000 --save-every 20 --checkpoint-dir requeue > requeue.id
id=$(job_id requeue.id)
# A checkpoint, not the log (which srun forwards in blocks), says that training runs.
for _ in $(seq 300); do compgen -G "requeue/step-*.h5" > /dev/null && break; sleep 0.2; done
if compgen -G "requeue/step-*.h5" > /dev/null; then
  # The batch shell: the job's script, found by its command line (its copy in slurmd's spool).
  batch=$(pgrep -o -f "slurm_script job.conf --max-steps 1000 --save-every 20 --checkpoint-dir requeue")
  [ -n "$batch" ] && kill -TERM "$batch" || bad "requeue: no batch shell of job $id"
  for _ in $(seq 450); do
    info=$(on head scontrol show job "$id")
    grep -q "Restarts=1" <<<"$info" && grep -qE "JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)" <<<"$info" \
      && grep -q "^resumed from" requeue.out && break
    # Released 3 s after the requeue, as in tests/cli/slurm.sh (a run started within the second of the
    # old run's credential revocation is refused as "Job credential revoked").
    if grep -q "Reason=BeginTime" <<<"$info"; then
      [ -z "${held:-}" ] && held=$SECONDS
      [ $((SECONDS - held)) -ge 3 ] && on head scontrol update JobId="$id" StartTime=now
    fi
    sleep 0.2
  done
fi
info=$(on head scontrol show job "$id" | grep -oE "(JobState|Restarts|ExitCode)=[^ ]*" | tr '\n' ' ')
n=$(sed -n 's/^stopped by signal 10 after step \([0-9]*\):.*/\1/p' requeue.out)
grep -q "JobState=COMPLETED" <<<"$info" && grep -q "Restarts=1 ExitCode=0:0" <<<"$info" && [ -n "$n" ] \
  && grep -q "requeueing to resume" requeue.out && grep -q "resumed from requeue/step-$(printf %08d "$n").h5" requeue.out \
  && ok "TERM to the batch shell: checkpoint at step $n on 2 nodes, requeued, resumed" \
  || { bad "requeue: $info (no checkpoint seen: $(ls requeue 2>&1 | head -3)): $(grep -E 'signal|requeue|resumed|error' requeue.out); last lines: $(tail -3 requeue.out)"
       echo "--- requeue.out (whole: a crash's backtrace is in it; issue 26 #7, tests/cluster/srun_loop.sh)"; cat requeue.out; }
h5diff ref-srun/step-00001000.h5 requeue/step-00001000.h5 /model > requeue.diff 2>&1 \
  && ok "the requeued job's result equals the uninterrupted run's bitwise" || bad "requeued result differs: $(head -3 requeue.diff)"

# A partition under srun (the job scripts' default launcher, --kill-on-bad-exit=1): node2's link down
# mid-run. Rank 0's deadline ends it, srun ends the step and returns, and node2's ranks end at their own
# deadline: within --comm-timeout + 30 s no rank is left on either node. Slurm's step daemon on node2
# stays until it can reach the controller again (Slurm's own business: it cannot be told anything), and
# the job is requeued once the controller declares node2 down. Last: node2 stays cut.
sed 's/^comm-timeout = .*/comm-timeout = 10/' job.conf > cut.conf
# No periodic checkpoints (a rank waiting for rank 0's write allows the file system 600 s more); rank 0's
# metrics file, written line by line, says when training runs.
on head sbatch --parsable -o cut.out "${NODE_OPTS[@]}" "$J/train_multinode.sbatch" cut.conf --max-steps 1000000 \
  --checkpoint-dir cut --metrics cut.jsonl > cut.id
for _ in $(seq 300); do [ -s cut.jsonl ] && break; sleep 0.2; done
ranks() { bash "$CLUSTER" procs "$D" "$1" | grep -c "build/rnn_dist "; }
start=$SECONDS
bash "$CLUSTER" cut "$D" node2
while [ $((SECONDS - start)) -le 40 ]; do
  [ "$(bash "$CLUSTER" procs "$D" node1 | grep -c ' srun ')" = 0 ] && [ "$(ranks node1)" = 0 ] && [ "$(ranks node2)" = 0 ] && break
  sleep 0.5
done
took=$((SECONDS - start))
left="node1: $(ranks node1) rank(s), $(bash "$CLUSTER" procs "$D" node1 | grep -c ' srun ') srun; node2: $(ranks node2) rank(s)"
[ $took -le 40 ] && [ "$left" = "node1: 0 rank(s), 0 srun; node2: 0 rank(s)" ] \
  && grep -q "rnn_dist: error: rank 0 (node1): step [0-9]*: the .* did not complete within 10 s" cut.out \
  && [ "$(grep -c 'rnn_dist: error' cut.out)" -le 1 ] \
  && ok "srun, a partition: srun returned and every rank ended within $took s, one error line" \
  || bad "srun, a partition: after $took s $left; $(grep -E 'rnn_dist: error|srun: error' cut.out | head -4)"

finish
