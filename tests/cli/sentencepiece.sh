#!/usr/bin/env bash
# CLI tests of subword vocabularies (rnn_prep --tokenizer sentencepiece, issue 28 #1): a unigram and a
# bpe model trained on the training split of the fortunes; the model travels in the data files and every
# checkpoint; Python's own sentencepiece module encodes the files' text to the same ids; a model reused
# with --sp-model gives the same files; a language model trains, samples text and evaluates from the
# checkpoint alone; a classifier predicts raw text; the ONNX exporter writes NAME.model beside NAME.onnx.
# Bad input: one line, exit 2, no output. $1 = build directory.
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$(dirname "$0")/lib/harness.sh"

cat /usr/share/games/fortunes/{computers,science,people,literature} > corpus.txt 2> /dev/null \
  || { echo "SKIP: the fortunes package is not installed"; exit 77; }
prep() { "$BUILD/rnn_prep" --input corpus.txt --format records --valid-fraction 0.1 -q "$@"; }
prep --output-dir uni --tokenizer sentencepiece --sp-vocab-size 300 > log.uni 2>&1 || bad "rnn_prep unigram: $(tail -1 log.uni)"
"$BUILD/rnn_dist" info uni/train.h5 > info.uni
grep -q "^  tokenizer:  sentencepiece (unigram model, 300 entries, [0-9]* bytes)" info.uni && grep -q "^  vocab size: 300$" info.uni \
  && ok "--sp-vocab-size 300: a unigram model of 300 entries, the reserved four included" || bad "info: $(cat info.uni)"
prep --output-dir bpe --tokenizer sentencepiece --sp-vocab-size 300 --sp-type bpe > log.bpe 2>&1 || bad "rnn_prep bpe: $(tail -1 log.bpe)"
"$BUILD/rnn_dist" info bpe/train.h5 | grep -q "sentencepiece (bpe model, 300 entries" && ok "--sp-type bpe" \
  || bad "bpe: $("$BUILD/rnn_dist" info bpe/train.h5 | grep tokenizer)"

# Records longer than SentencePiece's default limit of 4192 bytes (whole documents) are trained on too:
# 16 records of about 35 kB each.
grep -v '^%$' corpus.txt | awk '{ print } NR % 700 == 0 { print "%" }' > long.txt
"$BUILD/rnn_prep" --input long.txt --format records --valid-fraction 0 -q --output-dir long --tokenizer sentencepiece \
  --sp-vocab-size 200 > log.long 2>&1 && "$BUILD/rnn_dist" info long/train.h5 | grep -q "sentencepiece (unigram model, 200 entries" \
  && ok "records of about 35 kB train a model (SentencePiece would skip them)" || bad "long records: $(tail -1 log.long)"

# Python's sentencepiece, given the file's own model: decoding a sequence and encoding the text again
# gives the file's ids (a model rnn_prep trains keeps <pad>, <s>, </s>, <unk> at 0-3, so its ids are the
# file's), for every sequence of valid.h5 without an <unk> (which decodes to " ⁇ ", not to its text);
# and the file's vocabulary is the model's pieces.
if python_with sentencepiece h5py numpy; then
  "$PY" - uni/valid.h5 > py.out 2>&1 <<'EOF'
import sys
import h5py, numpy as np, sentencepiece as spm
with h5py.File(sys.argv[1], "r") as f:
    sp = spm.SentencePieceProcessor(model_proto=bytes(np.asarray(f["tokenizer_model"][()], dtype=np.uint8)))
    vocab = [v.decode() for v in f["vocab"][()]]
    tokens, offsets = f["tokens"][()], f["offsets"][()]
assert vocab == [sp.id_to_piece(i) for i in range(sp.get_piece_size())], "vocabulary differs from the model's pieces"
bad = unknown = 0
for i in range(len(offsets) - 1):
    ids = [int(t) for t in tokens[offsets[i] + 1:offsets[i + 1] - 1]]  # without <s> and </s>
    if 3 in ids:
        unknown += 1
        continue
    bad += sp.encode(sp.decode(ids)) != ids
checked = len(offsets) - 1 - unknown
print(f"{checked} sequences ({unknown} with <unk> left out), {bad} encoded otherwise")
sys.exit(bad != 0 or checked < 100)
EOF
  [ $? -eq 0 ] && ok "Python's sentencepiece encodes valid.h5's text to its ids: $(cat py.out)" || bad "Python sentencepiece: $(cat py.out)"
  # A model trained elsewhere, with SentencePiece's own default ids (<unk> 0, <s> 1, </s> 2, no <pad>):
  # rnn_prep maps its pieces after the reserved four, and Python's encoding, mapped by piece text, gives
  # the file's ids.
  "$PY" -c "import sentencepiece as spm; spm.SentencePieceTrainer.train(input='corpus.txt', model_prefix='ext', vocab_size=250, minloglevel=2)" \
    > ext.log 2>&1 || bad "Python's trainer: $(tail -1 ext.log)"
  prep --output-dir ext --tokenizer sentencepiece --sp-model ext.model > log.ext 2>&1 || bad "--sp-model ext: $(tail -1 log.ext)"
  "$PY" - ext/train.h5 ext.model > py2.out 2>&1 <<'EOF'
import sys
import h5py, sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[2])
with h5py.File(sys.argv[1], "r") as f:
    vocab = [v.decode() for v in f["vocab"][()]]
    tokens, offsets = f["tokens"][()], f["offsets"][()]
assert vocab[:4] == ["<pad>", "<s>", "</s>", "<unk>"] and len(vocab) == 250 + 1, f"vocabulary {vocab[:6]}, {len(vocab)}"
index = {p: i for i, p in enumerate(vocab)}
bad = unknown = 0
for i in range(len(offsets) - 1):
    ids = [int(t) for t in tokens[offsets[i] + 1:offsets[i + 1] - 1]]
    if 3 in ids:
        unknown += 1
        continue
    text = "".join(vocab[t] for t in ids).replace("\u2581", " ").strip()
    bad += [index[p] for p in sp.encode(text, out_type=str)] != ids
print(f"{len(offsets) - 1 - unknown} sequences, {bad} encoded otherwise")
sys.exit(bad != 0)
EOF
  [ $? -eq 0 ] && ok "a model with SentencePiece's default ids, mapped by piece: $(cat py2.out)" || bad "external model: $(cat py2.out)"
else
  echo "skipped: the Python comparison (no python3-sentencepiece)"
fi

# The model reused: --sp-model with the .model file the data holds gives the same tokens.
h5dump -d /tokenizer_model -b LE -o model.bin uni/train.h5 > /dev/null 2>&1 && cp model.bin m.model
prep --output-dir again --tokenizer sentencepiece --sp-model m.model > log.again 2>&1 || bad "--sp-model: $(tail -1 log.again)"
h5diff uni/train.h5 again/train.h5 /tokens > /dev/null && h5diff uni/train.h5 again/train.h5 /vocab > /dev/null \
  && ok "--sp-model with the data's own model gives the same tokens and vocabulary" || bad "--sp-model: the files differ"

# Training from the file; the checkpoint alone samples text and evaluates.
"$BUILD/rnn_dist" train --train uni/train.h5 --valid uni/valid.h5 --embed 16 --hidden 32 --layers 1 --batch-size 16 \
  --max-steps 30 --log-every 10 --device cpu --checkpoint-dir ck > log.train 2>&1 || bad "train: $(tail -1 log.train)"
"$BUILD/rnn_dist" info ck/step-00000030.h5 | grep -q "tokenizer:  sentencepiece (unigram model, 300 entries" \
  && ok "the checkpoint carries the model" || bad "checkpoint info: $("$BUILD/rnn_dist" info ck/step-00000030.h5 | grep tokenizer)"
"$BUILD/rnn_dist" sample --checkpoint ck/step-00000030.h5 --prime "The computer" --length 40 --ignore-eos --seed 2 \
  > sample.out 2> sample.err
[ $? -eq 0 ] && grep -q "^The computer" sample.out && ! grep -q "▁" sample.out && [ "$(wc -c < sample.out)" -gt 30 ] \
  && ok "sample decodes pieces to text: $(head -c 80 sample.out | tr '\n' ' ')" || bad "sample: $(cat sample.out sample.err)"
"$BUILD/rnn_dist" eval --checkpoint ck/step-00000030.h5 --data uni/valid.h5 --json > ev.out 2> ev.err \
  && grep -q '"loss":' ev.out && ok "eval from the checkpoint" || bad "eval: $(cat ev.err)"

# A classifier on subword units: predict encodes raw text with the checkpoint's model.
awk 'NR % 3 == 0 && length($0) > 20 { print (NR % 2 ? "odd" : "even") "\t" $0 }' corpus.txt > cls.tsv
"$BUILD/rnn_prep" --input cls.tsv --format tsv --output-dir cls --tokenizer sentencepiece --sp-vocab-size 200 \
  --valid-fraction 0.1 -q > log.cls 2>&1 || bad "rnn_prep tsv: $(tail -1 log.cls)"
"$BUILD/rnn_dist" train --train cls/train.h5 --embed 8 --hidden 16 --layers 1 --batch-size 16 --max-steps 5 --device cpu \
  --checkpoint-dir cck > log.ctrain 2>&1 || bad "classifier: $(tail -1 log.ctrain)"
printf 'A computer program does what you tell it to do.\nNever trust a computer you cannot lift.\n' > raw.txt
"$BUILD/rnn_dist" predict --checkpoint cck/step-00000005.h5 --input raw.txt --format lines --output pred.jsonl > /dev/null 2> pred.err
[ $? -eq 0 ] && [ "$(grep -c '"label":' pred.jsonl)" -eq 2 ] && ok "predict encodes raw text with the model" \
  || bad "predict: $(cat pred.err) $(head -2 pred.jsonl)"

# The ONNX exporter writes the model beside the graph.
if python_with onnx h5py numpy; then
  "$PY" "$REPO/python/rnn_dist_onnx.py" --checkpoint ck/step-00000030.h5 --onnx lm.onnx > x.out 2>&1 \
    && cmp -s lm.model m.model && ok "the ONNX export writes lm.model beside lm.onnx: $(tail -1 x.out)" \
    || bad "ONNX export's model: $(cat x.out)"
fi

# Bad input: one line, exit 2, no output directory content.
refused() {  # refused WHAT EXPECTED ARGS...
  local what=$1 want=$2
  shift 2
  rm -rf badout
  "$BUILD/rnn_prep" --input corpus.txt --output-dir badout -q "$@" > out 2> err
  local rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q -- "$want" err && [ -z "$(ls badout 2> /dev/null)" ] \
    && ok "$what: $(cat err)" || bad "$what: rc $rc: $(cat err)"
}
printf 'not a model' > junk.model
refused "a file that is not a model" "--sp-model junk.model: not a SentencePiece model" --tokenizer sentencepiece --sp-model junk.model
refused "a vocabulary the text cannot give" "--sp-vocab-size 900000: the training split cannot give that many pieces" \
  --tokenizer sentencepiece --sp-vocab-size 900000
refused "--sp-vocab-size without sentencepiece" "--sp-vocab-size: applies to --tokenizer sentencepiece" --sp-vocab-size 100
refused "neither a model nor a size" "give --sp-model FILE (an existing model) or --sp-vocab-size N" --tokenizer sentencepiece
refused "both a model and a size" "--sp-model and --sp-vocab-size: an existing model or a new one, not both" \
  --tokenizer sentencepiece --sp-model m.model --sp-vocab-size 100
refused "a bad type" "--sp-type word: unigram or bpe" --tokenizer sentencepiece --sp-vocab-size 100 --sp-type word
refused "a training option with a given model" "--sp-type: trains a model; --sp-model m.model is used as it is" \
  --tokenizer sentencepiece --sp-model m.model --sp-type bpe
refused "a count-based vocabulary option" "--max-vocab: the sentencepiece vocabulary is its model's" \
  --tokenizer sentencepiece --sp-vocab-size 100 --max-vocab 50
refused "too small a vocabulary" "--sp-vocab-size 4: must exceed the 4 reserved tokens" --tokenizer sentencepiece --sp-vocab-size 4
finish
