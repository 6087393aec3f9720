#!/usr/bin/env bash
# The step-time model of docs/scaling.md against measurement on the test cluster (tests/cluster/cluster.sh,
# 2 nodes x 2 ranks) at shaped link rates: `rnn_dist train` of config S (E=64 H=256 L=2, 8 sequences per
# rank and micro-batch, char-level fortunes), flat and hierarchical all-reduce, and flat with --accumulate 4
# (4 micro-batches per step: a 4 times larger batch for one all-reduce), 40 steps each. For every run it prints the
# measured step time and its all-reduce share (rank 0's time split) next to the prediction
#   step = compute + bytes * 2(n-1)/n / busbw(rate, bytes)
# with compute measured in the same run and busbw measured by bench/cluster_allreduce.sh at that rate and
# size (read from OUT/cluster_allreduce.dat, which it runs first when missing), and checks every run
# against the 15% target. Writes OUT/cluster_scaling.dat and, with gnuplot, the chart
# OUT/cluster_scaling.png (bench/cluster_scaling.gp). Needs root and namespaces.
#   bench/cluster_scaling.sh BUILD_DIR [OUT_DIR (bench-out)] [RATES ("100mbit 1gbit off")]
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mkdir -p "${2:-bench-out}" && cd "${2:-bench-out}" && pwd)
RATES=${3:-"100mbit 1gbit off"}
AR=$OUT/cluster_allreduce.dat
[ -s "$AR" ] || bash "$HERE/cluster_allreduce.sh" "$1" "$OUT" "$RATES" > /dev/null || { echo "cluster_allreduce.sh failed"; exit 1; }
NODES=2
source "$HERE/../tests/cluster/lib.sh"
hostfile h22 2 2
mapfile -t inputs < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
"$BIN/rnn_prep" --input "${inputs[@]}" --output-dir data --format records --record-sep '%' --tokenizer char \
  --max-len 400 --valid-fraction 0 --seed 1 > /dev/null || { echo "rnn_prep failed"; exit 1; }
DAT=$OUT/cluster_scaling.dat
echo "# rate algo steps step_s compute_s allreduce_s grad_bytes busbw_GBps predicted_step_s predicted_allreduce_s accumulate tokens_per_s" > "$DAT"
status=0
for rate in $RATES; do
  for node in $NODES; do bash "$CLUSTER" shape "$D" "$node" "$rate" || exit 1; done
  for run in flat:1 hierarchical:1 flat:4; do
    algo=${run%:*} acc=${run#*:}
    short=${algo:0:4}
    rm -f m.jsonl
    mpi h22 4 "$BIN/rnn_dist" train --train data/train.h5 --embed 64 --hidden 256 --layers 2 --batch-size 8 \
      --accumulate "$acc" --max-steps 40 --log-every 40 --threads 1 --device cpu --allreduce "$algo" --metrics m.jsonl \
      > "train.$rate.$run" 2>&1 || { echo "FAILED: train at $rate, $run: $(tail -2 "train.$rate.$run")"; status=1; continue; }
    params=$(sed -n 's/^rnn_dist train: 4 rank(s), \([0-9]*\) parameters.*/\1/p' "train.$rate.$run")
    # The prediction: the gradient buffer's bytes at the bus bandwidth measured for that size (the
    # nearest measured size at or above it) at this rate and algorithm.
    line=$(awk -v r="$rate" -v a="$short" -v p="$params" -v algo="$algo" -v acc="$acc" '
      FILENAME == ARGV[1] { if ($1 == r && $2 == a && $3 >= p * 4 && (best == "" || $3 < best)) { best = $3; bw = $6 } next }
      /"kind":"summary"/ {
        match($0, /"step":[0-9]+/); steps = substr($0, RSTART + 7, RLENGTH - 7) + 0
        match($0, /"seconds":[0-9.e+-]+/); sec = substr($0, RSTART + 10, RLENGTH - 10) + 0
        match($0, /"compute_s":[0-9.e+-]+/); comp = substr($0, RSTART + 12, RLENGTH - 12) + 0
        match($0, /"allreduce_s":[0-9.e+-]+/); ar = substr($0, RSTART + 14, RLENGTH - 14) + 0
        match($0, /"tokens_per_s":[0-9.e+-]+/); tps = substr($0, RSTART + 15, RLENGTH - 15) + 0 }
      END { bytes = p * 4; n = 4; pred_ar = bytes * 2 * (n - 1) / n / (bw * 1e9); step = sec / steps
            pred = (sec - ar) / steps + pred_ar; err = (pred - step) / step
            printf "%s %s %d %.4f %.4f %.4f %d %.4f %.4f %.4f %d %.0f %+.3f\n", r, algo, steps, step, comp / steps, ar / steps, bytes,
              bw, pred, pred_ar, acc, tps, err }' "$AR" m.jsonl)
    echo "${line% *}" >> "$DAT"
    read -r _ _ steps step comp ar bytes bw pred pred_ar _ tps err <<< "$line"
    within=$(awk -v e="$err" 'BEGIN { print (e <= 0.15 && e >= -0.15) ? "within 15%" : "OFF BY MORE THAN 15%" }')
    [ "$within" = "within 15%" ] || status=1
    printf "%-8s %-12s K=%d step %.3f s (compute %.3f, all-reduce %.3f = %.0f%% of it), %s tokens/s; predicted %.3f s (all-reduce %.3f at %.4f GB/s busbw): %+.0f%%, %s\n" \
      "$rate" "$algo" "$acc" "$step" "$comp" "$ar" "$(awk -v a="$ar" -v s="$step" 'BEGIN { print 100 * a / s }')" "$tps" "$pred" "$pred_ar" "$bw" \
      "$(awk -v e="$err" 'BEGIN { print 100 * e }')" "$within"
  done
done
for node in $NODES; do bash "$CLUSTER" shape "$D" "$node" off; done
echo "results: $DAT"
if command -v gnuplot > /dev/null; then
  gnuplot -e "datafile='$DAT'; outfile='$OUT/cluster_scaling.png'" "$HERE/cluster_scaling.gp" && echo "chart: $OUT/cluster_scaling.png"
else
  echo "gnuplot not installed: no chart (apt-get install gnuplot-nox)"
fi
exit $status
