#!/usr/bin/env bash
# CLI test of rnn_prep: a fortune-format run checked with `rnn_dist info`, then the failure cases, which
# must exit 2 with one line naming the culprit and leave no file behind. Usage: rnn_prep.sh BUILD_DIR
set -euo pipefail

BUILD_DIR=$(cd "${1:?usage: rnn_prep.sh BUILD_DIR}" && pwd)
PREP="$BUILD_DIR/rnn_prep"
INFO=("$BUILD_DIR/rnn_dist" info)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok   $1"; }
fail() { failed=$((failed + 1)); echo "FAIL $1"; }
check() {  # check NAME COMMAND...: passes when the command succeeds
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}

# 200 records in fortune format: a few lines each, some non-ASCII, three of them empty.
{
  for i in $(seq 1 200); do
    case $i in
      50 | 51) ;;                       # "%" right after "%": records with no lines
      120) echo "" ;;                  # a record of one empty line
      *) printf 'Fortune %d: the quick brown fox\njumps over the lazy dog, caf\xc3\xa9 %d times.\n' "$i" $((i * 7)) ;;
    esac
    echo "%"
  done
} >fortunes.txt
EXPECTED=197

# Sequence count that `rnn_dist info` reports for a file.
sequences() { "${INFO[@]}" "$1" | awk '/sequences:/ {print $2}'; }

# --- successful runs ---
rc=0
"$PREP" --input fortunes.txt --output-dir out --format records --record-sep % --valid-fraction 0.2 >summary.txt 2>err.txt || rc=$?
check "records run exits 0" test "$rc" -eq 0
check "train.h5 and valid.h5 exist" test -f out/train.h5 -a -f out/valid.h5
check "no test.h5 for an empty test split" test ! -e out/test.h5
check "summary says test is not written" grep -q "^test: *empty, not written" summary.txt
check "summary counts the empty records" grep -q "200 read, 3 empty dropped" summary.txt
check "rnn_dist info succeeds on both" "${INFO[@]}" out/train.h5 out/valid.h5 >/dev/null
train_n=$(sequences out/train.h5)
valid_n=$(sequences out/valid.h5)
check "train + valid sequences = $EXPECTED" test $((train_n + valid_n)) -eq $EXPECTED
check "valid split is about 20%" test "$valid_n" -ge 20 -a "$valid_n" -le 60
check "only the outputs are left" test "$(ls out | tr '\n' ' ')" = "train.h5 valid.h5 "

"$PREP" --input fortunes.txt --output-dir again --format records --valid-fraction 0.2 >/dev/null
check "the split is deterministic" cmp -s <("${INFO[@]}" out/train.h5 | tail -n +2) <("${INFO[@]}" again/train.h5 | tail -n +2)

"$PREP" --input fortunes.txt --output-dir all --format records --valid-fraction 0 --max-len 10 --tokenizer word \
  >summary2.txt
check "--valid-fraction 0 writes only train.h5" test "$(ls all)" = "train.h5"
check "--max-len splits records into pieces" grep -q "197 longer than --max-len 10 split into 591 pieces" summary2.txt
check "pieces are at most 10 ids long, <s> and </s> included" grep -q "max 10$" <("${INFO[@]}" all/train.h5)

printf '{"text": "caf\\u00e9 au lait"}\n{"id": 2, "text": "second\\nline"}\n' >d.jsonl
"$PREP" --input d.jsonl --output-dir js --format jsonl --valid-fraction 0 --tokenizer byte >/dev/null
check "jsonl with the byte tokenizer" test "$(sequences js/train.h5)" -eq 2

"$PREP" --input fortunes.txt --output-dir reuse --format records --vocab-from out/train.h5 >summary3.txt
check "--vocab-from reuses the vocabulary" grep -q "(from out/train.h5)" summary3.txt

"$PREP" --help >help.txt
for opt in "--format arg (=lines)" "--record-sep arg (=%)" "--text-field arg (=text)" "--tokenizer arg (=char)" \
  "--min-count arg (=1)" "--max-vocab arg (=0)" "--vocab-from arg (=none)" "--max-len arg (=0)" \
  "--valid-fraction arg (=0.05)" "--test-fraction arg (=0)" "--seed arg (=1)" "--compress arg (=0)" \
  "--utf8-replace" "--input" "--output-dir"; do
  check "--help lists $opt" grep -qF -- "$opt" help.txt
done

# --- failures: exit 2, one line "rnn_prep: error: ..." naming the culprit, nothing left behind ---
expect_error() {  # expect_error NAME TEXT_IN_MESSAGE ARGS...
  local name=$1 text=$2
  shift 2
  rm -rf fail
  local rc=0
  "$PREP" "$@" --output-dir fail >/dev/null 2>err.txt || rc=$?
  check "$name: exit code 2" test "$rc" -eq 2
  check "$name: one line on stderr" test "$(wc -l <err.txt)" -eq 1
  check "$name: message names '$text'" grep -q "^rnn_prep: error: .*$text" err.txt
  check "$name: no file left" test -z "$(ls -A fail 2>/dev/null)"
}

printf 'good text\n%%\nmore text\n' >a.txt
cp a.txt b.txt
printf 'fine\n%%\nbroken \xff byte\n%%\n' >bad.txt
expect_error "missing input" "missing.txt: cannot open" --input a.txt missing.txt
expect_error "unknown option" "unrecognised option '--frobnicate'" --input a.txt --frobnicate
expect_error "bad --format" "--format: unknown format 'xml'" --input a.txt --format xml
expect_error "bad --tokenizer" "--tokenizer: unknown tokenizer 'bpe'" --input a.txt --tokenizer bpe
expect_error "bad --max-len value" "--max-len" --input a.txt --max-len many
expect_error "bad --valid-fraction" "--valid-fraction" --input a.txt --valid-fraction 1.5
expect_error "invalid UTF-8 in the 3rd input" "bad.txt: invalid UTF-8 at byte offset 14" \
  --input a.txt b.txt bad.txt --format records --valid-fraction 0.5 --test-fraction 0.2
expect_error "invalid UTF-8 while spooling (--vocab-from skips pass 1)" "bad.txt: invalid UTF-8 at byte offset 14" \
  --input fortunes.txt a.txt bad.txt --format records --vocab-from out/train.h5 --valid-fraction 0.3 --test-fraction 0.3
expect_error "invalid UTF-8 in a word run" "bad.txt: invalid UTF-8" --input a.txt bad.txt --tokenizer word
printf '\n\n' >blank.txt
expect_error "empty training split" "training split is empty" --input blank.txt --valid-fraction 0
expect_error "mismatched --vocab-from" "tokenizer 'char' but --tokenizer is 'word'" \
  --input a.txt --vocab-from out/train.h5 --tokenizer word

# A failed run leaves earlier outputs in place (files are replaced only by a complete run).
before=$(md5sum out/train.h5)
rc=0
"$PREP" --input fortunes.txt bad.txt --output-dir out --format records >/dev/null 2>&1 || rc=$?
check "failed run over earlier outputs: exit 2" test "$rc" -eq 2
check "failed run over earlier outputs: train.h5 unchanged" test "$(md5sum out/train.h5)" = "$before"
check "failed run over earlier outputs: nothing added" test "$(ls out | tr '\n' ' ')" = "train.h5 valid.h5 "

# --utf8-replace turns the same input into a successful run.
"$PREP" --input bad.txt --output-dir fixed --format records --utf8-replace --valid-fraction 0 >/dev/null
check "--utf8-replace succeeds" test "$(sequences fixed/train.h5)" -eq 2

# A split that is empty now removes the file an earlier run left under its name.
cp -r out stale
"$PREP" --input fortunes.txt --output-dir stale --format records --valid-fraction 0 >summary4.txt
check "an empty split removes a stale file" test "$(ls stale)" = "train.h5"
check "the summary says so" grep -q "valid: *empty, not written (removed the stale stale/valid.h5)" summary4.txt

# Windows line ends: "%\r" separates records and "\r" is not text (the vocabulary is that of the LF
# file); --keep-cr keeps it. A UTF-8 byte-order mark at the start is skipped (jsonl, lines).
printf 'ab\r\ncd\r\n%%\r\nef\r\n%%\r\n' > crlf.txt
printf 'ab\ncd\n%%\nef\n%%\n' > lf.txt
"$PREP" --input crlf.txt --output-dir crlf --format records --valid-fraction 0 > crlf.sum
"$PREP" --input lf.txt --output-dir lf --format records --valid-fraction 0 > lf.sum
check "CRLF records: 2 records, as with LF" grep -q "2 read, 0 empty" crlf.sum
check "CRLF: the vocabulary of the LF file" test "$(grep vocabulary: crlf.sum)" = "$(grep vocabulary: lf.sum)"
printf 'ab\r\ncd\r\n' > crlf-lines.txt
"$PREP" --input crlf-lines.txt --output-dir crlfl --valid-fraction 0 > crlfl.sum
check "CRLF lines: no \\r in the vocabulary" grep -q "vocabulary: 8 entries" crlfl.sum
"$PREP" --input crlf-lines.txt --output-dir keep --valid-fraction 0 --keep-cr > keep.sum
check "--keep-cr: \\r is kept, one more vocabulary entry" grep -q "vocabulary: 9 entries" keep.sum
printf '\xef\xbb\xbf{"text": "hello"}\n{"text": "world"}\n' > bom.jsonl
rc=0
"$PREP" --input bom.jsonl --output-dir bom --format jsonl --valid-fraction 0 > bom.sum 2> err.txt || rc=$?
check "a byte-order mark before JSONL is skipped" test "$rc:$(grep -c '2 read' bom.sum)" = "0:1"
printf '\xef\xbb\xbfab\n' > bom.txt
"$PREP" --input bom.txt --output-dir boml --valid-fraction 0 > boml.sum
check "a byte-order mark before lines is not text" grep -q "vocabulary: 6 entries" boml.sum

# A pipe cannot be read twice: refused by name with the char tokenizer; the byte tokenizer reads once.
seq 1 200 | sed 's/^/line /' > l.txt
rc=0
"$PREP" --input <(cat l.txt) --output-dir pipe > /dev/null 2> err.txt || rc=$?
check "a pipe with the char tokenizer -> exit 2 naming the pipe" test "$rc:$(grep -c 'is a pipe or another stream' err.txt)" = "2:1"
rc=0
"$PREP" --input <(cat l.txt) --output-dir pipeb --tokenizer byte > pipeb.sum 2> err.txt || rc=$?
check "a pipe with the byte tokenizer: all 200 records" test "$rc:$(grep -c '200 read' pipeb.sum)" = "0:1"

# An input that is one of the outputs is refused, and stays as it was.
cp crlf/train.h5 before.h5
rc=0
"$PREP" --input crlf/train.h5 --output-dir crlf > /dev/null 2> err.txt || rc=$?
check "an input that is an output -> exit 2" test "$rc:$(grep -c 'output-dir crlf/train.h5: is the input --input crlf/train.h5' err.txt)" = "2:1"
check "and is left untouched" cmp -s before.h5 crlf/train.h5
rc=0
"$PREP" --input l.txt --vocab-from crlf/train.h5 --output-dir crlf > /dev/null 2> err.txt || rc=$?
check "a --vocab-from that is an output -> exit 2" test "$rc:$(grep -c 'is the input --vocab-from crlf/train.h5' err.txt)" = "2:1"
check "and is left untouched" cmp -s before.h5 crlf/train.h5

# A vocabulary that makes most of the training text <unk> is warned about.
"$PREP" --input l.txt --output-dir unk --tokenizer word --min-count 2 --valid-fraction 0 > /dev/null 2> err.txt
check "--min-count making 50% or more <unk>: no warning at exactly half" test ! -s err.txt
awk '{ print "w" NR " x" NR " y" NR }' l.txt > u.txt
"$PREP" --input u.txt --output-dir unk2 --tokenizer word --min-count 2 --valid-fraction 0 > /dev/null 2> err.txt
check "--min-count making most tokens <unk>: warned" grep -q "warning: 100.0% of the training tokens became <unk>" err.txt

# --max-len counts every token: no sequence is longer, <s> and </s> included.
"$PREP" --input fortunes.txt --output-dir maxlen --format records --max-len 20 --valid-fraction 0 > /dev/null
check "--max-len 20: the longest sequence has 20 tokens" grep -q "max 20$" <("${INFO[@]}" maxlen/train.h5 | grep "lengths")
rc=0
"$PREP" --input fortunes.txt --output-dir maxlen2 --max-len 2 > /dev/null 2> err.txt || rc=$?
check "--max-len 2 -> exit 2" test "$rc:$(grep -c 'at least 3' err.txt)" = "2:1"

# Classification data: tsv, jsonl with --label-field, --label-from-file. The labels come from the
# training split, sorted; a label only the other splits have is refused by name.
for i in $(seq 1 60); do printf 'l%d\ttext number %d\n' $((i % 3)) "$i"; done > labelled.tsv
rc=0
"$PREP" --input labelled.tsv --output-dir tsvout --format tsv --tokenizer word --valid-fraction 0.2 > tsv.sum 2> err.txt || rc=$?
check "tsv: task classify, 3 labels" test "$rc:$(grep -c '^labels: *3 (l0, l1, l2)' tsv.sum)" = "0:1"
check "tsv: info counts the labels" grep -q "labels:     3: l0 [0-9]* l1 [0-9]* l2 [0-9]*" <("${INFO[@]}" tsvout/train.h5)
check "tsv: valid.h5 is a classify file too" grep -q "task:       classify" <("${INFO[@]}" tsvout/valid.h5)
printf 'a\tx\nb\ty\na\tz\nb\tw\nc\tv\n' > trainlabels.tsv  # seed 4 puts 'c' alone in the validation split
rc=0
"$PREP" --input trainlabels.tsv --output-dir unseen --format tsv --valid-fraction 0.4 --seed 4 > /dev/null 2> err.txt || rc=$?
check "a label seen only outside the training split -> exit 2 naming it" \
  test "$rc:$(grep -c "label '.' is not among the training split's" err.txt)" = "2:1"
printf '{"text": "up", "stars": 5}\n{"text": "down", "stars": 1}\n' > stars.jsonl
"$PREP" --input stars.jsonl --output-dir jl --format jsonl --label-field stars --valid-fraction 0 > jl.sum
check "jsonl --label-field with integer labels" grep -q "^labels: *2 (1, 5)" jl.sum
mkdir -p classes
printf 'one\ntwo\n' > classes/alpha
printf 'three\n' > classes/beta
"$PREP" --input classes/alpha classes/beta --output-dir lff --label-from-file --valid-fraction 0 > lff.sum
check "--label-from-file: the files' base names are the labels" grep -q "^labels: *2 (alpha, beta)" lff.sum
rc=0
"$PREP" --input labelled.tsv --output-dir x --format tsv --label-from-file > /dev/null 2> err.txt || rc=$?
check "--label-from-file with tsv -> exit 2" test "$rc:$(grep -c 'label-from-file' err.txt)" = "2:1"
# One class is refused: one --label-from-file input, two inputs of one base name (also an error naming
# both files), a tsv with one label.
mkdir -p other && printf 'four\n' > other/alpha
rc=0
"$PREP" --input classes/alpha --output-dir one --label-from-file > /dev/null 2> err.txt || rc=$?
check "one --label-from-file input -> exit 2, one label" test "$rc:$(grep -c "has one label ('alpha'): a classifier needs two" err.txt)" = "2:1"
rc=0
"$PREP" --input classes/alpha other/alpha classes/beta --output-dir same --label-from-file > /dev/null 2> err.txt || rc=$?
check "two inputs of one base name -> exit 2 naming both" \
  test "$rc:$(grep -c "classes/alpha and other/alpha have the same base name 'alpha'" err.txt)" = "2:1"
# Labels: surrounding whitespace and a byte-order mark stripped (no look-alike classes), control
# characters refused with the line, integer labels in numeric order.
printf 'pos \tgood\n\xEF\xBB\xBFpos\tfine\nneg\tbad\n pos\tnice\n' > spaced.tsv
"$PREP" --input spaced.tsv --output-dir spaced --format tsv --tokenizer word --valid-fraction 0 > spaced.sum 2> err.txt
check "labels stripped of whitespace and a BOM: 2 classes" grep -q "^labels: *2 (neg, pos)" spaced.sum
printf '{"text": "a", "y": "x\\ty"}\n{"text": "b", "y": "z"}\n' > ctl.jsonl
rc=0
"$PREP" --input ctl.jsonl --output-dir ctl --format jsonl --label-field y > /dev/null 2> err.txt || rc=$?
check "a label with a tab -> exit 2 naming the line" test "$rc:$(grep -c 'ctl.jsonl: line 1: the label holds control character 0x9' err.txt)" = "2:1"
printf '1\ta\n10\tb\n2\tc\n-1\td\n' > numeric.tsv
"$PREP" --input numeric.tsv --output-dir numeric --format tsv --valid-fraction 0 > numeric.sum 2> err.txt
check "integer labels in numeric order" grep -q "^labels: *4 (-1, 1, 2, 10)" numeric.sum
printf 'x\tone text\nx\tanother\n' > onelabel.tsv
rc=0
"$PREP" --input onelabel.tsv --output-dir onel --format tsv --valid-fraction 0 > /dev/null 2> err.txt || rc=$?
check "a tsv with one label -> exit 2" test "$rc:$(grep -c "has one label ('x')" err.txt)" = "2:1"

# Tagging data: CoNLL, a tag per token; the tokens are the file's own (word vocabulary).
printf -- '-DOCSTART- O\n\nEU B-ORG\nrejects O\nU.S. B-LOC\n\nPeter B-PER\nBlackburn I-PER\n\n' > ner.conll
"$PREP" --input ner.conll --output-dir ner --format conll --valid-fraction 0 > ner.sum
check "conll: task tag, 5 tags" grep -q "^tags: *5 (B-LOC, B-ORG, B-PER, I-PER, O)" ner.sum
check "conll: U.S. is one token (2 sentences, 5 tokens + framing)" grep -q "2 sequences from 2 records, 9 tokens" ner.sum
rc=0
"$PREP" --input ner.conll --output-dir ner2 --format conll --tokenizer char > /dev/null 2> err.txt || rc=$?
check "conll with --tokenizer char -> exit 2" test "$rc:$(grep -c 'conll takes the file' err.txt)" = "2:1"

# A tagged record cut by --max-len (issue 27 #1): every piece's tags are its tokens' own, position by
# position (token wK has tag T(K mod 3)), and the framing positions carry none.
for k in $(seq 0 22); do echo "w$k T$((k % 3))"; done > long.conll
echo >> long.conll
rc=0
"$PREP" --input long.conll --output-dir cut --format conll --valid-fraction 0 --max-len 7 > cut.sum 2> err.txt || rc=$?
PYH=; for p in /usr/bin/python3 python3; do command -v $p > /dev/null && $p -c "import h5py" 2> /dev/null && { PYH=$p; break; }; done
if [ $rc -eq 0 ] && [ -n "$PYH" ]; then
  check "conll cut by --max-len: each piece's tags are its tokens'" "$PYH" - cut/train.h5 <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
vocab = [v.decode() for v in f["vocab"][()]]
tags = [v.decode() for v in f["label_vocab"][()]]
tok, tg, off = f["tokens"][()], f["tags"][()], f["offsets"][()]
pieces, seen = len(off) - 1, 0
assert pieces > 3, pieces
for p in range(pieces):
    t, g = tok[off[p]:off[p + 1]], tg[off[p]:off[p + 1]]
    assert g[0] == -1 and g[-1] == -1, (p, list(g))
    for token, tag in zip(t[1:-1], g[1:-1]):
        k = int(vocab[token][1:])
        assert tags[tag] == f"T{k % 3}", (p, vocab[token], tags[tag])
        seen += 1
assert seen == 23, seen
PY
else
  check "conll cut by --max-len (needs python3 with h5py to read the pieces)" test $rc -eq 0
fi

# The summary on a full device: exit 1 with the reason (the files themselves are written).
rc=0
"$PREP" --input fortunes.txt --output-dir full-out --format records >/dev/full 2>err.txt || rc=$?
check "a summary to a full device -> exit 1 with the reason" \
  test "$rc:$(grep -c 'cannot write to standard output: No space left on device' err.txt)" = "1:1"

# Progress: on a terminal (script(1) gives rnn_prep a pseudo-terminal) each pass ends with its line,
# rewritten in place with a carriage return, bytes read of the total; --quiet prints none; a log (not a
# terminal) of a run this short gets none either.
size=$(stat -c %s fortunes.txt)
kb=$(awk -v b="$size" 'BEGIN { printf "%.1f", b / 1000 }')
script -qec "'$PREP' --input fortunes.txt --output-dir tty --format records > /dev/null" /dev/null > tty.txt 2>&1
check "progress on a terminal: both passes, in place, at 100% of the $size bytes" \
  grep -q "rnn_prep: pass 1 of 2, vocabulary: $kb kB of $kb kB (100%).*rnn_prep: pass 2 of 2, encoding: $kb kB of $kb kB (100%)" \
  <(tr '\r' '\n' < tty.txt | tr -d '\n' ; echo)
check "progress lines begin with a carriage return" grep -q $'\rrnn_prep: pass 2 of 2' tty.txt
script -qec "'$PREP' --input fortunes.txt --output-dir ttyq --format records --quiet > /dev/null" /dev/null > ttyq.txt 2>&1
check "--quiet: no progress on a terminal" test ! -s ttyq.txt
"$PREP" --input fortunes.txt --output-dir log --format records > /dev/null 2> log.txt
check "no progress lines in a log of a short run" test ! -s log.txt

# UTF-8 at every length boundary through the whole chain: rnn_prep's char vocabulary holds U+7F, U+80,
# U+7FF, U+800, U+FFFF, U+10000 and U+10FFFF as themselves, and `rnn_dist sample` echoes a prime of them
# (encoded through that vocabulary, decoded for printing) byte for byte.
edges=$'\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf'
for i in $(seq 30); do echo "a${edges}b"; done > edges.txt
"$PREP" --input edges.txt --output-dir edges --valid-fraction 0 > /dev/null 2> edges.err || true
"$BUILD_DIR/rnn_dist" train --train edges/train.h5 --embed 4 --hidden 4 --layers 1 --batch-size 4 --max-steps 1 --checkpoint-dir edges-ck \
  --device cpu > /dev/null 2>&1 || true
"$BUILD_DIR/rnn_dist" sample --checkpoint edges-ck/step-00000001.h5 --prime "$edges" --length 1 --seed 1 > sample.txt 2> /dev/null || true
check "U+7F ... U+10FFFF through rnn_prep's vocabulary and rnn_dist sample's prime, byte for byte" \
  test "$(head -c "$(printf '%s' "$edges" | wc -c)" sample.txt | od -An -tx1)" = "$(printf '%s' "$edges" | od -An -tx1)"

echo "$passed passed, $failed failed"
test "$failed" -eq 0
