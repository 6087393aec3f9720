# What the export tests share (sourced after tests/cli/lib/harness.sh): labelled data to train classifiers
# and taggers on.

# make_labelled_data: cls/ (tsv, word tokens, 3 classes) and tag/ (CoNLL, BIO tags), each with a test split.
make_labelled_data() {
  awk 'BEGIN { srand(5); split("good great fine nice|bad awful poor sad|red green blue grey", fam, "|")
    split("pos neg col", lab, " "); n = split("the a it was very so and but", filler, " ")
    for (i = 0; i < 300; i++) { c = 1 + int(rand() * 3); split(fam[c], w, " "); k = 1 + int(rand() * 9); line = ""
      for (j = 0; j < k; j++) line = line (j ? " " : "") (rand() < 0.5 ? w[1 + int(rand() * 4)] : filler[1 + int(rand() * n)])
      print lab[c] "\t" line } }' > cls.tsv
  "$BUILD/rnn_prep" --format tsv --tokenizer word --input cls.tsv --output-dir cls --valid-fraction 0 --test-fraction 0.2 \
    > /dev/null || bad "rnn_prep --format tsv"
  awk 'BEGIN { srand(6); split("ann bob cyd|oslo rome kiev", ent, "|"); split("PER LOC", typ, " ")
    n = split("met in at and the visited", filler, " ")
    for (i = 0; i < 200; i++) { k = 1 + int(rand() * 8)
      for (j = 0; j < k; j++) {
        if (rand() < 0.3) { c = 1 + int(rand() * 2); split(ent[c], w, " "); print w[1 + int(rand() * 3)] " B-" typ[c]
          if (rand() < 0.4) print "jr I-" typ[c] }
        else print filler[1 + int(rand() * n)] " O" }
      print "" } }' > tag.conll
  "$BUILD/rnn_prep" --format conll --input tag.conll --output-dir tag --valid-fraction 0 --test-fraction 0.2 \
    > /dev/null || bad "rnn_prep --format conll"
}
