#!/usr/bin/env bash
# The 800k-word language model of issue 28: a synthetic Zipfian corpus whose vocabulary has 800,000
# words trains with the adaptive softmax, and its memory stays flat from step to step. Prints
# `rnn_dist check`'s predicted peak, the trainer's measured peak (resident and the backend's buffers) and
# the resident memory at every logged step; fails unless the prediction is within 20% of the resident
# peak, the buffers' within 2%, and the resident memory grows by less than 1% from the first logged step
# to the last.
# usage: bench/memory_plan.sh BUILD_DIR [STEPS (default 200)] [WORDS (default 800000)]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: bench/memory_plan.sh BUILD_DIR [STEPS] [WORDS]}" && pwd)
STEPS=${2:-200}
WORDS=${3:-800000}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# Every word once (so that the vocabulary has them all), then Zipfian lines of 20 to 60 words for about
# three times as many tokens.
awk -v lines=$((3 * WORDS / 40)) -v minw=20 -v maxw=60 -v types="$WORDS" -v seed=11 -v cover=1 \
  -f "$HERE/synth_corpus.awk" > corpus.txt
/usr/bin/time -f "rnn_prep: %e s, %M KiB" "$BUILD/rnn_prep" --input corpus.txt --output-dir data --tokenizer word \
  --valid-fraction 0.01 > prep.log 2> prep.time || { cat prep.log prep.time; exit 1; }
cat prep.time
vocab=$("$BUILD/rnn_dist" info data/train.h5 | sed -n 's/^ *vocab size: *\([0-9]*\).*/\1/p')
echo "vocabulary: $vocab entries"

ARGS=(--train data/train.h5 --device cpu --embed 64 --hidden 256 --layers 1 --softmax adaptive
      --cutoffs 2000,$((WORDS / 40)),$((WORDS / 4)) --batch-size 32 --max-steps "$STEPS" --log-every 20)
"$BUILD/rnn_dist" check "${ARGS[@]}" > check.log || { cat check.log; exit 1; }
grep "^PASS  memory" check.log
pr=$(sed -n 's/^PASS  memory .*resident_bytes=\([0-9]*\).*/\1/p' check.log)
pb=$(sed -n 's/^PASS  memory .*cpu_buffer_bytes=\([0-9]*\).*/\1/p' check.log)
"$BUILD/rnn_dist" train "${ARGS[@]}" --metrics metrics.jsonl > train.log || { tail train.log; exit 1; }
grep "^peak memory" train.log
mr=$(sed -n 's/.*"kind":"summary".*"peak_resident_bytes":\([0-9]*\).*/\1/p' metrics.jsonl)
mb=$(sed -n 's/.*"kind":"summary".*"peak_device_bytes":\([0-9]*\).*/\1/p' metrics.jsonl)
steps=$(sed -n 's/.*"kind":"train","step":\([0-9]*\).*"resident_bytes":\([0-9]*\).*/\1 \2/p' metrics.jsonl)
echo "resident memory by step:"
echo "$steps" | awk '{ printf "  step %5d  %.1f MiB\n", $1, $2 / 1048576 }'
first=$(echo "$steps" | head -1 | cut -d' ' -f2)
last=$(echo "$steps" | tail -1 | cut -d' ' -f2)
awk -v pr="$pr" -v pb="$pb" -v mr="$mr" -v mb="$mb" -v f="$first" -v l="$last" -v V="$vocab" 'BEGIN {
  printf "vocabulary %d: predicted resident peak %.1f MiB, measured %.1f MiB (%.3f); buffers %.1f MiB, measured %.1f MiB (%.4f)\n",
    V, pr / 1048576, mr / 1048576, pr / mr, pb / 1048576, mb / 1048576, pb / mb
  printf "resident growth from the first logged step to the last: %+.2f%%\n", 100 * (l - f) / f
  ok = pr / mr > 0.8 && pr / mr < 1.2 && pb / mb > 0.98 && pb / mb < 1.02 && (l - f) / f < 0.01
  print ok ? "memory_plan: OK" : "memory_plan: FAILED"
  exit !ok }'
