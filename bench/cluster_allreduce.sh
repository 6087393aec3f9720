#!/usr/bin/env bash
# All-reduce across the test cluster's nodes (tests/cluster/cluster.sh: 2 nodes x 2 ranks, network
# namespaces on one machine) at shaped link rates: bench/allreduce_bench, flat and hierarchical, with
# every node's veth limited each way by `cluster.sh shape` (tbf; bandwidth only, no delay: no netem here).
# Prints nccl-tests' algorithm and bus bandwidth per size, rate and algorithm, every result checked
# exactly by allreduce_bench, and checks that the shaping holds: no cross-node bus bandwidth above what
# the link allows (flat: the ring's busbw is what each node link carries, at most its rate; hierarchical:
# its cross-node part moves S per node for 2(n-1)/n S of busbw, so at most 1.5x the rate for n = 4).
# Writes OUT/cluster_allreduce.dat (rate algo bytes time_us algbw busbw). Needs root and namespaces.
#   bench/cluster_allreduce.sh BUILD_DIR [OUT_DIR (bench-out)] [RATES ("100mbit 1gbit off")]
set -uo pipefail
OUT=$(mkdir -p "${2:-bench-out}" && cd "${2:-bench-out}" && pwd)
RATES=${3:-"100mbit 1gbit off"}
NODES=2
source "$(cd "$(dirname "$0")" && pwd)/../tests/cluster/lib.sh"  # makes the cluster, removes it at exit
cp "$BUILD/bench/allreduce_bench" "$BIN/"
hostfile h22 2 2
DAT=$OUT/cluster_allreduce.dat
echo "# rate algo bytes time_us algbw_GBps busbw_GBps" > "$DAT"
status=0
for rate in $RATES; do
  for node in $NODES; do bash "$CLUSTER" shape "$D" "$node" "$rate" || exit 1; done
  # Sizes from 64 kB to 16 MB (64 MB unshaped); a slow link gets fewer iterations.
  max=$((16 << 20)) iters=3
  [ "$rate" = off ] && max=$((64 << 20)) iters=5
  echo "== $rate: 2 nodes x 2 ranks"
  mpi h22 4 "$BIN/allreduce_bench" --min-bytes 65536 --max-bytes $max --iters $iters > "ar.$rate" 2>&1
  rc=$?
  cat "ar.$rate"
  [ $rc -eq 0 ] && grep -q "^# all results correct" "ar.$rate" || { echo "FAILED: allreduce_bench at $rate (exit $rc)"; status=1; }
  awk -v r="$rate" '!/^#/ && NF == 7 { print r, $3, $1, $4, $5, $6 }' "ar.$rate" >> "$DAT"
  if [ "$rate" != off ]; then
    # The largest size, against the link: bytes/s of the rate.
    awk -v r="$rate" 'BEGIN { n = r + 0; u = substr(r, length(n "") + 1); m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 1; link = n * m / 8 / 1e9 }
      !/^#/ && NF == 7 && $1 >= top[$3] { top[$3] = $1; last[$3] = $6 }
      END { ok = last["flat"] <= 1.1 * link && last["hier"] <= 1.6 * link
            printf "   link %.4f GB/s: busbw of the largest size flat %.4f (%.2fx), hierarchical %.4f (%.2fx): %s\n",
              link, last["flat"], last["flat"] / link, last["hier"], last["hier"] / link,
              ok ? "within the link" : "ABOVE THE LINK: the shaping did not hold"
            exit !ok }' "ar.$rate" || status=1
  fi
done
for node in $NODES; do bash "$CLUSTER" shape "$D" "$node" off; done
echo "results: $DAT"
exit $status
