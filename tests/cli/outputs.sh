#!/usr/bin/env bash
# Every file a command writes follows one rule (util/atomic_file.h, python/rnn_dist_output.py): an output
# that is one of the command's inputs is refused with one line before anything is read, and the input is
# left as it was; "-", a device and a FIFO are written through (not renamed over); a link is followed and
# its target replaced, the link kept. Checked for predict --output, eval --log-probs, rnn_prep's outputs,
# rnn_dist_onnx --onnx and rnn_dist_plot --output (each Python one where its modules exist, saying so
# otherwise). With eval --json (or --log-probs -) standard output is the result alone. $1 = build directory.
source "$(dirname "$0")/lib/harness.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
R=$BUILD/rnn_dist

awk 'BEGIN { srand(5); for (i = 0; i < 200; i++) print (i % 2 ? "pos\tgood nice fine day" : "neg\tbad poor sad day") }' > cls.tsv
"$BUILD/rnn_prep" --format tsv --tokenizer word --input cls.tsv --output-dir d --valid-fraction 0.1 > /dev/null || bad "rnn_prep"
"$R" train --train d/train.h5 --embed 8 --hidden 8 --max-steps 4 --checkpoint-dir ck --metrics m.jsonl > /dev/null || bad "train"
C=ck/step-00000004.h5
printf 'good day\nbad day\n' > in.txt
cp $C keep.h5; cp d/valid.h5 keep_valid.h5; cp in.txt keep_in.txt
ln -s $C ck_link.h5

# refused CASE COMMAND...: exit 2, one error line, that names "is the input", and no input changed.
refused() {
  local name=$1; shift
  "$@" > out 2> err
  local rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q "is the input" err && cmp -s keep.h5 $C \
    && cmp -s keep_valid.h5 d/valid.h5 && cmp -s keep_in.txt in.txt && [ -L ck_link.h5 ] \
    && ok "$name: refused, inputs untouched: $(cat err)" || bad "$name: exit $rc: $(cat err)"
}
refused "eval --log-probs CHECKPOINT" "$R" eval --checkpoint $C --data d/valid.h5 --log-probs $C
refused "eval --log-probs DATA" "$R" eval --checkpoint $C --data d/valid.h5 --log-probs d/valid.h5
refused "eval --log-probs ./DATA (another spelling)" "$R" eval --checkpoint $C --data d/valid.h5 --log-probs ./d/../d/valid.h5
refused "eval --log-probs a link to the checkpoint" "$R" eval --checkpoint $C --data d/valid.h5 --log-probs ck_link.h5
refused "predict --output CHECKPOINT" "$R" predict --checkpoint $C --input in.txt --output $C
refused "predict --output INPUT" "$R" predict --checkpoint $C --input in.txt --output in.txt
refused "rnn_prep --vocab-from an output" "$BUILD/rnn_prep" --format tsv --input cls.tsv --vocab-from d/valid.h5 --output-dir d

# Streams: written through, still what they were.
"$R" predict --checkpoint $C --input in.txt --output - > stdout.jsonl 2> err \
  && [ "$(grep -c '"label"' stdout.jsonl)" -eq 2 ] && ok "predict --output -: the predictions on standard output" \
  || bad "predict --output -: $(cat err) $(head -2 stdout.jsonl)"
"$R" predict --checkpoint $C --input in.txt --output - 2> err | cat > piped.jsonl
[ "$(grep -c '"label"' piped.jsonl)" -eq 2 ] && ok "predict --output - into a pipe" || bad "predict into a pipe: $(cat err)"
echo old > appended.jsonl
"$R" predict --checkpoint $C --input in.txt --output /dev/stdout >> appended.jsonl 2> err
[ "$(head -1 appended.jsonl)" = old ] && [ "$(grep -c '"label"' appended.jsonl)" -eq 2 ] \
  && ok "predict --output /dev/stdout >> FILE: appended, nothing replaced" || bad "appended: $(cat err; cat appended.jsonl)"
mknod null c 1 3
"$R" predict --checkpoint $C --input in.txt --output null > /dev/null 2> err && [ -c null ] \
  && ok "predict --output a character device: written through, still a device" || bad "device: $(cat err); $(ls -l null)"
mkfifo fifo
cat fifo > fifo.got & reader=$!
"$R" eval --checkpoint $C --data d/valid.h5 --log-probs fifo > /dev/null 2> err; rc=$?
wait $reader
[ $rc -eq 0 ] && [ -p fifo ] && [ "$(wc -l < fifo.got)" -gt 0 ] \
  && ok "eval --log-probs a FIFO: its reader got $(wc -l < fifo.got) lines, still a FIFO" || bad "fifo: rc $rc, $(cat err)"
mkdir pd && mkfifo pd/train.h5
"$BUILD/rnn_prep" --format tsv --input cls.tsv --output-dir pd > /dev/null 2> err; rc=$?
[ $rc -eq 2 ] && grep -q "pd/train.h5: not a regular file" err && [ -p pd/train.h5 ] \
  && ok "rnn_prep: an HDF5 output that is a FIFO is refused, one line" || bad "rnn_prep to a FIFO: rc $rc: $(cat err)"

# Links: followed, the target replaced, the link kept.
echo old > target.jsonl; ln -s target.jsonl link.jsonl
"$R" predict --checkpoint $C --input in.txt --output link.jsonl > /dev/null 2> err && [ -L link.jsonl ] \
  && [ "$(grep -c '"label"' target.jsonl)" -eq 2 ] && ok "predict --output a link: the target replaced, the link kept" \
  || bad "link: $(cat err); $(ls -l link.jsonl target.jsonl)"
mkdir sub; ln -s sub/new.jsonl dangling.jsonl
"$R" predict --checkpoint $C --input in.txt --output dangling.jsonl > /dev/null 2> err && [ -L dangling.jsonl ] \
  && [ -f sub/new.jsonl ] && ok "a dangling link: its target created" || bad "dangling link: $(cat err)"
ls sub target.jsonl link.jsonl | grep -q tmp && bad "a temporary file left behind" || ok "no temporary left behind"

# Standard output is the result alone: with --json exactly one JSON document (the --device auto notice,
# the report and the per-class table go to stderr), with --log-probs - only the log-probabilities.
printf 'one two three\nfour five six seven\n%.0s' $(seq 50) > lm.txt
"$BUILD/rnn_prep" --input lm.txt --output-dir lm --valid-fraction 0.1 > /dev/null || bad "rnn_prep lm"
"$R" train --train lm/train.h5 --embed 8 --hidden 8 --max-steps 2 --checkpoint-dir lmck > /dev/null || bad "train lm"
for c in "$C d/valid.h5 classifier" "lmck/step-00000002.h5 lm/valid.h5 lm"; do
  set -- $c
  "$R" eval --checkpoint $1 --data $2 --json > ev.json 2> ev.err
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); assert isinstance(d, dict)" ev.json 2> py.err \
    && grep -q "loss" ev.err && ok "eval --json ($3): standard output is one JSON document, the report on stderr" \
    || bad "eval --json ($3): $(head -3 ev.json) $(cat py.err | tail -1)"
done
"$R" eval --checkpoint $C --data d/valid.h5 --log-probs - > lp.jsonl 2> lp.err
python3 -c "import json, sys; [json.loads(l) for l in open(sys.argv[1])]" lp.jsonl 2> py.err \
  && [ "$(wc -l < lp.jsonl)" -eq "$(grep -c . lp.jsonl)" ] && ok "eval --log-probs -: only JSON lines on standard output" \
  || bad "eval --log-probs -: $(head -2 lp.jsonl) $(tail -1 py.err)"
"$R" eval --checkpoint $C --data d/valid.h5 --log-probs - --json > /dev/null 2> err; rc=$?
[ $rc -eq 2 ] && grep -q "both would be standard output" err && ok "--json with --log-probs -: refused" || bad "json+stdout: $rc $(cat err)"

if python_with onnx h5py numpy > /dev/null; then
  refused "rnn_dist_onnx --onnx CHECKPOINT" "$PY" "$REPO/python/rnn_dist_onnx.py" --checkpoint $C --onnx $C
  "$PY" "$REPO/python/rnn_dist_onnx.py" --checkpoint $C --onnx - > m.onnx 2> err \
    && "$PY" -c "import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]))" m.onnx \
    && ok "rnn_dist_onnx --onnx -: a valid model on standard output" || bad "onnx to stdout: $(cat err)"
  "$PY" "$REPO/python/rnn_dist_onnx.py" --checkpoint $C --onnx - 2> err | cat > piped.onnx
  cmp -s m.onnx piped.onnx && ok "rnn_dist_onnx --onnx - into a pipe" || bad "onnx into a pipe: $(cat err)"
  ln -s real.onnx l.onnx
  "$PY" "$REPO/python/rnn_dist_onnx.py" --checkpoint $C --onnx l.onnx > /dev/null 2> err && [ -L l.onnx ] && [ -s real.onnx ] \
    && ok "rnn_dist_onnx --onnx a link: the target written" || bad "onnx link: $(cat err)"
else
  echo "skip: rnn_dist_onnx (no python3 with onnx, h5py and numpy)"
fi
if python_with matplotlib > /dev/null; then
  cp m.jsonl keep_m.jsonl
  "$PY" "$REPO/scripts/plot_metrics.py" --metrics m.jsonl --output m.jsonl > out 2> err; rc=$?
  [ $rc -eq 2 ] && grep -q "is the input --metrics 1 m.jsonl" err && cmp -s keep_m.jsonl m.jsonl \
    && ok "rnn_dist_plot --output METRICS: refused, untouched" || bad "plot over its input: rc $rc $(cat err)"
  "$PY" "$REPO/scripts/plot_metrics.py" --metrics m.jsonl --output - > p.png 2> err && [ "$(head -c 4 p.png | tail -c 3)" = PNG ] \
    && ok "rnn_dist_plot --output -: a PNG on standard output" || bad "plot to stdout: $(cat err)"
else
  echo "skip: rnn_dist_plot (no python3 with matplotlib)"
fi
finish
