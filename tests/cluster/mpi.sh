#!/usr/bin/env bash
# Open MPI across separate network stacks (tests/cluster/cluster.sh, 4 nodes): the nodes come from the
# runtime (no --ranks-per-node): `rnn_dist check` and `train --verbose` on 2 nodes x 2 ranks report what
# MPI reports, and unequal nodes (2 + 1) are refused for the hierarchical all-reduce; the same global
# batch gives the parameters of 1 rank across nodes (2 x 2 ranks, flat and hierarchical, packed and stream
# mode, 20 Adam steps, max relative difference <= 1e-5), and so does the design's own launch,
# `mpirun -np 8 rnn_dist train`, over 4 nodes x 2 ranks; `rnn_dist check` passes data and checkpoints on a
# path every node shares and fails them on a node-local one; `cluster.sh shape` bounds the bandwidth
# between the nodes and lifts the bound again. $1 = build directory.
NODES=4
source "$(dirname "$0")/lib.sh"
hostfile h22 2 2
hostfile h21 2 1
hostfile h2222 2 2 2 2
make_data || bad "rnn_prep"

mpi h22 4 "$BIN/rnn_dist" check > check.out 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "rnn_dist check: 4 rank(s) on 2 host(s), 2 node(s)" check.out \
  && [ "$(awk '$1 ~ /^node/ { print $1, $2, $3, $4 }' check.out | tr '\n' ,)" = "node1 0 0 0,node1 1 1 0,node2 2 0 1,node2 3 1 1," ] \
  && grep -q "^PASS  mpi-allreduce .*over 2 node(s) of 2" check.out \
  && ok "check on 2 nodes x 2 ranks: nodes and local ranks from MPI, all-reduce passes" || bad "check 2 x 2: rc $rc: $(cat check.out)"

M="--train data/train.h5 --embed 8 --hidden 16 --layers 2 --seed 3 --log-every 5"
mpi h22 4 "$BIN/rnn_dist" train $M --batch-size 2 --max-steps 2 --verbose > verbose.out 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "^placement: rank 1/4 (local 1/2) on node1: cpu" verbose.out \
  && grep -q "^placement: rank 2/4 (local 0/2) on node2: cpu" verbose.out \
  && ok "train --verbose: each rank on its node, local ranks 0-1 per node" || bad "train --verbose: rc $rc: $(cat verbose.out)"

mpi h21 3 "$BIN/rnn_dist" check --allreduce hierarchical > check21.out 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "rnn_dist check: 3 rank(s) on 2 host(s), 2 node(s)" check21.out \
  && grep -q "^FAIL  mpi-allreduce .*--allreduce hierarchical needs the same number of ranks on every node" check21.out \
  && ok "check: unequal nodes (2 + 1) refused for the hierarchical all-reduce" || bad "check 2 + 1: rc $rc: $(cat check21.out)"
mpi h21 3 "$BIN/rnn_dist" train $M --batch-size 2 --max-steps 2 --allreduce hierarchical > train21.out 2>&1
rc=$?
[ $rc -eq 2 ] && [ "$(grep -c 'rnn_dist: error' train21.out)" -eq 1 ] \
  && grep -q "rnn_dist: error: --allreduce hierarchical needs the same number of ranks on every node" train21.out \
  && ok "train: unequal nodes refused for hierarchical, exit 2, one message" || bad "train 2 + 1: rc $rc: $(cat train21.out)"

# Data and checkpoints: a directory every node sees passes the check's data and checkpoint-dir rows; the
# same path on a node-local filesystem (each node mounts its own DIR/local) fails both, naming the ranks
# of the node that cannot see rank 0's files.
mpi h22 4 "$BIN/rnn_dist" check --train data/train.h5 --batch-size 2 --checkpoint-dir "$D/work/shared-ck" > shared.out 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "^PASS  data " shared.out && grep -q "^PASS  checkpoint-dir .*visible from all 4 ranks" shared.out \
  && ok "check: data and checkpoint directory on a path every node shares pass" || bad "shared path: rc $rc: $(grep -E 'data|checkpoint' shared.out)"
cp data/train.h5 "$D/node1/local/train.h5"
mpi h22 4 "$BIN/rnn_dist" check --train "$D/local/train.h5" --batch-size 2 --checkpoint-dir "$D/local/ck" > local.out 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "^FAIL  data .*rank 2" local.out \
  && grep -q "^FAIL  checkpoint-dir .*not visible from rank 2 on node2 (missing); rank 3 on node2 (missing)" local.out \
  && ! grep -q "checkpoint-dir .*rank 1 on node1" local.out \
  && ok "check: a node-local data file and checkpoint directory fail, naming node2's ranks" \
  || bad "node-local path: rc $rc: $(grep -E -A1 'data|checkpoint' local.out)"

# 1 rank with the global batch against 2 nodes x 2 ranks with a quarter each.
same_answer() {
  local what=$1 ref=$2 dir=$3 diff
  shift 3
  if ! mpi "$@" > "$dir.out" 2>&1; then bad "$what: the run failed: $(tail -3 "$dir.out")"; return; fi
  diff=$(max_rel_diff "$ref" "$dir/step-00000020.h5")
  awk -v d="$diff" 'BEGIN { exit !(d != "" && d <= 1e-5) }' \
    && ok "$what: parameters of 1 rank after 20 Adam steps (max relative difference $diff)" \
    || bad "$what: max relative difference '$diff' against 1 rank"
}
for mode in packed stream; do
  P="--max-steps 20 --batching $mode --bptt 10"
  on node1 "$BIN/rnn_dist" train $M $P --batch-size 8 --checkpoint-dir one-$mode > one-$mode.out 2>&1 \
    || bad "1 rank, $mode: $(tail -3 one-$mode.out)"
  for algo in flat hierarchical; do
    same_answer "$mode, $algo, 2 nodes x 2 ranks" one-$mode/step-00000020.h5 two-$mode-$algo h22 4 \
      "$BIN/rnn_dist" train $M $P --batch-size 2 --allreduce $algo --checkpoint-dir two-$mode-$algo
  done
done
same_answer "mpirun -np 8 over 4 nodes x 2 ranks, hierarchical" one-packed/step-00000020.h5 eight h2222 8 \
  "$BIN/rnn_dist" train $M --max-steps 20 --batch-size 1 --allreduce hierarchical --checkpoint-dir eight
grep -q "rnn_dist train: 8 rank(s)" eight.out && ok "8 ranks over 4 nodes" || bad "8 ranks: $(head -3 eight.out)"

# cluster.sh shape: node2's link at 50 Mbit/s bounds a 4 MB all-reduce between the nodes (bus bandwidth
# at most 1.25x the link's 6.25 MB/s: 2 timed iterations with tbf's burst measured 0.005-0.007 GB/s, the
# upper end once in a loaded full run), and the limit comes off again (then far above it).
cp "$BUILD/bench/allreduce_bench" "$BIN/"
busbw() { mpi h22 4 "$BIN/allreduce_bench" --min-bytes 4194304 --max-bytes 4194304 --iters 2 | awk '$3 == "flat" && $1 == 4194304 { print $6 }'; }
bash "$CLUSTER" shape "$D" node2 50mbit && shaped=$(busbw)
bash "$CLUSTER" shape "$D" node2 off && free=$(busbw)
awk -v s="$shaped" -v f="$free" 'BEGIN { link = 50e6 / 8 / 1e9; exit !(s != "" && s <= 1.25 * link && f > 5 * link) }' \
  && ok "shape 50mbit: 4 MB all-reduce at $shaped GB/s bus bandwidth (link 0.00625); unshaped $free GB/s" \
  || bad "shape: bus bandwidth shaped '$shaped', unshaped '$free' GB/s (link 0.00625)"
bash "$CLUSTER" shape "$D" node2 9xyz 2> err && bad "shape accepted the rate 9xyz" \
  || { grep -q "not a tc rate" err && ok "shape refuses a bad rate: $(cat err)" || bad "shape 9xyz: $(cat err)"; }
finish
