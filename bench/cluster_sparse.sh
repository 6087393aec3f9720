#!/usr/bin/env bash
# The sparse embedding's exchange on the test cluster (tests/cluster/cluster.sh: 2 nodes x 2 ranks, every
# node's link shaped to RATE, 1gbit by default): a word-level language model (E = H = 256, 2 layers, the
# adaptive softmax with --cutoffs 2000,10000, stream batching of 20 columns x 35 tokens per rank,
# 1 thread each) on a synthetic Zipfian corpus of TYPES (100k) word types, STEPS steps each with the dense
# embedding gradient and with --sparse-embedding through --sparse-exchange gather and allreduce.
# Per run: step time, the all-reduce's and the update's shares, the distinct rows a step touches over all
# ranks, the bytes node 1's link carried per step in each direction (counted by the kernel: /proc/net/dev
# of the node's namespace), and for the gather the exchange's seconds per step against the model of
# dist/sparse_exchange.h: after the all-reduce of an integer that agrees on k (the most rows one rank
# touched) and synchronises the ranks, the all-gathers of n k ids and n k E floats, each timed at its
# size by allreduce_bench --op allgather on the same shaped link (the median of 5 launches), against
# the slowest rank's time after that agreement (a collective ends when its last rank has its data; the
# agreement itself holds each rank's wait for the last to arrive, which the model leaves out). Rank 0's
# whole exchange is printed beside it. Checks: the prediction within 15% of the measured exchange, the
# dense run's link bytes less the gather's at least 80% of the table's V E 4 bytes, and the sparse runs'
# losses within 1e-4 of each other (the same sums, rounded differently); exits 1 otherwise. Needs root
# and namespaces.
#   bench/cluster_sparse.sh BUILD_DIR [STEPS (20)] [RATE (1gbit)] [TYPES (100000)]
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
STEPS=${2:-20}
RATE=${3:-1gbit}
TYPES=${4:-100000}
NODES=2
source "$HERE/../tests/cluster/lib.sh"
cp "$BUILD/bench/allreduce_bench" "$BIN/"
hostfile h22 2 2
for node in $NODES; do bash "$CLUSTER" shape "$D" "$node" "$RATE" || exit 1; done
awk -v lines=10000 -v minw=10 -v maxw=30 -v types="$TYPES" -v seed=1 -v cover=1 -f "$HERE/synth_corpus.awk" > corpus.txt
"$BIN/rnn_prep" --input corpus.txt --output-dir data --format lines --tokenizer word --valid-fraction 0 --seed 1 \
  > /dev/null || { echo "rnn_prep failed"; exit 1; }
vocab=$("$BIN/rnn_dist" info data/train.h5 | sed -n 's/^  vocab size: *//p')
echo "vocabulary $vocab, 2 nodes x 2 ranks, links shaped to $RATE, $STEPS steps of 20 columns x 35 tokens per rank"
# link_bytes: node 1's eth0 received and transmitted bytes so far.
link_bytes() { on node1 cat /proc/net/dev | awk '$1 == "eth0:" { print $2, $10 }'; }
num() { grep -o "\"$1\":[0-9.e+-]*" m.$2 | tail -1 | cut -d: -f2; }
status=0
declare -A loss rx tx
printf '%-10s %8s %10s %8s %7s %12s %12s\n' run step_s all-reduce update rows rx/step tx/step
for run in dense gather allreduce; do
  opts=()
  [ $run != dense ] && opts=(--sparse-embedding --sparse-exchange $run)
  read -r rx0 tx0 <<< "$(link_bytes)"
  mpi h22 4 "$BIN/rnn_dist" train --train data/train.h5 --embed 256 --hidden 256 --layers 2 --batching stream \
    --batch-size 20 --bptt 35 --softmax adaptive --cutoffs 2000,10000 --max-steps "$STEPS" --log-every "$STEPS" \
    --threads 1 --device cpu --seed 3 --metrics "m.$run" "${opts[@]}" > "log.$run" 2>&1 \
    || { echo "FAILED: $run: $(tail -2 "log.$run")"; status=1; continue; }
  read -r rx1 tx1 <<< "$(link_bytes)"
  rx[$run]=$(( (rx1 - rx0) / STEPS )) tx[$run]=$(( (tx1 - tx0) / STEPS ))
  sec=$(num seconds $run) ar=$(num allreduce_s $run) up=$(num update_s $run)
  loss[$run]=$(num loss $run)
  rows=$(num sparse_rows_per_step $run)
  printf '%-10s %8.4f %9.1f%% %7.1f%% %7s %12d %12d\n' $run "$(awk -v s="$sec" -v n="$STEPS" 'BEGIN { print s / n }')" \
    "$(awk -v a="$ar" -v s="$sec" 'BEGIN { print 100 * a / s }')" "$(awk -v a="$up" -v s="$sec" 'BEGIN { print 100 * a / s }')" \
    "${rows:--}" "${rx[$run]}" "${tx[$run]}"
done
# The model of the gather after the agreement on k: the all-gathers of n k ids and of n k E floats, each
# timed by allreduce_bench --op allgather at exactly that size on the same shaped link, after the
# training runs.
if [ -s m.gather ]; then
  n=4 E=256
  measured=$(num sparse_after_agreement_s_per_step_slowest gather) rank0=$(num sparse_exchange_s_per_step gather)
  bytes=$(num sparse_exchange_bytes_per_step gather)
  kmax=$(awk -v b="$bytes" -v n=$n -v e=$E 'BEGIN { printf "%d", b / ((n - 1) * (e + 1) * 4) + 0.5 }')
  predicted=0
  # The link's times vary by a third from one launch to the next here (4 ranks, the network and its
  # shaping share 2 cores): each size's time is the median of 5 launches of 10 all-gathers.
  for size in $((n * kmax * 4)) $((n * kmax * E * 4)); do
    for launch in 1 2 3 4 5; do
      mpi h22 4 "$BIN/allreduce_bench" --op allgather --min-bytes $size --max-bytes $size --iters 10 > gather.txt 2>&1 \
        && grep -q "# all results correct" gather.txt || { echo "FAILED: allreduce_bench --op allgather: $(tail -2 gather.txt)"; exit 1; }
      awk -v s=$size '$3 == "gather" && $1 == s { print $4; exit }' gather.txt
    done > times.txt
    us=$(sort -g times.txt | sed -n 3p)
    echo "all-gather of $size bytes on the shaped link: median $us us of $(sort -g times.txt | tr '\n' ' ')(allreduce_bench --op allgather)"
    predicted=$(awk -v p="$predicted" -v u="$us" 'BEGIN { print p + u / 1e6 }')
  done
  awk -v p="$predicted" -v m="$measured" -v r="$rank0" -v k="$kmax" -v b="$bytes" 'BEGIN { e = (p - m) / m
    printf "gather: k = %.0f rows, %.0f bytes received per rank and step (model); the all-gathers %.2f ms on the slowest rank (the whole exchange %.2f on rank 0), %.2f ms predicted: %+.0f%%, %s\n",
      k, b, 1e3 * m, 1e3 * r, 1e3 * p, 100 * e, (e * e <= 0.0225) ? "within 15%" : "OFF BY MORE THAN 15%"; exit !(e * e <= 0.0225) }' \
    || status=1
  # The embedding leaves the link: the dense run's bytes less the gather's are at least 80% of the table's
  # V E 4 bytes (which an all-reduce moves at least once over each node's link).
  awk -v g="${rx[gather]}" -v d="${rx[dense]}" -v v="$vocab" -v e=$E 'BEGIN { t = v * e * 4
    printf "link bytes per step: dense %.0f, gather %.0f: %.0f fewer, %.2f of the table'"'"'s %.0f bytes\n", d, g, d - g, (d - g) / t, t
    exit !(d - g >= 0.8 * t) }' || { echo "FAILED: the gather did not take the table off the link"; status=1; }
fi
awk -v a="${loss[gather]:-x}" -v b="${loss[allreduce]:-y}" 'BEGIN { exit !(a == a + 0 && (a - b) ^ 2 < 1e-8) }' \
  && echo "sparse losses: gather ${loss[gather]}, allreduce ${loss[allreduce]} (equal within 1e-4)" \
  || { echo "FAILED: sparse losses differ: gather ${loss[gather]:-}, allreduce ${loss[allreduce]:-}"; status=1; }
exit $status
