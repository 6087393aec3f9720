#!/usr/bin/env bash
# The job scripts of jobs/ on a real Slurm: starts munged, slurmctld and slurmd on this machine as a
# one-node cluster (configuration, state, spool and munge socket under a temporary directory, ports
# chosen per run), then: jobs/prep.sbatch prepares the fortunes corpus; jobs/cpu_smoke.sbatch trains with
# srun and with mpirun; a failing pre-flight check stops a job before training; `scancel --signal=TERM`
# stops a job with a loadable checkpoint and a resubmission resumes from it; training killed by a signal
# restarts and resumes (once; bitwise equal to an uninterrupted run); TERM to the batch shell (the
# time-limit signal of train_node.sbatch) checkpoints, requeues and resumes; train_multinode.sbatch runs
# the hierarchical all-reduce over two simulated nodes. Needs slurm-wlm, munge and fortunes
# (scripts/deps.sh installs them; this test installs nothing). The daemons it started are stopped, by
# PID, however it ends. $1 = build directory.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
pass=0 fail=0
ok() { echo "ok (${SECONDS}s): $1"; pass=$((pass + 1)); }
bad() { echo "FAIL (${SECONDS}s): $1"; fail=$((fail + 1)); }
for tool in munged slurmctld slurmd sbatch squeue scontrol scancel; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found: install slurm-wlm and munge (scripts/deps.sh)"; exit 1; }
done
[ -f /usr/share/games/fortunes/computers ] || { echo "FAIL: no fortunes corpus: install fortunes (scripts/deps.sh)"; exit 1; }

T=$(mktemp -d)
S=$T/slurm
mkdir -p "$S"/{state,spool,log,munge} "$T/work"
chmod 700 "$S/munge"

stop_daemons() {
  kill "${watchdog:-}" 2>/dev/null
  # Jobs first (their slurmstepd processes outlive slurmd), then the daemons, by the PIDs they wrote.
  if [ -f "$S/slurmctld.pid" ]; then
    scancel --full --signal=KILL $(squeue -h -o %i 2>/dev/null) 2>/dev/null
    for _ in $(seq 20); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.5; done
  fi
  for f in "$S/slurmd.pid" "$S/slurmctld.pid" "$S/munge/munged.pid"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null
  done
  rm -rf "$T"
}
trap stop_daemons EXIT
trap 'exit 1' INT TERM  # so that the EXIT trap runs when the test is interrupted
# ctest ends a test past its TIMEOUT (600 s) with SIGKILL, which no trap sees, and the daemons would stay:
# a watchdog sends TERM first. Killing the watchdog (at exit) also kills its sleep.
(trap 'kill $nap 2>/dev/null; exit 0' TERM; sleep 570 & nap=$!; wait $nap && kill -TERM $$) >/dev/null 2>&1 &
watchdog=$!

# Ports: a block of 50 chosen by this process id, moved on while any of it is in use.
base=$((20000 + ($$ % 400) * 50))
for _ in $(seq 10); do
  [ -z "$(ss -Htan "sport >= :$base and sport < :$((base + 50))" 2>/dev/null)" ] && break
  base=$((base + 50))
done

dd if=/dev/urandom of="$S/munge/key" bs=1024 count=1 2>/dev/null
chmod 600 "$S/munge/key"
/usr/sbin/munged --force --key-file="$S/munge/key" --socket="$S/munge/socket" --pid-file="$S/munge/munged.pid" \
  --log-file="$S/munge/log" --seed-file="$S/munge/seed" || { echo "FAIL: munged did not start"; exit 1; }
cat > "$S/slurm.conf" <<EOF
ClusterName=rnndist$$
SlurmctldHost=$(hostname -s)
SlurmctldPort=$base
SlurmdPort=$((base + 1))
SrunPortRange=$((base + 2))-$((base + 49))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/munge/socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
EnforcePartLimits=ALL
ReturnToService=2
# A killed rank's peers take srun's TERM as a stop request and wait for it until KILL, KillWait later.
KillWait=5
$(slurmd -C | head -1)
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$S/slurm.conf
slurmctld -f "$SLURM_CONF" && slurmd -f "$SLURM_CONF" || { echo "FAIL: slurmctld/slurmd did not start"; cat "$S"/log/*; exit 1; }
for _ in $(seq 60); do sinfo -h -o %T 2>/dev/null | grep -q idle && break; sleep 0.5; done
sinfo -h -o %T | grep -q idle && ok "one-node cluster up (ports $base-$((base + 49)))" \
  || { bad "node not idle: $(sinfo 2>&1)"; tail -5 "$S"/log/*; exit 1; }

cd "$T/work"
export RNN_DIST_HOME=$REPO RNN_DIST_BUILD=$BUILD OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
J=$REPO/jobs
NODE_OPTS=(--gpus-per-node=0 --ntasks-per-node=2 --cpus-per-task=1 --time=10)  # the GPU scripts on CPU ranks

# JOB_ID of a job submitted in the background with --parsable into FILE.
job_id() { for _ in $(seq 40); do [ -s "$1" ] && { head -1 "$1"; return; }; sleep 0.25; done; }
# Waits until LOG matches PATTERN (at most 60 s).
wait_for() { for _ in $(seq 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done; return 1; }
last_step() { ls "$1"/step-*.h5 2>/dev/null | tail -1 | sed 's/.*step-0*\([0-9]*\)\.h5/\1/'; }
loads() { "$BUILD/rnn_dist" eval --checkpoint "$1" --data out/fortunes/valid.h5 --json > eval.out 2>&1 && tail -1 eval.out | grep -q '^{"loss":'; }

timeout 90 sbatch --wait --parsable -o prep.out "$J/prep.sbatch" > /dev/null
rc=$?
[ $rc -eq 0 ] && [ -f out/fortunes/train.h5 ] && [ -f out/fortunes/valid.h5 ] && grep -q "^train:" prep.out \
  && ok "prep.sbatch: fortunes corpus prepared" || { bad "prep.sbatch: exit $rc: $(tail -3 prep.out)"; exit 1; }

timeout 90 sbatch --wait --parsable -o smoke.out "$J/cpu_smoke.sbatch" > /dev/null
rc=$?
[ $rc -eq 0 ] && ok "cpu_smoke.sbatch (srun) exits 0" || bad "cpu_smoke.sbatch (srun): exit $rc: $(tail -3 smoke.out)"
grep -q "rnn_dist check: 5 passed, 0 failed, 2 skipped" smoke.out && ok "pre-flight check passed" \
  || bad "pre-flight check: $(grep -E 'FAIL|check:' smoke.out)"
grep -q "^epoch 1 step 30/30 loss [0-9]" smoke.out && ok "loss logged" || bad "no loss line for step 30 in smoke.out"
loads out/cpu-smoke-ckpt/step-00000030.h5 && ok "checkpoint written and loadable" || bad "smoke checkpoint: $(ls out/cpu-smoke-ckpt; cat eval.out)"

RNN_DIST_LAUNCHER=mpirun timeout 90 sbatch --wait --parsable -o mpirun.out "$J/cpu_smoke.sbatch" "$J/cpu_smoke.conf" \
  --checkpoint-dir out/mpirun-ckpt > /dev/null
rc=$?
[ $rc -eq 0 ] && grep -q "launcher mpirun" mpirun.out && grep -q "rnn_dist train: 2 rank(s)" mpirun.out && loads out/mpirun-ckpt/step-00000030.h5 \
  && ok "cpu_smoke.sbatch with RNN_DIST_LAUNCHER=mpirun: 2 ranks, checkpoint" || bad "mpirun launcher: exit $rc: $(tail -3 mpirun.out)"

sed 's|^train = .*|train = out/missing.h5|' "$J/cpu_smoke.conf" > missing.conf
timeout 90 sbatch --wait --parsable -o missing.out "$J/cpu_smoke.sbatch" missing.conf > /dev/null
rc=$?
[ $rc -ne 0 ] && grep -q "^FAIL  data .*out/missing.h5" missing.out && ! grep -q "^rnn_dist train:" missing.out \
  && ok "a failing pre-flight check stops the job before training (exit $rc)" || bad "missing data file: exit $rc: $(tail -3 missing.out)"
# A check that dies of a signal (Open MPI's MPI_Init crash, issue 26 #7; here rank 1 killed as the ranks
# connect) runs once more, and only once: failing again, it stops the job before training.
RNN_DIST_TEST_FAIL=1:connect:kill timeout 120 sbatch --wait --parsable -o killed.out \
  "$J/cpu_smoke.sbatch" "$J/cpu_smoke.conf" > /dev/null
rc=$?
[ $rc -ne 0 ] && [ "$(grep -c "pre-flight check died of signal [0-9]*; running it once more" killed.out)" -eq 1 ] \
  && ! grep -q "^rnn_dist train:" killed.out \
  && ok "a check that dies of a signal runs once more, then stops the job (exit $rc)" \
  || bad "check killed by a signal: exit $rc: $(grep -E 'pre-flight|signal|train:' killed.out | head -5)"

# scancel --signal=TERM signals the job steps: every rank finishes its step, rank 0 checkpoints, the job
# ends normally; resubmitting resumes from that checkpoint.
LONG=(--epochs 100 --save-every 0 --log-every 20)
timeout 90 sbatch --wait --parsable -o stop.out "$J/cpu_smoke.sbatch" "$J/cpu_smoke.conf" "${LONG[@]}" --max-steps 100000 \
  --checkpoint-dir out/stop-ckpt > stop.id &
waiter=$!
id=$(job_id stop.id)
wait_for stop.out "^epoch 1 step 40/" && scancel --signal=TERM "$id"
wait $waiter
rc=$?
n=$(last_step out/stop-ckpt)
[ $rc -eq 0 ] && grep -q "stopped by signal 15 after step $n" stop.out && [ "${n:-0}" -ge 40 ] \
  && ok "scancel --signal=TERM: exit 0, checkpoint at step $n" || bad "scancel --signal=TERM: exit $rc, checkpoint '${n:-none}': $(tail -3 stop.out)"
[ -n "$n" ] && loads "out/stop-ckpt/step-$(printf %08d "$n").h5" && ok "that checkpoint loads" || bad "stop checkpoint does not load: $(cat eval.out)"
if [ -n "$n" ]; then
  timeout 90 sbatch --wait --parsable -o resume.out "$J/cpu_smoke.sbatch" "$J/cpu_smoke.conf" "${LONG[@]}" \
    --max-steps $((n + 10)) --checkpoint-dir out/stop-ckpt > /dev/null
  rc=$?
  [ $rc -eq 0 ] && grep -q "resumed from out/stop-ckpt/step-$(printf %08d "$n").h5 (step $n)" resume.out \
    && [ "$(last_step out/stop-ckpt)" = $((n + 10)) ] && ok "resubmission resumed from step $n to $((n + 10))" \
    || bad "resubmission: exit $rc: $(grep -E 'resumed|starting fresh|error' resume.out)"
fi

# TERM to the batch shell (what #SBATCH --signal=B:TERM@120 sends before the time limit): checkpoint,
# requeue, and the requeued run resumes and finishes. RNN_DIST_REQUEUE_WITHIN makes any time left count
# as "near the limit"; Slurm holds a requeued job back for two minutes, so the test releases it. This job
# is polled rather than waited for with sbatch --wait, which may return when the job is requeued. Its
# 3000 steps outlast the signal on a fast machine (300 were over in a second).
RNN_DIST_REQUEUE_WITHIN=100000000 sbatch --parsable -o requeue.out "${NODE_OPTS[@]}" "$J/train_node.sbatch" \
  "$J/cpu_smoke.conf" "${LONG[@]}" --max-steps 3000 --checkpoint-dir out/requeue-ckpt > requeue.id
id=$(head -1 requeue.id)
if wait_for requeue.out "^epoch 1 step 40/"; then
  kill -TERM "$(scontrol listpids "$id" | awk '$3 == "batch" && $4 == "0" { print $1 }')"
  # The release waits 3 s after the requeue: slurmd revokes the old run's job credential, and credential
  # times have a resolution of one second, so a run started within the same second is refused as "Job
  # credential revoked" (the job then fails: seen under load, slurmctld's "Killing non-startable batch job").
  held=""
  for _ in $(seq 450); do
    info=$(scontrol show job "$id")
    grep -q "Restarts=1" <<<"$info" && grep -qE "JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)" <<<"$info" \
      && grep -q "^resumed from" requeue.out && break
    if grep -q "Reason=BeginTime" <<<"$info"; then
      [ -z "$held" ] && held=$SECONDS
      [ $((SECONDS - held)) -ge 3 ] && scontrol update JobId="$id" StartTime=now
    fi
    sleep 0.2
  done
fi
info=$(scontrol show job "$id" | grep -oE "(JobState|Reason|Restarts|ExitCode)=[^ ]*" | tr '\n' ' ')
n=$(sed -n 's/^stopped by signal 10 after step \([0-9]*\):.*/\1/p' requeue.out)
grep -q "JobState=COMPLETED" <<<"$info" && grep -q "Restarts=1 ExitCode=0:0" <<<"$info" && [ -n "$n" ] && grep -q "requeueing to resume" requeue.out \
  && grep -q "resumed from out/requeue-ckpt/step-$(printf %08d "$n").h5" requeue.out && [ "$(last_step out/requeue-ckpt)" = 3000 ] \
  && ok "train_node.sbatch: TERM to the batch shell checkpointed at step $n, requeued, resumed to step 3000" \
  || { bad "requeue: $info: $(grep -E 'signal|requeue|resumed|error|FAIL|restart' requeue.out); last lines: $(tail -5 requeue.out)"
         # What the daemons saw of the job: kept here, since the test's directory is removed at exit.
         echo "--- requeue.out (whole)"; cat requeue.out
         echo "--- slurmctld.log, job $id"; grep -E "JobId=$id|job_id=$id|JobID=$id|StepId=$id" "$S/log/slurmctld.log" | tail -40
         echo "--- slurmd.log, job $id"; grep -E "$id" "$S/log/slurmd.log" | tail -40; }

# Training that dies of a signal is started again (RNN_DIST_RESTARTS, here once) and resumes from its
# latest checkpoint. Rank 1 killed at every step 15: one restart from the checkpoint of step 10, no more.
RNN_DIST_RESTARTS=1 RNN_DIST_CHECK=0 RNN_DIST_TEST_FAIL=1:15:kill timeout 120 sbatch --wait --parsable -o crash.out \
  "$J/cpu_smoke.sbatch" "$J/cpu_smoke.conf" --checkpoint-dir out/crash-ckpt > /dev/null
rc=$?
[ $rc -ne 0 ] && [ "$(grep -c "training died of signal 9; restart 1 of 1, resuming" crash.out)" -eq 1 ] \
  && [ "$(grep -c "^resumed from out/crash-ckpt/step-00000010.h5 (step 10)" crash.out)" -eq 1 ] \
  && [ "$(last_step out/crash-ckpt)" = 10 ] && ! grep -q "restart 2" crash.out \
  && ok "training killed at step 15 restarts once from step 10, then the job fails (exit $rc)" \
  || bad "training killed at every step 15: exit $rc: $(grep -E 'signal|restart|resumed|fresh' crash.out | head -5)"
# A rank killed from outside once there is a checkpoint: the restart resumes from it and ends bitwise equal
# to the requeued run above (the same 3000 steps, stopped and resumed there too).
RNN_DIST_RESTARTS=1 sbatch --parsable -o restart.out "${NODE_OPTS[@]}" "$J/train_node.sbatch" "$J/cpu_smoke.conf" "${LONG[@]}" \
  --save-every 500 --max-steps 3000 --checkpoint-dir out/restart-ckpt > restart.id
id=$(head -1 restart.id)
for _ in $(seq 300); do [ -f out/restart-ckpt/step-00000500.h5 ] && break; sleep 0.2; done
# Rank 1 of the job's latest step (training; the pre-flight check's step has ended), found through Slurm:
# other tests run rnn_dist train from the same build at the same time.
rank1=$(scontrol listpids "$id" 2>/dev/null | awk '$3 ~ /^[0-9]+$/ && $4 == "1" { print $3, $1 }' | sort -n | tail -1 | cut -d' ' -f2)
[ -n "$rank1" ] && kill -KILL "$rank1"
for _ in $(seq 450); do scontrol show job "$id" | grep -qE "JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT)" && break; sleep 0.2; done
n=$(sed -n 's/^resumed from out\/restart-ckpt\/step-0*\([0-9]*\)\.h5.*/\1/p' restart.out)
scontrol show job "$id" | grep -q "JobState=COMPLETED" && grep -q "training died of signal 9; restart 1 of 1" restart.out \
  && [ "${n:-0}" -ge 500 ] && [ "$n" -lt 3000 ] && [ "$(last_step out/restart-ckpt)" = 3000 ] \
  && h5diff out/restart-ckpt/step-00003000.h5 out/requeue-ckpt/step-00003000.h5 /model > /dev/null \
  && h5diff out/restart-ckpt/step-00003000.h5 out/requeue-ckpt/step-00003000.h5 /optimizer > /dev/null \
  && ok "a rank killed after step $n: the job restarted, resumed from step $n and ended bitwise equal at step 3000" \
  || bad "restart after a killed rank (pid ${rank1:-none}): $(scontrol show job "$id" | grep -oE "JobState=[^ ]*"): $(grep -E 'signal|restart|resumed|fresh|error' restart.out | head -5)"

cp "$J/cpu_smoke.conf" twonodes.conf
echo "ranks-per-node = 1" >> twonodes.conf
timeout 90 sbatch --wait --parsable -o multinode.out --nodes=1 "${NODE_OPTS[@]}" "$J/train_multinode.sbatch" twonodes.conf \
  --max-steps 12 --checkpoint-dir out/multinode-ckpt > /dev/null
rc=$?
[ $rc -eq 0 ] && grep -q "2 rank(s) on 1 host(s), 2 node(s)" multinode.out && grep -q "all-reduce hierarchical" multinode.out \
  && loads out/multinode-ckpt/step-00000012.h5 && ok "train_multinode.sbatch: hierarchical all-reduce over 2 simulated nodes" \
  || bad "train_multinode.sbatch: exit $rc: $(tail -3 multinode.out)"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
