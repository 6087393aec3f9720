#!/usr/bin/env bash
# CLI tests of `rnn_dist check`: every verdict it can give without a GPU (PASS, SKIP "no GPU", and FAIL
# for a rank without a GPU under --device cuda, hierarchical all-reduce over unequal nodes, a data file
# missing everywhere or on one rank only, not HDF5, too small for the global batch or with another
# vocabulary, an unwritable checkpoint directory or one other ranks do not see, threads beyond the
# cores), exit codes (0 all pass, 1 a check fails, 2 bad arguments printed once), --config reading, and a
# rank that hangs while the ranks connect (the watchdog's one line).
# "Another node" is simulated with --ranks-per-node, another filesystem with a per-rank working directory.
# $1 = build directory.
source "$(dirname "$0")/lib/harness.sh"
unset SLURM_CPUS_PER_TASK
R=$BUILD/rnn_dist

awk 'BEGIN { srand(5); n = split("alpha beta gamma delta epsilon zeta eta theta", w, " ")
  for (i = 0; i < 300; i++) { k = 2 + int(rand() * 8); line = ""
    for (j = 0; j < k; j++) line = line (j ? " " : "") w[1 + int(rand() * n)]
    print line } }' > corpus.txt
"$BUILD/rnn_prep" --input corpus.txt --output-dir data --valid-fraction 0.1 >/dev/null || bad "rnn_prep (char)"
"$BUILD/rnn_prep" --input corpus.txt --output-dir wdata --tokenizer word --valid-fraction 0.1 >/dev/null || bad "rnn_prep (word)"
seqs=$("$R" info data/train.h5 | sed -n 's/^ *sequences: *\([0-9]*\).*/\1/p')
echo "not an HDF5 file" > garbage.h5

# run NAME EXPECTED_EXIT COMMAND...: runs a check, keeping stdout in NAME.out and stderr in NAME.err.
run() {
  local name=$1 want=$2
  shift 2
  "$@" > "$name.out" 2> "$name.err"
  local rc=$?
  [ $rc -eq "$want" ] && return 0
  bad "$name: exit $rc, expected $want: $(tail -3 "$name.out") $(cat "$name.err")"
  return 1
}
# has NAME REGEX DESCRIPTION: NAME.out has a line matching REGEX.
has() { grep -qE "$2" "$1.out" && ok "$1: $3" || bad "$1: no line matching '$2' in: $(grep -E '^(PASS|FAIL|SKIP)' "$1.out")"; }

if run pass 0 mpirun --oversubscribe -np 2 "$R" check --train data/train.h5 --valid data/valid.h5 --batch-size 4 \
    --checkpoint-dir ckpt; then
  ok "pass: every check passes or skips -> exit 0"
  has pass "^rnn_dist check: 5 passed, 0 failed, 2 skipped$" "summary line"
  has pass "^SKIP  gpus +skipped: no GPU$" "GPU check skipped without a GPU"
  has pass "^SKIP  nccl-allreduce +skipped: no GPU$" "NCCL check skipped without a GPU"
  has pass "^PASS  mpi-allreduce .*world \(2 ranks\)" "MPI all-reduce"
  has pass "^PASS  data .*data/train.h5: format version 1, $seqs sequences" "data file readable, sequences counted"
  has pass "^PASS  checkpoint-dir +ckpt: writable from rank 0, visible from all 2 ranks" "checkpoint dir"
  has pass "^PASS  threads " "threads"
  has pass "^PASS  memory +predicted peak of the largest rank \([01]\): .*parameters .*resident_bytes=[0-9]+ cpu_buffer_bytes=[0-9]+" "memory predicted"
  [ "$(grep -cE "^$(hostname) +[01] +[01] +0 " pass.out)" -eq 2 ] && ok "pass: table has one row per rank" || bad "pass: table: $(cat pass.out)"
  has pass "^versions: MPI .*; HDF5 [0-9]+\.[0-9]+\.[0-9]+; GPU " "versions line"
  ls -A ckpt | grep -q . && bad "pass: probe file left in ckpt: $(ls -A ckpt)" || ok "pass: probe file removed"
fi
run skips 0 "$R" check && has skips "^rnn_dist check: 2 passed, 0 failed, 5 skipped$" "without --train/--checkpoint-dir those checks skip"

# GPUs: --device cuda with no visible GPU fails on every machine (CUDA_VISIBLE_DEVICES is empty).
run gpu 1 env CUDA_VISIBLE_DEVICES= "$R" check --device cuda && has gpu "^FAIL  gpus +rank 0 on .* sees no GPU .*; fix: " "no GPU under --device cuda"

# All-reduce over simulated nodes: 2 nodes of 1 rank pass (flat and hierarchical); 2 + 1 ranks cannot
# use the hierarchical all-reduce.
run nodes 0 mpirun --oversubscribe -np 2 "$R" check --ranks-per-node 1 --allreduce hierarchical \
  && has nodes "^PASS  mpi-allreduce .*flat and hierarchical all-reduce exact over 2 node\(s\)" "2 simulated nodes"
run envnodes 0 env RNN_DIST_RANKS_PER_NODE=1 mpirun --oversubscribe -x RNN_DIST_RANKS_PER_NODE -np 2 "$R" check \
  && has envnodes "^rnn_dist check: 2 rank\(s\) on 1 host\(s\), 2 node\(s\)$" "RNN_DIST_RANKS_PER_NODE gives --ranks-per-node's default"
run unequal 1 mpirun --oversubscribe -np 3 "$R" check --ranks-per-node 2 --allreduce hierarchical \
  && has unequal "^FAIL  mpi-allreduce +--allreduce hierarchical needs the same number of ranks on every node .*; fix: " "unequal nodes"

# Data files.
run missing 1 mpirun --oversubscribe -np 2 "$R" check --train nothere.h5 \
  && has missing "^FAIL  data +nothere.h5: .*\(every rank\); fix: give the path of a sequence file" "missing on every rank"
run garbage 1 "$R" check --train garbage.h5 && has garbage "^FAIL  data +garbage.h5: " "not an HDF5 file"
run small 1 mpirun --oversubscribe -np 2 "$R" check --train data/train.h5 --batch-size $((seqs / 2 + 1)) \
  && has small "^FAIL  data .*too few for one global batch.*; fix: lower --batch-size" "too few sequences for batch x ranks"
run stream 0 "$R" check --train data/train.h5 --batching stream --batch-size $((seqs + 1)) \
  && has stream "^PASS  data +data/train.h5: format version 1, $seqs sequences; readable" "stream batching: no sequence-count check"
run vocab 1 "$R" check --train data/train.h5 --valid wdata/valid.h5 \
  && has vocab "^FAIL  data .*vocabulary differs" "valid file with another vocabulary"
mkdir elsewhere
run onerank 1 mpirun --oversubscribe -np 1 "$R" check --train data/train.h5 --batch-size 2 --checkpoint-dir ckpt : \
  -np 1 --wdir "$T/elsewhere" "$R" check --train data/train.h5 --batch-size 2 --checkpoint-dir ckpt
has onerank "^FAIL  data +data/train.h5: .*\(rank 1 on .*\); fix: put the file on a filesystem that every node mounts" \
  "data file missing on one rank only"
has onerank "^FAIL  checkpoint-dir +ckpt: rank 0's probe file is not visible from rank 1 .*; fix: put --checkpoint-dir on a filesystem" \
  "checkpoint dir not shared"
[ ! -e elsewhere/ckpt ] && ok "onerank: only rank 0 creates the checkpoint dir" || bad "onerank: rank 1 created elsewhere/ckpt"

# Checkpoint directory rank 0 cannot write (root may write almost anywhere, but not under /proc).
run unwritable 1 "$R" check --checkpoint-dir /proc/rnn_dist_check \
  && has unwritable "^FAIL  checkpoint-dir +/proc/rnn_dist_check: not writable from rank 0 .*; fix: " "unwritable"

# Threads against SLURM_CPUS_PER_TASK, the rank's affinity, and the node's cores.
run slurmcpus 1 env SLURM_CPUS_PER_TASK=1 "$R" check --threads 2 \
  && has slurmcpus "^FAIL  threads +rank 0 on .*: --threads 2 but SLURM_CPUS_PER_TASK=1; fix: lower --threads to 1" "threads > SLURM_CPUS_PER_TASK"
run affinity 1 taskset -c 0 "$R" check --threads 2 \
  && has affinity "^FAIL  threads +rank 0 on .*: --threads 2 but it may run on 1 core\(s\)" "threads > cores in the affinity mask"
cores=$(nproc)
run node 1 mpirun --oversubscribe --bind-to none -np 2 "$R" check --threads "$cores" \
  && has node "^FAIL  threads +$(hostname): 2 ranks x --threads $cores = $((2 * cores)) threads on $cores core\(s\)" "ranks x threads > node cores"
run fits 0 env SLURM_CPUS_PER_TASK=1 "$R" check --threads 1 && has fits "^PASS  threads " "threads within the cores"

# --config: the options check knows are read, train-only keys ignored, the command line wins.
printf 'train = data/train.h5\nembed = 16\nbatch-size = 100000\ncheckpoint-dir = cfgckpt\n' > train.conf
run config 1 "$R" check --config train.conf && has config "^FAIL  data .*too few" "config file read (batch-size from it)"
run config_cli 0 "$R" check --config train.conf --batch-size 2 && has config_cli "^PASS  checkpoint-dir +cfgckpt" "command line wins over the config file"

# Bad arguments: exit 2, one line, printed once with 2 ranks.
for args in "--bogus 1" "--device tpu" "--threads 0" "--config nothere.conf" "--allreduce ring"; do
  mpirun --oversubscribe -np 2 "$R" check $args > out 2> err
  rc=$?
  [ $rc -eq 2 ] && [ "$(grep -c 'rnn_dist: error' err)" -eq 1 ] && ok "'$args' -> exit 2, printed once: $(grep 'rnn_dist: error' err)" \
    || bad "'$args' -> exit $rc: $(cat err)"
done

# --full reads every token, each rank its share: a bad id in the middle of the training file (which
# the quick check, reading the first and last sequences, does not reach) fails the data check.
h5repack -l /tokens:CONTI data/train.h5 badtokens.h5
at=$(h5dump -p -H -d /tokens badtokens.h5 | sed -n 's/^ *OFFSET \([0-9]*\)/\1/p')
n=$(h5dump -p -H -d /tokens badtokens.h5 | sed -n 's/.*DATASPACE  SIMPLE { ( \([0-9]*\) ).*/\1/p')
printf '\x7f\x7f\x7f\x7f' | dd of=badtokens.h5 bs=1 seek=$((at + 4 * (n * 3 / 4))) conv=notrunc 2>/dev/null
run quick 0 mpirun --oversubscribe -np 2 "$R" check --train badtokens.h5 --batch-size 4 \
  && has quick "^PASS  data " "without --full, a bad token in the middle goes unseen"
run full 1 mpirun --oversubscribe -np 2 "$R" check --train badtokens.h5 --batch-size 4 --full \
  && has full "^FAIL  data +badtokens.h5: sequence [0-9]+ has token id 2139062143 outside the vocabulary" "--full finds it"
run fullgood 0 mpirun --oversubscribe -np 2 "$R" check --train data/train.h5 --valid data/valid.h5 --batch-size 4 --full \
  && has fullgood "^PASS  data .*every token checked" "--full passes a sound file"

# Memory: check's prediction of the largest rank's peak against what train measures over a whole epoch
# with validation and a checkpoint: the backend's buffers (the dry run counts the trainer's own
# allocations, the adaptive softmax's clusters with the most rows a batch of the file routes to each:
# within 2%) and the resident peak (within 20%), for models whose buffers dominate it.
awk 'BEGIN { srand(7); for (i = 0; i < 120; i++) { line = ""; n = 150 + int(rand() * 100)
    for (j = 0; j < n; j++) line = line sprintf("%c", 97 + int(rand() * 26)); print line } }' > long.txt
awk 'BEGIN { srand(9); for (i = 0; i < 1500; i++) { line = ""; n = 5 + int(rand() * 20)
    for (j = 0; j < n; j++) { r = rand(); line = line (j ? " " : "") "w" int(6000 * r * r * r) } print line } }' > zipf.txt
awk 'BEGIN { srand(3); for (i = 0; i < 400; i++) { line = (i % 3 ? "b" : "a") "\t"; n = 20 + int(rand() * 60)
    for (j = 0; j < n; j++) line = line sprintf("%c", 97 + int(rand() * 26)); print line } }' > cls.tsv
"$BUILD/rnn_prep" --input long.txt --output-dir long --valid-fraction 0.1 >/dev/null || bad "rnn_prep (long)"
"$BUILD/rnn_prep" --input zipf.txt --output-dir zipf --tokenizer word --valid-fraction 0.1 >/dev/null || bad "rnn_prep (zipf)"
"$BUILD/rnn_prep" --input cls.tsv --format tsv --output-dir cls --valid-fraction 0.1 >/dev/null || bad "rnn_prep (tsv)"
# memory NAME RANKS DATA OPTIONS...: check, then train one epoch with the same options, and compare.
memory() {
  local name=$1 np=$2 data=$3
  shift 3
  local args=(--train "$data/train.h5" --valid "$data/valid.h5" --device cpu --checkpoint-dir "mem_$name.ckpt" "$@")
  run "mem_$name" 0 mpirun --oversubscribe -np "$np" "$R" check "${args[@]}" || return
  local pr pb
  pr=$(sed -n 's/^PASS  memory .*resident_bytes=\([0-9]*\).*/\1/p' "mem_$name.out")
  pb=$(sed -n 's/^PASS  memory .*cpu_buffer_bytes=\([0-9]*\).*/\1/p' "mem_$name.out")
  [ -n "$pr" ] || { bad "mem_$name: no prediction: $(grep memory "mem_$name.out")"; return; }
  rm -f "mem_$name.jsonl"
  mpirun --oversubscribe -np "$np" "$R" train "${args[@]}" --metrics "mem_$name.jsonl" \
    > "mem_$name.train" 2>&1 || { bad "mem_$name: train failed: $(tail -3 "mem_$name.train")"; return; }
  local mr mb
  mr=$(sed -n 's/.*"kind":"summary".*"peak_resident_bytes":\([0-9]*\).*/\1/p' "mem_$name.jsonl")
  mb=$(sed -n 's/.*"kind":"summary".*"peak_device_bytes":\([0-9]*\).*/\1/p' "mem_$name.jsonl")
  awk -v pr="$pr" -v pb="$pb" -v mr="$mr" -v mb="$mb" 'BEGIN { exit !(mb > 0 && pb / mb > 0.98 && pb / mb < 1.02 &&
      pr / mr > 0.8 && pr / mr < 1.2 && mb / mr > 0.4) }' \
    && ok "mem_$name: buffers predicted $pb, measured $mb; resident predicted $pr, measured $mr" \
    || bad "mem_$name: buffers predicted $pb, measured $mb; resident predicted $pr, measured $mr (buffers within 2%, resident within 20%, buffers 40% of it at least)"
}
memory lstm 1 long --hidden 512 --embed 64 --batch-size 32
memory dropout 1 long --hidden 384 --embed 64 --layers 3 --dropout 0.2 --batch-size 48
memory adaptive 1 zipf --hidden 512 --embed 512 --softmax adaptive --cutoffs 200,1000 --batch-size 64
memory tied_proj 1 zipf --hidden 1024 --embed 256 --proj-size 256 --tie-embeddings --batch-size 64
memory stream 1 long --hidden 1024 --embed 64 --batching stream --batch-size 16 --bptt 64 --optimizer sgd --momentum 0.9
memory classifier 1 cls --hidden 384 --embed 64 --bidirectional --pool max --dropout 0.1 --batch-size 32
memory bf16_2ranks 2 long --hidden 512 --embed 64 --batch-size 16 --allreduce-dtype bf16
# A resume loads the checkpoint whole before the first step; the prediction covers it.
"$R" train --train zipf/train.h5 --hidden 512 --embed 512 --batch-size 64 --checkpoint-dir mem_resume.ckpt >/dev/null \
  || bad "mem_resume: first epoch"
memory resume 1 zipf --hidden 512 --embed 512 --batch-size 64 --resume --epochs 2
# A run that cannot fit: one line naming the need, the memory and the fix, exit 1.
run toobig 1 "$R" check --train data/train.h5 --device cpu --hidden 30000 --embed 30000 --layers 2 --batch-size 4 \
  && has toobig "^FAIL  memory +$(hostname): its ranks need [0-9.]+ GiB of host memory, [0-9.]+ GiB is available; fix: lower --batch-size" \
       "a model beyond the host's memory fails the memory check"

# A rank that hangs while the ranks connect (on GPUs the NCCL set-up, which has no deadline of its own,
# and its shutdown run under the same watchdog): rank 0 ends the job with the trainer's one line, in
# seconds, instead of every rank waiting forever.
start=$SECONDS
RNN_DIST_TEST_FAIL=1:connect:hang timeout 60 mpirun --oversubscribe -np 2 "$R" check --train data/train.h5 \
  --batch-size 4 --comm-timeout 3 > out 2> err
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $((SECONDS - start)) -lt 30 ] && [ "$(grep -c 'rnn_dist: error' err)" -eq 1 ] \
  && grep -q "rnn_dist: error: rank 0 (.*): the set-up of the communicators did not complete within 3 s" err \
  && ok "a rank hanging while check connects: the watchdog ends the job in $((SECONDS - start)) s (rc $rc), one message" \
  || bad "hang while check connects: rc $rc after $((SECONDS - start)) s: $(head -5 err)"

finish
