#!/usr/bin/env bash
# Weak scaling of `rnn_dist train` on the CPU: the same per-rank batch on 1 and on 2 ranks (one thread
# each), on the fortunes corpus. Prints tokens/s of each run, the efficiency tokens/s(2) / (2 x tokens/s(1))
# and, from the trainer's own time split, the share of step time spent in the all-reduce and in waiting
# for data. MODE local (default): both runs on this machine; cluster: 1 node x 1 rank against 2 nodes x 1
# rank of a namespace cluster (tests/cluster/cluster.sh), so that the all-reduce crosses the bridge over TCP.
# Each run must end with its summary and a finite loss.
# Usage: weak_scaling.sh BUILD_DIR [S|L (default S)] [STEPS (default 60)] [local|cluster]
set -euo pipefail
BUILD=$(cd "${1:?usage: weak_scaling.sh BUILD_DIR [S|L] [STEPS] [local|cluster]}" && pwd)
CONFIG=${2:-S}
STEPS=${3:-60}
MODE=${4:-local}
HERE=$(cd "$(dirname "$0")" && pwd)
case $CONFIG in
  S) MODEL="--embed 64 --hidden 256 --layers 2 --batch-size 32" ;;
  L) MODEL="--embed 256 --hidden 1024 --layers 2 --batch-size 64" ;;
  *) echo "weak_scaling: unknown configuration $CONFIG (S or L)" >&2; exit 2 ;;
esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
case $MODE in
  local)
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    launch() { mpirun --oversubscribe -np "$1" "${@:2}"; } ;;
  cluster)
    # Outside /tmp, which the nodes hide; the programs are copied next to the data.
    WORK=$(mktemp -d /var/tmp/rnn_dist_weak.XXXXXX)
    trap 'bash "$HERE/../tests/cluster/cluster.sh" down "$WORK/cluster"; rm -rf "$WORK"' EXIT
    bash "$HERE/../tests/cluster/cluster.sh" up "$WORK/cluster" 2 > /dev/null
    source "$WORK/cluster/env"
    echo "10.77.$TAG.1 slots=1" > "$WORK/hosts.1"
    printf '10.77.%s.1 slots=1\n10.77.%s.2 slots=1\n' "$TAG" "$TAG" > "$WORK/hosts.2"
    mkdir -p "$WORK/bin"
    cp "$BUILD/rnn_dist" "$BUILD/rnn_prep" "$WORK/bin/"
    BUILD=$WORK/bin
    launch() {
      bash "$HERE/../tests/cluster/cluster.sh" exec "$WORK/cluster" head "$WORK/cluster/mpirun" --hostfile "$WORK/hosts.$1" \
        -np "$1" "${@:2}"
    } ;;
  *) echo "weak_scaling: unknown mode $MODE (local or cluster)" >&2; exit 2 ;;
esac

mapfile -t inputs < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
"$BUILD/rnn_prep" --input "${inputs[@]}" --output-dir "$WORK/data" --format records --record-sep '%' \
  --tokenizer char --max-len 400 --valid-fraction 0.05 --seed 1 > /dev/null

# The summary line: "trained N tokens in S s: R tokens/s (all ranks); time split (rank 0): compute a%,
# all-reduce b%, data wait c%, update d%".
field() { sed -n "s/.*$1 \([0-9.]*\)%.*/\1/p" "$2"; }
run() {  # $1 = ranks
  launch "$1" "$BUILD/rnn_dist" train --train "$WORK/data/train.h5" $MODEL --threads 1 \
    --max-steps "$STEPS" --log-every "$STEPS" --seed 1 > "$WORK/log.$1" 2>&1 \
    || { echo "weak_scaling: -np $1 failed: $(tail -2 "$WORK/log.$1")" >&2; exit 1; }
  grep -q "^trained" "$WORK/log.$1" || { echo "weak_scaling: no summary in -np $1 output" >&2; exit 1; }
  grep -qE "^epoch [0-9]+ step $STEPS/$STEPS loss [0-9]" "$WORK/log.$1" \
    || { echo "weak_scaling: -np $1 did not end with a finite loss: $(grep '^epoch' "$WORK/log.$1" | tail -1)" >&2; exit 1; }
}
run 1
run 2
echo "configuration $CONFIG ($MODEL), $STEPS steps, --threads 1, $MODE"
printf "%-6s %12s %12s %12s\n" ranks tokens/s all-reduce "data wait"
for n in 1 2; do
  tps=$(sed -n 's/.* s: \([0-9]*\) tokens\/s.*/\1/p' "$WORK/log.$n")
  printf "%-6s %12s %11s%% %11s%%\n" "$n" "$tps" "$(field all-reduce "$WORK/log.$n")" "$(field 'data wait' "$WORK/log.$n")"
  eval "tps$n=$tps"
done
awk -v a="$tps1" -v b="$tps2" 'BEGIN { printf "weak-scaling efficiency: %.1f%% (target >= 90%%)\n", 100 * b / (2 * a) }'
