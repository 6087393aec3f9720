#!/usr/bin/env bash
# CLI tests of classifiers and taggers: rnn_prep's tsv and conll data train a bidirectional classifier
# and tagger that beat the majority baseline; best.h5 is chosen by --select-by; N ranks give the
# parameters of 1 rank with the same global batch; resume is bitwise; `rnn_dist eval --json` carries
# the per-class scores and the confusion matrix; `rnn_dist predict` writes a label or tags per record;
# contradictory options and mismatched files end with exit code 2 and one line. $1 = build directory.
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$REPO/tests/cli/lib/harness.sh"

# Classification: the label is which word family dominates the record.
awk 'BEGIN { srand(5); split("good great fine nice|bad awful poor sad|red green blue grey", fam, "|")
  split("pos neg col", lab, " "); n = split("the a it was very so and but", filler, " ")
  for (i = 0; i < 900; i++) { c = 1 + int(rand() * 3); split(fam[c], w, " "); k = 3 + int(rand() * 8); line = ""
    for (j = 0; j < k; j++) line = line (j ? " " : "") (rand() < 0.5 ? w[1 + int(rand() * 4)] : filler[1 + int(rand() * n)])
    print lab[c] "\t" line } }' > cls.tsv
"$BUILD/rnn_prep" --format tsv --tokenizer word --input cls.tsv --output-dir cls --valid-fraction 0.1 --test-fraction 0.1 \
  > /dev/null || bad "rnn_prep --format tsv"
# Tagging: entities (BIO) among filler words, in CoNLL columns.
awk 'BEGIN { srand(6); split("ann bob cyd|oslo rome kiev|acme ibm sony", ent, "|"); split("PER LOC ORG", typ, " ")
  n = split("met in at and the visited from saw", filler, " "); print "-DOCSTART- X O"; print ""
  for (i = 0; i < 500; i++) { k = 3 + int(rand() * 7)
    for (j = 0; j < k; j++) {
      if (rand() < 0.3) { c = 1 + int(rand() * 3); split(ent[c], w, " "); print w[1 + int(rand() * 3)] " X B-" typ[c]
        if (rand() < 0.4) print "jr X I-" typ[c] }
      else print filler[1 + int(rand() * n)] " X O" }
    print "" } }' > tag.conll
"$BUILD/rnn_prep" --format conll --input tag.conll --output-dir tag --valid-fraction 0.1 --test-fraction 0.1 \
  > /dev/null || bad "rnn_prep --format conll"

C="--train cls/train.h5 --embed 12 --hidden 16 --layers 2 --bidirectional --seed 3 --log-every 5"
if "$BUILD/rnn_dist" train $C --pool mean --valid cls/valid.h5 --test cls/test.h5 --epochs 3 --batch-size 24 \
     --select-by macro-f1 --checkpoint-dir cb --metrics m.jsonl > log.cb 2>&1; then
  ok "bidirectional classifier trains (exit 0)"
else
  bad "classifier: $(tail -1 log.cb)"
fi
baseline=$("$BUILD/rnn_dist" info cls/test.h5 | sed -n 's/.*majority baseline: \([0-9.]*\) accuracy/\1/p')
acc=$(sed -n 's/^test epoch .* accuracy \([0-9.]*\) .*/\1/p' log.cb)
awk -v a="$acc" -v b="$baseline" 'BEGIN { exit !(a > b + 0.3) }' \
  && ok "test accuracy $acc beats the majority baseline $baseline" || bad "test accuracy '$acc' vs baseline '$baseline'"
grep '"kind":"valid"' m.jsonl | grep -q '"accuracy":.*"macro_f1":' && ! grep -q perplexity <(grep '"kind":"valid"' m.jsonl) \
  && ok "validation metrics: accuracy and macro_f1, no perplexity" || bad "metrics: $(grep valid m.jsonl | head -1)"
# best.h5: the epoch with the highest validation macro-F1 (the first of equals).
best=$(grep '"kind":"valid"' m.jsonl | awk -F'"macro_f1":' '{ split($2, v, /[,}]/); split($0, s, /"step":/); split(s[2], t, ",")
  if (v[1] > m) { m = v[1]; at = t[1] } } END { print at }')
[ -f cb/best.h5 ] && h5dump -a /selected_by cb/best.h5 | grep -q '"macro-f1"' && h5dump -a /step cb/best.h5 | grep -q "(0): $best\$" \
  && "$BUILD/rnn_dist" info cb/best.h5 | grep -q "^  selected:   the best validation macro-f1 so far, 0\.[0-9]" \
  && ok "best.h5 is the step of the best validation macro-F1 ($best), and info says so" || bad "best.h5: $(ls cb); best step '$best'"
"$BUILD/rnn_dist" info cb/best.h5 | grep -q "model:      classify, .*bidirectional, pool mean" \
  && "$BUILD/rnn_dist" info cb/best.h5 | grep -q "labels:     3: col neg pos" \
  && ok "info: task, direction, pooling and labels of the checkpoint" || bad "info: $("$BUILD/rnn_dist" info cb/best.h5 | head -5)"
h5ls cb/best.h5/model | grep -q "^classifier.weight *Dataset {3, 32}" && h5ls cb/best.h5/model | grep -q "^lstm.weight_hh_l1_reverse " \
  && ok "PyTorch names: classifier.weight [classes x 2H], lstm.*_reverse" || bad "names: $(h5ls cb/best.h5/model)"

# eval --json: the confusion matrix counts every test sequence once; standard output is the JSON alone,
# the table on stderr.
"$BUILD/rnn_dist" eval --checkpoint cb/best.h5 --data cls/test.h5 --device cpu --json > ev.out 2> ev.err \
  || bad "eval: $(cat ev.err)"
n=$("$BUILD/rnn_dist" info cls/test.h5 | sed -n 's/^  sequences: *\([0-9]*\).*/\1/p')
total=$(tail -1 ev.out | sed 's/.*"confusion":\[\(.*\)\]\].*/\1/' | tr -c '0-9\n' ' ' | awk '{ for (i = 1; i <= NF; i++) s += $i } END { print s }')
tail -1 ev.out | grep -q '"per_class":{"col":{"precision":' && [ "$total" = "$n" ] && grep -q "^confusion (rows: true" ev.err \
  && [ "$(wc -l < ev.out)" -eq 1 ] \
  && ok "eval --json: per-class scores and a confusion matrix over all $n sequences" || bad "eval: total '$total' of '$n': $(tail -1 ev.out)"

# A stop inside an epoch leaves the plateau schedule and best.h5 where the run that never stopped has them:
# --max-steps 25 then --resume to 50 gives --max-steps 50 bitwise (the stop's validation at step 25 is
# reported, marked inside_epoch, and steers nothing), the same best.h5, and the resumed run's metrics
# carry the epoch record of the epoch it finished, with all of its rows.
P="$C --pool last --valid cls/valid.h5 --batch-size 24 --epochs 5 --select-by accuracy --lr-schedule plateau --lr 0.01"
"$BUILD/rnn_dist" train $P --max-steps 50 --checkpoint-dir pfull --metrics pfull.jsonl > log.pfull 2>&1 || bad "plateau 50: $(tail -1 log.pfull)"
"$BUILD/rnn_dist" train $P --max-steps 25 --checkpoint-dir ppart --metrics pa.jsonl > log.pa 2>&1 || bad "plateau 25: $(tail -1 log.pa)"
"$BUILD/rnn_dist" train $P --max-steps 50 --checkpoint-dir ppart --metrics pb.jsonl --resume > log.pb 2>&1 || bad "plateau resume: $(tail -1 log.pb)"
h5diff pfull/step-00000050.h5 ppart/step-00000050.h5 /model > /dev/null && h5diff pfull/best.h5 ppart/best.h5 > /dev/null \
  && ok "plateau: --max-steps 25 then --resume equals --max-steps 50 bitwise, best.h5 too" \
  || bad "plateau resume differs: $(h5diff -q pfull/step-00000050.h5 ppart/step-00000050.h5 /model 2>&1 | tail -1); lr $(grep -o '"lr":[0-9.e-]*' pb.jsonl | sort -u | tr '\n' ' ')"
grep '"kind":"valid","step":25' pa.jsonl | grep -q '"inside_epoch":true' && grep -q "step 25 .*(inside the epoch: not used" log.pa \
  && ok "the validation at the stop is reported, marked inside the epoch" || bad "stop's validation: $(grep valid pa.jsonl)"
rows=$(grep -o '"kind":"epoch","epoch":1,"step":30,"rows":[0-9]*' pfull.jsonl)
[ -n "$rows" ] && grep -q "$rows" pb.jsonl && ok "the resumed run's metrics: $rows" || bad "epoch record after resume: '$rows' / $(grep epoch pb.jsonl | head -2)"

# Plateau decays compound and survive a resume (issue 27 #3): with a learning rate too small to change the
# accuracy, every validation after the first fails to improve: epochs 3 and 4 train at lr x 0.5 and 0.25;
# the last checkpoint, written before epoch 4's validation (validated 0), holds the factor of two decays,
# 0.25; stopping after epoch 2 and resuming gives the same rates, factor and parameters.
Q="$C --pool last --valid cls/valid.h5 --batch-size 24 --epochs 4 --select-by accuracy --lr-schedule plateau --lr 1e-9 --log-every 30"
"$BUILD/rnn_dist" train $Q --checkpoint-dir qfull --metrics qfull.jsonl > log.qfull 2>&1 || bad "plateau x3: $(tail -1 log.qfull)"
"$BUILD/rnn_dist" train $Q --max-steps 60 --checkpoint-dir qpart --metrics qpart.jsonl > log.qa 2>&1 || bad "plateau x3, part 1: $(tail -1 log.qa)"
"$BUILD/rnn_dist" train $Q --checkpoint-dir qpart --metrics qpart.jsonl --resume > log.qb 2>&1 || bad "plateau x3, resumed: $(tail -1 log.qb)"
rates() { grep '"kind":"train"' "$1" | sed 's/.*"step":\([0-9]*\),.*"lr":\([0-9.e+-]*\),.*/\1 \2/' | sort -un | tr '\n' ' '; }
want="30 1e-09 60 1e-09 90 5e-10 120 2.5e-10 "
factor() { h5dump -a /plateau_factor "$1" | sed -n 's/^ *(0): //p'; }
validated() { h5dump -a /validated "$1" | sed -n 's/^ *(0): //p'; }
[ "$(rates qfull.jsonl)" = "$want" ] && [ "$(rates qpart.jsonl)" = "$want" ] && [ "$(factor qfull/step-00000120.h5)" = 0.25 ] \
  && [ "$(factor qpart/step-00000120.h5)" = 0.25 ] && [ "$(validated qfull/step-00000120.h5)" = 0 ] && h5diff qfull/step-00000120.h5 qpart/step-00000120.h5 /model > /dev/null \
  && ok "plateau: decays compound (lr x 0.5^k, factor 0.25 before the last validation), and a resume after epoch 2 keeps them, bitwise" \
  || bad "plateau x3: full '$(rates qfull.jsonl)' $(factor qfull/step-00000120.h5), resumed '$(rates qpart.jsonl)' $(factor qpart/step-00000120.h5) validated $(validated qfull/step-00000120.h5), want '$want'"

# best.h5 survives a resume (issue 27 #4): a run whose best validation (step 60) comes before the stop
# and whose next one (step 90) is worse keeps step 60's best.h5 when resumed, as the run that never
# stopped does: the best objective is restored, not forgotten.
R="$C --pool last --valid cls/valid.h5 --batch-size 24 --epochs 3 --lr 0.1"
"$BUILD/rnn_dist" train $R --checkpoint-dir bfull --metrics bfull.jsonl > log.bfull 2>&1 || bad "best.h5 run: $(tail -1 log.bfull)"
"$BUILD/rnn_dist" train $R --max-steps 60 --checkpoint-dir bpart > log.bpa 2>&1 || bad "best.h5 run, part 1: $(tail -1 log.bpa)"
"$BUILD/rnn_dist" train $R --checkpoint-dir bpart --resume > log.bpb 2>&1 || bad "best.h5 run, resumed: $(tail -1 log.bpb)"
vloss() { grep '"kind":"valid","step":'"$2"',' "$1" | sed 's/.*"loss":\([0-9.e+-]*\),.*/\1/'; }
awk -v a="$(vloss bfull.jsonl 60)" -v b="$(vloss bfull.jsonl 90)" 'BEGIN { exit !(a != "" && b > a) }' \
  || bad "best.h5 resume: the precondition failed (valid loss at 60 '$(vloss bfull.jsonl 60)', at 90 '$(vloss bfull.jsonl 90)')"
h5dump -a /step bfull/best.h5 | grep -q "(0): 60$" && h5dump -a /step bpart/best.h5 | grep -q "(0): 60$" \
  && h5diff bfull/best.h5 bpart/best.h5 /model > /dev/null \
  && ok "best.h5 across --resume: step 60 (the best before the stop; step 90 is worse), the uninterrupted run's" \
  || bad "best.h5 across resume: $(h5dump -a /step bfull/best.h5 | grep '(0)') vs $(h5dump -a /step bpart/best.h5 | grep '(0)')"

# N ranks = 1 rank, and resume, for a classifier (max pooling) and a tagger.
same_params() {  # $1 = reference checkpoint, $2 = other, $3 = what
  if h5diff -d 1e-5 "$1" "$2" /model > diff.out 2>&1; then ok "$3: parameters equal within 1e-5"
  else bad "$3: parameters differ: $(head -3 diff.out)"; fi
}
for task in cls tag; do
  X="--train $task/train.h5 --embed 12 --hidden 16 --layers 2 --bidirectional --seed 3 --max-steps 12"
  [ $task = cls ] && X="$X --pool max"
  "$BUILD/rnn_dist" train $X --batch-size 12 --checkpoint-dir ${task}1 > log.${task}1 2>&1 || bad "$task 1 rank: $(tail -1 log.${task}1)"
  mpirun --oversubscribe -np 2 "$BUILD/rnn_dist" train $X --batch-size 6 --checkpoint-dir ${task}2 > log.${task}2 2>&1 \
    || bad "$task 2 ranks: $(tail -1 log.${task}2)"
  mpirun --oversubscribe -np 3 "$BUILD/rnn_dist" train $X --batch-size 4 --checkpoint-dir ${task}3 > log.${task}3 2>&1 \
    || bad "$task 3 ranks: $(tail -1 log.${task}3)"
  same_params ${task}1/step-00000012.h5 ${task}2/step-00000012.h5 "$task, 2 ranks vs 1"
  same_params ${task}1/step-00000012.h5 ${task}3/step-00000012.h5 "$task, 3 ranks vs 1"
  "$BUILD/rnn_dist" train ${X/--max-steps 12/--max-steps 5} --batch-size 12 --checkpoint-dir ${task}r > /dev/null 2>&1
  "$BUILD/rnn_dist" train $X --batch-size 12 --checkpoint-dir ${task}r --resume > log.${task}r 2>&1
  grep -q "resumed from ${task}r/step-00000005.h5" log.${task}r && h5diff ${task}1/step-00000012.h5 ${task}r/step-00000012.h5 /model > /dev/null \
    && ok "$task: resumed at step 5, bitwise the uninterrupted run" || bad "$task resume: $(tail -2 log.${task}r)"
done

# The tagger: entity scores for BIO tags, in the log and in eval.
"$BUILD/rnn_dist" train --train tag/train.h5 --valid tag/valid.h5 --embed 12 --hidden 24 --layers 1 --bidirectional \
  --epochs 4 --batch-size 16 --lr 0.01 --checkpoint-dir tb --select-by accuracy > log.tb 2>&1 || bad "tagger: $(tail -1 log.tb)"
"$BUILD/rnn_dist" eval --checkpoint tb/best.h5 --data tag/test.h5 --device cpu --json > tev.out 2>&1 || bad "tag eval: $(cat tev.out)"
f1=$(tail -1 tev.out | sed -n 's/.*"entities":{[^}]*"f1":\([0-9.e-]*\).*/\1/p')
grep -q "^valid epoch 4 .* entity_f1 " log.tb && awk -v f="$f1" 'BEGIN { exit !(f > 0.8) }' \
  && ok "tagger: entity F1 $f1 on the test split" || bad "tagger entities: '$f1': $(tail -1 tev.out)"

# predict: a label and probabilities summing to 1 per line of raw text (an empty line gets a null label),
# which agree with the true labels; tags for every CoNLL token; jsonl input.
{ cut -f2 cls.tsv | head -200; echo; } > raw.txt
"$BUILD/rnn_dist" predict --checkpoint cb/best.h5 --input raw.txt --output pred.jsonl --device cpu > out 2> err \
  || bad "predict: $(cat err)"
right=$(head -200 cls.tsv | cut -f1 | paste - <(head -200 pred.jsonl | sed 's/.*"label":"\([a-z]*\)".*/\1/') | awk '$1 == $2' | wc -l)
sums=$(head -200 pred.jsonl | sed 's/.*"probs":{\(.*\)}}/\1/' | tr ',' '\n' | sed 's/.*://' \
  | awk '{ s += $1 } NR % 3 == 0 { if (s < 0.999 || s > 1.001) bad++; s = 0 } END { print bad + 0 }')
[ "$(wc -l < pred.jsonl)" -eq 201 ] && [ "$right" -ge 170 ] && [ "$sums" -eq 0 ] && tail -1 pred.jsonl | grep -q '"record":200,"line":201,"label":null' \
  && ok "predict: 201 lines, $right of 200 labels right, probabilities sum to 1" || bad "predict: $right right, $sums bad sums: $(tail -2 pred.jsonl)"
head -3 raw.txt | awk '{ gsub(/"/, "\\\""); print "{\"id\": " NR ", \"body\": \"" $0 "\"}" }' > raw.jsonl
"$BUILD/rnn_dist" predict --checkpoint cb/best.h5 --input raw.jsonl --format jsonl --text-field body --output pj.jsonl --device cpu > /dev/null 2> err
# The same labels exactly and the same probabilities numerically: their last digit moves with the batch's
# composition (3 records here, 201 above), so text would match only by chance (issue 27 #9).
head -3 pred.jsonl > pred3.jsonl
python3 - pj.jsonl pred3.jsonl <<'PY' 2> py.err && ok "predict --format jsonl: the same labels, probabilities within 1e-6" \
  || bad "predict jsonl: $(cat err py.err; head -1 pj.jsonl)"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 3
for x, y in zip(a, b):
    assert x["label"] == y["label"] and x["probs"].keys() == y["probs"].keys(), (x, y)
    assert all(abs(x["probs"][k] - y["probs"][k]) <= 1e-6 for k in x["probs"]), (x, y)
PY
awk 'NR > 2 && NR < 40' tag.conll > raw.conll
"$BUILD/rnn_dist" predict --checkpoint tb/best.h5 --input raw.conll --format conll --output pt.jsonl --device cpu > /dev/null 2> err \
  || bad "predict conll: $(cat err)"
want=$(awk 'NF == 0 { if (n) print n; n = 0; next } { n++ } END { if (n) print n }' raw.conll | tr '\n' ' ')
got=$(sed 's/.*"tags":\[\([^]]*\)\].*/\1/' pt.jsonl | awk -F, '{ printf "%d ", NF }')
right=$(paste <(awk 'NF { print $3 }' raw.conll) <(sed 's/.*"tags":\[\([^]]*\)\].*/\1/' pt.jsonl | tr ',' '\n' | tr -d '"') | awk '$1 == $2' | wc -l)
total=$(awk 'NF' raw.conll | wc -l)
[ "$got" = "$want" ] && [ "$right" -ge $((total * 9 / 10)) ] && ok "predict --format conll: a tag per token ($right of $total right)" \
  || bad "predict conll: tags per sentence '$got' vs '$want', $right of $total right"
# A tagger trained on CoNLL tokens cuts raw lines as those were, at whitespace ("U.S." and a date stay
# one token each, as in its training file), echoes every token as the input has it (an unknown one too,
# listed in "unknown"), and tags the line as the same sentence in CoNLL.
awk 'BEGIN { srand(8); for (i = 0; i < 300; i++) { print "in X O"; print (i % 2 ? "U.S." : "acme") " X B-LOC"
  print "on X O"; print "2026-12-0" (i % 9) " X B-DATE"; print "" } }' > punct.conll
"$BUILD/rnn_prep" --format conll --input punct.conll --output-dir punct > /dev/null || bad "rnn_prep punct.conll"
"$BUILD/rnn_dist" train --train punct/train.h5 --embed 8 --hidden 16 --epochs 3 --max-steps 40 --batch-size 16 --lr 0.02 \
  --checkpoint-dir pk > /dev/null 2>&1 || bad "train the punct tagger"
printf 'in U.S. on 2026-12-09\n' > punct.txt
printf 'in\nU.S.\non\n2026-12-09\n' > punct1.conll
printf 'in acme. on\n' > punct2.txt
"$BUILD/rnn_dist" predict --checkpoint pk/step-00000040.h5 --input punct.txt --output pl.jsonl --device cpu > /dev/null 2> err \
  && "$BUILD/rnn_dist" predict --checkpoint pk/step-00000040.h5 --input punct1.conll --format conll --output pc.jsonl \
       --device cpu > /dev/null 2>> err \
  && grep -q '"tokens":\["in","U.S.","on","2026-12-09"\],"unknown":\[3\],"tags":\["O","B-LOC","O","B-DATE"\]' pl.jsonl \
  && [ "$(sed 's/"line":[0-9]*,//' pl.jsonl)" = "$(sed 's/"line":[0-9]*,//' pc.jsonl)" ] \
  && ok "predict --format lines on a CoNLL tagger: whitespace tokens as the input has them, the unknown one listed, as CoNLL" \
  || bad "predict lines vs CoNLL tokens: $(cat err) $(cat pl.jsonl pc.jsonl)"
# Punctuation left on a word the vocabulary knows ("acme."): cut by the word tokenizer, the word found.
"$BUILD/rnn_dist" predict --checkpoint pk/step-00000040.h5 --input punct2.txt --output p2l.jsonl --device cpu > /dev/null 2> err \
  && grep -q '"tokens":\["in","acme",".","on"\],"unknown":\[2\]' p2l.jsonl \
  && ok "an unknown whole token with a known piece: cut (\"acme.\" -> acme .)" || bad "acme.: $(cat err p2l.jsonl)"
# A tagger's per-token probabilities (issue 27 #5): predict on the test split's sentences (written back as
# CoNLL in file order) gives, wherever its tag is the true one, the probability eval --log-probs gives
# that tag, within 1e-5.
if python_with h5py numpy > /dev/null; then
  "$BUILD/rnn_dist" eval --checkpoint tb/best.h5 --data tag/test.h5 --device cpu --log-probs tlp.jsonl > /dev/null 2>&1 \
    || bad "tagger eval --log-probs"
  "$PY" - tag/test.h5 > tsents.conll <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
vocab = [v.decode() for v in f["vocab"][()]]
tok, off = f["tokens"][()], f["offsets"][()]
for s in range(len(off) - 1):
    print("\n".join(vocab[t] for t in tok[off[s] + 1:off[s + 1] - 1]) + "\n")
PY
  "$BUILD/rnn_dist" predict --checkpoint tb/best.h5 --input tsents.conll --format conll --output tpred.jsonl --device cpu \
    > /dev/null 2> err || bad "tagger predict: $(cat err)"
  "$PY" - tag/test.h5 tlp.jsonl tpred.jsonl <<'PY' 2> py.err && ok "tagger: predict's probabilities are eval --log-probs' ($(cat py.err))" \
    || bad "tagger probabilities: $(tail -2 py.err)"
import json, math, sys, h5py
f = h5py.File(sys.argv[1], "r")
tags = [v.decode() for v in f["label_vocab"][()]]
tg, off = f["tags"][()], f["offsets"][()]
lps = [json.loads(l)["log_probs"] for l in open(sys.argv[2])]
preds = [json.loads(l) for l in open(sys.argv[3])]
assert len(lps) == len(preds) == len(off) - 1
compared = 0
for s, (lp, p) in enumerate(zip(lps, preds)):
    truth = [tags[t] for t in tg[off[s] + 1:off[s + 1] - 1]]
    assert len(truth) == len(lp) == len(p["tags"]) == len(p["probs"]), s
    for k, (want, got, prob, l) in enumerate(zip(truth, p["tags"], p["probs"], lp)):
        if got == want:
            assert abs(math.exp(l) - prob) <= 1e-5, (s, k, math.exp(l), prob)
            compared += 1
assert compared > 0.8 * sum(len(x) for x in lps), compared
print(f"{compared} tokens compared", file=sys.stderr)
PY
else
  echo "skip: the tagger's probabilities against eval --log-probs (no python3 with h5py and numpy)"
fi
printf 'good\n\377bad\n' > badutf.txt
"$BUILD/rnn_dist" predict --checkpoint cb/best.h5 --input badutf.txt --output badpred.jsonl --device cpu > out 2> err
[ $? -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q "badutf.txt: invalid UTF-8 at byte offset 5" err && [ ! -e badpred.jsonl ] \
  && ! ls badpred.jsonl.tmp.* > /dev/null 2>&1 && ok "predict: bad input named, exit 2, no output left" || bad "predict bad input: $(cat err; ls)"
"$BUILD/rnn_prep" --input cls.tsv --output-dir lm --tokenizer word > /dev/null
"$BUILD/rnn_dist" train --train lm/train.h5 --embed 8 --hidden 8 --max-steps 1 --batch-size 8 --checkpoint-dir lmck > /dev/null 2>&1
"$BUILD/rnn_dist" predict --checkpoint lmck/step-00000001.h5 --input raw.txt --output x.jsonl --device cpu > out 2> err
[ $? -eq 2 ] && grep -q "a language model; predict applies classifiers and taggers" err && ok "predict refuses a language model" \
  || bad "predict lm: $(cat err)"

# Contradictions and mismatches: exit code 2, one line naming the option or file.
B="--embed 8 --hidden 8 --max-steps 2 --batch-size 8"
for case in "--train lm/train.h5 --bidirectional|--bidirectional" "--train cls/train.h5 --task tag|--task tag" \
            "--train cls/train.h5 --batching stream|--batching stream" "--train lm/train.h5 --select-by accuracy --valid lm/valid.h5|--select-by" \
            "--train cls/train.h5 --select-by accuracy|needs --valid" "--train cls/train.h5 --pool median|--pool" \
            "--train cls/train.h5 --valid tag/valid.h5|tag/valid.h5" "--train cls/train.h5 --select-by f2|--select-by" \
            "--train tag/train.h5 --init-from cb/best.h5|cb/best.h5" \
            "--train lm/train.h5 --pool mean|--pool: applies to classifiers, and lm/train.h5 holds lm data" \
            "--train tag/train.h5 --pool last|--pool: applies to classifiers" \
            "--train cls/train.h5 --lr-schedule plateau|--lr-schedule plateau: .* needs --valid" \
            "--train cls/train.h5 --accumulate 1000|with --accumulate 1000 a step takes 1000 micro-batches"; do
  opt=${case%|*} want=${case#*|}
  "$BUILD/rnn_dist" train $B $opt > out 2> err
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q -- "$want" err && ok "'$opt' -> exit 2: $(cat err)" \
    || bad "'$opt' -> exit $rc: $(cat err)"
done
"$BUILD/rnn_dist" eval --checkpoint cb/best.h5 --data tag/test.h5 --device cpu > out 2> err
[ $? -eq 2 ] && grep -q "tag/test.h5: tag data, but cb/best.h5 holds a classify model" err \
  && ok "eval refuses data of another task" || bad "eval across tasks: $(cat err)"
"$BUILD/rnn_dist" sample --checkpoint cb/best.h5 > out 2> err
[ $? -eq 2 ] && grep -q "sample needs a language model" err && ok "sample refuses a classifier" || bad "sample: $(cat err)"

# rnn_prep: options of other formats are refused, not ignored; --tag-column takes what its help shows.
for case in "--format tsv --input cls.tsv --text-field x|--text-field: applies to --format jsonl" \
            "--format tsv --input cls.tsv --record-sep x|--record-sep: applies to --format records" \
            "--format conll --input tag.conll --tag-column 0|--tag-column 0: last, or" \
            "--format conll --input tag.conll --tag-column -1|--tag-column -1: last, or" \
            "--format conll --input tag.conll --tag-column x|--tag-column x: last, or"; do
  opt=${case%|*} want=${case#*|}
  "$BUILD/rnn_prep" $opt --output-dir bad-prep > out 2> err
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q -- "$want" err && ok "rnn_prep '$opt' -> exit 2: $(cat err)" \
    || bad "rnn_prep '$opt' -> exit $rc: $(cat err)"
done
"$BUILD/rnn_prep" --format conll --input tag.conll --tag-column last --output-dir tag-last > /dev/null 2> err \
  && "$BUILD/rnn_prep" --format conll --input tag.conll --tag-column 2 --output-dir tag-2 > /dev/null 2>> err \
  && h5diff tag-last/train.h5 tag-2/train.h5 /tags > /dev/null \
  && ok "--tag-column last (its default, as --help shows it) and 2 read the same tags" || bad "--tag-column last/2: $(cat err)"
# CoNLL comment lines ('#' first, as CoNLL-U's) are skipped and counted, not read as a token '#' with a
# tag class "newdoc"; --conll-comments keep reads them.
{ echo "# newdoc"; echo "# sent_id = 3"; cat tag.conll; } > commented.conll
printf 'in X O\n# X O\nrome X B-LOC\n\n' > hash.conll  # '#' inside a sentence is a token (PTB's)
"$BUILD/rnn_prep" --format conll --input commented.conll --output-dir tag-c > prep-c.out 2> err \
  && grep -q "2 comment line(s) ('#' first) skipped" prep-c.out && "$BUILD/rnn_dist" info tag-c/train.h5 > info-c.out \
  && ! grep -q "newdoc" info-c.out && h5diff tag-last/train.h5 tag-c/train.h5 /tokens > /dev/null \
  && ok "CoNLL comments skipped and counted; the data is the uncommented file's" || bad "comments: $(cat prep-c.out err | tail -3)"
"$BUILD/rnn_prep" --format conll --input commented.conll --output-dir tag-k --conll-comments keep > /dev/null 2> err \
  && "$BUILD/rnn_dist" info tag-k/train.h5 | grep -q "newdoc" && ok "--conll-comments keep: read as tokens and tags" \
  || bad "--conll-comments keep: $(cat err)"
cat hash.conll tag.conll > hash2.conll
"$BUILD/rnn_prep" --format conll --input hash2.conll --output-dir tag-h > prep-h.out 2> err \
  && grep -q " 0 comment line(s)" prep-h.out \
  && ok "a '#' line inside a sentence stays a token" || bad "'#' inside a sentence: $(cat prep-h.out err)"

# A directory where a file is expected: one line naming it.
"$BUILD/rnn_dist" info cb > out 2> err
[ $? -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q "cb: is a directory" err && ok "info DIR: $(cat err)" || bad "info DIR: $(cat err)"

# Progress on a terminal (script(1)): eval counts sequences of the file's, predict bytes of its input;
# --quiet prints none.
script -qec "'$BUILD/rnn_dist' eval --checkpoint cb/best.h5 --data cls/test.h5 --device cpu > /dev/null" /dev/null > tty.txt 2>&1
script -qec "'$BUILD/rnn_dist' predict --checkpoint cb/best.h5 --input raw.txt --output p2.jsonl --device cpu > /dev/null" \
  /dev/null >> tty.txt 2>&1
script -qec "'$BUILD/rnn_dist' eval --checkpoint cb/best.h5 --data cls/test.h5 --device cpu --quiet > /dev/null" /dev/null > ttyq.txt 2>&1
grep -q $'\rrnn_dist eval: '"$n of $n sequences (100%)" tty.txt \
  && grep -q $'\rrnn_dist predict: [0-9.]* kB of [0-9.]* kB (100%)' tty.txt && ! grep -q "rnn_dist eval:" ttyq.txt \
  && ok "progress on a terminal: eval's $n sequences, predict's input bytes; none with --quiet" \
  || bad "progress: $(tr '\r' '\n' < tty.txt | tail -3)"

# jobs/classifier.conf is a valid config: its keys parse (the switch `bidirectional = true` included) and
# it trains a classifier with its paths, shape, pooling and selection, only data and length overridden.
"$BUILD/rnn_dist" train --config "$REPO/jobs/classifier.conf" --train cls/train.h5 --valid cls/valid.h5 --test cls/test.h5 \
  --checkpoint-dir jc --metrics jc.jsonl --epochs 1 --device cpu > log.jc 2>&1
[ $? -eq 0 ] && [ -f jc/best.h5 ] && "$BUILD/rnn_dist" info jc/best.h5 | grep -q "bidirectional" \
  && h5dump -a /pool jc/best.h5 | grep -q '"mean"' && h5dump -a /selected_by jc/best.h5 | grep -q '"accuracy"' \
  && ok "jobs/classifier.conf trains a bidirectional mean-pooled classifier, best.h5 by accuracy" \
  || bad "jobs/classifier.conf: $(tail -2 log.jc)"

finish
