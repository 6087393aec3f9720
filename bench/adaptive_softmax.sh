#!/usr/bin/env bash
# The adaptive softmax against the full one (issue 28): a word-level language model (E = H = 256, 1 layer,
# 32 sequences per step, 1 rank, 1 thread) on a synthetic Zipfian corpus (bench/synth_corpus.awk, TYPES
# word types, about 600k tokens), STEPS steps each with --softmax full and with --softmax adaptive
# --cutoffs 2000,10000, from the same seed. Prints the training tokens/s of both (measured in the same
# run of this script, so their ratio is what counts), the validation perplexity after the same tokens, and
# the time split; then PyTorch's nn.LSTM + nn.AdaptiveLogSoftmaxWithLoss on the same file, batch size, steps
# and thread (bench/pytorch_adaptive.py; skipped, saying so, without torch and h5py). Checks that the
# adaptive softmax is at least 3x as fast as the full one with a perplexity no more than 3% worse (lower
# is fine), and at least 4x PyTorch's adaptive model; exits 1 otherwise.
# With a directory in place of TYPES, its *.txt files are the corpus (one record per line), as
# scripts/english_corpus.sh writes them: 2.0M words of English, a vocabulary of 39k.
#   bench/adaptive_softmax.sh BUILD_DIR [STEPS (150)] [TYPES (50000) | CORPUS_DIR]
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$1" && pwd)
STEPS=${2:-150}
TYPES=${3:-50000}
[ -d "$TYPES" ] && TYPES=$(cd "$TYPES" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W"
if [ -d "$TYPES" ]; then
  cat "$TYPES"/*.txt > corpus.txt
else
  awk -v lines=30000 -v minw=10 -v maxw=30 -v types="$TYPES" -v seed=1 -f "$HERE/synth_corpus.awk" > corpus.txt
fi
"$BUILD/rnn_prep" --input corpus.txt --output-dir data --format lines --tokenizer word --valid-fraction 0.02 --seed 1 \
  > /dev/null || { echo "rnn_prep failed"; exit 1; }
vocab=$("$BUILD/rnn_dist" info data/train.h5 | sed -n 's/^  vocab size: *//p')
echo "corpus: $(wc -w < corpus.txt) words, vocabulary $vocab (TYPES $TYPES); $STEPS steps of 32 sequences, 1 thread"
declare -A tps ppl
for head in full adaptive; do
  opts=()
  [ $head = adaptive ] && opts=(--softmax adaptive --cutoffs 2000,10000)
  "$BUILD/rnn_dist" train --train data/train.h5 --valid data/valid.h5 --embed 256 --hidden 256 --layers 1 \
    --batch-size 32 --max-steps "$STEPS" --log-every "$STEPS" --threads 1 --device cpu --seed 3 "${opts[@]}" \
    > "log.$head" 2>&1 || { echo "FAILED: $head: $(tail -2 "log.$head")"; exit 1; }
  tps[$head]=$(sed -n 's/^trained .*: \([0-9]*\) tokens\/s.*/\1/p' "log.$head")
  ppl[$head]=$(sed -n 's/^valid .* ppl \([0-9.]*\) .*/\1/p' "log.$head")
  printf '%-8s %8s tokens/s  valid ppl %8s  %s\n' "$head" "${tps[$head]}" "${ppl[$head]}" "$(grep -o 'time split.*' "log.$head")"
done
status=0
awk -v tf="${tps[full]}" -v ta="${tps[adaptive]}" -v pf="${ppl[full]}" -v pa="${ppl[adaptive]}" 'BEGIN {
  ok = tf > 0 && ta >= 3 * tf && pa <= 1.03 * pf
  printf "adaptive / full: %.2fx tokens/s, perplexity %+.1f%%: %s\n", ta / tf, 100 * (pa - pf) / pf,
    ok ? "ok (>= 3x, perplexity within 3% or better)" : "FAILED (want >= 3x and perplexity at most 3% worse)"
  exit !ok }' || status=1
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
if "$PY" -c "import torch, h5py" 2> /dev/null; then
  "$PY" "$HERE/pytorch_adaptive.py" data/train.h5 --embed 256 --hidden 256 --layers 1 --batch 32 --steps "$STEPS" \
    --threads 1 --cutoffs 2000,10000 > pt.json 2> pt.err || { echo "FAILED: PyTorch: $(tail -1 pt.err) $(cat pt.json)"; exit 1; }
  pt=$(sed -n 's/.*"tokens_per_s": \([0-9.]*\).*/\1/p' pt.json)
  printf '%-8s %8.0f tokens/s  (PyTorch %s, nn.LSTM + nn.AdaptiveLogSoftmaxWithLoss, 1 thread)\n' pytorch "$pt" \
    "$(sed -n 's/.*"torch": "\([^"]*\)".*/\1/p' pt.json)"
  awk -v ta="${tps[adaptive]}" -v pt="$pt" 'BEGIN { ok = ta >= 4 * pt
    printf "rnn_dist / PyTorch, adaptive: %.2fx tokens/s: %s\n", ta / pt, ok ? "ok (>= 4x)" : "FAILED (want >= 4x)"; exit !ok }' \
    || status=1
else
  echo "skipped: PyTorch's adaptive softmax (no python3 here imports torch and h5py)"
fi
exit $status
