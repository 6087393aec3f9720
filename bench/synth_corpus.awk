# Deterministic synthetic text for the GPU benchmark (bench/gpu_throughput.sh), which runs where no corpus
# is installed: `lines` lines (one record each) of `minw`..`maxw` words, the count uniform per line. Words
# have Zipf-like frequencies: word rank k in 0..types-1 with probability ~ 1/(k+1) (k = floor((types+1)^u)
# - 1, u uniform), spelled as k in base 26 with letters (a..z, ba, bb, ...), so frequent words are short.
# With cover=1 every word first appears once, maxw to a line, so that the vocabulary has all `types`.
#   awk -v lines=N -v minw=A -v maxw=B [-v types=20000] [-v seed=1] [-v cover=1] -f synth_corpus.awk > corpus.txt
BEGIN {
  if (types == "") types = 20000
  if (seed == "") seed = 1
  srand(seed)
  for (k = 0; k < types; k++) {
    w = ""; x = k
    do { w = substr("abcdefghijklmnopqrstuvwxyz", x % 26 + 1, 1) w; x = int(x / 26) } while (x > 0)
    word[k] = w
  }
  for (k = 0; cover && k < types; k += maxw) {
    s = word[k]
    for (j = k + 1; j < k + maxw && j < types; j++) s = s " " word[j]
    print s
  }
  logn = log(types + 1)
  for (i = 0; i < lines; i++) {
    n = minw + int(rand() * (maxw - minw + 1))
    s = word[int(exp(rand() * logn)) - 1]
    for (j = 1; j < n; j++) s = s " " word[int(exp(rand() * logn)) - 1]
    print s
  }
}
