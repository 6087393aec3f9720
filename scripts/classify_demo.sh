#!/usr/bin/env bash
# Classification and tagging on a fresh machine, after scripts/demo.sh's language model: installs missing
# packages and builds, then
#  1. classifies each fortune by the file it came from (43 classes; rnn_prep --label-from-file) with a
#     unidirectional and a bidirectional 2-layer character LSTM, each against the majority baseline;
#  2. restores the case of lower-cased text (truecasing): a bidirectional character tagger over every
#     line of the corpus, tags U (upper case) and L, against the all-L baseline and a rule that
#     capitalises the first letter of a line and of a sentence;
# and predicts a few records with `rnn_dist predict`. About 4 minutes on 2 cores (docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
rnn_dist_build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mapfile -t inputs < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
out=out/classify-demo
rm -rf "$out"
mkdir -p "$out"
train() {  # train NAME DATA_DIR OPTIONS...: 2 ranks, best validation checkpoint in $out/NAME/best.h5
  local name=$1 data=$2
  shift 2
  mpirun --oversubscribe -np 2 build/rnn_dist train --train "$data/train.h5" --valid "$data/valid.h5" \
    --embed 32 --layers 2 --optimizer adam --lr 3e-3 --clip-norm 1 --threads 1 --seed 1 --log-every 100 \
    --checkpoint-dir "$out/$name" "$@"
}

echo "== 1. which file is a fortune from?"
build/rnn_prep --input "${inputs[@]}" --output-dir "$out/source" --format records --record-sep '%' \
  --label-from-file --tokenizer char --max-len 400 --valid-fraction 0.05 --test-fraction 0.05 --seed 1
build/rnn_dist info "$out/source/test.h5" | grep -E "sequences|majority"
for dir in uni bi; do
  flags=()
  [ $dir = bi ] && flags=(--bidirectional)
  train "source-$dir" "$out/source" --hidden 128 --batch-size 16 --epochs 3 --pool mean --select-by accuracy \
    "${flags[@]}"
  echo "-- $dir: test split"
  build/rnn_dist eval --checkpoint "$out/source-$dir/best.h5" --data "$out/source/test.h5" --classes 0 --confusion
done

echo "== 2. truecasing: tag each character of lower-cased lines with its case"
# One sentence per non-empty line, one token per character, lower-cased (whitespace written as "_"), its
# tag U (upper case) or L; every 20th sentence is held out for the test, which the rule below scores too.
perl -CSD -ne 'chomp; next if $_ eq "%" || !/\S/; my $s = "";
  for my $ch (split //) { $s .= ($ch =~ /\s/ ? "_" : lc $ch) . "\t" . ($ch ne lc $ch ? "U" : "L") . "\n" }
  my $fh = $n++ % 20 ? STDOUT : STDERR; print $fh $s, "\n"' "${inputs[@]}" \
  > "$out/case.conll" 2> "$out/case-test.conll"
# A fortune may start with '#': a token here, not a CoNLL comment.
build/rnn_prep --input "$out/case.conll" --output-dir "$out/case" --format conll --valid-fraction 0.05 --seed 1 \
  --conll-comments keep
build/rnn_prep --input "$out/case-test.conll" --output-dir "$out/case-test" --format conll --valid-fraction 0 \
  --vocab-from "$out/case/train.h5" --conll-comments keep
build/rnn_dist info "$out/case-test/train.h5" | grep -E "tokens|majority"
train case "$out/case" --hidden 128 --batch-size 32 --epochs 1 --bidirectional --select-by macro-f1
echo "-- the tagger on the held-out sentences"
build/rnn_dist eval --checkpoint "$out/case/best.h5" --data "$out/case-test/train.h5"
echo "-- the rule on the same sentences: U on the first letter of a line and on the first after . ! or ?"
perl -CSD -ne 'BEGIN { $start = 1 } chomp;
  if ($_ eq "") { $start = 1; next }
  my ($tok, $tag) = split /\t/; my $letter = $tok =~ /^\p{L}$/;
  my $guess = $start && $letter ? "U" : "L";
  $start = 0 if $letter; $start = 1 if $tok =~ /^[.!?]$/;
  $n++; $right++ if $guess eq $tag; $tp++ if $guess eq "U" && $tag eq "U";
  $true++ if $tag eq "U"; $said++ if $guess eq "U";
  END { my ($p, $r) = ($tp / $said, $tp / $true);
    printf "rule: accuracy %.4f over %d tokens; U precision %.4f recall %.4f F1 %.4f\n",
      $right / $n, $n, $p, $r, 2 * $p * $r / ($p + $r) }' "$out/case-test.conll"
echo "-- rnn_dist predict: the source of three fortunes, the case of two lines"
printf 'Fortune cookies are lies.\nwhile (1) { fork(); }\nTo be or not to be, that is the question.\n' > "$out/three.txt"
build/rnn_dist predict --checkpoint "$out/source-bi/best.h5" --input "$out/three.txt" --output "$out/three.jsonl"
perl -pe 's/,"probs":.*/}/' "$out/three.jsonl"
printf 'the king of france is bald.\nnew york, new york.\n' \
  | perl -CSD -ne 'chomp; print map({ (/\s/ ? "_" : $_) . "\n" } split //), "\n"' > "$out/two.conll"
build/rnn_dist predict --checkpoint "$out/case/best.h5" --input "$out/two.conll" --format conll --conll-comments keep \
  --output "$out/two.jsonl"
perl -ne 'my @t = /"tokens":\[(.*?)\]/ ? ($1 =~ /"((?:[^"\\]|\\.)*)"/g) : (); my @g = /"tags":\[(.*?)\]/ ? ($1 =~ /"([^"]*)"/g) : ();
  print join("", map { my $c = $t[$_] eq "_" ? " " : $t[$_]; $g[$_] eq "U" ? uc $c : $c } 0 .. $#t), "\n"' "$out/two.jsonl"
