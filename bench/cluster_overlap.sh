#!/usr/bin/env bash
# Overlap and bfloat16 all-reduce on the test cluster (tests/cluster/cluster.sh, NODES nodes x 2 ranks) at
# shaped link rates where the all-reduce takes roughly 30-100% of compute: `rnn_dist train` of config S
# (as bench/cluster_scaling.sh: E=64 H=256 L=2, 8 sequences per rank, char-level fortunes), 40 steps,
# --overlap off|on (--bucket-mb 0.5) x --allreduce-dtype fp32|bf16, REPS times each, interleaved (this
# machine is shared and noisy: the summary takes medians).
#
# At each rate it first measures the flat all-reduce's bus bandwidth by size (bench/allreduce_bench, every
# sum checked), then predicts every run's step time as compute + update + data wait (measured in that
# run) + exposed communication:
#   without overlap: wire bytes x 2(n-1)/n / busbw(wire bytes)
#   with overlap: the groups' all-reduces one after another (a group: the buckets one report of the
#   backward pass sent, which share their lead before the end of the backward pass in the run's
#   metrics), group g starting when it was sent or when g-1 ends, each taking its wire bytes x 2(n-1)/n
#   / busbw(its bytes); exposed = how far the last one ends after the backward pass.
# It reports how much of the hideable communication the overlap hid, two ways: (T_off - T_on) / min(C, A),
# with C and A the off runs' compute (all but the all-reduce) and all-reduce per step, against the ideal
# step max(C, A); and the exposed all-reduce saved, (A - A_on), over what the model says can be saved
# given when the buckets become final (predicted off minus predicted on); and bf16's speed-up. Checks: every allreduce_bench sum exact, every run's final loss finite,
# overlap's loss equal to off's (same parameters), bf16's within 0.02 of fp32's; predictions are
# reported against the 15% target. Writes OUT/cluster_overlap.dat and, with gnuplot, the chart
# OUT/cluster_overlap.png (bench/cluster_overlap.gp). Needs root and namespaces.
# With one node every all-reduce stays on it (shared memory): the rate shapes nothing there.
#   bench/cluster_overlap.sh BUILD_DIR [OUT_DIR (bench-out)] [RATES ("1gbit 500mbit 300mbit")] [REPS (3)]
#                            [NODES (2)]
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mkdir -p "${2:-bench-out}" && cd "${2:-bench-out}" && pwd)
RATES=${3:-"1gbit 500mbit 300mbit"}
REPS=${4:-3}
NODE_COUNT=${5:-2}
NODES=$NODE_COUNT  # lib.sh makes that many nodes, then names them in NODES
RANKS=$((2 * NODE_COUNT))
source "$HERE/../tests/cluster/lib.sh"  # makes the cluster, removes it at exit
cp "$BUILD/bench/allreduce_bench" "$BIN/"
hostfile hosts $(for _ in $(seq "$NODE_COUNT"); do echo 2; done)
mapfile -t inputs < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
"$BIN/rnn_prep" --input "${inputs[@]}" --output-dir data --format records --record-sep '%' --tokenizer char \
  --max-len 400 --valid-fraction 0 --seed 1 > /dev/null || { echo "rnn_prep failed"; exit 1; }
DAT=$OUT/cluster_overlap$([ "$NODE_COUNT" -ne 2 ] && echo ".${NODE_COUNT}x2").dat
echo "# rate overlap dtype steps step_s other_s allreduce_s predicted_step_s predicted_allreduce_s error tokens_per_s loss" > "$DAT"
status=0
for rate in $RATES; do
  for node in $NODES; do bash "$CLUSTER" shape "$D" "$node" "$rate" || exit 1; done
  mpi hosts "$RANKS" "$BIN/allreduce_bench" --min-bytes 131072 --max-bytes 4194304 --iters 10 > "ar.$rate" 2>&1
  grep -q "^# all results correct" "ar.$rate" || { echo "FAILED: allreduce_bench at $rate: $(tail -2 "ar.$rate")"; status=1; }
  awk '!/^#/ && NF == 7 && $3 == "flat" { print $1, $6 }' "ar.$rate" > "busbw.$rate"
  echo "== $rate: flat busbw $(awk '{ printf "%s%.0f kB %.4f GB/s", (NR > 1 ? ", " : ""), $1 / 1024, $2 }' "busbw.$rate")"
  for run in $(for r in $(seq "$REPS"); do echo off:fp32 on:fp32 off:bf16 on:bf16; done); do
    overlap=${run%:*} dtype=${run#*:}
    rm -f m.jsonl
    mpi hosts "$RANKS" "$BIN/rnn_dist" train --train data/train.h5 --embed 64 --hidden 256 --layers 2 --batch-size 8 \
      --max-steps 40 --log-every 40 --threads 1 --device cpu --overlap "$overlap" --bucket-mb 0.5 \
      --allreduce-dtype "$dtype" --metrics m.jsonl > "train.$rate.$run" 2>&1 \
      || { echo "FAILED: train at $rate, $run: $(tail -2 "train.$rate.$run")"; status=1; continue; }
    params=$(sed -n 's/^rnn_dist train: [0-9]* rank(s), \([0-9]*\) parameters.*/\1/p' "train.$rate.$run")
    loss=$(grep -o 'step 40/40 loss [0-9.a-z]*' "train.$rate.$run" | awk '{ print $4 }')
    line=$(awk -v r="$rate" -v p="$params" -v ov="$overlap" -v dt="$dtype" -v loss="$loss" -v n="$RANKS" '
      function busbw(bytes,   i) {  # at the nearest measured size at or above bytes (the largest past it)
        for (i = 1; i <= m; ++i) if (size[i] >= bytes) return bw[i]
        return bw[m] }
      function field(key,   s) { if (!match($0, "\"" key "\":[0-9.e+-]+")) return 0
        s = substr($0, RSTART, RLENGTH); sub(/.*:/, "", s); return s + 0 }
      function list(key, out,   s) { if (!match($0, "\"" key "\":\\[[^]]*\\]")) return 0
        s = substr($0, RSTART, RLENGTH); sub(/.*\[/, "", s); sub(/\]/, "", s); return split(s, out, ",") }
      FILENAME == ARGV[1] { size[++m] = $1; bw[m] = $2; next }
      /"kind":"summary"/ { steps = field("step"); sec = field("seconds"); ar = field("allreduce_s")
        tps = field("tokens_per_s"); nb = list("bucket_elems", elems); list("bucket_lead_s", lead) }
      END { f = 2 * (n - 1) / n; elem = dt == "bf16" ? 2 : 4
        if (ov == "on") {
          # The buckets of one report were sent together (equal leads) and go in one all-reduce.
          t = -1e30
          for (b = 1; b <= nb; b = c) {
            bytes = 0; for (c = b; c <= nb && lead[c] == lead[b]; ++c) bytes += elems[c] * elem
            start = -lead[b] > t ? -lead[b] : t; t = start + bytes * f / (busbw(bytes) * 1e9) }
          pred_ar = t > 0 ? t : 0
        } else pred_ar = p * elem * f / (busbw(p * elem) * 1e9)
        step = sec / steps; other = (sec - ar) / steps; pred = other + pred_ar; err = (pred - step) / step
        printf "%s %s %s %d %.4f %.4f %.4f %.4f %.4f %+.3f %.0f %s\n", r, ov, dt, steps, step, other, ar / steps, pred, pred_ar, err, tps, loss }' \
      "busbw.$rate" m.jsonl)
    echo "$line" >> "$DAT"
    read -r _ _ _ _ step other ar pred pred_ar err tps _ <<< "$line"
    printf "   overlap %-3s %s: step %.3f s (all-reduce exposed %.3f, the rest %.3f), %s tokens/s, loss %s; predicted %.3f s (exposed %.3f): %+.0f%%%s\n" \
      "$overlap" "$dtype" "$step" "$ar" "$other" "$tps" "$loss" "$pred" "$pred_ar" "$(awk -v e="$err" 'BEGIN { print 100 * e }')" \
      "$(awk -v e="$err" 'BEGIN { print (e <= 0.15 && e >= -0.15) ? "" : ", OFF BY MORE THAN 15%" }')"
  done
  # Per rate: what overlap hid, what bf16 saved (medians over the repetitions); the losses checked.
  awk -v r="$rate" '
    function median(key, col,   n, i, j, t, v) { n = cnt[key]
      for (i = 1; i <= n; ++i) v[i] = val[key, col, i]
      for (i = 2; i <= n; ++i) for (j = i; j > 1 && v[j - 1] > v[j]; --j) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
    $1 == r { k = $2 "." $3; ++cnt[k]; for (c = 5; c <= 9; ++c) val[k, c, cnt[k]] = $c
      if (!(k in l)) l[k] = $12; else if (l[k] != $12) { printf "   FAILED: %s loss %s, then %s\n", k, l[k], $12; bad = 1 } }
    END {
      for (k in l) if (l[k] !~ /^[0-9.]+$/) { printf "   FAILED: %s loss \"%s\"\n", k, l[k]; bad = 1 }
      if (l["on.fp32"] != l["off.fp32"]) { printf "   FAILED: overlap changed the loss (%s, off %s)\n", l["on.fp32"], l["off.fp32"]; bad = 1 }
      d = l["off.bf16"] - l["off.fp32"]; if (d < 0) d = -d
      if (d > 0.02) { printf "   FAILED: bf16 loss %s vs fp32 %s\n", l["off.bf16"], l["off.fp32"]; bad = 1 }
      split("fp32 bf16", dts, " ")
      for (i = 1; i <= 2; ++i) { t = dts[i]; off = "off." t; on = "on." t
        T0 = median(off, 5); C = median(off, 6); A = median(off, 7); T1 = median(on, 5); A1 = median(on, 7)
        P0 = median(off, 9); P1 = median(on, 9)
        hide = C < A ? C : A; ideal = C > A ? C : A
        printf "   %s, medians of %d: without overlap %.3f s (the rest %.3f, all-reduce %.3f = %.0f%% of the rest); with %.3f s (exposed %.3f)\n", t, cnt[off], T0, C, A, 100 * A / C, T1, A1
        printf "      against max(C, A) = %.3f s: hid %.0f%% of min(C, A) = %.3f s; exposed all-reduce saved %.3f s of the %.3f s the model allows (%.0f%%)\n",
          ideal, 100 * (T0 - T1) / hide, hide, A - A1, P0 - P1, 100 * (A - A1) / (P0 - P1) }
      printf "   bf16 speed-up: %.2fx without overlap, %.2fx with; both: %.2fx over fp32 without overlap\n",
        median("off.fp32", 5) / median("off.bf16", 5), median("on.fp32", 5) / median("on.bf16", 5), median("off.fp32", 5) / median("on.bf16", 5)
      exit bad }' "$DAT" || status=1
done
for node in $NODES; do bash "$CLUSTER" shape "$D" "$node" off; done
echo "results: $DAT"
if command -v gnuplot > /dev/null; then
  gnuplot -e "datafile='$DAT'; outfile='${DAT%.dat}.png'; nodes=$NODE_COUNT" "$HERE/cluster_overlap.gp" \
    && echo "chart: ${DAT%.dat}.png"
else
  echo "gnuplot not installed: no chart (apt-get install gnuplot-nox)"
fi
exit $status
