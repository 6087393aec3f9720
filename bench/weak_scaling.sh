#!/usr/bin/env bash
# Weak scaling of `rnn_dist train` on the CPU: the same per-rank batch on 1 and on 2 ranks (one thread
# each), on the fortunes corpus. Prints tokens/s of each run, the efficiency tokens/s(2) / (2 x tokens/s(1))
# and, from the trainer's own time split, the share of step time spent in the all-reduce and in waiting
# for data. Usage: weak_scaling.sh BUILD_DIR [S|L (default S)] [STEPS (default 60)]
set -euo pipefail
BUILD=$(cd "${1:?usage: weak_scaling.sh BUILD_DIR [S|L] [STEPS]}" && pwd)
CONFIG=${2:-S}
STEPS=${3:-60}
case $CONFIG in
  S) MODEL="--embed 64 --hidden 256 --layers 2 --batch-size 32" ;;
  L) MODEL="--embed 256 --hidden 1024 --layers 2 --batch-size 64" ;;
  *) echo "weak_scaling: unknown configuration $CONFIG (S or L)" >&2; exit 2 ;;
esac
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mapfile -t inputs < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
"$BUILD/rnn_prep" --input "${inputs[@]}" --output-dir "$WORK/data" --format records --record-sep '%' \
  --tokenizer char --max-len 400 --valid-fraction 0.05 --seed 1 > /dev/null

# The summary line: "trained N tokens in S s: R tokens/s (all ranks); time split (rank 0): compute a%,
# all-reduce b%, data wait c%, update d%".
field() { sed -n "s/.*$1 \([0-9.]*\)%.*/\1/p" "$2"; }
run() {  # $1 = ranks
  mpirun --oversubscribe -np "$1" "$BUILD/rnn_dist" train --train "$WORK/data/train.h5" $MODEL --threads 1 \
    --max-steps "$STEPS" --log-every 1000000 --seed 1 > "$WORK/log.$1" 2>&1 \
    || { echo "weak_scaling: -np $1 failed: $(tail -2 "$WORK/log.$1")" >&2; exit 1; }
  grep -q "^trained" "$WORK/log.$1" || { echo "weak_scaling: no summary in -np $1 output" >&2; exit 1; }
}
run 1
run 2
echo "configuration $CONFIG ($MODEL), $STEPS steps, --threads 1"
printf "%-6s %12s %12s %12s\n" ranks tokens/s all-reduce "data wait"
for n in 1 2; do
  tps=$(sed -n 's/.* s: \([0-9]*\) tokens\/s.*/\1/p' "$WORK/log.$n")
  printf "%-6s %12s %11s%% %11s%%\n" "$n" "$tps" "$(field all-reduce "$WORK/log.$n")" "$(field 'data wait' "$WORK/log.$n")"
  eval "tps$n=$tps"
done
awk -v a="$tps1" -v b="$tps2" 'BEGIN { printf "weak-scaling efficiency: %.1f%% (target >= 90%%)\n", 100 * b / (2 * a) }'
