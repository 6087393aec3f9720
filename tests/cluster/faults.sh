#!/usr/bin/env bash
# Node faults on a 2-node cluster (tests/cluster/cluster.sh), 2 ranks per node, mpirun from the login
# node: a crashed node (every process of node2 killed mid-step), a partition (node2's link taken down
# mid-step) and rank 0's node lost while it writes a checkpoint. Each must end with every process of the
# job gone on every node, mpirun returned, within --comm-timeout + 30 s, at most one error message per
# surviving node, the previous checkpoint intact, and --resume reaching the uninterrupted run's parameters
# bitwise. mpirun runs with the TCP keepalive that jobs/common.sh sets, and --comm-timeout 30 (above the
# keepalive's 20 s, as the job scripts say); without the keepalive, mpirun waits for an unreachable node's
# daemon for about 8 minutes, or for ever. $1 = build directory.
NODES=2
source "$(dirname "$0")/lib.sh"
hostfile h22 2 2
make_data || bad "rnn_prep"
eval "$(bash -c "source '$HOME_DIR/jobs/common.sh'; export -p" | grep OMPI_MCA_oob_tcp_keepalive)"
TIMEOUT=30
export RNN_DIST_TEST_FAIL=
M="--train data/train.h5 --embed 16 --hidden 64 --layers 2 --batch-size 4 --seed 3 --epochs 100 --max-steps 120 --save-every 20"
M="$M --log-every 1 --comm-timeout $TIMEOUT"
train() { mpi h22 4 -x RNN_DIST_TEST_FAIL "$BIN/rnn_dist" train $M "$@"; }

RNN_DIST_TEST_FAIL= train --checkpoint-dir ref > ref.out 2>&1 && [ -f ref/step-00000120.h5 ] \
  && ok "uninterrupted run: 120 steps" || bad "uninterrupted run: $(tail -3 ref.out)"

# FAULT NAME [WHEN]: starts a run into checkpoint directory NAME, waits until WHEN (a command; default:
# step 30 has begun), applies FAULT (a command), then checks how the job ended.
fault() {
  local what=$1 name=$2 when=${3:-"grep -q '^epoch [0-9]* step 30/' $2.out"}
  train --checkpoint-dir "$name" > "$name.out" 2> "$name.err" &
  local pid=$! start
  for _ in $(seq 600); do eval "$when" && break; sleep 0.05; done
  [ -f "$name/step-00000120.h5" ] && bad "$name: the run ended before the fault"
  start=$SECONDS
  eval "$what"
  local limit=$((TIMEOUT + 30))
  while kill -0 $pid 2>/dev/null && [ $((SECONDS - start)) -le $limit ]; do sleep 0.5; done
  local took=$((SECONDS - start))
  if kill -0 $pid 2>/dev/null; then
    bad "$name: mpirun still running $took s after the fault"
    for node in head $NODES; do bash "$CLUSTER" kill "$D" $node; done
  fi
  wait $pid
  rc=$?
  # The daemons of other nodes may still be on their way out: they have until the limit.
  while left=$(procs_left); [ -n "$left" ] && [ $((SECONDS - start)) -le $limit ]; do sleep 0.5; done
  errors=$(grep -c 'rnn_dist: error' "$name.err")
  grep -q "^rnn_dist train: 4 rank(s)" "$name.out" || bad "$name: training never started: $(head -3 "$name.err")"
  [ $rc -ne 0 ] && [ $took -le $limit ] && [ -z "$left" ] && [ "$errors" -le 1 ] && [ ! -f "$name/step-00000120.h5" ] \
    && ok "$name: mpirun returned $took s after the fault (rc $rc), nothing left on any node, $errors error line(s)" \
    || bad "$name: rc $rc after $took s; left: ${left:-nothing}; $errors error lines: $(grep 'rnn_dist: error' "$name.err" | head -3)"
}

# Resumes NAME to the end and compares with the uninterrupted run.
resume() {
  local name=$1 from=$2
  RNN_DIST_TEST_FAIL= train --resume --checkpoint-dir "$name" > "$name.resume" 2>&1
  grep -q "resumed from $name/step-$(printf %08d "$from").h5" "$name.resume" \
    && h5diff ref/step-00000120.h5 "$name/step-00000120.h5" /model > "$name.diff" 2>&1 \
    && ok "$name: --resume from step $from reaches the uninterrupted parameters bitwise" \
    || bad "$name: resume: $(grep -E 'resumed|error' "$name.resume" | head -2) $(head -2 "$name.diff")"
}
last_step() { ls "$1"/step-*.h5 2>/dev/null | tail -1 | sed 's/.*step-0*\([0-9]*\)\.h5/\1/'; }

# Step 30 is held open by rank 1 (node1) waiting before it (RNN_DIST_TEST_FAIL=1:30:hang), so that the
# fault lands mid-step however fast the machine: the 120 steps take about a second, and otherwise could
# end before the fault does (seen on a fast machine).
AT29="grep -q '^epoch [0-9]* step 29/' "

# A crashed node: every process of node2 (its daemon and its two ranks) killed mid-step.
RNN_DIST_TEST_FAIL=1:30:hang fault "bash $CLUSTER kill $D node2" crash "${AT29}crash.out"
resume crash "$(last_step crash)"

# A partition: node2's link down mid-step. Its ranks and the others stop at their deadline; mpirun and
# both daemons notice the lost connection through the keepalive and end the job.
RNN_DIST_TEST_FAIL=1:30:hang fault "bash $CLUSTER cut $D node2" partition "${AT29}partition.out"
bash "$CLUSTER" heal "$D" node2
reachable node2 || bad "node2 not reachable again after the partition"
grep -q "ORTE has lost communication with a remote daemon" partition.err && ok "partition: mpirun names the lost daemon" \
  || bad "partition: no lost-daemon report: $(head -5 partition.err)"
resume partition "$(last_step partition)"

# The short-timeout case: --comm-timeout 5 with the keepalive that rnn_dist's start-up warning suggests for
# it (2 + 1 x 1 = 3 s, below 5): the partition ends mpirun too, and no warning is printed; with the job
# scripts' 20 s keepalive the same run warns at start-up, naming those settings.
saved_M=$M saved_T=$TIMEOUT
export OMPI_MCA_oob_tcp_keepalive_time=10 OMPI_MCA_oob_tcp_keepalive_intvl=2 OMPI_MCA_oob_tcp_keepalive_probes=5
TIMEOUT=5 M=${M/--comm-timeout 30/--comm-timeout 5}
RNN_DIST_TEST_FAIL= train --max-steps 2 --checkpoint-dir warn > warn.out 2> warn.err
grep -q "warning: mpirun across 2 nodes with --comm-timeout 5 s, but Open MPI's TCP keepalive notices a lost node only after 20 s.*keepalive_time=2 .*keepalive_probes=1" warn.err \
  && ok "--comm-timeout 5 with a 20 s keepalive: warned at start-up, with settings that fit" || bad "no keepalive warning: $(head -3 warn.err)"
export OMPI_MCA_oob_tcp_keepalive_time=2 OMPI_MCA_oob_tcp_keepalive_intvl=1 OMPI_MCA_oob_tcp_keepalive_probes=1
RNN_DIST_TEST_FAIL=1:30:hang fault "bash $CLUSTER cut $D node2" short "${AT29}short.out"
bash "$CLUSTER" heal "$D" node2
reachable node2 || bad "node2 not reachable again after the short partition"
grep -q "warning: mpirun across" short.err && bad "short: warned with a keepalive that fits: $(grep warning short.err)" \
  || ok "short: no warning with a keepalive below --comm-timeout"
M=$saved_M TIMEOUT=$saved_T
eval "$(bash -c "source '$HOME_DIR/jobs/common.sh'; export -p" | grep OMPI_MCA_oob_tcp_keepalive)"

# Rank 0's node lost while it writes the checkpoint of step 40 (the write is held there by the test
# hook): the checkpoint of step 20 survives, the half-written file never becomes a checkpoint, and the
# resume uses step 20.
RNN_DIST_TEST_FAIL=0:write@40:hang fault "bash $CLUSTER kill $D node1" write "ls write/ 2>/dev/null | grep -q 'step-00000040.h5.*tmp'"
[ "$(ls write | grep -c '^step-.*\.h5$')" = 1 ] && "$BIN/rnn_dist" info write/step-00000020.h5 > /dev/null \
  && ok "write: step 20 intact and the only checkpoint ($(ls write | tr '\n' ' '))" || bad "write: checkpoints $(ls write | tr '\n' ' ')"
resume write 20
ls write | grep -q tmp && bad "write: the temporary file outlived the resumed run: $(ls write)" \
  || ok "write: the resumed run removed the half-written file"

finish
