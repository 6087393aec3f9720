#!/usr/bin/env bash
# What bfloat16 gradients do to training: config S (E=64 H=256 L=2, char-level fortunes, 8 sequences per
# rank) on 4 ranks of this machine, STEPS steps with --allreduce-dtype fp32 and bf16 from the same seed.
# Prints the loss of both every STEPS/5 steps (each the mean over the log interval) and the largest
# difference; checks that both fall and that bf16's final loss is within 1% of fp32's; draws both curves
# into OUT/bf16_loss.png with scripts/plot_metrics.py when matplotlib is there.
#   bench/bf16_loss.sh BUILD_DIR [OUT_DIR (bench-out)] [STEPS (300)]
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$1" && pwd)
OUT=$(mkdir -p "${2:-bench-out}" && cd "${2:-bench-out}" && pwd)
STEPS=${3:-300}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
mapfile -t inputs < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
"$BUILD/rnn_prep" --input "${inputs[@]}" --output-dir data --format records --record-sep '%' --tokenizer char \
  --max-len 400 --valid-fraction 0 --seed 1 > /dev/null || { echo "rnn_prep failed"; exit 1; }
for dtype in fp32 bf16; do
  mpirun --oversubscribe -np 4 "$BUILD/rnn_dist" train --train data/train.h5 --embed 64 --hidden 256 --layers 2 \
    --batch-size 8 --max-steps "$STEPS" --log-every 10 --threads 1 --device cpu --allreduce-dtype "$dtype" \
    --metrics "$OUT/bf16_loss.$dtype.jsonl" > "log.$dtype" 2>&1 || { echo "FAILED: $dtype: $(tail -2 "log.$dtype")"; exit 1; }
done
awk -v every=$((STEPS / 5)) '
  /"kind":"train"/ { match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7) + 0
    match($0, /"loss":[0-9.e+-]+/); v = substr($0, RSTART + 7, RLENGTH - 7) + 0
    if (FILENAME ~ /fp32/) a[s] = v; else b[s] = v; if (s > last) last = s }
  END { printf "%8s %10s %10s %10s\n", "step", "fp32", "bf16", "bf16-fp32"
    for (s in a) if (s in b) { d = b[s] - a[s]; if (d < 0) d = -d; if (d > worst) { worst = d; at = s } }
    for (s = every; s <= last; s += every) if (s in a && s in b) printf "%8d %10.4f %10.4f %+10.4f\n", s, a[s], b[s], b[s] - a[s]
    first = 10
    ok = a[last] < a[first] - 0.3 && b[last] < b[first] - 0.3 && (b[last] - a[last]) / a[last] < 0.01 && (a[last] - b[last]) / a[last] < 0.01
    printf "largest difference %.4f at step %d; final loss fp32 %.4f, bf16 %.4f (%+.2f%%): %s\n", worst, at, a[last], b[last],
      100 * (b[last] - a[last]) / a[last], ok ? "both fall, bf16 within 1% of fp32" : "FAILED: a loss did not fall or bf16 is off by more than 1%"
    exit !ok }' "$OUT/bf16_loss.fp32.jsonl" "$OUT/bf16_loss.bf16.jsonl" || exit 1
grep -o 'time split.*' log.fp32 | sed 's/^/fp32 /'
grep -o 'time split.*' log.bf16 | sed 's/^/bf16 /'
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
if "$PY" -c "import matplotlib" 2> /dev/null; then
  "$PY" "$HERE/../scripts/plot_metrics.py" --metrics "$OUT/bf16_loss.fp32.jsonl" --label "fp32 all-reduce" \
    --metrics "$OUT/bf16_loss.bf16.jsonl" --label "bf16 all-reduce" --title "config S, 4 ranks: fp32 vs bf16 gradients" \
    --output "$OUT/bf16_loss.png" && echo "chart: $OUT/bf16_loss.png"
else
  echo "matplotlib not installed: no chart"
fi
